"""spikingjelly_nodes.py — what spikefuse reads from SpikingJelly's neurons and batch norms, by their class names (as
every SpikingJelly version names them; SpikingJelly itself is not imported): which spikefuse class a node maps to,
the constructor arguments that reproduce it, its training flag and membrane state, and the batch norms a fused
neuron can take. The neuron classes' from_spikingjelly builds on it; spikingjelly_convert.py swaps whole models."""
import torch

from . import surrogates

# SpikingJelly's neuron classes with a spikefuse counterpart, and the fused counterpart with a batch norm before it
_NEURONS = {"LIFNode": "LIF", "IFNode": "IF", "ParametricLIFNode": "PLIF"}
WITH_BATCH_NORM = {"LIF": "BNLIF", "IF": "BNIF"}
_BATCH_NORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
_SUPPORTED = "LIFNode (LIF), IFNode (IF), ParametricLIFNode (PLIF)"


def counterpart(node):
    """The name of the spikefuse class of a SpikingJelly neuron; ValueError where it has none, or where a subclass of
    a known node overrides the methods that define its equations."""
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


def neuron_kwargs(node, model):
    """The constructor arguments of a spikefuse neuron of `model` ("lif", "if", "plif") that reproduce SpikingJelly
    neuron `node`."""
    if not hasattr(node, "surrogate_function"):
        raise ValueError(f"{type(node).__name__} lacks SpikingJelly's surrogate_function: not one of its neurons")
    if getattr(node, "_neuron_precision", None) is not None:
        raise ValueError(f"{type(node).__name__} runs in reduced precision ({node._neuron_precision}, set by "
                         "spikingjelly.activation_based.precision); spikefuse computes the membrane in float32")
    sg, alpha = surrogates.from_spikingjelly(node.surrogate_function)
    kw = dict(v_threshold=_scalar(node, "v_threshold"), v_reset=_scalar(node, "v_reset"), surrogate=sg, alpha=alpha,
              detach_reset=node.detach_reset, step_mode=getattr(node, "step_mode", "s"),
              store_v_seq=getattr(node, "store_v_seq", False))
    if model in ("lif", "plif"):
        kw["decay_input"] = node.decay_input
    if model == "lif":
        kw["tau"] = _scalar(node, "tau")
    return kw


def carry_state(node, m, device):
    """Moves m to `device` and gives it node's training flag and membrane state (a tensor after a forward)."""
    m = m.to(device).train(node.training)
    v = getattr(node, "v", None)
    if isinstance(v, torch.Tensor):
        m.v = v.detach().clone()
    return m


def device_of(*modules):
    for module in modules:
        for t in list(module.parameters()) + list(module.buffers()):
            return t.device
    return torch.device("cpu")


def batch_norm_of(bn):
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
