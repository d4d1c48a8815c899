"""_kernels.py — libspikefuse's fused kernels on torch tensors: the eager implementations behind the autograd ops of
_ops.py (custom ops on torch >= 2.4, autograd.Function before). Each takes contiguous tensors, allocates its
outputs with torch (so they live in torch's caching allocator and count in its memory statistics), launches on the
tensor's device and current CUDA stream, and raises the library's message on failure.

Params travel as a tuple of floats (the fields of sf_lif_params in order: a hashable value that torch.library
schemas and torch.compile carry as a constant); lif_params_of turns it back into the ctypes struct."""
import ctypes
import functools

import torch

from .. import _lib

# 16-bit inputs are widened to fp32 here and the results narrowed back to the input's dtype; the membrane
# potential is fp32 either way. float64 inputs (the CPU only) run the library's float64 calls: the membrane, the
# state, a PLIF's w and the BN's statistics and parameters are float64 with them.
HALF_DTYPES = (torch.float16, torch.bfloat16)
INPUT_DTYPES = (torch.float32,) + HALF_DTYPES + (torch.float64,)


def state_dtype(x):
    """The dtype of the membrane state, a PLIF's w and the BN's tensors for input x: float64 for float64, else
    float32."""
    return torch.float64 if x.dtype is torch.float64 else torch.float32


def params_tuple(p):
    """The hashable form of an sf_lif_params (see the module docstring)."""
    return tuple(float(getattr(p, name)) for name, _ in _lib.LifParams._fields_)


@functools.lru_cache(maxsize=256)
def lif_params_of(pvec):
    p = _lib.LifParams()
    for (name, ctype), v in zip(_lib.LifParams._fields_, pvec):
        setattr(p, name, v if ctype is ctypes.c_float else int(v))
    return p


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


def launch_target(t):
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


def run(kernel, name, target, *args, unsupported_ok=False):
    """Calls a kernel entry point (a ctypes function) with the tensor's CUDA device current, since the library
    launches on the current device, and raises the library's error if it fails; with unsupported_ok, returns False
    instead when the library has no such kernel there (SF_ERR_UNSUPPORTED)."""
    kind, index, device, stream = target
    if kind == _lib.DEVICE_CUDA and index != _current_device():
        with torch.cuda.device(index):
            status = kernel(*args, device, stream)
    else:
        status = kernel(*args, device, stream)
    if status:
        if unsupported_ok and status == _lib.SF_ERR_UNSUPPORTED:
            return False
        _lib.check(status, name)
    return True


def _ptr(t):
    return t.data_ptr() if t is not None else None


def _plif_channels(x, w):
    """(w_channels, w_hw) of a PLIF's w for x [T, ...]: one w for every neuron, or one per channel of
    x [T, B, C, ...] (each channel a run of hw neurons)."""
    if w.numel() == 1:
        return 1, max(1, x[0].numel())
    if x.dim() < 3 or x.shape[2] != w.numel():
        raise ValueError(f"spikefuse PLIF: a w per channel ({w.numel()}) needs x_seq of shape [T, B, {w.numel()}, "
                         f"...], got {tuple(x.shape)}")
    return w.numel(), max(1, x[0, 0, 0].numel())


_MODEL_AT = [name for name, _ in _lib.LifParams._fields_].index("model")
_ALIF = 3  # enum sf_neuron_model
CKPT_STEPS = 32  # SF_LIF_CKPT_STEPS


def ckpt_numel(x, pvec):
    """Floats of the forward's checkpoints of the state (sf_lif_state.v_ckpt) for x [T, ...]: the state every 32
    steps counted back from T, which the CUDA backward's recompute starts from past 32 steps (1/32 of the membrane;
    the CPU's recomputes whole sequences and takes none: 0)."""
    if x.device.type != "cuda":
        return 0
    return (x.shape[0] - 1) // CKPT_STEPS * x[0].numel() * (2 if int(pvec[_MODEL_AT]) == _ALIF else 1)


def ckpt_for(x, pvec):
    """The checkpoint tensor a forward fills for its backward, or None where there are none."""
    n = ckpt_numel(x, pvec)
    return torch.empty(n, dtype=torch.float32, device=x.device) if n else None


def _state(v_in=None, v_out=None, dv_in=None, dv_out=None, x=None, w=None, dw=None, ckpt=None):
    """An sf_lif_state for the given tensors, or None when none is given (the one-call kernels); a PLIF's w (and
    its gradient dw, written by the backward) with their channels over x; the checkpoints (ckpt_for; None or empty:
    none)."""
    ckpt = ckpt if ckpt is not None and ckpt.numel() else None
    if v_in is None and v_out is None and dv_in is None and dv_out is None and w is None and ckpt is None:
        return None
    channels, hw = _plif_channels(x, w) if w is not None else (0, 0)
    return ctypes.byref(_lib.LifState(_ptr(v_in), _ptr(v_out), _ptr(dv_in), _ptr(dv_out), _ptr(w), _ptr(dw),
                                      channels, hw, _ptr(ckpt)))


