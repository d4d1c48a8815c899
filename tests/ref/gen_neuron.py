"""Reference fixtures for the neuron kernels (LIF, PLIF, IF, ALIF, batch norm, fused BN->neuron), computed in float64
with autograd.

Writes lif.safetensors, bn_lif.safetensors (the LIF), neurons.safetensors and bn_neurons.safetensors (the other
models) into the directory argv[1]. Every case stores its inputs rounded to float32 (so C and PyTorch start from the
same numbers), its parameters as a float64 vector and the expected outputs (a PLIF also its w and dw). Inputs are
redrawn until no membrane potential lies within MARGIN of a point where the forward or the surrogate jumps (the
threshold, the ALIF's moving one, theta_grad, rect's edges): there the float32 kernel and this float64 reference may
legitimately disagree on a spike, so away from them spikes must match exactly."""
import math
import os
import sys

import torch

import neuron_reference
from fixture_io import f32, randn32, save
from neuron_reference import DEFAULT_ALPHA, SURROGATES

MODELS = ("lif", "plif", "if", "alif")  # the order of enum sf_neuron_model

torch.set_default_dtype(torch.float64)
MARGIN = 1e-4


def coeffs(p):
    """a and c exactly as the float32 kernels compute them (the PLIF's come from its w: see neuron())."""
    if p["model"] == "if":
        return 1.0, 1.0
    if p["decay"] > 0:
        a = f32(p["decay"])
    else:
        a = f32(f32(1.0) - f32(1.0 / f32(p["tau"])))
    c = f32(1.0 - a) if p["decay_input"] else 1.0
    return a, c


def alif_rho(p):
    """The ALIF's rho as the kernels hold it: exp(-1/tau_adapt) in float32 where tau_adapt is given."""
    if p["tau_adapt"] > 0:
        return f32(math.exp(f32(-1.0 / f32(p["tau_adapt"]))))
    return f32(p["rho"])


def neuron(p, y, w=None, channel=None):
    """The model's recurrence over y [T, N] with the kernels' coefficients; returns spikes, membrane potentials h and
    the thresholds (the ALIF's adapt). A PLIF takes its w, [C] with neuron n in channel channel[n] (or [1])."""
    gt = p["grad_threshold"] if p["use_grad_threshold"] else None
    cut = bool(p["grad_cut"])
    if p["model"] == "alif":
        a, c = coeffs(p)
        return neuron_reference.alif(y, a, c, p["v_threshold"], f32(p["beta"]), alif_rho(p), p["v_reset"],
                                     p["soft_reset"], p["detach_reset"], p["surrogate"], p["alpha"], gt, cut)
    if p["model"] == "plif":
        a, c = neuron_reference.plif_coeffs(w if channel is None else w[channel], p["decay_input"])
    else:
        a, c = coeffs(p)
    s, h = neuron_reference.lif(y, a, c, p["v_threshold"], p["v_reset"], p["soft_reset"], p["detach_reset"],
                                p["surrogate"], p["alpha"], gt, grad_cut=cut)
    return s, h, torch.full_like(h, p["v_threshold"])


def lif(p, y):
    """The LIF recurrence over y [T, ...] with the kernels' coefficients; returns spikes and membrane potentials h."""
    s, h, _ = neuron(p, y)
    return s, h


def breakpoints(p, theta):
    pts = [theta]
    if p["use_grad_threshold"]:
        pts.append(p["grad_threshold"])
    if p["surrogate"] == "rect":
        pts += [theta + 0.5 / p["alpha"], theta - 0.5 / p["alpha"]]
    return pts


def clear_of_breakpoints(p, h, theta=None):
    theta = p["v_threshold"] if theta is None else theta
    return all(bool(((h - b).abs() >= MARGIN).all()) for b in breakpoints(p, theta))


