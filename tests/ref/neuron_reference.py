"""neuron_reference.py — the one float64 PyTorch reference of spikefuse's neurons (the equations of docs/config.md):
the LIF recurrence with surrogate spikes, resets, detach_reset, decay_input, θ_grad and grad_cut, the recurrent LIF
layer, the PLIF (the LIF with a and c from a learned w), the IF (a = c = 1) and the ALIF (a threshold that adapts
with the spikes), and the leaky readout.

It lives in tests/ref/, with the other PyTorch references, beside the fixture generators that import it as a sibling
(Python puts a script's own folder first on sys.path); the Python interface tests (python/tests) reach it through
PYTHONPATH=python:tests/ref, set by ctest's python_torch_lif, python/run_gpu.sh and python/README.md's command.
Neither side edits sys.path, and generate_all.sh stays a plain loop over the generators."""
import math

import torch

SURROGATES = ("sigmoid", "atan", "fast_sigmoid", "rect")  # the order of enum sf_surrogate
DEFAULT_ALPHA = {"sigmoid": 4.0, "atan": 2.0, "fast_sigmoid": 10.0, "rect": 1.0}


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


class Spike(torch.autograd.Function):
    """Heaviside(h - v_threshold) with Θ(0) = 1; backward: the surrogate, zero where h < grad_threshold if given."""

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


class AdaptiveSpike(torch.autograd.Function):
    """Heaviside(h - theta) for a threshold theta that is itself a function of the past (the ALIF's): the surrogate
    at z = h - theta goes to h and, negated, to theta; zero where h < grad_threshold if given."""

    @staticmethod
    def forward(ctx, h, theta, surrogate, alpha, grad_threshold):
        ctx.save_for_backward(h, theta)
        ctx.cfg = (surrogate, alpha, grad_threshold)
        return (h >= theta).to(h.dtype)

    @staticmethod
    def backward(ctx, ds):
        h, theta = ctx.saved_tensors
        surrogate, alpha, grad_threshold = ctx.cfg
        sg = surrogate_grad(surrogate, alpha, h - theta)
        if grad_threshold is not None:
            sg = sg * (h >= grad_threshold).to(h.dtype)
        return ds * sg, -ds * sg, None, None, None


class CutGrad(torch.autograd.Function):
    """Identity forward; backward: the gradient of h is 0 where h < grad_threshold (grad_cut)."""

    @staticmethod
    def forward(ctx, h, grad_threshold):
        ctx.save_for_backward(h)
        ctx.grad_threshold = grad_threshold
        return h.clone()

    @staticmethod
    def backward(ctx, dh):
        (h,) = ctx.saved_tensors
        return dh * (h >= ctx.grad_threshold).to(h.dtype), None


def cut(h, grad_threshold, grad_cut):
    """h as the neuron uses it: with grad_cut, no gradient reaches it where it is below grad_threshold."""
    return CutGrad.apply(h, grad_threshold) if grad_cut else h


def lif(x_seq, a, c, v_threshold=1.0, v_reset=0.0, soft_reset=False, detach_reset=False, surrogate="sigmoid",
        alpha=None, grad_threshold=None, v_rest=0.0, grad_cut=False, V=None, v_init=None):
    """The LIF recurrence over x_seq [T, ...], one step at a time: h = v_rest + a·(v - v_rest) + c·y with y = x_t, or,
    given a recurrent weight V [n, n] (spikefuse's rlif layer), y = x_t + V·s_{t-1} (s_0 = 0, the recurrent path
    carrying gradient); spike, reset (to v_reset, or by subtracting v_threshold if soft_reset; detach_reset detaches
    only the reset). The membrane starts at the reset value and leaks towards v_rest: 0 in spikefuse's kernels, v_reset
    in SpikingJelly's LIFNode, or at v_init (a state carried from an earlier call) where given. With grad_cut, no
    gradient reaches h where it is below grad_threshold. Returns (spikes, h)."""
    alpha = DEFAULT_ALPHA[surrogate] if alpha is None else alpha
    v = torch.full_like(x_seq[0], 0.0 if soft_reset else v_reset) if v_init is None else v_init
    s = torch.zeros_like(x_seq[0])
    spikes, hs = [], []
    for t in range(x_seq.shape[0]):  # not `for x in x_seq`: unbind would turn some +0 gradients into -0
        y = x_seq[t] if V is None else x_seq[t] + s @ V.T
        h = cut(v_rest + a * (v - v_rest) + c * y, grad_threshold, grad_cut)
        s = Spike.apply(h, v_threshold, surrogate, alpha, grad_threshold)
        r = s.detach() if detach_reset else s
        v = h - v_threshold * r if soft_reset else h * (1 - r) + v_reset * r
        spikes.append(s)
        hs.append(h)
    return torch.stack(spikes), torch.stack(hs)


