"""neurons.py — spikefuse.torch.PLIF, IF and ALIF: the neuron models beyond the LIF, fused over all T steps like
spikefuse.torch.LIF, with SpikingJelly's parameter names (ParametricLIFNode, IFNode) where SpikingJelly has the model.
The IF and ALIF are the LIF's autograd node with other parameters; the PLIF has its own, since its w is an input of
the kernels and its dw an output of their backward."""
import functools

import torch
from torch.autograd.function import once_differentiable

from .. import _lib, _neurons
from . import functional
from .functional import _launch_target, _run, check_input

_SPIKINGJELLY_SURROGATES = {"Sigmoid": "sigmoid", "ATan": "atan", "Rect": "rect"}


@functools.lru_cache(maxsize=256)
def neuron_params(model, **kw):
    """The checked sf_lif_params of a model (cached: modules look them up on every forward)."""
    return _neurons.neuron_params(model, **kw)


def _channels(x, w):
    """w's channel count and the neurons of a step in each channel's run: one w, or one per channel of x [T, B, C, ...]."""
    if w.numel() == 1:
        return 1, max(1, x[0].numel())
    if x.dim() < 3 or x.shape[2] != w.numel():
        raise ValueError(f"spikefuse PLIF: a w per channel ({w.numel()}) needs x_seq of shape [T, B, {w.numel()}, "
                         f"...], got {tuple(x.shape)}")
    return w.numel(), max(1, x[0, 0, 0].numel())


class PLIFFunction(torch.autograd.Function):
    """The autograd node of the fused PLIF: apply(x, w, params, target, (s,)) with x [T, ...] contiguous float32, w
    its learnable parameter (0-dim or [1]: one for the layer; [C]: one per channel of [T, B, C, ...]) and s the spikes
    the caller computed already (as LIFFunction)."""

    @staticmethod
    def forward(ctx, x, w, params, target, computed):
        ctx.save_for_backward(x, w)
        ctx.params = params
        ctx.target = target
        return computed[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, ds):
        x, w = ctx.saved_tensors
        ds = ds.contiguous()
        dx = torch.empty_like(x, memory_format=torch.contiguous_format)
        dw = torch.empty_like(w, memory_format=torch.contiguous_format)
        channels, hw = _channels(x, w)
        st = _neurons.plif_state(w.data_ptr(), dw.data_ptr(), channels, hw)
        T = x.shape[0]
        _run(_neurons.sf_lif_backward_state, "sf_lif_backward_state", ctx.target, ctx.params, T, x.numel() // T,
             x.data_ptr(), ds.data_ptr(), dx.data_ptr(), st)
        return dx, dw, None, None, None


def apply_plif(x_seq, w, params):
    """The fused PLIF over x_seq [T, ...] with its w and prepared sf_lif_params (neuron_params("plif", ...))."""
    x = check_input(x_seq)
    if w.dtype is not torch.float32 or w.device != x.device:
        raise TypeError(f"spikefuse PLIF: w must be float32 on {x.device}, got {w.dtype} on {w.device}")
    wc = w.detach().contiguous()
    target = _launch_target(x)
    s = torch.empty_like(x, memory_format=torch.contiguous_format)
    channels, hw = _channels(x, wc)
    T = x.shape[0]
    _run(_neurons.sf_lif_forward_state, "sf_lif_forward_state", target, params, T, x.numel() // T, x.data_ptr(),
         s.data_ptr(), _neurons.plif_state(wc.data_ptr(), None, channels, hw))
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        return PLIFFunction.apply(x, w, params, target, (s,))
    return s


def _surrogate_of(node):
    """(name, alpha) of a SpikingJelly node's Sigmoid, ATan or Rect surrogate."""
    sg = node.surrogate_function
    name = _SPIKINGJELLY_SURROGATES.get(type(sg).__name__)
    if name is None:
        raise ValueError(f"SpikingJelly surrogate {type(sg).__name__} has no spikefuse counterpart "
                         f"(supported: {', '.join(_SPIKINGJELLY_SURROGATES)})")
    if getattr(node, "step_mode", "m") != "m":
        raise ValueError(f"spikefuse.torch's neurons are multi-step: the SpikingJelly node has step_mode="
                         f"{node.step_mode!r}, expected 'm'")
    return name, sg.alpha


class _Neuron(torch.nn.Module):
    """What the three modules share: the surrogate options, the stateless calls (as spikefuse.torch.LIF: every call
    starts from v_reset, reset() does nothing), and their sf_lif_params."""

    step_mode = "m"

    def __init__(self, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold):
        super().__init__()
        self.v_threshold = float(v_threshold)
        self.v_reset = None if v_reset is None else float(v_reset)
        self.detach_reset = bool(detach_reset)
        self.surrogate = surrogate
        self.alpha = None if alpha is None else float(alpha)
        self.grad_threshold = None if grad_threshold is None else float(grad_threshold)

    def _common(self):
        return dict(v_threshold=self.v_threshold, v_reset=self.v_reset, detach_reset=self.detach_reset,
                    surrogate=self.surrogate, alpha=self.alpha, grad_threshold=self.grad_threshold)

    def reset(self):
        """Nothing to reset: the state starts anew on every call (kept for SpikingJelly's functional.reset_net)."""

    def extra_repr(self):
        alpha = self.params().alpha if self.alpha is None else self.alpha
        return (f"v_threshold={self.v_threshold}, v_reset={self.v_reset}, detach_reset={self.detach_reset}, "
                f"surrogate={self.surrogate!r}, alpha={alpha:g}, grad_threshold={self.grad_threshold}")


