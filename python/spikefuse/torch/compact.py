"""compact.py — spikes kept as bytes: the layer after a spiking layer (a convolution, a linear map) saves its input,
the spikes, for its weight gradient, and autograd keeps them as 4 bytes each. Inside spikes_saved_as_bytes() every
saved tensor that spikefuse marked as spikes (the outputs of LIF and BNLIF, and views of them) is kept as uint8 and
turned back into its dtype when the backward needs it: exact, since spikes are 0 or 1. Eager mode only (autograd's
saved-tensor hooks; torch.compile traces without them)."""
import contextlib

import torch

_MARK = "_spikefuse_spikes"


def mark_spikes(t):
    """Tags t, whose values are 0 or 1, as spikes (what spikes_saved_as_bytes compacts); returns t."""
    setattr(t, _MARK, True)
    return t


def _is_spikes(t):
    if getattr(t, _MARK, False):
        return True
    base = t._base
    return base is not None and getattr(base, _MARK, False)


def _pack(t):
    if t.dtype.is_floating_point and _is_spikes(t):
        return t.to(torch.uint8), t.dtype
    return t


def _unpack(saved):
    if isinstance(saved, tuple):
        return saved[0].to(saved[1])
    return saved


@contextlib.contextmanager
def spikes_saved_as_bytes():
    """Within it, autograd keeps the spikes that later layers save for their backward as 1 byte per element."""
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        yield
