"""test_bnlif.py — spikefuse.torch.BNLIF (fused batch norm → LIF) against torch's BatchNorm2d followed by the float64
reference LIF: spikes, gradients of the input and the affine parameters, running statistics, train/eval, in float32
and on the CPU in float64 (to 1e-12); the memory it keeps for the backward against the unfused pairs (measured with
autograd's saved-tensor hooks); 16-bit inputs."""
import unittest

import torch

import spikefuse
from lif_cases import library_floats
from neuron_reference import lif_node
from spikefuse.torch import BNLIF, LIF, functional

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and spikefuse.cuda_device_count() > 0 else [])
LIF_KW = dict(tau=2.0, detach_reset=True, surrogate="atan")
F64_KW = dict(tau=1.5, v_threshold=0.5, v_reset=-0.3, surrogate="sigmoid")  # float64 runs both: a hard reset with its gradient


def reference(x, ds, bn, training, want_dy=False, **kw):
    """Spikes, dx, dγ, dβ of torch BatchNorm2d (a float64 copy of bn) over [T·B, C, ...] then the reference LIF (and,
    want_dy, the gradient of the batch norm's output)."""
    bn64 = torch.nn.BatchNorm2d(bn.num_features, eps=bn.eps, momentum=bn.momentum).double()
    bn64.load_state_dict({k: v.detach().cpu().double() if v.is_floating_point() else v.cpu()
                          for k, v in bn.state_dict().items()})
    bn64.train(training)
    x64 = x.detach().cpu().double().requires_grad_(True)
    T = x.shape[0]
    y = torch.nn.functional.batch_norm(x64.flatten(0, 1), bn64.running_mean, bn64.running_var, bn64.weight,
                                       bn64.bias, training, bn64.momentum, bn64.eps).unflatten(0, (T, -1))
    y.retain_grad()
    s = lif_node(y, **kw)
    s.backward(ds.cpu().double())
    if want_dy:
        return s.detach(), x64.grad, bn64.weight.grad, bn64.bias.grad, bn64, y.grad
    return s.detach(), x64.grad, bn64.weight.grad, bn64.bias.grad, bn64


def assert_within_dy_rounding(test, x, ds, dx, dx32, dw, dw32):
    """16-bit dx and dγ of a fresh BNLIF(3) against fp32's: dx within one unit in its last place plus, as the CUDA
    backward keeps dy = ∂L/∂y in the input's type between its passes, dy's rounding carried through
    dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)) and dγ = Σ dy·x̂ (dy from the float64 reference)."""
    eps = torch.finfo(dx.dtype).eps
    bn = torch.nn.BatchNorm2d(3).to(x.device)
    _, _, _, _, _, dy = reference(x, ds, bn, True, want_dy=True, **LIF_KW)
    dims = [d for d in range(dy.dim()) if d != 2]
    x64 = x.double().cpu()
    xhat = (x64 - x64.mean(dims, keepdim=True)) / (x64.var(dims, unbiased=False, keepdim=True) + bn.eps).sqrt()
    gain = 1.0 / (x64.var(dims, unbiased=False, keepdim=True) + bn.eps).sqrt()  # γ = 1
    mean_dy = dy.abs().mean(dims, keepdim=True)
    bound = eps * dx32.abs().cpu().double() + eps * gain * (dy.abs() + mean_dy * (1.0 + xhat.abs()))
    bad = int(((dx.cpu().double() - dx32.cpu().double()).abs() > bound).sum())
    test.assertEqual(bad, 0, f"{bad} of dx ({dx.dtype}) are further from fp32's than its and dy's rounding")
    dw_bound = eps * (dy.abs() * xhat.abs()).sum(dims) + 1e-5 * max(1.0, dw32.abs().max().item())
    test.assertTrue(bool(((dw.cpu().double() - dw32.cpu().double()).abs() <= dw_bound).all()),
                    f"dγ {dw.tolist()} against {dw32.tolist()}")


