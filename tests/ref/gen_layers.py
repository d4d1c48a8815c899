"""Reference fixtures for the non-neuron layers (PyTorch, float64): linear, conv2d, avg/max pooling, the leaky
readout, both softmax cross-entropy losses, and 10-step trajectories of SGD, Adam and AdamW.
Inputs are drawn in float32 and widened, so the C side sees exactly the values the reference used.
Usage: gen_layers.py OUTDIR"""
import os
import sys

import torch
import torch.nn.functional as F

from fixture_io import f32, randn32, save
from neuron_reference import leaky_readout

torch.manual_seed(1234)


def cfg(*values):
    return torch.tensor(values, dtype=torch.float64)


def linear_cases():
    out = {}
    # rows, in, out, bias: ordinary, a single neuron and row, no bias, more than one 64-column block of the bias sum
    cases = [(6, 5, 3, 1), (1, 7, 1, 1), (13, 33, 17, 0), (200, 70, 130, 1)]
    for i, (rows, fin, fout, bias) in enumerate(cases):
        x = randn32((rows, fin)).requires_grad_()
        lin = torch.nn.Linear(fin, fout, bias=bool(bias)).double()
        with torch.no_grad():
            lin.weight.copy_(lin.weight.float().double())
            if bias:
                lin.bias.copy_(randn32((fout,)))
        y = lin(x)
        dy = randn32((rows, fout))
        y.backward(dy)
        p = f"lin{i}."
        out.update({p + "cfg": cfg(rows, fin, fout, bias), p + "x": x, p + "w": lin.weight, p + "dy": dy, p + "y": y,
                    p + "dx": x.grad, p + "dw": lin.weight.grad})
        if bias:
            out.update({p + "b": lin.bias, p + "db": lin.bias.grad})
    out["count"] = cfg(len(cases))
    return out


def conv_cases():
    out = {}
    # n, cin, h, w, cout, k, stride, pad, bias
    cases = [
        (3, 3, 7, 5, 4, 3, 1, 1, 1),    # odd sizes, same padding
        (2, 5, 9, 8, 3, 3, 2, 1, 1),    # stride 2 on odd and even sides
        (1, 1, 1, 1, 2, 1, 1, 0, 1),    # 1×1 image, 1×1 kernel, batch 1
        (1, 3, 1, 1, 2, 3, 1, 1, 0),    # 1×1 image seen through a padded 3×3 kernel
        (2, 3, 6, 7, 5, 5, 2, 2, 0),    # 5×5 kernel, no bias
        (4, 2, 5, 5, 3, 3, 3, 0, 1),    # stride 3, no padding
        (2, 4, 4, 4, 3, 1, 2, 0, 1),    # 1×1 kernel, stride 2
        (10, 32, 32, 32, 8, 3, 1, 1, 1),  # more images than one chunk of scratch: chunks of 3, 3, 3 and 1 image
    ]
    for i, (n, cin, h, w, cout, k, s, pad, bias) in enumerate(cases):
        x = randn32((n, cin, h, w)).requires_grad_()
        wt = randn32((cout, cin, k, k), std=(cin * k * k) ** -0.5).requires_grad_()
        b = randn32((cout,)).requires_grad_() if bias else None
        y = F.conv2d(x, wt, b, stride=s, padding=pad)
        dy = randn32(y.shape)
        y.backward(dy)
        p = f"conv{i}."
        out.update({p + "cfg": cfg(n, cin, h, w, cout, k, s, pad, bias, y.shape[2], y.shape[3]), p + "x": x,
                    p + "w": wt, p + "dy": dy, p + "y": y, p + "dx": x.grad, p + "dw": wt.grad})
        if bias:
            out.update({p + "b": b, p + "db": b.grad})
    out["count"] = cfg(len(cases))
    return out


def pool_cases():
    out = {}
    # planes, h, w, k, stride, pad: non-overlapping, overlapping on odd sizes, 1×1, overlapping stride 1; with a
    # border: SpikingJelly's ResNet stem (3, 2, 1) on even and odd sizes, and a 2×2 window overhanging by 1
    cases = [(6, 6, 6, 2, 2, 0), (3, 7, 5, 3, 2, 0), (2, 1, 1, 1, 1, 0), (4, 5, 5, 3, 1, 0), (5, 9, 4, 2, 2, 0),
             (3, 8, 8, 3, 2, 1), (2, 7, 5, 3, 2, 1), (2, 5, 4, 2, 1, 1)]
    for i, (n, h, w, k, s, pad) in enumerate(cases):
        for kind, fn in (("avg", F.avg_pool2d), ("max", F.max_pool2d)):
            x = randn32((n, 1, h, w)).requires_grad_()
            y = fn(x, k, s, pad)
            dy = randn32(y.shape)
            y.backward(dy)
            p = f"{kind}{i}."
            out.update({p + "cfg": cfg(n, h, w, k, s, y.shape[2], y.shape[3], pad), p + "x": x, p + "dy": dy,
                        p + "y": y, p + "dx": x.grad})
    out["count"] = cfg(len(cases))
    return out