def as_fp32(t):
    return t.float().contiguous() if t.dtype in HALF_DTYPES else t.contiguous()


def as_dtype(t, dtype):
    """t in dtype (Tensor.to costs microseconds even when there is nothing to do)."""
    return t if t.dtype is dtype else t.to(dtype)


def state_out(x, keep):
    """v_out [*x.shape[1:]] (in state_dtype(x)) when the state is kept, else None."""
    return torch.empty(x.shape[1:], dtype=state_dtype(x), device=x.device) if keep else None


_SCALAR = {torch.float32: _lib.SCALAR_F32, torch.bfloat16: _lib.SCALAR_BF16, torch.float16: _lib.SCALAR_F16}
_NO_16_BIT = set()  # (device kind, dtype) where the library said it has no 16-bit kernels: widened to fp32 there


def _in_16_bits(kernel, target, x, launch):
    """For a 16-bit x: runs launch(dtype code) where the library has 16-bit kernels on that device and says whether
    it did (it remembers where the library answered that it has none); False means: widen x to fp32."""
    key = (target[0], x.dtype)
    if x.dtype is torch.float32 or kernel is None or key in _NO_16_BIT:
        return False
    if launch(_SCALAR[x.dtype]):
        return True
    _NO_16_BIT.add(key)
    return False


def lif_forward(x, v_in, pvec, keep_state, w=None, ckpt=None):
    """(spikes in x's dtype, v after the last step or None) of x [T, ...] from v_in (None: v_reset); w: a PLIF's
    (pvec's model is then the PLIF); ckpt (ckpt_for): filled with the checkpoints for the backward."""
    target, p, T = launch_target(x), lif_params_of(pvec), x.shape[0]
    v_out = state_out(x, keep_state)
    st = _state(v_in, v_out, x=x, w=w, ckpt=ckpt)
    s = torch.empty_like(x)

    def launch(kernel, code, t, out, unsupported_ok=False):
        return run(kernel, "sf_lif_forward", target, p, T, x.numel() // T, *code, t.data_ptr(), out.data_ptr(), st,
                   unsupported_ok=unsupported_ok)
    if x.dtype is torch.float64:
        launch(_lib.sf_lif_forward_typed, (_lib.SCALAR_F64,), x, s)
        return s, v_out
    if _in_16_bits(_lib.sf_lif_forward_typed, target, x,
                   lambda code: launch(_lib.sf_lif_forward_typed, (code,), x, s, True)):
        return s, v_out
    xf = as_fp32(x)
    sf = s if xf is x else torch.empty_like(xf)
    launch(_lib.sf_lif_forward_state, (), xf, sf)
    return as_dtype(sf, x.dtype), v_out


def lif_backward(x, v_in, ds, dv_in, pvec, want_dv, w=None, dw=None, ckpt=None):
    """(dx in x's dtype, ∂L/∂v_in or None), recomputing the membrane from x and v_in (and the forward's checkpoints,
    ckpt); a PLIF's w given, its gradient is written to dw (w's shape)."""
    target, p, T = launch_target(x), lif_params_of(pvec), x.shape[0]
    dv_out = state_out(x, want_dv)
    st = _state(v_in, None, dv_in, dv_out, x=x, w=w, dw=dw, ckpt=ckpt)
    ds = as_dtype(ds, x.dtype).contiguous()
    dx = torch.empty_like(x)

    def launch(kernel, code, t, g, out, unsupported_ok=False):
        return run(kernel, "sf_lif_backward", target, p, T, x.numel() // T, *code, t.data_ptr(), g.data_ptr(),
                   out.data_ptr(), st, unsupported_ok=unsupported_ok)
    if x.dtype is torch.float64:
        launch(_lib.sf_lif_backward_typed, (_lib.SCALAR_F64,), x, ds, dx)
        return dx, dv_out
    if _in_16_bits(_lib.sf_lif_backward_typed, target, x,
                   lambda code: launch(_lib.sf_lif_backward_typed, (code,), x, ds, dx, True)):
        return dx, dv_out
    xf, dsf = as_fp32(x), as_fp32(ds)
    dxf = dx if xf is x else torch.empty_like(xf)
    launch(_lib.sf_lif_backward_state, (), xf, dsf, dxf)
    return as_dtype(dxf, x.dtype), dv_out


