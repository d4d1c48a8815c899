"""_lib.py — the ctypes binding of libspikefuse: finding and loading the shared library, the sf_lif_params
struct, and the low-level fused LIF kernels on raw pointers (host memory or CUDA device memory)."""
import ctypes
import math
import os

SURROGATES = ("sigmoid", "atan", "fast_sigmoid", "rect")

# sf_status codes of include/spikefuse.h, in order.
_STATUS_NAMES = ("SF_OK", "SF_ERR_INVALID", "SF_ERR_NOMEM", "SF_ERR_IO", "SF_ERR_FORMAT", "SF_ERR_UNSUPPORTED",
                 "SF_ERR_DEVICE", "SF_ERR_NUMERIC", "SF_ERR_STATE")
SF_ERR_INVALID = 1
DEVICE_CPU = 0
DEVICE_CUDA = 1


class SpikefuseError(RuntimeError):
    """A libspikefuse call failed; `status` is the sf_status name, the message is sf_last_error()."""

    def __init__(self, func, status, message):
        self.status = _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else f"status {status}"
        super().__init__(f"{func} failed ({self.status}): {message}")


class SpikefuseValueError(SpikefuseError, ValueError):
    """An argument the library rejected (SF_ERR_INVALID): catchable as ValueError too."""


class LifParams(ctypes.Structure):
    """Mirror of sf_lif_params (include/spikefuse.h); the layout is checked against the library at load time."""
    _fields_ = [
        ("tau", ctypes.c_float),
        ("decay", ctypes.c_float),
        ("decay_input", ctypes.c_int32),
        ("v_threshold", ctypes.c_float),
        ("v_reset", ctypes.c_float),
        ("soft_reset", ctypes.c_int32),
        ("detach_reset", ctypes.c_int32),
        ("surrogate", ctypes.c_int),
        ("alpha", ctypes.c_float),
        ("use_grad_threshold", ctypes.c_int32),
        ("grad_threshold", ctypes.c_float),
        ("grad_cut", ctypes.c_int32),
        ("model", ctypes.c_int),
        ("per_channel", ctypes.c_int32),
        ("rho", ctypes.c_float),
        ("tau_adapt", ctypes.c_float),
        ("beta", ctypes.c_float),
    ]

    def __repr__(self):
        return "LifParams(" + ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._fields_) + ")"


class Device(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("index", ctypes.c_int32)]


class LifState(ctypes.Structure):
    """Mirror of sf_lif_state: the neuron state carried across calls ([N] float32 device addresses, [2, N] for the
    ALIF, 0 for none), a PLIF's w, dw and their channels (w_channels of w_hw neurons), and the forward's checkpoints
    of the state for the backward's recompute (sf_lif_ckpt_floats floats, 0 for none)."""
    _fields_ = [("v_in", ctypes.c_void_p), ("v_out", ctypes.c_void_p), ("dv_in", ctypes.c_void_p),
                ("dv_out", ctypes.c_void_p), ("w", ctypes.c_void_p), ("dw", ctypes.c_void_p),
                ("w_channels", ctypes.c_int32), ("w_hw", ctypes.c_int64), ("v_ckpt", ctypes.c_void_p)]