def plif_coeffs(w, decay_input):
    """The PLIF's a and c from its w (k = sigmoid(w) = 1/tau): a = 1 - k, c = k (decay_input) or 1."""
    k = torch.sigmoid(w)
    return 1 - k, (k if decay_input else torch.ones_like(k))


def alif(x_seq, a, c, v_threshold=1.0, beta=1.8, rho=0.95, v_reset=0.0, soft_reset=False, detach_reset=False,
         surrogate="sigmoid", alpha=None, grad_threshold=None, grad_cut=False):
    """The ALIF (Bellec et al. 2018) over x_seq [T, ...]: theta_t = v_threshold + beta·b_t with b_t = rho·b_{t-1} +
    (1 - rho)·s_{t-1} and b_0 = 0; h = a·v + c·x, s = Θ(h - theta_t), reset to v_reset or by subtracting theta_t.
    detach_reset detaches the spike in the reset only (b and the soft reset's theta keep their gradients).
    Returns (spikes, h, theta)."""
    alpha = DEFAULT_ALPHA[surrogate] if alpha is None else alpha
    v = torch.full_like(x_seq[0], 0.0 if soft_reset else v_reset)
    b = torch.zeros_like(x_seq[0])
    spikes, hs, thetas = [], [], []
    for t in range(x_seq.shape[0]):
        theta = v_threshold + beta * b
        h = cut(a * v + c * x_seq[t], grad_threshold, grad_cut)
        s = AdaptiveSpike.apply(h, theta, surrogate, alpha, grad_threshold)
        r = s.detach() if detach_reset else s
        v = h - theta * r if soft_reset else h * (1 - r) + v_reset * r
        b = rho * b + (1 - rho) * s
        spikes.append(s)
        hs.append(h)
        thetas.append(theta)
    return torch.stack(spikes), torch.stack(hs), torch.stack(thetas)



def rlif(x_seq, V, a, c, **kw):
    """The recurrent LIF layer: lif() with the recurrent weight V."""
    return lif(x_seq, a, c, V=V, **kw)


def lif_node(x_seq, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
             surrogate="sigmoid", alpha=None, grad_threshold=None):
    """Spikes of x_seq [T, *] with SpikingJelly's LIFNode parameters and equations (v_reset=None: soft reset)."""
    soft_reset = v_reset is None
    v_reset = 0.0 if soft_reset else v_reset
    a, c = 1 - 1 / tau, (1 / tau if decay_input else 1.0)
    return lif(x_seq, a, c, v_threshold, v_reset, soft_reset, detach_reset, surrogate, alpha, grad_threshold,
               v_rest=v_reset)[0]


def leaky_readout(o_seq, a, c):
    """The non-spiking readout r_t = a·r_{t-1} + c·o_t over o_seq [T, ...], from r_0 = 0."""
    r, out = torch.zeros_like(o_seq[0]), []
    for t in range(o_seq.shape[0]):
        r = a * r + c * o_seq[t]
        out.append(r)
    return torch.stack(out)
