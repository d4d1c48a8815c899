"""fuse_graph.py — the layers of one Network that fuse assembles: each layer's description, the torch tensors it
takes its weights from and the module it came from, and every tensor's per-step shape by the engine's own rules,
so that a module the engine cannot take is refused when it is reached (and, with partial, left out again)."""
from .. import _engine

_PLANES = ("conv2d", "maxpool2d", "avgpool2d")  # kinds that write [C, H, W] planes
_VECTORS = ("linear", "flatten")  # kinds that write vectors


class Unsupported(Exception):
    """A module fuse cannot put in a Network (the reason, for the ValueError or for partial); located: the message
    names the part of a composite module (a ResNet's) where it lies."""

    def __init__(self, message, located=False):
        super().__init__(message)
        self.located = located


class Graph:
    """Layers in the engine's order with tensor ids as the engine counts them (0 the input, layer i writes i + 1);
    shapes[t] is tensor t's per step: (C, H, W) planes or (N,) vectors."""

    def __init__(self, input_shape):
        self.layers = []  # (sf_layer_desc, {engine tensor name: source tensor}, path, module)
        self.shapes = [tuple(input_shape)]

    @property
    def last(self):
        """The id of the tensor the last layer writes (0 while there is none)."""
        return len(self.layers)

    def add(self, desc, tensors, path, module, src=None, src2=None):
        """Appends a copy of `desc` reading tensor `src` (default: the last one) and, for an add layer, `src2`;
        returns the id of the tensor it writes. Unsupported where the engine refuses it on these shapes."""
        src = self.last if src is None else src
        d = type(desc).from_buffer_copy(desc)
        if src != self.last:
            d.input = src
        if src2 is not None:
            d.input2 = src2
        self.shapes.append(self._shape(d, src, src2))
        self.layers.append((d, tensors, path, module))
        return self.last

    def truncate(self, n):
        """Drops the layers after the first n (a module that turned out unsupported halfway)."""
        del self.layers[n:]
        del self.shapes[n + 1:]

    def _shape(self, d, src, src2):
        shape = self.shapes[src]
        if d.kind_name == "add":
            other = self.shapes[src2]
            if other != shape:
                raise Unsupported(f"the two sides of the connection differ: {_text(shape)} and {_text(other)} per "
                                  "step")
            return shape
        alone = type(d).from_buffer_copy(d)
        alone.input = alone.input2 = -1
        try:
            engine = _engine.Engine.from_layers([alone], shape, "cpu", "fp32", "recompute", 0, False)
        except _engine.LayerError as e:
            raise Unsupported(f"the engine's {d.kind_name} layer on {_text(shape)} per step: {e.reason}") from None
        c, h, w = engine.tensor_shape(1)
        planes = d.kind_name in _PLANES or (len(shape) == 3 and d.kind_name not in _VECTORS)
        return (c, h, w) if planes else (c * h * w,)


def _text(shape):
    return "x".join(map(str, shape))
