"""spikingjelly_convert.py — SpikingJelly neurons (and batch norm → neuron pairs) as spikefuse modules: one node by its
model (LIFNode → LIF, IFNode → IF, ParametricLIFNode → PLIF; with a batch norm before it, LIFNode → BNLIF and IFNode →
BNIF), and convert(model), which swaps every one in a network. The node's parameters, surrogate, step mode, training
flag and membrane state carry over; a node whose class or settings change SpikingJelly's equations is refused with
a message naming what differs (spikingjelly_nodes.py reads the nodes; each class's from_spikingjelly builds one)."""
import torch

from .bn_neurons import BNIF, BNLIF
from .lif_neurons import IF, LIF
from .plif import PLIF
from .spikingjelly_nodes import WITH_BATCH_NORM, batch_norm_of, counterpart, is_spikingjelly_neuron

_CLASSES = {c.__name__: c for c in (LIF, IF, PLIF, BNLIF, BNIF)}


def neuron_of(node):
    """The spikefuse module equivalent to SpikingJelly neuron `node`, of the model its class names."""
    return _CLASSES[counterpart(node)].from_spikingjelly(node)


def bn_neuron_of(bn, node):
    """The fused spikefuse module (BNLIF, BNIF) equivalent to batch norm `bn` followed by SpikingJelly neuron `node`
    (BNLIF's message where the neuron has no fused form)."""
    return _CLASSES[WITH_BATCH_NORM.get(counterpart(node), "BNLIF")].from_spikingjelly(bn, node)


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
    if not is_spikingjelly_neuron(node) or batch_norm_of(bn) is None:
        return False
    try:
        # in a Sequential a torch batch norm runs on what the layer before gives: one step [B, C, ...]
        return counterpart(node) in WITH_BATCH_NORM and (batch_norm_of(bn)[1] or "s") == getattr(node, "step_mode",
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
