"""nir_import.py — spikefuse.torch.from_nir: a NIR graph (the Neuromorphic Intermediate Representation, through the
`nir` package, `pip install nir`) as a PyTorch module whose LIF and IF nodes run spikefuse's fused kernel.
docs/nir.md writes down the mapping; it is the one `spikefuse import` uses, with dt the time step of one simulation
step (1e-4 s by default, as snnTorch and SpikingJelly assume). nir_export.py goes the other way."""
import collections
import os

import numpy as np
import torch

from .. import _lib
from . import functional


def _nir():
    try:
        import nir
    except ImportError as e:
        raise ImportError("spikefuse.torch.to_nir/from_nir need the `nir` package: pip install nir") from e
    return nir


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
