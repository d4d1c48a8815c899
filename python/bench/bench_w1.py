"""bench_w1.py — workload W1 (shared/workloads.md: one LIF layer, forward + backward, T·M = 2^25) through
spikefuse.torch.LIF (eager; compiled with torch.compile(fullgraph=True) where torch has custom ops; with bfloat16
input and gradient), side by side in one process with the bare C kernels called through ctypes on preallocated
tensors (what the Python layer adds) and SpikingJelly's LIFNode implementations that the installed version offers
(0.0.0.0.x: backend="cupy" and "torch"; 2.x: the implementation it selects, Triton without its native build).
Every stateful module is reset before each sequence, as SpikingJelly's are (functional.reset_net).

Usage: python3 bench_w1.py [--device cuda|cpu] [--log2-size 25] [--reps 30] [--json FILE] [--only A,B]
Two timings per implementation, both medians after warm-up, with CUDA events (GPU) or the host clock (CPU):
  latency    one forward + backward between two events (the peers' method: host time before the first launch, and
             any the GPU waits for between launches, counts);
  pipelined  ten forward + backward passes between two events, per pass (the host runs ahead, as it does inside a
             network: the GPU's own time).
Correctness columns, against the first row: spikes that differ (flips), and the largest dx difference over the
neurons whose spike trains agree, relative to the largest |dx|.
Host overhead: host time per forward + backward on a tiny [4, 1024] input, where launches, not kernels, bound it;
"autograd no-op" is a torch.autograd.Function that launches nothing, the floor for any autograd-integrated op."""
import argparse
import inspect
import json
import os
import time

import torch

import spikefuse
from spikefuse import _lib
from spikefuse.torch import CUSTOM_OPS, LIF, _kernels

TIME_STEPS = (4, 16, 64, 256)
W1 = dict(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True, surrogate="sigmoid",
          alpha=4.0)
PIPELINE = 10


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def elapsed_ms(fn, device):
    if device == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b)


