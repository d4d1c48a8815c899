"""test_fuse.py — spikefuse.torch.fuse: torch and SpikingJelly models (SpikingJelly's classes from sj_standins where it
is not installed) become Networks with the same weights whose outputs, loss, parameter gradients, input gradient and
batch norm statistics are those of the model run by torch (through spikefuse.torch's neurons, which match
SpikingJelly's) within 1e-5, for every module kind fuse takes; partial=True keeps what it cannot take in torch and
fuses around it; everything else is a ValueError naming the module and its path."""
import copy
import unittest

import torch

import sj_standins as sj
from spikefuse.torch import ALIF, BNIF, BNLIF, IF, LIF, PLIF, Network, convert, fuse

T, B = 3, 4


def reset(model):
    for m in model.modules():
        if hasattr(m, "reset") and callable(m.reset):
            m.reset()


def sj_conv_net():
    """SpikingJelly's conv_fashion_mnist network in step mode 'm' (its CSNN.conv_fc), smaller, with the other
    neuron models and wrappers mixed in."""
    return torch.nn.Sequential(
        sj.Conv2d(1, 4, 3, padding=1, bias=False, step_mode="m"), sj.BatchNorm2d(4, step_mode="m"),
        sj.IFNode(surrogate_function=sj.ATan(), step_mode="m"),
        sj.MaxPool2d(2, 2, step_mode="m"),
        sj.SeqToANNContainer(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4, momentum=0.2)),
        sj.LIFNode(tau=3.0, v_threshold=0.3, surrogate_function=sj.Sigmoid(alpha=3.0), step_mode="m"),
        sj.AvgPool2d(2, step_mode="m"),
        sj.Flatten(step_mode="m"),
        sj.Linear(4 * 2 * 2, 12, step_mode="m"),
        sj.ParametricLIFNode(init_tau=3.0, v_threshold=0.05, detach_reset=True, step_mode="m"),
        sj.Dropout(0.0, step_mode="m"),
        sj.Linear(12, 5, bias=False, step_mode="m"),
        sj.IFNode(surrogate_function=sj.ATan(), v_threshold=0.1, v_reset=None, step_mode="m"))


def spikefuse_net():
    """spikefuse.torch's neurons with plain torch layers, every kind fuse takes."""
    return torch.nn.Sequential(
        sj.SeqToANNContainer(torch.nn.Conv2d(2, 6, 3, stride=2, padding=1)),
        BNLIF(6, tau=2.5, v_threshold=0.5, surrogate="atan"),
        sj.SeqToANNContainer(torch.nn.MaxPool2d(3, 2, padding=1), torch.nn.Conv2d(6, 4, 1)),
        PLIF(init_tau=2.0, v_threshold=0.05, channels=4, keep_state=False),
        torch.nn.Identity(),
        torch.nn.Flatten(2),
        torch.nn.Linear(4 * 2 * 2, 10),
        BNIF(10, v_threshold=0.5),
        torch.nn.Linear(10, 10),
        sj.SeqToANNContainer(torch.nn.BatchNorm1d(10)),
        LIF(v_reset=None, tau=4.0, v_threshold=0.3, decay_input=False),
        torch.nn.Dropout(0.0),
        torch.nn.Linear(10, 8),
        ALIF(beta=0.5, v_threshold=0.1, v_reset=None),
        torch.nn.Linear(8, 6),
        IF(v_threshold=0.2))


def sample(shape, seed=1, steps=T, batch=B):
    g = torch.Generator().manual_seed(seed)
    return torch.rand((steps, batch) + shape, generator=g) * 3


def close(test, a, b, what, tol=1e-5):
    """Within tol of the largest value of b; a b that is zero but for rounding (the gradient of a bias right before
    a batch norm, which the normalisation removes) must be as small in a."""
    scale = b.abs().max().item()
    if scale < 1e-6:
        test.assertLess(a.abs().max().item(), 1e-6, f"{what}: zero in torch, not here")
        return
    err = (a - b).abs().max().item() / scale
    test.assertLess(err, tol, f"{what}: {err:.2e}")


