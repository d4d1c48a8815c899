"""bench_w12_host.py — where the host time of W12's step goes (bench_w12.py's W3 net trained from Python through a
spikefuse.torch.Network), and how much of it torch's own step takes.

Usage: python3 bench_w12_host.py [--steps 30] [--precisions bf16 fp32] [--device cuda]
Per precision: the mean host time per step of its parts (zero_grad, forward, loss, backward, optimizer step; within
them the engine's calls and the Network's own steps), each step started on an idle queue so that nothing waits for
the card. Then the bound: the same step with the engine's calls replaced by an autograd Function that returns ready
tensors over the same parameters (torch's autograd, cross-entropy and SGD alone), with foreach and fused SGD; the
median host time per step of each."""
import argparse
import collections
import statistics
import time

import torch

from bench_w12 import B, CLASSES, CONFIG, T
from spikefuse import _engine
from spikefuse.torch import Network
from spikefuse.torch import network as network_module

ENGINE_CALLS = ("forward", "backward", "params_changed", "compile", "stream")
NETWORK_STEPS = ("_check_input", "_run_forward", "_run_backward", "_sync_in", "_sync_out", "_copied_grads")


class Parts:
    """Host seconds per named part, accumulated."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)

    def time(self, name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        self.seconds[name] += time.perf_counter() - t0
        return out

    def wrap(self, owner, attr, name):
        """owner.attr timed under name from now on."""
        fn = getattr(owner, attr)
        setattr(owner, attr, lambda *a, **k: self.time(name, lambda: fn(*a, **k)))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_by_parts(parts, net, opt, x, labels):
    parts.time("zero_grad", lambda: opt.zero_grad(set_to_none=True))
    y = parts.time("forward", net, x)
    loss = parts.time("loss", lambda: torch.nn.functional.cross_entropy(y.mean(0), labels))
    parts.time("backward", loss.backward)
    parts.time("optimizer step", opt.step)


def by_parts(parts, precision, device, steps):
    torch.manual_seed(0)
    net = Network(CONFIG, device=str(device), precision=precision, memory="recompute")
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(B, 3, 32, 32, device=device).unsqueeze(0).repeat(T, 1, 1, 1, 1)
    labels = torch.randint(0, CLASSES, (B,), device=device)
    for _ in range(5):  # plans, cuDNN choices, recordings, optimizer state
        step_by_parts(parts, net, opt, x, labels)
    sync(device)
    parts.seconds.clear()
    total = 0.0
    for _ in range(steps):
        sync(device)
        t0 = time.perf_counter()
        step_by_parts(parts, net, opt, x, labels)
        total += time.perf_counter() - t0
    sync(device)
    print(f"== {precision}: host {1e3 * total / steps:.3f} ms per step", flush=True)
    for name, s in sorted(parts.seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28s} {1e3 * s / steps:8.3f} ms")
    return net


class ReadyTensors(torch.autograd.Function):
    """The Network's autograd node without the engine: an output and one gradient copy over the same parameters."""

    @staticmethod
    def forward(ctx, net, x, *params):
        ctx.net = net
        return torch.empty((T, B, CLASSES), device=x.device)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        return (None, None) + ctx.net._copied_grads([True] * len(ctx.net._params))


def torch_alone(net, device, steps):
    params = list(net.parameters())
    x = torch.rand(T, B, 3, 32, 32, device=device)
    labels = torch.randint(0, CLASSES, (B,), device=device)
    for fused in (False, True):
        if fused and device.type != "cuda":
            continue
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, **({"fused": True} if fused else {}))

        def step():
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(ReadyTensors.apply(net, x, *params).mean(0), labels).backward()
            opt.step()

        for _ in range(5):
            step()
        host = []
        for _ in range(steps):
            sync(device)
            t0 = time.perf_counter()
            step()
            host.append(time.perf_counter() - t0)
        sync(device)
        print(f"== torch alone over the same {len(params)} parameters, SGD {'fused' if fused else 'foreach'}: host "
              f"{1e3 * statistics.median(host):.3f} ms per step (median)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--precisions", nargs="+", default=["bf16", "fp32"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    device = torch.device(args.device)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    parts = Parts()
    for attr in ENGINE_CALLS:
        parts.wrap(_engine.Engine, attr, "  engine." + attr)
    for attr in NETWORK_STEPS:
        parts.wrap(network_module.Network, attr, "  Network." + attr)
    net = None
    for p in args.precisions:
        net = by_parts(parts, p, device, args.steps)
    torch_alone(net, device, args.steps)


if __name__ == "__main__":
    main()
