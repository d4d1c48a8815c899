"""lif_cases.py — the checks shared by the CPU and CUDA tests of spikefuse.torch.LIF: every option combination
and several shapes against the float64 reference tests/ref/neuron_reference.py (on PYTHONPATH: see python/README.md),
in float32 and, on the CPU, in float64 (the library's float64 calls, to 1e-12 of the reference)."""
import itertools

import torch

from neuron_reference import SURROGATES, lif_node
from spikefuse.torch import LIF, functional

RESETS = (0.0, -0.3, None)  # hard reset to 0, hard reset to a nonzero v_reset, soft reset
# the real-valued neuron parameters the library holds as they are, in float32 (sf_lif_params)
FLOAT_PARAMS = ("tau", "alpha", "rho", "tau_adapt", "beta")
# (70, 2, 9): past 32 steps the CUDA backward starts its recompute at the forward's checkpoints
SHAPES = ((1, 67), (5, 3, 17), (4, 2, 3, 5), (3, 2, 3, 4, 5), (16, 1000), (70, 2, 9))


def make_input(shape, decay_input, seed, device, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    mean, std = (0.6, 1.0) if decay_input else (0.3, 0.5)  # firing rates of roughly 10-30% either way
    x = torch.randn(shape, generator=g, dtype=dtype) * std + mean
    ds = torch.randn(shape, generator=g, dtype=dtype)
    return x.to(device), ds.to(device)


def f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def library_floats(kw):
    """kw (SpikingJelly's parameters) as the library computes with them, for a reference that takes the same ones:
    its sf_lif_params are float32, tau, alpha, ... as they are and the threshold and θ_grad shifted by v_reset
    (_lib.lif_params: v_threshold - v_reset in float32; v_reset itself is the exact shift). In float32 this is
    within rounding of kw; in float64 the library computes from these values in double."""
    out = {k: f32(v) if k in FLOAT_PARAMS and v is not None else v for k, v in kw.items()}
    shift = kw.get("v_reset", 0.0) or 0.0
    for k in ("v_threshold", "grad_threshold"):
        if out.get(k, 1.0 if k == "v_threshold" else None) is not None:
            out[k] = f32(kw.get(k, 1.0) - shift) + shift
    return out


class Float64:
    """Mixed in before a checks class: its checks on float64 CPU tensors (the library's float64 calls), against the
    float64 reference to 1e-12."""
    device = "cpu"
    dtype = torch.float64
    tol = 1e-12
    net_tol = 1e-12


def run_spikefuse(x, ds, **kw):
    x = x.clone().requires_grad_(True)
    s = LIF(keep_state=False, **kw)(x)
    s.backward(ds)
    return s.detach(), x.grad


def run_reference(x, ds, **kw):
    x64 = x.detach().cpu().double().requires_grad_(True)
    s = lif_node(x64, **library_floats(kw))
    s.backward(ds.cpu().double())
    return s.detach(), x64.grad


class LifChecks:
    """Mixed into a unittest.TestCase that sets `device` (and, for float64, is Float64's)."""
    device = "cpu"
    dtype = torch.float32
    tol = 2e-5  # relative error of dx
    net_tol = 1e-4  # of a Linear layer's weight gradient through the LIF

    def input(self, shape, decay_input, seed):
        return make_input(shape, decay_input, seed, self.device, self.dtype)

    def assert_matches_reference(self, shape, seed, **kw):
        x, ds = self.input(shape, kw.get("decay_input", True), seed)
        s, dx = run_spikefuse(x, ds, **kw)
        s_ref, dx_ref = run_reference(x, ds, **kw)
        self.assertEqual(s.device, x.device)
        self.assertEqual(s.dtype, self.dtype)
        self.assertEqual(dx.dtype, self.dtype)
        self.assertEqual(s.shape, x.shape)
        self.assertEqual(dx.shape, x.shape)
        mismatched = int((s.cpu().double() != s_ref).sum())
        self.assertEqual(mismatched, 0, f"{mismatched} spikes differ from the reference for {shape} {kw}")
        self.assertGreater(float(s_ref.sum()), 0, f"no spikes at all: the check would be weak ({kw})")
        err = (dx.cpu().double() - dx_ref).abs().max().item()
        scale = max(1.0, dx_ref.abs().max().item())
        self.assertLess(err, self.tol * scale, f"dx max error {err:.3g} (scale {scale:.3g}) for {shape} {kw}")

    def test_every_option_combination(self):
        combos = itertools.product(SURROGATES, RESETS, (False, True), (True, False), (None, 0.6))
        for i, (surrogate, v_reset, detach_reset, decay_input, grad_threshold) in enumerate(combos):
            kw = dict(surrogate=surrogate, v_reset=v_reset, detach_reset=detach_reset, decay_input=decay_input,
                      grad_threshold=grad_threshold)
            with self.subTest(**kw):
                self.assert_matches_reference((6, 4, 33), seed=i, **kw)

    def test_shapes(self):
        for i, shape in enumerate(SHAPES):
            with self.subTest(shape=shape):
                self.assert_matches_reference(shape, seed=100 + i)
                self.assert_matches_reference(shape, seed=200 + i, v_reset=None, surrogate="atan")

    def test_other_parameters(self):
        cases = [dict(tau=3.5), dict(tau=1.5, decay_input=False), dict(v_threshold=0.7, v_reset=0.2),
                 dict(v_threshold=1.3, v_reset=None, alpha=2.5), dict(surrogate="atan", alpha=7.0),
                 dict(surrogate="rect", alpha=0.5, grad_threshold=0.9), dict(surrogate="fast_sigmoid", alpha=3.0)]
        for i, kw in enumerate(cases):
            with self.subTest(**kw):
                self.assert_matches_reference((7, 5, 9), seed=300 + i, **kw)

    def test_functional_equals_module(self):
        """functional.lif and LIF(keep_state=False) start every call afresh; LIF keeps its state until reset()."""
        x, _ = self.input((5, 6, 7), True, 7)
        kw = dict(tau=3.0, v_reset=None, surrogate="atan", detach_reset=True)
        m = LIF(keep_state=False, **kw)
        first = m(x)
        self.assertTrue(torch.equal(first, m(x)), "a second call must start from the same state")
        self.assertTrue(torch.equal(first, functional.lif(x, **kw)))
        stateful = LIF(**kw)
        self.assertTrue(torch.equal(first, stateful(x)))
        stateful.reset()
        self.assertTrue(torch.equal(first, stateful(x)))

    def test_non_contiguous_input(self):
        x, ds = self.input((9, 8, 5), True, 8)
        xt = x.transpose(1, 2)  # [T, 5, 8], not contiguous
        self.assertFalse(xt.is_contiguous())
        s, dx = run_spikefuse(xt, ds.transpose(1, 2))
        s_ref, dx_ref = run_spikefuse(xt.contiguous(), ds.transpose(1, 2).contiguous())
        self.assertTrue(torch.equal(s, s_ref))
        self.assertTrue(torch.equal(dx, dx_ref))

    def test_broadcast_gradient_and_no_grad(self):
        # s.sum().backward() hands the backward an expanded (stride-0) gradient.
        x, _ = self.input((4, 3, 11), True, 9)
        xg = x.clone().requires_grad_(True)
        LIF()(xg).sum().backward()
        _, dx_ref = run_spikefuse(x, torch.ones_like(x))
        self.assertTrue(torch.equal(xg.grad, dx_ref))
        with torch.no_grad():
            self.assertTrue(torch.equal(LIF()(x), LIF()(xg.detach())))

    def test_output_is_an_ordinary_tensor(self):
        """The spikes are a fresh tensor with the LIF's backward node, so in-place use after the layer works."""
        x, ds = self.input((5, 2, 19), True, 10)
        _, dx_ref = run_spikefuse(x, ds * 2)
        xg = x.clone().requires_grad_(True)
        s = LIF()(xg)
        self.assertFalse(s._is_view())
        self.assertRegex(type(s.grad_fn).__name__, "LIFFunction|spikefuse_lif_forward")
        s.mul_(2.0)
        s.backward(ds)
        self.assertTrue(torch.equal(xg.grad, dx_ref))

    def test_empty_trailing_shape(self):
        x = torch.zeros(3, 0, 4, device=self.device, dtype=self.dtype, requires_grad=True)
        s = LIF()(x)
        s.sum().backward()
        self.assertEqual(s.shape, x.shape)
        self.assertEqual(x.grad.shape, x.shape)

    def test_in_a_network(self):
        """Gradients reach the weights of a Linear layer in front of the LIF exactly as through the reference."""
        torch.manual_seed(11)
        fc = torch.nn.Linear(12, 10).to(self.device, self.dtype)
        x = torch.rand(6, 4, 12, device=self.device, dtype=self.dtype) * 2
        LIF(detach_reset=True)(fc(x)).sum().backward()
        w_grad = fc.weight.grad.detach().cpu().double()
        fc64 = torch.nn.Linear(12, 10).double()
        fc64.load_state_dict({k: v.detach().cpu().double() for k, v in fc.state_dict().items()})
        s_ref = lif_node(fc64(x.cpu().double()), detach_reset=True)
        s_ref.sum().backward()
        self.assertLess((w_grad - fc64.weight.grad).abs().max().item(),
                        self.net_tol * max(1.0, w_grad.abs().max().item()))
