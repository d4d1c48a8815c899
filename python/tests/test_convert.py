"""test_convert.py — SpikingJelly's neurons, surrogates and batch norm → neuron pairs as spikefuse modules, without
SpikingJelly (sj_standins.py mimics its classes; test_spikingjelly.py repeats the essentials against the real
package): surrogate objects map to spikefuse's surrogate of the same derivative or are refused, each neuron model
converts to its counterpart (parameters, surrogate, step mode, training flag, state) and refuses the others,
convert(model) swaps every neuron and fuses batch norm pairs, and what has no counterpart names itself."""
import unittest

import torch

import sj_standins as sj
from spikefuse.torch import BNIF, BNLIF, IF, LIF, PLIF, convert


def spikes_and_grad(module, x):
    x = x.clone().requires_grad_(True)
    s = module(x)
    s.backward(torch.linspace(-1, 1, s.numel()).reshape(s.shape))
    return s.detach(), x.grad


class TestSurrogates(unittest.TestCase):
    def test_counterparts(self):
        cases = [(sj.Sigmoid(alpha=3.0), "sigmoid", 3.0), (sj.ATan(), "atan", 2.0), (sj.ATan(alpha=5.0), "atan", 5.0),
                 (sj.Rect(alpha=2.0), "rect", 2.0), (sj.SoftSign(), "fast_sigmoid", 2.0),
                 (sj.SuperSpike(), "fast_sigmoid", 1.0), (sj.PiecewiseLeakyReLU(w=0.5, c=0.0), "rect", 1.0)]
        for sg, name, alpha in cases:
            with self.subTest(surrogate=type(sg).__name__):
                m = LIF(surrogate_function=sg)
                self.assertEqual((m.surrogate, m.alpha), (name, alpha))
                self.assertEqual(m.lif_params(), LIF(surrogate=name, alpha=alpha).lif_params())
                self.assertEqual(LIF(surrogate=sg).lif_params(), m.lif_params())  # the object as `surrogate` too

    def test_refusals(self):
        cases = [(sj.SoftSign(alpha=4.0), r"SoftSign \(alpha=4.0\) is not spikefuse's fast_sigmoid .*alpha = 2 only"),
                 (sj.SuperSpike(alpha=3.0), r"SuperSpike .*alpha = 1 only"),
                 (sj.PiecewiseLeakyReLU(w=0.5), r"PiecewiseLeakyReLU \(w=0.5, c=0.01\) .*c = 0 only"),
                 # SpikingJelly 0.0.0.0.14's PiecewiseLeakyReLU, whose window integrates to 2
                 (sj.PiecewiseLeakyReLU(w=0.5, c=0.0, height=2.0),
                  r"PiecewiseLeakyReLU \(w=0.5, c=0.0\) .*its derivative is 2, spikefuse's 1"),
                 (sj.Erf(), r"Erf has no spikefuse counterpart; supported: Sigmoid, ATan"),
                 (sj.ATan(spiking=False), r"ATan\(spiking=False\) runs its smooth primitive forward"),
                 (torch.nn.Sigmoid(), r"Sigmoid: cannot read its parameters")]
        for sg, words in cases:
            with self.subTest(surrogate=repr(sg)), self.assertRaisesRegex(ValueError, "^spikefuse.torch.LIF: SpikingJelly surrogate " + words):
                LIF(surrogate_function=sg)
        with self.assertRaisesRegex(ValueError, "alpha = 3.0 given beside the SpikingJelly surrogate ATan"):
            LIF(surrogate_function=sj.ATan(), alpha=3.0)
        with self.assertRaisesRegex(ValueError, "give surrogate or surrogate_function"):
            LIF(surrogate="atan", surrogate_function=sj.ATan())

    def test_spikingjelly_argument_order(self):
        """LIFNode(tau, decay_input, v_threshold, v_reset, surrogate_function, detach_reset, step_mode): the same
        positions in LIF, IF's and PLIF's likewise."""
        m = LIF(3.0, False, 0.5, -0.1, sj.ATan(), True, "s")
        self.assertEqual((m.tau, m.decay_input, m.v_threshold, m.v_reset, m.surrogate, m.detach_reset, m.step_mode),
                         (3.0, False, 0.5, -0.1, "atan", True, "s"))
        m = IF(0.5, None, sj.Sigmoid(), True, "s")
        self.assertEqual((m.v_threshold, m.v_reset, m.surrogate, m.detach_reset, m.step_mode),
                         (0.5, None, "sigmoid", True, "s"))
        m = PLIF(3.0, False, 0.5, 0.0, sj.Rect(), True, "m")
        self.assertEqual((m.init_tau, m.surrogate, m.detach_reset), (3.0, "rect", True))
        LIF(backend="cupy")  # SpikingJelly's backend: accepted, spikefuse's kernels run


