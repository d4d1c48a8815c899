"""reference.py — a plain PyTorch implementation of SpikingJelly's multi-step LIFNode with spikefuse's surrogates
and θ_grad, one time step at a time, differentiated by autograd; the tests run it in float64."""
import math

import torch


def surrogate_grad(name, alpha, z):
    """∂s/∂h at z = h - v_threshold."""
    if name == "sigmoid":
        sg = torch.sigmoid(alpha * z)
        return alpha * sg * (1 - sg)
    if name == "atan":
        return (alpha / 2) / (1 + (math.pi / 2 * alpha * z) ** 2)
    if name == "fast_sigmoid":
        return 1 / (alpha * z.abs() + 1) ** 2
    if name == "rect":
        return alpha * (z.abs() < 0.5 / alpha).to(z.dtype)
    raise ValueError(name)


class _Spike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, v_threshold, surrogate, alpha, grad_threshold):
        ctx.save_for_backward(h)
        ctx.cfg = (v_threshold, surrogate, alpha, grad_threshold)
        return (h >= v_threshold).to(h.dtype)

    @staticmethod
    def backward(ctx, ds):
        (h,) = ctx.saved_tensors
        v_threshold, surrogate, alpha, grad_threshold = ctx.cfg
        sg = surrogate_grad(surrogate, alpha, h - v_threshold)
        if grad_threshold is not None:
            sg = sg * (h >= grad_threshold).to(h.dtype)
        return ds * sg, None, None, None, None


DEFAULT_ALPHA = {"sigmoid": 4.0, "atan": 2.0, "fast_sigmoid": 10.0, "rect": 1.0}


def lif_reference(x_seq, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                  surrogate="sigmoid", alpha=None, grad_threshold=None):
    """Spikes of x_seq [T, *] with SpikingJelly's LIFNode equations (v_reset=None: soft reset)."""
    alpha = DEFAULT_ALPHA[surrogate] if alpha is None else alpha
    vr = 0.0 if v_reset is None else v_reset
    v = torch.full_like(x_seq[0], vr)
    out = []
    for x in x_seq:
        if decay_input:
            h = v + (x - (v - vr)) / tau
        else:
            h = v - (v - vr) / tau + x
        s = _Spike.apply(h, v_threshold, surrogate, alpha, grad_threshold)
        sr = s.detach() if detach_reset else s
        v = h - sr * v_threshold if v_reset is None else h * (1 - sr) + vr * sr
        out.append(s)
    return torch.stack(out)
