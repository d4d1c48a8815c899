"""sj_standins.py — small classes with SpikingJelly's names, attributes, surrogate derivatives and neuron equations
(as its 2.0.0 defines them), so that spikefuse.torch's SpikingJelly conversions are tested where SpikingJelly is not
installed (CI); test_spikingjelly.py checks the same against the real package where it is. modules() makes them
importable under SpikingJelly's names (for the documentation's examples: test_readme.py, run_tutorials.py)."""
import copy
import math
import sys
import types

import torch

SJ_MODULE = "spikingjelly.activation_based.neuron"  # where SpikingJelly's neurons live (what spikefuse recognises)


class _Surrogate(torch.nn.Module):
    """Heaviside forward (1 at 0, as SpikingJelly's), the derivative `grad(z)` backward."""

    def __init__(self, spiking=True, **params):
        super().__init__()
        self.spiking = spiking
        for k, v in params.items():
            setattr(self, k, v)

    def forward(self, z):
        grad = self.grad

        class Spike(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x >= 0).to(x.dtype)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * grad(x)
        return Spike.apply(z)


class Sigmoid(_Surrogate):
    def __init__(self, alpha=4.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        s = torch.sigmoid(self.alpha * z)
        return self.alpha * s * (1 - s)


class ATan(_Surrogate):
    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        return self.alpha / 2 / (1 + (math.pi / 2 * self.alpha * z) ** 2)


class Rect(_Surrogate):
    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        return self.alpha * (z.abs() < 0.5 / self.alpha).to(z.dtype)


class SoftSign(_Surrogate):
    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        return 1 / (2 * self.alpha * (1 / self.alpha + z.abs()) ** 2)


class SuperSpike(_Surrogate):
    def __init__(self, alpha=1.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        return self.alpha / (z.abs() + 1.0) ** 2


class PiecewiseLeakyReLU(_Surrogate):
    """SpikingJelly 2's (1/(2w) inside the window); height=1/w is 0.0.0.0.14's."""

    def __init__(self, w=1.0, c=0.01, spiking=True, height=None):
        super().__init__(spiking, w=w, c=c)
        self.height = 1 / (2 * w) if height is None else height

    def grad(self, z):
        inside = (z.abs() < self.w).to(z.dtype)
        return inside * self.height + (1 - inside) * self.c


class Erf(_Surrogate):
    def __init__(self, alpha=2.0, spiking=True):
        super().__init__(spiking, alpha=alpha)

    def grad(self, z):
        return self.alpha / math.sqrt(math.pi) * torch.exp(-(self.alpha * z) ** 2)


class BaseNode(torch.nn.Module):
    def __init__(self, v_threshold=1.0, v_reset=0.0, surrogate_function=None, detach_reset=False, step_mode="s",
                 store_v_seq=False):
        super().__init__()
        self.v_threshold, self.v_reset = v_threshold, v_reset
        self.surrogate_function = Sigmoid() if surrogate_function is None else surrogate_function
        self.detach_reset, self.step_mode, self.store_v_seq = detach_reset, step_mode, store_v_seq
        self.v = 0.0 if v_reset is None else v_reset

    def neuronal_charge(self, x):
        raise NotImplementedError

    def reset(self):
        self.v = 0.0 if self.v_reset is None else self.v_reset

    def forward(self, x):
        """SpikingJelly's forward: one step [B, ...] (step_mode 's') or every step of [T, B, ...] ('m')."""
        if self.step_mode == "s":
            return self.single_step_forward(x)
        return torch.stack([self.single_step_forward(x_t) for x_t in x])

    def single_step_forward(self, x):
        """Charge, fire through the surrogate, reset (hard to v_reset, or soft: subtract the threshold)."""
        self.neuronal_charge(x)
        spike = self.surrogate_function(self.v - self.v_threshold)
        s = spike.detach() if self.detach_reset else spike
        self.v = self.v - s * self.v_threshold if self.v_reset is None else (1 - s) * self.v + s * self.v_reset
        return spike


class LIFNode(BaseNode):
    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate_function=None,
                 detach_reset=False, step_mode="s", store_v_seq=False):
        super().__init__(v_threshold, v_reset, surrogate_function, detach_reset, step_mode, store_v_seq)
        self.tau, self.decay_input = tau, decay_input

    def neuronal_charge(self, x):
        rest = 0.0 if self.v_reset is None else self.v_reset
        if self.decay_input:
            self.v = self.v + (x - (self.v - rest)) / self.tau
        else:
            self.v = self.v - (self.v - rest) / self.tau + x


class IFNode(BaseNode):
    def neuronal_charge(self, x):
        self.v = self.v + x


class ParametricLIFNode(BaseNode):
    def __init__(self, init_tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate_function=None,
                 detach_reset=False, step_mode="s", store_v_seq=False):
        super().__init__(v_threshold, v_reset, surrogate_function, detach_reset, step_mode, store_v_seq)
        self.decay_input = decay_input
        self.w = torch.nn.Parameter(torch.tensor(-math.log(init_tau - 1.0)))

    def neuronal_charge(self, x):
        rest = 0.0 if self.v_reset is None else self.v_reset
        if self.decay_input:
            self.v = self.v + (x - (self.v - rest)) * self.w.sigmoid()
        else:
            self.v = self.v - (self.v - rest) * self.w.sigmoid() + x


class KLIFNode(BaseNode):
    """A SpikingJelly neuron spikefuse has no counterpart of."""


for _cls in (BaseNode, LIFNode, IFNode, ParametricLIFNode, KLIFNode):
    _cls.__module__ = SJ_MODULE


class BatchNorm2d(torch.nn.BatchNorm2d):
    """SpikingJelly's layer.BatchNorm2d: torch's, with a step mode ('m': over [T, B, C, H, W])."""

    def __init__(self, num_features, step_mode="s", **kw):
        super().__init__(num_features, **kw)
        self.step_mode = step_mode

    def forward(self, x):
        if self.step_mode == "s":
            return super().forward(x)
        return super().forward(x.flatten(0, 1)).unflatten(0, x.shape[:2])


BatchNorm2d.__module__ = "spikingjelly.activation_based.layer"


class SeqToANNContainer(torch.nn.Sequential):
    """SpikingJelly's layer.SeqToANNContainer: its modules over the T·B samples of [T, B, ...]."""

    def forward(self, x):
        return super().forward(x.flatten(0, 1)).unflatten(0, x.shape[:2])


def _multi_step(cls):
    """SpikingJelly's layer.<cls> wrapper: torch's layer with a step mode; in 'm' it runs on the T·B steps of
    [T, B, ...] alone."""

    class Wrapper(cls):
        def __init__(self, *args, step_mode="s", **kw):
            super().__init__(*args, **kw)
            self.step_mode = step_mode

        def forward(self, x):
            if self.step_mode == "s":
                return super().forward(x)
            return super().forward(x.flatten(0, 1)).unflatten(0, x.shape[:2])
    Wrapper.__name__ = Wrapper.__qualname__ = cls.__name__
    Wrapper.__module__ = "spikingjelly.activation_based.layer"
    return Wrapper


Conv2d, Linear, Flatten, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d = (
    _multi_step(c) for c in (torch.nn.Conv2d, torch.nn.Linear, torch.nn.Flatten, torch.nn.MaxPool2d,
                             torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d, torch.nn.BatchNorm1d))


class Dropout(torch.nn.Module):
    """SpikingJelly's layer.Dropout: one mask for every step of a sequence (a MemoryModule, not torch's Dropout)."""

    def __init__(self, p=0.5, step_mode="s"):
        super().__init__()
        self.p, self.step_mode, self.mask = p, step_mode, None

    def reset(self):
        self.mask = None

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.mask is None:
            self.mask = (torch.rand_like(x[0] if self.step_mode == "m" else x) > self.p).to(x) / (1 - self.p)
        return x * self.mask


Dropout.__module__ = "spikingjelly.activation_based.layer"


def _sew(a, b, cnf):
    """SpikingJelly's sew_function(a, b, cnf): ADD a + b, AND a·b, IAND a·(1 − b)."""
    if cnf == "ADD":
        return a + b
    if cnf == "AND":
        return a * b
    if cnf == "IAND":
        return a * (1.0 - b)
    raise NotImplementedError(cnf)


def _conv(cin, cout, k, stride=1, groups=1, dilation=1):
    """Its conv3x3 (padding = dilation) and conv1x1: layer.Conv2d without bias."""
    return Conv2d(cin, cout, k, stride=stride, padding=dilation if k == 3 else 0, groups=groups, bias=False,
                  dilation=dilation)


def _block_parts(block, inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer, neuron,
                 kwargs, sew):
    """A block's conv{i}, bn{i}, sn{i} (two for BasicBlock, three for Bottleneck, the 3x3 one carrying the stride),
    its downsample and, in SEW's, downsample_sn."""
    norm_layer = norm_layer or BatchNorm2d
    if block.expansion == 1:
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        shapes = [(inplanes, planes, 3, stride, 1, 1), (planes, planes, 3, 1, 1, 1)]
    else:
        width = int(planes * (base_width / 64.0)) * groups
        shapes = [(inplanes, width, 1, 1, 1, 1), (width, width, 3, stride, groups, dilation),
                  (width, planes * 4, 1, 1, 1, 1)]
    for i, (cin, cout, k, s, g, d) in enumerate(shapes, 1):
        setattr(block, f"conv{i}", _conv(cin, cout, k, s, g, d))
        setattr(block, f"bn{i}", norm_layer(cout))
        setattr(block, f"sn{i}", neuron(**copy.deepcopy(kwargs)))
    block.downsample = downsample
    if sew and downsample is not None:
        block.downsample_sn = neuron(**copy.deepcopy(kwargs))
    block.stride = stride


def _branch(block, x, n, last_neuron=True):
    """conv → bn → sn n times; the last sn left out where last_neuron is False (SpikingResNet's)."""
    for i in range(1, n + 1):
        x = getattr(block, f"bn{i}")(getattr(block, f"conv{i}")(x))
        if i < n or last_neuron:
            x = getattr(block, f"sn{i}")(x)
    return x


class SEWBasicBlock(torch.nn.Module):
    """SEW-ResNet's BasicBlock: out = sew_function(identity, branch spikes, cnf), the shortcut through downsample
    and downsample_sn where there is one."""
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None, cnf=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _block_parts(self, inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer,
                     spiking_neuron, kwargs, sew=True)
        self.cnf = cnf

    def forward(self, x):
        out = _branch(self, x, 2)
        identity = x if self.downsample is None else self.downsample_sn(self.downsample(x))
        return _sew(identity, out, self.cnf)


class SEWBottleneck(torch.nn.Module):
    """SEW-ResNet's Bottleneck: the same, but sew_function(branch spikes, identity, cnf), the other order."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None, cnf=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _block_parts(self, inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer,
                     spiking_neuron, kwargs, sew=True)
        self.cnf = cnf

    def forward(self, x):
        out = _branch(self, x, 3)
        identity = x if self.downsample is None else self.downsample_sn(self.downsample(x))
        return _sew(out, identity, self.cnf)


class SpikingBasicBlock(torch.nn.Module):
    """Spiking ResNet's BasicBlock: sn2(bn2 output + identity or downsample(x))."""
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _block_parts(self, inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer,
                     spiking_neuron, kwargs, sew=False)

    def forward(self, x):
        out = _branch(self, x, 2, last_neuron=False)
        out += x if self.downsample is None else self.downsample(x)
        return self.sn2(out)


class SpikingBottleneck(torch.nn.Module):
    """Spiking ResNet's Bottleneck: sn3(bn3 output + identity or downsample(x))."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _block_parts(self, inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer,
                     spiking_neuron, kwargs, sew=False)

    def forward(self, x):
        out = _branch(self, x, 3, last_neuron=False)
        out += x if self.downsample is None else self.downsample(x)
        return self.sn3(out)


def _resnet_parts(net, block, layers, num_classes, zero_init_residual, groups, width_per_group,
                  replace_stride_with_dilation, norm_layer, neuron, kwargs, block_extra):
    """The torchvision layout of SpikingJelly's ResNets: stem conv 7x7/2 → bn → sn → max-pool 3/2, four stages of
    64, 128, 256, 512 planes (stride 2 from the second on, or dilation where replace_stride_with_dilation says),
    global average pool, fc; kaiming-normal convs, BN weight 1 and bias 0, optionally the last BN of each branch 0."""
    norm_layer = norm_layer or BatchNorm2d
    dilate = replace_stride_with_dilation or [False, False, False]
    if len(dilate) != 3:
        raise ValueError(f"replace_stride_with_dilation should be None or a 3-element tuple, got {dilate}")
    net.inplanes, net.dilation, net.groups, net.base_width = 64, 1, groups, width_per_group
    net.conv1 = Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
    net.bn1 = norm_layer(64)
    net.sn1 = neuron(**copy.deepcopy(kwargs))
    net.maxpool = MaxPool2d(kernel_size=3, stride=2, padding=1)
    for i, (planes, count) in enumerate(zip((64, 128, 256, 512), layers)):
        stride, previous = (1 if i == 0 else 2), net.dilation
        if i > 0 and dilate[i - 1]:
            net.dilation, stride = net.dilation * stride, 1
        downsample = None
        if stride != 1 or net.inplanes != planes * block.expansion:
            downsample = torch.nn.Sequential(_conv(net.inplanes, planes * block.expansion, 1, stride),
                                             norm_layer(planes * block.expansion))
        extra = dict(block_extra, spiking_neuron=neuron, **kwargs)
        blocks = [block(net.inplanes, planes, stride, downsample, groups, width_per_group, previous, norm_layer,
                        **extra)]
        net.inplanes = planes * block.expansion
        blocks += [block(net.inplanes, planes, groups=groups, base_width=width_per_group, dilation=net.dilation,
                         norm_layer=norm_layer, **extra) for _ in range(1, count)]
        setattr(net, f"layer{i + 1}", torch.nn.Sequential(*blocks))
    net.avgpool = AdaptiveAvgPool2d((1, 1))
    net.fc = Linear(512 * block.expansion, num_classes)
    for m in net.modules():
        if isinstance(m, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, torch.nn.BatchNorm2d):
            torch.nn.init.constant_(m.weight, 1)
            torch.nn.init.constant_(m.bias, 0)
    if zero_init_residual:
        for m in net.modules():
            if hasattr(m, "expansion"):
                torch.nn.init.constant_(getattr(m, "bn3" if m.expansion == 4 else "bn2").weight, 0)


def _resnet_forward(net, x):
    """Stem, stages, pool; flattened from dimension 1 (step mode 's') or 2 ('m'), as the avgpool's step mode says;
    then fc."""
    x = net.maxpool(net.sn1(net.bn1(net.conv1(x))))
    x = net.layer4(net.layer3(net.layer2(net.layer1(x))))
    x = net.avgpool(x)
    x = torch.flatten(x, 1) if net.avgpool.step_mode == "s" else torch.flatten(x, 2)
    return net.fc(x)


class SEWResNet(torch.nn.Module):
    """spikingjelly.activation_based.model.sew_resnet.SEWResNet."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1, width_per_group=64,
                 replace_stride_with_dilation=None, norm_layer=None, cnf=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _resnet_parts(self, block, layers, num_classes, zero_init_residual, groups, width_per_group,
                      replace_stride_with_dilation, norm_layer, spiking_neuron, kwargs, dict(cnf=cnf))

    def _forward_impl(self, x):
        return _resnet_forward(self, x)

    def forward(self, x):
        return self._forward_impl(x)


class SpikingResNet(torch.nn.Module):
    """spikingjelly.activation_based.model.spiking_resnet.SpikingResNet."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1, width_per_group=64,
                 replace_stride_with_dilation=None, norm_layer=None, spiking_neuron=None, **kwargs):
        super().__init__()
        _resnet_parts(self, block, layers, num_classes, zero_init_residual, groups, width_per_group,
                      replace_stride_with_dilation, norm_layer, spiking_neuron, kwargs, {})

    def _forward_impl(self, x):
        return _resnet_forward(self, x)

    def forward(self, x):
        return self._forward_impl(x)


def _named(module, **classes):
    """A namespace of the classes under SpikingJelly's names (their __name__ too), from its module `module`."""
    for name, cls in classes.items():
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = module
    return types.SimpleNamespace(**classes)


def _sew_resnet18(pretrained=False, progress=True, cnf=None, spiking_neuron=None, **kwargs):
    """sew_resnet.sew_resnet18 (without pretrained weights)."""
    return SEWResNet(SEWBasicBlock, [2, 2, 2, 2], cnf=cnf, spiking_neuron=spiking_neuron, **kwargs)


# spikingjelly.activation_based.model.sew_resnet and .spiking_resnet (their classes; build with e.g.
# sew_resnet.SEWResNet(sew_resnet.BasicBlock, [2, 2, 2, 2], cnf="ADD", spiking_neuron=IFNode, ...))
sew_resnet = _named("spikingjelly.activation_based.model.sew_resnet", BasicBlock=SEWBasicBlock,
                    Bottleneck=SEWBottleneck, SEWResNet=SEWResNet)
sew_resnet.sew_resnet18 = _sew_resnet18
spiking_resnet = _named("spikingjelly.activation_based.model.spiking_resnet", BasicBlock=SpikingBasicBlock,
                        Bottleneck=SpikingBottleneck, SpikingResNet=SpikingResNet)


def set_step_mode(net, step_mode):
    for m in net.modules():
        if hasattr(m, "step_mode"):
            m.step_mode = step_mode


def reset_net(net):
    for m in net.modules():
        if hasattr(m, "reset"):
            m.reset()


def modules():
    """sys.modules entries that make `from spikingjelly.activation_based import functional, layer, neuron,
    surrogate` and `from spikingjelly.activation_based.model import sew_resnet, spiking_resnet` give the stand-ins
    (set_step_mode and reset_net as SpikingJelly's do them)."""
    ab = types.ModuleType("spikingjelly.activation_based")
    ab.layer = ab.neuron = ab.surrogate = sys.modules[__name__]
    ab.functional = types.SimpleNamespace(set_step_mode=set_step_mode, reset_net=reset_net)
    ab.model = types.ModuleType("spikingjelly.activation_based.model")
    ab.model.sew_resnet, ab.model.spiking_resnet = sew_resnet, spiking_resnet
    sj = types.ModuleType("spikingjelly")
    sj.activation_based = ab
    return {"spikingjelly": sj, "spikingjelly.activation_based": ab, "spikingjelly.activation_based.model": ab.model}
