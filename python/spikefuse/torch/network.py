"""network.py — spikefuse.torch.Network: a whole libspikefuse network as one torch module. The engine runs every
layer (its memory plan, convolution choices, fused BN + LIF, no Python between layers); torch sees one autograd
node whose backward is the engine's, returning the input's gradient too. Parameters and batch norm statistics are
torch tensors over the engine's own memory, so torch's optimizers, schedulers, state_dict and DDP act on the
engine's values in place."""
import contextlib
import ctypes

import torch

from .. import _engine, _lib
from .._engine import ROLE_BUFFER, ROLE_GRAD, ROLE_PARAM
from .._net import LAYER_KINDS, LayerDesc
from .._neuron_params import neuron_params

_NEURON_MODELS = {"lif": "lif", "if": "if", "plif": "plif", "alif": "alif"}
_DESC_FIELDS = {name for name, _ in LayerDesc._fields_} - {"kind", "lif"}


class _EngineMemory:
    """float32 memory of an engine, for torch to wrap: holds the engine, so it outlives every tensor over it."""

    def __init__(self, engine, ptr, shape, device):
        self.engine, self.ptr, self.shape, self.device = engine, ptr, tuple(shape), device

    @property
    def __cuda_array_interface__(self):
        return dict(shape=self.shape, typestr="<f4", data=(self.ptr, False), version=2, strides=None)

    def tensor(self):
        if self.device.type == "cuda":
            return torch.as_tensor(self, device=self.device)
        n = 1
        for s in self.shape:
            n *= s
        buf = (ctypes.c_float * max(n, 1)).from_address(self.ptr)
        buf._owner = self  # torch.frombuffer keeps buf alive, buf keeps the engine
        return torch.frombuffer(buf, dtype=torch.float32, count=n).view(self.shape)


class _Layer(torch.nn.Module):
    """Layer i of the engine's network: holds its parameters and buffers under the checkpoint's names (so the
    Network's state_dict says "0.weight", "1.running_mean", ...); it computes nothing itself."""

    def __init__(self, desc, out_shape):
        super().__init__()
        self.kind = desc.kind_name
        self.out_shape = out_shape

    def extra_repr(self):
        return f"{self.kind} -> {'x'.join(map(str, self.out_shape))}"


def layer(kind, **fields):
    """A layer description for Network(list): kind is one of the engine's layer kinds ("conv2d", "linear",
    "batchnorm", "lif", "maxpool2d", "avgpool2d", "flatten", "dropout", "add", "rlif") or a neuron model name
    ("lif", "if", "plif", "alif": a neuron layer of that model). Fields are sf_layer_desc's (out_channels, kernel,
    stride, padding, bias, out_features, dropout_p, bn_eps, bn_momentum, input, input2, ...); a neuron takes
    SpikingJelly's parameters (tau, v_threshold, v_reset, decay_input, detach_reset, surrogate, alpha, ...) or
    `params`, an sf_lif_params as is."""
    engine_kind = "lif" if kind in _NEURON_MODELS else kind
    if engine_kind not in LAYER_KINDS:
        raise ValueError(f"layer kind {kind!r} is not one of {', '.join(LAYER_KINDS + ('if', 'plif', 'alif'))}")
    d = LayerDesc()
    _engine._bindings()["default_desc"](LAYER_KINDS.index(engine_kind), ctypes.byref(d))
    neuron = {k: fields.pop(k) for k in list(fields) if k not in _DESC_FIELDS}
    for k, v in fields.items():
        setattr(d, k, v)
    if engine_kind in ("lif", "rlif"):
        raw = neuron.pop("params", None)
        if raw is not None and neuron:
            raise ValueError(f"layer {kind}: give `params` or neuron parameters, not both ({sorted(neuron)})")
        d.lif = raw if raw is not None else neuron_params(_NEURON_MODELS.get(kind, "lif"), **neuron)
    elif neuron:
        raise ValueError(f"layer {kind}: unknown fields {sorted(neuron)}")
    return d


