"""nir_exchange.py — PyTorch modules with spikefuse LIF layers to and from NIR graphs (the Neuromorphic Intermediate
Representation), through the `nir` package (`pip install nir`). docs/nir.md writes down the mapping; it is the one
`spikefuse export` / `spikefuse import` use, with dt the time step of one simulation step (1e-4 s by default, as
snnTorch and SpikingJelly assume)."""
import collections
import os

import numpy as np
import torch

from .. import _lib
from . import functional
from . import LIF
from .neuron_base import _Neuron as _StatefulNeuron


def _nir():
    try:
        import nir
    except ImportError as e:
        raise ImportError("spikefuse.torch.to_nir/from_nir need the `nir` package: pip install nir") from e
    return nir


def _per_sample(shape, steps):
    """The per-sample shape of a tensor whose leading dimensions hold T·B samples ([T, B, ...] or [T·B, ...])."""
    n = 1
    for k, d in enumerate(shape):
        n *= d
        if n == steps:
            return tuple(shape[k + 1:])
    raise ValueError(f"cannot find the T·B = {steps} samples in a tensor of shape {tuple(shape)}")


def _pair(v):
    return np.array(v if isinstance(v, (tuple, list)) else (v, v))


def _fold_batchnorm(node, bn, name):
    """Eval-mode batch norm folded into the Affine/Linear/Conv node before it: w·γ/√(var+ε), (b−μ)·γ/√(var+ε)+β."""
    nir = _nir()
    if not isinstance(node, (nir.Affine, nir.Linear, nir.Conv1d, nir.Conv2d)):
        raise ValueError(f"to_nir: {name} ({type(bn).__name__}): NIR has no batch norm, and it does not follow a "
                         "linear or convolution layer it could be folded into")
    scale = (bn.weight.detach().double() / torch.sqrt(bn.running_var.double() + bn.eps)).numpy()
    w = node.weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (node.weight.ndim - 1))
    b = getattr(node, "bias", None)
    b = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
    b = (b - bn.running_mean.double().numpy()) * scale + bn.bias.detach().double().numpy()
    node.weight = w.astype(np.float32)
    if isinstance(node, nir.Linear):
        return nir.Affine(weight=node.weight, bias=b.astype(np.float32))
    node.bias = b.astype(np.float32)
    return node


def _max_pool_of_spikes(m, prev_node):
    """A MaxPool2d (no padding, dilation or ceil mode) right after a spiking node."""
    nir = _nir()
    return (isinstance(m, torch.nn.MaxPool2d) and isinstance(prev_node, (nir.LIF, nir.IF, nir.Threshold))
            and not np.any(m.padding) and np.all(np.asarray(m.dilation) == 1) and not m.ceil_mode)


