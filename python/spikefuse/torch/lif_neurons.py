"""lif_neurons.py — the neuron layers that run the fused LIF op: LIF (SpikingJelly's neuron.LIFNode), IF (IFNode, the
LIF without leak) and ALIF (the adaptive-threshold LIF, which SpikingJelly lacks), each all T steps in one kernel
call forward and one backward. Their positional arguments are SpikingJelly's, in its order."""
from . import functional
from .neuron_base import _Neuron


class LIF(_Neuron):
    """Leaky integrate-and-fire neurons, all T steps fused in one kernel call forward and backward.

    Arguments (SpikingJelly's LIFNode's, the positional ones in its order):
        tau            membrane time constant in steps, >= 1
        decay_input    whether the input is divided by tau too (SpikingJelly's decay_input)
        v_threshold    the potential at which a neuron spikes
        v_reset        the potential after a spike (hard reset); None: the soft reset, subtracting v_threshold
        surrogate      the surrogate gradient (below); None: "sigmoid"
        detach_reset   leave the reset out of the gradient
        step_mode      "m": x_seq [T, *] per call; "s": one step [*] per call, the state carried
        store_v_seq    keep v after every step of the last call in `v_seq`
        alpha          the surrogate's sharpness; None: its default
        grad_threshold θ_grad of a sparse backward (below); None: off
        keep_state     carry the membrane across calls (SpikingJelly's behaviour); False: every call starts anew
        surrogate_function, backend: SpikingJelly's names; surrogate_function= is surrogate=, backend is ignored
    A value the library refuses is a ValueError naming it and its range.

    forward(x_seq): x_seq [T, *] (CPU or CUDA; float32, float16 or bfloat16, spikes returned in the same dtype,
    the membrane in fp32; float64 on the CPU, computed in float64) → spikes of the same shape; step_mode="s": one
    step [*].
    Semantics are SpikingJelly's LIFNode, per neuron and step:
        decay_input:     h = v + (x - (v - v_reset)) / tau      else  h = v - (v - v_reset) / tau + x
        s = (h >= v_threshold);  v = v_reset where s else h      (v_reset=None: v = h - v_threshold·s, decay to 0)
    State: as SpikingJelly, v after the last step is kept and the next call continues from it (also its gradient:
    a sequence cut into chunks trains as the whole) until reset() — call spikingjelly's functional.reset_net(net)
    or net's LIF reset() between independent sequences. A state of another batch size is an error.
    keep_state=False makes every call start at v_reset (no reset needed; slightly less memory traffic).
    store_v_seq=True keeps v after every step of the last call in `v_seq` [T, *] (one kernel call per step).
    surrogate: "sigmoid", "atan", "fast_sigmoid", "rect", or a SpikingJelly surrogate object (surrogate.ATan(),
    ...; `surrogate_function=` is its SpikingJelly name), whose alpha it takes. The backward uses its derivative at
    z = h - v_threshold:
        sigmoid alpha·σ(alpha·z)(1-σ(alpha·z)); atan (alpha/2)/(1+(π/2·alpha·z)²); fast_sigmoid 1/(alpha·|z|+1)²;
        rect alpha if |z| < 1/(2·alpha) else 0
    alpha=None takes the surrogate's default (sigmoid 4, atan 2, fast_sigmoid 10, rect 1). detach_reset drops the
    reset path from the gradient; grad_threshold (θ_grad) zeroes the surrogate where h < θ_grad (a sparse backward).
    Only the input (and the incoming state) is saved for the backward, which recomputes the membrane potential (on
    a GPU past 32 steps from checkpoints of it every 32 steps, 1/32 of its size, that the forward keeps)."""

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate=None, detach_reset=False,
                 step_mode="m", *, store_v_seq=False, alpha=None, grad_threshold=None, keep_state=True,
                 surrogate_function=None, backend=None):
        super().__init__(step_mode, store_v_seq, keep_state, surrogate, alpha, surrogate_function, backend, tau=tau,
                         decay_input=decay_input, v_threshold=v_threshold, v_reset=v_reset,
                         detach_reset=detach_reset, grad_threshold=grad_threshold)


class IF(_Neuron):
    """Integrate-and-fire neurons (SpikingJelly's IFNode), all T steps fused: h = v + x, spike where
    h >= v_threshold, reset to v_reset (v_reset=None: subtract v_threshold). Surrogates, state and the other
    arguments (v_threshold, v_reset, surrogate, detach_reset, step_mode, store_v_seq, alpha, grad_threshold,
    keep_state) as LIF's; forward(x_seq) as LIF's."""

    _model = "if"
    _PARAMS = ("v_threshold", "v_reset", "detach_reset", "surrogate", "alpha", "grad_threshold")

    def __init__(self, v_threshold=1.0, v_reset=0.0, surrogate=None, detach_reset=False, step_mode="m", *,
                 store_v_seq=False, alpha=None, grad_threshold=None, keep_state=True, surrogate_function=None,
                 backend=None):
        super().__init__(step_mode, store_v_seq, keep_state, surrogate, alpha, surrogate_function, backend,
                         v_threshold=v_threshold, v_reset=v_reset, detach_reset=detach_reset,
                         grad_threshold=grad_threshold)


class ALIF(_Neuron):
    """Adaptive-threshold LIF neurons (Bellec et al. 2018, LSNN), all T steps fused: the LIF's h with a threshold
    that rises with each spike and decays back,
        θ_t = v_threshold + beta·b_t,   b_t = rho·b_{t-1} + (1 - rho)·s_{t-1},   b_0 = 0,
    s_t = (h_t >= θ_t), the surrogate at h_t - θ_t, the soft reset (v_reset=None) subtracting θ_t; gradients flow
    through b in time. rho = exp(-1/tau_adapt) where tau_adapt is given. SpikingJelly has no such node; the other
    names are LIFNode's. Every call starts anew (v at v_reset, b at 0): no state across calls, multi-step only.

    Arguments: tau, decay_input, v_threshold, v_reset, surrogate, detach_reset, alpha, grad_threshold as LIF's;
    rho the decay of the threshold's adaptation b per step; tau_adapt its time constant in steps instead (rho =
    exp(-1/tau_adapt)); beta how far each spike raises the threshold. forward(x_seq): x_seq [T, *] → spikes."""

    _model = "alif"
    _PARAMS = LIF._PARAMS + ("rho", "tau_adapt", "beta")
    _STEP_MODES = ("m",)

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate=None, detach_reset=False,
                 *, alpha=None, grad_threshold=None, rho=0.95, tau_adapt=None, beta=1.8, surrogate_function=None):
        super().__init__("m", False, False, surrogate, alpha, surrogate_function, None, tau=tau,
                         decay_input=decay_input, v_threshold=v_threshold, v_reset=v_reset,
                         detach_reset=detach_reset, grad_threshold=grad_threshold, rho=rho, tau_adapt=tau_adapt,
                         beta=beta)

    def _run(self, x_seq, u, keep):
        return functional.lif_with_state(x_seq, self._pvec, None, False)
