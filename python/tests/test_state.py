"""test_state.py — SpikingJelly's state semantics of spikefuse.torch.LIF and BNLIF: the membrane carried from call to
call until reset(), sequences cut into chunks (forward and gradients through the chunks), single-step mode, v and
v_seq, against the float64 reference tests/ref/neuron_reference.py on the CPU and (if present) CUDA."""
import itertools
import unittest

import torch

import spikefuse
from lif_cases import make_input
from neuron_reference import lif, lif_node
from spikefuse.torch import BNLIF, LIF

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
    soft = kw.get("v_reset", 0.0) is None
    v_reset = 0.0 if soft else kw.get("v_reset", 0.0)
    tau = kw.get("tau", 2.0)
    a, c = 1 - 1 / tau, (1 / tau if kw.get("decay_input", True) else 1.0)
    args = dict(v_threshold=1.0, v_reset=v_reset, soft_reset=soft, detach_reset=kw.get("detach_reset", False),
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
    """Mixed into a unittest.TestCase that sets `device`."""
    device = "cpu"

    def assert_close(self, got, ref, what, tol=2e-5):
        err = (got.detach().cpu().double() - ref).abs().max().item()
        self.assertLess(err, tol * max(1.0, ref.abs().max().item()), f"{what}: max error {err:.3g}")

    def test_chunks_equal_the_whole_sequence(self):
        """Chunks fed one after another give the whole sequence's spikes and gradients (the latter through the
        state passed between chunks), bitwise equal to one call and close to the float64 reference."""
        for i, (kw, split) in enumerate(itertools.product(OPTIONS, SPLITS)):
            with self.subTest(split=split, **kw):
                x, ds = make_input((sum(split), 3, 21), kw.get("decay_input", True), 40 + i, self.device)
                s, dx = run_chunks(LIF(**kw), x, ds, split)
                s_one, dx_one = run_chunks(LIF(**kw), x, ds, (x.shape[0],))
                s_ref, dx_ref, _ = reference(x, ds, **kw)
                self.assertTrue(torch.equal(s, s_one))
                self.assertTrue(torch.equal(dx, dx_one), "gradients through the chunks differ from one call's")
                self.assertEqual(int((s.cpu().double() != s_ref).sum()), 0)
                self.assert_close(dx, dx_ref, "dx")

    def test_single_step_mode(self):
        kw = dict(v_reset=None, surrogate="atan")
        x, ds = make_input((6, 4, 9), True, 60, self.device)
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
                x, ds = make_input((7, 2, 13), kw.get("decay_input", True), 70, self.device)
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
        x = torch.full((5, 3, 8), 1.5, device=self.device)  # spikes every other step: the start state shows
        net = torch.nn.Sequential(LIF(), torch.nn.Identity(), LIF(tau=3.0, decay_input=False)).to(self.device)
        first = net(x)
        second = net(x)  # continues from the first call's state
        self.assertFalse(torch.equal(first, second), "the state did not carry over")
        reset_net(net)
        self.assertTrue(torch.equal(first, net(x)))

    def test_other_batch_size_is_an_error(self):
        node = LIF()
        x, _ = make_input((4, 3, 5), True, 90, self.device)
        node(x)
        with self.assertRaisesRegex(ValueError, r"shape \(3, 5\).*\(2, 5\).*reset\(\)"):
            node(x[:, :2])
        node.reset()
        self.assertEqual(node(x[:, :2]).shape, (4, 2, 5))

    def test_detach_cuts_the_gradient_into_earlier_calls(self):
        node = LIF()
        x, _ = make_input((6, 2, 5), True, 91, self.device)
        xg = x.clone().requires_grad_(True)
        node(xg[:3]).sum()
        node.detach()
        node(xg[3:]).sum().backward()
        self.assertEqual(float(xg.grad[:3].abs().sum()), 0.0)
        self.assertGreater(float(xg.grad[3:].abs().sum()), 0.0)

    def test_v_setter(self):
        node = LIF(v_reset=-0.5)
        x, _ = make_input((4, 6), True, 92, self.device)
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
        x = torch.randn(6, 2, 3, 4, 4, device=self.device) + 0.5
        node = BNLIF(3).to(self.device)
        node.eval()  # running statistics: the normalisation does not depend on the chunking
        ds = torch.randn_like(x)
        s, dx = run_chunks(node, x, ds, (2, 4))
        s_one, dx_one = run_chunks(node, x, ds, (6,))
        self.assertTrue(torch.equal(s, s_one))
        self.assert_close(dx, dx_one.cpu().double(), "dx")


class TestStateCPU(StateChecks, unittest.TestCase):
    device = "cpu"

    def test_reference_helper_is_lif_node(self):
        x, ds = make_input((5, 7), True, 93, "cpu")
        self.assertTrue(torch.equal(reference(x, ds)[0], lif_node(x.double())))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
@unittest.skipUnless(spikefuse.cuda_device_count() > 0, "libspikefuse built without CUDA")
class TestStateCUDA(StateChecks, unittest.TestCase):
    device = "cuda"


if __name__ == "__main__":
    unittest.main()
