"""bench_w1.py — workload W1 (shared/workloads.md: one LIF layer, forward + backward, T·M = 2^25) through
spikefuse.torch.LIF on a GPU, side by side in one process with the bare C kernels called through ctypes on
preallocated tensors (the Python layer's overhead) and SpikingJelly's cupy and triton LIFNode backends.

Usage: python3 bench_w1.py [--reps 30] [--json FILE]; SpikingJelly rows appear when it is importable.
Times are medians of CUDA-event timings around forward + backward after warm-up."""
import argparse
import json
import os
import time

import torch

import spikefuse
from spikefuse import _lib
from spikefuse.torch import LIF
from spikefuse.torch.functional import lif_params

SHAPES = [(4, 1 << 23), (16, 1 << 21), (64, 1 << 19), (256, 1 << 17)]
W1 = dict(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True, surrogate="sigmoid",
          alpha=4.0)


def median_ms(step, reps, warmup=3):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def copy_bandwidth(reps):
    """Device-to-device copy, bytes read + written per second."""
    src = torch.empty(1 << 28, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    ms, _, _ = median_ms(lambda: dst.copy_(src), reps)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def spikefuse_torch(x, g):
    lif = LIF(**W1)

    def step():
        s = lif(x)
        s.backward(g)
        x.grad = None
    return step, lambda: lif(x), lambda: _grad(lif, x, g)


def _grad(fn, x, g):
    x.grad = None
    fn(x).backward(g)
    dx = x.grad
    x.grad = None
    return dx


def bare_kernels(x, g):
    """The C entry points on preallocated tensors, no autograd: what the Python layer adds is the difference."""
    p = lif_params(**W1)
    T, N = x.shape[0], x[0].numel()
    s = torch.empty_like(x)
    dx = torch.empty_like(x)
    xp, sp, gp, dxp = x.data_ptr(), s.data_ptr(), g.data_ptr(), dx.data_ptr()
    dev = x.device.index or 0
    stream = torch.cuda.current_stream().cuda_stream

    def step():
        _lib.lif_forward(p, T, N, xp, sp, _lib.DEVICE_CUDA, dev, stream)
        _lib.lif_backward(p, T, N, xp, gp, dxp, _lib.DEVICE_CUDA, dev, stream)

    def forward():
        _lib.lif_forward(p, T, N, xp, sp, _lib.DEVICE_CUDA, dev, stream)
        return s.clone()

    def grad():
        _lib.lif_backward(p, T, N, xp, gp, dxp, _lib.DEVICE_CUDA, dev, stream)
        return dx.clone()
    return step, forward, grad


def spikingjelly(backend):
    from spikingjelly.activation_based import functional, neuron, surrogate
    node = neuron.LIFNode(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True,
                          surrogate_function=surrogate.Sigmoid(alpha=4.0), step_mode="m", backend=backend).cuda()

    def run(x):
        functional.reset_net(node)
        return node(x)

    def make(x, g):
        def step():
            s = run(x)
            s.backward(g)
            x.grad = None
        return step, lambda: run(x), lambda: _grad(run, x, g)
    return make


def host_overhead_us(make, iters=2000):
    """Host time per forward + backward on a tiny input (launch-bound): the Python layer's fixed cost."""
    x = (torch.randn(4, 1024, device="cuda") + 0.6).requires_grad_(True)
    g = torch.randn_like(x)
    step = make(x, g)[0]
    for _ in range(50):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp"), "bench_w1.json"))
    args = ap.parse_args()
    if not torch.cuda.is_available() or spikefuse.cuda_device_count() == 0:
        raise SystemExit(f"bench_w1 needs a CUDA device and a CUDA build of libspikefuse ({spikefuse.build_info()})")
    torch.backends.cuda.matmul.allow_tf32 = False
    impls = {"spikefuse.torch": spikefuse_torch, "bare C kernels": bare_kernels}
    for backend in ("cupy", "triton"):
        try:
            impls["spikingjelly " + backend] = spikingjelly(backend)
        except Exception as e:
            print(f"spikingjelly {backend}: unavailable ({e!r})"[:300])
    bw = copy_bandwidth(args.reps)
    card = torch.cuda.get_device_name()
    print(f"card: {card}; torch {torch.__version__}; spikefuse {spikefuse.version()} ({spikefuse.build_info()})")
    print(f"device-to-device copy: {bw / 1e9:.0f} GB/s (read + write)")
    results = dict(card=card, torch=torch.__version__, copy_GBps=bw / 1e9, rows=[], host_overhead_us={})
    print(f"{'impl':18s} {'T':>4s} {'M':>8s} {'ms':>8s} {'min':>7s} {'max':>7s} {'peakMiB':>8s} "
          f"{'GB/s':>6s} {'%copy':>6s} {'spikes=':>7s} {'dx err':>8s}")
    for T, M in SHAPES:
        torch.manual_seed(0)
        x = (torch.randn(T, M, device="cuda") + 0.6).requires_grad_(True)
        g = torch.randn(T, M, device="cuda")
        floor_ms = T * M * 20 / bw * 1e3
        ref_s = ref_dx = None
        for name, make in impls.items():
            try:
                step, forward, grad = make(x, g)
                with torch.no_grad():
                    s = forward().detach()
                dx = grad()
                if ref_s is None:
                    ref_s, ref_dx = s, dx
                same = float((s == ref_s).float().mean())
                err = float((dx - ref_dx).abs().max() / ref_dx.abs().max().clamp_min(1e-30))
                del s, dx
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                ms, lo, hi = median_ms(step, args.reps)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            except Exception as e:
                print(f"{name:18s} {T:4d} {M:8d} failed: {e!r}"[:300])
                continue
            gbps = T * M * 20 / (ms * 1e-3) / 1e9
            print(f"{name:18s} {T:4d} {M:8d} {ms:8.3f} {lo:7.3f} {hi:7.3f} {peak:8.0f} {gbps:6.0f} "
                  f"{gbps * 1e9 / bw * 100:5.0f}% {same:7.5f} {err:8.1e}")
            results["rows"].append(dict(impl=name, T=T, M=M, ms=ms, min_ms=lo, max_ms=hi, peak_mib=peak,
                                        floor_ms=floor_ms, spikes_equal=same, dx_rel_err=err))
        del x, g
    for name in ("spikefuse.torch", "bare C kernels"):
        results["host_overhead_us"][name] = host_overhead_us(impls[name])
    print("\nsummary at T·M = 2^25 (median ms; ratios from the same run)")
    print(f"{'T':>4s} {'floor':>7s} {'bare':>7s} {'torch':>7s} {'overhead':>9s} {'sj cupy':>8s} {'sj triton':>9s} "
          f"{'x cupy':>7s} {'x triton':>8s}")
    by = {(r["impl"], r["T"]): r["ms"] for r in results["rows"]}
    for T, M in SHAPES:
        bare, tor = by.get(("bare C kernels", T)), by.get(("spikefuse.torch", T))
        cupy, trit = by.get(("spikingjelly cupy", T)), by.get(("spikingjelly triton", T))

        def fmt(v, spec):
            return format(v, spec) if v is not None else "-"
        over = (tor / bare - 1) * 100 if bare and tor else None
        print(f"{T:4d} {T * M * 20 / bw * 1e3:7.3f} {fmt(bare, '7.3f')} {fmt(tor, '7.3f')} "
              f"{fmt(over, '8.1f')}% {fmt(cupy, '8.3f')} {fmt(trit, '9.3f')} "
              f"{fmt(cupy / tor if cupy and tor else None, '7.2f')} {fmt(trit / tor if trit and tor else None, '8.2f')}")
    print("host time per forward+backward on [4, 1024] (launch-bound): " +
          ", ".join(f"{k} {v:.1f} us" for k, v in results["host_overhead_us"].items()))
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
