"""_ops.py — the differentiable fused ops over _kernels.py, in two forms with the same semantics:
- eager (every torch): torch.autograd.Function, with the forward kernel launched before Function.apply so that
  autograd's bookkeeping overlaps it on a GPU (each microsecond of host time shows in a single pass);
- traced (torch >= 2.4, unless SPIKEFUSE_CUSTOM_OPS=0): operators defined through torch.library
  ("spikefuse::lif_forward", ...) with fake kernels (shapes and dtypes only) and registered autograd, which
  torch.compile(fullgraph=True) keeps in its graph without a break and torch.export writes out. They are used while
  torch.compile / torch.export trace (torch.compiler.is_compiling()), and may be called directly as
  torch.ops.spikefuse.*.

lif(x, v_in, pvec, keep_state) -> (s, v_out) and bn_lif(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state)
-> (s, v_out): v_in (None: the sequence starts at v_reset) and v_out ([*x.shape[1:]] fp32, float64 for a float64
x; None in eager mode and an empty tensor in traced mode without keep_state) carry the membrane across calls, and
the gradient flows through them from one call to the previous one. Beside x, the backward keeps the forward's
checkpoints of the membrane every 32 steps (on CUDA past 32 steps: 1/32 of it), where its recompute starts. mean and
var are taken as x's batch statistics (the backward differentiates through them), so pass them detached."""
import os

import torch
from torch.autograd.function import once_differentiable

from . import _kernels

CUSTOM_OPS = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and \
    os.environ.get("SPIKEFUSE_CUSTOM_OPS", "1") != "0"


def is_compiling():
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and compiler.is_compiling())


def _dv_in(dv, keep_state):
    """The gradient reaching v_out: none when the state was not kept or nothing used it."""
    return dv.contiguous() if keep_state and dv is not None and dv.numel() else None


def _wants_dv(v_in, needs_grad):
    return v_in is not None and needs_grad


def _needs_graph(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class LIFFunction(torch.autograd.Function):
    """The fused LIF's autograd node in eager mode: apply(x, v_in, ckpt, pvec, keep_state, (s, v_out)) with the
    outputs already computed by _kernels.lif_forward (inside a tuple, so autograd does not see inputs returned as
    outputs, which it would turn into views) and the checkpoints it wrote for the backward (ckpt, or None)."""

    @staticmethod
    def forward(ctx, x, v_in, ckpt, pvec, keep_state, computed):
        ctx.save_for_backward(x, v_in, ckpt)
        ctx.pvec, ctx.keep_state = pvec, keep_state
        return computed

    @staticmethod
    @once_differentiable
    def backward(ctx, ds, dv):
        x, v_in, ckpt = ctx.saved_tensors
        want_dv = _wants_dv(v_in, ctx.needs_input_grad[1])
        dx, dv_out = _kernels.lif_backward(x, v_in, ds.contiguous(), _dv_in(dv, ctx.keep_state), ctx.pvec, want_dv,
                                           ckpt=ckpt)
        return dx, dv_out, None, None, None, None


class BNLIFFunction(torch.autograd.Function):
    """The fused BN+LIF's autograd node in eager mode (as LIFFunction)."""

    @staticmethod
    def forward(ctx, x, mean, var, gamma, beta, v_in, ckpt, eps, pvec, keep_state, computed):
        ctx.save_for_backward(x, mean, var, gamma, beta, v_in, ckpt)
        ctx.eps, ctx.pvec, ctx.keep_state = eps, pvec, keep_state
        return computed

    @staticmethod
    @once_differentiable
    def backward(ctx, ds, dv):
        x, mean, var, gamma, beta, v_in, ckpt = ctx.saved_tensors
        want_dv = _wants_dv(v_in, ctx.needs_input_grad[5])
        dx, dgamma, dbeta, dv_out = _kernels.bn_lif_backward(x, mean, var, gamma, beta, v_in, ds.contiguous(),
                                                             _dv_in(dv, ctx.keep_state), ctx.eps, ctx.pvec, want_dv,
                                                             ckpt=ckpt)
        return dx, None, None, dgamma, dbeta, dv_out, None, None, None, None, None


def _eager_lif(x, v_in, pvec, keep_state):
    if not _needs_graph(x, v_in):
        return _kernels.lif_forward(x, v_in, pvec, keep_state)
    ckpt = _kernels.ckpt_for(x, pvec)
    out = _kernels.lif_forward(x, v_in, pvec, keep_state, ckpt=ckpt)
    return LIFFunction.apply(x, v_in, ckpt, pvec, keep_state, out)


def _eager_bn_lif(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state):
    if not _needs_graph(x, gamma, beta, v_in):
        return _kernels.bn_lif_forward(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state)
    ckpt = _kernels.ckpt_for(x, pvec)
    out = _kernels.bn_lif_forward(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state, ckpt=ckpt)
    return BNLIFFunction.apply(x, mean, var, gamma, beta, v_in, ckpt, eps, pvec, keep_state, out)


def _or_empty(t, x):
    """Custom ops return tensors only: an absent state is an empty one."""
    return t if t is not None else x.new_empty((0,), dtype=_kernels.state_dtype(x))


# Ops are defined through torch.library's Library API rather than torch.library.custom_op: custom_op's per-call
# wrapper cost about 130 µs of host time per op call on an H200 host with torch 2.11 (docs/notebook/perf.md, Python), more
# than the Python kernel behind it; the schema, fake kernels and registered autograd are the same either way.
_LIBRARY = torch.library.Library("spikefuse", "FRAGMENT") if CUSTOM_OPS else None


def define_op(schema, kernel, fake, backward=None, setup_context=None):
    """Defines spikefuse::<name> by its schema "name(args) -> returns": kernel runs it on every backend (the
    library picks the device from the tensors), fake gives tracing its output shapes, and backward (with
    setup_context) is its registered autograd, if it has one; returns the op."""
    name = schema.split("(", 1)[0]
    _LIBRARY.define(schema)
    _LIBRARY.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"spikefuse::{name}", fake, lib=_LIBRARY)
    if backward is not None:
        torch.library.register_autograd(f"spikefuse::{name}", backward, setup_context=setup_context, lib=_LIBRARY)
    return getattr(torch.ops.spikefuse, name).default


