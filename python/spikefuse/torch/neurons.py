"""neurons.py — spikefuse.torch.PLIF, IF and ALIF: the neuron models beyond the LIF, fused over all T steps like
spikefuse.torch.LIF (neuron.py, whose module base and state semantics they share), with SpikingJelly's parameter
names (ParametricLIFNode, IFNode) where SpikingJelly has the model. The IF runs the LIF's ops with other
parameters; the ALIF too, without a state across calls (SpikingJelly has no such node); the PLIF has ops of its
own, since its w is an input of the kernels and its dw an output of their backward: as _ops.py's, an autograd
Function in eager mode and (torch >= 2.4) custom ops "spikefuse::plif_forward" / "spikefuse::plif_backward" while
torch.compile or torch.export trace."""
import functools

import torch
from torch.autograd.function import once_differentiable

from .. import _neurons
from . import _kernels, _ops, functional
from .neuron import _Neuron, _surrogate_of


@functools.lru_cache(maxsize=256)
def neuron_params(model, **kw):
    """The ops' parameter tuple of a model (cached: modules rebuild it whenever an attribute changes)."""
    return _kernels.params_tuple(_neurons.neuron_params(model, **kw))


def plif_backward(x, w, v_in, ds, dv_in, pvec, want_dv, ckpt=None):
    """(dx in x's dtype, dw, ∂L/∂v_in or None), recomputing the membrane from x, w and v_in (and the forward's
    checkpoints, ckpt)."""
    dw = torch.empty_like(w)
    dx, dv_out = _kernels.lif_backward(x, v_in, ds, dv_in, pvec, want_dv, w=w, dw=dw, ckpt=ckpt)
    return dx, dw, dv_out


class PLIFFunction(torch.autograd.Function):
    """The PLIF's autograd node in eager mode: apply(x, w, v_in, ckpt, pvec, keep_state, (s, v_out)) with the
    outputs already computed by _kernels.lif_forward (in a tuple, as _ops.LIFFunction's) and its checkpoints."""

    @staticmethod
    def forward(ctx, x, w, v_in, ckpt, pvec, keep_state, computed):
        ctx.save_for_backward(x, w, v_in, ckpt)
        ctx.pvec, ctx.keep_state = pvec, keep_state
        return computed

    @staticmethod
    @once_differentiable
    def backward(ctx, ds, dv):
        x, w, v_in, ckpt = ctx.saved_tensors
        want_dv = _ops._wants_dv(v_in, ctx.needs_input_grad[2])
        dx, dw, dv_out = plif_backward(x, w, v_in, ds.contiguous(), _ops._dv_in(dv, ctx.keep_state), ctx.pvec,
                                       want_dv, ckpt)
        return dx, dw, dv_out, None, None, None, None


if _ops.CUSTOM_OPS:
    def _plif_forward_kernel(x, w, v_in, pvec, keep_state):
        ckpt = _ops.ckpt_op(x, pvec)
        s, v_out = _kernels.lif_forward(x, v_in, tuple(pvec), keep_state, w=w, ckpt=ckpt)
        return s, _ops._or_empty(v_out, x), ckpt

    def _plif_backward_kernel(x, w, v_in, ckpt, ds, dv_in, pvec, want_dv):
        dx, dw, dv_out = plif_backward(x, w, v_in, ds.contiguous(), dv_in, tuple(pvec), want_dv, ckpt)
        return dx, dw, _ops._or_empty(dv_out, x)

    _plif_backward = _ops.define_op(
        "plif_backward(Tensor x, Tensor w, Tensor? v_in, Tensor ckpt, Tensor ds, Tensor? dv_in, float[] pvec, "
        "bool want_dv) -> (Tensor, Tensor, Tensor)", _plif_backward_kernel,
        lambda x, w, v_in, ckpt, ds, dv_in, pvec, want_dv: (torch.empty_like(x), torch.empty_like(w),
                                                            _ops.state_like(x, want_dv)))

    def _plif_setup(ctx, inputs, output):
        x, w, v_in, pvec, keep_state = inputs
        ctx.save_for_backward(x, w, v_in, output[2])
        ctx.pvec, ctx.keep_state = pvec, keep_state

    def _plif_grad(ctx, ds, dv, _dckpt):
        x, w, v_in, ckpt = ctx.saved_tensors
        want_dv = _ops._wants_dv(v_in, ctx.needs_input_grad[2])
        dx, dw, dv_out = _plif_backward(x, w, v_in, ckpt, ds, _ops._dv_in(dv, ctx.keep_state), ctx.pvec, want_dv)
        return dx, dw, dv_out if want_dv else None, None, None

    _plif_forward = _ops.define_op(
        "plif_forward(Tensor x, Tensor w, Tensor? v_in, float[] pvec, bool keep_state) -> (Tensor, Tensor, Tensor)",
        _plif_forward_kernel,
        lambda x, w, v_in, pvec, keep_state: (torch.empty_like(x), _ops.state_like(x, keep_state),
                                              _ops.ckpt_op(x, pvec)),
        _plif_grad, _plif_setup)


def plif_with_state(x_seq, w, pvec, v=None, keep_state=False):
    """(spikes, v after the last step or None) of the PLIF with weight w (0-dim or [1]: one; [C]: per channel of
    x_seq [T, B, C, ...]) from the state v (None: v_reset). x_seq float32, float16 or bfloat16 (as LIF); w float32."""
    x = functional.check_input(x_seq, "spikefuse PLIF")
    if w.dtype is not torch.float32 or w.device != x.device:
        raise TypeError(f"spikefuse PLIF: w must be float32 on {x.device}, got {w.dtype} on {w.device}")
    v = functional.check_state(v, x, "spikefuse PLIF")
    wc = w.contiguous()
    if _ops.CUSTOM_OPS and _ops.is_compiling():
        return _plif_forward(x, wc, v, list(pvec), keep_state)[:2]
    if not _ops._needs_graph(x, w, v):
        return _kernels.lif_forward(x, v, pvec, keep_state, w=wc)
    ckpt = _kernels.ckpt_for(x, pvec)
    out = _kernels.lif_forward(x, v, pvec, keep_state, w=wc, ckpt=ckpt)
    return PLIFFunction.apply(x, wc, v, ckpt, pvec, keep_state, out)


