"""functional.py — spikefuse.torch.functional: the fused multi-step LIF (lif) and batch norm → LIF (bn_lif) as
functions of tensors, the input checks every spikefuse module shares, and the cached parameter structs. The forward
runs all T steps in one kernel call; the backward recomputes the membrane potential from the saved input (nothing
else is kept) and runs the reverse time loop in one call."""
import functools

import torch

from .. import _lib
from . import _kernels, _ops


@functools.lru_cache(maxsize=256)
def lif_params(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
               alpha=None, grad_threshold=None):
    """The checked sf_lif_params for these arguments, in the hashable form the ops take (a tuple of its fields;
    cached: modules look them up on every forward). _lib.lif_params says how SpikingJelly's v_reset maps."""
    return _kernels.params_tuple(_lib.lif_params(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate,
                                                 alpha, grad_threshold))


def check_input(x_seq, what="spikefuse LIF", min_dim=1):
    """Rejects what the kernels cannot take, with a message that says what to do; returns a contiguous tensor."""
    if not isinstance(x_seq, torch.Tensor):
        raise TypeError(f"{what}: x_seq must be a torch.Tensor, got {type(x_seq).__name__}")
    if x_seq.dtype not in _kernels.INPUT_DTYPES:
        raise TypeError(f"{what}: x_seq must be float32, float16, bfloat16 or (on the CPU) float64, got "
                        f"{x_seq.dtype} (convert with x_seq.float())")
    if x_seq.dtype is torch.float64 and not x_seq.is_cpu:
        raise TypeError(f"{what}: float64 runs on the CPU only (libspikefuse has float64 kernels there, for "
                        f"comparisons and torch.autograd.gradcheck, but none on CUDA); x_seq is float64 on "
                        f"{x_seq.device}: move it with x_seq.cpu() (and the module with .cpu()), or use float32")
    if x_seq.dim() < min_dim or x_seq.shape[0] == 0:
        raise ValueError(f"{what}: x_seq must have shape [T, ...] with T >= 1 and at least {min_dim} dimensions, "
                         f"got {tuple(x_seq.shape)}")
    if not (x_seq.is_cuda or x_seq.is_cpu):
        raise ValueError(f"{what}: x_seq is on {x_seq.device}; only CPU and CUDA tensors are supported")
    return x_seq.contiguous()


def check_state(v, x, what):
    """The carried membrane state v for input x [T, ...]: it must hold one value per neuron of a step, on x's
    device. A different step shape (another batch size) is an error, never a broadcast."""
    if v is None:
        return None
    if tuple(v.shape) != tuple(x.shape[1:]):
        raise ValueError(f"{what}: the membrane state kept from the previous call has shape {tuple(v.shape)}, but "
                         f"this input's steps have shape {tuple(x.shape[1:])} (another batch size?); call reset() "
                         "(or spikingjelly's functional.reset_net) before a new sequence")
    if v.device != x.device:
        raise ValueError(f"{what}: the membrane state is on {v.device}, the input on {x.device}; call reset() "
                         "after moving the module")
    if v.dtype is not _kernels.state_dtype(x):
        raise ValueError(f"{what}: the membrane state is {v.dtype}, but a {x.dtype} input keeps it in "
                         f"{_kernels.state_dtype(x)}; call reset() before a sequence of another dtype")
    return v


def lif_with_state(x_seq, pvec, v=None, keep_state=False):
    """(spikes, v after the last step or an empty tensor) of the fused LIF over x_seq [T, ...] starting from the
    state v (None: v_reset), with the ops' parameter tuple pvec (see lif_params)."""
    x = check_input(x_seq)
    return _ops.lif(x, check_state(v, x, "spikefuse LIF"), pvec, keep_state)


def lif(x_seq, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
        alpha=None, grad_threshold=None):
    """Spikes of a multi-step LIF neuron layer, SpikingJelly's LIFNode(step_mode="m") semantics.

    x_seq: float32, float16 or bfloat16 [T, *] on the CPU or a CUDA device, or float64 on the CPU; returns spikes
    (exactly 0/1, in x_seq's dtype) of the same shape. The membrane (fp32; float64 for float64) starts at v_reset
    (0 for the soft reset, v_reset=None) on every call. alpha=None takes the surrogate's default (sigmoid 4, atan 2,
    fast_sigmoid 10, rect 1). grad_threshold (θ_grad): the surrogate gradient is 0 where the membrane potential
    h < θ_grad."""
    pvec = lif_params(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)
    return lif_with_state(x_seq, pvec)[0]


