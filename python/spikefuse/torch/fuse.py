"""fuse.py — spikefuse.torch.fuse: a torch / SpikingJelly network of nn.Sequential trees (SpikingJelly's residual
ResNets and blocks among their modules: fuse_resnet.py) turned into a Network with its weights, so the engine runs
all of it; with partial=True the modules it cannot take stay torch modules and the runs between them become
Networks.

The model is read as SpikingJelly's multi-step networks run: it takes [T, B, ...], and the layers inside a
SeqToANNContainer (or SpikingJelly's layer.* wrappers in step mode 'm') run on every step alone, as the engine's
layers do; neurons run over the whole sequence, each forward a fresh one (SpikingJelly's reset_net between
batches)."""
import torch

from . import _kernels
from .bn_neurons import BNIF, BNLIF
from .fuse_graph import Graph
from .fuse_graph import Unsupported as _Unsupported
from .fuse_resnet import add_residual, is_residual
from .lif_neurons import ALIF, IF, LIF
from .network import Network, layer
from .plif import PLIF
from .spikingjelly_convert import neuron_of
from .spikingjelly_nodes import is_spikingjelly_neuron

_PER_STEP_CONTAINERS = ("SeqToANNContainer", "MultiStepContainer")
_SF_NEURONS = (LIF, IF, PLIF, ALIF)


def _square(v, what, name):
    if isinstance(v, str):
        raise _Unsupported(f"{what} {name}={v!r}: the engine takes a number")
    a, b = (v, v) if isinstance(v, int) else tuple(v)
    if a != b:
        raise _Unsupported(f"{what} {name}={tuple(v)}: the engine's {what} is square")
    return int(a)


def _per_step(m, inside):
    """Whether m runs on every step alone (on [T·B, ...]): inside a per-step container, or a SpikingJelly layer.*
    wrapper in step mode 'm'."""
    return inside or getattr(m, "step_mode", None) == "m"


def _conv(m, shape):
    if m.groups != 1 or _square(m.dilation, "Conv2d", "dilation") != 1 or m.padding_mode != "zeros":
        raise _Unsupported("Conv2d with groups, dilation or a padding mode other than zeros: the engine has none")
    d = layer("conv2d", out_channels=m.out_channels, kernel=_square(m.kernel_size, "Conv2d", "kernel_size"),
              stride=_square(m.stride, "Conv2d", "stride"), padding=_square(m.padding, "Conv2d", "padding"),
              bias=1 if m.bias is not None else 0)
    return [(d, {"weight": m.weight, "bias": m.bias})]


def _linear(m, shape):
    return [(layer("linear", out_features=m.out_features, bias=1 if m.bias is not None else 0),
             {"weight": m.weight, "bias": m.bias})]


def _bn_desc(m, what):
    if not m.affine or not m.track_running_stats or m.momentum is None:
        raise _Unsupported(f"{what} with affine=False, track_running_stats=False or momentum=None: the engine's "
                           "batch norm learns weight and bias and keeps running statistics with a momentum")
    return (layer("batchnorm", bn_eps=float(m.eps), bn_momentum=float(m.momentum)),
            {"weight": m.weight, "bias": m.bias, "running_mean": m.running_mean, "running_var": m.running_var})


def _pool(m, shape):
    kind = "maxpool2d" if isinstance(m, torch.nn.MaxPool2d) else "avgpool2d"
    what = type(m).__name__
    if m.ceil_mode:
        raise _Unsupported(f"{what} with ceil_mode=True: the engine floors")
    if kind == "maxpool2d" and _square(m.dilation, what, "dilation") != 1:
        raise _Unsupported(f"{what} with dilation: the engine has none")
    if kind == "avgpool2d" and (not m.count_include_pad or m.divisor_override is not None):
        raise _Unsupported(f"{what} without count_include_pad or with divisor_override: the engine divides by k·k")
    k = _square(m.kernel_size, what, "kernel_size")
    stride = k if m.stride is None else _square(m.stride, what, "stride")
    return [(layer(kind, kernel=k, stride=stride, padding=_square(m.padding, what, "padding")), {})]


def _global_pool(m, shape):
    """AdaptiveAvgPool2d to 1×1 (the ResNets' head) is the engine's global average pool."""
    size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size, m.output_size)
    if tuple(size) != (1, 1):
        raise _Unsupported(f"AdaptiveAvgPool2d(output_size={m.output_size}): the engine's global pool gives 1x1 only")
    if len(shape) != 3 or shape[1] != shape[2]:
        raise _Unsupported(f"AdaptiveAvgPool2d on steps of shape {shape}: the engine's global pool needs square planes")
    return [(layer("avgpool2d", kernel=0), {})]


def _neuron(m):
    """(sf_lif_params, the PLIF's w or None) of a spikefuse.torch or SpikingJelly neuron."""
    if is_spikingjelly_neuron(m):
        try:
            m = neuron_of(m)
        except ValueError as e:
            raise _Unsupported(str(e)) from None
    return _kernels.lif_params_of(m.lif_params()), getattr(m, "w", None) if isinstance(m, PLIF) else None


