"""test_state.py — SpikingJelly's state semantics of spikefuse.torch.LIF and BNLIF: the membrane carried from call to
call until reset(), sequences cut into chunks (forward and gradients through the chunks), single-step mode, v and
v_seq, against the float64 reference tests/ref/neuron_reference.py on the CPU (float32 and float64) and (if present)
CUDA."""
import itertools
import unittest

import torch

import spikefuse
from lif_cases import Float64, library_floats, make_input
from neuron_reference import lif, lif_node, plif_coeffs
from spikefuse.torch import BNLIF, IF, LIF, PLIF, _kernels, functional
from spikefuse.torch.plif import plif_with_state

OPTIONS = [dict(), dict(v_reset=None, surrogate="atan"), dict(v_reset=-0.3, detach_reset=True),
           dict(decay_input=False, tau=3.0, surrogate="rect", grad_threshold=0.5)]
SPLITS = [(8,), (3, 5), (1, 1, 6), (2, 2, 2, 2), (7, 1)]


def reset_net(net):
    """SpikingJelly's functional.reset_net where it is importable; else what it does: reset() every module."""
    try:
        from spikingjelly.activation_based import functional
    except ImportError:
        for m in net.modules():
            if hasattr(m, "reset"):
                m.reset()
    else:
        functional.reset_net(net)


def reference(x, ds, **kw):
    """Spikes, dx and the membrane after reset at every step of the whole sequence, in float64."""
    x64 = x.detach().cpu().double().requires_grad_(True)
    kw = library_floats(kw)
    soft = kw.get("v_reset", 0.0) is None
    v_reset = 0.0 if soft else kw.get("v_reset", 0.0)
    tau = kw.get("tau", 2.0)
    a, c = 1 - 1 / tau, (1 / tau if kw.get("decay_input", True) else 1.0)
    args = dict(v_threshold=kw.get("v_threshold", 1.0), v_reset=v_reset, soft_reset=soft, detach_reset=kw.get("detach_reset", False),
                surrogate=kw.get("surrogate", "sigmoid"), grad_threshold=kw.get("grad_threshold"), v_rest=v_reset)
    s, h = lif(x64, a, c, **args)
    s.backward(ds.cpu().double())
    v = h - s.detach() if soft else h * (1 - s.detach()) + v_reset * s.detach()
    return s.detach(), x64.grad, v.detach()


def run_chunks(module, x, ds, split):
    """Spikes and dx of one backward over the chunks of x fed in order to a stateful module."""
    xg = x.clone().requires_grad_(True)
    module.reset()
    outs, t = [], 0
    for n in split:
        outs.append(module(xg[t:t + n]))
        t += n
    s = torch.cat(outs)
    s.backward(ds)
    return s.detach(), xg.grad


