"""spikefuse.torch — PyTorch modules over libspikefuse's fused kernels: LIF, a drop-in for SpikingJelly's
neuron.LIFNode(step_mode="m") on CPU and CUDA tensors, and PLIF, IF (ParametricLIFNode, IFNode) and ALIF."""
try:
    import torch
except ImportError as e:
    raise ImportError("spikefuse.torch needs PyTorch: install torch for your platform (or `pip install "
                      "'./python[torch]'`)") from e

from . import functional
from .functional import lif_params

_SPIKINGJELLY_SURROGATES = {"Sigmoid": "sigmoid", "ATan": "atan", "Rect": "rect"}


class LIF(torch.nn.Module):
    """Multi-step leaky integrate-and-fire neurons, all T steps fused in one kernel call forward and backward.

    forward(x_seq): x_seq float32 [T, *] (CPU or CUDA, any trailing shape) → spikes of the same shape.
    Semantics are SpikingJelly's LIFNode(step_mode="m"), per neuron and step:
        decay_input:     h = v + (x - (v - v_reset)) / tau      else  h = v - (v - v_reset) / tau + x
        s = (h >= v_threshold);  v = v_reset where s else h      (v_reset=None: v = h - v_threshold·s, decay to 0)
    with the state starting at v_reset (0 for the soft reset) on every call: the module keeps no state between
    calls, so SpikingJelly's functional.reset_net is not needed (reset() exists and does nothing).
    The backward uses the surrogate derivative of the spike at z = h - v_threshold:
        sigmoid alpha·σ(alpha·z)(1-σ(alpha·z)); atan (alpha/2)/(1+(π/2·alpha·z)²); fast_sigmoid 1/(alpha·|z|+1)²;
        rect alpha if |z| < 1/(2·alpha) else 0
    alpha=None takes the surrogate's default (sigmoid 4, atan 2, fast_sigmoid 10, rect 1). detach_reset drops the
    reset path from the gradient; grad_threshold (θ_grad) zeroes the surrogate where h < θ_grad (a sparse backward).
    Only the input is saved for the backward, which recomputes the membrane potential."""

    step_mode = "m"

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None):
        super().__init__()
        self.tau = float(tau)
        self.decay_input = bool(decay_input)
        self.v_threshold = float(v_threshold)
        self.v_reset = None if v_reset is None else float(v_reset)
        self.detach_reset = bool(detach_reset)
        self.surrogate = surrogate
        self.alpha = None if alpha is None else float(alpha)
        self.grad_threshold = None if grad_threshold is None else float(grad_threshold)
        self.params()  # validates now, so a bad argument fails at construction, not at the first forward

    def params(self):
        """The sf_lif_params of the current attributes (looked up in a cache, so attributes may be changed)."""
        return lif_params(self.tau, self.decay_input, self.v_threshold, self.v_reset, self.detach_reset,
                          self.surrogate, self.alpha, self.grad_threshold)

    def forward(self, x_seq):
        return functional.apply_lif(x_seq, self.params())

    def reset(self):
        """Nothing to reset: the state starts anew on every call (kept for SpikingJelly's functional.reset_net)."""

    def extra_repr(self):
        alpha = self.params().alpha if self.alpha is None else self.alpha
        return (f"tau={self.tau}, decay_input={self.decay_input}, v_threshold={self.v_threshold}, "
                f"v_reset={self.v_reset}, detach_reset={self.detach_reset}, surrogate={self.surrogate!r}, "
                f"alpha={alpha:g}, grad_threshold={self.grad_threshold}")

    @classmethod
    def from_spikingjelly(cls, node):
        """The LIF equivalent to a SpikingJelly neuron.LIFNode with a Sigmoid, ATan or Rect surrogate."""
        sg = node.surrogate_function
        name = _SPIKINGJELLY_SURROGATES.get(type(sg).__name__)
        if name is None:
            raise ValueError(f"SpikingJelly surrogate {type(sg).__name__} has no spikefuse counterpart "
                             f"(supported: {', '.join(_SPIKINGJELLY_SURROGATES)})")
        if getattr(node, "step_mode", "m") != "m":
            raise ValueError("spikefuse.torch.LIF is multi-step: the SpikingJelly node has step_mode="
                             f"{node.step_mode!r}, expected 'm'")
        return cls(tau=node.tau, decay_input=node.decay_input, v_threshold=node.v_threshold, v_reset=node.v_reset,
                   detach_reset=node.detach_reset, surrogate=name, alpha=sg.alpha)


# The other neuron models (PLIF, IF, ALIF)
from .neurons import ALIF, IF, PLIF  # noqa: E402

# NIR exchange (needs the `nir` package, imported on first use)
from .nir_exchange import from_nir, to_nir  # noqa: E402

__all__ = ["LIF", "PLIF", "IF", "ALIF", "functional", "to_nir", "from_nir"]
