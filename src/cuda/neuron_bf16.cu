/* neuron_bf16.cu — the neuron kernels' instances for bf16 activations (neuron_launch.cuh). */
#include "cuda/neuron_launch.cuh"

SF_CUDA_NEURON_INSTANCES(__nv_bfloat16)
