"""ddp_check.py — spikefuse layers under torch.nn.parallel.DistributedDataParallel: each of the ranks takes its part
of one global batch, and the all-reduced gradients must equal those of one process over the whole batch.

    torchrun --standalone --nproc_per_node=2 python/tests/ddp_check.py [--compile | --network] [--one-gpu]

One GPU per rank (NCCL) where there are enough, else the CPU (gloo), so it also runs on a machine without GPUs;
--one-gpu puts every rank on the first GPU, reduced through gloo (NCCL takes one rank per device): the CUDA backend
under DDP on a host with one GPU.
Needs spikefuse importable (the installed package, or PYTHONPATH=python with SPIKEFUSE_LIBRARY). Exits nonzero
and says which parameter differs when the gradients disagree. The network has no batch norm: DDP normalises each
rank's part with its own statistics (as SpikingJelly and torch do without SyncBatchNorm), which is another
function of the batch. --network runs the same network as one spikefuse.torch.Network (the engine's own forward
and backward) instead of torch layers around spikefuse's neurons."""
import argparse
import os
import sys

import torch
import torch.distributed as dist

from spikefuse.torch import LIF

T, GLOBAL_BATCH, CLASSES = 4, 8, 5


def make_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Flatten(0, 1), torch.nn.Conv2d(2, 8, 3, padding=1), torch.nn.Unflatten(0, (T, -1)),
        LIF(detach_reset=True, keep_state=False), torch.nn.Flatten(2), torch.nn.Linear(8 * 8 * 8, 32),
        LIF(surrogate="atan", keep_state=False), torch.nn.Linear(32, CLASSES))


def make_network(device):
    """make_net's layers as one engine network (its own initialisation, seeded)."""
    from spikefuse.torch.network import Network, layer
    return Network([layer("conv2d", out_channels=8, padding=1), layer("lif", detach_reset=True), layer("flatten"),
                    layer("linear", out_features=32), layer("lif", surrogate="atan"),
                    layer("linear", out_features=CLASSES)], input_shape=(2, 8, 8), device=str(device), seed=0)


def batch():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(T, GLOBAL_BATCH, 2, 8, 8, generator=g) * 2
    return x, torch.randint(0, CLASSES, (GLOBAL_BATCH,), generator=g)


def gradients(net, x, y):
    net.zero_grad()
    torch.nn.functional.cross_entropy(net(x).mean(0), y).backward()
    return [p.grad.detach().clone() for p in net.parameters()]


def compiler_backend(use_cuda):
    """Inductor, except on GPUs without Triton (inductor generates Triton kernels there): AOT autograd then, which
    still traces the ops through their fake kernels and registered autograd."""
    if use_cuda:
        try:
            from torch.utils._triton import has_triton
        except ImportError:
            return "aot_eager"
        return "inductor" if has_triton() else "aot_eager"
    return "inductor"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile as well")
    ap.add_argument("--network", action="store_true", help="the network as one spikefuse.torch.Network")
    ap.add_argument("--one-gpu", action="store_true", help="every rank on cuda:0, reduced through gloo")
    args = ap.parse_args()
    if args.one_gpu and not torch.cuda.is_available():
        raise SystemExit("ddp_check: --one-gpu needs a CUDA device, and torch sees none")
    use_cuda = args.one_gpu or (torch.cuda.is_available() and
                                torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1")))
    dist.init_process_group("gloo" if args.one_gpu or not use_cuda else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"ddp_check: the global batch {GLOBAL_BATCH} does not split over {world} ranks")
    gpu = 0 if args.one_gpu else rank
    device = torch.device(f"cuda:{gpu}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    x, y = (t.to(device) for t in batch())
    build = (lambda: make_network(device)) if args.network else (lambda: make_net().to(device))
    reference = gradients(build(), x, y)  # one process, the whole batch
    net = build()
    ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[gpu] if use_cuda else None)
    model = torch.compile(ddp, backend=compiler_backend(use_cuda)) if args.compile else ddp
    part = GLOBAL_BATCH // world
    sl = slice(rank * part, (rank + 1) * part)
    got = gradients(model, x[:, sl], y[sl])
    worst, name = 0.0, ""
    for (n, _), g, r in zip(net.named_parameters(), got, reference):
        err = ((g - r).abs().max() / r.abs().max().clamp_min(1e-12)).item()
        if err > worst:
            worst, name = err, n
    verdict = torch.tensor([worst], device=device)
    dist.all_reduce(verdict, op=dist.ReduceOp.MAX)
    ok = verdict.item() <= 1e-5
    if rank == 0:
        print(f"ddp_check: {world} ranks on {'one GPU' if args.one_gpu else 'cuda' if use_cuda else 'cpu'}{' (compiled)' if args.compile else ''}{' (Network)' if args.network else ''}, "
              f"torch {torch.__version__}: largest relative gradient difference from one process "
              f"{verdict.item():.2e}{f' ({name} on rank 0)' if name else ''}: {'ok' if ok else 'FAILED'}")
    dist.barrier()  # no rank tears its transport down while another still uses it (gloo aborts otherwise)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
