"""nir_export.py — spikefuse.torch.to_nir: a PyTorch module of torch layers and spikefuse neurons as a NIR graph (the
Neuromorphic Intermediate Representation), through the `nir` package. The module runs once on a sample with hooks on
its layers; each layer call becomes nodes, and each tensor a layer reads is traced back to the layers that made it,
so chains (nn.Sequential), the networks load_run builds (residual sums included) and anything else made of module
calls map alike. docs/nir.md writes down the mapping: it is the one `spikefuse export` uses, with dt the time step
of one simulation step."""
import numpy as np
import torch

from . import _kernels, run
from .bn_neurons import _BatchNormNeuron
from .lif_neurons import ALIF
from .neuron_base import _Neuron
from .nir_import import _nir

_FLATTENS = (torch.nn.Flatten, run._Flatten)
_DROPPED = (torch.nn.Flatten, torch.nn.Unflatten, torch.nn.Identity, torch.nn.modules.dropout._DropoutNd,
            run.TimeDropout, run._Identity, run._Flatten)


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
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"to_nir: {name} ({type(bn).__name__}): a batch norm without running statistics "
                         "(track_running_stats=False) has no fixed form to fold")
    as64 = lambda t: t.detach().cpu().double()
    scale = (as64(bn.weight) / torch.sqrt(as64(bn.running_var) + bn.eps)).numpy()
    w = node.weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (node.weight.ndim - 1))
    b = getattr(node, "bias", None)
    b = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
    b = (b - as64(bn.running_mean).numpy()) * scale + as64(bn.bias).numpy()
    node.weight = w.astype(np.float32)
    if isinstance(node, nir.Linear):
        return nir.Affine(weight=node.weight, bias=b.astype(np.float32))
    node.bias = b.astype(np.float32)
    return node


def _neuron_node(m, name, shape, dt):
    """The NIR LIF or IF node of a spikefuse neuron layer over samples of `shape`: the kernels' recurrence
    h = a·u + c·x in u = v − shift (SpikingJelly's hard-reset layers measure v from v_reset, so shift = v_reset:
    their leak goes to v_leak = v_reset; the engine's layers leak to 0) is NIR's Euler step with τ = dt/(1 − a) and
    r = 1 (c = 1 − a) or τ/dt (c = 1); no leak (a = 1) is NIR's IF with r = 1/dt."""
    nir = _nir()
    p = _kernels.lif_params_of(m.lif_params())
    if isinstance(m, ALIF):
        raise ValueError(f"to_nir: {name} (ALIF): NIR has no adaptive-threshold neuron")
    if p.soft_reset:
        raise ValueError(f"to_nir: {name} ({type(m).__name__}): a soft reset (v_reset=None) has no NIR form")
    full = lambda v: np.broadcast_to(np.asarray(v, dtype=np.float64), shape).copy()
    shift = m._shift
    theta, reset = full(p.v_threshold + shift), full(p.v_reset + shift)
    if p.model == 2 or (p.decay == 1.0 and not p.decay_input):  # enum sf_neuron_model: 2 is the IF
        return nir.IF(r=full(1.0 / dt), v_threshold=theta, v_reset=reset)
    if p.model == 1:  # the PLIF: a = 1 − sigmoid(w), per layer or per channel of [C, ...]
        k = torch.sigmoid(m.w.detach().cpu().double()).reshape((-1,) + (1,) * (len(shape) - 1)).numpy()
        one_minus_a = np.broadcast_to(k, shape)
    else:
        one_minus_a = 1.0 - p.decay if p.decay > 0 else 1.0 / p.tau
    tau = full(dt / one_minus_a)
    r = full(1.0) if p.decay_input else tau / dt
    return nir.LIF(tau=tau, r=r, v_leak=full(shift), v_threshold=theta, v_reset=reset)


def _is_spiking(node):
    nir = _nir()
    return isinstance(node, (nir.LIF, nir.IF, nir.Threshold))