class _ModelNeuron(_Neuron):
    """A _Neuron whose parameter tuple is its model's (self._model, and the extra attributes it names)."""

    _model = "lif"
    _EXTRA = ()

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in self._EXTRA and "_pvec" in self.__dict__:
            self._refresh_params()

    def _refresh_params(self):
        kw = {k: getattr(self, k) for k in self._EXTRA if k in self.__dict__}
        self.__dict__["_pvec"] = neuron_params(self._model, tau=self.tau, decay_input=self.decay_input,
                                               v_threshold=self.v_threshold, v_reset=self.v_reset,
                                               detach_reset=self.detach_reset, surrogate=self.surrogate,
                                               alpha=self.alpha, grad_threshold=self.grad_threshold, **kw)


class PLIF(_ModelNeuron):
    """Parametric LIF neurons (Fang et al. 2021; SpikingJelly's ParametricLIFNode), all T steps fused.

    As LIF with tau learned: k = sigmoid(w) = 1/tau, h = v + (x - (v - v_reset))·k (decay_input) or
    h = v - (v - v_reset)·k + x; w starts at -ln(init_tau - 1) (init_tau > 1). One w for the layer (a 0-dim
    parameter, as SpikingJelly's), or, with `channels` = C, one per channel of inputs [T, B, C, ...]. The backward
    gives dw, summed over every neuron and step in a fixed order, beside dx; only x, w (and the incoming state) are
    saved. State semantics as LIF (reset() between independent sequences)."""

    _model = "plif"
    _EXTRA = ("per_channel",)

    def __init__(self, init_tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None, step_mode="m", store_v_seq=False,
                 keep_state=True, channels=None):
        super().__init__(init_tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold,
                         step_mode, store_v_seq, keep_state)
        self.per_channel = channels is not None
        w0 = -torch.log(torch.tensor(self.tau - 1.0))
        self.w = torch.nn.Parameter(w0 if channels is None else w0.repeat(int(channels)))

    @property
    def init_tau(self):
        return self.tau

    def _run(self, x_seq, u, keep):
        return plif_with_state(x_seq, self.w, self._pvec, u, keep)

    @classmethod
    def from_spikingjelly(cls, node):
        """The PLIF equivalent to a SpikingJelly neuron.ParametricLIFNode (its w copied)."""
        surrogate, alpha = _surrogate_of(node)
        tau = float(1.0 + torch.exp(-node.w.detach().float()).item())  # w = -ln(tau - 1)
        m = cls(init_tau=tau, decay_input=node.decay_input, v_threshold=node.v_threshold, v_reset=node.v_reset,
                detach_reset=node.detach_reset, surrogate=surrogate, alpha=alpha,
                step_mode=getattr(node, "step_mode", "m"))
        with torch.no_grad():
            m.w.copy_(node.w.detach().reshape(m.w.shape))
        return m.to(node.w.device)


class IF(_ModelNeuron):
    """Integrate-and-fire neurons (SpikingJelly's IFNode), all T steps fused: h = v + x, spike where
    h >= v_threshold, reset to v_reset (v_reset=None: subtract v_threshold). State semantics as LIF."""

    _model = "if"

    def __init__(self, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid", alpha=None,
                 grad_threshold=None, step_mode="m", store_v_seq=False, keep_state=True):
        super().__init__(2.0, True, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold, step_mode,
                         store_v_seq, keep_state)

    def _run(self, x_seq, u, keep):
        return functional.lif_with_state(x_seq, self._pvec, u, keep)

    @classmethod
    def from_spikingjelly(cls, node):
        """The IF equivalent to a SpikingJelly neuron.IFNode."""
        surrogate, alpha = _surrogate_of(node)
        return cls(v_threshold=node.v_threshold, v_reset=node.v_reset, detach_reset=node.detach_reset,
                   surrogate=surrogate, alpha=alpha, step_mode=getattr(node, "step_mode", "m"))


class ALIF(_ModelNeuron):
    """Adaptive-threshold LIF neurons (Bellec et al. 2018, LSNN), all T steps fused: the LIF's h with a threshold
    that rises with each spike and decays back,
        θ_t = v_threshold + beta·b_t,   b_t = rho·b_{t-1} + (1 - rho)·s_{t-1},   b_0 = 0,
    s_t = (h_t >= θ_t), the surrogate at h_t - θ_t, the soft reset (v_reset=None) subtracting θ_t; gradients flow
    through b in time. rho = exp(-1/tau_adapt) where tau_adapt is given. SpikingJelly has no such node; the other
    names are LIFNode's. Every call starts anew (v at v_reset, b at 0): no state across calls, multi-step only."""

    _model = "alif"
    _EXTRA = ("rho", "tau_adapt", "beta")

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None, rho=0.95, tau_adapt=None, beta=1.8):
        super().__init__(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold, "m",
                         False, False)
        self.rho = float(rho)
        self.tau_adapt = None if tau_adapt is None else float(tau_adapt)
        self.beta = float(beta)

    def _run(self, x_seq, u, keep):
        return functional.lif_with_state(x_seq, self._pvec, None, False)

    def extra_repr(self):
        return f"rho={self.rho}, tau_adapt={self.tau_adapt}, beta={self.beta}, " + super().extra_repr()
