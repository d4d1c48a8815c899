"""test_neurons_torch.py — spikefuse.torch.PLIF, IF and ALIF against the float64 reference (tests/ref/
neuron_reference.py) on the CPU and (if present) CUDA: spikes exact, dx and the PLIF's dw close, over surrogates,
resets, detach_reset, decay_input, θ_grad, T = 1 and odd shapes, in float32 and on the CPU in float64 (to 1e-12); and
against SpikingJelly's ParametricLIFNode and IFNode where spikingjelly is importable."""
import itertools
import math
import unittest

import torch

import spikefuse
from lif_cases import Float64, library_floats, make_input
from neuron_reference import SURROGATES, alif, lif, plif_coeffs
from spikefuse.torch import ALIF, IF, PLIF

RESETS = (0.0, -0.3, None)


def run(module, x, ds):
    """Spikes, dx and (a PLIF's) dw of one forward and backward."""
    x = x.clone().requires_grad_(True)
    s = module(x)
    s.backward(ds)
    w = getattr(module, "w", None)
    return s.detach(), x.grad, None if w is None else w.grad.detach().clone()


def reference(model, x, ds, w=None, channels=False, **kw):
    """The float64 reference of a module's options (SpikingJelly's semantics: the leak goes to v_reset)."""
    x64 = x.detach().cpu().double().requires_grad_(True)
    kw = library_floats(dict(dict(rho=0.95, beta=1.8), **kw))
    v_reset = kw.get("v_reset", 0.0)
    soft = v_reset is None
    common = dict(v_threshold=kw.get("v_threshold", 1.0), v_reset=0.0 if soft else v_reset, soft_reset=soft,
                  detach_reset=kw.get("detach_reset", False), surrogate=kw.get("surrogate", "sigmoid"),
                  alpha=kw.get("alpha"), grad_threshold=kw.get("grad_threshold"))
    w64 = None
    if model == "plif":
        w64 = w.detach().cpu().double().requires_grad_(True)
        wv = w64.view(-1, *([1] * (x.dim() - 3))) if channels else w64
        a, c = plif_coeffs(wv, kw.get("decay_input", True))
        s = lif(x64, a, c, v_rest=common["v_reset"], **common)[0]
    elif model == "if":
        s = lif(x64, 1.0, 1.0, v_rest=common["v_reset"], **common)[0]
    else:
        tau = kw.get("tau", 2.0)
        a = 1 - 1 / tau
        rho = kw["rho"] if kw.get("tau_adapt") is None else math.exp(-1 / kw["tau_adapt"])
        s = alif(x64, a, 1 - a if kw.get("decay_input", True) else 1.0, beta=kw["beta"], rho=rho, **common)[0]
    s.backward(ds.cpu().double())
    return s.detach(), x64.grad, None if w64 is None else w64.grad