def apply_lif(x_seq, params):
    """The fused LIF over x_seq [T, ...] with a prepared sf_lif_params struct (as _lib.lif_params_from_nir gives)."""
    return lif_with_state(x_seq, _kernels.params_tuple(params))[0]


def bn_lif_with_state(x_seq, mean, var, gamma, beta, eps, pvec, v=None, keep_state=False):
    """(spikes, v after the last step or empty) of BN → LIF over x_seq [T, B, C, *spatial], normalised with mean
    and var ([C], taken as x_seq's batch statistics by the backward) and the affine gamma, beta ([C]), all float32
    (float64 for a float64 x_seq)."""
    x = check_input(x_seq, "spikefuse BNLIF", min_dim=3)
    C, dtype = x.shape[2], _kernels.state_dtype(x)
    tensors = dict(mean=mean, var=var, weight=gamma, bias=beta)
    for name, t in tensors.items():
        if t.shape != (C,) or t.dtype != dtype or t.device != x.device:
            hint = " (a float64 input takes a float64 module: call .double() on it)" if dtype is torch.float64 else ""
            raise ValueError(f"spikefuse BNLIF: {name} must be {dtype} [{C}] on {x.device}, got {t.dtype} "
                             f"{tuple(t.shape)} on {t.device}{hint}")
    c = [t.contiguous() for t in (mean, var, gamma, beta)]
    return _ops.bn_lif(x, *c, check_state(v, x, "spikefuse BNLIF"), float(eps), pvec, keep_state)


def batch_norm_statistics(x, running_mean, running_var, training, momentum):
    """(mean, var) that normalise x [T, B, C, *spatial] per channel: in training its batch statistics over every
    other dimension (biased var, computed in fp32, float64 for float64, and detached: the fused backward
    differentiates through them itself), with running_mean / running_var (when given) updated in place by
    PyTorch's rule (the unbiased var); in evaluation the running ones."""
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("spikefuse BNLIF: evaluation needs the running statistics (track_running_stats)")
        return running_mean, running_var
    dims = (0, 1) + tuple(range(3, x.dim()))
    with torch.no_grad():
        stats = _kernels.bn_statistics(x)  # the library's sums on the CPU in float32, else None
        if stats is None:
            var, mean = torch.var_mean(x.to(_kernels.state_dtype(x)), dim=dims, unbiased=False)
        else:
            mean, var = stats
        if running_mean is not None and running_var is not None:
            n = x.numel() // max(1, x.shape[2])
            running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)
            running_var.mul_(1 - momentum).add_(var * (n / max(n - 1, 1)), alpha=momentum)
    return mean, var


def eval_bn_then_lif(x, mean, var, gamma, beta, eps, pvec, v=None, keep_state=False):
    """BN with fixed statistics, then the LIF, unfused: the gradient of an evaluation-mode BNLIF (a fixed affine
    map per channel, which the fused backward, made for batch statistics, does not compute)."""
    shape = (1, 1, -1) + (1,) * (x.dim() - 3)
    scale = gamma * torch.rsqrt(var + eps)
    y = (x.to(_kernels.state_dtype(x)) - mean.view(shape)) * scale.view(shape) + beta.view(shape)
    s, v_out = lif_with_state(y, pvec, v, keep_state)
    return s.to(x.dtype), v_out


def bn_lif(x_seq, weight=None, bias=None, running_mean=None, running_var=None, training=True, momentum=0.1, eps=1e-5,
           tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
           alpha=None, grad_threshold=None):
    """Spikes of batch norm (over T, B and the spatial positions of each channel, as SpikingJelly's multi-step
    BatchNorm2d) followed by a multi-step LIF, fused: x_seq is [T, B, C, *spatial]. In training the batch
    statistics normalise (and update running_mean / running_var in place when given, PyTorch's rule); otherwise
    the running statistics do. weight, bias: the affine [C] (None: 1 and 0). Only x_seq is kept for the backward,
    which recomputes the normalised input and the membrane."""
    x = check_input(x_seq, "spikefuse BNLIF", min_dim=3)
    C, dtype = x.shape[2], _kernels.state_dtype(x)
    gamma = torch.ones(C, dtype=dtype, device=x.device) if weight is None else weight
    beta = torch.zeros(C, dtype=dtype, device=x.device) if bias is None else bias
    mean, var = batch_norm_statistics(x, running_mean, running_var, training, momentum)
    pvec = lif_params(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)
    if not training and torch.is_grad_enabled() and (x.requires_grad or gamma.requires_grad or beta.requires_grad):
        return eval_bn_then_lif(x, mean, var, gamma, beta, eps, pvec)[0]
    return bn_lif_with_state(x, mean, var, gamma, beta, eps, pvec)[0]
