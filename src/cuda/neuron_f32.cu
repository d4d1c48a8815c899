/* neuron_f32.cu — the neuron kernels' instances for float activations (neuron_launch.cuh). */
#include "cuda/neuron_launch.cuh"

SF_CUDA_NEURON_INSTANCES(float)
