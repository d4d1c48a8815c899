"""sj_standins.py — small classes with SpikingJelly's names, attributes, surrogate derivatives and neuron equations
(as its 2.0.0 defines them), so that spikefuse.torch's SpikingJelly conversions are tested where SpikingJelly is not
installed (CI); test_spikingjelly.py checks the same against the real package where it is. modules() makes them
importable under SpikingJelly's names (for the documentation's examples: test_readme.py, run_tutorials.py)."""
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


Conv2d, Linear, Flatten, MaxPool2d, AvgPool2d, BatchNorm1d = (
    _multi_step(c) for c in (torch.nn.Conv2d, torch.nn.Linear, torch.nn.Flatten, torch.nn.MaxPool2d,
                             torch.nn.AvgPool2d, torch.nn.BatchNorm1d))


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
    surrogate` give the stand-ins (set_step_mode and reset_net as SpikingJelly's do them)."""
    ab = types.ModuleType("spikingjelly.activation_based")
    ab.layer = ab.neuron = ab.surrogate = sys.modules[__name__]
    ab.functional = types.SimpleNamespace(set_step_mode=set_step_mode, reset_net=reset_net)
    sj = types.ModuleType("spikingjelly")
    sj.activation_based = ab
    return {"spikingjelly": sj, "spikingjelly.activation_based": ab}
