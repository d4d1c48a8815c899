"""neuron.py — the spiking modules: LIF (a drop-in for SpikingJelly's neuron.LIFNode) and BNLIF (its
layer.BatchNorm2d(step_mode="m") followed by LIFNode, fused), with SpikingJelly's state semantics: the membrane
after the last step is kept and the next call continues from it until reset()."""
import torch

from .. import _lib
from . import _kernels, _ops, compact, functional

_SPIKINGJELLY_SURROGATES = {"Sigmoid": "sigmoid", "ATan": "atan", "Rect": "rect"}


def _surrogate_of(node):
    sg = node.surrogate_function
    name = _SPIKINGJELLY_SURROGATES.get(type(sg).__name__)
    if name is None:
        raise ValueError(f"SpikingJelly surrogate {type(sg).__name__} has no spikefuse counterpart "
                         f"(supported: {', '.join(_SPIKINGJELLY_SURROGATES)})")
    return name, sg.alpha


def _neuron_kwargs(node):
    """LIF keyword arguments of a SpikingJelly LIFNode."""
    surrogate, alpha = _surrogate_of(node)
    return dict(tau=node.tau, decay_input=node.decay_input, v_threshold=node.v_threshold, v_reset=node.v_reset,
                detach_reset=node.detach_reset, surrogate=surrogate, alpha=alpha,
                step_mode=getattr(node, "step_mode", "m"), store_v_seq=getattr(node, "store_v_seq", False))


class _Neuron(torch.nn.Module):
    """What LIF and BNLIF share: the LIF parameters, the step mode, and the membrane state between calls.

    The kernels integrate u = v - v_reset (hard reset; v itself for the soft reset), which starts at 0 — the
    shift that makes SpikingJelly's decay towards v_reset the kernels' decay towards 0 (see _lib.lif_params); `v`
    and `v_seq` add it back. The state is a tensor of one step's shape in fp32, or None after reset()."""

    def __init__(self, tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold,
                 step_mode, store_v_seq, keep_state):
        super().__init__()
        self.tau = float(tau)
        self.decay_input = bool(decay_input)
        self.v_threshold = float(v_threshold)
        self.v_reset = None if v_reset is None else float(v_reset)
        self.detach_reset = bool(detach_reset)
        self.surrogate = surrogate
        self.alpha = None if alpha is None else float(alpha)
        self.grad_threshold = None if grad_threshold is None else float(grad_threshold)
        if step_mode not in ("m", "s"):
            raise ValueError(f"step_mode {step_mode!r}: expected 'm' (multi-step, [T, ...]) or 's' (one step)")
        self.step_mode = step_mode
        self.store_v_seq = bool(store_v_seq)
        self.keep_state = bool(keep_state)
        self._u = None
        self.v_seq = None
        self._raw = None  # a parameter tuple given directly (LIF.from_params), or None: built from the attributes
        self._refresh_params()  # validates now, so a bad argument fails at construction, not at the first forward

    _PARAM_NAMES = frozenset(("tau", "decay_input", "v_threshold", "v_reset", "detach_reset", "surrogate", "alpha",
                              "grad_threshold"))

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in self._PARAM_NAMES and "_pvec" in self.__dict__:
            self._refresh_params()

    def _refresh_params(self):
        """Builds (and checks) the ops' parameter tuple whenever an attribute changes, so forward only reads it:
        a plain attribute is what torch.compile can treat as a constant."""
        self.__dict__["_pvec"] = self._raw if self._raw is not None else functional.lif_params(
            self.tau, self.decay_input, self.v_threshold, self.v_reset, self.detach_reset, self.surrogate,
            self.alpha, self.grad_threshold)

    def lif_params(self):
        """The ops' parameter tuple (the fields of sf_lif_params) of the current attributes."""
        return self._pvec

    params = lif_params

    @property
    def _shift(self):
        """u = v - shift: v_reset for SpikingJelly's hard reset; 0 for the soft reset and for raw parameters."""
        return 0.0 if self.v_reset is None or self._raw is not None else self.v_reset

    @property
    def v(self):
        """The membrane potential after the last step (SpikingJelly's `v`): v_reset (0 for the soft reset) as a
        float after reset(), else a tensor of one step's shape."""
        initial = 0.0 if self.v_reset is None else self.v_reset
        return initial if self._u is None else self._u + self._shift

    @v.setter
    def v(self, value):
        initial = 0.0 if self.v_reset is None else self.v_reset
        if isinstance(value, torch.Tensor):
            self._u = (value - self._shift).float().contiguous()
        elif float(value) == initial:
            self._u = None
        else:
            raise ValueError(f"v = {value}: a float state must be v_reset ({initial}); give a tensor otherwise")

    def reset(self):
        """Forgets the membrane state (SpikingJelly's functional.reset_net calls this on every module)."""
        self._u = None
        self.v_seq = None

    def detach(self):
        """Cuts the gradient path into earlier calls (SpikingJelly's functional.detach_net), keeping the values."""
        if self._u is not None:
            self._u = self._u.detach()

    def _apply(self, fn, *args, **kwargs):
        self.reset()  # .to() / .cuda() / .half(): a state on the old device or dtype would not fit
        return super()._apply(fn, *args, **kwargs)

    def forward(self, x):
        if self.step_mode == "s":
            if not isinstance(x, torch.Tensor) or x.dim() == 0:
                raise ValueError("spikefuse: step_mode 's' takes one step [B, ...]")
            return self._sequence(x.unsqueeze(0)).squeeze(0)
        return self._sequence(x)

    def _sequence(self, x_seq):
        keep = self.keep_state or self.step_mode == "s"
        if self.store_v_seq and self.step_mode == "m":
            return self._sequence_with_v_seq(x_seq)
        s, u = self._run(x_seq, self._u, keep)
        if keep or self._u is not None:  # a Module attribute write costs microseconds: only when it changes
            self._u = u if keep else None
        return self._spikes(s)

    @staticmethod
    def _spikes(s):
        """Marks the output as spikes for compact.spikes_saved_as_bytes (eager mode: a tracer needs no mark)."""
        return s if _ops.is_compiling() else compact.mark_spikes(s)

    def _sequence_with_v_seq(self, x_seq):
        """One kernel call per step, each continuing from the previous one's state: the same spikes and gradients
        as one call (the state chaining is exact), with the membrane after every step kept for v_seq."""
        spikes, us = [], []
        u = self._u
        for t in range(x_seq.shape[0]):
            s, u = self._run(x_seq[t:t + 1], u, True)
            spikes.append(s)
            us.append(u)
        self._u = u
        self.v_seq = torch.stack(us) + self._shift
        return self._spikes(torch.cat(spikes))

    def extra_repr(self):
        alpha = _kernels.lif_params_of(self.lif_params()).alpha if self.alpha is None else self.alpha
        return (f"tau={self.tau}, decay_input={self.decay_input}, v_threshold={self.v_threshold}, "
                f"v_reset={self.v_reset}, detach_reset={self.detach_reset}, surrogate={self.surrogate!r}, "
                f"alpha={alpha:g}, grad_threshold={self.grad_threshold}, step_mode={self.step_mode!r}")