def _bn_shape(x):
    """(T, B, C, hw) of x [T, B, C, *spatial]."""
    T, B, C = x.shape[0], x.shape[1], x.shape[2]
    return T, B, C, x[0, 0, 0].numel()


def bn_statistics(x):
    """(mean, biased var) per channel of float32 x [T, B, C, *spatial] on the CPU, summed by the library (faster than
    torch.var_mean over the non-channel dimensions there); None where it cannot: another device or dtype, an empty
    x, or a library that predates sf_bn_statistics."""
    if _lib.sf_bn_statistics is None or x.is_cuda or x.dtype != torch.float32 or x.numel() == 0:
        return None
    T, B, C, hw = _bn_shape(x)
    x = x.contiguous()
    mean, var = torch.empty(C), torch.empty(C)
    _lib.check(_lib.sf_bn_statistics(T * B, C, hw, x.data_ptr(), mean.data_ptr(), var.data_ptr(), _CPU[2]),
               "sf_bn_statistics")
    return mean, var


def _need_bn_lif():
    if _lib.sf_bn_lif_forward is None:
        raise _lib.SpikefuseError("sf_bn_lif_forward", 5, f"{_lib.LIBRARY_PATH} predates the fused BN+LIF calls: "
                                  "rebuild it")


def bn_lif_forward(x, mean, var, gamma, beta, v_in, eps, pvec, keep_state, ckpt=None):
    """(spikes in x's dtype, v after the last step or None) of BN(x) → LIF, x [T, B, C, *spatial]; ckpt as
    lif_forward's."""
    _need_bn_lif()
    target, p, shape = launch_target(x), lif_params_of(pvec), _bn_shape(x)
    v_out = state_out(x, keep_state)
    st = _state(v_in, v_out, ckpt=ckpt)
    stats = (mean.data_ptr(), var.data_ptr(), eps, gamma.data_ptr(), beta.data_ptr())

    def call(t, code, unsupported_ok=False):
        return run(_lib.sf_bn_lif_forward, "sf_bn_lif_forward", target, p, *shape, code, t.data_ptr(), *stats,
                   s.data_ptr(), st, unsupported_ok=unsupported_ok)
    s = torch.empty_like(x)
    if x.dtype is torch.float64:
        call(x, _lib.SCALAR_F64)
        return s, v_out
    if _in_16_bits(_lib.sf_bn_lif_forward, target, x, lambda code: call(x, code, True)):
        return s, v_out
    xf = as_fp32(x)
    if xf is not x:
        s = torch.empty_like(xf)
    call(xf, _lib.SCALAR_F32)
    return as_dtype(s, x.dtype), v_out


def bn_lif_backward(x, mean, var, gamma, beta, v_in, ds, dv_in, eps, pvec, want_dv, ckpt=None):
    """(dx in x's dtype, dgamma, dbeta, ∂L/∂v_in or None) with mean, var x's batch statistics; ckpt: the forward's
    checkpoints."""
    _need_bn_lif()
    target, p, shape = launch_target(x), lif_params_of(pvec), _bn_shape(x)
    dv_out = state_out(x, want_dv)
    st = _state(v_in, None, dv_in, dv_out, ckpt=ckpt)
    dgamma, dbeta = torch.empty_like(gamma), torch.empty_like(beta)
    ws_bytes = _lib.sf_bn_lif_workspace_bytes(*shape, target[2])
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=x.device) if ws_bytes else None
    stats = (mean.data_ptr(), var.data_ptr(), eps, gamma.data_ptr(), beta.data_ptr())

    def call(t, g, code, unsupported_ok=False):
        return run(_lib.sf_bn_lif_backward, "sf_bn_lif_backward", target, p, *shape, code, t.data_ptr(), *stats,
                   g.data_ptr(), dx.data_ptr(), dgamma.data_ptr(), dbeta.data_ptr(), st, _ptr(workspace), ws_bytes,
                   unsupported_ok=unsupported_ok)
    ds = as_dtype(ds, x.dtype).contiguous()
    dx = torch.empty_like(x)
    if x.dtype is torch.float64:
        call(x, ds, _lib.SCALAR_F64)
        return dx, dgamma, dbeta, dv_out
    if _in_16_bits(_lib.sf_bn_lif_backward, target, x, lambda code: call(x, ds, code, True)):
        return dx, dgamma, dbeta, dv_out
    xf, dsf = as_fp32(x), as_fp32(ds)
    if xf is not x:
        dx = torch.empty_like(xf)
    call(xf, dsf, _lib.SCALAR_F32)
    return as_dtype(dx, x.dtype), dgamma, dbeta, dv_out
