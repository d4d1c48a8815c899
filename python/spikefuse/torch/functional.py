"""functional.py — spikefuse.torch.functional.lif: the fused multi-step LIF neuron as a torch.autograd.Function.
The forward runs all T steps in one kernel call; the backward recomputes the membrane potential from the saved
input (nothing else is kept) and runs the reverse time loop in one call."""
import functools

import torch
from torch.autograd.function import once_differentiable

from .. import _lib


@functools.lru_cache(maxsize=256)
def lif_params(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
               alpha=None, grad_threshold=None):
    """The checked sf_lif_params for these arguments (cached: modules look them up on every forward)."""
    return _lib.lif_params(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold)


@functools.lru_cache(maxsize=None)
def _cuda_devices_in_library():
    return _lib.cuda_device_count()


def _stream_by_object(index):
    return torch.cuda.current_stream(index).cuda_stream


# The hot path runs once per layer and direction, and on a GPU its host time is exposed wherever the queue runs dry,
# so it uses the cheapest accessors: torch's private ones where they exist (torch's generated code uses them too),
# the public ones otherwise.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _stream_by_object)
_current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
_CPU = (_lib.DEVICE_CPU, 0, _lib.Device(_lib.DEVICE_CPU, 0), 0)
_CUDA_DEVICES = {}  # CUDA index -> its sf_device struct, built once the library has been found to have CUDA


def _launch_target(t):
    """(device kind, device index, sf_device, stream handle) for a kernel call on tensor t's memory."""
    if not t.is_cuda:
        return _CPU
    index = t.get_device()
    device = _CUDA_DEVICES.get(index)
    if device is None:
        if _cuda_devices_in_library() == 0:
            raise RuntimeError(f"spikefuse: got a CUDA tensor ({t.device}) but {_lib.LIBRARY_PATH} has no usable "
                               f"CUDA device (build: {_lib.build_info()}); reinstall spikefuse where nvcc is present, "
                               "or move the tensor to the CPU")
        device = _CUDA_DEVICES.setdefault(index, _lib.Device(_lib.DEVICE_CUDA, index))
    return _lib.DEVICE_CUDA, index, device, _current_raw_stream(index)


def _run(kernel, name, target, *args):
    """Calls a kernel entry point (a ctypes function) with the tensor's CUDA device current, since the library
    launches on the current device, and raises the library's error if it fails."""
    kind, index, device, stream = target
    if kind == _lib.DEVICE_CUDA and index != _current_device():
        with torch.cuda.device(index):
            status = kernel(*args, device, stream)
    else:
        status = kernel(*args, device, stream)
    if status:
        _lib.check(status, name)


def _spikes(x, params, target):
    """The fused forward kernel: spikes of x [T, ...] (float32, contiguous)."""
    T = x.shape[0]
    s = torch.empty_like(x, memory_format=torch.contiguous_format)
    _run(_lib.sf_lif_forward, "sf_lif_forward", target, params, T, x.numel() // T, x.data_ptr(), s.data_ptr())
    return s


class LIFFunction(torch.autograd.Function):
    """The autograd node of the fused LIF (use functional.lif or LIF, which call it as below).

    apply(x, params, target, (s,)): x [T, ...] float32 contiguous; s its spikes, already computed by the caller with
    _spikes: launching the forward kernel before autograd's bookkeeping lets a GPU start at once. The spikes come in
    a tuple so that autograd does not see an input returned as an output (which it would turn into a view)."""

    @staticmethod
    def forward(ctx, x, params, target, computed):
        ctx.save_for_backward(x)
        ctx.params = params
        ctx.target = target  # autograd runs the backward on the forward's stream, so the same target holds
        return computed[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, ds):
        (x,) = ctx.saved_tensors
        ds = ds.contiguous()  # a stride-0 gradient (from s.sum()) is expanded here
        dx = torch.empty_like(x, memory_format=torch.contiguous_format)
        T = x.shape[0]
        _run(_lib.sf_lif_backward, "sf_lif_backward", ctx.target, ctx.params, T, x.numel() // T, x.data_ptr(),
             ds.data_ptr(), dx.data_ptr())
        return dx, None, None, None


def check_input(x_seq):
    """Rejects what the kernels cannot take, with a message that says what to do; returns a contiguous tensor."""
    if not isinstance(x_seq, torch.Tensor):
        raise TypeError(f"spikefuse LIF: x_seq must be a torch.Tensor, got {type(x_seq).__name__}")
    if x_seq.dtype is not torch.float32:
        raise TypeError(f"spikefuse LIF: x_seq must be float32, got {x_seq.dtype} (convert with x_seq.float())")
    if x_seq.dim() == 0 or x_seq.shape[0] == 0:
        raise ValueError(f"spikefuse LIF: x_seq must have shape [T, ...] with T >= 1, got {tuple(x_seq.shape)}")
    if not (x_seq.is_cuda or x_seq.is_cpu):
        raise ValueError(f"spikefuse LIF: x_seq is on {x_seq.device}; only CPU and CUDA tensors are supported")
    return x_seq.contiguous()


def apply_lif(x_seq, params):
    """The fused LIF over x_seq [T, ...] with prepared sf_lif_params (see lif_params)."""
    x = check_input(x_seq)
    target = _launch_target(x)
    s = _spikes(x, params, target)
    if x.requires_grad and torch.is_grad_enabled():
        return LIFFunction.apply(x, params, target, (s,))
    return s


def lif(x_seq, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
        alpha=None, grad_threshold=None):
    """Spikes of a multi-step LIF neuron layer, SpikingJelly's LIFNode(step_mode="m") semantics.

    x_seq: float32 [T, *] on the CPU or a CUDA device; returns spikes (0/1 float32) of the same shape. The membrane
    starts at v_reset (0 for the soft reset, v_reset=None) on every call. alpha=None takes the surrogate's default
    (sigmoid 4, atan 2, fast_sigmoid 10, rect 1). grad_threshold (θ_grad): the surrogate gradient is 0 where the
    membrane potential h < θ_grad."""
    return apply_lif(x_seq, lif_params(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha,
                                       grad_threshold))
