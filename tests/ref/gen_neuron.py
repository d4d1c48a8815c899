"""Reference fixtures for the neuron kernels (LIF, batch norm, fused BN->LIF), computed in float64 with autograd.

Writes lif.safetensors and bn_lif.safetensors into the directory argv[1]. Every case stores its inputs rounded to
float32 (so C and PyTorch start from the same numbers), its parameters as a float64 vector and the expected outputs.
Inputs are redrawn until no membrane potential lies within MARGIN of a point where the forward or the surrogate
jumps (the threshold, theta_grad, rect's edges): there the float32 kernel and this float64 reference may legitimately
disagree on a spike, so away from them spikes must match exactly."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_io  # noqa: E402

torch.set_default_dtype(torch.float64)
MARGIN = 1e-4
SURROGATES = ["sigmoid", "atan", "fast_sigmoid", "rect"]
DEFAULT_ALPHA = {"sigmoid": 4.0, "atan": 2.0, "fast_sigmoid": 10.0, "rect": 1.0}


def surrogate_grad(kind, alpha, z):
    if kind == "sigmoid":
        sg = torch.sigmoid(alpha * z)
        return alpha * sg * (1 - sg)
    if kind == "atan":
        return (alpha / 2) / (1 + (math.pi / 2 * alpha * z) ** 2)
    if kind == "fast_sigmoid":
        return 1 / (alpha * z.abs() + 1) ** 2
    return torch.where(z.abs() < 0.5 / alpha, torch.full_like(z, alpha), torch.zeros_like(z))


class Spike(torch.autograd.Function):
    """Heaviside(h - theta) with Θ(0) = 1; backward: the surrogate, zero where h < theta_grad if that is on."""

    @staticmethod
    def forward(ctx, h, p):
        ctx.save_for_backward(h)
        ctx.p = p
        return (h - p["v_threshold"] >= 0).to(h.dtype)

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        p = ctx.p
        sg = surrogate_grad(p["surrogate"], p["alpha"], h - p["v_threshold"])
        if p["use_grad_threshold"]:
            sg = sg * (h >= p["grad_threshold"]).to(h.dtype)
        return g * sg, None


def f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def coeffs(p):
    """a and c exactly as the float32 kernels compute them."""
    if p["decay"] > 0:
        a = f32(p["decay"])
    else:
        a = f32(f32(1.0) - f32(1.0 / f32(p["tau"])))
    c = f32(1.0 - a) if p["decay_input"] else 1.0
    return a, c


def lif(p, y):
    """The LIF recurrence over y [T, ...], written plainly; returns spikes and membrane potentials h."""
    a, c = coeffs(p)
    v = torch.full_like(y[0], 0.0 if p["soft_reset"] else p["v_reset"])
    spikes, hs = [], []
    for t in range(y.shape[0]):
        h = a * v + c * y[t]
        s = Spike.apply(h, p)
        r = s.detach() if p["detach_reset"] else s
        v = h - p["v_threshold"] * r if p["soft_reset"] else h * (1 - r) + p["v_reset"] * r
        spikes.append(s)
        hs.append(h)
    return torch.stack(spikes), torch.stack(hs)


def breakpoints(p):
    pts = [p["v_threshold"]]
    if p["use_grad_threshold"]:
        pts.append(p["grad_threshold"])
    if p["surrogate"] == "rect":
        pts += [p["v_threshold"] + 0.5 / p["alpha"], p["v_threshold"] - 0.5 / p["alpha"]]
    return pts


def clear_of_breakpoints(p, h):
    return all(bool(((h - b).abs() >= MARGIN).all()) for b in breakpoints(p))


def param_vector(p):
    return torch.tensor([p["tau"], p["decay"], p["decay_input"], p["v_threshold"], p["v_reset"], p["soft_reset"],
                         p["detach_reset"], SURROGATES.index(p["surrogate"]), p["alpha"], p["use_grad_threshold"],
                         p["grad_threshold"]])


def make_params(**kw):
    p = dict(tau=2.0, decay=0.0, decay_input=1, v_threshold=1.0, v_reset=0.0, soft_reset=0, detach_reset=0,
             surrogate="sigmoid", alpha=None, use_grad_threshold=0, grad_threshold=0.5)
    p.update(kw)
    if p["alpha"] is None:
        p["alpha"] = DEFAULT_ALPHA[p["surrogate"]]
    return p


def randn32(gen, shape, mean=0.0, std=1.0):
    return (torch.randn(shape, generator=gen) * std + mean).float().double()


def lif_case(out, name, p, T, N, seed):
    mean, std = (0.7, 1.0) if p["decay_input"] else (0.35, 0.6)
    for attempt in range(1000):
        gen = torch.Generator().manual_seed(seed * 1000 + attempt)
        x = randn32(gen, (T, N), mean, std).requires_grad_(True)
        ds = randn32(gen, (T, N))
        s, h = lif(p, x)
        if clear_of_breakpoints(p, h.detach()):
            break
    else:
        raise RuntimeError(f"{name}: no input clear of the breakpoints")
    (s * ds).sum().backward()
    out.update({f"{name}.params": param_vector(p), f"{name}.x": x.detach(), f"{name}.ds": ds, f"{name}.s": s.detach(),
                f"{name}.h": h.detach(), f"{name}.dx": x.grad})


def lif_cases():
    out, names = {}, []
    seed = 0
    for surrogate in SURROGATES:
        for soft in (0, 1):
            for detach in (0, 1):
                for decay_input in (0, 1):
                    for gt in (0, 1):
                        names.append(f"c{len(names)}")
                        p = make_params(surrogate=surrogate, soft_reset=soft, detach_reset=detach,
                                        decay_input=decay_input, use_grad_threshold=gt)
                        lif_case(out, names[-1], p, 5, 37, seed)
                        seed += 1
    extra = [
        (make_params(decay=0.8), 6, 41),
        (make_params(decay=0.7, decay_input=0, surrogate="atan"), 6, 41),
        (make_params(v_reset=-0.3, v_threshold=0.8, surrogate="fast_sigmoid"), 7, 33),
        (make_params(tau=3.5, surrogate="rect", alpha=0.7, soft_reset=1), 9, 19),
        (make_params(surrogate="sigmoid", alpha=2.5, use_grad_threshold=1, grad_threshold=0.2), 4, 50),
        (make_params(), 1, 1),
        (make_params(surrogate="atan"), 1, 37),
        (make_params(soft_reset=1), 7, 1),
        (make_params(surrogate="fast_sigmoid", detach_reset=1), 13, 129),
        (make_params(surrogate="rect", use_grad_threshold=1), 3, 200),
        (make_params(detach_reset=1), 8, 1100),                           # more neurons than one kernel block
    ]
    for p, T, N in extra:
        names.append(f"c{len(names)}")
        lif_case(out, names[-1], p, T, N, seed)
        seed += 1
    out["cases"] = torch.tensor([len(names)], dtype=torch.int64)
    return out


def bn_lif_case(out, name, p, shape, seed, eps=1e-5, momentum=0.1):
    """shape = (T, B, C, hw): BN over (T, B, hw) per channel, then LIF over T of the B·C·hw neurons."""
    T, B, C, hw = shape
    for attempt in range(1000):
        gen = torch.Generator().manual_seed(seed * 1000 + attempt)
        ch_mean = randn32(gen, (1, 1, C, 1), 0.0, 2.0)
        ch_std = (torch.rand((1, 1, C, 1), generator=gen) * 2.0 + 0.2).float().double()
        x = (randn32(gen, (T, B, C, hw)) * ch_std + ch_mean).float().double().requires_grad_(True)
        gamma = (torch.rand(C, generator=gen) + 0.5).float().double().requires_grad_(True)
        beta = (torch.rand(C, generator=gen) * 0.6 + 0.3).float().double().requires_grad_(True)
        ds = randn32(gen, (T, B, C, hw))
        mean = x.mean(dim=(0, 1, 3))
        var = x.var(dim=(0, 1, 3), unbiased=False)
        xhat = (x - mean.view(1, 1, C, 1)) / torch.sqrt(var.view(1, 1, C, 1) + eps)
        y = xhat * gamma.view(1, 1, C, 1) + beta.view(1, 1, C, 1)
        s, h = lif(p, y.reshape(T, B * C * hw))
        if clear_of_breakpoints(p, h.detach()):
            break
    else:
        raise RuntimeError(f"{name}: no input clear of the breakpoints")
    (s * ds.reshape(T, -1)).sum().backward()
    n = T * B * hw
    rm0 = randn32(gen, (C,), 0.0, 0.5)
    rv0 = (torch.rand(C, generator=gen) + 0.5).float().double()
    rm = (1 - momentum) * rm0 + momentum * mean.detach()
    rv = (1 - momentum) * rv0 + momentum * var.detach() * n / (n - 1)
    out.update({f"{name}.params": param_vector(p),
                f"{name}.shape": torch.tensor([T, B, C, hw], dtype=torch.int64),
                f"{name}.eps_momentum": torch.tensor([eps, momentum]),
                f"{name}.x": x.detach(), f"{name}.gamma": gamma.detach(), f"{name}.beta": beta.detach(),
                f"{name}.ds": ds, f"{name}.mean": mean.detach(), f"{name}.var": var.detach(),
                f"{name}.y": y.detach(), f"{name}.s": s.detach(), f"{name}.h": h.detach(),
                f"{name}.dx": x.grad, f"{name}.dgamma": gamma.grad, f"{name}.dbeta": beta.grad,
                f"{name}.running_mean0": rm0, f"{name}.running_var0": rv0,
                f"{name}.running_mean": rm, f"{name}.running_var": rv})
    # Plain BN backward for an arbitrary upstream gradient dy (batch statistics).
    xb = x.detach().clone().requires_grad_(True)
    gb = gamma.detach().clone().requires_grad_(True)
    bb = beta.detach().clone().requires_grad_(True)
    mb = xb.mean(dim=(0, 1, 3), keepdim=True)
    vb = xb.var(dim=(0, 1, 3), unbiased=False, keepdim=True)
    yb = (xb - mb) / torch.sqrt(vb + eps) * gb.view(1, 1, C, 1) + bb.view(1, 1, C, 1)
    dy = randn32(gen, (T, B, C, hw))
    (yb * dy).sum().backward()
    out.update({f"{name}.bn_dy": dy, f"{name}.bn_dx": xb.grad, f"{name}.bn_dgamma": gb.grad,
                f"{name}.bn_dbeta": bb.grad})


def bn_lif_cases():
    out, names = {}, []
    cases = [
        (make_params(), (4, 3, 5, 9)),                                   # [T, B, C, H, W] = [4, 3, 5, 3, 3]
        (make_params(surrogate="atan", soft_reset=1, detach_reset=1), (3, 2, 3, 20)),
        (make_params(), (1, 2, 3, 20)),                                  # T = 1
        (make_params(surrogate="fast_sigmoid", decay_input=0), (3, 1, 4, 6)),  # B = 1
        (make_params(), (6, 5, 7, 1)),                                   # 1-D: [T, B, N]
        (make_params(surrogate="rect", use_grad_threshold=1), (2, 2, 3, 81)),  # 9×9 planes cross neuron blocks
        (make_params(decay=0.6), (5, 3, 11, 13)),
        (make_params(), (3, 3, 5, 100)),                                 # 1500 neurons: blocks split channel runs
    ]
    for i, (p, shape) in enumerate(cases):
        names.append(f"b{i}")
        bn_lif_case(out, names[-1], p, shape, 100 + i)
    out["cases"] = torch.tensor([len(names)], dtype=torch.int64)
    return out


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    fixture_io.save(os.path.join(d, "lif.safetensors"), lif_cases())
    fixture_io.save(os.path.join(d, "bn_lif.safetensors"), bn_lif_cases())


if __name__ == "__main__":
    main()
