"""bench_w12.py — workload W12 (the engine from PyTorch), part W3: Liang et al.'s CIFAR-10 VGG9 (examples/cifar10_vgg9.ini,
T=10, B=64) as one spikefuse.torch.Network trained from Python — torch's SGD with momentum 0.9, torch's
cross-entropy on the T-mean of the output — beside the engine's own step on the same net (bench_w3_vgg9, run here
when --c-bench names it), on one card.

Usage: python3 bench_w12.py [--reps 20] [--precisions fp32 bf16] [--memory recompute] [--sparse auto|off]
                            [--c-bench PATH] [--json FILE]
Per precision: the median step time (CUDA events around zero_grad, forward, loss, backward, optimizer step, the
input already on the card, repeated over T as direct encoding) and the host time per step (the median time the
Python thread spends in one step's calls, started on an idle queue with the card running behind: what the
Network's Python and ctypes layers cost the host), and the peak device memory torch's allocator saw
(the engine's own memory is not in it). With --c-bench, bench_w3_vgg9's median for the same precision, and the
ratio. TF32 is off in fp32 (the engine's fp32), as in bench_w3_vgg9."""
import argparse
import json
import os
import re
import statistics
import subprocess
import time

import torch

from spikefuse.torch import Network

T, B, CLASSES = 10, 64, 10
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "cifar10_vgg9.ini")


def step(net, opt, x, labels):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(net(x).mean(0), labels)
    loss.backward()
    opt.step()


def measure(precision, memory, sparse, reps):
    torch.manual_seed(0)
    net = Network(CONFIG, device="cuda", precision=precision, memory=memory, settings={"train.sparse": sparse})
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(B, 3, 32, 32, device="cuda").unsqueeze(0).repeat(T, 1, 1, 1, 1)
    labels = torch.randint(0, CLASSES, (B,), device="cuda")
    for _ in range(3):  # compile, cuDNN choices, optimizer state
        step(net, opt, x, labels)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step(net, opt, x, labels)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    host = []
    for _ in range(reps):  # the host's share: one step's calls from an idle queue, the card running behind them
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(net, opt, x, labels)
        host.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return dict(precision=precision, memory=memory, sparse=sparse, step_ms=statistics.median(times),
                host_ms=statistics.median(host), torch_peak_mib=torch.cuda.max_memory_allocated() / 2**20)


def c_bench(path, precision):
    """bench_w3_vgg9's median step time in ms for the memory mode recompute, or None where its output differs."""
    out = subprocess.run([path, "20", precision], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^recompute\s+([0-9.]+)", out, re.M)  # its table: memory, ms/step, ...
    return (float(m.group(1)) if m else None), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--memory", default="recompute")
    ap.add_argument("--sparse", default="auto", help="train.sparse: auto (the engine's default; the spike counts come "
                    "back after each backward without the host waiting for them) or off")
    ap.add_argument("--c-bench", help="the bench_w3_vgg9 program, to run beside")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for p in args.precisions:
        r = measure(p, args.memory, args.sparse, args.reps)
        if args.c_bench:
            r["engine_step_ms"], r["engine_output"] = c_bench(args.c_bench, p)
            if r["engine_step_ms"]:
                r["network_over_engine"] = r["step_ms"] / r["engine_step_ms"]
        rows.append(r)
        extra = f", bench_w3_vgg9 {r['engine_step_ms']:.2f} ms ({r['network_over_engine']:.3f}x)" \
            if r.get("network_over_engine") else ""
        print(f"W12/W3 {p} {args.memory}: Network step {r['step_ms']:.2f} ms, host {r['host_ms']:.3f} ms per step "
              f"({100 * r['host_ms'] / r['step_ms']:.1f}% of the step){extra}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
