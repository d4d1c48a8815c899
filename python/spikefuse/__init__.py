"""spikefuse — time-fused spiking neuron kernels (CPU and CUDA) from libspikefuse, with a PyTorch interface in
spikefuse.torch. This top level is the ctypes binding only and does not import torch."""
from ._lib import (LIBRARY_PATH, SURROGATES, LifParams, SpikefuseError, SpikefuseValueError, build_info,
                   cuda_device_count, get_num_threads, lif_backward, lif_forward, lif_params, set_num_threads,
                   surrogate_default_alpha, version)

__version__ = "0.1.0"
__all__ = ["LIBRARY_PATH", "SURROGATES", "LifParams", "SpikefuseError", "SpikefuseValueError", "build_info",
           "cuda_device_count", "get_num_threads", "lif_backward", "lif_forward", "lif_params", "set_num_threads",
           "surrogate_default_alpha", "version"]