class LIF(_Neuron):
    """Leaky integrate-and-fire neurons, all T steps fused in one kernel call forward and backward.

    forward(x_seq): x_seq [T, *] (CPU or CUDA; float32, float16 or bfloat16, spikes returned in the same dtype,
    the membrane in fp32) → spikes of the same shape; step_mode="s": one step [*].
    Semantics are SpikingJelly's LIFNode, per neuron and step:
        decay_input:     h = v + (x - (v - v_reset)) / tau      else  h = v - (v - v_reset) / tau + x
        s = (h >= v_threshold);  v = v_reset where s else h      (v_reset=None: v = h - v_threshold·s, decay to 0)
    State: as SpikingJelly, v after the last step is kept and the next call continues from it (also its gradient:
    a sequence cut into chunks trains as the whole) until reset() — call spikingjelly's functional.reset_net(net)
    or net's LIF reset() between independent sequences. A state of another batch size is an error.
    keep_state=False makes every call start at v_reset (no reset needed; slightly less memory traffic).
    store_v_seq=True keeps v after every step of the last call in `v_seq` [T, *] (one kernel call per step).
    The backward uses the surrogate derivative of the spike at z = h - v_threshold:
        sigmoid alpha·σ(alpha·z)(1-σ(alpha·z)); atan (alpha/2)/(1+(π/2·alpha·z)²); fast_sigmoid 1/(alpha·|z|+1)²;
        rect alpha if |z| < 1/(2·alpha) else 0
    alpha=None takes the surrogate's default (sigmoid 4, atan 2, fast_sigmoid 10, rect 1). detach_reset drops the
    reset path from the gradient; grad_threshold (θ_grad) zeroes the surrogate where h < θ_grad (a sparse backward).
    Only the input (and the incoming state) is saved for the backward, which recomputes the membrane potential (on
    a GPU past 32 steps from checkpoints of it every 32 steps, 1/32 of its size, that the forward keeps)."""

    def __init__(self, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                 surrogate="sigmoid", alpha=None, grad_threshold=None, step_mode="m", store_v_seq=False,
                 keep_state=True):
        super().__init__(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold,
                         step_mode, store_v_seq, keep_state)

    def _run(self, x_seq, u, keep):
        return functional.lif_with_state(x_seq, self._pvec, u, keep)

    @classmethod
    def from_spikingjelly(cls, node):
        """The LIF equivalent to a SpikingJelly neuron.LIFNode with a Sigmoid, ATan or Rect surrogate."""
        return cls(**_neuron_kwargs(node))

    @classmethod
    def from_params(cls, p, keep_state=True):
        """A LIF that runs the library's sf_lif_params p exactly (the engine's model: v starts at p.v_reset for a
        hard reset, decays towards 0, `decay` if set), as a loaded CLI run's layers need."""
        m = cls(keep_state=keep_state)
        m._raw = _kernels.params_tuple(p)
        # the attributes describe it (repr, v after reset); _raw stays what runs
        m.tau, m.decay_input, m.v_threshold = float(p.tau), bool(p.decay_input), float(p.v_threshold)
        m.v_reset, m.detach_reset = None if p.soft_reset else float(p.v_reset), bool(p.detach_reset)
        m.surrogate, m.alpha = _lib.SURROGATES[p.surrogate], float(p.alpha)
        m.grad_threshold = float(p.grad_threshold) if p.use_grad_threshold else None
        m._refresh_params()
        return m