def _candidate_paths():
    env = os.environ.get("SPIKEFUSE_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, name) for name in ("libspikefuse.so", "libspikefuse.dylib", "spikefuse.dll")]


# The shared libraries libspikefuse links on Debian 12 / Ubuntu and the packages that hold them (python/README.md,
# Install); the CUDA libraries come with the CUDA toolkit (or torch's nvidia-* wheels).
_RUNTIME_PACKAGES = {"libopenblas.so.0": "libopenblas0-openmp", "libgomp.so.1": "libgomp1",
                     "libcjson.so.1": "libcjson1", "libinih.so.1": "libinih1", "libz.so.1": "zlib1g",
                     "libzip.so.4": "libzip4", "libhdf5_serial.so.103": "libhdf5-103-1",
                     "libhdf5_serial_hl.so.100": "libhdf5-hl-100", "libturbojpeg.so.0": "libturbojpeg0",
                     "libpng16.so.16": "libpng16-16", "libmpi.so.40": "libopenmpi3"}  # MPI: the CLI's build


def _missing_library_hint(message):
    """What to install for a library the dynamic loader could not find ("libX.so.N: cannot open shared ...")."""
    lib = message.split(":", 1)[0].strip()
    if lib in _RUNTIME_PACKAGES:
        return f"; install it with `apt-get install {_RUNTIME_PACKAGES[lib]}` (python/README.md lists every package)"
    if lib.startswith(("libcud", "libcublas", "libnccl")):
        return "; it is part of the CUDA toolkit (or torch's nvidia-* packages) this library was built with"
    return ""


def _load():
    paths = _candidate_paths()
    for path in paths:
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                raise ImportError(f"spikefuse: cannot load {path}: {e}{_missing_library_hint(str(e))}") from e
    where = "SPIKEFUSE_LIBRARY=" + paths[0] if os.environ.get("SPIKEFUSE_LIBRARY") else " or ".join(paths)
    raise ImportError(f"spikefuse: the shared library was not found at {where}; install the package with "
                      "`pip install ./python` (which builds it), or build it with CMake and point "
                      "SPIKEFUSE_LIBRARY at build/libspikefuse.so")


_dll, LIBRARY_PATH = _load()


def _bind(name, restype, argtypes):
    f = getattr(_dll, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


def _bind_optional(name, restype, argtypes):
    """Informational entry points: a library without them still runs the kernels."""
    return _bind(name, restype, argtypes) if hasattr(_dll, name) else None


_version = _bind_optional("sf_version", ctypes.c_char_p, [])
_last_error = _bind("sf_last_error", ctypes.c_char_p, [])
_build_info = _bind_optional("sf_build_info", ctypes.c_char_p, [])
_cuda_device_count = _bind("sf_cuda_device_count", ctypes.c_int32, [])
_set_num_threads = _bind("sf_set_num_threads", None, [ctypes.c_int32])
_get_num_threads = _bind("sf_get_num_threads", ctypes.c_int32, [])
_lif_default_params = _bind("sf_lif_default_params", None, [ctypes.c_void_p])
_lif_params_check = _bind("sf_lif_params_check", ctypes.c_int, [ctypes.POINTER(LifParams)])
_surrogate_default_alpha = _bind("sf_surrogate_default_alpha", ctypes.c_float, [ctypes.c_int])
_lif_params_from_nir = _bind_optional("sf_lif_params_from_nir", ctypes.c_int,
                                      [ctypes.c_int32] + [ctypes.c_double] * 6 + [ctypes.POINTER(LifParams)])
# The kernel entry points themselves (spikefuse.torch calls them directly: each Python layer costs microseconds).
# A LifParams instance may be passed where the pointer is expected: ctypes passes it by reference.
sf_lif_forward = _bind("sf_lif_forward", ctypes.c_int,
                     [ctypes.POINTER(LifParams), ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                      Device, ctypes.c_void_p])
sf_lif_backward = _bind("sf_lif_backward", ctypes.c_int,
                      [ctypes.POINTER(LifParams), ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p, Device, ctypes.c_void_p])
_P, _I64, _PTR, _STATE = ctypes.POINTER(LifParams), ctypes.c_int64, ctypes.c_void_p, ctypes.POINTER(LifState)
sf_lif_forward_state = _bind("sf_lif_forward_state", ctypes.c_int, [_P, _I64, _I64, _PTR, _PTR, _STATE, Device, _PTR])
sf_lif_backward_state = _bind("sf_lif_backward_state", ctypes.c_int,
                              [_P, _I64, _I64, _PTR, _PTR, _PTR, _STATE, Device, _PTR])
# Activations stored in a sf_scalar type: (params, T, N, dtype, x, ...); fused BN -> LIF: (params, T, B, C, hw, dtype,
# x, mean, var, eps, gamma, beta, ...). Optional: a library that predates them lacks them.
SCALAR_F32, SCALAR_BF16, SCALAR_F16, SCALAR_F64 = 0, 1, 2, 3  # SCALAR_F64: the CPU only, all in double
SF_ERR_UNSUPPORTED = 5
sf_lif_forward_typed = _bind_optional("sf_lif_forward_typed", ctypes.c_int,
                                      [_P, _I64, _I64, ctypes.c_int, _PTR, _PTR, _STATE, Device, _PTR])
sf_lif_backward_typed = _bind_optional("sf_lif_backward_typed", ctypes.c_int,
                                       [_P, _I64, _I64, ctypes.c_int, _PTR, _PTR, _PTR, _STATE, Device, _PTR])
_BN_HEAD = [_P, _I64, _I64, ctypes.c_int32, _I64, ctypes.c_int, _PTR, _PTR, _PTR, ctypes.c_float, _PTR, _PTR]
sf_bn_lif_forward = _bind_optional("sf_bn_lif_forward", ctypes.c_int, _BN_HEAD + [_PTR, _STATE, Device, _PTR])
sf_bn_lif_backward = _bind_optional("sf_bn_lif_backward", ctypes.c_int,
                                    _BN_HEAD + [_PTR, _PTR, _PTR, _PTR, _STATE, _PTR, ctypes.c_size_t, Device, _PTR])
sf_bn_lif_workspace_bytes = _bind_optional("sf_bn_lif_workspace_bytes", ctypes.c_size_t,
                                           [_I64, _I64, ctypes.c_int32, _I64, Device])
sf_bn_statistics = _bind_optional("sf_bn_statistics", ctypes.c_int,
                                  [_I64, ctypes.c_int32, _I64, _PTR, _PTR, _PTR, Device])


def _check_params_layout():
    """sf_lif_default_params zeroes sizeof(sf_lif_params) bytes and sets the defaults: a poisoned buffer shows
    whether our mirror has the library's size and field offsets, so a mismatch fails here, not as corruption."""
    size = ctypes.sizeof(LifParams)
    buf = (ctypes.c_ubyte * (size + 16))(*([0xA5] * (size + 16)))
    _lif_default_params(buf)
    p = LifParams.from_buffer_copy(bytes(buf[:size]))
    expected = dict(tau=2.0, decay=0.0, decay_input=1, v_threshold=1.0, v_reset=0.0, soft_reset=0, detach_reset=0,
                    surrogate=0, alpha=4.0, use_grad_threshold=0, grad_threshold=0.0, grad_cut=0, model=0,
                    per_channel=0, rho=ctypes.c_float(0.95).value, tau_adapt=0.0, beta=ctypes.c_float(1.8).value)
    got = {n: getattr(p, n) for n in expected}
    if got != expected or any(b != 0xA5 for b in buf[size:]):
        raise ImportError(f"spikefuse: {LIBRARY_PATH} does not match this package's sf_lif_params layout "
                          f"(defaults read back as {got}); rebuild the package and the library together")


_check_params_layout()


def version():
    """The library's version (sf_version), or the package's when the library does not export it."""
    return _version().decode() if _version else "0.1.0"


def build_info():
    """A one-line description of the library's build features (OpenMP, BLAS, CUDA, ...)."""
    return _build_info().decode() if _build_info else f"{LIBRARY_PATH} (exports no sf_build_info)"


def cuda_device_count():
    """CUDA devices the library can use: 0 when it was built without CUDA."""
    return int(_cuda_device_count())


def set_num_threads(n):
    """OpenMP threads of the CPU kernels (<= 0: the OpenMP default)."""
    _set_num_threads(int(n))


def get_num_threads():
    return int(_get_num_threads())


def last_error():
    return _last_error().decode(errors="replace")


def check(status, func):
    """Raises the library's failure as a Python exception carrying sf_last_error()."""
    if status != 0:
        cls = SpikefuseValueError if status == SF_ERR_INVALID else SpikefuseError
        raise cls(func, status, last_error())


def check_params(p):
    """Raises ValueError with the library's own message (which names the parameter and its range) where p is not a
    valid neuron (sf_lif_params_check)."""
    if _lif_params_check(ctypes.byref(p)) != 0:
        raise ValueError(last_error())


def surrogate_default_alpha(name):
    return float(_surrogate_default_alpha(surrogate_index(name)))


def surrogate_index(name):
    try:
        return SURROGATES.index(name)
    except ValueError:
        raise ValueError(f"surrogate {name!r} is not one of {', '.join(SURROGATES)}") from None


def lif_params(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
               alpha=None, grad_threshold=None):
    """Builds a checked sf_lif_params with SpikingJelly's LIFNode semantics (v_reset=None: soft reset).

    SpikingJelly's hard-reset LIF decays towards v_reset, h = v + (x - (v - v_reset))/tau, while the kernels'
    model decays towards 0. In the shifted potential u = v - v_reset the two are the same recurrence, started at
    u = 0, reset to u = 0, with threshold v_threshold - v_reset (and θ_grad shifted alike); the surrogate's
    argument h - v_threshold is unchanged. So the shift is exact, not an approximation."""
    for name, value in (("tau", tau), ("v_threshold", v_threshold), ("v_reset", v_reset), ("alpha", alpha),
                        ("grad_threshold", grad_threshold)):
        if value is not None and not math.isfinite(float(value)):
            raise ValueError(f"LIF {name} = {value}: must be finite")
    p = LifParams()
    p.tau = float(tau)
    p.decay = 0.0
    p.decay_input = 1 if decay_input else 0
    p.surrogate = surrogate_index(surrogate)
    p.alpha = float(_surrogate_default_alpha(p.surrogate)) if alpha is None else float(alpha)
    p.detach_reset = 1 if detach_reset else 0
    shift = 0.0 if v_reset is None else float(v_reset)
    p.soft_reset = 1 if v_reset is None else 0
    p.v_reset = 0.0
    p.v_threshold = float(v_threshold) - shift
    p.use_grad_threshold = 0 if grad_threshold is None else 1
    p.grad_threshold = 0.0 if grad_threshold is None else float(grad_threshold) - shift
    check_params(p)
    return p


def lif_params_from_nir(is_if, tau, r, v_leak, v_threshold, v_reset, dt, surrogate="sigmoid", alpha=None):
    """The sf_lif_params whose spikes are NIR's LIF (or IF) neuron stepped by forward Euler with time step dt
    (the library's sf_lif_params_from_nir: the mapping docs/nir.md writes down)."""
    if _lif_params_from_nir is None:
        raise SpikefuseError("sf_lif_params_from_nir", 5, f"{LIBRARY_PATH} predates NIR support: rebuild it")
    p = LifParams()
    _lif_default_params(ctypes.byref(p))
    p.surrogate = surrogate_index(surrogate)
    p.alpha = float(_surrogate_default_alpha(p.surrogate)) if alpha is None else float(alpha)
    check(_lif_params_from_nir(1 if is_if else 0, float(tau), float(r), float(v_leak), float(v_threshold),
                               float(v_reset), float(dt), ctypes.byref(p)), "sf_lif_params_from_nir")
    return p


def lif_forward(params, T, N, x_ptr, s_ptr, device_kind=DEVICE_CPU, device_index=0, stream=0):
    """s[T, N] = LIF spikes of x[T, N] (float32, contiguous, addresses as ints); asynchronous on `stream` for CUDA."""
    check(sf_lif_forward(params, T, N, x_ptr, s_ptr, Device(device_kind, device_index), stream), "sf_lif_forward")


def lif_backward(params, T, N, x_ptr, ds_ptr, dx_ptr, device_kind=DEVICE_CPU, device_index=0, stream=0):
    """dx[T, N] from x[T, N] and ds[T, N], recomputing the membrane potential from x."""
    check(sf_lif_backward(params, T, N, x_ptr, ds_ptr, dx_ptr, Device(device_kind, device_index), stream),
          "sf_lif_backward")
