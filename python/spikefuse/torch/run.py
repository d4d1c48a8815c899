"""run.py — spikefuse.torch.load_run: a network that `spikefuse train` trained, as an nn.Module of torch layers and
spikefuse neurons. The library builds the network from the config stored in the checkpoint and restores its
tensors (sf_checkpoint_load_net, which checks CRCs and values); this file maps each layer to its torch counterpart
and copies the parameters under the checkpoint's names ("0.weight", "1.running_mean", ...); the library also says how
the run encoded its input (sf_checkpoint_input_encoding), which the module applies to images it is given."""
import json
import os
import struct

import torch

from .. import _net
from .bn_neurons import BNIF, BNLIF
from .lif_neurons import ALIF, IF, LIF
from .plif import PLIF

_MODELS = (LIF, PLIF, IF, ALIF)  # by enum sf_neuron_model
_PLIF, _IF = 1, 2


def _neuron_of_params(p, channels):
    """The spikefuse layer that runs the engine's neuron parameters p exactly, each call a fresh sequence (a PLIF
    with one w for the layer, or one per channel of `channels` when p.per_channel: the checkpoint's w fills it)."""
    cls = _MODELS[p.model]
    if cls is ALIF:
        return ALIF()._set_raw_params(p)
    if cls is not PLIF:
        return cls(keep_state=False)._set_raw_params(p)
    m = PLIF(keep_state=False, channels=channels if p.per_channel else None)._set_raw_params(p)
    m.w = torch.nn.Parameter(m.w.detach().reshape(-1))  # the engine's w is [1] or [C]
    return m


class _PerStep:
    """Runs a torch layer of [N, C, H, W] on [T, B, C, H, W] (all steps as one batch, as the engine does); mixed into a
    subclass of the layer, so its parameters keep their names ("0.weight")."""

    def forward(self, x):
        T, B = x.shape[:2]
        return super().forward(x.flatten(0, 1)).unflatten(0, (T, B))


def _per_step(layer):
    return type("PerStep" + layer.__name__, (_PerStep, layer), {
        "__module__": __name__, "__doc__": f"torch.nn.{layer.__name__} over the T·B images of [T, B, C, H, W]."})


PerStepConv2d = _per_step(torch.nn.Conv2d)
PerStepAvgPool2d = _per_step(torch.nn.AvgPool2d)
PerStepMaxPool2d = _per_step(torch.nn.MaxPool2d)
PerStepBatchNorm2d = _per_step(torch.nn.BatchNorm2d)


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
        self.lif = _neuron_of_params(params, None)
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


class Add(torch.nn.Module):
    """The engine's [add]: two layers' outputs a (the previous layer) and b (`from`) combined by its connect: the
    sum a + b, or SEW-ResNet's AND a·b or IAND (1 − a)·b."""

    def __init__(self, connect="add"):
        super().__init__()
        self.connect = connect

    def forward(self, a, b):
        if self.connect == "and":
            return a * b
        if self.connect == "iand":
            return (1.0 - a) * b
        return a + b


class Readout(torch.nn.Module):
    """The engine's readout r_t of the last layer's output o_t [T, B, classes, ...] → [T, B, classes]: `mean` takes
    r_t = o_t, `leaky` the non-spiking integrator r_t = a·r_{t-1} + (1 - a)·o_t with a = 1 - 1/tau, r_0 = 0."""

    def __init__(self, kind, tau):
        super().__init__()
        self.kind, self.tau = kind, float(tau)

    def forward(self, o):
        o = o.flatten(2)
        if self.kind != "leaky":
            return o
        a = 1.0 - 1.0 / self.tau
        steps, acc = [], torch.zeros_like(o[0])
        for t in range(o.shape[0]):
            acc = a * acc + (1.0 - a) * o[t]
            steps.append(acc)
        return torch.stack(steps)

    def extra_repr(self):
        return f"{self.kind!r}, tau={self.tau}" if self.kind == "leaky" else repr(self.kind)


