"""Reference fixtures for the neuron kernels (LIF, batch norm, fused BN->LIF), computed in float64 with autograd.

Writes lif.safetensors and bn_lif.safetensors into the directory argv[1]. Every case stores its inputs rounded to
float32 (so C and PyTorch start from the same numbers), its parameters as a float64 vector and the expected outputs.
Inputs are redrawn until no membrane potential lies within MARGIN of a point where the forward or the surrogate
jumps (the threshold, theta_grad, rect's edges): there the float32 kernel and this float64 reference may legitimately
disagree on a spike, so away from them spikes must match exactly."""
import os
import sys

import torch

import neuron_reference
from fixture_io import f32, randn32, save
from neuron_reference import DEFAULT_ALPHA, SURROGATES

torch.set_default_dtype(torch.float64)
MARGIN = 1e-4


def coeffs(p):
    """a and c exactly as the float32 kernels compute them."""
    if p["decay"] > 0:
        a = f32(p["decay"])
    else:
        a = f32(f32(1.0) - f32(1.0 / f32(p["tau"])))
    c = f32(1.0 - a) if p["decay_input"] else 1.0
    return a, c


def lif(p, y):
    """The LIF recurrence over y [T, ...] with the kernels' coefficients; returns spikes and membrane potentials h."""
    a, c = coeffs(p)
    return neuron_reference.lif(y, a, c, p["v_threshold"], p["v_reset"], p["soft_reset"], p["detach_reset"],
                                p["surrogate"], p["alpha"], p["grad_threshold"] if p["use_grad_threshold"] else None)


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


def lif_case(out, name, p, T, N, seed):
    mean, std = (0.7, 1.0) if p["decay_input"] else (0.35, 0.6)
    for attempt in range(1000):
        gen = torch.Generator().manual_seed(seed * 1000 + attempt)
        x = randn32((T, N), gen, mean, std).requires_grad_(True)
        ds = randn32((T, N), gen)
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
        ch_mean = randn32((1, 1, C, 1), gen, 0.0, 2.0)
        ch_std = (torch.rand((1, 1, C, 1), generator=gen) * 2.0 + 0.2).float().double()
        x = (randn32((T, B, C, hw), gen) * ch_std + ch_mean).float().double().requires_grad_(True)
        gamma = (torch.rand(C, generator=gen) + 0.5).float().double().requires_grad_(True)
        beta = (torch.rand(C, generator=gen) * 0.6 + 0.3).float().double().requires_grad_(True)
        ds = randn32((T, B, C, hw), gen)
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
    rm0 = randn32((C,), gen, 0.0, 0.5)
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
    dy = randn32((T, B, C, hw), gen)
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
    save(os.path.join(d, "lif.safetensors"), lif_cases())
    save(os.path.join(d, "bn_lif.safetensors"), bn_lif_cases())


if __name__ == "__main__":
    main()