def _multi_step_neuron(m):
    """Refuses a neuron in step mode 's': given [T, B, ...] it would take it as one step."""
    if getattr(m, "step_mode", "m") != "m":
        raise _Unsupported(f"{type(m).__name__} in step mode 's' would take [T, B, ...] as one step: set "
                           "step_mode='m' (SpikingJelly's functional.set_step_mode(model, 'm'))")


def _spikingjelly_dropout(m):
    """SpikingJelly's layer.Dropout: one mask for all steps of a sequence, as the engine's dropout (not a subclass of
    torch's)."""
    return type(m).__name__ == "Dropout" and type(m).__module__.startswith("spikingjelly") and hasattr(m, "p")


_TORCH_LAYERS = (torch.nn.Linear, torch.nn.Flatten, torch.nn.Dropout, torch.nn.Conv2d, torch.nn.BatchNorm1d,
                 torch.nn.BatchNorm2d, torch.nn.MaxPool2d, torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d)


def _own_forward(m):
    """Whether m's forward is torch's or SpikingJelly's (a subclass that overrides it may compute anything)."""
    owner = next(c for c in type(m).__mro__ if "forward" in c.__dict__)
    return owner.__module__.startswith(("torch.", "spikingjelly"))


def _descs_of(m, shape, per_step):
    """[(layer description, {engine tensor name: source tensor})] of leaf module m reading per-step shape `shape`;
    _Unsupported where the engine has no such layer."""
    what = type(m).__name__
    if isinstance(m, torch.nn.Identity):
        return []
    if isinstance(m, _TORCH_LAYERS) and not _own_forward(m):
        raise _Unsupported(f"{what} overrides {type(m).__mro__[1].__name__}.forward: what it computes is unknown")
    if isinstance(m, (BNLIF, BNIF)):
        if not m.affine or not m.track_running_stats:
            raise _Unsupported(f"{what} with affine=False or track_running_stats=False: the engine's batch norm "
                               "learns weight and bias and keeps running statistics")
        if m.momentum is None:
            raise _Unsupported(f"{what} with momentum=None: the engine's batch norm has a momentum")
        _multi_step_neuron(m)
        bn = layer("batchnorm", bn_eps=float(m.eps), bn_momentum=float(m.momentum))
        tensors = {"weight": m.weight, "bias": m.bias, "running_mean": m.running_mean, "running_var": m.running_var}
        return [(bn, tensors), (layer("lif", params=_kernels.lif_params_of(m.lif_params())), {})]
    if isinstance(m, _SF_NEURONS) or is_spikingjelly_neuron(m):
        p, w = _neuron(m)
        _multi_step_neuron(m)
        return [(layer("lif", params=p), {"w": w} if w is not None else {})]
    if isinstance(m, torch.nn.Linear):
        if len(shape) != 1:
            raise _Unsupported(f"Linear on steps of shape {shape}: flatten them first (the engine's linear layer "
                               "reads vectors)")
        return _linear(m, shape)
    if isinstance(m, torch.nn.Flatten):
        start = 1 if per_step else 2
        if m.start_dim != start or m.end_dim != -1:
            raise _Unsupported(f"Flatten(start_dim={m.start_dim}, end_dim={m.end_dim}) here flattens more than one "
                               f"step's dimensions (the engine's flatten is start_dim={start}, end_dim=-1)")
        return [(layer("flatten"), {})] if len(shape) > 1 else []
    if isinstance(m, torch.nn.Dropout) or _spikingjelly_dropout(m):
        return [(layer("dropout", dropout_p=float(m.p)), {})]
    step_layers = (torch.nn.Conv2d, torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.MaxPool2d,
                   torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d)
    if isinstance(m, step_layers) and not per_step:
        raise _Unsupported(f"{what} outside a SeqToANNContainer (or SpikingJelly's layer.{what} in step mode 'm') "
                           "would run on [T, B, ...] as one batch")
    if isinstance(m, torch.nn.Conv2d):
        if len(shape) != 3:
            raise _Unsupported(f"Conv2d on steps of shape {shape}: it reads [C, H, W]")
        return _conv(m, shape)
    if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
        if isinstance(m, torch.nn.BatchNorm1d) != (len(shape) == 1):
            raise _Unsupported(f"{what} on steps of shape {shape}")
        return [_bn_desc(m, what)]
    if isinstance(m, (torch.nn.MaxPool2d, torch.nn.AvgPool2d)):
        return _pool(m, shape)
    if isinstance(m, torch.nn.AdaptiveAvgPool2d):
        return _global_pool(m, shape)
    raise _Unsupported(f"{what} has no counterpart among the engine's layers")


def _leaves(module, path, inside):
    """(path, module, per-step) of the modules to convert, in order: nn.Sequential trees are opened (their
    SeqToANNContainer / MultiStepContainer parts run per step), every other module is a leaf."""
    if isinstance(module, torch.nn.Sequential):
        inner = inside or type(module).__name__ in _PER_STEP_CONTAINERS
        for name, child in module._modules.items():
            if child is not None:
                yield from _leaves(child, f"{path}.{name}" if path else name, inner)
    else:
        yield path or "(model)", module, _per_step(module, inside)


