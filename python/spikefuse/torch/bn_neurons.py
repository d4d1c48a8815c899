"""bn_neurons.py — batch norm followed by a neuron layer, fused: BNLIF (SpikingJelly's layer.BatchNorm2d(step_mode="m")
then neuron.LIFNode) and BNIF (then neuron.IFNode), run by the C engine's fused BN → neuron kernels (Liang et
al.'s; the engine runs a [bn] directly before a [lif] this way). The normalised input is never stored: the
backward keeps only x and recomputes it with the membrane."""
import torch

from . import functional, spikingjelly_nodes
from .lif_neurons import IF
from .neuron_base import _Neuron


class _BatchNormNeuron(_Neuron):
    """Batch norm over [T, B, C, *spatial] (statistics per channel over T, B and the spatial positions) feeding the
    neuron of `_model`. Training: batch statistics, running_mean / running_var updated with `momentum` (None: a
    cumulative average) as torch.nn.BatchNorm2d; evaluation (eval()): the running statistics. Parameters and
    buffers are named as BatchNorm2d's (weight, bias, running_mean, running_var, num_batches_tracked), so its
    state_dict loads."""

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if num_features < 1 or not eps > 0:
            raise ValueError(f"{self._what()}: num_features = {num_features}, eps = {eps}: need >= 1 and > 0")
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

    def _check_channels(self, x_seq):
        """The input of the layer's step mode, [T, B, C, ...] ('m') or [B, C, ...] ('s', x_seq is then the step
        with T = 1 in front), must have num_features channels where C goes."""
        x = functional.check_input(x_seq, self._what(), min_dim=3)
        if x.shape[2] == self.num_features:
            return x
        layout, shape, at = ("[T, B, C, ...]", tuple(x.shape), 2) if self.step_mode == "m" else \
            ("[B, C, ...] (one step)", tuple(x.shape[1:]), 1)
        hint = ""
        if self.step_mode == "m" and x.shape[1] == self.num_features:
            hint = (f"; dimension 1 holds {self.num_features}: a [B, C, ...] batch without its time dimension? The "
                    "steps go first: x.unsqueeze(0) is one step, x.unsqueeze(0).repeat(T, *[1] * x.dim()) T steps "
                    "of the same input, and step_mode='s' takes one step [B, C, ...] per call")
        raise ValueError(f"{self._what()}: the input has shape {shape}, but the layer takes {layout} with its "
                         f"C = {self.num_features} channels in dimension {at}, which holds {shape[at]}{hint}")

    def _run(self, x_seq, u, keep):
        x = self._check_channels(x_seq)
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
        """The fused equivalent of a SpikingJelly batch norm (layer.BatchNorm2d / BatchNorm1d, or a torch batch norm
        in a SeqToANNContainer) followed by a neuron of this class's model, with the batch norm's parameters and
        running statistics copied; a neuron of another model, or a batch norm that differs, raises ValueError."""
        model = spikingjelly_nodes.counterpart(node)
        fused = spikingjelly_nodes.WITH_BATCH_NORM.get(model)
        if fused != cls.__name__:
            raise ValueError(f"{cls.__name__}.from_spikingjelly: a batch norm followed by {type(node).__name__} "
                             f"({model}) " + (f"is {fused}: use {fused}.from_spikingjelly, or spikefuse.torch.convert"
                                              if fused else "has no fused form (BNLIF and BNIF take LIFNode and "
                                                            "IFNode)"))
        found = spikingjelly_nodes.batch_norm_of(bn)
        if found is None:
            raise ValueError(f"{cls.__name__}.from_spikingjelly: {type(bn).__name__} is not a batch norm it fuses "
                             "(SpikingJelly's layer.BatchNorm1d/2d/3d, or torch's, alone or in a SeqToANNContainer)")
        inner, bn_step_mode = found
        kw = spikingjelly_nodes.neuron_kwargs(node, cls._model)
        if bn_step_mode not in (None, kw["step_mode"]):
            raise ValueError(f"{cls.__name__}.from_spikingjelly: the batch norm runs in step mode {bn_step_mode!r}, "
                             f"the neuron in {kw['step_mode']!r}")
        m = cls(inner.num_features, eps=inner.eps, momentum=inner.momentum, affine=inner.affine,
                track_running_stats=inner.track_running_stats, **kw)
        m.load_state_dict(inner.state_dict(), strict=False)
        for name in ("weight", "bias"):
            if inner.affine:
                getattr(m, name).requires_grad_(getattr(inner, name).requires_grad)
        m = spikingjelly_nodes.carry_state(node, m, spikingjelly_nodes.device_of(inner))
        return m.train(inner.training)


class BNLIF(_BatchNormNeuron):
    """Batch norm followed by LIF neurons, fused: the same function as SpikingJelly's layer.BatchNorm2d(num_features,
    step_mode="m") followed by neuron.LIFNode(step_mode="m").

    forward(x_seq): x_seq [T, B, C, *spatial] (e.g. [T, B, C, H, W]) → spikes of the same shape.
    Batch norm's arguments are torch.nn.BatchNorm2d's: num_features C; eps; momentum of the running statistics
    (None: a cumulative average); affine (learned weight and bias); track_running_stats. Statistics are per channel
    over T, B and the spatial positions; train() normalises with the batch's and updates the running ones, eval()
    with the running ones. Parameters and buffers have BatchNorm2d's names, so its state_dict loads. The keywords
    after * are LIF's arguments, with its state semantics.

    Which to use: the backward keeps only x (half the bytes of BatchNorm2d + LIF). On a GPU it runs the engine's
    fused kernels. On the CPU the fused pass was 0.5–1.2× the speed of torch.nn.BatchNorm2d followed by LIF on
    the 2-core VM (faster at T = 8 with 64 channels of 32×32, slower with few channels or T = 16): where CPU time
    matters more than memory, keep the pair (convert(..., fuse_bn=False), load_run(..., fuse_bn=False))."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, *, tau=2.0,
                 decay_input=True, v_threshold=1.0, v_reset=0.0, surrogate=None, detach_reset=False, step_mode="m",
                 store_v_seq=False, alpha=None, grad_threshold=None, keep_state=True, surrogate_function=None,
                 backend=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, step_mode, store_v_seq,
                         keep_state, surrogate, alpha, surrogate_function, backend, tau=tau, decay_input=decay_input,
                         v_threshold=v_threshold, v_reset=v_reset, detach_reset=detach_reset,
                         grad_threshold=grad_threshold)


class BNIF(_BatchNormNeuron):
    """Batch norm followed by IF neurons (SpikingJelly's IFNode: no leak), fused as BNLIF is: batch norm's arguments
    and the choice between the fused and the separate pair as BNLIF's, the IF's arguments and state semantics as
    IF's. forward(x_seq): x_seq [T, B, C, *spatial] → spikes."""

    _model = "if"
    _PARAMS = IF._PARAMS

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, *,
                 v_threshold=1.0, v_reset=0.0, surrogate=None, detach_reset=False, step_mode="m", store_v_seq=False,
                 alpha=None, grad_threshold=None, keep_state=True, surrogate_function=None, backend=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, step_mode, store_v_seq,
                         keep_state, surrogate, alpha, surrogate_function, backend, v_threshold=v_threshold,
                         v_reset=v_reset, detach_reset=detach_reset, grad_threshold=grad_threshold)
