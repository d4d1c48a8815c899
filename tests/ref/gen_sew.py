"""SEW-ResNet reference fixtures (PyTorch, float64; Fang et al. 2021, "Deep Residual Learning in Spiking Neural
Networks").

sew_connect: the connect functions g(a, b) on their own, a the residual branch's output A, b the shortcut S: ADD
a + b, AND a·b, IAND (1 - a)·b (the paper's IAND(A, S) = ¬A ∧ S; SpikingJelly's sew_function(identity, out) in its
BasicBlock). Inputs of spikes and of real values, with their outputs and autograd's gradients for a random dy.

sew_<connect>: a small SEW-ResNet, end to end: a stem conv -> BN -> IF, a basic block without downsampling
(conv -> BN -> IF -> conv -> BN -> IF, then g with the block's input), a basic block with SEW's downsampling
shortcut (conv 1x1 stride 2 -> BN -> IF) beside its strided branch, a global average pool and a linear layer; IF
neurons with the ATan surrogate (alpha 2) and detach_reset, as SEW-ResNet trains on ImageNet. Loss, every gradient,
BN running statistics after one step, and the losses of 10 SGD steps, in gen_net.py's format."""
import os
import sys

import torch
import torch.nn.functional as F

from fixture_io import save
from gen_net import bn, ce_mean, per_image, write
from neuron_reference import lif

torch.set_default_dtype(torch.float64)


def connect(name, a, b):
    if name == "add":
        return a + b
    if name == "and":
        return a * b
    return (1.0 - a) * b  # iand: b where a is silent


def write_connect(out):
    g = torch.Generator().manual_seed(11)
    n = 97
    inputs = {"spikes": ((torch.rand(n, generator=g) < 0.4).double(), (torch.rand(n, generator=g) < 0.6).double()),
              "real": (torch.randn(n, generator=g).float().double(), torch.randn(n, generator=g).float().double())}
    dy = torch.randn(n, generator=g).float().double()
    tensors = {"dy": dy}
    for kind, (a0, b0) in inputs.items():
        tensors[f"{kind}.a"], tensors[f"{kind}.b"] = a0, b0
        for name in ("add", "and", "iand"):
            a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
            y = connect(name, a, b)
            y.backward(dy)
            tensors[f"{kind}.{name}.y"] = y.detach()
            tensors[f"{kind}.{name}.da"] = a.grad
            tensors[f"{kind}.{name}.db"] = b.grad
    save(os.path.join(out, "sew_connect.safetensors"), tensors)


def if_atan(x):
    """SpikingJelly's IFNode(surrogate_function=ATan(), detach_reset=True): no leak, hard reset to 0."""
    return lif(x, 1.0, 1.0, surrogate="atan", alpha=2.0, detach_reset=True)[0]


def conv(p, name, x, stride=1, pad=1):
    return per_image(lambda z: F.conv2d(z, p[name + ".weight"], stride=stride, padding=pad), x)


def sew_net(cnf):
    """The layers as the C test numbers them: 0-2 stem, 3-9 the first block (9: g), 10-12 the downsampling
    shortcut, 13-19 the second block's branch and g, 20 avgpool, 21 flatten, 22 linear."""
    def fwd(x, p, state):
        s = if_atan(bn(conv(p, "0", x), p, "1", state))
        a = if_atan(bn(conv(p, "3", s), p, "4", state))
        a = if_atan(bn(conv(p, "6", a), p, "7", state))
        s = connect(cnf, a, s)
        shortcut = if_atan(bn(conv(p, "10", s, stride=2, pad=0), p, "11", state))
        a = if_atan(bn(conv(p, "13", s, stride=2), p, "14", state))
        a = if_atan(bn(conv(p, "16", a), p, "17", state))
        s = connect(cnf, a, shortcut)
        s = per_image(lambda z: F.avg_pool2d(z, 4), s).flatten(2)
        return s @ p["22.weight"].T + p["22.bias"]
    return fwd


SEW_SPECS = [("0", "w0", (4, 3, 3, 3)), ("1", "bn", (4,)), ("3", "w0", (4, 4, 3, 3)), ("4", "bn", (4,)),
             ("6", "w0", (4, 4, 3, 3)), ("7", "bn", (4,)), ("10", "w0", (6, 4, 1, 1)), ("11", "bn", (6,)),
             ("13", "w0", (6, 4, 3, 3)), ("14", "bn", (6,)), ("16", "w0", (6, 6, 3, 3)), ("17", "bn", (6,)),
             ("22", "w", (5, 6))]


def main():
    out = sys.argv[1]
    write_connect(out)
    for seed, cnf in ((21, "add"), (22, "and"), (23, "iand")):
        write(out, f"sew_{cnf}", sew_net(cnf), ce_mean, SEW_SPECS, (3, 2, 3, 8, 8), 5, 1.5, 0.5, 0.9, 0.0, seed)


if __name__ == "__main__":
    main()