class StateChecks:
    """Mixed into a unittest.TestCase that sets `device` (and, for float64, is Float64's)."""
    device = "cpu"
    dtype = torch.float32
    tol = 2e-5

    def input(self, shape, decay_input, seed):
        return make_input(shape, decay_input, seed, self.device, self.dtype)

    def assert_close(self, got, ref, what):
        err = (got.detach().cpu().double() - ref).abs().max().item()
        self.assertLess(err, self.tol * max(1.0, ref.abs().max().item()), f"{what}: max error {err:.3g}")

    def test_chunks_equal_the_whole_sequence(self):
        """Chunks fed one after another give the whole sequence's spikes and gradients (the latter through the
        state passed between chunks), bitwise equal to one call and close to the float64 reference."""
        for i, (kw, split) in enumerate(itertools.product(OPTIONS, SPLITS)):
            with self.subTest(split=split, **kw):
                x, ds = self.input((sum(split), 3, 21), kw.get("decay_input", True), 40 + i)
                s, dx = run_chunks(LIF(**kw), x, ds, split)
                s_one, dx_one = run_chunks(LIF(**kw), x, ds, (x.shape[0],))
                s_ref, dx_ref, _ = reference(x, ds, **kw)
                self.assertTrue(torch.equal(s, s_one))
                self.assertTrue(torch.equal(dx, dx_one), "gradients through the chunks differ from one call's")
                self.assertEqual(int((s.cpu().double() != s_ref).sum()), 0)
                self.assert_close(dx, dx_ref, "dx")

    def test_single_step_mode(self):
        kw = dict(v_reset=None, surrogate="atan")
        x, ds = self.input((6, 4, 9), True, 60)
        node = LIF(step_mode="s", **kw)
        s, dx = run_chunks(node, x, ds, (1,) * 6)  # run_chunks feeds [1, ...] slices: squeeze them for "s"
        xs = x.clone().requires_grad_(True)
        node.reset()
        steps = torch.stack([node(xs[t]) for t in range(6)])
        self.assertEqual(node(xs[0]).shape, xs[0].shape)
        steps.backward(ds)
        s_ref, dx_ref, v_ref = reference(x, ds, **kw)
        self.assertEqual(int((steps.detach().cpu().double() != s_ref).sum()), 0)
        self.assert_close(xs.grad, dx_ref, "dx")

    def test_v_and_v_seq(self):
        for kw in OPTIONS:
            with self.subTest(**kw):
                x, ds = self.input((7, 2, 13), kw.get("decay_input", True), 70)
                node = LIF(store_v_seq=True, **kw)
                v0 = 0.0 if kw.get("v_reset", 0.0) is None else kw.get("v_reset", 0.0)
                self.assertEqual(node.v, v0)
                s, _ = run_chunks(node, x, ds, (3, 4))
                _, _, v_ref = reference(x, ds, **kw)
                self.assertEqual(tuple(node.v_seq.shape), (4, 2, 13))  # the last call's steps
                self.assert_close(node.v_seq, v_ref[3:], "v_seq")
                self.assert_close(node.v, v_ref[-1], "v")
                node.reset()
                self.assertEqual(node.v, v0)
                self.assertIsNone(node.v_seq)

    def test_reset_net_and_state_across_calls(self):
        x = torch.full((5, 3, 8), 1.5, device=self.device, dtype=self.dtype)  # spikes every other step: the start state shows
        net = torch.nn.Sequential(LIF(), torch.nn.Identity(), LIF(tau=3.0, decay_input=False)).to(self.device)
        first = net(x)
        second = net(x)  # continues from the first call's state
        self.assertFalse(torch.equal(first, second), "the state did not carry over")
        reset_net(net)
        self.assertTrue(torch.equal(first, net(x)))

    def test_other_batch_size_is_an_error(self):
        node = LIF()
        x, _ = self.input((4, 3, 5), True, 90)
        node(x)
        with self.assertRaisesRegex(ValueError, r"shape \(3, 5\).*\(2, 5\).*reset\(\)"):
            node(x[:, :2])
        node.reset()
        self.assertEqual(node(x[:, :2]).shape, (4, 2, 5))

    def test_detach_cuts_the_gradient_into_earlier_calls(self):
        node = LIF()
        x, _ = self.input((6, 2, 5), True, 91)
        xg = x.clone().requires_grad_(True)
        node(xg[:3]).sum()
        node.detach()
        node(xg[3:]).sum().backward()
        self.assertEqual(float(xg.grad[:3].abs().sum()), 0.0)
        self.assertGreater(float(xg.grad[3:].abs().sum()), 0.0)

    def test_v_setter(self):
        node = LIF(v_reset=-0.5)
        x, _ = self.input((4, 6), True, 92)
        node(x)
        v = node.v.clone()
        s_next = node(x)
        node.v = v
        self.assertTrue(torch.equal(node(x), s_next))
        node.v = -0.5
        self.assertIsNone(node._u)
        with self.assertRaisesRegex(ValueError, "v_reset"):
            node.v = 0.25

    def test_bnlif_chunks(self):
        """BNLIF keeps the LIF state the same way (statistics per call, as SpikingJelly's BatchNorm per call)."""
        torch.manual_seed(3)
        x = torch.randn(6, 2, 3, 4, 4, device=self.device, dtype=self.dtype) + 0.5
        node = BNLIF(3).to(self.device, self.dtype)
        node.eval()  # running statistics: the normalisation does not depend on the chunking
        ds = torch.randn_like(x)
        s, dx = run_chunks(node, x, ds, (2, 4))
        s_one, dx_one = run_chunks(node, x, ds, (6,))
        self.assertTrue(torch.equal(s, s_one))
        self.assert_close(dx, dx_one.cpu().double(), "dx")


class TestStateCPU(StateChecks, unittest.TestCase):
    device = "cpu"


class TestStateCPUFloat64(Float64, StateChecks, unittest.TestCase):
    pass

    def test_reference_helper_is_lif_node(self):
        x, ds = make_input((5, 7), True, 93, "cpu")
        self.assertTrue(torch.equal(reference(x, ds)[0], lif_node(x.double())))


