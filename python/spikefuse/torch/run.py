"""run.py — spikefuse.torch.load_run: a network that `spikefuse train` trained, as an nn.Module of torch layers and
spikefuse neurons. The library builds the network from the config stored in the checkpoint and restores its
tensors (sf_checkpoint_load_net, which checks CRCs and values); this file maps each layer to its torch counterpart
and copies the parameters under the checkpoint's names ("0.weight", "1.running_mean", ...)."""
import json
import os
import struct

import torch

from .. import _net
from .neuron import BNLIF, LIF


class _PerStep(torch.nn.Module):
    """A torch layer over [T·B, ...] applied to [T, B, C, H, W] (all steps as one batch, as the engine does)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        T, B = x.shape[:2]
        return self.layer(x.flatten(0, 1)).unflatten(0, (T, B))


class _Linear(torch.nn.Linear):
    """Linear over the features C·H·W of each step; the output is [T, B, out, 1, 1] (vectors as 1×1 images)."""

    def forward(self, x):
        return super().forward(x.flatten(2))[..., None, None]


class _Flatten(torch.nn.Module):
    def forward(self, x):
        return x.flatten(2)[..., None, None]


class TimeDropout(torch.nn.Module):
    """Dropout with one mask for all T steps (the engine's [dropout]): identity in evaluation."""

    def __init__(self, p):
        super().__init__()
        self.p = float(p)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty_like(x[0]).bernoulli_(1.0 - self.p) / (1.0 - self.p)
        return x * keep

    def extra_repr(self):
        return f"p={self.p}"


class RecurrentLIF(torch.nn.Module):
    """The engine's [rlif]: LIF neurons whose input current at step t is x_t + V·s_{t-1} (s_0 = 0), with their own
    recurrent weight V [N, N] (no bias), stepped through time with a single-step LIF carrying the membrane. Input
    and output [T, B, N, 1, 1]; every call is a fresh sequence."""

    def __init__(self, n, params):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(n, n))
        self.lif = LIF.from_params(params)
        self.lif.step_mode = "s"

    def forward(self, x):
        x = x.flatten(2)
        self.lif.reset()
        s = torch.zeros_like(x[0])
        spikes = []
        for t in range(x.shape[0]):
            s = self.lif(x[t] + torch.nn.functional.linear(s, self.weight))
            spikes.append(s)
        self.lif.reset()
        return torch.stack(spikes)[..., None, None]


class _Identity(torch.nn.Module):
    """The batch norm's place when BNLIF runs it inside the LIF layer after it (keeps the layer numbering)."""

    def forward(self, x):
        return x


class RunNet(torch.nn.Module):
    """A trained spikefuse network: forward(x) with x the encoded input [T, B, C, H, W] (what the trainer's loader
    gives sf_net_forward: normalised images, Poisson or latency spikes, binned events) returns the logits [B, classes],
    the T-mean of the readout, as the engine computes them. Layer i is submodule str(i), so state_dict names are the
    checkpoint's. `config` holds the run's resolved config (INI text), `input_shape` (C, H, W)."""

    def __init__(self, modules, wiring, input_shape, readout, readout_tau, config):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        self.wiring = wiring  # per layer: (kind, input tensor id, second input id or -1)
        self.input_shape = tuple(input_shape)
        self.readout, self.readout_tau = readout, float(readout_tau)
        self.config = config
        last_use = {}
        for i, (_, a, b) in enumerate(wiring):
            last_use[a] = last_use[b] = i
        self._last_use = last_use

    def forward(self, x, return_readout=False):
        """Logits [B, classes]; with return_readout, the readout [T, B, classes] too."""
        if x.dim() != 5 or tuple(x.shape[2:]) != self.input_shape:
            raise ValueError(f"RunNet: the input must be [T, B, {', '.join(map(str, self.input_shape))}], got "
                             f"{tuple(x.shape)}")
        acts = {0: x}
        for i, (kind, a, b) in enumerate(self.wiring):
            m = getattr(self, str(i))
            acts[i + 1] = m(acts[a]) if kind != "add" else acts[a] + acts[b]
            for t in (a, b):
                if self._last_use.get(t) == i and t != len(self.wiring):
                    acts.pop(t, None)
        o = acts[len(self.wiring)].flatten(2)
        r = o
        if self.readout == "leaky":
            a = 1.0 - 1.0 / self.readout_tau
            steps, acc = [], torch.zeros_like(o[0])
            for t in range(o.shape[0]):
                acc = a * acc + (1.0 - a) * o[t]
                steps.append(acc)
            r = torch.stack(steps)
        logits = r.mean(0)
        return (logits, r) if return_readout else logits

    def extra_repr(self):
        return f"input_shape={self.input_shape}, readout={self.readout!r}, readout_tau={self.readout_tau}"


def _fusable(layers, i, readers):
    """Batch norm i feeds only the LIF right after it: the engine fuses such a pair, and so does load_run."""
    return (layers[i].kind_name == "batchnorm" and i + 1 < len(layers) and layers[i + 1].kind_name == "lif"
            and layers[i + 1].input == i + 1 and readers.get(i + 1, 0) == 1)


