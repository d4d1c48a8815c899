"""spikefuse.torch — PyTorch modules over libspikefuse's fused kernels: LIF, IF and PLIF (drop-ins for SpikingJelly's
neuron.LIFNode, IFNode and ParametricLIFNode, with its state semantics and surrogate objects), BNLIF and BNIF (batch
norm → LIF / IF fused), ALIF (the adaptive-threshold LIF), convert (a SpikingJelly network's neurons swapped for
these), load_run (a network that `spikefuse train` trained, as a module), Network (a whole engine network as one
module: the engine's forward and fused backward, its parameters shared with torch) and fuse (a torch / SpikingJelly
model as a Network), and NIR exchange. The ops are torch.library custom ops on torch >= 2.4 (so
torch.compile and torch.export take them whole) and autograd Functions on older torch."""
try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("spikefuse.torch needs PyTorch: install torch for your platform (or `pip install "
                      "'./python[torch]'`)") from e

import warnings

from .. import _lib
from . import functional
from ._ops import CUSTOM_OPS
from .compact import spikes_saved_as_bytes
from .functional import lif_params
from .bn_neurons import BNIF, BNLIF
from .lif_neurons import ALIF, IF, LIF
from .plif import PLIF
from .run import load_run
from .network import Network, layer
from .fuse import fuse
from .spikingjelly_convert import convert

# NIR exchange (needs the `nir` package, imported on first use)
from .nir_export import to_nir  # noqa: E402
from .nir_import import from_nir  # noqa: E402

if torch.cuda.is_available() and _lib.cuda_device_count() == 0:
    warnings.warn(f"spikefuse: torch sees a CUDA device but {_lib.LIBRARY_PATH} has none it can use "
                  f"({_lib.build_info()}): CUDA tensors will be refused. Reinstall spikefuse where nvcc is present "
                  "(pip install ./python builds the CUDA kernels when it finds nvcc), or run on the CPU.",
                  RuntimeWarning, stacklevel=2)

__all__ = ["ALIF", "BNIF", "BNLIF", "CUSTOM_OPS", "IF", "LIF", "Network", "PLIF", "convert", "functional", "from_nir",
           "fuse", "layer", "lif_params", "load_run", "spikes_saved_as_bytes", "to_nir"]
