/* neuron_f16.cu — the neuron kernels' instances for fp16 activations (neuron_launch.cuh). */
#include "cuda/neuron_launch.cuh"

SF_CUDA_NEURON_INSTANCES(__half)