def _module_of(d, in_chw):
    """The torch module of one layer (not batch norm → LIF pairs); None when the kind has no counterpart."""
    kind = d.kind_name
    C = in_chw[0]
    if kind == "linear":
        return _Linear(C * in_chw[1] * in_chw[2], d.out_features, bias=bool(d.bias))
    if kind == "conv2d":
        return _PerStep(torch.nn.Conv2d(C, d.out_channels, d.kernel, d.stride, d.padding, bias=bool(d.bias)))
    if kind in ("avgpool2d", "maxpool2d"):
        pool = torch.nn.AvgPool2d if kind == "avgpool2d" else torch.nn.MaxPool2d
        return _PerStep(pool(d.kernel, d.stride or d.kernel))
    if kind == "flatten":
        return _Flatten()
    if kind == "dropout":
        return TimeDropout(d.dropout_p)
    if kind == "batchnorm":
        return _PerStep(torch.nn.BatchNorm2d(C, eps=d.bn_eps, momentum=d.bn_momentum))
    if kind == "lif":
        return LIF.from_params(d.lif, keep_state=False)
    if kind == "add":
        return _Identity()
    if kind == "rlif":
        return RecurrentLIF(C * in_chw[1] * in_chw[2], d.lif)
    return None


def _checkpoint_of(path):
    """The checkpoint a path names: the file, or a run directory's best.safetensors (else last.safetensors)."""
    if os.path.isdir(path):
        for name in ("best.safetensors", "last.safetensors"):
            if os.path.exists(os.path.join(path, name)):
                return os.path.join(path, name)
        raise FileNotFoundError(f"load_run: {path} holds no run (neither best.safetensors nor last.safetensors)")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_run: {path} does not exist")
    return path


def _stored_config(path):
    """The resolved config in the checkpoint's safetensors metadata (the header: a little-endian u64 length and
    a JSON object); the library has checked the file already."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {}).get("config", "")


def load_run(path, fuse_bn=True, device="cpu"):
    """The network of a `spikefuse train` run as a RunNet in evaluation mode (call .train() to fine-tune).

    path: a run directory (its best.safetensors, else last.safetensors) or a checkpoint file. Parameters and batch
    norm running statistics are the checkpoint's; the LIF layers run the engine's exact neuron parameters, each
    call a fresh sequence (no state across calls). fuse_bn: a batch norm that feeds only the LIF after it runs with
    it as one BNLIF (as the engine fuses them; the state_dict names stay the checkpoint's). A layer kind without a
    torch counterpart raises ValueError naming it."""
    ckpt = _checkpoint_of(os.fspath(path))
    net = _net.TrainedNet(ckpt)
    try:
        layers = net.layers()
        readers = {}
        for d in layers:
            readers[d.input] = readers.get(d.input, 0) + 1
            if d.kind_name == "add":
                readers[d.input2] = readers.get(d.input2, 0) + 1
        modules, wiring, i = [], [], 0
        while i < len(layers):
            d = layers[i]
            in_chw = net.tensor_shape(d.input)
            if fuse_bn and _fusable(layers, i, readers):
                lif = layers[i + 1]
                bn = BNLIF(in_chw[0], eps=d.bn_eps, momentum=d.bn_momentum, keep_state=False)
                bn._raw = LIF.from_params(lif.lif).lif_params()
                bn._refresh_params()
                modules += [bn, _Identity()]
                wiring += [("bnlif", d.input, -1), ("identity", i + 1, -1)]
                i += 2
                continue
            m = _module_of(d, in_chw)
            if m is None:
                raise ValueError(f"load_run: {ckpt}: layer {i} ({d.kind_name}) has no PyTorch equivalent in "
                                 "spikefuse.torch")
            modules.append(m)
            wiring.append((d.kind_name, d.input, d.input2 if d.kind_name == "add" else -1))
            i += 1

        def make(shape):
            t = torch.empty(shape, dtype=torch.float32)
            return t, t.data_ptr()
        state = net.tensors(_net.ROLE_PARAM, make)
        state.update(net.tensors(_net.ROLE_BUFFER, make))
        p = net.params
        model = RunNet(modules, wiring, (p.in_channels, p.in_height, p.in_width), _net.READOUTS[p.readout],
                       p.readout_tau, _stored_config(ckpt))
    finally:
        net.close()
    _load_state(model, state, ckpt)
    return model.to(device).eval()


def _load_state(model, state, ckpt):
    """Copies the checkpoint's tensors into the module: every one must land, and every parameter and running
    statistic of the module must come from it."""
    own = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    # A torch layer wrapped for [T, B, ...] names its tensors "i.layer.weight": map the checkpoint's "i.weight".
    names = {}
    for k in own:
        head, _, rest = k.partition(".")
        names[head + "." + rest.split("layer.", 1)[-1]] = k
    missing = sorted(set(names) - set(state))
    extra = sorted(set(state) - set(names))
    if missing or extra:
        raise ValueError(f"load_run: {ckpt}: the module's tensors and the checkpoint's differ (missing from the "
                         f"checkpoint: {missing[:5]}, not in the module: {extra[:5]})")
    with torch.no_grad():
        for name, k in names.items():
            if own[k].shape != state[name].shape:
                raise ValueError(f"load_run: {ckpt}: tensor {name} has shape {tuple(state[name].shape)}, the "
                                 f"module's {tuple(own[k].shape)}")
            own[k].copy_(state[name])
