"""neuron_base.py — what every spikefuse.torch neuron module shares: its parameters (SpikingJelly's names, checked by
the library and turned into the ops' parameter tuple), the step mode, and SpikingJelly's state semantics: the
membrane after the last step is kept and the next call continues from it until reset(). Where SpikingJelly
imports, the modules are its base.MemoryModule, so its functional.reset_net, set_step_mode and detach_net treat
them as their own."""
import functools

import torch

from .. import _lib, _neuron_params
from . import _kernels, _ops, compact, functional, spikingjelly_nodes, surrogates


def _module_base():
    """SpikingJelly's base.MemoryModule where spikingjelly imports, else torch.nn.Module."""
    try:
        from spikingjelly.activation_based import base
        return base.MemoryModule
    except Exception:  # not installed, or a version that does not import with this torch
        return torch.nn.Module


_Base = _module_base()


def _optional_float(v):
    return None if v is None else float(v)


# the parameters of the neuron models, as the modules store them
_TYPES = dict(tau=float, decay_input=bool, v_threshold=float, v_reset=_optional_float, detach_reset=bool,
              surrogate=str, alpha=_optional_float, grad_threshold=_optional_float, per_channel=bool, rho=float,
              tau_adapt=_optional_float, beta=float)


def model_params(model, **kw):
    """The ops' parameter tuple of a model (cached: modules rebuild it whenever an attribute changes)."""
    return _model_params(model, tuple(sorted(kw.items())))


@functools.lru_cache(maxsize=256)
def _model_params(model, items):
    return _kernels.params_tuple(_neuron_params.neuron_params(model, **dict(items)))


