"""spikingjelly_convert.py — SpikingJelly neurons (and batch norm → neuron pairs) as spikefuse modules: one node by its
model (LIFNode → LIF, IFNode → IF, ParametricLIFNode → PLIF; with a batch norm before it, LIFNode → BNLIF and IFNode →
BNIF), and convert(model), which swaps every one in a network. The node's parameters, surrogate, step mode, training
flag and membrane state carry over; a node whose class or settings change SpikingJelly's equations is refused with
a message naming what differs. SpikingJelly itself is not imported: nodes are recognised by their class names, as
every SpikingJelly version names them."""
import torch

from . import surrogates
from .bn_neurons import BNIF, BNLIF
from .lif_neurons import IF, LIF
from .plif import PLIF

# SpikingJelly's neuron classes with a spikefuse counterpart, and the fused counterpart with a batch norm before it
_NEURONS = {"LIFNode": LIF, "IFNode": IF, "ParametricLIFNode": PLIF}
_WITH_BATCH_NORM = {LIF: BNLIF, IF: BNIF}
_BATCH_NORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
_SUPPORTED = "LIFNode (LIF), IFNode (IF), ParametricLIFNode (PLIF)"


def _counterpart(node):
    """The spikefuse class of a SpikingJelly neuron; ValueError where it has none, or where a subclass of a known
    node overrides the methods that define its equations."""
    mro = type(node).__mro__
    for k, cls in enumerate(mro):
        if cls.__name__ not in _NEURONS:
            continue
        defined = {n for c in mro[k:] if c not in (torch.nn.Module, object) for n in vars(c) if not n.startswith("__")}
        changed = sorted({n for c in mro[:k] for n in vars(c) if n in defined and n != "extra_repr"})
        if changed:
            raise ValueError(f"{type(node).__name__} subclasses SpikingJelly's {cls.__name__} and overrides "
                             f"{', '.join(changed)}: its equations may differ from {cls.__name__}'s, so it is not "
                             f"converted")
        return _NEURONS[cls.__name__]
    raise ValueError(f"{type(node).__name__} has no spikefuse counterpart (supported: {_SUPPORTED})")


def is_spikingjelly_neuron(m):
    """A SpikingJelly neuron layer: a subclass of its BaseNode (every one of its spiking neurons)."""
    return any(c.__name__ == "BaseNode" and c.__module__.startswith("spikingjelly") for c in type(m).__mro__) or \
        any(c.__name__ in _NEURONS for c in type(m).__mro__)


def _scalar(node, name):
    v = getattr(node, name)
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError(f"{type(node).__name__}.{name} has {v.numel()} values: spikefuse's neurons share one")
        return float(v)
    return v


def _neuron_kwargs(node, cls):
    """The constructor arguments of `cls` that reproduce SpikingJelly neuron `node`."""
    if not hasattr(node, "surrogate_function"):
        raise ValueError(f"{type(node).__name__} lacks SpikingJelly's surrogate_function: not one of its neurons")
    if getattr(node, "_neuron_precision", None) is not None:
        raise ValueError(f"{type(node).__name__} runs in reduced precision ({node._neuron_precision}, set by "
                         "spikingjelly.activation_based.precision); spikefuse computes the membrane in float32")
    sg, alpha = surrogates.from_spikingjelly(node.surrogate_function)
    kw = dict(v_threshold=_scalar(node, "v_threshold"), v_reset=_scalar(node, "v_reset"), surrogate=sg, alpha=alpha,
              detach_reset=node.detach_reset, step_mode=getattr(node, "step_mode", "s"),
              store_v_seq=getattr(node, "store_v_seq", False))
    if cls._model in ("lif", "plif"):
        kw["decay_input"] = node.decay_input
    if cls._model == "lif":
        kw["tau"] = _scalar(node, "tau")
    return kw


def _carry_state(node, m, device):
    """Moves m to `device` and gives it node's training flag and membrane state (a tensor after a forward)."""
    m = m.to(device).train(node.training)
    v = getattr(node, "v", None)
    if isinstance(v, torch.Tensor):
        m.v = v.detach().clone()
    return m


def _device_of(*modules):
    for module in modules:
        for t in list(module.parameters()) + list(module.buffers()):
            return t.device
    return torch.device("cpu")


def neuron_of(node, expect=None):
    """The spikefuse module equivalent to SpikingJelly neuron `node`; with `expect` (a spikefuse class), node must
    be of that class's model."""
    cls = _counterpart(node)
    if expect is not None and cls is not expect:
        raise ValueError(f"{expect.__name__}.from_spikingjelly: {type(node).__name__} is a different neuron model "
                         f"({cls.__name__}); use {cls.__name__}.from_spikingjelly, or spikefuse.torch.convert, "
                         "which picks the model")
    kw = _neuron_kwargs(node, cls)
    if cls is PLIF:
        w = node.w.detach()
        m = PLIF(init_tau=float(1.0 + torch.exp(-w.float()).mean()), channels=None if w.dim() == 0 else w.numel(),
                 **kw)
        with torch.no_grad():
            m.w.copy_(w.reshape(m.w.shape))
        m.w.requires_grad_(node.w.requires_grad)
        return _carry_state(node, m, w.device)
    v = getattr(node, "v", None)
    return _carry_state(node, cls(**kw), v.device if isinstance(v, torch.Tensor) else torch.device("cpu"))