class NeuronChecks:
    """Mixed into a unittest.TestCase that sets `device` (and, for float64, is Float64's)."""
    device = "cpu"
    dtype = torch.float32
    tol = 2e-5  # relative error of dx and dw
    state_tol = 1e-5  # of a sequence in two calls against one

    def check(self, model, module, shape, seed, channels=False, **kw):
        x, ds = make_input(shape, kw.get("decay_input", True) and model != "if", seed, self.device, self.dtype)
        if model == "if":
            x = x * 0.6
        module = module.to(self.device, self.dtype)
        s, dx, dw = run(module, x, ds)
        s_ref, dx_ref, dw_ref = reference(model, x, ds, getattr(module, "w", None), channels, **kw)
        what = f"{model} {shape} {kw}"
        self.assertEqual(int((s.cpu().double() != s_ref).sum()), 0, f"spikes differ: {what}")
        self.assertGreater(float(s_ref.sum()), 0, f"no spikes: a weak check ({what})")
        err = (dx.cpu().double() - dx_ref).abs().max().item()
        self.assertEqual((s.dtype, dx.dtype), (self.dtype, self.dtype))
        self.assertLess(err, self.tol * max(1.0, dx_ref.abs().max().item()), f"dx error {err:.3g}: {what}")
        if dw_ref is not None:
            self.assertEqual(dw.shape, module.w.shape)
            err = (dw.cpu().double() - dw_ref).abs().max().item()
            self.assertEqual(dw.dtype, self.dtype)
            self.assertLess(err, self.tol * max(1.0, dw_ref.abs().max().item()), f"dw error {err:.3g}: {what}")

    def test_plif(self):
        combos = itertools.product(SURROGATES, RESETS, (False, True), (True, False))
        for i, (surrogate, v_reset, detach_reset, decay_input) in enumerate(combos):
            kw = dict(surrogate=surrogate, v_reset=v_reset, detach_reset=detach_reset, decay_input=decay_input)
            with self.subTest(**kw):
                self.check("plif", PLIF(init_tau=2.5, **kw), (6, 4, 33), 400 + i, **kw)

    def test_plif_per_channel_and_shapes(self):
        for i, (shape, channels) in enumerate((((5, 3, 4, 6), 4), ((4, 2, 3, 5, 7), 3), ((1, 2, 5), 5),
                                                ((16, 2, 1000), None), ((1, 67), None))):
            with self.subTest(shape=shape, channels=channels):
                m = PLIF(channels=channels, grad_threshold=0.4)
                if channels:
                    with torch.no_grad():  # channels apart, as after training
                        m.w.add_(torch.linspace(-0.5, 0.5, channels))
                self.check("plif", m, shape, 500 + i, channels=bool(channels), grad_threshold=0.4)

    def test_if(self):
        combos = itertools.product(SURROGATES, RESETS, (False, True), (None, 0.2))
        for i, (surrogate, v_reset, detach_reset, grad_threshold) in enumerate(combos):
            kw = dict(surrogate=surrogate, v_reset=v_reset, detach_reset=detach_reset, grad_threshold=grad_threshold)
            with self.subTest(**kw):
                self.check("if", IF(**kw), (7, 3, 29), 600 + i, **kw)
        self.check("if", IF(v_threshold=0.2), (1, 5, 3), 650, v_threshold=0.2)

    def test_alif(self):
        combos = itertools.product(SURROGATES, (0.0, None), (False, True), (True, False))
        for i, (surrogate, v_reset, detach_reset, decay_input) in enumerate(combos):
            kw = dict(surrogate=surrogate, v_reset=v_reset, detach_reset=detach_reset, decay_input=decay_input,
                      rho=0.9, beta=0.6)
            with self.subTest(**kw):
                self.check("alif", ALIF(**kw), (8, 3, 31), 700 + i, **kw)
        for i, kw in enumerate((dict(tau_adapt=15.0), dict(tau=3.0, beta=0.0), dict(grad_threshold=0.5))):
            with self.subTest(**kw):
                self.check("alif", ALIF(**kw), (9, 2, 41), 750 + i, **kw)

    def test_plif_learns_in_an_optimizer(self):
        """w is a parameter: in parameters() and the state dict (as "w"), and a step moves it."""
        torch.manual_seed(3)
        net = torch.nn.Sequential(torch.nn.Linear(6, 8), PLIF()).to(self.device, self.dtype)
        self.assertIn("1.w", net.state_dict())
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        before = net[1].w.item()
        net(torch.rand(5, 4, 6, device=self.device, dtype=self.dtype) * 2).sum().backward()
        opt.step()
        self.assertNotEqual(net[1].w.item(), before)

    def test_plif_state_across_calls(self):
        """SpikingJelly's state semantics: a sequence in two calls gives the whole call's spikes, dx and dw."""
        x, ds = make_input((9, 3, 2, 5), True, 900, self.device, self.dtype)
        m = PLIF(channels=2).to(self.device, self.dtype)
        s, dx, dw = run(m, x, ds)
        m.reset()
        m.w.grad = None
        xc = x.clone().requires_grad_(True)
        s2 = torch.cat([m(xc[:4]), m(xc[4:])])
        s2.backward(ds)
        self.assertTrue(torch.equal(s, s2.detach()))
        self.assertLess((dx - xc.grad).abs().max().item(), self.state_tol * max(1.0, dx.abs().max().item()))
        self.assertLess((dw - m.w.grad).abs().max().item(), self.state_tol * max(1.0, dw.abs().max().item()))

    def test_16_bit_inputs(self):
        """float16 / bfloat16 in, spikes out in the same dtype, as the fp32 run of the same (rounded) values."""
        if self.dtype is not torch.float32:
            self.skipTest("a float32 class's check")
        x, ds = make_input((6, 4, 3, 7), True, 950, self.device)
        for dtype in (torch.float16, torch.bfloat16):
            for module in (PLIF(channels=3), IF(), ALIF(rho=0.8, beta=0.5)):
                with self.subTest(dtype=dtype, module=type(module).__name__):
                    module = module.to(self.device)
                    xh = x.to(dtype).requires_grad_(True)
                    s = module(xh)
                    s.backward(ds.to(dtype))
                    self.assertEqual(s.dtype, dtype)
                    self.assertEqual(xh.grad.dtype, dtype)
                    module.reset()
                    s32, dx32, _ = run(module, x.to(dtype).float(), ds.to(dtype).float())
                    self.assertTrue(torch.equal(s.float(), s32))
                    self.assertLess((xh.grad.float() - dx32).abs().max().item(),
                                    1e-2 * max(1.0, dx32.abs().max().item()))

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            PLIF(init_tau=1.0)
        with self.assertRaises(ValueError):
            ALIF(rho=1.0)
        with self.assertRaises(ValueError):
            ALIF(beta=-0.5)
        with self.assertRaises(ValueError):
            PLIF(channels=3).to(self.device)(torch.zeros(2, 4, 5, device=self.device))  # 5 channels, not 3