class TestGradcheckFloat64(unittest.TestCase):
    """torch.autograd.gradcheck of the float64 CPU calls where finite differences can check them: the membrane state
    after the last step (v_out, what the next call continues from) as a function of the input x, the incoming state
    v and a PLIF's w or a BNLIF's weight and bias (through its batch statistics, which gradcheck's perturbations of
    x move too). With detach_reset the spikes reach v_out only through the reset, which the backward then takes as
    a constant, and with every h at least MARGIN from the threshold (asserted) no spike changes under gradcheck's
    perturbations of 1e-6: v_out is then a smooth function of its inputs, and the analytical Jacobian (the
    backward's state path, dv_in → dv_out over the steps, dx = c·dh, dw, dgamma, dbeta) must be its exact one. The
    spikes themselves are steps, whose surrogate gradient no finite difference checks (the reference comparisons
    above do)."""
    MARGIN = 1e-4  # far more than gradcheck's perturbations (1e-6) move h by
    RESETS = (0.0, -0.3, None)

    def gradcheck(self, f, inputs):
        inputs = tuple(t.detach().requires_grad_(True) for t in inputs)
        self.assertTrue(torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-9, rtol=1e-7))

    def assert_margin(self, y, p, v, a=None, c=None):
        """Every h of the neuron p (its kernel parameters, the state v in its shifted potential) on input y is at
        least MARGIN from the threshold, and some neurons spike."""
        if a is None:
            a = 1.0 if p.model == 2 else 1 - 1 / p.tau  # enum sf_neuron_model: the IF is 2
            c = 1.0 if p.model == 2 or not p.decay_input else 1 - a
        s, h = lif(y, a, c, p.v_threshold, p.v_reset, bool(p.soft_reset), v_init=v)
        self.assertGreater((h - p.v_threshold).abs().min().item(), self.MARGIN)
        self.assertGreater(s.sum().item(), 0)

    def inputs(self, shape, seed):
        x, _ = make_input(shape, True, seed, "cpu", torch.float64)
        v = torch.rand(shape[1:], generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 0.5
        return x, v

    def test_lif_and_if(self):
        for i, (module, v_reset) in enumerate(itertools.product((LIF, IF), self.RESETS)):
            with self.subTest(module=module.__name__, v_reset=v_reset):
                pvec = module(v_reset=v_reset, detach_reset=True).lif_params()
                x, v = self.inputs((6, 2, 5), 120 + i)
                x = x * (0.6 if module is IF else 1.0)
                self.assert_margin(x, _kernels.lif_params_of(pvec), v)
                self.gradcheck(lambda x, v: functional.lif_with_state(x, pvec, v, True)[1], (x, v))

    def test_plif(self):
        for i, (channels, v_reset) in enumerate(itertools.product((None, 2), self.RESETS)):
            with self.subTest(channels=channels, v_reset=v_reset):
                m = PLIF(init_tau=2.5, v_reset=v_reset, detach_reset=True, channels=channels).double()
                w = m.w.detach() + (torch.tensor([-0.2, 0.3], dtype=torch.float64) if channels else 0.0)
                x, v = self.inputs((6, 2, 2, 3), 130 + i)
                a, c = plif_coeffs(w.view(-1, 1) if channels else w, True)
                self.assert_margin(x, _kernels.lif_params_of(m.lif_params()), v, a, c)
                self.gradcheck(lambda x, v, w: plif_with_state(x, w, m.lif_params(), v, True)[1], (x, v, w))

    def test_bnlif(self):
        for i, v_reset in enumerate(self.RESETS):
            with self.subTest(v_reset=v_reset):
                m = BNLIF(3, v_reset=v_reset, detach_reset=True).double()
                x, v = self.inputs((4, 2, 3, 2, 2), 140 + i)
                gamma = torch.tensor([1.2, 0.8, 1.0], dtype=torch.float64)
                beta = torch.tensor([0.6, 0.5, 0.7], dtype=torch.float64)
                pvec = m.lif_params()

                def v_out(x, v, gamma, beta):
                    mean, var = functional.batch_norm_statistics(x, None, None, True, 0.0)
                    return functional.bn_lif_with_state(x, mean, var, gamma, beta, m.eps, pvec, v, True)[1]
                var, mean = torch.var_mean(x, dim=(0, 1, 3, 4), unbiased=False)
                shape = (1, 1, 3, 1, 1)
                y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + m.eps) * gamma.view(shape) + beta.view(shape)
                self.assert_margin(y, _kernels.lif_params_of(pvec), v)
                self.gradcheck(v_out, (x, v, gamma, beta))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
@unittest.skipUnless(spikefuse.cuda_device_count() > 0, "libspikefuse built without CUDA")
class TestStateCUDA(StateChecks, unittest.TestCase):
    device = "cuda"


if __name__ == "__main__":
    unittest.main()