def _node_of(m, name, in_shape, out_shape, dt):
    """The NIR node of one leaf module (None: no node, the module is an identity at inference)."""
    nir = _nir()
    nn = torch.nn
    as_np = lambda t: t.detach().cpu().float().numpy()
    if isinstance(m, LIF):
        if m.v_reset is None:
            raise ValueError(f"to_nir: {name} (LIF): a soft reset (v_reset=None) has no NIR form")
        # SpikingJelly's semantics, so SpikingJelly's mapping: the leak is towards v_reset
        full = lambda v: np.full(in_shape, float(v))
        return nir.LIF(tau=full(m.tau * dt), r=full(1.0 if m.decay_input else m.tau), v_leak=full(m.v_reset),
                       v_threshold=full(m.v_threshold), v_reset=full(m.v_reset))
    if isinstance(m, nn.Linear):
        if m.bias is None:
            return nir.Linear(weight=as_np(m.weight))
        return nir.Affine(weight=as_np(m.weight), bias=as_np(m.bias))
    if isinstance(m, (nn.Conv1d, nn.Conv2d)):
        if m.padding_mode != "zeros":
            raise ValueError(f"to_nir: {name}: NIR convolutions pad with zeros only")
        bias = as_np(m.bias) if m.bias is not None else np.zeros(m.out_channels, dtype=np.float32)
        if isinstance(m, nn.Conv1d):
            return nir.Conv1d(input_shape=in_shape[-1], weight=as_np(m.weight), stride=m.stride[0],
                              padding=m.padding if isinstance(m.padding, str) else m.padding[0],
                              dilation=m.dilation[0], groups=m.groups, bias=bias)
        return nir.Conv2d(input_shape=tuple(in_shape[-2:]), weight=as_np(m.weight), stride=m.stride,
                          padding=m.padding, dilation=m.dilation, groups=m.groups, bias=bias)
    if isinstance(m, nn.AvgPool2d):
        if m.ceil_mode or m.divisor_override is not None or (np.any(m.padding) and not m.count_include_pad):
            raise ValueError(f"to_nir: {name}: NIR's AvgPool2d has no ceil mode, divisor override or padding left "
                             "out of the count")
        return nir.AvgPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride or m.kernel_size),
                             padding=_pair(m.padding))
    if isinstance(m, (nn.Flatten, nn.Unflatten, nn.Identity)) or isinstance(m, nn.modules.dropout._DropoutNd):
        if tuple(in_shape) == tuple(out_shape):
            return None  # moves time and batch dimensions only, or an identity at inference
        if len(out_shape) == 1:
            return nir.Flatten(input_type={"input": np.array(in_shape)}, start_dim=0, end_dim=-1)
        raise ValueError(f"to_nir: {name}: reshapes a sample from {tuple(in_shape)} to {tuple(out_shape)}; NIR's "
                         "Flatten makes vectors only")
    if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
        raise ValueError(f"to_nir: {name} ({type(m).__name__}): NIR has no max pooling; a MaxPool2d of spikes (right "
                         "after a LIF layer) is written as SumPool2d + Threshold, but this one pools other values")
    raise ValueError(f"to_nir: {name} ({type(m).__name__}) has no NIR counterpart here")


def to_nir(module, sample, dt=1e-4):
    """The NIR graph (nir.NIRGraph) of `module`, a chain of layers (an nn.Sequential, possibly nested) of
    nn.Linear, nn.Conv1d/2d, nn.AvgPool2d, nn.BatchNorm (folded into the layer before it, eval statistics),
    nn.Dropout and reshapes (dropped) and spikefuse.torch.LIF, run once on `sample` [T, B, *shape] (time-major,
    as LIF takes it) to learn every node's shape. dt is the time step in seconds. Anything else, max pooling and
    the soft reset included, raises ValueError naming the module."""
    nir = _nir()
    if sample.dim() < 3:
        raise ValueError(f"to_nir: sample must be [T, B, *shape], got shape {tuple(sample.shape)}")
    steps = sample.shape[0] * sample.shape[1]
    names = {m: n for n, m in module.named_modules()}
    calls = []
    leaves = [m for m in module.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(lambda m, i, o: calls.append((m, i[0], o))) for m in leaves]
    training = module.training
    # the trace is not a step of the model's own sequence: its neurons' membrane state stays as it was
    states = [(m, m._u, m.v_seq) for m in leaves if isinstance(m, _StatefulNeuron)]
    for m, _, _ in states:
        m.reset()
    module.eval()
    try:
        with torch.no_grad():
            module(sample)
    finally:
        for h in hooks:
            h.remove()
        module.train(training)
        for m, u, v_seq in states:
            m._u, m.v_seq = u, v_seq
    nodes, edges = {"input": nir.Input(input_type=np.array(_per_sample(sample.shape, steps)))}, []
    prev, prev_out = "input", sample
    for m, x, y in calls:
        name = names[m] or type(m).__name__.lower()
        if x is not prev_out:
            raise ValueError(f"to_nir: {name} does not read the output of the layer before it; to_nir takes chains "
                             "of layers (an nn.Sequential)")
        prev_out = y
        in_shape, out_shape = _per_sample(x.shape, steps), _per_sample(y.shape, steps)
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            if prev == "input":
                raise ValueError(f"to_nir: {name}: a batch norm on the input has nothing to fold into")
            nodes[prev] = _fold_batchnorm(nodes[prev], m, name)
            continue
        key = name.replace(".", "_")
        if _max_pool_of_spikes(m, nodes[prev]):
            # over spikes a window's maximum is 1 exactly when its sum exceeds 0.5
            nodes[key + "_sum"] = nir.SumPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride),
                                                padding=_pair(0))
            nodes[key] = nir.Threshold(threshold=np.full(out_shape, 0.5))
            edges += [(prev, key + "_sum"), (key + "_sum", key)]
            prev = key
            continue
        node = _node_of(m, name, in_shape, out_shape, dt)
        if node is None:
            continue
        nodes[key] = node
        edges.append((prev, key))
        prev = key
    nodes["output"] = nir.Output(output_type=np.array(_per_sample(prev_out.shape, steps)))
    edges.append((prev, "output"))
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata={"dt": float(dt), "source": "spikefuse.torch.to_nir"})