class _Neuron(_Base):
    """A neuron layer of model `_model` whose parameters are the attributes named in `_PARAMS`.

    The kernels integrate u = v - v_reset (hard reset; v itself for the soft reset), which starts at 0: the shift
    that makes SpikingJelly's decay towards v_reset the kernels' decay towards 0 (see _lib.lif_params); `v` and
    `v_seq` add it back. The state is a tensor of one step's shape in fp32 (float64 for float64 inputs), or None
    after reset()."""

    _model = "lif"
    _PARAMS = ("tau", "decay_input", "v_threshold", "v_reset", "detach_reset", "surrogate", "alpha",
               "grad_threshold")
    _STEP_MODES = ("s", "m")

    def __init__(self, step_mode, store_v_seq, keep_state, surrogate=None, alpha=None, surrogate_function=None,
                 backend=None, **params):
        """backend (SpikingJelly's 'torch', 'cupy', ...) is accepted and ignored: spikefuse's kernels run."""
        super().__init__()
        if surrogate is not None and surrogate_function is not None:
            raise ValueError(f"{self._what()}: give surrogate or surrogate_function (SpikingJelly's name), not both")
        chosen = surrogate if surrogate is not None else surrogate_function
        try:
            params["surrogate"], params["alpha"] = surrogates.resolve("sigmoid" if chosen is None else chosen, alpha)
        except ValueError as e:
            raise ValueError(f"{self._what()}: {e}") from None
        for name, value in params.items():
            setattr(self, name, _TYPES[name](value))
        self.store_v_seq = bool(store_v_seq)
        self.keep_state = bool(keep_state)
        self._u = None
        self.v_seq = None
        self._raw = None  # a parameter tuple given directly (_set_raw_params), or None: built from the attributes
        self._refresh_params()  # validates now, so a bad argument fails at construction, not at the first forward
        self.step_mode = step_mode

    @classmethod
    def _what(cls):
        return f"spikefuse.torch.{cls.__name__}"

    def __setattr__(self, name, value):
        if name not in self._PARAMS or "_pvec" not in self.__dict__:
            return super().__setattr__(name, value)
        old = getattr(self, name)
        super().__setattr__(name, value)
        try:
            self._refresh_params()
        except ValueError:
            super().__setattr__(name, old)  # a refused value leaves the module as it was
            raise

    def _refresh_params(self):
        """Builds (and checks) the ops' parameter tuple whenever an attribute changes, so forward only reads it:
        a plain attribute is what torch.compile can treat as a constant."""
        if self._raw is not None:
            self.__dict__["_pvec"] = self._raw
            return
        try:
            pvec = model_params(self._model, **{k: getattr(self, k) for k in self._PARAMS})
        except ValueError as e:
            raise ValueError(f"{self._what()}: {e}") from None
        self.__dict__["_pvec"] = pvec

    def lif_params(self):
        """The ops' parameter tuple (the fields of sf_lif_params) of the current attributes."""
        return self._pvec

    params = lif_params

    def supported_step_mode(self):
        """SpikingJelly's StepModule query: the step modes this layer takes."""
        return self._STEP_MODES

    @property
    def step_mode(self):
        """'m': forward takes a sequence [T, ...]; 's': one step [...] per call, the state kept between calls."""
        return self.__dict__["_step_mode"]

    @step_mode.setter
    def step_mode(self, value):
        # SpikingJelly's MemoryModule.__init__ sets 's' before this class's __init__ sets the layer's mode
        if value not in self._STEP_MODES and "_pvec" in self.__dict__:
            names = {"m": "'m' (multi-step, [T, ...])", "s": "'s' (one step)"}
            raise ValueError(f"{self._what()}: step_mode {value!r}: expected "
                             f"{' or '.join(names[m] for m in self._STEP_MODES)}")
        self.__dict__["_step_mode"] = value

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
            u = value - self._shift
            self._u = u.to(torch.float64 if u.dtype is torch.float64 else torch.float32).contiguous()
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
                raise ValueError(f"{self._what()}: step_mode 's' takes one step [B, ...]")
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

    def _run(self, x_seq, u, keep):
        """(spikes, the state after the last step) of the layer's op from the state u; the models that run the
        LIF op (LIF, IF) take this one."""
        return functional.lif_with_state(x_seq, self._pvec, u, keep)

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
        shown = [f"{k}={getattr(self, k)!r}" if k != "alpha" else f"alpha={alpha:g}" for k in self._PARAMS]
        return ", ".join(shown + [f"step_mode={self.step_mode!r}"])

    @classmethod
    def from_spikingjelly(cls, node):
        """The equivalent of a SpikingJelly neuron of this class's model (LIFNode for LIF, IFNode for IF,
        ParametricLIFNode for PLIF): its parameters, surrogate, step mode and membrane state. A node of another
        model, or whose class changes SpikingJelly's equations, raises ValueError naming what differs."""
        name = spikingjelly_nodes.counterpart(node)
        if name != cls.__name__:
            raise ValueError(f"{cls.__name__}.from_spikingjelly: {type(node).__name__} is a different neuron model "
                             f"({name}); use {name}.from_spikingjelly, or spikefuse.torch.convert, which picks the "
                             "model")
        return cls._from_node(node, spikingjelly_nodes.neuron_kwargs(node, cls._model))

    @classmethod
    def _from_node(cls, node, kw):
        """The module made with node's constructor arguments kw, with node's training flag and state."""
        v = getattr(node, "v", None)
        device = v.device if isinstance(v, torch.Tensor) else torch.device("cpu")
        return spikingjelly_nodes.carry_state(node, cls(**kw), device)

    def _set_raw_params(self, p):
        """Runs the library's sf_lif_params p exactly (the engine's model: v starts at p.v_reset for a hard reset
        and decays towards 0, `decay` if set); the attributes describe it (repr, v after reset)."""
        self.__dict__["_raw"] = _kernels.params_tuple(p)
        described = dict(tau=float(p.tau), decay_input=bool(p.decay_input), v_threshold=float(p.v_threshold),
                         v_reset=None if p.soft_reset else float(p.v_reset), detach_reset=bool(p.detach_reset),
                         surrogate=_lib.SURROGATES[p.surrogate], alpha=float(p.alpha),
                         grad_threshold=float(p.grad_threshold) if p.use_grad_threshold else None,
                         per_channel=bool(p.per_channel), rho=float(p.rho),
                         tau_adapt=float(p.tau_adapt) if p.tau_adapt > 0 else None, beta=float(p.beta))
        for k in self._PARAMS:
            self.__dict__[k] = described[k]
        self._refresh_params()
        return self
