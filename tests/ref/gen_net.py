"""Whole-network reference fixtures (PyTorch, float64): two small spiking networks, their loss, every parameter
gradient, BN running statistics after one step, and the losses of 10 SGD steps. The C test builds the same
networks layer by layer, loads the same initial parameters and must follow.

net_a: conv -> BN -> LIF -> maxpool -> flatten -> linear -> LIF, mean readout, CE on the T-mean (the issue's net).
net_b: conv -> BN -> LIF -> conv -> BN -> add(LIF output) -> LIF -> avgpool -> flatten -> linear, leaky readout,
       CE at every step; soft reset, atan surrogate, detach_reset (a residual block, unfused BN, shared input).
net_c: T = 1, B = 1, a layer of a single neuron.
net_d: conv -> BN -> LIF -> strided conv -> BN -> LIF -> flatten -> linear: W3's block, where the second conv is the
       only reader of the spikes (the engine rebuilds them in their gradient's buffer).
net_plif, net_alif: the other neuron models in networks, a PLIF's w learned with the weights.
net_sj: SpikingJelly's conv_fashion_mnist network (IF neurons, no biases), small, with the MSE on the firing rate."""
import math
import os
import sys

import torch
import torch.nn.functional as F

from fixture_io import save
from neuron_reference import alif, leaky_readout, lif, lif_node, plif_coeffs

torch.set_default_dtype(torch.float64)


def per_image(f, x):
    """Applies an image op to [T, B, C, H, W] with T and B folded."""
    T, B = x.shape[:2]
    y = f(x.reshape(T * B, *x.shape[2:]))
    return y.reshape(T, B, *y.shape[1:])


def bn(x, p, name, state):
    return per_image(lambda z: F.batch_norm(z, state[name + ".running_mean"], state[name + ".running_var"],
                                            p[name + ".weight"], p[name + ".bias"], True, 0.1, 1e-5), x)


def uniform(shape, bound, g):
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


def init(specs, g):
    """PyTorch-default-like initial parameters; BN affine perturbed so the test exercises gamma and beta."""
    p = {}
    for name, kind, shape in specs:
        if kind == "w":
            fan_in = math.prod(shape[1:])
            p[name + ".weight"] = uniform(shape, 1 / math.sqrt(fan_in), g)
            p[name + ".bias"] = uniform(shape[:1], 1 / math.sqrt(fan_in), g)
        elif kind == "w0":  # no bias
            p[name + ".weight"] = uniform(shape, 1 / math.sqrt(math.prod(shape[1:])), g)
        elif kind == "plif":  # w near -ln(tau - 1) = 0 (tau = 2), channels apart
            p[name + ".w"] = 0.4 * torch.randn(shape, generator=g)
        else:
            p[name + ".weight"] = 1 + 0.2 * torch.randn(shape, generator=g)
            p[name + ".bias"] = 0.2 * torch.randn(shape, generator=g)
    return p


def net_a(x, p, state):
    y = per_image(lambda z: F.conv2d(z, p["0.weight"], p["0.bias"], padding=1), x)
    s = lif_node(bn(y, p, "1", state))
    s = per_image(lambda z: F.max_pool2d(z, 2), s)
    s = s.flatten(2)
    o = lif_node(s @ p["5.weight"].T + p["5.bias"])
    return o  # mean readout: r = o


def net_b(x, p, state):
    cfg = dict(v_reset=None, detach_reset=True, surrogate="atan", alpha=2.0)
    y = per_image(lambda z: F.conv2d(z, p["0.weight"], p["0.bias"], padding=1), x)
    s3 = lif_node(bn(y, p, "1", state), **cfg)
    y = per_image(lambda z: F.conv2d(z, p["3.weight"], p["3.bias"], padding=1), s3)
    s = lif_node(bn(y, p, "4", state) + s3, **cfg)
    s = per_image(lambda z: F.avg_pool2d(z, 2), s).flatten(2)
    o = s @ p["9.weight"].T + p["9.bias"]
    a = 1 - 1 / 2.0  # leaky readout, tau = 2
    return leaky_readout(o, a, 1 - a)