# ---------------------------------------------------------------- from NIR

def _uniform(node, field, default=None):
    v = getattr(node, field, None)
    if v is None:
        if default is None:
            raise ValueError(f"from_nir: a {type(node).__name__} node lacks {field}")
        return default
    v = np.asarray(v, dtype=np.float64)
    if v.size and not np.all(v == v.flat[0]):
        raise ValueError(f"from_nir: {type(node).__name__}.{field} differs between neurons: spikefuse's LIF layers "
                         "share their parameters")
    return float(v.flat[0])


class _Neuron(torch.nn.Module):
    """A NIR LIF or IF node as the fused spikefuse LIF kernel over [T, ...] (sf_lif_params_from_nir's mapping)."""

    def __init__(self, node, dt, is_if):
        super().__init__()
        self.params = _lib.lif_params_from_nir(
            is_if, 0.0 if is_if else _uniform(node, "tau"), _uniform(node, "r"),
            0.0 if is_if else _uniform(node, "v_leak"), _uniform(node, "v_threshold"),
            _uniform(node, "v_reset", 0.0), dt)

    def forward(self, x):
        return functional.apply_lif(x, self.params)


class _LeakyIntegrator(torch.nn.Module):
    """A NIR LI node: v_t = a·v_{t-1} + (1 − a)·v_leak + (r·dt/τ)·I_t, a = 1 − dt/τ, from v = 0, over [T, ...]."""

    def __init__(self, node, dt):
        super().__init__()
        tau, r, self.v_leak = _uniform(node, "tau"), _uniform(node, "r"), _uniform(node, "v_leak")
        if not tau >= dt:
            raise ValueError(f"from_nir: LI tau = {tau} is shorter than dt = {dt}")
        self.a, self.k = 1.0 - dt / tau, r * dt / tau

    def forward(self, x):
        v, out = torch.zeros_like(x[0]), []
        for t in range(x.shape[0]):
            v = self.a * v + (1.0 - self.a) * self.v_leak + self.k * x[t]
            out.append(v)
        return torch.stack(out)


class _Flatten(torch.nn.Module):
    def __init__(self, start, end):
        super().__init__()
        self.start, self.end = int(start), int(end)

    def forward(self, x):  # x: [T·B, *sample]
        n = x.dim() - 1
        start, end = self.start % n, self.end % n
        return x.flatten(1 + start, 1 + end)


def _ints(v):
    v = np.asarray(v)
    return int(v) if v.ndim == 0 else tuple(int(a) for a in v.reshape(-1))


def _padding(v):
    return v.decode() if isinstance(v, bytes) else v if isinstance(v, str) else _ints(v)


def _module_of(name, node, dt):
    """(module, kind): kind 'step' runs on [T·B, ...] samples, 'time' on [T, B, ...] sequences."""
    nir = _nir()
    nn = torch.nn
    t = lambda a: torch.nn.Parameter(torch.as_tensor(np.asarray(a, dtype=np.float32)))
    if isinstance(node, (nir.Affine, nir.Linear)):
        w = np.asarray(node.weight)
        m = nn.Linear(w.shape[1], w.shape[0], bias=isinstance(node, nir.Affine))
        m.weight = t(w)
        if isinstance(node, nir.Affine):
            m.bias = t(node.bias)
        return m, "step"
    if isinstance(node, (nir.Conv1d, nir.Conv2d)):
        w = np.asarray(node.weight)
        cls = nn.Conv1d if isinstance(node, nir.Conv1d) else nn.Conv2d
        m = cls(w.shape[1] * _ints(node.groups), w.shape[0], w.shape[2:], stride=_ints(node.stride),
                padding=_padding(node.padding), dilation=_ints(node.dilation), groups=_ints(node.groups))
        m.weight, m.bias = t(w), t(node.bias)
        return m, "step"
    if isinstance(node, (nir.AvgPool2d, nir.SumPool2d)):
        return nn.AvgPool2d(_ints(node.kernel_size), _ints(node.stride), _ints(node.padding),
                            divisor_override=1 if isinstance(node, nir.SumPool2d) else None), "step"
    if isinstance(node, nir.Flatten):
        return _Flatten(node.start_dim, node.end_dim), "step"
    if isinstance(node, (nir.LIF, nir.IF)):
        return _Neuron(node, dt, isinstance(node, nir.IF)), "time"
    if isinstance(node, nir.LI):
        return _LeakyIntegrator(node, dt), "time"
    raise ValueError(f"from_nir: node '{name}' ({type(node).__name__}) has no spikefuse counterpart here")