def encode(images, encoding, T=None, generator=None):
    """The network input [T, B, C, H, W] that the trainer's loader makes of images [B, C, H, W] (float intensities in
    [0, 1], or uint8 pixels, divided by 255 as the loader does), `encoding` being load_run's RunNet.encoding:
    direct: the image, normalised per channel where the run normalised, at every step; poisson: step t spikes where
    a uniform draw (from torch's generator: the same rates, not the engine's draws) is below the intensity;
    latency: one spike at step round((T - 1)·(1 - x)), none for black pixels."""
    T = encoding["timesteps"] if T is None else int(T)
    x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
    if encoding["encoding"] == "poisson":
        u = torch.rand((T,) + tuple(x.shape), generator=generator, device=x.device)
        return (u < x).float()
    if encoding["encoding"] == "latency":
        fire = torch.floor(((T - 1) * (1.0 - x)).double() + 0.5).long()  # lroundf of a value >= 0
        steps = torch.arange(T, device=x.device).view(-1, *([1] * x.dim()))
        return ((steps == fire) & (x > 0)).float()
    if encoding["normalize"]:
        shape = (1, -1) + (1,) * (x.dim() - 2)
        x = (x - torch.tensor(encoding["mean"], device=x.device).view(shape)) / \
            torch.tensor(encoding["std"], device=x.device).view(shape)
    return x.unsqueeze(0).expand(T, *x.shape).contiguous()


class RunNet(torch.nn.Module):
    """A trained spikefuse network. forward(x) returns the logits [B, classes], the T-mean of the readout, as the
    engine computes them, from either
    - images [B, C, H, W] of the run's image dataset (intensities in [0, 1], as torchvision's ToTensor gives, or
      uint8 pixels), which it encodes as the run's loader did (`encoding`: normalised with the run's mean and std
      for the direct encoding, presented for its T steps; see encode()), or
    - an encoded input [T, B, C, H, W]: what the loader gives the engine (normalised images, Poisson or latency
      spikes, binned events), used as it is.
    Layer i is submodule str(i), so state_dict names are the checkpoint's ("0.weight", "1.running_mean", ...).
    `config` holds the run's resolved config (INI text), `input_shape` (C, H, W), `encoding` how the run encoded its
    samples (dataset, images, encoding, normalize, mean, std, timesteps)."""

    def __init__(self, modules, wiring, input_shape, readout, config, encoding):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        self.wiring = wiring  # per layer: (kind, input tensor id, second input id or -1)
        self.input_shape = tuple(input_shape)
        self.readout = readout
        self.config = config
        self.encoding = encoding
        last_use = {}
        for i, (_, a, b) in enumerate(wiring):
            last_use[a] = last_use[b] = i
        self._last_use = last_use

    def encode(self, images, T=None, generator=None):
        """[T, B, C, H, W] from images [B, C, H, W] as the run's loader encoded them (T: the run's by default)."""
        if not self.encoding["images"]:
            raise ValueError(f"RunNet: the run trained on {self.encoding['dataset']}, whose samples are already the "
                             "T steps [T, B, C, H, W] (no images to encode)")
        if images.dim() != 4 or tuple(images.shape[1:]) != self.input_shape:
            raise ValueError(f"RunNet.encode: images must be [B, {', '.join(map(str, self.input_shape))}], got "
                             f"{tuple(images.shape)}")
        return encode(images, self.encoding, T, generator)

    def forward(self, x, return_readout=False):
        """Logits [B, classes]; with return_readout, the readout [T, B, classes] too."""
        if x.dim() == 4 and tuple(x.shape[1:]) == self.input_shape:
            x = self.encode(x)
        if x.dim() != 5 or tuple(x.shape[2:]) != self.input_shape:
            shape = ", ".join(map(str, self.input_shape))
            images = f"images [B, {shape}] or " if self.encoding["images"] else ""
            raise ValueError(f"RunNet: the input must be {images}an encoded input [T, B, {shape}], got "
                             f"{tuple(x.shape)}")
        acts = {0: x}
        for i, (kind, a, b) in enumerate(self.wiring):
            m = getattr(self, str(i))
            acts[i + 1] = m(acts[a]) if kind != "add" else m(acts[a], acts[b])
            for t in (a, b):
                if self._last_use.get(t) == i and t != len(self.wiring):
                    acts.pop(t, None)
        r = self.readout(acts[len(self.wiring)])
        logits = r.mean(0)
        return (logits, r) if return_readout else logits

    def extra_repr(self):
        e = self.encoding
        if not e["images"]:
            return f"input_shape={self.input_shape}, input: {e['dataset']} steps [T, B, ...] (T = {e['timesteps']})"
        how = f"normalised with mean {e['mean']}, std {e['std']}" if e["encoding"] == "direct" and e["normalize"] \
            else "not normalised" if e["encoding"] == "direct" else "intensities as spike rates" \
            if e["encoding"] == "poisson" else "intensities as spike times"
        return (f"input_shape={self.input_shape}, input: {e['dataset']} images in [0, 1], {e['encoding']} encoding "
                f"over T = {e['timesteps']} steps, {how}")