def net_c(x, p, state):
    """Awkward shapes: T = 1, B = 1, a layer of a single neuron."""
    s = lif_node(x.flatten(2) @ p["0.weight"].T + p["0.bias"])
    return s @ p["2.weight"].T + p["2.bias"]


def plif_node(x, w, **kw):
    """A PLIF layer over x [T, B, C, ...]: w is [1] or, per channel, [C]."""
    a, c = plif_coeffs(w.view(-1, *([1] * (x.dim() - 3))) if w.numel() > 1 else w, kw.pop("decay_input", True))
    return lif(x, a, c, **kw)[0]


def net_plif(x, p, state):
    """conv -> BN -> PLIF (w per channel) -> maxpool -> flatten -> linear -> PLIF (one w; soft reset, atan)."""
    y = per_image(lambda z: F.conv2d(z, p["0.weight"], p["0.bias"], padding=1), x)
    s = plif_node(bn(y, p, "1", state), p["2.w"])
    s = per_image(lambda z: F.max_pool2d(z, 2), s).flatten(2)
    return plif_node(s @ p["5.weight"].T + p["5.bias"], p["6.w"], soft_reset=True, surrogate="atan", alpha=2.0)


def net_alif(x, p, state):
    """linear -> ALIF (soft reset, rho 0.9, beta 0.5) -> linear -> IF (hard reset to -0.1) -> linear; leaky
    readout (tau 2)."""
    y = x.flatten(2) @ p["0.weight"].T + p["0.bias"]
    a = 1 - 1 / 2.0
    s = alif(y, a, 1 - a, 1.0, 0.5, 0.9, soft_reset=True)[0]
    s = lif(s @ p["2.weight"].T + p["2.bias"], 1.0, 1.0, v_reset=-0.1)[0]
    o = s @ p["4.weight"].T + p["4.bias"]
    return leaky_readout(o, a, 1 - a)


def if_node(x):
    """SpikingJelly's IFNode(surrogate_function=ATan()): no leak, hard reset to 0."""
    return lif(x, 1.0, 1.0, surrogate="atan", alpha=2.0)[0]


def net_sj(x, p, state):
    """SpikingJelly's conv_fashion_mnist network, small: (conv 3x3 no bias -> BN -> IF -> maxpool) twice -> flatten
    -> linear (no bias) -> IF -> linear (no bias) -> IF; its loss is mse_rate."""
    s = x
    for conv, norm in (("0", "1"), ("4", "5")):
        y = per_image(lambda z: F.conv2d(z, p[conv + ".weight"], padding=1), s)
        s = per_image(lambda z: F.max_pool2d(z, 2), if_node(bn(y, p, norm, state)))
    s = if_node(s.flatten(2) @ p["9.weight"].T)
    return if_node(s @ p["11.weight"].T)


def mse_rate(r, labels):
    return F.mse_loss(r.mean(0), F.one_hot(labels, r.shape[-1]).to(r.dtype))
def net_d(x, p, state):
    y = per_image(lambda z: F.conv2d(z, p["0.weight"], p["0.bias"], padding=1), x)
    s = lif_node(bn(y, p, "1", state))
    y = per_image(lambda z: F.conv2d(z, p["3.weight"], p["3.bias"], stride=2, padding=1), s)
    s = lif_node(bn(y, p, "4", state)).flatten(2)
    return s @ p["7.weight"].T + p["7.bias"]


def ce_mean(r, labels):
    return F.cross_entropy(r.mean(0), labels)


def ce_per_step(r, labels):
    return sum(F.cross_entropy(r[t], labels) for t in range(r.shape[0])) / r.shape[0]


