"""test_compile.py — spikefuse's custom ops under torch >= 2.4: torch.library.opcheck of every op (the PLIF's
too), a network with LIF and BNLIF layers compiled with torch.compile(fullgraph=True) without a graph break
(torch._dynamo.explain) and giving eager mode's results and gradients, torch.export, and the ops under
torch.autocast. Skipped on older torch (Debian's 1.13 runs the autograd.Function path, which the other tests
cover)."""
import unittest

import torch

import spikefuse
from ddp_check import compiler_backend
from spikefuse.torch import BNLIF, CUSTOM_OPS, LIF, functional, neuron_base

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and spikefuse.cuda_device_count() > 0 else [])


def small_net(keep_state=False):
    T = 4
    return torch.nn.Sequential(
        torch.nn.Flatten(0, 1), torch.nn.Conv2d(2, 8, 3, padding=1), torch.nn.Unflatten(0, (T, -1)),
        BNLIF(8, keep_state=keep_state, detach_reset=True),
        torch.nn.Flatten(2), torch.nn.Linear(8 * 6 * 6, 16), LIF(surrogate="atan", keep_state=keep_state),
        torch.nn.Linear(16, 5))


def reset(net):
    for m in net.modules():
        if hasattr(m, "reset"):
            m.reset()


def inputs(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(4, 3, 2, 6, 6, generator=g) * 3).to(device)


@unittest.skipUnless(CUSTOM_OPS, "torch < 2.4 (or SPIKEFUSE_CUSTOM_OPS=0): the autograd.Function path")
class TestCustomOps(unittest.TestCase):
    def test_opcheck(self):
        """torch.library.opcheck: schemas, fake kernels against the real ones, autograd registration."""
        for device in DEVICES:
            x = (torch.randn(3, 2, 4, 5, device=device) + 0.7).requires_grad_(True)
            v = torch.randn(2, 4, 5, device=device, requires_grad=True)
            p = list(functional.lif_params(v_reset=None))
            x_long = (torch.randn(40, 2, 4, 5, device=device) + 0.7).requires_grad_(True)  # with checkpoints
            for args in ((x, None, p, False), (x, v, p, True), (x.detach(), None, p, True), (x_long, v, p, True)):
                torch.library.opcheck(torch.ops.spikefuse.lif_forward.default, args)
            C = 4
            stats = [torch.rand(C, device=device) + 0.5 for _ in range(2)]
            gamma = torch.rand(C, device=device, requires_grad=True)
            beta = torch.rand(C, device=device, requires_grad=True)
            for xb in (x, x_long):
                torch.library.opcheck(torch.ops.spikefuse.bn_lif_forward.default,
                                      (xb, stats[0], stats[1], gamma, beta, v, 1e-5, p, True))
            for per_channel, w in ((False, torch.tensor(0.2, device=device, requires_grad=True)),
                                   (True, torch.tensor([0.1, -0.3, 0.4, 0.0], device=device, requires_grad=True))):
                pp = list(neuron_base.model_params("plif", v_reset=None, per_channel=per_channel))
                for args in ((x, w, None, pp, False), (x, w, v, pp, True), (x_long, w, v, pp, True)):
                    torch.library.opcheck(torch.ops.spikefuse.plif_forward.default, args)

    def test_compile_fullgraph_without_breaks(self):
        for device in DEVICES:
            for keep_state in (False, True):
                with self.subTest(device=device, keep_state=keep_state):
                    torch.manual_seed(1)
                    net = small_net(keep_state).to(device)
                    x = inputs(device)
                    explanation = torch._dynamo.explain(net)(x)
                    self.assertEqual(explanation.graph_break_count, 0, str(explanation.break_reasons))
                    torch._dynamo.reset()
                    reset(net)
                    eager = [p.clone() for p in net.state_dict().values()]
                    out_eager = net(x)
                    out_eager.square().sum().backward()
                    grads_eager = [p.grad.clone() for p in net.parameters()]
                    net.zero_grad()
                    with torch.no_grad():  # back to the same running statistics and state
                        for t, e in zip(net.state_dict().values(), eager):
                            t.copy_(e)
                    reset(net)
                    compiled = torch.compile(net, fullgraph=True, backend=compiler_backend(device == "cuda"))
                    out = compiled(x)
                    out.square().sum().backward()
                    self.assertTrue(torch.allclose(out, out_eager, atol=1e-5))
                    for g, ge in zip((p.grad for p in net.parameters()), grads_eager):
                        self.assertTrue(torch.allclose(g, ge, atol=1e-4, rtol=1e-4))
                    if keep_state:  # the second call continues from the first, compiled as eager
                        self.assertIsNotNone(net[6]._u)

    def test_export(self):
        """Training mode (the fused BN+LIF op, batch statistics) and evaluation mode (parameters that need
        gradients: BN with the running statistics, then the LIF op) both export."""
        x = inputs("cpu")
        for training, ops in ((True, ("spikefuse.bn_lif_forward", "spikefuse.lif_forward")),
                              (False, ("spikefuse.lif_forward",))):
            with self.subTest(training=training):
                torch.manual_seed(2)
                net = small_net().train(training)
                exported = torch.export.export(net, (x,))
                for op in ops:
                    self.assertIn(op, str(exported.graph))
                torch.manual_seed(2)
                self.assertTrue(torch.equal(exported.module()(x), small_net().train(training)(x)))

    def test_autocast(self):
        """Under autocast the Linear/Conv outputs are 16-bit: the neurons take them and answer in their dtype."""
        for device in DEVICES:
            for dtype in (torch.bfloat16, torch.float16):
                if device == "cpu" and dtype == torch.float16 and not hasattr(torch.cpu, "amp"):
                    continue
                with self.subTest(device=device, dtype=dtype):
                    net = small_net().to(device)
                    x = inputs(device)
                    with torch.autocast(device, dtype=dtype):
                        hidden = net[:4](x)
                        out = net(x)
                    self.assertEqual(hidden.dtype, dtype)
                    self.assertTrue(bool(((hidden == 0) | (hidden == 1)).all()))
                    out.float().sum().backward()
                    self.assertTrue(all(torch.isfinite(p.grad).all() for p in net.parameters()))
                    self.assertEqual(net[3].weight.grad.dtype, torch.float32)


if __name__ == "__main__":
    unittest.main()