class _Graph:
    """The NIR graph being built: nodes, edges, each node's output shape per sample, and for every traced tensor
    the nodes whose sum it is (the tensor a folded batch norm read maps to None: nothing may read it again)."""

    def __init__(self, sample, steps):
        nir = _nir()
        self.steps = steps
        shape = _per_sample(sample.shape, steps)
        self.nodes = {"input": nir.Input(input_type=np.array(shape))}
        self.shapes = {"input": shape}
        self.edges = []
        self.made = {id(sample): ["input"]}
        self.last = ["input"]

    def sources(self, t, name):
        keys = self.made.get(id(t), ())
        if keys is None:
            raise ValueError(f"to_nir: {name} reads a layer's output before the batch norm that was folded into that "
                             "layer: NIR has no batch norm node to take it from")
        if not keys:
            raise ValueError(f"to_nir: {name} reads a tensor that no traced layer made: to_nir follows the module "
                             "calls, so a computation between modules (a reshape, torch.cat, ...) is not seen; make "
                             "it a module, or a chain of modules")
        return list(keys)

    def add(self, key, node, srcs, shape):
        self.nodes[key] = node
        self.shapes[key] = tuple(shape)
        self.edges += [(s, key) for s in srcs]
        return [key]

    def shape_of(self, srcs, name):
        shapes = {self.shapes[s] for s in srcs}
        if len(shapes) != 1:
            raise ValueError(f"to_nir: {name} sums inputs of different shapes {sorted(shapes)}")
        return shapes.pop()

    def result(self, y, keys):
        self.made[id(y)] = keys
        self.last = keys


def _fold_into(g, srcs, bn, name):
    """Folds batch norm bn (evaluation statistics) into the one node that made its input; returns that node's key."""
    if len(srcs) != 1 or srcs[0] == "input":
        raise ValueError(f"to_nir: {name} ({type(bn).__name__}): a batch norm needs one linear or convolution layer "
                         "before it to be folded into")
    if sum(1 for a, _ in g.edges if a == srcs[0]):
        raise ValueError(f"to_nir: {name}: the layer before this batch norm feeds other layers too, so the batch "
                         "norm cannot be folded into it")
    g.nodes[srcs[0]] = _fold_batchnorm(g.nodes[srcs[0]], bn, name)
    return srcs[0]


def _layer_nodes(g, m, name, x, y, dt):
    """Adds the nodes of one layer call m(x) = y; returns the keys whose sum y is."""
    nir = _nir()
    nn = torch.nn
    key = name.replace(".", "_")
    srcs = g.sources(x, name)
    in_shape = g.shape_of(srcs, name)
    as_np = lambda t: t.detach().cpu().float().numpy()
    if isinstance(m, _BatchNormNeuron):
        folded = _fold_into(g, srcs, m, name)
        g.made[id(x)] = None
        return g.add(key, _neuron_node(m, name, in_shape, dt), [folded], in_shape)
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        folded = _fold_into(g, srcs, m, name)
        g.made[id(x)] = None
        return [folded]
    if isinstance(m, run.RecurrentLIF):
        raise ValueError(f"to_nir: {name} (RecurrentLIF): recurrent layers are not exported (NIR writes them as "
                         "cycles, which from_nir does not take)")
    if isinstance(m, _Neuron):
        return g.add(key, _neuron_node(m, name, in_shape, dt), srcs, in_shape)
    if isinstance(m, run.Readout):
        if m.kind != "leaky":
            return srcs  # the mean over T is the decision rule, not a node
        full = lambda v: np.full(in_shape, float(v))
        return g.add(key, nir.LI(tau=full(m.tau * dt), r=full(1.0), v_leak=full(0.0)), srcs, in_shape)
    if isinstance(m, nn.Linear):
        if len(in_shape) != 1:
            if not isinstance(m, run._Linear):
                raise ValueError(f"to_nir: {name}: a Linear over samples of shape {in_shape}: NIR's Affine takes "
                                 "vectors (flatten them first)")
            srcs = g.add(key + "_flatten", nir.Flatten(input_type={"input": np.array(in_shape)}, start_dim=0,
                                                       end_dim=-1), srcs, (int(np.prod(in_shape)),))
        node = nir.Linear(weight=as_np(m.weight)) if m.bias is None else \
            nir.Affine(weight=as_np(m.weight), bias=as_np(m.bias))
        return g.add(key, node, srcs, (m.out_features,))
    out_shape = _per_sample(y.shape, g.steps)
    if isinstance(m, (nn.Conv1d, nn.Conv2d)):
        if m.padding_mode != "zeros":
            raise ValueError(f"to_nir: {name}: NIR convolutions pad with zeros only")
        bias = as_np(m.bias) if m.bias is not None else np.zeros(m.out_channels, dtype=np.float32)
        if isinstance(m, nn.Conv1d):
            node = nir.Conv1d(input_shape=in_shape[-1], weight=as_np(m.weight), stride=m.stride[0],
                              padding=m.padding if isinstance(m.padding, str) else m.padding[0],
                              dilation=m.dilation[0], groups=m.groups, bias=bias)
        else:
            node = nir.Conv2d(input_shape=tuple(in_shape[-2:]), weight=as_np(m.weight), stride=m.stride,
                              padding=m.padding, dilation=m.dilation, groups=m.groups, bias=bias)
        return g.add(key, node, srcs, out_shape)
    if isinstance(m, nn.AvgPool2d):
        if m.ceil_mode or m.divisor_override is not None or (np.any(m.padding) and not m.count_include_pad):
            raise ValueError(f"to_nir: {name}: NIR's AvgPool2d has no ceil mode, divisor override or padding left "
                             "out of the count")
        return g.add(key, nir.AvgPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride or m.kernel_size),
                                        padding=_pair(m.padding)), srcs, out_shape)
    if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
        plain = isinstance(m, nn.MaxPool2d) and not np.any(m.padding) and np.all(np.asarray(m.dilation) == 1) \
            and not m.ceil_mode
        if not (plain and all(_is_spiking(g.nodes[s]) for s in srcs)):
            raise ValueError(f"to_nir: {name} ({type(m).__name__}): NIR has no max pooling; a MaxPool2d of spikes "
                             "(right after a LIF layer) is written as SumPool2d + Threshold, but this one pools other "
                             "values")
        # over spikes a window's maximum is 1 exactly when its sum exceeds 0.5
        pooled = g.add(key + "_sum", nir.SumPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride),
                                                   padding=_pair(0)), srcs, out_shape)
        return g.add(key, nir.Threshold(threshold=np.full(out_shape, 0.5)), pooled, out_shape)
    if isinstance(m, _DROPPED):
        torch_in, flat = _per_sample(x.shape, g.steps), (int(np.prod(in_shape)),)
        if torch_in == out_shape:
            return srcs  # moves time and batch dimensions only, or an identity at inference
        if isinstance(m, _FLATTENS) and out_shape in (flat, flat + (1, 1)):
            return srcs if in_shape == flat else g.add(key, nir.Flatten(input_type={"input": np.array(in_shape)},
                                                                        start_dim=0, end_dim=-1), srcs, flat)
        raise ValueError(f"to_nir: {name}: reshapes a sample from {torch_in} to {out_shape}; NIR's Flatten makes "
                         "vectors only")
    raise ValueError(f"to_nir: {name} ({type(m).__name__}) has no NIR counterpart here")


