"""_engine.py — the ctypes binding of a live libspikefuse network that another framework runs (spikefuse.torch's
Network): created from a config file, a checkpoint's stored config or a list of layer descriptions, compiled for
(T, B), run forward and backward on device memory the caller holds, its named tensors addressed in place."""
import ctypes
import os

from . import _lib, _net
from ._lib import Device
from ._net import LayerDesc, NetParams, TensorInfo

ROLE_PARAM, ROLE_GRAD, ROLE_BUFFER = 0, 1, 2
MEMORY_MODES = ("full", "recompute", "lean")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")

_H, _P = ctypes.c_void_p, ctypes.c_void_p
_f = None


def _bindings():
    global _f
    if _f is None:
        b = _lib._bind_optional
        f = dict(
            create=b("sf_net_create", ctypes.c_int, [ctypes.POINTER(NetParams), ctypes.POINTER(_H)]),
            add=b("sf_net_add", ctypes.c_int, [_H, ctypes.POINTER(LayerDesc), ctypes.POINTER(ctypes.c_int32)]),
            config_load=b("sf_config_load", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
            checkpoint_config=b("sf_checkpoint_config", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
            config_set=b("sf_config_set", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p]),
            config_build=b("sf_config_build_net", ctypes.c_int, [_P, ctypes.POINTER(_H)]),
            config_free=b("sf_config_free", None, [_P]),
            input_grad=b("sf_net_set_input_grad", ctypes.c_int, [_H, ctypes.c_int32]),
            forward=b("sf_net_forward_device", ctypes.c_int, [_H, _P, ctypes.c_int32, _P]),
            backward=b("sf_net_backward_device", ctypes.c_int, [_H, _P, _P]),
            tensor_ptr=b("sf_net_tensor_ptr", ctypes.c_int, [_H, ctypes.c_int, ctypes.c_int32,
                                                              ctypes.POINTER(ctypes.c_void_p)]),
            tensor_write=b("sf_net_tensor_write", ctypes.c_int, [_H, ctypes.c_int, ctypes.c_int32, _P]),
            params_changed=b("sf_net_params_changed", ctypes.c_int, [_H]),
            stream=b("sf_net_stream", ctypes.c_void_p, [_H]),
            summary=b("sf_net_summary", ctypes.c_char_p, [_H]),
            # for tests: the engine's own split step on host memory
            forward_host=b("sf_net_forward", ctypes.c_int, [_H, _P, ctypes.c_int32]),
            loss=b("sf_net_loss", ctypes.c_int, [_H, _P, _P]),
            backward_host=b("sf_net_backward", ctypes.c_int, [_H]),
            output_grad=b("sf_net_read_output_grad", ctypes.c_int, [_H, _P]),
            read_activation=b("sf_net_read_activation", ctypes.c_int, [_H, ctypes.c_int32, _P]),
        )
        missing = [n for n, fn in f.items() if fn is None]
        if missing:
            raise _lib.SpikefuseError("sf_net_forward_device", 5, f"{_lib.LIBRARY_PATH} predates running networks "
                                      f"from Python (no {', '.join(missing)}): rebuild it")
        _f = dict(_net._bind(), **f)  # the layouts of LayerDesc and NetParams are checked there
    return _f


def parse_device(device):
    """(kind, index) of "cpu", "cuda" or "cuda:N" (or a torch.device's str)."""
    text = str(device)
    if text == "cpu":
        return _lib.DEVICE_CPU, 0
    if text == "cuda":
        return _lib.DEVICE_CUDA, 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return _lib.DEVICE_CUDA, int(text[5:])
    raise ValueError(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")


def _checkpoint_path(path):
    """A checkpoint file, or a run directory's best.safetensors (else last.safetensors); None for anything else."""
    if os.path.isdir(path):
        for name in ("best.safetensors", "last.safetensors"):
            if os.path.exists(os.path.join(path, name)):
                return os.path.join(path, name)
        raise FileNotFoundError(f"{path}: a directory without a run (neither best.safetensors nor last.safetensors)")
    return path if path.endswith(".safetensors") else None


class LayerError(ValueError):
    """sf_net_add refused layer `layer_index` (its message names the problem)."""

    def __init__(self, message, layer_index, reason):
        super().__init__(message)
        self.layer_index, self.reason = layer_index, reason  # reason: the library's message alone


class Engine(_net.NetHandle):
    """One sf_net: built, compiled on demand, freed when the last reference (the module or a tensor aliasing its
    memory) goes."""

    def __init__(self, handle):
        self._f = _bindings()
        self._h = handle
        self.params = NetParams()
        self._f["get_params"](handle, ctypes.byref(self.params))
        self.device = (self.params.device.kind, self.params.device.index)
        self.compiled_for = None
        self.input_grad = False

    @classmethod
    def from_layers(cls, layers, input_shape, device, precision, memory, seed, input_spikes):
        f = _bindings()
        p = NetParams()
        f["default_params"](ctypes.byref(p))
        kind, index = parse_device(device)
        p.device = Device(kind, index)
        p.in_channels, p.in_height, p.in_width = _chw(input_shape)
        p.precision = PRECISIONS.index(precision)
        p.memory = MEMORY_MODES.index(memory)
        p.seed = int(seed)
        p.input_spikes = 1 if input_spikes else 0
        h = _H()
        _lib.check(f["create"](ctypes.byref(p), ctypes.byref(h)), "sf_net_create")
        engine = cls(h)
        for i, d in enumerate(layers):
            s = f["add"](h, ctypes.byref(d), None)
            if s != 0:
                reason = _lib.last_error()
                raise LayerError(f"layer {i} ({d.kind_name}): {reason}", i, reason)
        return engine

    @classmethod
    def from_file(cls, path, overrides):
        """A net from a config file or a checkpoint's stored config (its parameters then the checkpoint's), with
        config overrides {"train.device": "cpu", ...}."""
        f = _bindings()
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} does not exist")
        ckpt = _checkpoint_path(path)
        cfg = _P()
        if ckpt:
            _lib.check(f["checkpoint_config"](ckpt.encode(), ctypes.byref(cfg)), "sf_checkpoint_config")
        else:
            _lib.check(f["config_load"](path.encode(), ctypes.byref(cfg)), "sf_config_load")
        try:
            for key, value in overrides.items():
                _lib.check(f["config_set"](cfg, key.encode(), str(value).encode()), f"config override {key}")
            h = _H()
            _lib.check(f["config_build"](cfg, ctypes.byref(h)), "sf_config_build_net")
        finally:
            f["config_free"](cfg)
        engine = cls(h)
        if ckpt:
            trained = _net.TrainedNet(ckpt)
            try:
                for role in (ROLE_PARAM, ROLE_BUFFER):
                    engine._copy_tensors_from(trained, role)
            finally:
                trained.close()
        return engine

    def _copy_tensors_from(self, trained, role):
        def make(shape):
            n = 1
            for s in shape:
                n *= s
            buf = (ctypes.c_float * max(n, 1))()
            return buf, ctypes.addressof(buf)
        values = trained.tensors(role, make)
        for i, info in enumerate(self.tensor_infos(role)):
            _lib.check(self._f["tensor_write"](self._h, role, i, values[info[0]]), "sf_net_tensor_write")

    def __reduce__(self):
        raise TypeError("a libspikefuse network handle cannot be copied or pickled (copy the module that holds it: "
                        "spikefuse.torch.Network supports copy.deepcopy; save its state_dict)")

    def __del__(self):
        if getattr(self, "_h", None):
            self._f["free"](self._h)
            self._h = None

    def tensor_infos(self, role):
        """[(name, shape)] of the named tensors of a role, in the library's order."""
        out = []
        for i in range(self._f["tensor_count"](self._h, role)):
            info = TensorInfo()
            _lib.check(self._f["tensor_info"](self._h, role, i, ctypes.byref(info)), "sf_net_tensor_info")
            out.append((info.name.decode(), tuple(info.shape[:info.ndim])))
        return out

    def tensor_ptr(self, role, i):
        p = ctypes.c_void_p()
        _lib.check(self._f["tensor_ptr"](self._h, role, i, ctypes.byref(p)), "sf_net_tensor_ptr")
        return p.value

    def compile(self, T, B, input_grad):
        if input_grad != self.input_grad:
            _lib.check(self._f["input_grad"](self._h, 1 if input_grad else 0), "sf_net_set_input_grad")
            self.input_grad = input_grad
            self.compiled_for = None
        if self.compiled_for != (T, B):
            _lib.check(self._f["compile"](self._h, T, B), "sf_net_compile")
            self.compiled_for = (T, B)

    def forward(self, x_ptr, training, y_ptr):
        _lib.check(self._f["forward"](self._h, x_ptr, 1 if training else 0, y_ptr), "sf_net_forward_device")

    def backward(self, dy_ptr, dx_ptr):
        _lib.check(self._f["backward"](self._h, dy_ptr, dx_ptr), "sf_net_backward_device")

    def params_changed(self):
        _lib.check(self._f["params_changed"](self._h), "sf_net_params_changed")

    def stream(self):
        return self._f["stream"](self._h) or 0

    def summary(self):
        return self._f["summary"](self._h).decode()


def _chw(shape):
    shape = tuple(int(s) for s in shape)
    if len(shape) == 1:
        return shape[0], 1, 1
    if len(shape) == 3:
        return shape
    raise ValueError(f"input_shape {shape}: expected (C, H, W) or (N,)")