def _batch_norm_of(bn):
    """(the torch batch norm, the step mode it runs in) of a batch norm that can precede a fused neuron:
    SpikingJelly's layer.BatchNorm1d/2d/3d (its step_mode), a torch one alone in SpikingJelly's SeqToANNContainer
    ('m'), or a torch one (None: over one step [B, C, ...], or over the T·B samples of a sequence flattened by the
    caller; the statistics of either are the fused layer's in that step mode); None otherwise."""
    if type(bn).__name__ == "SeqToANNContainer" and len(bn) == 1:
        inner = bn[0]
        ok = type(inner).__name__ in _BATCH_NORMS and isinstance(inner, torch.nn.modules.batchnorm._BatchNorm)
        return (inner, "m") if ok else None
    if type(bn).__name__ in _BATCH_NORMS and isinstance(bn, torch.nn.modules.batchnorm._BatchNorm):
        return bn, getattr(bn, "step_mode", None)
    return None


def bn_neuron_of(bn, node, expect=None):
    """The fused spikefuse module (BNLIF, BNIF) equivalent to batch norm `bn` followed by SpikingJelly neuron `node`,
    with the batch norm's parameters, running statistics and training flag."""
    cls = _counterpart(node)
    fused = _WITH_BATCH_NORM.get(cls)
    if fused is None or (expect is not None and fused is not expect):
        raise ValueError(f"{(expect or BNLIF).__name__}.from_spikingjelly: a batch norm followed by "
                         f"{type(node).__name__} ({cls.__name__}) " +
                         (f"is {fused.__name__}: use {fused.__name__}.from_spikingjelly, or spikefuse.torch.convert"
                          if fused is not None else "has no fused form (BNLIF and BNIF take LIFNode and IFNode)"))
    found = _batch_norm_of(bn)
    if found is None:
        raise ValueError(f"{fused.__name__}.from_spikingjelly: {type(bn).__name__} is not a batch norm it fuses "
                         "(SpikingJelly's layer.BatchNorm1d/2d/3d, or torch's, alone or in a SeqToANNContainer)")
    inner, bn_step_mode = found
    kw = _neuron_kwargs(node, cls)
    if bn_step_mode not in (None, kw["step_mode"]):
        raise ValueError(f"{fused.__name__}.from_spikingjelly: the batch norm runs in step mode {bn_step_mode!r}, the "
                         f"neuron in {kw['step_mode']!r}")
    m = fused(inner.num_features, eps=inner.eps, momentum=inner.momentum, affine=inner.affine,
              track_running_stats=inner.track_running_stats, **kw)
    m.load_state_dict(inner.state_dict(), strict=False)
    for name in ("weight", "bias"):
        if inner.affine:
            getattr(m, name).requires_grad_(getattr(inner, name).requires_grad)
    m = _carry_state(node, m, _device_of(inner))
    return m.train(inner.training)


def convert(model, fuse_bn=True):
    """Swaps, in place, every SpikingJelly neuron in `model` for its spikefuse counterpart (LIFNode → LIF, IFNode →
    IF, ParametricLIFNode → PLIF), and, with fuse_bn, each batch norm directly followed by a LIFNode or IFNode in an
    nn.Sequential for one fused BNLIF / BNIF (in the batch norm's place, so its state_dict names stay; the neuron's
    place holds an nn.Identity). Returns the model (or, when `model` is itself a neuron, its counterpart). A
    neuron without a counterpart raises ValueError naming its place in the model."""
    if is_spikingjelly_neuron(model):
        return neuron_of(model)
    _convert_children(model, fuse_bn, "")
    return model


def _fusable(bn, node):
    if not is_spikingjelly_neuron(node) or _batch_norm_of(bn) is None:
        return False
    try:
        # in a Sequential a torch batch norm runs on what the layer before gives: one step [B, C, ...]
        return _counterpart(node) in _WITH_BATCH_NORM and (_batch_norm_of(bn)[1] or "s") == getattr(node, "step_mode",
                                                                                                     "s")
    except ValueError:
        return False  # refused below, as a neuron on its own, with its message


def _convert_children(parent, fuse_bn, prefix):
    names = [n for n, m in parent._modules.items() if m is not None]
    pairs = isinstance(parent, torch.nn.Sequential) and fuse_bn
    i = 0
    while i < len(names):
        name, child = names[i], parent._modules[names[i]]
        path = prefix + name
        try:
            if pairs and i + 1 < len(names) and _fusable(child, parent._modules[names[i + 1]]):
                parent._modules[name] = bn_neuron_of(child, parent._modules[names[i + 1]])
                parent._modules[names[i + 1]] = torch.nn.Identity()
                i += 2
                continue
            if is_spikingjelly_neuron(child):
                parent._modules[name] = neuron_of(child)
            else:
                _convert_children(child, fuse_bn, path + ".")
        except ValueError as e:
            if str(e).startswith("convert: "):
                raise
            raise ValueError(f"convert: {path}: {e}") from None
        i += 1