class TestRoundTrip(unittest.TestCase):
    def check(self, model, shape, classes, float64=False, steps=T, batch=B):
        """fuse(model) against torch running convert(model) (SpikingJelly's neurons as spikefuse's) or, with
        float64, the model itself in float64 (deep networks, where float32 rounding in torch can move a membrane
        across the threshold): train-mode output, loss, parameter and input gradients, running statistics; then
        eval-mode outputs."""
        torch.manual_seed(0)
        x = sample(shape, steps=steps, batch=batch)
        labels = torch.arange(batch) % classes
        net = fuse(model, x)
        self.assertIsInstance(net, Network)
        ref = copy.deepcopy(model).double() if float64 else convert(copy.deepcopy(model))
        ref_params = [p for p in ref.parameters()]
        net_params = list(net.parameters())
        self.assertEqual(len(net_params), len(ref_params))
        for p, q in zip(net_params, ref_params):
            self.assertTrue(torch.equal(p.detach().flatten(), q.detach().float().flatten()))
        xa, xb = x.clone().requires_grad_(), x.clone().to(ref_params[0].dtype).requires_grad_()
        reset(ref)
        y_ref = ref(xb)
        y = net(xa)
        close(self, y, y_ref, "output")
        loss_ref = torch.nn.functional.cross_entropy(y_ref.mean(0), labels)
        loss = torch.nn.functional.cross_entropy(y.mean(0), labels)
        close(self, loss, loss_ref, "loss")
        loss_ref.backward()
        loss.backward()
        for (name, p), q in zip(net.named_parameters(), ref_params):
            # a PLIF's w gets one sum over every neuron of its layer, whose terms cancel: fp32 summation order moves
            # it by up to about 1e-4 of its value (6.4e-5 seen over 40 draws of a SEW net)
            tol = 2e-4 if name.endswith(".w") else 1e-5
            close(self, p.grad.flatten(), q.grad.flatten(), f"gradient of {name}", tol)
        close(self, xa.grad, xb.grad, "input gradient")
        ref_buffers = [b for n, b in ref.named_buffers() if not n.endswith("num_batches_tracked")]
        for (name, b), r in zip(net.named_buffers(), ref_buffers):
            close(self, b.flatten(), r.flatten(), name)
        net.eval(), ref.eval()
        reset(ref)
        with torch.no_grad():
            close(self, net(x), ref(x.to(xb.dtype)), "eval output")
        return net

    def test_spikingjelly_model(self):
        net = self.check(sj_conv_net(), (1, 8, 8), 5)
        self.assertEqual([getattr(net, str(i)).kind for i in range(len(net._modules))],
                         ["conv2d", "batchnorm", "lif", "maxpool2d", "conv2d", "batchnorm", "lif", "avgpool2d",
                          "flatten", "linear", "lif", "dropout", "linear", "lif"])

    def test_spikefuse_neurons_and_torch_layers(self):
        self.check(spikefuse_net(), (2, 8, 8), 6)

    def test_global_average_pool(self):
        """AdaptiveAvgPool2d(1), the ResNets' head, is the engine's global average pool."""
        seq = sj.SeqToANNContainer
        model = torch.nn.Sequential(seq(torch.nn.Conv2d(2, 4, 3, padding=1)), LIF(v_threshold=0.3),
                                    seq(torch.nn.AdaptiveAvgPool2d((1, 1))), torch.nn.Flatten(2),
                                    torch.nn.Linear(4, 5), IF(v_threshold=0.05))
        net = self.check(model, (2, 6, 6), 5)
        self.assertEqual(getattr(net, "2").kind, "avgpool2d")

    def test_options_and_copy(self):
        model = sj_conv_net()
        net = fuse(model, sample((1, 8, 8)), memory="lean", seed=5)
        self.assertEqual(net.memory, "lean")
        with torch.no_grad():
            model[0].weight.add_(1.0)  # the Network holds a copy
        self.assertFalse(torch.equal(getattr(net, "0").weight, model[0].weight))
        self.assertFalse(fuse(model.eval(), sample((1, 8, 8))).training)


def sj_resnet(kind, block, cnf=None, neuron=sj.IFNode, **kw):
    """SpikingJelly's sew_resnet / spiking_resnet ResNet with one block a stage, in step mode 'm'."""
    module = sj.sew_resnet if kind == "sew" else sj.spiking_resnet
    cls = module.SEWResNet if kind == "sew" else module.SpikingResNet
    extra = dict(cnf=cnf) if kind == "sew" else {}
    model = cls(getattr(module, block), [1, 1, 1, 1], num_classes=5, spiking_neuron=neuron, **extra, **kw)
    sj.set_step_mode(model, "m")
    return model