def saved_bytes(fn, x):
    """Bytes of the distinct storages autograd keeps for the backward of fn(x)."""
    storages = {}

    def pack(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        storages[st.data_ptr()] = st.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    return sum(storages.values())


class TestBNLIF(unittest.TestCase):
    def assert_close(self, got, ref, what, tol=1e-4):
        err = (got.detach().cpu().double() - ref).abs().max().item()
        self.assertLess(err, tol * max(1.0, ref.abs().max().item()), f"{what}: max error {err:.3g}")

    def test_against_batchnorm_and_reference_lif(self):
        # (device, dtype, LIF arguments, tolerance of the gradients, of the running statistics, spikes that may flip)
        runs = [(device, torch.float32, LIF_KW, 1e-4, 1e-6, 1) for device in DEVICES]
        runs += [("cpu", torch.float64, kw, 1e-12, 1e-12, 0) for kw in (LIF_KW, F64_KW)]
        for device, dtype, kw, tol, stats_tol, max_flips in runs:
            for shape in ((4, 3, 5, 6, 6), (2, 4, 3, 7), (6, 2, 8, 3, 3), (1, 5, 2, 4, 4)):
                with self.subTest(device=device, dtype=dtype, shape=shape, **kw):
                    g = torch.Generator().manual_seed(sum(shape))
                    C = shape[2]
                    x = (torch.randn(shape, generator=g, dtype=dtype) * 2 + 0.3).to(device)
                    ds = torch.randn(shape, generator=g, dtype=dtype).to(device)
                    m = BNLIF(C, keep_state=False, **kw).to(device, dtype)
                    with torch.no_grad():
                        m.weight.copy_(torch.rand(C, generator=g, dtype=dtype) + 0.5)
                        m.bias.copy_(torch.randn(C, generator=g, dtype=dtype) * 0.3)
                    s_ref, dx_ref, dw_ref, db_ref, bn64 = reference(x, ds, m, True, **library_floats(kw))
                    xg = x.clone().requires_grad_(True)
                    s = m(xg)
                    s.backward(ds)
                    self.assertEqual((s.dtype, xg.grad.dtype, m.weight.grad.dtype), (dtype, dtype, dtype))
                    flips = int((s.detach().cpu().double() != s_ref).sum())
                    self.assertLessEqual(flips, max_flips, "spikes differ beyond a rounding flip at the threshold")
                    self.assertGreater(float(s_ref.sum()), 0)
                    if flips == 0:
                        self.assert_close(xg.grad, dx_ref, "dx", tol)
                        self.assert_close(m.weight.grad, dw_ref, "dgamma", tol)
                        self.assert_close(m.bias.grad, db_ref, "dbeta", tol)
                    self.assert_close(m.running_mean, bn64.running_mean, "running_mean", stats_tol)
                    self.assert_close(m.running_var, bn64.running_var, "running_var", stats_tol)
                    self.assertEqual(int(m.num_batches_tracked), 1)

    def test_eval_uses_running_statistics(self):
        runs = [(device, torch.float32, 1e-4, 1) for device in DEVICES] + [("cpu", torch.float64, 1e-12, 0)]
        for device, dtype, tol, max_flips in runs:
            torch.manual_seed(4)
            m = BNLIF(3, keep_state=False, **LIF_KW).to(device, dtype)
            for _ in range(3):
                m(torch.randn(4, 2, 3, 5, 5, device=device, dtype=dtype) * 3 + 1)
            m.eval()
            x = torch.randn(4, 2, 3, 5, 5, device=device, dtype=dtype) * 3 + 1
            ds = torch.randn_like(x)
            s_ref, dx_ref, dw_ref, _, _ = reference(x, ds, m, False, **LIF_KW)
            with torch.no_grad():
                fused = m(x)  # the fused kernel with the running statistics
            self.assertLessEqual(int((fused.cpu().double() != s_ref).sum()), max_flips)
            xg = x.clone().requires_grad_(True)
            s = m(xg)  # with gradients: batch norm as a fixed affine map, then the LIF
            s.backward(ds)
            if int((s.detach().cpu().double() != s_ref).sum()) == 0:
                self.assert_close(xg.grad, dx_ref, "eval dx", tol)
                self.assert_close(m.weight.grad, dw_ref, "eval dgamma", tol)
            self.assertEqual(int(m.num_batches_tracked), 3, "evaluation must not update the statistics")

    def test_functional_and_momentum_none(self):
        torch.manual_seed(6)
        x = torch.randn(3, 2, 4, 6) + 0.5
        rm, rv = torch.zeros(4), torch.ones(4)
        s = functional.bn_lif(x, running_mean=rm, running_var=rv, momentum=0.5, **LIF_KW)
        m = BNLIF(4, momentum=0.5, keep_state=False, **LIF_KW)
        self.assertTrue(torch.equal(s, m(x)))
        self.assertTrue(torch.equal(rm, m.running_mean))
        cumulative = BNLIF(4, momentum=None, keep_state=False)
        for k in range(3):
            cumulative(x + k)
        self.assertLess((cumulative.running_mean - (x + 1).mean((0, 1, 3))).abs().max().item(), 1e-5)

    def test_batch_statistics(self):
        """On the CPU the batch statistics come from the library (sf_bn_statistics); they equal float64 ones within
        float32 rounding, also where a channel's mean is far from 0, and running statistics follow torch's rule."""
        g = torch.Generator().manual_seed(3)
        x = torch.randn(3, 4, 5, 6, 7, generator=g) * torch.tensor([1.0, 0.1, 3.0, 1.0, 2.0]).view(1, 1, 5, 1, 1)
        x += torch.tensor([0.0, 1e3, -2.0, 50.0, 0.5]).view(1, 1, 5, 1, 1)
        var64, mean64 = torch.var_mean(x.double(), dim=(0, 1, 3, 4), unbiased=False)
        rm, rv = torch.zeros(5), torch.ones(5)
        mean, var = functional.batch_norm_statistics(x, rm, rv, True, 0.1)
        self.assertLess(((mean.double() - mean64).abs() / mean64.abs().clamp_min(1)).max().item(), 1e-6)
        self.assertLess(((var.double() - var64).abs() / var64).max().item(), 1e-5)
        n = x.numel() // 5
        self.assertTrue(torch.allclose(rm, 0.1 * mean) and torch.allclose(rv, 0.9 + 0.1 * var * n / (n - 1)))

    def test_memory_kept_for_the_backward(self):
        """BNLIF keeps x (and [C] vectors); the unfused pairs keep at least x and the normalised y, SpikingJelly's
        torch LIF (as the reference LIF, step by step) much more."""
        x = (torch.randn(8, 4, 16, 8, 8) + 0.3).requires_grad_(True)
        fused = saved_bytes(BNLIF(16, keep_state=False), x)
        bn = torch.nn.BatchNorm2d(16)
        lif = LIF(keep_state=False)
        pair = saved_bytes(lambda t: lif(bn(t.flatten(0, 1)).unflatten(0, (8, -1))), x)
        stepwise = saved_bytes(lambda t: lif_node(bn(t.flatten(0, 1)).unflatten(0, (8, -1))), x)
        x_bytes = x.numel() * 4
        self.assertLess(fused, x_bytes * 1.01)
        self.assertLessEqual(fused / pair, 0.51, f"fused {fused} B, BatchNorm2d + LIF {pair} B")
        self.assertLessEqual(fused / stepwise, 0.5, f"fused {fused} B, BatchNorm2d + step-by-step LIF {stepwise} B")

    def test_16_bit_inputs(self):
        for device in DEVICES:
            for dtype in (torch.bfloat16, torch.float16):
                with self.subTest(device=device, dtype=dtype):
                    torch.manual_seed(7)
                    x = (torch.randn(4, 2, 3, 4, 4, device=device) * 2).to(dtype)
                    ds = torch.randn(x.shape, device=device).to(dtype)
                    results = []
                    for inp, grad in ((x, ds), (x.float(), ds.float())):
                        m = BNLIF(3, keep_state=False, **LIF_KW).to(device)
                        xg = inp.clone().requires_grad_(True)
                        s = m(xg)
                        s.backward(grad)
                        results.append((s, xg.grad, m.weight.grad))
                    (s, dx, dw), (s32, dx32, dw32) = results
                    self.assertEqual((s.dtype, dx.dtype, dw.dtype), (dtype, dtype, torch.float32))
                    self.assertTrue(torch.equal(s.float(), s32))
                    assert_within_dy_rounding(self, x.float(), ds.float(), dx, dx32, dw, dw32)

    def test_bad_input(self):
        m = BNLIF(3)
        with self.assertRaisesRegex(ValueError, r"shape \(2, 2, 4, 5\), but the layer takes \[T, B, C, \.\.\.\] with "
                                    r"its C = 3 channels in dimension 2, which holds 4$"):
            m(torch.zeros(2, 2, 4, 5))
        # a [B, C, H, W] batch with T forgotten: the message says where the steps go
        with self.assertRaisesRegex(ValueError, r"shape \(8, 3, 5, 5\).*\[T, B, C, \.\.\.\].*dimension 1 holds 3: a "
                                    r"\[B, C, \.\.\.\] batch without its time dimension\? .*x\.unsqueeze\(0\)"):
            m(torch.zeros(8, 3, 5, 5))
        with self.assertRaisesRegex(ValueError, r"shape \(2, 4, 5\), but the layer takes \[B, C, \.\.\.\] \(one step\) "
                                    r"with its C = 3 channels in dimension 1, which holds 4$"):
            BNLIF(3, step_mode="s")(torch.zeros(2, 4, 5))
        with self.assertRaisesRegex(ValueError, "at least 3 dimensions"):
            m(torch.zeros(2, 3))
        with self.assertRaisesRegex(TypeError, "bfloat16 or \\(on the CPU\\) float64, got torch.int32"):
            m(torch.zeros(2, 2, 3, 4, dtype=torch.int32))
        m(torch.randn(2, 2, 3, 4))
        with self.assertRaisesRegex(ValueError, "another batch size"):
            m(torch.randn(2, 5, 3, 4))
        with self.assertRaisesRegex(ValueError, "num_features"):
            BNLIF(0)


if __name__ == "__main__":
    unittest.main()
