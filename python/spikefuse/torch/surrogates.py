"""surrogates.py — a neuron's surrogate gradient given as spikefuse's name ("sigmoid", "atan", "fast_sigmoid", "rect")
or as a SpikingJelly surrogate object (surrogate.ATan(alpha=2.0), ...). A SpikingJelly object maps to the spikefuse
surrogate of the same derivative, and the mapping is checked against the kernels themselves: the object's
derivative and the library's, on a grid across the surrogate's width, must agree, so a version of SpikingJelly whose
function differs is refused rather than converted into another one."""
import torch

from .. import _lib, _neuron_params
from . import _kernels

# SpikingJelly's class name -> (spikefuse surrogate, its alpha from the object, when the derivatives agree)
_COUNTERPARTS = {
    "Sigmoid": ("sigmoid", lambda sg: sg.alpha, "any alpha"),
    "ATan": ("atan", lambda sg: sg.alpha, "any alpha"),
    "Rect": ("rect", lambda sg: sg.alpha, "any alpha"),
    # alpha/(2(1 + alpha|z|)^2): fast_sigmoid's 1/(1 + alpha|z|)^2 scaled by alpha/2
    "SoftSign": ("fast_sigmoid", lambda sg: sg.alpha, "alpha = 2 only"),
    # alpha/(1 + |z|)^2: fast_sigmoid with alpha 1, scaled by alpha
    "SuperSpike": ("fast_sigmoid", lambda sg: 1.0, "alpha = 1 only"),
    # 1/(2w) inside |z| < w, c outside: rect with alpha = 1/(2w) where c = 0 (SpikingJelly 0.0.0.0.14's is 1/w inside)
    "PiecewiseLeakyReLU": ("rect", lambda sg: 0.5 / sg.w, "c = 0 only, SpikingJelly 2"),
}
SUPPORTED = ("Sigmoid, ATan, Rect (any alpha), SoftSign (alpha = 2), SuperSpike (alpha = 1), "
             "PiecewiseLeakyReLU (c = 0, SpikingJelly 2)")


def resolve(surrogate, alpha):
    """(name, alpha) of a surrogate given as a spikefuse name (alpha None: its default) or as a SpikingJelly
    surrogate object, which carries its own alpha (alpha must then be None)."""
    if isinstance(surrogate, str):
        _lib.surrogate_index(surrogate)  # an unknown name raises ValueError listing the known ones
        return surrogate, alpha
    if alpha is not None:
        raise ValueError(f"alpha = {alpha} given beside the SpikingJelly surrogate {type(surrogate).__name__}, which "
                         "has its own: give one of them")
    return from_spikingjelly(surrogate)


def from_spikingjelly(sg):
    """(spikefuse surrogate name, alpha) with the derivative of the SpikingJelly surrogate object sg; ValueError
    naming it where spikefuse has none."""
    what = type(sg).__name__
    known = _COUNTERPARTS.get(what)
    if known is None:
        raise ValueError(f"SpikingJelly surrogate {what} has no spikefuse counterpart; supported: {SUPPORTED}")
    if getattr(sg, "spiking", True) is False:
        raise ValueError(f"SpikingJelly surrogate {what}(spiking=False) runs its smooth primitive forward, so the "
                         "neuron would not spike: spikefuse's neurons always spike (use spiking=True)")
    name, alpha_of, where = known
    try:
        alpha = float(alpha_of(sg))
    except (AttributeError, TypeError, ZeroDivisionError) as e:
        raise ValueError(f"SpikingJelly surrogate {what}: cannot read its parameters ({e})") from None
    _check_same_derivative(sg, what, name, alpha, where)
    return name, alpha


def _check_same_derivative(sg, what, name, alpha, where):
    """sg's derivative against the library's surrogate `name` with `alpha`, on 81 points across ±4/alpha (none
    on a rectangle's edge): both computed in float32, they must agree to 1e-4 of their peak."""
    z = (torch.linspace(-4.0, 4.0, 81) + 0.0123) / alpha
    zg = z.clone().requires_grad_(True)
    try:
        spikes = sg(zg)
        (theirs,) = torch.autograd.grad(spikes.sum(), zg)
    except Exception as e:
        raise ValueError(f"SpikingJelly surrogate {what}: calling it on a float32 CPU tensor failed ({e!r})") from None
    ours = _kernel_derivative(name, alpha, z)
    peak = max(float(ours.abs().max()), 1e-12)
    bad = ((theirs.detach().float() - ours).abs() > 1e-4 * peak).nonzero()
    if len(bad) or not torch.equal(spikes.detach().float(), (z >= 0).float()):
        i = int(bad[0]) if len(bad) else 0
        raise ValueError(f"SpikingJelly surrogate {what} ({_describe(sg)}) is not spikefuse's {name} with alpha = "
                         f"{alpha:g}: at z = {float(z[i]):.4g} its derivative is {float(theirs[i]):.6g}, spikefuse's "
                         f"{float(ours[i]):.6g} (they agree for {where}); supported: {SUPPORTED}")


def _kernel_derivative(name, alpha, z):
    """∂s/∂h at h - v_threshold = z as the library's CPU kernels compute it: the backward of one step with
    v_threshold 0, c = 1 and ds = 1, where dx is the surrogate at x."""
    pvec = _kernels.params_tuple(_neuron_params.neuron_params("lif", decay_input=False, v_threshold=0.0,
                                                              surrogate=name, alpha=alpha))
    x = z.reshape(1, -1).contiguous()
    return _kernels.lif_backward(x, None, torch.ones_like(x), None, pvec, False)[0].reshape(-1)


def _describe(sg):
    fields = ("alpha", "w", "c")
    return ", ".join(f"{f}={getattr(sg, f)!r}" for f in fields if hasattr(sg, f)) or "no parameters"