def param_vector(p):
    return torch.tensor([p["tau"], p["decay"], p["decay_input"], p["v_threshold"], p["v_reset"], p["soft_reset"],
                         p["detach_reset"], SURROGATES.index(p["surrogate"]), p["alpha"], p["use_grad_threshold"],
                         p["grad_threshold"], MODELS.index(p["model"]), p["per_channel"], p["rho"], p["tau_adapt"],
                         p["beta"], p["grad_cut"]])


def make_params(**kw):
    p = dict(tau=2.0, decay=0.0, decay_input=1, v_threshold=1.0, v_reset=0.0, soft_reset=0, detach_reset=0,
             surrogate="sigmoid", alpha=None, use_grad_threshold=0, grad_threshold=0.5, model="lif", per_channel=0,
             rho=0.95, tau_adapt=0.0, beta=1.8, grad_cut=0)
    p.update(kw)
    if p["alpha"] is None:
        p["alpha"] = DEFAULT_ALPHA[p["surrogate"]]
    return p


def input_stats(p):
    """Input mean and spread that make each model fire at a moderate rate."""
    if p["model"] == "if" or not p["decay_input"]:
        return 0.35, 0.6
    return (0.9, 1.0) if p["model"] == "alif" else (0.7, 1.0)


def plif_w(p, C, gen):
    """A PLIF's w near its start -ln(tau - 1), drawn so channels differ (as after some training)."""
    return (randn32((C,), gen, 0.0, 0.4) - math.log(p["tau"] - 1)).float().double()