class NIRModule(torch.nn.Module):
    """A feed-forward NIR graph as a PyTorch module over time-major input [T, B, *input shape] → [T, B, *output
    shape]; a node with several inputs gets their sum, as NIR defines it. Neurons run spikefuse's fused LIF kernel
    (CPU or CUDA tensors). Built by from_nir."""

    def __init__(self, graph, dt):
        super().__init__()
        nir = _nir()
        self.dt = float(dt)
        preds = collections.defaultdict(list)
        for a, b in graph.edges:
            preds[b].append(a)
        inputs = [n for n, v in graph.nodes.items() if isinstance(v, nir.Input)]
        outputs = [n for n, v in graph.nodes.items() if isinstance(v, nir.Output)]
        if len(inputs) != 1 or len(outputs) != 1:
            raise ValueError("from_nir: the graph must have exactly one Input and one Output node")
        order, placed = [], set()
        while len(order) < len(graph.nodes):
            ready = [n for n in graph.nodes if n not in placed and all(p in placed for p in preds[n])]
            if not ready:
                raise ValueError("from_nir: the graph has a cycle (a recurrent connection), which is not supported")
            order += ready
            placed.update(ready)
        self.order, self.preds, self.input, self.output = order, dict(preds), inputs[0], outputs[0]
        self.layers = torch.nn.ModuleDict()
        self.kinds = {}
        for n in order:
            node = graph.nodes[n]
            if isinstance(node, nir.Scale):
                self.register_buffer("scale_" + str(len(self.kinds)), torch.as_tensor(np.asarray(node.scale,
                                                                                                   np.float32)))
                self.kinds[n] = ("scale", "scale_" + str(len(self.kinds)))
            elif isinstance(node, nir.Threshold):
                self.kinds[n] = ("threshold", float(_uniform(node, "threshold")))
            elif not isinstance(node, (nir.Input, nir.Output)):
                key = "n%d" % len(self.layers)
                self.layers[key], kind = _module_of(n, node, self.dt)
                self.kinds[n] = (kind, key)

    def forward(self, x):
        T, B = x.shape[:2]
        values = {self.input: x}
        for n in self.order:
            if n == self.input:
                continue
            srcs = [values[p] for p in self.preds.get(n, [])]
            if not srcs:
                raise ValueError(f"from_nir: node '{n}' has no input")
            v = srcs[0]
            for s in srcs[1:]:
                v = v + s
            kind = self.kinds.get(n)
            if kind is None:  # Output
                values[n] = v
            elif kind[0] == "step":
                y = self.layers[kind[1]](v.reshape(T * B, *v.shape[2:]))
                values[n] = y.reshape(T, B, *y.shape[1:])
            elif kind[0] == "time":
                values[n] = self.layers[kind[1]](v.contiguous())
            elif kind[0] == "scale":
                values[n] = v * getattr(self, kind[1])
            else:
                values[n] = (v > kind[1]).to(v.dtype)
        return values[self.output]


def from_nir(graph, dt=None):
    """A PyTorch module computing a NIR graph (a nir.NIRGraph, or the path of a .nir file) over time-major input
    [T, B, *shape], its LIF and IF nodes as spikefuse's fused LIF kernel. dt (seconds per step) defaults to the
    graph's metadata "dt" (what spikefuse writes), else 1e-4. Nodes without a counterpart (CubaLIF, recurrent
    graphs, ...) raise ValueError naming them."""
    nir = _nir()
    if isinstance(graph, (str, os.PathLike)):
        graph = nir.read(graph)
    if dt is None:
        meta = graph.metadata if isinstance(graph.metadata, dict) else {}
        dt = float(meta.get("dt", 1e-4))
    return NIRModule(graph, dt)
