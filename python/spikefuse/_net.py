"""_net.py — the ctypes binding of libspikefuse's networks, as far as programs outside the trainer need them: a
trained network loaded from a checkpoint (sf_checkpoint_load_net), its layer descriptions and parameters, its named
tensors, its forward pass (to compare against), and how its run encoded the input (sf_checkpoint_input_encoding)."""
import ctypes

from . import _lib
from ._lib import Device, LifParams

LAYER_KINDS = ("linear", "conv2d", "avgpool2d", "maxpool2d", "flatten", "dropout", "batchnorm", "lif", "add", "rlif",
               "tokens", "layernorm", "ssa", "sdsa", "token_mean")
READOUTS = ("mean", "leaky")
CONNECTS = ("add", "and", "iand")
ROLE_PARAM, ROLE_BUFFER = 0, 2


class LayerDesc(ctypes.Structure):
    """Mirror of sf_layer_desc (include/spikefuse.h); checked against the library on first use."""
    _fields_ = [("kind", ctypes.c_int), ("input", ctypes.c_int32), ("input2", ctypes.c_int32),
                ("out_features", ctypes.c_int32), ("out_channels", ctypes.c_int32), ("kernel", ctypes.c_int32),
                ("stride", ctypes.c_int32), ("padding", ctypes.c_int32), ("bias", ctypes.c_int32),
                ("dropout_p", ctypes.c_float), ("bn_eps", ctypes.c_float), ("bn_momentum", ctypes.c_float),
                ("lif", LifParams), ("sparse", ctypes.c_int32), ("init_gain", ctypes.c_float),
                ("heads", ctypes.c_int32), ("attn_scale", ctypes.c_float),
                ("connect", ctypes.c_int32)]

    @property
    def kind_name(self):
        return LAYER_KINDS[self.kind] if 0 <= self.kind < len(LAYER_KINDS) else f"kind {self.kind}"


class CudaOptions(ctypes.Structure):
    _fields_ = [("graph", ctypes.c_int32), ("conv_workspace_mib", ctypes.c_int32), ("conv_algo", ctypes.c_int),
                ("deterministic", ctypes.c_int32), ("conv_lean", ctypes.c_float)]