def lif_case(out, name, p, T, N, seed, wshape=None):
    """One case over x [T, N]. A PLIF has w of wshape = (C, hw) (neuron n in channel (n // hw) % C) or one w."""
    mean, std = input_stats(p)
    C, hw = wshape if wshape else (1, N)
    channel = (torch.arange(N) // hw) % C
    for attempt in range(1000):
        gen = torch.Generator().manual_seed(seed * 1000 + attempt)
        x = randn32((T, N), gen, mean, std).requires_grad_(True)
        ds = randn32((T, N), gen)
        w = plif_w(p, C, gen).requires_grad_(True) if p["model"] == "plif" else None
        s, h, theta = neuron(p, x, w, channel)
        if clear_of_breakpoints(p, h.detach(), theta.detach()):
            break
    else:
        raise RuntimeError(f"{name}: no input clear of the breakpoints")
    (s * ds).sum().backward()
    out.update({f"{name}.params": param_vector(p), f"{name}.x": x.detach(), f"{name}.ds": ds, f"{name}.s": s.detach(),
                f"{name}.h": h.detach(), f"{name}.dx": x.grad})
    if w is not None:
        out.update({f"{name}.w": w.detach(), f"{name}.dw": w.grad,
                    f"{name}.wshape": torch.tensor([C, hw], dtype=torch.int64)})


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
    """shape = (T, B, C, hw): BN over (T, B, hw) per channel, then the neuron over T of the B·C·hw neurons (a PLIF's
    w per channel of the BN's, or one)."""
    T, B, C, hw = shape
    channel = (torch.arange(B * C * hw) // hw) % C if p["per_channel"] else None
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
        w = plif_w(p, C if p["per_channel"] else 1, gen).requires_grad_(True) if p["model"] == "plif" else None
        s, h, theta = neuron(p, y.reshape(T, B * C * hw), w, channel)
        if clear_of_breakpoints(p, h.detach(), theta.detach()):
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
    if w is not None:
        out.update({f"{name}.w": w.detach(), f"{name}.dw": w.grad})
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


def neuron_cases():
    """PLIF, IF and ALIF: each over surrogates × resets × detach_reset (decay_input and θ_grad alternating), then
    per-channel w, T = 1, odd sizes, more neurons than a kernel block, and each model's own parameters."""
    out, names = {}, []
    seed = 5000
    cases = []
    for model in ("plif", "if", "alif"):
        for i, (surrogate, soft, detach) in enumerate((g, s, d) for g in SURROGATES for s in (0, 1) for d in (0, 1)):
            extra = {} if model == "if" else {"decay_input": (i // 2) % 2 ^ 1}
            cases.append((make_params(model=model, surrogate=surrogate, soft_reset=soft, detach_reset=detach,
                                      use_grad_threshold=i % 2, **extra), 5, 37, None))
    cases += [
        (make_params(model="plif", per_channel=1), 5, 3 * 4 * 7, (4, 7)),
        (make_params(model="plif", per_channel=1, decay_input=0, surrogate="atan", soft_reset=1), 6, 2 * 5 * 13,
         (5, 13)),                                                        # channel runs cross neuron blocks
        (make_params(model="plif", per_channel=1, surrogate="fast_sigmoid"), 3, 2 * 3 * 200, (3, 200)),
        (make_params(model="plif", tau=6.0), 9, 41, None),
        (make_params(model="plif"), 1, 37, None),                         # T = 1
        (make_params(model="plif", detach_reset=1), 4, 1100, None),       # more neurons than one block
        (make_params(model="if", v_reset=-0.2), 8, 33, None),
        (make_params(model="if"), 1, 1, None),
        (make_params(model="if", soft_reset=1, surrogate="rect"), 6, 1100, None),
        (make_params(model="alif", tau_adapt=20.0), 12, 41, None),
        (make_params(model="alif", beta=0.0), 7, 33, None),               # the LIF
        (make_params(model="alif", rho=0.0, beta=0.5, surrogate="atan"), 7, 29, None),  # b_t = s_{t-1}
        (make_params(model="alif", v_reset=-0.3, v_threshold=0.8, decay=0.8), 9, 19, None),
        (make_params(model="alif", soft_reset=1, beta=0.7, tau=3.0), 1, 37, None),       # T = 1
        (make_params(model="alif", detach_reset=1, rho=0.8), 5, 1100, None),
        (make_params(model="alif", use_grad_threshold=1, grad_threshold=0.3, grad_cut=1), 8, 45, None),
        (make_params(model="plif", use_grad_threshold=1, grad_threshold=0.3, grad_cut=1, surrogate="atan"), 8, 45,
         None),
    ]
    for p, T, N, wshape in cases:
        names.append(f"n{len(names)}")
        lif_case(out, names[-1], p, T, N, seed, wshape)
        seed += 1
    out["cases"] = torch.tensor([len(names)], dtype=torch.int64)
    return out


def bn_neuron_cases():
    out, names = {}, []
    cases = [
        (make_params(model="plif"), (4, 3, 5, 9)),
        (make_params(model="plif", per_channel=1, surrogate="atan", soft_reset=1), (3, 2, 3, 20)),
        (make_params(model="plif", per_channel=1, decay_input=0), (3, 3, 5, 100)),  # blocks split channel runs
        (make_params(model="plif", per_channel=1), (1, 2, 3, 20)),                  # T = 1
        (make_params(model="if", surrogate="atan"), (4, 3, 5, 9)),
        (make_params(model="if", soft_reset=1, detach_reset=1), (3, 1, 4, 6)),
        (make_params(model="alif"), (5, 3, 4, 9)),
        (make_params(model="alif", soft_reset=1, surrogate="fast_sigmoid", tau_adapt=5.0), (6, 2, 3, 81)),
    ]
    for i, (p, shape) in enumerate(cases):
        names.append(f"b{i}")
        bn_lif_case(out, names[-1], p, shape, 300 + i)
    out["cases"] = torch.tensor([len(names)], dtype=torch.int64)
    return out


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    save(os.path.join(d, "lif.safetensors"), lif_cases())
    save(os.path.join(d, "bn_lif.safetensors"), bn_lif_cases())
    save(os.path.join(d, "neurons.safetensors"), neuron_cases())
    save(os.path.join(d, "bn_neurons.safetensors"), bn_neuron_cases())


if __name__ == "__main__":
    main()
