"""_neurons.py — the ctypes side of the neuron models beyond the LIF (PLIF, IF, ALIF): their sf_lif_params, and the
kernel entry points that take an sf_lif_state, through which a PLIF passes its learnable w and receives its dw."""
import ctypes
import math

from . import _lib

MODELS = ("lif", "plif", "if", "alif")  # the order of enum sf_neuron_model


class LifState(ctypes.Structure):
    """Mirror of sf_lif_state (include/spikefuse.h): state across calls (unused here: every call starts anew) and a
    PLIF's w, dw and their channel layout."""
    _fields_ = [
        ("v_in", ctypes.c_void_p),
        ("v_out", ctypes.c_void_p),
        ("dv_in", ctypes.c_void_p),
        ("dv_out", ctypes.c_void_p),
        ("w", ctypes.c_void_p),
        ("dw", ctypes.c_void_p),
        ("w_channels", ctypes.c_int32),
        ("w_hw", ctypes.c_int64),
    ]


sf_lif_forward_state = _lib._bind("sf_lif_forward_state", ctypes.c_int,
                                  [ctypes.POINTER(_lib.LifParams), ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.POINTER(LifState), _lib.Device, ctypes.c_void_p])
sf_lif_backward_state = _lib._bind("sf_lif_backward_state", ctypes.c_int,
                                   [ctypes.POINTER(_lib.LifParams), ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(LifState), _lib.Device,
                                    ctypes.c_void_p])


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
    # tau only shapes the LIF leak; the IF has none, and a PLIF's start tau is checked by the library (> 1)
    p = _lib.lif_params(tau if model != "if" else 2.0, decay_input, v_threshold, v_reset, detach_reset, surrogate,
                        alpha, grad_threshold)
    p.model = MODELS.index(model)
    p.per_channel = 1 if per_channel else 0
    p.rho = float(rho)
    p.tau_adapt = 0.0 if tau_adapt is None else float(tau_adapt)
    p.beta = float(beta)
    _lib.check(_lib._lif_params_check(ctypes.byref(p)), "sf_lif_params_check")
    return p


def plif_state(w_ptr, dw_ptr, channels, hw):
    """The sf_lif_state of a PLIF call: its w (and dw for the backward) on the kernel's device."""
    return LifState(None, None, None, None, w_ptr, dw_ptr, channels, hw)