class PLIF(_Neuron):
    """Multi-step parametric LIF neurons (Fang et al. 2021; SpikingJelly's ParametricLIFNode), all T steps fused.

    As LIF with tau learned: k = sigmoid(w) = 1/tau, h = v + (x - (v - v_reset))·k (decay_input) or
    h = v - (v - v_reset)·k + x; w starts at -ln(init_tau - 1) (init_tau > 1). One w for the layer (a 0-dim
    parameter, as SpikingJelly's), or, with `channels` = C, one per channel of inputs [T, B, C, ...]. The backward
    gives dw, summed over every neuron and step in a fixed order, beside dx; only x and w are saved."""

    def __init__(self, init_tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None, channels=None):
        super().__init__(v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)
        self.init_tau = float(init_tau)
        self.decay_input = bool(decay_input)
        self.per_channel = channels is not None
        self.params()  # validates now (init_tau > 1 among the rest), before w is made from it
        w0 = -torch.log(torch.tensor(self.init_tau - 1.0))
        self.w = torch.nn.Parameter(w0 if channels is None else w0.repeat(int(channels)))

    def params(self):
        return neuron_params("plif", tau=self.init_tau, decay_input=self.decay_input, per_channel=self.per_channel,
                             **self._common())

    def forward(self, x_seq):
        return apply_plif(x_seq, self.w, self.params())

    def extra_repr(self):
        return f"init_tau={self.init_tau}, decay_input={self.decay_input}, " + super().extra_repr()

    @classmethod
    def from_spikingjelly(cls, node):
        """The PLIF equivalent to a SpikingJelly neuron.ParametricLIFNode (its w copied)."""
        name, alpha = _surrogate_of(node)
        m = cls(init_tau=2.0, decay_input=node.decay_input, v_threshold=node.v_threshold, v_reset=node.v_reset,
                detach_reset=node.detach_reset, surrogate=name, alpha=alpha)
        with torch.no_grad():
            m.w.copy_(node.w.detach().reshape(m.w.shape))
        m.init_tau = float(1.0 + torch.exp(-node.w.detach()).item())
        return m


class IF(_Neuron):
    """Multi-step integrate-and-fire neurons (SpikingJelly's IFNode), all T steps fused: h = v + x, spike where
    h >= v_threshold, reset to v_reset (v_reset=None: subtract v_threshold). Stateless as LIF."""

    def __init__(self, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid", alpha=None,
                 grad_threshold=None):
        super().__init__(v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)
        self.params()

    def params(self):
        return neuron_params("if", **self._common())

    def forward(self, x_seq):
        return functional.apply_lif(x_seq, self.params())

    @classmethod
    def from_spikingjelly(cls, node):
        """The IF equivalent to a SpikingJelly neuron.IFNode."""
        name, alpha = _surrogate_of(node)
        return cls(v_threshold=node.v_threshold, v_reset=node.v_reset, detach_reset=node.detach_reset,
                   surrogate=name, alpha=alpha)


class ALIF(_Neuron):
    """Multi-step adaptive-threshold LIF neurons (Bellec et al. 2018, LSNN), all T steps fused: the LIF's h with a
    threshold that rises with each spike and decays back,
        θ_t = v_threshold + beta·b_t,   b_t = rho·b_{t-1} + (1 - rho)·s_{t-1},   b_0 = 0,
    s_t = (h_t >= θ_t), the surrogate at h_t - θ_t, the soft reset (v_reset=None) subtracting θ_t; gradients flow
    through b in time. rho = exp(-1/tau_adapt) where tau_adapt is given. SpikingJelly has no such node; the other
    names are LIFNode's. Stateless as LIF."""

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None, rho=0.95, tau_adapt=None, beta=1.8):
        super().__init__(v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)
        self.tau = float(tau)
        self.decay_input = bool(decay_input)
        self.rho = float(rho)
        self.tau_adapt = None if tau_adapt is None else float(tau_adapt)
        self.beta = float(beta)
        self.params()

    def params(self):
        return neuron_params("alif", tau=self.tau, decay_input=self.decay_input, rho=self.rho,
                             tau_adapt=self.tau_adapt, beta=self.beta, **self._common())

    def forward(self, x_seq):
        return functional.apply_lif(x_seq, self.params())

    def extra_repr(self):
        return (f"tau={self.tau}, decay_input={self.decay_input}, rho={self.rho}, tau_adapt={self.tau_adapt}, "
                f"beta={self.beta}, " + super().extra_repr())
