"""sj_w9_w10.py — SpikingJelly's own SEW-ResNet and Spikformer models on workloads W9 and W10 (../shared/workloads.md)
and their siblings, one training step in one of the modes an expert would set, timed as bench_w9_sew and
bench_w10_spikformer time spikefuse: synchronised CUDA events around zero_grad, forward, cross-entropy on the T-mean,
backward and the optimizer step; the median of --reps after 3 warm-up steps; peak = torch.cuda.max_memory_allocated.

Usage: python3 sj_w9_w10.py MODEL MODE [--reps 10] [--json FILE] [--device cuda] [--batch B] [--size S]
  MODEL  w9 (sew_resnet18, cnf ADD, IFNode + ATan, detach_reset, T 4, B 32, 224², SGD momentum 0.9), sew34, sew50,
         w10 (Spikformer-8-384: 224², patch 16, 12 heads, MLP ratio 4, T 4, B 32, AdamW),
         spikformer_cifar (Spikformer-4-384 on 32², T 4, B 64, AdamW)
  MODE   fp32 | bf16 (autocast) | bf16-compile (autocast and torch.compile); cudnn.benchmark is on in every mode
One model and mode per process: SpikingJelly 2.x picks its neuron kernels from SJ_<NEURON>_CUDA_IMPLEMENTATION
(auto | cuda | triton | torch) when it is imported, and a compiled graph should not see another mode's state.
SpikingJelly 0.0.0.0.14 (its cupy kernels; SEW-ResNets only) is used when it is the one importable: --impl cupy.
--device cpu with --batch/--size runs a small smoke test of the same code paths. Prints one JSON line."""
import argparse
import importlib.metadata
import json
import os
import sys

IMPLS = ("auto", "cuda", "triton", "torch", "cupy")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=("w9", "sew34", "sew50", "w10", "spikformer_cifar"))
    ap.add_argument("mode", choices=("fp32", "bf16", "bf16-compile"))
    ap.add_argument("--impl", choices=IMPLS, default="triton", help="SpikingJelly's neuron kernels (cupy: 0.0.0.0.14)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=0, help="0: the workload's")
    ap.add_argument("--size", type=int, default=0, help="image side; 0: the workload's")
    ap.add_argument("--json", default="")
    return ap.parse_args()


args = parse()
if args.impl != "cupy":  # SpikingJelly 2.x reads these when its ops are imported
    for n in ("IF", "LIF"):
        os.environ[f"SJ_{n}_CUDA_IMPLEMENTATION"] = args.impl

import numpy as np  # noqa: E402

if not hasattr(np, "int"):  # SpikingJelly 0.0.0.0.14's cupy code generator names np.int, gone in numpy 2
    np.int = int

import torch  # noqa: E402
import spikingjelly  # noqa: E402
from spikingjelly.activation_based import functional, neuron, surrogate  # noqa: E402

torch.backends.cudnn.benchmark = True
dev = torch.device(args.device)
T = 4


def sew(depth):
    from spikingjelly.activation_based.model import sew_resnet
    make = {18: sew_resnet.sew_resnet18, 34: sew_resnet.sew_resnet34, 50: sew_resnet.sew_resnet50}[depth]
    net = make(cnf="ADD", spiking_neuron=neuron.IFNode, surrogate_function=surrogate.ATan(), detach_reset=True)
    functional.set_step_mode(net, "m")
    if args.impl == "cupy":
        functional.set_backend(net, "cupy", instance=neuron.IFNode)
    side, batch = args.size or 224, args.batch or 32
    x = torch.randn(T, batch, 3, side, side, device=dev)  # the model reads [T, B, ...]
    return net.to(dev), x, 1000, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)


def spikformer(cifar):
    from spikingjelly.activation_based.model.spikformer import Spikformer
    side = args.size or (32 if cifar else 224)
    batch = args.batch or (64 if cifar else 32)
    classes = 10 if cifar else 1000
    net = Spikformer(T=T, in_channels=3, img_size_h=side, img_size_w=side, patch_size=4 if cifar else 16,
                     num_classes=classes, embed_dims=384, num_heads=12, mlp_ratio=4.0, depths=4 if cifar else 8)
    x = torch.randn(batch, 3, side, side, device=dev)  # the model repeats it over T
    return net.to(dev), x, classes, lambda p: torch.optim.AdamW(p, lr=5e-4, weight_decay=0.01)


def build():
    torch.manual_seed(0)
    if args.model in ("w9", "sew34", "sew50"):
        return sew({"w9": 18, "sew34": 34, "sew50": 50}[args.model])
    if args.impl == "cupy":
        sys.exit("sj_w9_w10.py: SpikingJelly 0.0.0.0.14 has no Spikformer; use --impl triton or torch")
    return spikformer(args.model == "spikformer_cifar")


def main():
    net, x, classes, make_opt = build()
    batch = x.shape[1] if x.dim() == 5 else x.shape[0]
    labels = torch.randint(0, classes, (batch,), device=dev)
    opt = make_opt(net.parameters())
    amp = args.mode != "fp32"
    fwd = net
    if args.mode == "bf16-compile":
        import torch._inductor.config as inductor
        inductor.layout_optimization = False  # SpikingJelly's kernels take contiguous NCHW
        fwd = torch.compile(net)
    cuda = dev.type == "cuda"

    def step():
        opt.zero_grad(set_to_none=True)
        functional.reset_net(net)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            out = fwd(x)
            loss = torch.nn.functional.cross_entropy(out.mean(0).float(), labels)
        loss.backward()
        opt.step()

    for _ in range(3):  # compile, cuDNN's choices, optimizer state
        step()
    times = []
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            import time
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    ms = times[len(times) // 2]
    r = dict(peer=f"spikingjelly {importlib.metadata.version('spikingjelly')}",
             model=args.model, mode=args.mode, impl=args.impl, T=T, batch=batch, image=x.shape[-1], ms=ms,
             peak_mib=torch.cuda.max_memory_allocated() / 2**20 if cuda else None, images_per_s=batch * 1e3 / ms,
             device=torch.cuda.get_device_name(dev) if cuda else "cpu", torch=torch.__version__)
    print(json.dumps(r), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