def _fusable(layers, i, readers):
    """Batch norm i feeds only the neurons right after it: the engine fuses such a pair, and so does load_run (but
    for a PLIF, whose w the fused op here does not take)."""
    return (layers[i].kind_name == "batchnorm" and i + 1 < len(layers) and layers[i + 1].kind_name == "lif"
            and layers[i + 1].input == i + 1 and readers.get(i + 1, 0) == 1 and layers[i + 1].lif.model != _PLIF)


def _module_of(d, in_chw):
    """The torch module of one layer (not batch norm → LIF pairs); None when the kind has no counterpart."""
    kind = d.kind_name
    C = in_chw[0]
    if kind == "linear":
        return _Linear(C * in_chw[1] * in_chw[2], d.out_features, bias=bool(d.bias))
    if kind == "conv2d":
        return PerStepConv2d(C, d.out_channels, d.kernel, d.stride, d.padding, bias=bool(d.bias))
    if kind in ("avgpool2d", "maxpool2d"):
        pool = PerStepAvgPool2d if kind == "avgpool2d" else PerStepMaxPool2d
        return pool(d.kernel, d.stride or d.kernel)
    if kind == "flatten":
        return _Flatten()
    if kind == "dropout":
        return TimeDropout(d.dropout_p)
    if kind == "batchnorm":
        return PerStepBatchNorm2d(C, eps=d.bn_eps, momentum=d.bn_momentum)
    if kind == "lif":
        return _neuron_of_params(d.lif, C)
    if kind == "add":
        return Add(_net.CONNECTS[d.connect])
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
    call a fresh sequence (no state across calls). The module takes the run's images as they come from the dataset
    (in [0, 1]) and encodes them as the run did (RunNet.encoding: the normalisation, the encoding, T), or an input
    encoded already [T, B, C, H, W]. fuse_bn: a batch norm that feeds only the LIF after it runs with
    it as one BNLIF (as the engine fuses them; the state_dict names stay the checkpoint's; False keeps
    BatchNorm2d and the neurons apart: see BNLIF for when that is faster). device: where the module goes
    ("cpu", "cuda", a torch.device), as .to(device). A layer kind without a torch counterpart raises ValueError
    naming it. The module exports with to_nir."""
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
                bn = (BNIF if lif.lif.model == _IF else BNLIF)(in_chw[0], eps=d.bn_eps, momentum=d.bn_momentum,
                                                                keep_state=False)
                modules += [bn._set_raw_params(lif.lif), _Identity()]
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
        model = RunNet(modules, wiring, (p.in_channels, p.in_height, p.in_width),
                       Readout(_net.READOUTS[p.readout], p.readout_tau), _stored_config(ckpt),
                       _net.input_encoding(ckpt))
    finally:
        net.close()
    _load_state(model, state, ckpt)
    return model.to(device).eval()


def _load_state(model, state, ckpt):
    """Copies the checkpoint's tensors into the module: every one must land, and every parameter and running
    statistic of the module must come from it."""
    own = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    if missing or extra:
        raise ValueError(f"load_run: {ckpt}: the module's tensors and the checkpoint's differ (missing from the "
                         f"checkpoint: {missing[:5]}, not in the module: {extra[:5]})")
    with torch.no_grad():
        for name, t in own.items():
            if t.shape != state[name].shape:
                raise ValueError(f"load_run: {ckpt}: tensor {name} has shape {tuple(state[name].shape)}, the "
                                 f"module's {tuple(t.shape)}")
            t.copy_(state[name])