def median_ms(fn, reps, device, warmup=3):
    for _ in range(warmup):
        fn()
    sync(device)
    times = sorted(elapsed_ms(fn, device) for _ in range(reps))
    return times[len(times) // 2], times[0], times[-1]


def copy_bandwidth(reps, device):
    """A large copy on the device, bytes read + written per second."""
    src = torch.randn(1 << 28, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    ms, _, _ = median_ms(lambda: dst.copy_(src), reps, device)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def _grad(fn, x, g):
    x.grad = None
    fn(x).backward(g)
    dx = x.grad.clone()  # a CUDA-graphed backward owns x.grad's memory until its next replay
    x.grad = None
    return dx


def autograd_maker(fn):
    """(step, forward, grad) for a function x -> spikes that autograd differentiates."""
    def make(x, g):
        def step():
            fn(x).backward(g)
            x.grad = None
        return step, lambda: fn(x).detach().clone(), lambda: _grad(fn, x, g)
    return make


def compiled_maker(module, **compile_kw):
    """autograd_maker over a fresh torch.compile(module, fullgraph=True) per input: dynamo's caches are cleared
    first, so each shape and each row starts from one compile (a user's model sees one shape), and every check and
    timing runs with grad enabled (a call under no_grad would compile a second graph). Under mode="reduce-overhead"
    each call starts a new CUDA-graph step (torch.compiler.cudagraph_mark_step_begin), as a training loop would."""
    graphed = compile_kw.get("mode") == "reduce-overhead"

    def make(x, g):
        torch._dynamo.reset()
        compiled = torch.compile(module, fullgraph=True, **compile_kw)

        def fn(x):
            if graphed:
                torch.compiler.cudagraph_mark_step_begin()
            module.reset()
            return compiled(x)
        return autograd_maker(fn)(x, g)
    return make


def checkpoints(x, p):
    """(state, keep-alive) for a bare call: the forward's checkpoints of v for the backward's recompute, as
    spikefuse.torch keeps them (sf_lif_state.v_ckpt; none on the CPU or up to 32 steps)."""
    ckpt = _kernels.ckpt_for(x, _kernels.params_tuple(p))
    return _kernels._state(ckpt=ckpt), ckpt


def bare_kernels(x, g):
    """The C entry points on preallocated tensors, no autograd: what the Python layer adds is the difference."""
    p = _lib.lif_params(**W1)
    T, N = x.shape[0], x[0].numel()
    s = torch.empty_like(x)
    dx = torch.empty_like(x)
    xp, sp, gp, dxp = x.data_ptr(), s.data_ptr(), g.data_ptr(), dx.data_ptr()
    st, ckpt = checkpoints(x, p)
    if x.is_cuda:
        device, stream = _lib.Device(_lib.DEVICE_CUDA, x.device.index or 0), torch.cuda.current_stream().cuda_stream
    else:
        device, stream = _lib.Device(_lib.DEVICE_CPU, 0), None

    def fwd():
        _lib.check(_lib.sf_lif_forward_state(p, T, N, xp, sp, st, device, stream), "sf_lif_forward_state")

    def bwd():
        _lib.check(_lib.sf_lif_backward_state(p, T, N, xp, gp, dxp, st, device, stream), "sf_lif_backward_state")

    def step(_keep_alive=(x, g, s, dx, ckpt)):  # the kernels get raw pointers: the tensors must outlive every call
        fwd()
        bwd()

    def forward():
        fwd()
        return s.clone()

    def grad():
        bwd()
        return dx.clone()
    return step, forward, grad


def sequence(module):
    """x -> spikes of a fresh sequence through a stateful module (reset first)."""
    def fn(x):
        module.reset()
        return module(x)
    return fn


def cast_maker(make, dtype):
    """The same implementation fed x and the incoming gradient in `dtype`."""
    def wrapped(x, g):
        return make(x.detach().to(dtype).requires_grad_(True), g.to(dtype))
    return wrapped


def spikefuse_impls():
    """{name: make} of spikefuse.torch's rows (the compiled ones where torch has custom ops and torch.compile)."""
    lif = LIF(**W1)
    impls = {"spikefuse.torch": autograd_maker(sequence(lif))}
    if CUSTOM_OPS and hasattr(torch, "compile"):
        impls["spikefuse.torch compiled"] = compiled_maker(LIF(**W1))
        impls["spikefuse.torch compiled stateless"] = compiled_maker(LIF(keep_state=False, **W1))
        if torch.cuda.is_available():  # replayed as CUDA graphs: the host's per-call work leaves the timed path
            impls["spikefuse.torch compiled reduce-overhead"] = compiled_maker(LIF(keep_state=False, **W1),
                                                                           mode="reduce-overhead")
            impls["spikefuse.torch compiled reduce-overhead bf16"] = cast_maker(
                compiled_maker(LIF(keep_state=False, **W1), mode="reduce-overhead"), torch.bfloat16)
    impls["spikefuse.torch bf16"] = cast_maker(autograd_maker(sequence(lif)), torch.bfloat16)
    if torch.cuda.is_available() and _lib.sf_lif_forward_typed is not None:
        impls["bare C kernels bf16"] = cast_maker(bare_typed_kernels, torch.bfloat16)
    return impls


def bare_typed_kernels(x, g):
    """The typed C entry points (sf_lif_forward_typed / backward) on x, g in their 16-bit type, no autograd."""
    p = _lib.lif_params(**W1)
    T, N = x.shape[0], x[0].numel()
    code = {torch.bfloat16: _lib.SCALAR_BF16, torch.float16: _lib.SCALAR_F16}[x.dtype]
    s, dx = torch.empty_like(x), torch.empty_like(x)
    device = _lib.Device(_lib.DEVICE_CUDA, x.device.index or 0)
    stream = torch.cuda.current_stream().cuda_stream
    st, ckpt = checkpoints(x, p)

    def fwd():
        _lib.check(_lib.sf_lif_forward_typed(p, T, N, code, x.data_ptr(), s.data_ptr(), st, device, stream),
                   "sf_lif_forward_typed")

    def bwd():
        _lib.check(_lib.sf_lif_backward_typed(p, T, N, code, x.data_ptr(), g.data_ptr(), dx.data_ptr(), st, device,
                                              stream), "sf_lif_backward_typed")

    def step(_keep_alive=(x, g, s, dx, ckpt)):  # raw pointers: the tensors must outlive every call
        fwd()
        bwd()

    def forward():
        fwd()
        return s.clone()

    def grad():
        bwd()
        return dx.clone()
    return step, forward, grad


class _NoOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, ds):
        (x,) = ctx.saved_tensors
        return torch.empty_like(x)


def spikingjelly_impls(device):
    """{name: make} for the SpikingJelly LIFNode implementations the installed version offers on `device`."""
    try:
        import importlib.metadata
        from spikingjelly.activation_based import functional, neuron, surrogate
        version = importlib.metadata.version("spikingjelly")
    except Exception as e:
        print(f"spikingjelly: unavailable ({e!r})"[:300])
        return {}
    kw = dict(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=True,
              surrogate_function=surrogate.Sigmoid(alpha=4.0), step_mode="m")
    nodes = {}
    if "backend" in inspect.signature(neuron.LIFNode.__init__).parameters:  # 0.0.0.0.x: backends by name
        import numpy
        if not hasattr(numpy, "int"):  # its cupy backend still uses np.int, gone since NumPy 1.24 (peer only)
            numpy.int = int
        for backend in (("cupy", "torch") if device == "cuda" else ("torch",)):
            try:
                nodes[backend] = neuron.LIFNode(**kw, backend=backend).to(device)
            except Exception as e:
                print(f"spikingjelly {version} {backend}: unavailable ({e!r})"[:300])
    else:  # 2.x picks the implementation itself (SJ_LIF_CUDA_IMPLEMENTATION can force one)
        impl = "torch"
        if device == "cuda":
            impl = functional.neuron_implementation("lif", torch.device("cuda"))["implementation"]
        nodes[impl] = neuron.LIFNode(**kw).to(device)
    makers = {}
    for impl, node in nodes.items():
        def run(x, node=node):
            functional.reset_net(node)
            return node(x)
        makers[f"spikingjelly {version} {impl}"] = autograd_maker(run)
    return makers


def host_overhead_us(make, device, iters=2000):
    """Host time per forward + backward on a tiny input (launch-bound): the Python layer's fixed cost."""
    x = (torch.randn(4, 1024, device=device) + 0.6).requires_grad_(True)
    g = torch.randn_like(x)
    step = make(x, g)[0]
    for _ in range(50):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--log2-size", type=int, default=None, help="log2 of T·M (default 25 on CUDA, 22 on the CPU)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp"), "bench_w1.json"))
    ap.add_argument("--only", default="", help="comma-separated name fragments: run only the rows whose name holds "
                    "one (the bare C kernels always run: every ratio is to them)")
    args = ap.parse_args()
    device = args.device
    if device == "cuda" and (not torch.cuda.is_available() or spikefuse.cuda_device_count() == 0):
        raise SystemExit(f"bench_w1 needs a CUDA device and a CUDA build of libspikefuse ({spikefuse.build_info()})")
    log2 = args.log2_size or (25 if device == "cuda" else 22)
    shapes = [(T, (1 << log2) // T) for T in TIME_STEPS]
    impls = spikefuse_impls()
    impls["bare C kernels"] = bare_kernels
    impls.update(spikingjelly_impls(device))
    if args.only:
        keep = args.only.split(",")
        impls = {k: v for k, v in impls.items() if k.startswith("bare C kernels") or any(f in k for f in keep)}
    bw = copy_bandwidth(args.reps, device)
    name = torch.cuda.get_device_name() if device == "cuda" else \
        f"CPU, {torch.get_num_threads()} torch threads, {spikefuse.get_num_threads()} spikefuse threads"
    print(f"device: {name}; torch {torch.__version__}; spikefuse {spikefuse.version()} ({spikefuse.build_info()})")
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write); T·M = 2^{log2}; floor = 20 B/element over it")
    results = dict(device=name, torch=torch.__version__, copy_GBps=bw / 1e9, log2_size=log2, rows=[],
                   host_overhead_us={})
    print(f"{'impl':34s} {'T':>4s} {'M':>8s} {'latency':>8s} {'min':>7s} {'piped':>7s} {'peakMiB':>8s} "
          f"{'%copy':>6s} {'flips':>6s} {'dx err':>8s}")
    for T, M in shapes:
        torch.manual_seed(0)
        x = (torch.randn(T, M, device=device) + 0.6).requires_grad_(True)
        g = torch.randn(T, M, device=device)
        ref_s = ref_dx = None
        for impl, make in impls.items():
            try:
                step, forward, grad = make(x, g)
                s = forward()
                dx = grad()
                if ref_s is None:
                    ref_s, ref_dx = s, dx
                # Implementations that round differently may flip a spike where h lies within rounding of the
                # threshold, which changes that neuron's whole gradient history: count flips exactly and compare
                # gradients on the neurons whose spike trains agree.
                flipped = (s != ref_s)
                flips = int(flipped.sum())
                agree = ~flipped.any(0)
                err = float((dx - ref_dx)[:, agree].abs().max() / ref_dx.abs().max().clamp_min(1e-30))
                del s, dx, flipped, agree
                sync(device)
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                ms, lo, _ = median_ms(step, args.reps, device)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if device == "cuda" else float("nan")

                def pipelined():
                    for _ in range(PIPELINE):
                        step()
                piped = median_ms(pipelined, max(5, args.reps // 3), device, warmup=1)[0] / PIPELINE
            except Exception as e:
                print(f"{impl:34s} {T:4d} {M:8d} failed: {e!r}"[:300])
                continue
            pct = T * M * 20 / (ms * 1e-3) / bw * 100
            print(f"{impl:34s} {T:4d} {M:8d} {ms:8.3f} {lo:7.3f} {piped:7.3f} {peak:8.0f} {pct:5.0f}% "
                  f"{flips:6d} {err:8.1e}")
            results["rows"].append(dict(impl=impl, T=T, M=M, ms=ms, min_ms=lo, pipelined_ms=piped, peak_mib=peak,
                                        floor_ms=T * M * 20 / bw * 1e3, spike_flips=flips, dx_rel_err=err))
        del x, g
    for impl, make in [*impls.items(), ("autograd no-op", autograd_maker(_NoOp.apply))]:
        try:
            results["host_overhead_us"][impl] = host_overhead_us(make, device)
        except Exception as e:
            print(f"host overhead of {impl}: failed ({e!r})"[:300])

    print(f"\nsummary at T·M = 2^{log2}: median ms, latency (pipelined); ratios from this run")
    peers = [impl for impl in impls if impl.startswith("spikingjelly")]
    ours = [impl for impl in impls if impl.startswith("spikefuse")]
    by = {(r["impl"], r["T"]): r for r in results["rows"]}

    def pair(r):
        return f"{r['ms']:6.3f} ({r['pipelined_ms']:.3f})" if r else "-"

    def excess(a, b, key):
        return (a[key] / b[key] - 1) * 100
    for T, M in shapes:
        bare = by.get(("bare C kernels", T))
        print(f"T={T}: floor {T * M * 20 / bw * 1e3:.3f} ms, bare C kernels {pair(bare)}")
        for impl in ours:
            r = by.get((impl, T))
            if not r:
                continue
            over = f"{excess(r, bare, 'ms'):+6.1f}% ({excess(r, bare, 'pipelined_ms'):+.1f}%) vs bare" if bare else ""
            fp32 = by.get(("spikefuse.torch", T))
            speed = f", {fp32['ms'] / r['ms']:.2f}x the fp32 module's speed" if "bf16" in impl and fp32 else ""
            bare16 = by.get(("bare C kernels bf16", T))
            if "bf16" in impl and bare16:
                speed += f", bare bf16 {pair(bare16)} = {bare['ms'] / bare16['ms']:.2f}x bare fp32" if bare else ""
            vs = ", ".join(f"{p.replace('spikingjelly ', 'sj ')} {by[(p, T)]['ms'] / r['ms']:.2f}x slower"
                           for p in peers if (p, T) in by)
            print(f"  {impl:36s} {pair(r):>17s} {over}{speed}{'; ' + vs if vs else ''}")
    print("host time per forward + backward on [4, 1024]: " +
          ", ".join(f"{k} {v:.1f} us" for k, v in results["host_overhead_us"].items()))
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