class TestNeurons(unittest.TestCase):
    def test_each_model(self):
        x = torch.randn(6, 3, 4, 5) + 0.6
        cases = [(sj.LIFNode(tau=3.0, decay_input=False, v_threshold=0.8, v_reset=-0.2,
                             surrogate_function=sj.ATan(alpha=3.0), detach_reset=True, step_mode="m"),
                  LIF(tau=3.0, decay_input=False, v_threshold=0.8, v_reset=-0.2, surrogate="atan", alpha=3.0,
                      detach_reset=True)),
                 (sj.IFNode(v_threshold=1.5, v_reset=None, step_mode="m"), IF(v_threshold=1.5, v_reset=None)),
                 (sj.ParametricLIFNode(init_tau=3.0, surrogate_function=sj.Rect(), step_mode="m"),
                  PLIF(init_tau=3.0, surrogate="rect"))]
        for node, want in cases:
            with self.subTest(node=type(node).__name__):
                got = type(want).from_spikingjelly(node)
                self.assertIs(type(got), type(want))
                self.assertEqual(got.lif_params(), want.lif_params())
                self.assertEqual(got.step_mode, "m")
                s, dx = spikes_and_grad(got, x)
                s_want, dx_want = spikes_and_grad(want, x)
                self.assertTrue(torch.equal(s, s_want) and torch.equal(dx, dx_want))
                self.assertGreater(float(s.sum()), 0)

    def test_state_step_mode_and_training_carry_over(self):
        node = sj.LIFNode(step_mode="s", store_v_seq=True)
        node.v = torch.full((2, 3), 0.4)
        node.eval()
        m = LIF.from_spikingjelly(node)
        self.assertEqual((m.step_mode, m.store_v_seq, m.training), ("s", True, False))
        self.assertTrue(torch.equal(m.v, node.v))
        # from v = 0.4, h = 0.4 + (1.7 - 0.4)/2 = 1.05 fires; from the reset (h = 0.85) it would not
        self.assertEqual(float(m(torch.full((2, 3), 1.7)).sum()), 6.0)
        node = sj.ParametricLIFNode(init_tau=4.0)
        with torch.no_grad():
            node.w.fill_(0.3)
        node.w.requires_grad_(False)
        m = PLIF.from_spikingjelly(node)
        self.assertEqual((float(m.w), m.w.requires_grad), (float(node.w), False))

    def test_other_models_are_refused(self):
        cases = [(LIF, sj.IFNode(), r"LIF.from_spikingjelly: IFNode is a different neuron model \(IF\); use "
                                    r"IF.from_spikingjelly"),
                 (IF, sj.LIFNode(tau=5.0), r"IF.from_spikingjelly: LIFNode is a different neuron model \(LIF\)"),
                 (PLIF, sj.LIFNode(), r"LIFNode is a different neuron model \(LIF\)"),
                 (LIF, sj.KLIFNode(), r"KLIFNode has no spikefuse counterpart \(supported: LIFNode \(LIF\)")]
        for cls, node, words in cases:
            with self.subTest(cls=cls.__name__, node=type(node).__name__), self.assertRaisesRegex(ValueError, words):
                cls.from_spikingjelly(node)

    def test_what_differs_is_refused(self):
        class Noisy(sj.LIFNode):
            def neuronal_charge(self, x):
                super().neuronal_charge(x + 0.1 * torch.randn_like(x))

        with self.assertRaisesRegex(ValueError, "Noisy subclasses SpikingJelly's LIFNode and overrides "
                                                "neuronal_charge"):
            LIF.from_spikingjelly(Noisy())

        class Named(sj.LIFNode):
            def __init__(self):
                super().__init__(tau=4.0)

        self.assertEqual(LIF.from_spikingjelly(Named()).tau, 4.0)  # a subclass that only sets its arguments
        node = sj.LIFNode()
        node.v_threshold = torch.tensor([1.0, 2.0])
        with self.assertRaisesRegex(ValueError, "LIFNode.v_threshold has 2 values"):
            LIF.from_spikingjelly(node)
        with self.assertRaisesRegex(ValueError, "spikefuse.torch.LIF: LIF tau = 0.5: must be a finite number >= 1"):
            LIF.from_spikingjelly(sj.LIFNode(tau=0.5))