class TestNeuronsCPU(NeuronChecks, unittest.TestCase):
    device = "cpu"


class TestNeuronsCPUFloat64(Float64, NeuronChecks, unittest.TestCase):
    state_tol = 1e-12


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
@unittest.skipUnless(spikefuse.cuda_device_count() > 0, "libspikefuse built without CUDA")
class TestNeuronsCUDA(NeuronChecks, unittest.TestCase):
    device = "cuda"


try:  # missing, or a version that does not run with this torch
    from spikingjelly.activation_based import neuron as sj_neuron, surrogate as sj_surrogate
    sj_neuron.IFNode(step_mode="m")(torch.zeros(2, 3))
except Exception as e:
    sj_neuron = None
    sj_reason = f"spikingjelly not usable here: {e!r}"[:200]
else:
    sj_reason = ""


@unittest.skipIf(sj_neuron is None, sj_reason)
class TestAgainstSpikingJelly(unittest.TestCase):
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and spikefuse.cuda_device_count() > 0 else [])

    def compare(self, node, ours, x, ds, max_flips=2, tol=1e-4):
        xs = x.clone().requires_grad_(True)
        node.reset()
        s_sj = node(xs)
        s_sj.backward(ds)
        s, dx, dw = run(ours, x, ds)
        # SpikingJelly computes in float32 in another order: allow a rare flip, compare gradients where none is
        flips = int((s != s_sj.detach()).sum())
        self.assertLessEqual(flips, max_flips)
        if flips == 0:
            err = (dx - xs.grad).abs().max().item()
            self.assertLess(err, tol * max(1.0, xs.grad.abs().max().item()))
            if dw is not None:
                self.assertLess(abs(dw.item() - node.w.grad.item()), tol * max(1.0, abs(node.w.grad.item())))

    def test_parametric_lif_and_if_nodes(self):
        for i, (device, v_reset, detach_reset) in enumerate(itertools.product(self.devices, (0.0, None),
                                                                              (False, True))):
            with self.subTest(device=device, v_reset=v_reset, detach_reset=detach_reset):
                x, ds = make_input((8, 3, 65), True, 800 + i, device)
                node = sj_neuron.ParametricLIFNode(init_tau=3.0, v_reset=v_reset, detach_reset=detach_reset,
                                                   surrogate_function=sj_surrogate.ATan(), step_mode="m").to(device)
                self.compare(node, PLIF.from_spikingjelly(node).to(device), x, ds)
                node = sj_neuron.IFNode(v_reset=v_reset, detach_reset=detach_reset,
                                        surrogate_function=sj_surrogate.ATan(), step_mode="m").to(device)
                self.compare(node, IF.from_spikingjelly(node).to(device), x * 0.5, ds)

    def test_float64_on_the_cpu(self):
        """In float64 (SpikingJelly's torch backend, spikefuse's float64 calls) the two agree to 1e-12, no spike
        apart: parameters that float32 holds exactly (as init_tau 3, whose w SpikingJelly keeps as float32)."""
        for i, (v_reset, detach_reset) in enumerate(itertools.product((0.0, None), (False, True))):
            with self.subTest(v_reset=v_reset, detach_reset=detach_reset):
                x, ds = make_input((8, 3, 65), True, 850 + i, "cpu", torch.float64)
                node = sj_neuron.ParametricLIFNode(init_tau=3.0, v_reset=v_reset, detach_reset=detach_reset,
                                                   surrogate_function=sj_surrogate.ATan(), step_mode="m").double()
                self.compare(node, PLIF.from_spikingjelly(node).double(), x, ds, 0, 1e-12)
                node = sj_neuron.IFNode(v_reset=v_reset, detach_reset=detach_reset,
                                        surrogate_function=sj_surrogate.ATan(), step_mode="m").double()
                self.compare(node, IF.from_spikingjelly(node).double(), x * 0.5, ds, 0, 1e-12)


if __name__ == "__main__":
    unittest.main()