class NetParams(ctypes.Structure):
    """Mirror of sf_net_params; checked against the library on first use."""
    _fields_ = [("device", Device), ("memory", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("in_channels", ctypes.c_int32), ("in_height", ctypes.c_int32), ("in_width", ctypes.c_int32),
                ("readout", ctypes.c_int), ("readout_tau", ctypes.c_float), ("loss", ctypes.c_int),
                ("label_smoothing", ctypes.c_float), ("precision", ctypes.c_int), ("cuda", CudaOptions),
                ("sparse", ctypes.c_int), ("sparse_crossover", ctypes.c_float), ("input_spikes", ctypes.c_int32)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("numel", ctypes.c_int64)]


class InputEncoding(ctypes.Structure):
    """Mirror of sf_input_encoding."""
    _fields_ = [("dataset", ctypes.c_char * 32), ("images", ctypes.c_int32), ("encoding", ctypes.c_int32),
                ("normalize", ctypes.c_int32), ("channels", ctypes.c_int32), ("mean", ctypes.c_float * 4),
                ("std", ctypes.c_float * 4), ("timesteps", ctypes.c_int64)]


ENCODINGS = ("direct", "poisson", "latency")


def input_encoding(path):
    """{dataset, images, encoding, normalize, mean, std, timesteps} of the run that wrote checkpoint `path`
    (mean and std: one per input channel)."""
    f = _lib._bind_optional("sf_checkpoint_input_encoding", ctypes.c_int,
                            [ctypes.c_char_p, ctypes.POINTER(InputEncoding)])
    if f is None:
        raise _lib.SpikefuseError("sf_checkpoint_input_encoding", 5, f"{_lib.LIBRARY_PATH} predates it: rebuild it")
    e = InputEncoding()
    _lib.check(f(str(path).encode(), ctypes.byref(e)), "sf_checkpoint_input_encoding")
    return dict(dataset=e.dataset.decode(), images=bool(e.images), encoding=ENCODINGS[e.encoding],
                normalize=bool(e.normalize), mean=tuple(e.mean[:e.channels]), std=tuple(e.std[:e.channels]),
                timesteps=int(e.timesteps))


_H = ctypes.c_void_p
_bindings = None


def _bind():
    """Binds the entry points once; a library without sf_checkpoint_load_net cannot load runs."""
    global _bindings
    if _bindings is None:
        b = _lib._bind_optional
        names = dict(
            load=b("sf_checkpoint_load_net", ctypes.c_int, [ctypes.c_char_p, Device, ctypes.POINTER(_H)]),
            free=b("sf_net_free", None, [_H]),
            num_layers=b("sf_net_num_layers", ctypes.c_int32, [_H]),
            layer_desc=b("sf_net_layer_desc", ctypes.c_int, [_H, ctypes.c_int32, ctypes.POINTER(LayerDesc)]),
            default_desc=b("sf_layer_default_desc", None, [ctypes.c_int, ctypes.c_void_p]),
            tensor_shape=b("sf_net_tensor_shape", ctypes.c_int, [_H, ctypes.c_int32, ctypes.c_int32 * 3]),
            get_params=b("sf_net_get_params", None, [_H, ctypes.POINTER(NetParams)]),
            default_params=b("sf_net_default_params", None, [ctypes.c_void_p]),
            tensor_count=b("sf_net_tensor_count", ctypes.c_int32, [_H, ctypes.c_int]),
            tensor_info=b("sf_net_tensor_info", ctypes.c_int, [_H, ctypes.c_int, ctypes.c_int32,
                                                               ctypes.POINTER(TensorInfo)]),
            tensor_read=b("sf_net_tensor_read", ctypes.c_int, [_H, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p]),
            compile=b("sf_net_compile", ctypes.c_int, [_H, ctypes.c_int64, ctypes.c_int64]),
            eval_step=b("sf_net_eval_step", ctypes.c_int, [_H, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
            logits=b("sf_net_logits", ctypes.c_int, [_H, ctypes.c_void_p]),
        )
        missing = [n for n, f in names.items() if f is None]
        if missing:
            raise _lib.SpikefuseError("sf_checkpoint_load_net", 5, f"{_lib.LIBRARY_PATH} predates loading trained "
                                      "networks (no sf_checkpoint_load_net / sf_net_layer_desc): rebuild it")
        _check_layouts(names)
        _bindings = names
    return _bindings


def _poisoned(struct, fill):
    """The struct a default-filling call writes into a 0xA5-poisoned buffer 16 bytes longer, and whether the
    bytes past the struct stayed untouched (a library struct larger than ours would overwrite them)."""
    size = ctypes.sizeof(struct)
    buf = (ctypes.c_ubyte * (size + 16))(*([0xA5] * (size + 16)))
    fill(buf)
    return struct.from_buffer_copy(bytes(buf[:size])), all(v == 0xA5 for v in buf[size:])


def _check_layouts(f):
    d, tail_ok = _poisoned(LayerDesc, lambda buf: f["default_desc"](1, buf))
    got = (d.kind, d.input, d.input2, d.kernel, d.stride, d.bias, d.bn_momentum, d.lif.tau, d.lif.alpha, d.sparse,
           d.init_gain)
    ok = tail_ok and got == (1, -1, -1, 3, 1, 1, ctypes.c_float(0.1).value, 2.0, 4.0, -1, 1.0)
    p, tail_ok = _poisoned(NetParams, f["default_params"])
    got_p = (p.memory, p.in_channels, p.in_width, p.readout_tau, p.label_smoothing, p.cuda.graph,
             p.cuda.conv_workspace_mib)
    if not (ok and tail_ok and got_p == (1, 1, 1, 2.0, 0.0, 1, 512)):
        raise ImportError(f"spikefuse: {_lib.LIBRARY_PATH} does not match this package's sf_layer_desc / "
                          "sf_net_params layout: rebuild the package and the library together")


class NetHandle:
    """What every holder of an sf_net handle (self._h) and its bindings (self._f) reads of the network."""

    def layers(self):
        out = []
        for i in range(self._f["num_layers"](self._h)):
            d = LayerDesc()
            _lib.check(self._f["layer_desc"](self._h, i, ctypes.byref(d)), "sf_net_layer_desc")
            out.append(d)
        return out

    def tensor_shape(self, tensor_id):
        """(C, H, W) of tensor `tensor_id` per sample and step (0: the input; layer i writes i + 1)."""
        chw = (ctypes.c_int32 * 3)()
        _lib.check(self._f["tensor_shape"](self._h, tensor_id, chw), "sf_net_tensor_shape")
        return tuple(chw)


class TrainedNet(NetHandle):
    """A network of libspikefuse loaded from a checkpoint (on the CPU); closes its handle when collected."""

    def __init__(self, path):
        self._h = None
        f = _bind()
        handle = _H()
        _lib.check(f["load"](str(path).encode(), Device(_lib.DEVICE_CPU, 0), ctypes.byref(handle)),
                   "sf_checkpoint_load_net")
        self._f, self._h = f, handle
        self.params = NetParams()
        f["get_params"](handle, ctypes.byref(self.params))

    def close(self):
        if self._h:
            self._f["free"](self._h)
            self._h = None

    def __del__(self):
        self.close()


    def tensors(self, role, make):
        """{name: tensor} of one role (parameters or buffers): make(shape) returns (tensor, address of its
        contiguous float32 host memory), which the library fills."""
        out = {}
        for i in range(self._f["tensor_count"](self._h, role)):
            info = TensorInfo()
            _lib.check(self._f["tensor_info"](self._h, role, i, ctypes.byref(info)), "sf_net_tensor_info")
            tensor, address = make(tuple(info.shape[:info.ndim]))
            _lib.check(self._f["tensor_read"](self._h, role, i, address), "sf_net_tensor_read")
            out[info.name.decode()] = tensor
        return out

    def forward_logits(self, T, B, x_ptr, out_ptr):
        """The library's evaluation-mode logits (T-mean of the readout): x_ptr the address of a host float32
        [T, B, C, H, W] input, out_ptr of B·classes floats."""
        _lib.check(self._f["compile"](self._h, T, B), "sf_net_compile")
        result = (ctypes.c_ubyte * 64)()  # sf_step_result, with room for fields added later
        _lib.check(self._f["eval_step"](self._h, x_ptr, None, result), "sf_net_eval_step")
        _lib.check(self._f["logits"](self._h, out_ptr), "sf_net_logits")