def state_like(x, keep):
    """The fake v_out (or dv_out): [*x.shape[1:]] in the state's dtype when kept, else empty."""
    return x.new_empty(x.shape[1:] if keep else (0,), dtype=_kernels.state_dtype(x))


def ckpt_op(x, pvec):
    """The checkpoints a forward op returns for its backward (_kernels.ckpt_for; empty where there are none); its
    fake has the same shape."""
    return x.new_empty((_kernels.ckpt_numel(x, pvec),), dtype=torch.float32)


if CUSTOM_OPS:
    # the forward ops return the checkpoints they wrote (ckpt_op) as a third output, which their autograd saves
    def _lif_forward_kernel(x, v_in, pvec, keep_state):
        ckpt = ckpt_op(x, pvec)
        s, v_out = _kernels.lif_forward(x, v_in, tuple(pvec), keep_state, ckpt=ckpt)
        return s, _or_empty(v_out, x), ckpt

    def _lif_backward_kernel(x, v_in, ckpt, ds, dv_in, pvec, want_dv):
        dx, dv_out = _kernels.lif_backward(x, v_in, ds.contiguous(), dv_in, tuple(pvec), want_dv, ckpt=ckpt)
        return dx, _or_empty(dv_out, x)

    _lif_backward = define_op("lif_backward(Tensor x, Tensor? v_in, Tensor ckpt, Tensor ds, Tensor? dv_in, "
                              "float[] pvec, bool want_dv) -> (Tensor, Tensor)", _lif_backward_kernel,
                              lambda x, v_in, ckpt, ds, dv_in, pvec, want_dv: (torch.empty_like(x),
                                                                               state_like(x, want_dv)))

    def _lif_setup(ctx, inputs, output):
        x, v_in, pvec, keep_state = inputs
        ctx.save_for_backward(x, v_in, output[2])
        ctx.pvec, ctx.keep_state = pvec, keep_state

    def _lif_grad(ctx, ds, dv, _dckpt):
        x, v_in, ckpt = ctx.saved_tensors
        want_dv = _wants_dv(v_in, ctx.needs_input_grad[1])
        dx, dv_out = _lif_backward(x, v_in, ckpt, ds, _dv_in(dv, ctx.keep_state), ctx.pvec, want_dv)
        return dx, dv_out if want_dv else None, None, None

    _lif_forward = define_op("lif_forward(Tensor x, Tensor? v_in, float[] pvec, bool keep_state) -> "
                             "(Tensor, Tensor, Tensor)", _lif_forward_kernel,
                             lambda x, v_in, pvec, keep_state: (torch.empty_like(x), state_like(x, keep_state),
                                                                ckpt_op(x, pvec)),
                             _lif_grad, _lif_setup)

    def _bn_lif_forward_kernel(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state):
        ckpt = ckpt_op(x, pvec)
        s, v_out = _kernels.bn_lif_forward(x, mean, var, gamma, beta, v_in, eps, tuple(pvec), keep_state, ckpt=ckpt)
        return s, _or_empty(v_out, x), ckpt

    def _bn_lif_backward_kernel(x, mean, var, gamma, beta, v_in, ckpt, ds, dv_in, eps, pvec, want_dv):
        dx, dgamma, dbeta, dv_out = _kernels.bn_lif_backward(x, mean, var, gamma, beta, v_in, ds.contiguous(), dv_in,
                                                             eps, tuple(pvec), want_dv, ckpt=ckpt)
        return dx, dgamma, dbeta, _or_empty(dv_out, x)

    _bn_lif_backward = define_op(
        "bn_lif_backward(Tensor x, Tensor mean, Tensor var, Tensor gamma, Tensor beta, Tensor? v_in, Tensor ckpt, "
        "Tensor ds, Tensor? dv_in, float eps, float[] pvec, bool want_dv) -> (Tensor, Tensor, Tensor, Tensor)",
        _bn_lif_backward_kernel,
        lambda x, mean, var, gamma, beta, v_in, ckpt, ds, dv_in, eps, pvec, want_dv: (
            torch.empty_like(x), torch.empty_like(gamma), torch.empty_like(beta), state_like(x, want_dv)))

    def _bn_lif_setup(ctx, inputs, output):
        x, mean, var, gamma, beta, v_in, eps, pvec, keep_state = inputs
        ctx.save_for_backward(x, mean, var, gamma, beta, v_in, output[2])
        ctx.eps, ctx.pvec, ctx.keep_state = eps, pvec, keep_state

    def _bn_lif_grad(ctx, ds, dv, _dckpt):
        x, mean, var, gamma, beta, v_in, ckpt = ctx.saved_tensors
        want_dv = _wants_dv(v_in, ctx.needs_input_grad[5])
        dx, dgamma, dbeta, dv_out = _bn_lif_backward(x, mean, var, gamma, beta, v_in, ckpt, ds,
                                                     _dv_in(dv, ctx.keep_state), ctx.eps, ctx.pvec, want_dv)
        return dx, None, None, dgamma, dbeta, dv_out if want_dv else None, None, None, None

    _bn_lif_forward = define_op(
        "bn_lif_forward(Tensor x, Tensor mean, Tensor var, Tensor gamma, Tensor beta, Tensor? v_in, float eps, "
        "float[] pvec, bool keep_state) -> (Tensor, Tensor, Tensor)", _bn_lif_forward_kernel,
        lambda x, mean, var, gamma, beta, v_in, eps, pvec, keep_state: (torch.empty_like(x),
                                                                         state_like(x, keep_state), ckpt_op(x, pvec)),
        _bn_lif_grad, _bn_lif_setup)


def lif(x, v_in, pvec, keep_state):
    if CUSTOM_OPS and is_compiling():
        return _lif_forward(x, v_in, list(pvec), keep_state)[:2]
    return _eager_lif(x, v_in, pvec, keep_state)


def bn_lif(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state):
    if CUSTOM_OPS and is_compiling():
        return _bn_lif_forward(x, mean, var, gamma, beta, v_in, float(eps), list(pvec), keep_state)[:2]
    return _eager_bn_lif(x, mean, var, gamma, beta, v_in, float(eps), pvec, keep_state)
