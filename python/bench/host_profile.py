"""host_profile.py — where the host time of one spikefuse.torch LIF forward + backward goes, eager and compiled
(torch.compile default and mode="reduce-overhead"): microseconds per pass on a tiny [4, 1024] input (launch-bound,
so host time is what is measured), then cProfile's functions by their own time over 300 passes.

Usage: python3 host_profile.py [--device cuda|cpu] [--rows 22]
Compiled modes need torch >= 2.4 with custom ops (spikefuse.torch.CUSTOM_OPS); reduce-overhead needs CUDA."""
import argparse
import cProfile
import io
import pstats
import time

import torch

from bench_w1 import W1, sync  # W1's neuron and the same synchronisation
from spikefuse.torch import CUSTOM_OPS, LIF


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--rows", type=int, default=22, help="functions listed per mode")
    args = ap.parse_args()
    device = args.device
    x = (torch.randn(4, 1024, device=device) + 0.6).requires_grad_(True)
    g = torch.randn_like(x)
    modes = ["eager"]
    if CUSTOM_OPS and hasattr(torch, "compile"):
        modes += ["default"] + (["reduce-overhead"] if device == "cuda" else [])
    for mode in modes:
        lif = LIF(keep_state=False, **W1)
        if mode != "eager":
            torch._dynamo.reset()
        fn = lif if mode == "eager" else torch.compile(lif, fullgraph=True, mode=mode)

        def step():
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            fn(x).backward(g)
            x.grad = None
        for _ in range(50):
            step()
        sync(device)
        t0 = time.perf_counter()
        for _ in range(1000):
            step()
        sync(device)
        print(f"== {mode}: {(time.perf_counter() - t0) * 1e3:.1f} us per forward + backward", flush=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(300):
            step()
        sync(device)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.rows)
        print(out.getvalue())


if __name__ == "__main__":
    main()
