"""bench_w3.py — workload W3 (Liang et al.'s CIFAR-10 VGG9, T=10, B=64, one SGD-momentum training step; layers as
examples/cifar10_vgg9.ini) built in PyTorch from torch.nn convolutions and linear layers with spikefuse.torch.BNLIF
for every batch norm → LIF pair, beside the same network in SpikingJelly (layer.BatchNorm2d(step_mode="m") +
LIFNode, each backend the installed version offers), in one process on one card.

Usage: python3 bench_w3.py [--reps 10] [--json FILE] [--profile]
Per implementation: median step time (CUDA events around zero_grad, forward, cross-entropy, backward, SGD step;
the input is repeated over T as direct encoding, as the peers' script does) and peak device memory
(torch.cuda.max_memory_allocated over the timed steps, parameters and optimizer state included). TF32 is off
everywhere (fp32 convolutions), as in the C benchmark. Rows: spikefuse.torch eager and torch.compile'd (where torch
has custom ops), with the spikes the convolutions save kept as bytes (spikes_saved_as_bytes), and under autocast
bf16; SpikingJelly cupy / torch (0.0.0.0.x) or its own choice (2.x)."""
import argparse
import contextlib
import inspect
import json
import os

import torch
from torch import nn

from bench_w1 import median_ms  # the same timing (CUDA events, median) as W1's
from spikefuse.torch import BNLIF, CUSTOM_OPS, spikes_saved_as_bytes

T, B, CLASSES = 10, 64, 10
LIF_KW = dict(tau=2.0, v_threshold=1.0, v_reset=0.0, detach_reset=True)
PLAN = [(128, 128, 1), (128, 128, 2), (128, 256, 1), (256, 256, 1), (256, 256, 2), (256, 512, 1), (512, 512, 1),
        (512, 512, 2)]


class PerStep(nn.Module):
    """A torch layer over [T·B, ...] applied to [T, B, ...]."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x.flatten(0, 1)).unflatten(0, (x.shape[0], x.shape[1]))


def spikefuse_vgg9():
    layers = [PerStep(nn.Conv2d(3, 128, 3, 1, 1))]
    for ci, co, s in PLAN:
        layers += [BNLIF(ci, keep_state=False, **LIF_KW), PerStep(nn.Conv2d(ci, co, 3, s, 1))]
    layers += [BNLIF(512, keep_state=False, **LIF_KW), nn.Flatten(2), nn.Linear(4 * 4 * 512, 1024),
               BNLIF(1024, keep_state=False, **LIF_KW), nn.Linear(1024, 512), BNLIF(512, keep_state=False, **LIF_KW)]
    return Net(nn.Sequential(*layers), reset=None)


def spikingjelly_vgg9(backend):
    """The same network in SpikingJelly: multi-step BatchNorm2d + LIFNode; the head's batch norms as torch
    BatchNorm1d over T·B (SeqToANNContainer), the same statistics."""
    from spikingjelly.activation_based import functional, layer, neuron, surrogate

    def lif():
        kw = dict(surrogate_function=surrogate.Sigmoid(alpha=4.0), step_mode="m", **LIF_KW)
        return neuron.LIFNode(**kw, backend=backend) if backend else neuron.LIFNode(**kw)
    layers = [layer.Conv2d(3, 128, 3, 1, 1, step_mode="m")]
    for ci, co, s in PLAN:
        layers += [layer.BatchNorm2d(ci, step_mode="m"), lif(), layer.Conv2d(ci, co, 3, s, 1, step_mode="m")]
    layers += [layer.BatchNorm2d(512, step_mode="m"), lif(), layer.Flatten(step_mode="m"),
               layer.Linear(4 * 4 * 512, 1024, step_mode="m"), layer.SeqToANNContainer(nn.BatchNorm1d(1024)), lif(),
               layer.Linear(1024, 512, step_mode="m"), layer.SeqToANNContainer(nn.BatchNorm1d(512)), lif()]
    return Net(nn.Sequential(*layers), reset=functional.reset_net)


class Net(nn.Module):
    def __init__(self, body, reset):
        super().__init__()
        self.body, self.fc, self.reset = body, nn.Linear(512, CLASSES), reset

    def forward(self, x):
        if self.reset is not None:
            self.reset(self.body)
        return self.fc(self.body(x.unsqueeze(0).expand(T, *x.shape)).mean(0))


def measure(net, reps, amp=None, compile_model=False, compact=False, profile=False):
    torch.manual_seed(0)
    net = net.cuda()
    model = torch.compile(net) if compile_model else net
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(B, 3, 32, 32, device="cuda")
    y = torch.randint(0, CLASSES, (B,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None), \
                (spikes_saved_as_bytes() if compact else contextlib.nullcontext()):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = median_ms(step, reps, "cuda", warmup=0)[0]
    peak = torch.cuda.max_memory_allocated() / 2**20
    if profile:  # where the device time goes, by kernel, over three more steps
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
    return ms, peak


def peers():
    """{name: constructor} of the SpikingJelly versions and backends importable here."""
    try:
        import importlib.metadata
        from spikingjelly.activation_based import neuron
        version = importlib.metadata.version("spikingjelly")
    except Exception as e:
        print(f"spikingjelly: unavailable ({e!r})"[:300])
        return {}
    if "backend" in inspect.signature(neuron.LIFNode.__init__).parameters:
        import numpy
        if not hasattr(numpy, "int"):  # its cupy backend still uses np.int, gone since NumPy 1.24 (peer only)
            numpy.int = int
        return {f"spikingjelly {version} {b}": (lambda b=b: spikingjelly_vgg9(b)) for b in ("cupy", "torch")}
    return {f"spikingjelly {version}": lambda: spikingjelly_vgg9(None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp"), "bench_w3.json"))
    ap.add_argument("--profile", action="store_true", help="print the device time per kernel of the rows without options (eager fp32: "
                    "spikefuse.torch and the peers)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_w3 needs a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    rows = [("spikefuse.torch", spikefuse_vgg9, {})]
    if CUSTOM_OPS and hasattr(torch, "compile"):
        rows.append(("spikefuse.torch compiled", spikefuse_vgg9, dict(compile_model=True)))
    rows.append(("spikefuse.torch spikes as bytes", spikefuse_vgg9, dict(compact=True)))
    rows.append(("spikefuse.torch bf16 autocast", spikefuse_vgg9, dict(amp=torch.bfloat16)))
    rows.append(("spikefuse.torch bf16, spikes as bytes", spikefuse_vgg9, dict(amp=torch.bfloat16, compact=True)))
    rows += [(name, make, {}) for name, make in peers().items()]
    print(f"W3 VGG9 T={T} B={B}, one SGD step; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    for name, make, kw in rows:
        try:
            ms, peak = measure(make(), args.reps, profile=args.profile and not kw, **kw)
        except Exception as e:
            print(f"{name:36s} failed: {e!r}"[:300])
            continue
        finally:
            torch.cuda.empty_cache()
        results.append(dict(impl=name, ms=ms, peak_mib=peak))
        print(f"{name:36s} {ms:9.2f} ms/step  peak {peak:8.0f} MiB", flush=True)
    by = {r["impl"]: r for r in results}
    for ours in (r for r in by if r.startswith("spikefuse")):
        for peer in (r for r in by if r.startswith("spikingjelly")):
            if ours in by:
                a, b = by[ours], by[peer]
                print(f"{ours} vs {peer}: {b['ms'] / a['ms']:.2f}x the speed, {a['peak_mib'] / b['peak_mib']:.2f}x "
                      "the peak memory")
    with open(args.json, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=results), f, indent=1)


if __name__ == "__main__":
    main()