class TestBatchNormPairs(unittest.TestCase):
    def make_bn(self, step_mode="m"):
        bn = sj.BatchNorm2d(4, step_mode=step_mode, momentum=0.2)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
        return bn

    def test_fused_models(self):
        x = torch.randn(5, 3, 4, 6, 6) + 0.5
        for node, cls in ((sj.LIFNode(tau=3.0, step_mode="m", detach_reset=True), BNLIF),
                          (sj.IFNode(v_reset=None, step_mode="m"), BNIF)):
            for training in (True, False):
                with self.subTest(node=type(node).__name__, training=training):
                    bn = self.make_bn().train(training)
                    fused = cls.from_spikingjelly(bn, node)
                    self.assertIs(type(fused), cls)
                    self.assertEqual(fused.training, training)
                    self.assertEqual(fused.momentum, 0.2)
                    for k, v in bn.state_dict().items():
                        self.assertTrue(torch.equal(fused.state_dict()[k], v), k)
                    plain = (LIF if cls is BNLIF else IF).from_spikingjelly(node)
                    ref = torch.nn.Sequential(torch.nn.Flatten(0, 1), torch.nn.BatchNorm2d(4, momentum=0.2),
                                              torch.nn.Unflatten(0, (5, 3)), plain).train(training)
                    ref[1].load_state_dict(bn.state_dict())
                    s, dx = spikes_and_grad(fused, x)
                    s_ref, dx_ref = spikes_and_grad(ref, x)
                    self.assertLessEqual(int((s != s_ref).sum()), 2)
                    self.assertLess((dx - dx_ref).abs().max().item(), 1e-4)

    def test_torch_batch_norm(self):
        """A torch BatchNorm2d runs per step or over a flattened sequence: it fuses with a neuron of either mode
        (but convert pairs it only with a single-step neuron: in a Sequential it sees one step)."""
        for mode in ("s", "m"):
            self.assertEqual(BNLIF.from_spikingjelly(torch.nn.BatchNorm2d(4), sj.LIFNode(step_mode=mode)).step_mode,
                             mode)
        net = convert(torch.nn.Sequential(torch.nn.BatchNorm2d(4), sj.LIFNode(step_mode="s"),
                                          torch.nn.BatchNorm2d(4), sj.LIFNode(step_mode="m")))
        self.assertEqual([type(m).__name__ for m in net], ["BNLIF", "Identity", "BatchNorm2d", "LIF"])

    def test_refusals(self):
        bn = self.make_bn()
        cases = [(BNLIF, bn, sj.IFNode(step_mode="m"), r"BNLIF.from_spikingjelly: a batch norm followed by IFNode "
                                                       r"\(IF\) is BNIF: use BNIF.from_spikingjelly"),
                 (BNIF, bn, sj.ParametricLIFNode(step_mode="m"), r"ParametricLIFNode \(PLIF\) has no fused form"),
                 (BNLIF, torch.nn.LayerNorm(4), sj.LIFNode(step_mode="m"), r"LayerNorm is not a batch norm it fuses"),
                 (BNLIF, bn, sj.LIFNode(step_mode="s"), r"the batch norm runs in step mode 'm', the neuron in 's'")]
        for cls, b, node, words in cases:
            with self.subTest(words=words), self.assertRaisesRegex(ValueError, words):
                cls.from_spikingjelly(b, node)