class BNLIF(_Neuron):
    """Batch norm followed by LIF neurons, fused (seed 002's BN+LIF kernels, Liang et al., as the C engine runs a
    [bn] directly before a [lif]): the same function as SpikingJelly's layer.BatchNorm2d(num_features,
    step_mode="m") followed by neuron.LIFNode(step_mode="m"), but the normalised input is never stored: the
    backward keeps only x and recomputes it with the membrane.

    forward(x_seq): x_seq [T, B, C, *spatial] (e.g. [T, B, C, H, W]); statistics per channel over T, B and the
    spatial positions. Training: batch statistics, running_mean / running_var updated with `momentum` (None: a
    cumulative average) as torch.nn.BatchNorm2d; evaluation (eval()): the running statistics. Parameters and
    buffers are named as BatchNorm2d's (weight, bias, running_mean, running_var, num_batches_tracked), so its
    state_dict loads. LIF arguments and state semantics as LIF."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, tau=2.0,
                 decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False, surrogate="sigmoid",
                 alpha=None, grad_threshold=None, step_mode="m", store_v_seq=False, keep_state=True):
        super().__init__(tau, decay_input, v_threshold, v_reset, detach_reset, surrogate, alpha, grad_threshold,
                         step_mode, store_v_seq, keep_state)
        if num_features < 1 or not eps > 0:
            raise ValueError(f"BNLIF: num_features = {num_features}, eps = {eps}: need >= 1 and > 0")
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        if self.affine:
            self.weight = torch.nn.Parameter(torch.ones(num_features))
            self.bias = torch.nn.Parameter(torch.zeros(num_features))
        else:
            self.register_buffer("weight", torch.ones(num_features), persistent=False)
            self.register_buffer("bias", torch.zeros(num_features), persistent=False)
        if self.track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def _momentum(self):
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                return 1.0 / float(self.num_batches_tracked)
        return self.momentum if self.momentum is not None else 0.0

    def _run(self, x_seq, u, keep):
        x = functional.check_input(x_seq, "spikefuse BNLIF", min_dim=3)
        if x.shape[2] != self.num_features:
            raise ValueError(f"spikefuse BNLIF: x_seq has {x.shape[2]} channels (dimension 2 of [T, B, C, ...]), "
                             f"the layer {self.num_features}")
        batch_stats = self.training or not self.track_running_stats
        if batch_stats:
            update = self.training and self.track_running_stats
            momentum = self._momentum() if update else 0.0
            mean, var = functional.batch_norm_statistics(x, self.running_mean if update else None,
                                                         self.running_var if update else None, True, momentum)
        else:
            mean, var = self.running_mean, self.running_var
        if not batch_stats and torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return functional.eval_bn_then_lif(x, mean, var, self.weight, self.bias, self.eps, self._pvec, u, keep)
        return functional.bn_lif_with_state(x, mean, var, self.weight, self.bias, self.eps, self._pvec, u, keep)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}, " + super().extra_repr())

    @classmethod
    def from_spikingjelly(cls, bn, node):
        """The BNLIF equivalent to a SpikingJelly layer.BatchNorm2d (or torch BatchNorm) followed by a LIFNode,
        with the batch norm's parameters and running statistics copied."""
        m = cls(bn.num_features, eps=bn.eps, momentum=bn.momentum, affine=bn.affine,
                track_running_stats=bn.track_running_stats, **_neuron_kwargs(node))
        m.load_state_dict(bn.state_dict(), strict=False)
        return m.to(next(bn.buffers(), torch.zeros(0)).device)