def to_nir(module, sample, dt=1e-4):
    """The NIR graph (nir.NIRGraph) of `module`, run once on `sample` [T, B, *shape] (time-major, as the neurons take
    it) to learn every node's shape and its inputs: nn.Linear, nn.Conv1d/2d, nn.AvgPool2d, batch norm (folded into
    the layer before it, evaluation statistics; BNLIF and BNIF too), nn.Dropout and reshapes (dropped), max pooling
    of spikes, spikefuse's LIF, IF, PLIF, BNLIF and BNIF, and the networks load_run returns (their residual sums and
    leaky readout included). dt is the time step in seconds. Anything else, the soft reset and the ALIF included,
    raises ValueError naming the module."""
    nir = _nir()
    if sample.dim() < 3:
        raise ValueError(f"to_nir: sample must be [T, B, *shape], got shape {tuple(sample.shape)}")
    names = {m: n for n, m in module.named_modules()}
    units = [m for m in module.modules() if isinstance(m, (_Neuron, run.Readout, run.RecurrentLIF)) or
             not list(m.children())]
    inside = {c for m in units if isinstance(m, (_Neuron, run.RecurrentLIF)) for c in m.modules() if c is not m}
    units = [m for m in units if m not in inside]
    calls = []
    hooks = [m.register_forward_hook(lambda m, i, o: calls.append((m, i, o))) for m in units]
    training = module.training
    # the trace is not a step of the model's own sequence: its neurons' membrane state stays as it was
    states = [(m, m._u, m.v_seq) for m in units if isinstance(m, _Neuron)]
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
    g = _Graph(sample, sample.shape[0] * sample.shape[1])
    for m, inputs, y in calls:
        name = names[m] or type(m).__name__.lower()
        if isinstance(m, run.Add):
            if m.connect != "add":
                raise ValueError(f"to_nir: {name}: connect = {m.connect} has no NIR node (NIR sums edges, it has no "
                                 "products of spikes)")
            srcs = g.sources(inputs[0], name) + g.sources(inputs[1], name)
            g.shape_of(srcs, name)
            g.result(y, srcs)
            continue
        if len(inputs) != 1:
            raise ValueError(f"to_nir: {name} ({type(m).__name__}) takes {len(inputs)} inputs; NIR nodes sum theirs")
        g.result(y, _layer_nodes(g, m, name, inputs[0], y, dt))
    out_shape = g.shape_of(g.last, "the output")
    g.nodes["output"] = nir.Output(output_type=np.array(out_shape))
    g.edges += [(s, "output") for s in g.last]
    return nir.NIRGraph(nodes=g.nodes, edges=g.edges, metadata={"dt": float(dt), "source": "spikefuse.torch.to_nir"})