def make_state(p):
    state = {}
    for k, v in p.items():
        if k.endswith(".weight") and v.dim() == 1:
            base = k[: -len(".weight")]
            state[base + ".running_mean"] = torch.zeros_like(v)
            state[base + ".running_var"] = torch.ones_like(v)
    return state


def write(out, name, fwd, lossf, specs, xshape, classes, gain, lr, momentum, wd, seed):
    g = torch.Generator().manual_seed(seed)
    p = init(specs, g)
    x = gain * torch.randn(xshape, generator=g) + 0.3
    labels = torch.randint(0, classes, (xshape[1],), generator=g)
    tensors = {"x": x, "labels": labels.to(torch.int32)}
    tensors.update({k: v.clone() for k, v in p.items()})

    # One forward/backward: loss, gradients, running statistics.
    params = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    state = make_state(p)
    loss = lossf(fwd(x, params, state), labels)
    loss.backward()
    tensors["loss"] = loss.detach().reshape(1)
    tensors.update({k + ".grad": v.grad for k, v in params.items()})
    tensors.update({k + ".after1": v for k, v in state.items()})

    # Ten SGD steps (momentum, weight decay) on the same batch.
    params = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    state = make_state(p)
    opt = torch.optim.SGD(params.values(), lr=lr, momentum=momentum, weight_decay=wd)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = lossf(fwd(x, params, state), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tensors["losses"] = torch.tensor(losses)
    save(os.path.join(out, f"{name}.safetensors"), tensors,
         {"lr": lr, "momentum": momentum, "weight_decay": wd})


def main():
    out = sys.argv[1]
    write(out, "net_a", net_a, ce_mean,
          [("0", "w", (4, 2, 3, 3)), ("1", "bn", (4,)), ("5", "w", (5, 4 * 4 * 4))],
          (4, 3, 2, 8, 8), 5, 1.5, 0.5, 0.9, 1e-3, 1)
    write(out, "net_b", net_b, ce_per_step,
          [("0", "w", (4, 3, 3, 3)), ("1", "bn", (4,)), ("3", "w", (4, 4, 3, 3)), ("4", "bn", (4,)),
           ("9", "w", (6, 4 * 3 * 3))],
          (3, 2, 3, 6, 6), 6, 1.5, 0.2, 0.9, 0.0, 2)
    write(out, "net_c", net_c, ce_mean, [("0", "w", (1, 5)), ("2", "w", (3, 1))], (1, 1, 5, 1, 1), 3, 3.0, 0.5,
          0.0, 0.0, 3)
    write(out, "net_plif", net_plif, ce_mean,
          [("0", "w", (4, 2, 3, 3)), ("1", "bn", (4,)), ("2", "plif", (4,)), ("5", "w", (6, 4 * 3 * 3)),
           ("6", "plif", (1,))],
          (4, 3, 2, 6, 6), 6, 1.5, 0.5, 0.9, 1e-3, 4)
    write(out, "net_sj", net_sj, mse_rate,
          [("0", "w0", (4, 1, 3, 3)), ("1", "bn", (4,)), ("4", "w0", (4, 4, 3, 3)), ("5", "bn", (4,)),
           ("9", "w0", (8, 4 * 2 * 2)), ("11", "w0", (5, 8))],
          (4, 3, 1, 8, 8), 5, 1.5, 0.5, 0.9, 0.0, 6)
    write(out, "net_alif", net_alif, ce_per_step,
          [("0", "w", (10, 12)), ("2", "w", (8, 10)), ("4", "w", (4, 8))], (6, 3, 12, 1, 1), 4, 1.5, 0.5, 0.9,
          0.0, 5)
    write(out, "net_d", net_d, ce_mean,
          [("0", "w", (4, 2, 3, 3)), ("1", "bn", (4,)), ("3", "w", (4, 4, 3, 3)), ("4", "bn", (4,)),
           ("7", "w", (5, 4 * 4 * 4))],
          (3, 2, 2, 8, 8), 5, 1.5, 0.5, 0.9, 0.0, 4)


if __name__ == "__main__":
    main()