def _add(graph, path, m, per_step, src):
    """Appends leaf module m's layers (a residual one's too) to graph, reading tensor src; returns the tensor it
    ends in. _Unsupported where the engine has no such layer."""
    if is_residual(m):
        return add_residual(graph, m, path, src, _add_tree)
    for d, tensors in _descs_of(m, graph.shapes[src], per_step):
        src = graph.add(d, tensors, path, m, src=src)
    return src


def _add_tree(graph, module, path, src):
    """_add for each leaf of `module` (an nn.Sequential tree, or one module) in turn, from tensor src; a leaf it
    cannot take is _Unsupported naming the leaf and its path (the innermost one, in a residual leaf's parts)."""
    for leaf_path, m, per_step in _leaves(module, path, False):
        try:
            src = _add(graph, leaf_path, m, per_step, src)
        except _Unsupported as e:
            if e.located:
                raise
            raise _Unsupported(f"{leaf_path} ({type(m).__name__}): {e}", located=True) from None
    return src


def _step_shape(x):
    return tuple(x.shape[2:])


def _build(graph, options, training):
    """The Network of graph's layers, with the modules' weights."""
    try:
        net = Network([d for d, _, _, _ in graph.layers], input_shape=graph.shapes[0], **options)
    except ValueError as e:
        raise ValueError(f"fuse: {e}") from None
    with torch.no_grad():
        for i, (_, tensors, path, m) in enumerate(graph.layers):
            own = getattr(net, str(i))
            for name, src in tensors.items():
                if src is None:
                    continue
                dst = getattr(own, name)
                if dst.numel() != src.numel():
                    raise ValueError(f"fuse: {path} ({type(m).__name__}): {name} has {src.numel()} values, the "
                                     f"engine's layer {dst.numel()}")
                dst.copy_(src.detach().reshape(dst.shape))
                if isinstance(src, torch.nn.Parameter) and isinstance(dst, torch.nn.Parameter):
                    dst.requires_grad_(src.requires_grad)
    return net.train(training)


def _reset(module):
    """Clears the membrane state a probe left in the kept modules (SpikingJelly's reset_net)."""
    for m in module.modules():
        if m is not module and hasattr(m, "reset") and callable(m.reset):
            m.reset()
    if hasattr(module, "reset") and callable(module.reset):
        module.reset()


def fuse(model, sample, *, partial=False, **options):
    """A Network (or, with partial, an nn.Sequential of Networks and the modules kept in torch) computing what
    `model` computes, with its weights (copied: the result does not share them with `model`).

    sample: an input [T, B, ...] of the model (its shape, device and, with partial, values that probe the kept
    modules' output shapes). Supported: nn.Sequential trees (SpikingJelly's SeqToANNContainer and layer.* wrappers
    in step mode 'm' included) of Conv2d, Linear, BatchNorm1d/2d, MaxPool2d/AvgPool2d, AdaptiveAvgPool2d(1), Flatten,
    Dropout, Identity, SpikingJelly's LIFNode/IFNode/ParametricLIFNode and spikefuse.torch's LIF, IF, PLIF, ALIF,
    BNLIF, BNIF (neurons in step mode 'm'), and SpikingJelly's residual networks made of these: sew_resnet's
    SEWResNet, BasicBlock, Bottleneck (cnf 'ADD', 'AND', 'IAND') and spiking_resnet's SpikingResNet, BasicBlock,
    Bottleneck, as their own forward computes them.
    A module outside these raises ValueError naming it and its path (in a ResNet, the part of it that differs);
    partial=True keeps it in torch (a ResNet or block whole). options go to Network (device — the sample's by
    default —, precision, memory, seed). Dropout's mask is one per sequence in the engine (SpikingJelly's
    layer.Dropout), so outputs agree in eval() mode or with p = 0."""
    if not isinstance(sample, torch.Tensor) or sample.dim() < 3:
        raise ValueError("fuse: sample must be a tensor [T, B, ...] (time-major)")
    options.setdefault("device", str(sample.device))
    pieces, graph, x = [], Graph(_step_shape(sample)), sample.detach()

    def close_run():
        nonlocal x
        if graph.layers:
            net = _build(graph, options, model.training)
            pieces.append(net)
            if partial:
                with torch.no_grad():
                    was = net.training
                    x = net.eval()(x.float())
                    net.train(was)

    for path, m, per_step in _leaves(model, "", False):
        start = graph.last
        try:
            _add(graph, path, m, per_step, start)
        except _Unsupported as e:
            if not partial:
                raise ValueError(f"fuse: {path} ({type(m).__name__}): {e}") from None
            graph.truncate(start)
            close_run()
            with torch.no_grad():
                was = m.training
                x = m.eval()(x)
                m.train(was)
            _reset(m)
            pieces.append(m)
            graph = Graph(_step_shape(x))
    close_run()
    if not pieces:
        raise ValueError("fuse: the model has no layers")
    if len(pieces) == 1 and isinstance(pieces[0], Network):
        return pieces[0]
    return torch.nn.Sequential(*pieces).train(model.training)
