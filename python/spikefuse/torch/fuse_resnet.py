"""fuse_resnet.py — SpikingJelly's residual ResNets for fuse: sew_resnet's SEWResNet and spiking_resnet's
SpikingResNet and their BasicBlock / Bottleneck, each turned into the engine's layers as its forward computes
(SpikingJelly 2.0's). Recognised by class name (a SpikingJelly class in the module's MRO, whose forward it still
uses) and by their modules; their parts (conv1, bn1, sn1, ..., downsample) convert as any other modules.

SEW blocks (cnf set): out = sew_function(., ., cnf) of the branch's spikes A and the shortcut S (the input, or
downsample then downsample_sn): BasicBlock passes (S, A), so IAND is S·(1 − A), the engine's ADD layer with
input = A, input2 = S; Bottleneck passes (A, S), so IAND is A·(1 − S): input = S, input2 = A. Spiking blocks: the
branch ends in its last BN, the shortcut (the input or downsample) is added, then the last neuron. The ResNets: conv1,
bn1, sn1, maxpool, layer1..4, avgpool, flattened per step (avgpool in step mode 'm'), fc."""
from .._net import CONNECTS
from .fuse_graph import Unsupported
from .network import layer

_BLOCKS = {"BasicBlock": 2, "Bottleneck": 3}  # the branch's conv → bn → sn stages
_RESNETS = ("SEWResNet", "SpikingResNet")
_RESNET_PARTS = ("conv1", "bn1", "sn1", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc")


def _spikingjelly_class(m, names):
    """The SpikingJelly class among `names` that m is an instance of (None where there is none)."""
    for cls in type(m).__mro__:
        if cls.__name__ in names and cls.__module__.startswith("spikingjelly"):
            return cls
    return None


def is_residual(m):
    """Whether m is one of SpikingJelly's ResNets or residual blocks (converted as a whole, or not at all)."""
    return _spikingjelly_class(m, tuple(_BLOCKS) + _RESNETS) is not None


def _check_forward(m, cls, methods):
    """Refuses m where its forward (or what the forward calls) is not SpikingJelly's own `cls`'s."""
    for name in methods:
        owner = next((c for c in type(m).__mro__ if name in vars(c)), None)
        if owner is not cls or name in vars(m):
            raise Unsupported(f"its {name} is not SpikingJelly's {cls.__name__}.{name} (fuse converts that "
                              "computation only)")


def _check_parts(m, cls, expected):
    """Refuses m where its modules are not the ones SpikingJelly's `cls` has."""
    have = {n for n, c in m._modules.items() if c is not None}
    extra, missing = sorted(have - set(expected)), [n for n in expected if n not in have]
    if extra or missing:
        raise Unsupported(f"its modules differ from SpikingJelly's {cls.__name__}'s" +
                          (f": no {', '.join(missing)}" if missing else "") +
                          (f": {', '.join(extra)} besides" if extra else ""))


def _join(path, name):
    return name if path == "(model)" else f"{path}.{name}"


def add_residual(graph, m, path, src, add_tree):
    """Appends the layers of SpikingJelly ResNet or block m (at `path`) to graph, reading tensor src; returns the
    tensor it ends in. add_tree(graph, module, path, src) does the same for any other module (its parts).
    Unsupported names the part of m that differs."""
    cls = _spikingjelly_class(m, _RESNETS)
    if cls is not None:
        _check_forward(m, cls, ("forward", "_forward_impl"))
        _check_parts(m, cls, _RESNET_PARTS)
        x = src
        for name in _RESNET_PARTS[:-2]:
            x = add_tree(graph, getattr(m, name), _join(path, name), x)
        x = add_tree(graph, m.avgpool, _join(path, "avgpool"), x)
        if getattr(m.avgpool, "step_mode", None) != "m":
            raise Unsupported("its avgpool is not in step mode 'm': SpikingResNet's forward then flattens T and B "
                              "together")
        if len(graph.shapes[x]) == 3:
            x = graph.add(layer("flatten"), {}, path, m, src=x)  # torch.flatten(x, 2) of the forward
        return add_tree(graph, m.fc, _join(path, "fc"), x)
    cls = _spikingjelly_class(m, tuple(_BLOCKS))
    _check_forward(m, cls, ("forward",))
    n, sew = _BLOCKS[cls.__name__], hasattr(m, "cnf")
    shortcut = [] if getattr(m, "downsample", None) is None else ["downsample"] + (["downsample_sn"] if sew else [])
    _check_parts(m, cls, [f"{part}{i}" for i in range(1, n + 1) for part in ("conv", "bn", "sn")] + shortcut)
    if sew and m.cnf not in ("ADD", "AND", "IAND"):
        raise Unsupported(f"cnf={m.cnf!r}: SpikingJelly's sew_function takes 'ADD', 'AND' or 'IAND'")
    branch = src
    for i in range(1, n + 1):
        for part in ("conv", "bn", "sn") if sew or i < n else ("conv", "bn"):
            branch = add_tree(graph, getattr(m, f"{part}{i}"), _join(path, f"{part}{i}"), branch)
    s = src
    for name in shortcut:
        s = add_tree(graph, getattr(m, name), _join(path, name), s)
    if not sew:
        out = graph.add(layer("add"), {}, path, m, src=branch, src2=s)
        return add_tree(graph, getattr(m, f"sn{n}"), _join(path, f"sn{n}"), out)
    a, b = (branch, s) if cls.__name__ == "BasicBlock" else (s, branch)
    return graph.add(layer("add", connect=CONNECTS.index(m.cnf.lower())), {}, path, m, src=a, src2=b)
