"""bench_w1.py — workload W1 (shared/workloads.md: one LIF layer, forward + backward, T·M = 2^25) through
spikefuse.torch.LIF on a GPU, side by side in one process with the bare C kernels called through ctypes on
preallocated tensors (the Python layer's overhead) and SpikingJelly's cupy and triton LIFNode backends.

Usage: python3 bench_w1.py [--device cuda|cpu] [--log2-size 25] [--reps 30] [--json FILE]; SpikingJelly rows
appear when it is importable (on the CPU its torch backend is the peer). Times are medians, after warm-up, of
CUDA-event timings (GPU) or host clock (CPU) around forward + backward."""
import argparse
import json
import os
import time

import torch

import spikefuse
from spikefuse import _lib
from spikefuse.torch import LIF
from spikefuse.torch.functional import lif_params

TIME_STEPS = (4, 16, 64, 256)
W1 = dict(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True, surrogate="sigmoid",
          alpha=4.0)


def elapsed_ms(step, device):
    if device == "cpu":
        t0 = time.perf_counter()
        step()
        return (time.perf_counter() - t0) * 1e3
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    step()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b)


def median_ms(step, reps, device, warmup=3):
    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    times = sorted(elapsed_ms(step, device) for _ in range(reps))
    return times[len(times) // 2], times[0], times[-1]


def copy_bandwidth(reps, device):
    """A large copy on the device, bytes read + written per second."""
    src = torch.randn(1 << 28, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    ms, _, _ = median_ms(lambda: dst.copy_(src), reps, device)
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
    if x.is_cuda:
        target = (_lib.DEVICE_CUDA, x.device.index or 0, torch.cuda.current_stream().cuda_stream)
    else:
        target = (_lib.DEVICE_CPU, 0, 0)

    def step(_keep_alive=(x, g, s, dx)):  # the kernels get raw pointers: the tensors must outlive every call
        _lib.lif_forward(p, T, N, xp, sp, *target)
        _lib.lif_backward(p, T, N, xp, gp, dxp, *target)

    def forward():
        _lib.lif_forward(p, T, N, xp, sp, *target)
        return s.clone()

    def grad():
        _lib.lif_backward(p, T, N, xp, gp, dxp, *target)
        return dx.clone()
    return step, forward, grad


def spikingjelly(backend, device):
    from spikingjelly.activation_based import functional, neuron, surrogate
    node = neuron.LIFNode(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True,
                          surrogate_function=surrogate.Sigmoid(alpha=4.0), step_mode="m", backend=backend).to(device)

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


def host_overhead_us(make, device, iters=2000):
    """Host time per forward + backward on a tiny input (launch-bound): the Python layer's fixed cost."""
    x = (torch.randn(4, 1024, device=device) + 0.6).requires_grad_(True)
    g = torch.randn_like(x)
    step = make(x, g)[0]
    for _ in range(50):
        step()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--log2-size", type=int, default=None, help="log2 of T·M (default 25 on CUDA, 22 on the CPU)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp"), "bench_w1.json"))
    args = ap.parse_args()
    device = args.device
    if device == "cuda" and (not torch.cuda.is_available() or spikefuse.cuda_device_count() == 0):
        raise SystemExit(f"bench_w1 needs a CUDA device and a CUDA build of libspikefuse ({spikefuse.build_info()})")
    log2 = args.log2_size or (25 if device == "cuda" else 22)
    shapes = [(T, (1 << log2) // T) for T in TIME_STEPS]
    impls = {"spikefuse.torch": spikefuse_torch, "bare C kernels": bare_kernels}
    for backend in (("cupy", "triton") if device == "cuda" else ("torch",)):
        try:
            impls["spikingjelly " + backend] = spikingjelly(backend, device)
        except Exception as e:
            print(f"spikingjelly {backend}: unavailable ({e!r})"[:300])
    bw = copy_bandwidth(args.reps, device)
    card = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} torch threads, " \
        f"{spikefuse.get_num_threads()} spikefuse threads"
    print(f"device: {card}; torch {torch.__version__}; spikefuse {spikefuse.version()} ({spikefuse.build_info()})")
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write); T·M = 2^{log2}")
    results = dict(device=card, torch=torch.__version__, copy_GBps=bw / 1e9, log2_size=log2, rows=[],
                   host_overhead_us={})
    print(f"{'impl':18s} {'T':>4s} {'M':>8s} {'ms':>8s} {'min':>7s} {'max':>7s} {'peakMiB':>8s} "
          f"{'GB/s':>6s} {'%copy':>6s} {'spikes=':>7s} {'dx err':>8s}")
    for T, M in shapes:
        torch.manual_seed(0)
        x = (torch.randn(T, M, device=device) + 0.6).requires_grad_(True)
        g = torch.randn(T, M, device=device)
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
                if device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                ms, lo, hi = median_ms(step, args.reps, device)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if device == "cuda" else float("nan")
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
        results["host_overhead_us"][name] = host_overhead_us(impls[name], device)
    print(f"\nsummary at T·M = 2^{log2} (median ms; ratios from the same run)")
    peers = [name for name in impls if name.startswith("spikingjelly")]
    print(f"{'T':>4s} {'floor':>7s} {'bare':>7s} {'torch':>7s} {'overhead':>9s} " +
          " ".join(f"{p.replace('spikingjelly', 'sj'):>10s} {'speedup':>7s}" for p in peers))
    by = {(r["impl"], r["T"]): r["ms"] for r in results["rows"]}

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"
    for T, M in shapes:
        bare, tor = by.get(("bare C kernels", T)), by.get(("spikefuse.torch", T))
        over = (tor / bare - 1) * 100 if bare and tor else None
        cols = []
        for p in peers:
            ms = by.get((p, T))
            cols.append(f"{fmt(ms, '10.3f')} {fmt(ms / tor if ms and tor else None, '7.2f')}")
        print(f"{T:4d} {T * M * 20 / bw * 1e3:7.3f} {fmt(bare, '7.3f')} {fmt(tor, '7.3f')} {fmt(over, '8.1f')}% " +
              " ".join(cols))
    print("host time per forward+backward on [4, 1024] (launch-bound): " +
          ", ".join(f"{k} {v:.1f} us" for k, v in results["host_overhead_us"].items()))
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
