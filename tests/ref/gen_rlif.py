"""Recurrent-layer reference fixtures (PyTorch, float64): small networks with spikefuse's rlif layer, their loss,
every parameter gradient (BPTT through the recurrence) and the losses of 10 SGD steps. tests/test_rlif.c builds the
same networks, loads the same parameters and must follow, with the recurrence run dense and event-driven.

rlif_a: linear -> rlif (hard reset, detach_reset, fast_sigmoid) -> linear, mean readout, CE on the T-mean.
rlif_b: linear -> rlif (soft reset, sigmoid, grad_threshold 0.3) -> linear.
rlif_c: rlif on the network input (no gradient below it), atan -> linear; T = 4, B = 2.
rlif_d: T = 1, B = 1: the recurrence never acts.
rlif_e: linear -> rlif (grad_threshold 0.5 with grad_cut) -> linear -> lif (the same) -> linear: the sparse gradient."""
import math
import os
import sys

import torch
import torch.nn.functional as F

from fixture_io import save
from neuron_reference import lif, rlif

torch.set_default_dtype(torch.float64)


def uniform(shape, bound, g):
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


def make(specs, g, gain):
    """PyTorch-default-like parameters (Linear: U(±1/√fan_in) for weight and bias; rlif V likewise, no bias),
    times `gain` so that the layers fire, rounded to float32 as the C side holds them."""
    p = {}
    for name, shape, bias in specs:
        bound = 1 / math.sqrt(shape[1])
        p[name + ".weight"] = (gain * uniform(shape, bound, g)).float().double()
        if bias:
            p[name + ".bias"] = (gain * uniform(shape[:1], bound, g)).float().double()
    return p


NEURONS = {
    "rlif_a": dict(a=0.5, c=0.5, detach_reset=True, surrogate="fast_sigmoid", alpha=10.0),
    "rlif_b": dict(a=0.5, c=0.5, soft_reset=True, surrogate="sigmoid", alpha=4.0, grad_threshold=0.3),
    "rlif_c": dict(a=0.75, c=0.25, surrogate="atan", alpha=2.0),
    "rlif_d": dict(a=0.5, c=0.5, detach_reset=True, surrogate="fast_sigmoid", alpha=10.0),
    "rlif_e": dict(a=0.5, c=0.5, detach_reset=True, surrogate="fast_sigmoid", alpha=10.0, grad_threshold=0.5,
                   grad_cut=True),
}


def forward(name, x, p):
    kw = NEURONS[name]
    if name == "rlif_c":
        s, _ = rlif(x, p["0.weight"], **kw)
        return s @ p["1.weight"].T + p["1.bias"]
    if name == "rlif_e":
        s, _ = rlif(x @ p["0.weight"].T + p["0.bias"], p["1.weight"], **kw)
        s, _ = lif(s @ p["2.weight"].T + p["2.bias"], **kw)
        return s @ p["4.weight"].T + p["4.bias"]
    y = x @ p["0.weight"].T + p["0.bias"]
    s, _ = rlif(y, p["1.weight"], **kw)
    return s @ p["2.weight"].T + p["2.bias"]


def write(out, name, specs, xshape, classes, gain, lr, seed):
    g = torch.Generator().manual_seed(seed)
    p = make(specs, g, gain)
    x = (2.0 * torch.randn(xshape, generator=g) + 0.5).float().double()
    labels = torch.randint(0, classes, (xshape[1],), generator=g)
    tensors = {"x": x, "labels": labels.to(torch.int32)}
    tensors.update({k: v.clone() for k, v in p.items()})
    params = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    r = forward(name, x, params)
    loss = F.cross_entropy(r.mean(0), labels)
    loss.backward()
    tensors["loss"] = loss.detach().reshape(1)
    tensors.update({k + ".grad": v.grad for k, v in params.items()})
    params = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    opt = torch.optim.SGD(params.values(), lr=lr)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = F.cross_entropy(forward(name, x, params).mean(0), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tensors["losses"] = torch.tensor(losses)
    save(os.path.join(out, f"{name}.safetensors"), tensors, {"lr": lr})


def main():
    out = sys.argv[1]
    write(out, "rlif_a", [("0", (24, 10), True), ("1", (24, 24), False), ("2", (5, 24), True)], (6, 3, 10), 5, 2.0,
          0.5, 1)
    write(out, "rlif_b", [("0", (16, 10), True), ("1", (16, 16), False), ("2", (4, 16), True)], (5, 2, 10), 4, 2.0,
          0.5, 2)
    write(out, "rlif_c", [("0", (12, 12), False), ("1", (3, 12), True)], (4, 2, 12), 3, 1.5, 0.5, 3)
    write(out, "rlif_d", [("0", (7, 5), True), ("1", (7, 7), False), ("2", (3, 7), True)], (1, 1, 5), 3, 2.0, 0.5, 4)
    write(out, "rlif_e", [("0", (20, 10), True), ("1", (20, 20), False), ("2", (18, 20), True), ("4", (4, 18), True)],
          (6, 3, 10), 4, 2.5, 0.5, 5)


if __name__ == "__main__":
    main()
