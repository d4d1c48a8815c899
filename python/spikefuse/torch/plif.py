"""plif.py — spikefuse.torch.PLIF, SpikingJelly's ParametricLIFNode fused over all T steps, and its ops: its w is an
input of the kernels and its dw an output of their backward, so it has ops of its own beside the LIF's: as _ops.py's,
an autograd Function in eager mode and (torch >= 2.4) custom ops "spikefuse::plif_forward" /
"spikefuse::plif_backward" while torch.compile or torch.export trace."""
import torch
from torch.autograd.function import once_differentiable

from . import _kernels, _ops, functional, spikingjelly_nodes
from .neuron_base import _Neuron


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
    x_seq [T, B, C, ...]) from the state v (None: v_reset). x_seq as LIF's; w float32 (float64 for a float64
    x_seq)."""
    x = functional.check_input(x_seq, "spikefuse PLIF")
    dtype = _kernels.state_dtype(x)
    if w.dtype is not dtype or w.device != x.device:
        hint = " (a float64 input takes a float64 module: call .double() on it)" if dtype is torch.float64 else ""
        raise TypeError(f"spikefuse PLIF: w must be {dtype} on {x.device}, got {w.dtype} on {w.device}{hint}")
    v = functional.check_state(v, x, "spikefuse PLIF")
    wc = w.contiguous()
    if _ops.CUSTOM_OPS and _ops.is_compiling():
        return _plif_forward(x, wc, v, list(pvec), keep_state)[:2]
    if not _ops._needs_graph(x, w, v):
        return _kernels.lif_forward(x, v, pvec, keep_state, w=wc)
    ckpt = _kernels.ckpt_for(x, pvec)
    out = _kernels.lif_forward(x, v, pvec, keep_state, w=wc, ckpt=ckpt)
    return PLIFFunction.apply(x, wc, v, ckpt, pvec, keep_state, out)


class PLIF(_Neuron):
    """Parametric LIF neurons (Fang et al. 2021; SpikingJelly's ParametricLIFNode), all T steps fused.

    As LIF with tau learned: k = sigmoid(w) = 1/tau, h = v + (x - (v - v_reset))·k (decay_input) or
    h = v - (v - v_reset)·k + x; w starts at -ln(init_tau - 1) (init_tau > 1). One w for the layer (a 0-dim
    parameter, as SpikingJelly's), or, with `channels` = C, one per channel of inputs [T, B, C, ...]. The backward
    gives dw, summed over every neuron and step in a fixed order, beside dx; only x, w (and the incoming state) are
    saved. Surrogates, state and the other arguments as LIF's (reset() between independent sequences)."""

    _model = "plif"
    _PARAMS = ("tau", "decay_input", "v_threshold", "v_reset", "detach_reset", "surrogate", "alpha",
               "grad_threshold", "per_channel")

    def __init__(self, init_tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate=None,
                 detach_reset=False, step_mode="m", *, store_v_seq=False, alpha=None, grad_threshold=None,
                 keep_state=True, channels=None, surrogate_function=None, backend=None):
        super().__init__(step_mode, store_v_seq, keep_state, surrogate, alpha, surrogate_function, backend,
                         tau=init_tau, decay_input=decay_input, v_threshold=v_threshold, v_reset=v_reset,
                         detach_reset=detach_reset, grad_threshold=grad_threshold, per_channel=channels is not None)
        w0 = -torch.log(torch.tensor(self.tau - 1.0))
        self.w = torch.nn.Parameter(w0 if channels is None else w0.repeat(int(channels)))

    @classmethod
    def _from_node(cls, node, kw):
        w = node.w.detach()
        m = cls(init_tau=float(1.0 + torch.exp(-w.float()).mean()), channels=None if w.dim() == 0 else w.numel(), **kw)
        with torch.no_grad():
            m.w.copy_(w.reshape(m.w.shape))
        m.w.requires_grad_(node.w.requires_grad)
        return spikingjelly_nodes.carry_state(node, m, w.device)

    @property
    def init_tau(self):
        """The time constant w started from (the constructor's init_tau); the learned one is 1 / sigmoid(w)."""
        return self.tau

    def _run(self, x_seq, u, keep):
        return plif_with_state(x_seq, self.w, self._pvec, u, keep)