class _NetworkFunction(torch.autograd.Function):
    """The engine's training forward and its backward as one autograd node over (x, *parameters)."""

    @staticmethod
    def forward(ctx, module, x, *params):
        want_dx = ctx.needs_input_grad[1]
        y = module._run_forward(x, True, want_dx)
        ctx.module, ctx.step, ctx.want_dx = module, module._forwards, want_dx
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        module = ctx.module
        if module._forwards != ctx.step:
            raise RuntimeError("spikefuse.torch.Network: the engine holds the activations of its last forward only; "
                               "run each backward before the next forward of the same Network")
        if module._backward_of == ctx.step:
            raise RuntimeError("spikefuse.torch.Network: this forward's backward ran already (the engine's backward "
                               "uses up what its forward kept): run the forward again")
        module._backward_of = ctx.step
        dx = module._run_backward(dy, ctx.want_dx)
        return (None, dx) + module._copied_grads(ctx.needs_input_grad[2:])


class Network(torch.nn.Module):
    """A libspikefuse network as a torch module.

    source: a config file (its layers, input shape and seed; `spikefuse train`'s format), a run directory or
    checkpoint (the config it stored, with the trained parameters and batch norm statistics), or a list of layer
    descriptions (spikefuse.torch.network.layer(...), with input_shape (C, H, W) or (N,)).
    device ("cpu", "cuda", "cuda:N"), precision ("fp32", "tf32", "bf16"; 16-bit ones on CUDA), memory ("full",
    "recompute", "lean": what the engine keeps for the backward), seed (initialisation, dropout) and input_spikes
    (the input holds 0/1 spikes; lists only) default to the config's (or cpu/fp32/recompute/0 for a list);
    settings: more config overrides for a file source, as `spikefuse train --set` takes them ({"train.sparse":
    "off", "layer3.tau": 3}).

    forward(x): x is [T, B, *input_shape] float32 on the module's device; returns the last layer's output
    [T, B, *out_shape] (the engine's readout and loss are not used: the loss is torch's). Each call is a fresh
    sequence. In train() mode batch norm uses batch statistics and updates its running ones, dropout drops; the
    backward is the engine's under its memory mode, and gives x its gradient where x requires one. The engine keeps
    one forward's activations: each backward must come before the next forward. Parameters (named as in the
    checkpoint: "0.weight", "3.w", ...) and buffers are torch tensors over the engine's memory: torch's optimizers
    update the engine's weights in place, the 16-bit copy of a bf16 network is rewritten before every forward."""

    def __init__(self, source, input_shape=None, *, device=None, precision=None, memory=None, seed=None,
                 input_spikes=None, settings=None):
        super().__init__()
        if isinstance(source, (list, tuple)):
            if settings:
                raise ValueError("Network: settings are config overrides; give them only with a config or run")
            if input_shape is None:
                raise ValueError("Network(list of layers) needs input_shape: (C, H, W) or (N,)")
            descs = [d if isinstance(d, LayerDesc) else layer(**d) for d in source]
            engine = _engine.Engine.from_layers(descs, input_shape, "cpu" if device is None else device,
                                                precision or "fp32", memory or "recompute", seed or 0,
                                                bool(input_spikes))
        else:
            if input_shape is not None:
                raise ValueError("Network: input_shape is the config's; give it only with a list of layers")
            if input_spikes is not None:
                raise ValueError("Network: input_spikes follows the config's encoding; give it only with a list of "
                                 "layers")
            overrides = {"train.device": device, "train.precision": precision, "train.memory": memory,
                         "train.seed": seed}
            overrides = {k: v for k, v in overrides.items() if v is not None}
            overrides.update(settings or {})
            engine = _engine.Engine.from_file(source, overrides)
        self._engine = engine
        p = engine.params
        kind, index = engine.device
        self._device = torch.device("cpu") if kind == _lib.DEVICE_CPU else torch.device("cuda", index)
        if self._device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("Network: the engine runs on CUDA but torch sees no CUDA device")
        self.precision = _engine.PRECISIONS[p.precision]
        self.memory = _engine.MEMORY_MODES[p.memory]
        self.input_shape = (p.in_channels, p.in_height, p.in_width) if p.in_height * p.in_width > 1 \
            else (p.in_channels,)
        descs = engine.layers()
        self.out_shape = self._shape_of(engine, len(descs))
        for i, d in enumerate(descs):
            self.add_module(str(i), _Layer(d, engine.tensor_shape(i + 1)))
        params = engine.tensor_infos(ROLE_PARAM)
        for i, (name, shape) in enumerate(params):
            owner, attr = name.split(".", 1)
            t = _EngineMemory(engine, engine.tensor_ptr(ROLE_PARAM, i), shape, self._device).tensor()
            getattr(self, owner).register_parameter(attr, torch.nn.Parameter(t))
        self._grad_span, self._grad_places = self._gradient_span(engine, params)
        self._grad_sizes, self._grad_parts = self._span_split(self._grad_places)
        self._engine_stream = None  # torch's view of the engine's CUDA stream, made at the first call
        for i, (name, shape) in enumerate(engine.tensor_infos(ROLE_BUFFER)):
            owner, attr = name.split(".", 1)
            t = _EngineMemory(engine, engine.tensor_ptr(ROLE_BUFFER, i), shape, self._device).tensor()
            getattr(self, owner).register_buffer(attr, t)
        self._params = [getattr(getattr(self, n.split(".", 1)[0]), n.split(".", 1)[1]) for n, _ in params]
        self._forwards = 0
        self._backward_of = -1  # the forward whose backward ran last
        self._16bit = self.precision in ("bf16", "fp16")

    def _gradient_span(self, engine, params):
        """The engine's gradients as one float32 tensor from the first to the end of the last (they lie in one
        allocation, in order), and each parameter's (offset, numel, shape) in it."""
        if not params:
            return None, []
        base = engine.tensor_ptr(ROLE_GRAD, 0)
        places, end = [], 0
        for i, (_, shape) in enumerate(params):
            offset, n = (engine.tensor_ptr(ROLE_GRAD, i) - base) // 4, 1
            for s in shape:
                n *= s
            if offset < end:
                raise RuntimeError("spikefuse.torch.Network: the engine's gradients are not in parameter order")
            places.append((offset, n, shape))
            end = offset + n
        return _EngineMemory(engine, base, (end,), self._device).tensor(), places

    def _copied_grads(self, needed):
        """The gradients of the last backward, for autograd: one copy of the engine's whole gradient span (the
        next backward overwrites it), handed out as views; None where a parameter takes no gradient."""
        if not any(needed):
            return tuple(None for _ in needed)
        parts = torch.split_with_sizes(self._grad_span.clone(), self._grad_sizes)
        return tuple(None if not need else parts[k] if len(shape) == 1 else parts[k].view(shape)  # 1-D: as split
                     for k, (_, _, shape), need in zip(self._grad_parts, self._grad_places, needed))

    @staticmethod
    def _span_split(places):
        """Sizes that split the gradient span into each parameter's part and the gaps between them (those not
        empty), and where each parameter's part is in that split: one torch.split_with_sizes per backward."""
        sizes, where = [], []
        for i, (offset, n, _) in enumerate(places):
            where.append(len(sizes))
            sizes.append(n)
            gap = (places[i + 1][0] if i + 1 < len(places) else offset + n) - offset - n
            if gap:
                sizes.append(gap)
        return sizes, where

    @staticmethod
    def _shape_of(engine, tensor_id):
        c, h, w = engine.tensor_shape(tensor_id)
        return (c, h, w) if h * w > 1 else (c,)

    @property
    def device(self):
        """The torch.device the engine network runs on (fixed when it is made)."""
        return self._device

    def layer_descs(self):
        """The engine's layer descriptions (sf_layer_desc), in order."""
        return self._engine.layers()

    def summary(self):
        """The engine's summary of the network (layers, shapes, parameter counts)."""
        return self._engine.summary()

    def __deepcopy__(self, memo):
        """A new engine network with the same layers, options, parameters, statistics and mode."""
        p = self._engine.params
        twin = Network(self.layer_descs(), self.input_shape, device=str(self._device), precision=self.precision,
                       memory=self.memory, seed=int(p.seed), input_spikes=bool(p.input_spikes))
        twin.load_state_dict(self.state_dict())
        for mine, theirs in zip(self._params, twin._params):
            theirs.requires_grad_(mine.requires_grad)
        memo[id(self)] = twin
        return twin.train(self.training)

    def __reduce_ex__(self, protocol):
        raise TypeError("spikefuse.torch.Network cannot be pickled (its memory is the engine's): save its "
                        "state_dict, and build the Network again to load it")

    def _apply(self, fn, *args, **kwargs):
        """.to() / .cuda() / .double() may not move the engine's memory: only what leaves every tensor in place."""
        for name, t in list(self.named_parameters()) + list(self.named_buffers()):
            out = fn(t)
            if out.device != t.device or out.dtype != t.dtype or out.data_ptr() != t.data_ptr():
                raise RuntimeError(f"spikefuse.torch.Network: {name} lives in the engine's memory on {t.device} as "
                                   f"float32; the device and precision are constructor options "
                                   f"(Network(..., device=..., precision=...))")
        return self

    def _check_input(self, x):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"Network: the input must be a tensor, got {type(x).__name__}")
        want = tuple(self.input_shape)
        if x.dim() != 2 + len(want) or tuple(x.shape[2:]) != want:
            shape = ", ".join(map(str, want))
            hint = " (T is missing: the input is time-major, one slice per step)" \
                if tuple(x.shape[1:]) == want else ""
            raise ValueError(f"Network: the input must be [T, B, {shape}], got {tuple(x.shape)}{hint}")
        if x.device != self._device:
            raise ValueError(f"Network: the input is on {x.device}, the network on {self._device}")
        if x.dtype != torch.float32:
            raise ValueError(f"Network: the input must be float32, got {x.dtype} (the engine's arithmetic is float32 "
                             f"at most; float64 runs only in spikefuse.torch's neuron modules)")

    def _sync_in(self):
        """CUDA: the engine's stream waits for torch's current one (which made the input, or updated the
        parameters); returns it."""
        if self._device.type != "cuda":
            return None
        if self._engine_stream is None:
            self._engine_stream = torch.cuda.ExternalStream(self._engine.stream(), device=self._device)
        self._engine_stream.wait_stream(torch.cuda.current_stream(self._device))
        return self._engine_stream

    def _on_device(self):
        """The network's CUDA device current while the engine launches (it launches on the current device)."""
        return torch.cuda.device(self._device) if self._device.type == "cuda" else contextlib.nullcontext()

    def _sync_out(self, engine_stream):
        """torch's current stream waits for the engine's work. That also covers the memory of x, y, dy and dx:
        the engine copies what it keeps, so their blocks are free for reuse once the current stream is past this
        point (record_stream on the engine's stream would have torch record events on it after the Network, and
        that stream with it, is gone)."""
        if engine_stream is not None:
            torch.cuda.current_stream(self._device).wait_stream(engine_stream)

    def _run_forward(self, x, training, want_dx=False):
        x = x.detach().contiguous()
        T, B = x.shape[:2]
        planned = self._engine.compiled_for
        if not training and planned and planned[0] == T and planned[1] > B:
            # evaluation treats every sample alone: a smaller batch (a loader's last) runs in the plan it has,
            # padded with zeros, instead of planning again
            pad = torch.zeros((T, planned[1] - B) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
            return self._run_forward(torch.cat([x, pad], 1), False)[:, :B]
        y = torch.empty((T, B) + tuple(self.out_shape), dtype=torch.float32, device=self._device)
        with self._on_device():
            self._engine.compile(T, B, self._engine.input_grad or want_dx)  # once the input's gradient was wanted
            s = self._sync_in()
            if self._16bit:
                self._engine.params_changed()  # the optimizer (or load_state_dict) wrote the fp32 weights in place
            self._engine.forward(x.data_ptr(), training, y.data_ptr())
            self._sync_out(s)
        self._forwards += 1
        return y

    def _run_backward(self, dy, want_dx):
        dy = dy.contiguous()
        dx = torch.empty(self._engine.compiled_for + tuple(self.input_shape), dtype=torch.float32,
                         device=self._device) if want_dx else None
        with self._on_device():
            s = self._sync_in()
            self._engine.backward(dy.data_ptr(), dx.data_ptr() if dx is not None else None)
            self._sync_out(s)
        return dx

    def forward(self, x):
        self._check_input(x)
        if self.training and torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad
                                                                                  for p in self._params)):
            return _NetworkFunction.apply(self, x, *self._params)
        with torch.no_grad():
            return self._run_forward(x, self.training)

    def extra_repr(self):
        shape = ", ".join(map(str, self.input_shape))
        return f"input [T, B, {shape}], device={self._device}, precision={self.precision}, memory={self.memory}"
