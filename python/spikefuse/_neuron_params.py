"""_neuron_params.py — the sf_lif_params of every neuron model (LIF, PLIF, IF, ALIF) with SpikingJelly's parameter
semantics, checked by the library."""
import math

from . import _lib

MODELS = ("lif", "plif", "if", "alif")  # the order of enum sf_neuron_model


def neuron_params(model, tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, detach_reset=False,
                  surrogate="sigmoid", alpha=None, grad_threshold=None, per_channel=False, rho=0.95, tau_adapt=None,
                  beta=1.8):
    """A checked sf_lif_params for `model` with SpikingJelly's semantics (v_reset=None: soft reset), shifted as
    _lib.lif_params explains: in u = v - v_reset, SpikingJelly's hard-reset neurons (which leak towards v_reset) are
    the kernels' (which leak towards 0), with the threshold (and θ_grad) shifted alike; the ALIF's θ_t moves by the
    same shift. Parameters a model lacks are ignored (the modules pass only their own)."""
    if model not in MODELS:
        raise ValueError(f"neuron model {model!r} is not one of {', '.join(MODELS)}")
    for name, value in (("rho", rho), ("tau_adapt", tau_adapt), ("beta", beta)):
        if value is not None and not math.isfinite(float(value)):
            raise ValueError(f"{model} {name} = {value}: must be finite")
    # tau only shapes the leak: the IF has none; a PLIF's start tau is checked by the library (> 1)
    p = _lib.lif_params(tau if model != "if" else 2.0, decay_input, v_threshold, v_reset, detach_reset, surrogate,
                        alpha, grad_threshold)
    p.model = MODELS.index(model)
    p.per_channel = 1 if per_channel else 0
    p.rho = float(rho)
    p.tau_adapt = 0.0 if tau_adapt is None else float(tau_adapt)
    p.beta = float(beta)
    _lib.check_params(p)
    return p
