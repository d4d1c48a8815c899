"""seed_torch.py — the baselines of workloads W6 and W7 (docs/notebook/perf.md): the networks of bench/seed_nets.h, layer for
layer, in PyTorch, one full training step (forward, cross-entropy on the mean over T, backward, SGD with momentum
0.9) at a time, with the spiking neuron of each implementation:
  torch       plain PyTorch BPTT, Liang et al.'s reference: LIF stepped through time in Python under autograd
              (h = v/2 + x/2, a Heaviside spike with the sigmoid surrogate α 4, hard reset to 0 with the reset
              detached), BN over (T, B, H, W)
  sj_<impl>   SpikingJelly's multi-step LIFNode (same parameters): 0.0.0.0.x by backend name (cupy, torch), 2.x the
              implementation it selects itself (named as it reports it, e.g. sj_triton)
  snntorch    snnTorch's Leaky (β 0.5 on half the input, reset to zero, sigmoid surrogate slope 4) stepped in Python
The other layers are PyTorch's, run over T·B images at once (SpikingJelly's multi-step layers do the same). fp32 with
TF32 off, or the step under torch.autocast(bfloat16). A peer's fastest mode, as an informed user sets it for fixed
shapes: --cudnn-benchmark (cuDNN's autotuner) and --compile (torch.compile of the network, inductor's layout
optimisation off, as SpikingJelly's tutorial says); each adds to the implementation's name ("+cudnnbench",
"+compile"), so one JSON holds several modes side by side. Timing as the peers': CUDA events around one step after
warm-up (at least 3 steps with --compile: the first ones compile), median of the repeats (fewer repeats where one step
takes long: `reps` in the JSON); peak = torch.cuda.max_memory_allocated over the timed steps. On the CPU (CI's smoke
run) a host clock. Checks: the loss of every step is finite.

Usage: seed_torch.py [--device cuda|cpu] [--impls torch,sj_cupy,..] [--impls-w6 ..] [--impls-w7 ..]
                     [--workload W6|W7|all] [--nets a,b] [--T 2,4] [--precision fp32,bf16] [--reps N]
                     [--warmup N] [--cudnn-benchmark] [--compile] [--json FILE] [--skip-done FILE ...]
                     [--smoke]
--impls (or per workload --impls-w6, --impls-w7): torch, snntorch, sj_<impl>, or sj for every SpikingJelly
implementation the installed version has.
--skip-done: points (impl, net, T, precision) that ran without error in those JSON files are not run again (one
process per SpikingJelly version). --smoke: the CI-sized run, as bench_seed --smoke (widths / 8, B 2, T 2,
ImageNet-shaped nets on 64×64, 2 steps). Exit status 1 if a point failed its check; a point that cannot run (a
backend missing, out of memory) is recorded with its error and does not fail the run."""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from seed_nets import NETS, Net