class TestConvert(unittest.TestCase):
    def network(self):
        torch.manual_seed(0)
        block = torch.nn.Sequential(sj.SeqToANNContainer(torch.nn.BatchNorm2d(4)), sj.IFNode(step_mode="m"))
        return torch.nn.Sequential(
            sj.SeqToANNContainer(torch.nn.Conv2d(2, 4, 3, padding=1)), sj.BatchNorm2d(4, step_mode="m"),
            sj.LIFNode(tau=2.5, step_mode="m", surrogate_function=sj.ATan()),
            sj.SeqToANNContainer(torch.nn.Conv2d(4, 4, 3, padding=1)), block,
            torch.nn.Flatten(2), torch.nn.Linear(4 * 6 * 6, 5), sj.ParametricLIFNode(v_threshold=0.05, step_mode="m"))

    def test_every_neuron_and_pair(self):
        net = self.network()
        names = set(net.state_dict())
        out = convert(net)
        self.assertIs(out, net)
        kinds = [type(m).__name__ for m in net] + [type(m).__name__ for m in net[4]]
        self.assertEqual(kinds, ["SeqToANNContainer", "BNLIF", "Identity", "SeqToANNContainer", "Sequential",
                                 "Flatten", "Linear", "PLIF", "BNIF", "Identity"])
        self.assertEqual(net[1].surrogate, "atan")
        # the batch norm's place keeps its names; a torch BatchNorm in a SeqToANNContainer loses the container's ".0"
        self.assertEqual(set(net.state_dict()), {n.replace("4.0.0.", "4.0.") for n in names})
        x = torch.rand(3, 2, 2, 6, 6) * 2
        s = net(x)
        self.assertEqual(s.shape, (3, 2, 5))
        self.assertGreater(float(s.sum()), 0)

    def test_unfused_and_nested(self):
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = sj.BatchNorm2d(4, step_mode="m")
                self.neuron = sj.LIFNode(step_mode="m")

            def forward(self, x):
                return self.neuron(self.bn(x))
        net = torch.nn.Sequential(Block(), sj.BatchNorm2d(4, step_mode="m"), sj.IFNode(step_mode="s"))
        convert(net)
        self.assertEqual([type(m).__name__ for m in (net[0].bn, net[0].neuron, net[1], net[2])],
                         ["BatchNorm2d", "LIF", "BatchNorm2d", "IF"])  # a pair only in a Sequential, same step mode
        net = torch.nn.Sequential(self.make_pair(), sj.LIFNode(step_mode="m"))
        convert(net, fuse_bn=False)
        self.assertEqual([type(m).__name__ for m in net], ["BatchNorm2d", "LIF"])
        self.assertIsInstance(convert(sj.IFNode()), IF)

    @staticmethod
    def make_pair():
        return sj.BatchNorm2d(4, step_mode="m")

    def test_unsupported_neuron_names_its_place(self):
        net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sequential(sj.LIFNode(), sj.KLIFNode()))
        with self.assertRaisesRegex(ValueError, r"^convert: 1\.1: KLIFNode has no spikefuse counterpart"):
            convert(net)


if __name__ == "__main__":
    unittest.main()