def sj_blocks(kind, block, cnf=None, neuron=sj.IFNode, **kw):
    """Three narrow residual blocks of SpikingJelly's after a stem, the second and third with a downsample (stride
    2, then 1 with a change of width), and a head: the residual wiring at a small cost."""
    module = sj.sew_resnet if kind == "sew" else sj.spiking_resnet
    cls = getattr(module, block)
    extra = dict(cnf=cnf) if kind == "sew" else {}
    e = cls.expansion

    def downsample(cin, cout, stride):
        return torch.nn.Sequential(sj.Conv2d(cin, cout, 1, stride=stride, bias=False), sj.BatchNorm2d(cout))
    model = torch.nn.Sequential(
        sj.Conv2d(2, 8, 3, padding=1, bias=False), sj.BatchNorm2d(8), neuron(**kw),
        cls(8, 8 // e, **extra, spiking_neuron=neuron, **kw),
        cls(8, 4, 2, downsample(8, 4 * e, 2), **extra, spiking_neuron=neuron, **kw),
        cls(4 * e, 6, 1, downsample(4 * e, 6 * e, 1), **extra, spiking_neuron=neuron, **kw),
        sj.AdaptiveAvgPool2d((1, 1)), sj.Flatten(), sj.Linear(6 * e, 5))
    sj.set_step_mode(model, "m")
    return model


class TestResidual(unittest.TestCase):
    """SpikingJelly's ResNets (sew_resnet, spiking_resnet; against the model in float64) and their blocks (against
    convert(model)): one Network computing SpikingJelly's forward, SEW's connect functions in its argument order."""
    check = TestRoundTrip.check

    def kinds(self, net):
        return [getattr(net, str(i)).kind for i in range(len(net._modules))]

    def test_sew_resnet_basic_block(self):
        net = self.check(sj_resnet("sew", "BasicBlock", "IAND", surrogate_function=sj.ATan(), detach_reset=True),
                         (3, 32, 32), 5, float64=True, steps=2, batch=2)
        kinds = self.kinds(net)
        self.assertEqual(kinds[:4], ["conv2d", "batchnorm", "lif", "maxpool2d"])
        self.assertEqual(kinds[-3:], ["avgpool2d", "flatten", "linear"])
        adds = [d for d in net.layer_descs() if d.kind_name == "add"]
        self.assertEqual([d.connect for d in adds], [2] * 4)  # iand
        # layer1's block: input = the branch's spikes (layer 9), input2 = the shortcut (the maxpool's output)
        self.assertEqual((adds[0].input, adds[0].input2), (10, 4))

    def test_sew_resnet_bottleneck(self):
        net = self.check(sj_resnet("sew", "Bottleneck", "ADD", neuron=sj.LIFNode, tau=2.0,
                                   surrogate_function=sj.Sigmoid()), (3, 32, 32), 5, float64=True, steps=2, batch=2)
        self.assertEqual(self.kinds(net).count("add"), 4)

    def test_spiking_resnet(self):
        for block, size, width in (("BasicBlock", 32, 64), ("Bottleneck", 32, 16)):  # width_per_group 16: narrow
            with self.subTest(block=block):
                net = self.check(sj_resnet("spiking", block, surrogate_function=sj.ATan(), detach_reset=True,
                                           zero_init_residual=block == "Bottleneck", width_per_group=width),
                                 (3, size, size), 5, float64=True, steps=2, batch=2)
                kinds = self.kinds(net)
                self.assertEqual([kinds[i + 1] for i, k in enumerate(kinds) if k == "add"], ["lif"] * 4)

    def test_blocks_every_connect(self):
        """Each block kind, cnf and neuron (IF/LIF, ATan/Sigmoid, detach_reset, PLIF) in a Sequential."""
        cases = [("sew", b, cnf) for b in ("BasicBlock", "Bottleneck") for cnf in ("ADD", "AND", "IAND")] + \
                [("spiking", b, None) for b in ("BasicBlock", "Bottleneck")]
        neurons = [(sj.IFNode, dict(surrogate_function=sj.ATan(), detach_reset=True, v_threshold=0.5)),
                   (sj.LIFNode, dict(tau=2.0, surrogate_function=sj.Sigmoid(), v_threshold=0.5)),
                   (sj.ParametricLIFNode, dict(init_tau=3.0, v_threshold=0.5, v_reset=None))]
        for i, (kind, block, cnf) in enumerate(cases):
            neuron, kw = neurons[i % len(neurons)]
            if kind == "spiking" and neuron is sj.ParametricLIFNode:
                neuron, kw = neurons[0]  # its last neuron's w comes after the downsample in the engine's order
            with self.subTest(kind=kind, block=block, cnf=cnf, neuron=neuron.__name__):
                torch.manual_seed(i)  # the weights: the same draw whichever tests ran before
                self.check(sj_blocks(kind, block, cnf, neuron, **kw), (2, 8, 8), 5)

    def test_refused(self):
        """What SpikingJelly's forward does not compute as the engine can is refused, naming the part."""
        x = sample((3, 32, 32), steps=2, batch=2)
        with self.assertRaisesRegex(ValueError, "fuse: \\(model\\) \\(SEWResNet\\): layer1.0.conv2 \\(Conv2d\\): "
                                    "Conv2d with groups"):
            fuse(sj_resnet("sew", "Bottleneck", "ADD", groups=2, width_per_group=4), x)
        dilated = sj.spiking_resnet.SpikingResNet(sj.spiking_resnet.Bottleneck, [1, 1, 1, 2], width_per_group=16,
                                                  replace_stride_with_dilation=[False, False, True],
                                                  spiking_neuron=sj.IFNode, step_mode="m")
        sj.set_step_mode(dilated, "m")
        with self.assertRaisesRegex(ValueError, "layer4.1.conv2 \\(Conv2d\\): Conv2d with groups, dilation"):
            fuse(dilated, x)
        model = sj_resnet("sew", "BasicBlock", "ADD")
        model.avgpool = torch.nn.Identity()
        with self.assertRaisesRegex(ValueError, "SEWResNet\\): its avgpool is not in step mode 'm'"):
            fuse(model, x)
        model.avgpool, model.layer2[0].cnf = sj.AdaptiveAvgPool2d((1, 1), step_mode="m"), "OR"
        with self.assertRaisesRegex(ValueError, "layer2.0 \\(BasicBlock\\): cnf='OR'"):
            fuse(model, x)
        model.layer2[0].cnf = "AND"
        model.layer3[0].sn1.step_mode = "s"
        with self.assertRaisesRegex(ValueError, "layer3.0.sn1 \\(IFNode\\): IFNode in step mode 's'"):
            fuse(model, x)

        def refused(model, pattern):
            with self.assertRaisesRegex(ValueError, pattern):
                fuse(model, sample((2, 8, 8)))
        blocks = sj_blocks("sew", "BasicBlock", "IAND")
        blocks[3].bn1 = torch.nn.GroupNorm(2, 8)  # a norm_layer other than batch norm
        refused(blocks, "fuse: 3 \\(BasicBlock\\): 3.bn1 \\(GroupNorm\\): GroupNorm has no counterpart")
        blocks[3].bn1, blocks[3].drop = sj.BatchNorm2d(8, step_mode="m"), torch.nn.Dropout()
        refused(blocks, "fuse: 3 \\(BasicBlock\\): its modules differ from SpikingJelly's BasicBlock's: drop besides")
        del blocks[3].drop
        blocks[3].forward = lambda x: x
        refused(blocks, "fuse: 3 \\(BasicBlock\\): its forward is not SpikingJelly's BasicBlock.forward")

        class Gated(sj.sew_resnet.Bottleneck):
            def forward(self, x):
                return super().forward(x) * 0.5
        blocks = sj_blocks("sew", "Bottleneck", "ADD")
        gated = Gated(8, 2, cnf="ADD", spiking_neuron=sj.IFNode, step_mode="m")
        sj.set_step_mode(gated, "m")
        blocks[3] = gated
        refused(blocks, "fuse: 3 \\(Gated\\): its forward is not SpikingJelly's Bottleneck.forward")
        blocks[3] = torch.nn.Sequential(sj.Conv2d(8, 8, 1, step_mode="m"), torch.nn.ReLU())  # a block it does not know
        refused(blocks, "fuse: 3.1 \\(ReLU\\)")

    def test_partial_keeps_a_block_whole(self):
        """partial=True: a residual block (or a whole ResNet) fuse refuses stays one torch module."""
        class Gated(sj.sew_resnet.BasicBlock):
            def forward(self, x):
                return super().forward(x) * 0.5
        model = sj_blocks("sew", "BasicBlock", "AND", v_threshold=0.5)
        gated = Gated(8, 4, 2, model[4].downsample, cnf="AND", spiking_neuron=sj.IFNode, v_threshold=0.5)
        gated.load_state_dict(model[4].state_dict())
        model[4] = gated
        sj.set_step_mode(model, "m")
        x = sample((2, 8, 8))
        fused = fuse(model, x, partial=True)
        self.assertEqual([type(m).__name__ for m in fused], ["Network", "Gated", "Network"])
        with torch.no_grad():
            y = fused(x)
            reset(model)  # the kept block's neurons are SpikingJelly's: their state stays until reset
            close(self, y, model(x), "output")
        whole = sj_resnet("sew", "BasicBlock", "ADD")
        whole.layer1[0].bn1 = sj.SeqToANNContainer(torch.nn.GroupNorm(4, 64))
        x = sample((3, 32, 32), steps=2, batch=2)
        kept = fuse(whole, x, partial=True)
        self.assertEqual([type(m).__name__ for m in kept], ["SEWResNet"])
        self.assertIs(kept[0], whole)


class TestPartial(unittest.TestCase):
    def test_torch_module_between_networks(self):
        """A ReLU stays in torch; the runs before and after it are Networks; gradients cross it."""
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), LIF(), torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                    torch.nn.Linear(8, 4), IF())
        x = sample((6,))
        with self.assertRaisesRegex(ValueError, "fuse: 3 \\(ReLU\\): ReLU has no counterpart"):
            fuse(model, x)
        fused = fuse(model, x, partial=True)
        self.assertEqual([type(m).__name__ for m in fused], ["Network", "ReLU", "Network"])
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        reset(model)
        y_ref, y = model(xb), fused(xa)
        close(self, y, y_ref, "output")
        (y_ref * torch.arange(4.0)).sum().backward()
        (y * torch.arange(4.0)).sum().backward()
        close(self, fused[0]._modules["0"].weight.grad, model[0].weight.grad, "first linear's gradient")
        close(self, xa.grad, xb.grad, "input gradient")

    def test_unconvertible_container_kept_whole(self):
        class Custom(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(5, 5)

            def forward(self, x):
                return self.fc(x) * 2

        model = torch.nn.Sequential(torch.nn.Linear(5, 5), Custom(), torch.nn.Linear(5, 3), LIF())
        fused = fuse(model, sample((5,)), partial=True)
        self.assertEqual([type(m).__name__ for m in fused], ["Network", "Custom", "Network"])
        reset(model)
        with torch.no_grad():
            close(self, fused(sample((5,))), model(sample((5,))), "output")


class TestErrors(unittest.TestCase):
    def refused(self, model, shape, pattern):
        with self.assertRaisesRegex(ValueError, pattern):
            fuse(model, sample(shape))

    def test_unsupported(self):
        seq = sj.SeqToANNContainer
        self.refused(torch.nn.Sequential(seq(torch.nn.Conv2d(2, 4, 3, groups=2)), LIF()), (2, 6, 6),
                     "fuse: 0.0 \\(Conv2d\\): Conv2d with groups")
        self.refused(torch.nn.Sequential(seq(torch.nn.Conv2d(2, 4, (3, 1)))), (2, 6, 6), "kernel_size=\\(3, 1\\)")
        self.refused(torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3)), (2, 6, 6), "outside a SeqToANNContainer")
        self.refused(torch.nn.Sequential(seq(torch.nn.BatchNorm2d(2, affine=False))), (2, 6, 6), "affine=False")
        self.refused(torch.nn.Sequential(seq(torch.nn.MaxPool2d(2, ceil_mode=True))), (2, 5, 5), "ceil_mode")
        self.refused(torch.nn.Sequential(torch.nn.Flatten()), (2, 3, 3), "flattens more than one step")
        self.refused(torch.nn.Sequential(torch.nn.Linear(3, 2)), (2, 3, 3), "flatten them first")
        self.refused(torch.nn.Sequential(torch.nn.Linear(4, 4), sj.KLIFNode()), (4,),
                     "fuse: 1 \\(KLIFNode\\): KLIFNode has no spikefuse counterpart")
        self.refused(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Tanh())), (4,),
                     "fuse: 1.0 \\(Tanh\\)")
        self.refused(torch.nn.Sequential(seq(torch.nn.AvgPool2d(2)), torch.nn.Linear(4, 4)), (2, 4, 4),
                     "fuse: 1 \\(Linear\\)")
        self.refused(torch.nn.Sequential(seq(torch.nn.AdaptiveAvgPool2d(2))), (2, 6, 6), "gives 1x1 only")
        self.refused(torch.nn.Sequential(seq(torch.nn.AdaptiveAvgPool2d(1))), (2, 6, 4), "square planes")
        class ScaledBN(torch.nn.BatchNorm2d):
            def forward(self, x):
                return super().forward(x) * 2

        self.refused(torch.nn.Sequential(seq(ScaledBN(2))), (2, 4, 4), "ScaledBN overrides BatchNorm2d.forward")
        with self.assertRaisesRegex(ValueError, "time-major"):
            fuse(torch.nn.Sequential(torch.nn.Linear(4, 4)), torch.rand(4))


if __name__ == "__main__":
    unittest.main()