class SigmoidSpike(torch.autograd.Function):
    """Θ(z) forward, α·σ(αz)(1 − σ(αz)) backward, α = 4."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z >= 0).to(z.dtype)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        sg = torch.sigmoid(4.0 * z)
        return grad * 4.0 * sg * (1.0 - sg)


class PlainLIF(nn.Module):
    def forward(self, x):
        v = torch.zeros_like(x[0])
        out = []
        for t in range(x.shape[0]):
            h = 0.5 * v + 0.5 * x[t]
            s = SigmoidSpike.apply(h - 1.0)
            v = h * (1.0 - s.detach())
            out.append(s)
        return torch.stack(out)


class SnnTorchLIF(nn.Module):
    def __init__(self):
        super().__init__()
        import snntorch
        from snntorch import surrogate
        self.lif = snntorch.Leaky(beta=0.5, threshold=1.0, spike_grad=surrogate.sigmoid(slope=4),
                                  reset_mechanism="zero")

    def forward(self, x):
        mem = self.lif.init_leaky()
        out = []
        for t in range(x.shape[0]):
            spk, mem = self.lif(0.5 * x[t], mem)
            out.append(spk)
        return torch.stack(out)


def spikingjelly_neurons(device):
    """({impl: make LIFNode}, version, reset_net) for the SpikingJelly installed, or ({}, None, None)."""
    try:
        import importlib.metadata
        import inspect
        from spikingjelly.activation_based import functional, neuron, surrogate
        version = importlib.metadata.version("spikingjelly")
    except Exception as e:
        print(f"spikingjelly: unavailable ({e!r})"[:300], flush=True)
        return {}, None, None
    kw = dict(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True,
              surrogate_function=surrogate.Sigmoid(alpha=4.0), step_mode="m")
    makers = {}
    if "backend" in inspect.signature(neuron.LIFNode.__init__).parameters:  # 0.0.0.0.x: backends by name
        import numpy
        if not hasattr(numpy, "int"):  # its cupy backend still uses np.int, gone since NumPy 1.24 (peer only)
            numpy.int = int
        for backend in (("cupy", "torch") if device == "cuda" else ("torch",)):
            makers["sj_" + backend] = lambda backend=backend: neuron.LIFNode(**kw, backend=backend)
    else:  # 2.x picks the implementation itself
        impl = "torch"
        if device == "cuda":
            impl = functional.neuron_implementation("lif", torch.device("cuda"))["implementation"]
        makers["sj_" + impl] = lambda: neuron.LIFNode(**kw)
    return makers, version, functional.reset_net


def listed(arg, name):
    return arg is None or name in arg.split(",")


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def compiled(net):
    """torch.compile of net with inductor's layout optimisation off (SpikingJelly's tutorial)."""
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"--compile needs torch 2.0 or later, this is {torch.__version__}")
    import torch._inductor.config as inductor
    inductor.layout_optimization = False
    return torch.compile(net)


def measure(net, fwd, reset, x, y, amp, reps, warmup, device):
    """(median ms, p10, p90, reps run, peak MiB, losses) of full training steps, net's forward run as fwd."""
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        if reset:
            reset(net)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(fwd(x).mean(0), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    for _ in range(max(warmup, 1) - 1):
        step()
    sync(device)
    t0 = time.perf_counter()  # the last warm-up step alone: the first ones may compile
    step()
    sync(device)
    per_step = time.perf_counter() - t0
    if per_step > 2.0:  # keep a slow point under ~20 s, with at least 3 repeats where more were asked for
        reps = min(reps, max(3, int(20.0 / per_step)))
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    ts = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            step()
            ts.append((time.perf_counter() - t) * 1e3)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else 0.0
    ts.sort()
    return ts[len(ts) // 2], ts[len(ts) // 10], ts[-1 - len(ts) // 10], reps, peak, [float(v) for v in losses]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--impls", default="torch")
    ap.add_argument("--impls-w6", help="W6's implementations instead of --impls")
    ap.add_argument("--impls-w7", help="W7's implementations instead of --impls")
    ap.add_argument("--workload", default="all", choices=["W6", "W7", "all"])
    ap.add_argument("--nets")
    ap.add_argument("--T")
    ap.add_argument("--precision")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--compile", action="store_true", help="torch.compile (inductor's layout optimisation off)")
    ap.add_argument("--json")
    ap.add_argument("--skip-done", nargs="*", default=[])
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    for name in a.nets.split(",") if a.nets else []:
        if name not in NETS:
            sys.exit(f"network '{name}' is not known: {', '.join(NETS)}")
    if a.smoke:
        a.T, a.reps, a.warmup = a.T or "2", 1, 1
    if a.compile:
        a.warmup = max(a.warmup, 3)
    return a


def mode_suffix(a):
    """What the implementation's name gets for the mode it runs in."""
    return ("+cudnnbench" if a.cudnn_benchmark else "") + ("+compile" if a.compile else "")


def done_points(files):
    """(impl, net, T, precision) of the points that ran without error in earlier JSON files."""
    done = set()
    for f in files:
        if os.path.exists(f):
            for p in json.load(open(f))["points"]:
                if p.get("ok"):
                    done.add((p["impl"], p["net"], p["T"], p["precision"]))
    return done


def package_version(name):
    try:
        import importlib.metadata
        return importlib.metadata.version(name)
    except Exception as e:
        print(f"{name}: unavailable ({e!r})"[:300], flush=True)
        return None


def run_point(a, make, reset, spec, r):
    """Builds net r["net"] with neuron maker `make`, times it into record r; returns the table line's tail."""
    wl, build, bn, image, batch, Ts = spec
    B, img, T = r["B"], r["image"], r["T"]
    try:
        torch.manual_seed(0)
        net = Net(make, r["width_div"], img)
        build(net, bn)
        net = net.to(a.device)
        g = torch.Generator().manual_seed(3)
        x = torch.randn(B, 3, img, img, generator=g).to(a.device).unsqueeze(0).repeat(T, 1, 1, 1, 1)
        y = (torch.arange(B) * 7 % net.shapes[-1][0]).to(a.device)
        fwd = compiled(net) if a.compile else net
        ms, p10, p90, reps, peak, losses = measure(net, fwd, reset, x, y, r["precision"] == "bf16", a.reps,
                                                   a.warmup, a.device)
        r.update(ms=ms, ms_p10=p10, ms_p90=p90, reps=reps, peak_mib=peak, first_loss=losses[0],
                 last_loss=losses[-1], params=sum(p.numel() for p in net.parameters()))
        r["ok"] = all(math.isfinite(v) for v in losses)
        if not r["ok"]:
            r["error"] = "a loss is not finite"
        return f" {ms:9.2f} {p10:8.2f} {p90:8.2f} {reps:4d} {peak:9.0f} {losses[-1]:8.4f}  " + r.get("error", "ok")
    except Exception as e:  # a backend that cannot run this point: recorded, not a failed check
        r["error"] = repr(e)[:300]
        r["cannot_run"] = True
        return "  " + r["error"]
    finally:
        if a.device == "cuda":
            torch.cuda.empty_cache()


def main():
    a = parse_args()
    precisions = (a.precision or ("fp32,bf16" if a.device == "cuda" else "fp32")).split(",")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    wanted = {"W6": (a.impls_w6 or a.impls).split(","), "W7": (a.impls_w7 or a.impls).split(",")}
    makers = {"torch": PlainLIF, "snntorch": SnnTorchLIF}
    sj, sj_version, sj_reset = ({}, None, None)
    if any(i.startswith("sj") for impls in wanted.values() for i in impls):
        sj, sj_version, sj_reset = spikingjelly_neurons(a.device)
    makers.update(sj)
    for wl, impls in wanted.items():  # "sj": every SpikingJelly implementation this version has
        wanted[wl] = [j for i in impls for j in (sorted(sj) if i == "sj" else [i])]
    done = done_points(a.skip_done)
    snn_version = package_version("snntorch") if any("snntorch" in i for i in wanted.values()) else None
    meta = dict(program="seed_torch", torch=torch.__version__, spikingjelly=sj_version, snntorch=snn_version,
                device=torch.cuda.get_device_name() if a.device == "cuda" else "cpu", smoke=a.smoke,
                warmup=a.warmup, cudnn_benchmark=a.cudnn_benchmark, compile=a.compile, points=[])
    print(f"seed_torch: torch {torch.__version__}, spikingjelly {sj_version}, snntorch {snn_version}, "
          f"{meta['device']}, cuDNN autotuner {'on' if a.cudnn_benchmark else 'off'}, "
          f"torch.compile {'on' if a.compile else 'off'}", flush=True)
    print(f"{'wl':4s} {'net':12s} {'T':>4s} {'B':>3s} {'prec':5s} {'impl':10s} {'ms/step':>9s} {'p10':>8s} "
          f"{'p90':>8s} {'reps':>4s} {'peak_MiB':>9s} {'loss':>8s}  check", flush=True)
    for impl in dict.fromkeys(wanted["W6"] + wanted["W7"]):
        if impl not in makers:
            print(f"{impl}: not available here", flush=True)
            continue
        for name, spec in NETS.items():
            wl, image, Ts = spec[0], spec[3], spec[5]
            if not listed(a.nets, name) or a.workload not in ("all", wl) or impl not in wanted[wl]:
                continue
            for T in [int(t) for t in a.T.split(",")] if a.T else Ts:
                for prec in precisions:
                    label = impl + mode_suffix(a)
                    if (label, name, T, prec) in done:
                        continue
                    r = dict(workload=wl, net=name, bn=bool(spec[2]), T=T, B=2 if a.smoke else spec[4],
                             image=64 if a.smoke and image > 64 else image, width_div=8 if a.smoke else 1, impl=label,
                             precision=prec, cudnn_benchmark=a.cudnn_benchmark, compile=a.compile, ok=False)
                    tail = run_point(a, makers[impl], sj_reset if impl.startswith("sj_") else None, spec, r)
                    print(f"{wl:4s} {name:12s} {T:4d} {r['B']:3d} {prec:5s} {label:10s}" + tail, flush=True)
                    meta["points"].append(r)
                    if a.json:
                        with open(a.json, "w") as f:
                            json.dump(meta, f, indent=1)
    sys.exit(1 if any(not p["ok"] and not p.get("cannot_run") for p in meta["points"]) else 0)


if __name__ == "__main__":
    main()