def loss_cases():
    out = {}
    # T, B, K, per_step, label smoothing
    cases = [(4, 5, 3, 0, 0), (4, 5, 3, 1, 0), (1, 1, 2, 0, 0), (1, 1, 2, 1, 0), (3, 7, 10, 0, 0), (3, 7, 10, 1, 0),
             (6, 2, 1, 1, 0), (4, 5, 3, 0, 0.1), (3, 7, 10, 1, 0.25), (2, 3, 4, 0, 1.0), (1, 2, 1, 0, 0.5)]
    for i, (T, B, K, per_step, eps) in enumerate(cases):
        eps = f32(eps)
        r = randn32((T, B, K), std=3.0).requires_grad_()
        labels = torch.randint(0, K, (B,), dtype=torch.int64)
        mean = r.mean(0)
        if per_step:
            loss = F.cross_entropy(r.reshape(T * B, K), labels.repeat(T), label_smoothing=eps)
        else:
            loss = F.cross_entropy(mean, labels, label_smoothing=eps)
        loss.backward()
        correct = (mean.argmax(1) == labels).sum()
        p = f"xent{i}."
        out.update({p + "cfg": cfg(T, B, K, per_step, eps), p + "r": r, p + "labels": labels.int(), p + "loss": loss,
                    p + "dr": r.grad, p + "mean": mean, p + "correct": correct.double()})
    out["count"] = cfg(len(cases))
    # MSE between the T-mean (firing rate) and the one-hot label: T, B, K (r as spikes, and as any numbers)
    mse = [(4, 5, 3, 1), (1, 1, 2, 0), (3, 7, 10, 1), (5, 2, 1, 0)]
    for i, (T, B, K, spikes) in enumerate(mse):
        r = (torch.rand((T, B, K)) < 0.4).double() if spikes else randn32((T, B, K))
        r.requires_grad_()
        labels = torch.randint(0, K, (B,), dtype=torch.int64)
        mean = r.mean(0)
        loss = F.mse_loss(mean, F.one_hot(labels, K).double())
        loss.backward()
        correct = (mean.argmax(1) == labels).sum()
        p = f"mse{i}."
        out.update({p + "cfg": cfg(T, B, K), p + "r": r, p + "labels": labels.int(), p + "loss": loss, p + "dr": r.grad,
                    p + "mean": mean, p + "correct": correct.double()})
    out["mse_count"] = cfg(len(mse))
    # leaky readout r_t = a·r_{t-1} + c·o_t: T, n, a, c
    leaky = [(5, 7, 0.8, 0.2), (1, 3, 0.5, 1.0), (9, 33, 0.95, 1.0)]
    for i, (T, n, a, c) in enumerate(leaky):
        a, c = f32(a), f32(c)
        o = randn32((T, n)).requires_grad_()
        r = leaky_readout(o, a, c)
        dr = randn32((T, n))
        r.backward(dr)
        p = f"leaky{i}."
        out.update({p + "cfg": cfg(T, n, a, c), p + "o": o, p + "r": r, p + "dr": dr, p + "do": o.grad})
    out["leaky_count"] = cfg(len(leaky))
    return out


def optim_cases():
    """10 steps on 0.5·Σ d_i (p_i - c_i)², whose gradient d·(p - c) the C test recomputes from its own p."""
    out = {}
    n = 37
    d = (torch.rand(n) * 2 + 0.1).float().double()
    c = randn32((n,))
    p0 = randn32((n,))
    out.update({"d": d, "c": c, "p0": p0})
    # kind (0 sgd, 1 adam, 2 adamw), lr, momentum, nesterov, weight_decay, beta1, beta2, eps
    cases = [
        (0, 0.1, 0.0, 0, 0.0, 0, 0, 0),
        (0, 0.1, 0.9, 0, 0.0, 0, 0, 0),
        (0, 0.05, 0.9, 1, 0.01, 0, 0, 0),
        (0, 0.1, 0.5, 0, 0.1, 0, 0, 0),
        (1, 0.01, 0, 0, 0.0, 0.9, 0.999, 1e-8),
        (1, 0.05, 0, 0, 0.1, 0.8, 0.99, 1e-6),
        (2, 0.01, 0, 0, 0.01, 0.9, 0.999, 1e-8),
        (2, 0.1, 0, 0, 0.5, 0.85, 0.95, 1e-4),
    ]
    for i, (kind, lr, mom, nest, wd, b1, b2, eps) in enumerate(cases):
        # hyper-parameters as the C side will hold them (float32)
        lr, mom, wd, b1, b2, eps = (f32(v) for v in (lr, mom, wd, b1, b2, eps))
        p = p0.clone().requires_grad_()
        if kind == 0:
            opt = torch.optim.SGD([p], lr=lr, momentum=mom, nesterov=bool(nest), weight_decay=wd)
        elif kind == 1:
            opt = torch.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
        else:
            opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
        traj = [p.detach().clone()]
        for _ in range(10):
            opt.zero_grad()
            (0.5 * (d * (p - c) ** 2).sum()).backward()
            opt.step()
            traj.append(p.detach().clone())
        out.update({f"opt{i}.cfg": cfg(kind, lr, mom, nest, wd, b1, b2, eps), f"opt{i}.traj": torch.stack(traj)})
    out["count"] = cfg(len(cases))
    return out


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name, fn in (("layers_linear", linear_cases), ("layers_conv", conv_cases), ("layers_pool", pool_cases),
                     ("layers_loss", loss_cases), ("layers_optim", optim_cases)):
        save(os.path.join(outdir, name + ".safetensors"), fn())


if __name__ == "__main__":
    main()
