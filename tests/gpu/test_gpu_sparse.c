/* test_gpu_sparse.c — small networks with every event-driven layer kind (input spikes → linear 300 → LIF or RLIF →
 * linear 260 → LIF → linear 4), sparse on, on the CUDA backend and on the CPU: losses within 1e-5 and gradients
 * within 1e-4 relative (the ops one by one are the op harness's, tests/gpu/test_gpu_backend_ops.c). */
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdlib.h>

/* Small nets with every event-driven layer kind, sparse on both devices: losses and gradients agree. */
static void test_nets(void)
{
    for (int rec = 0; rec < 2; rec++) {
        float loss[2] = {0, 0};
        float *grads[2] = {NULL, NULL};
        int64_t ng[2] = {0, 0};
        enum { T = 9, B = 5, IN = 37 };
        float *x = malloc(sizeof(float) * T * B * IN);
        for (int i = 0; i < T * B * IN; i++) x[i] = sf_uniform(41, 1, (uint64_t)i) < 0.2f ? 1.0f : 0.0f;
        int32_t labels[B] = {0, 1, 2, 3, 1};
        for (int dev = 0; dev < 2; dev++) {
            sf_net_params np;
            sf_net_default_params(&np);
            np.device.kind = dev ? SF_DEVICE_CUDA : SF_DEVICE_CPU;
            np.in_channels = IN;
            np.sparse = SF_SPARSE_ON;
            np.input_spikes = 1;
            np.cuda.graph = 0;
            sf_net *net = NULL;
            CHECK_OK(sf_net_create(&np, &net));
            if (!net) return;
            sf_layer_desc d;
            const int32_t sizes[] = {300, 0, 260, 0, 4};
            for (int l = 0; l < 5; l++) {
                sf_layer_default_desc(l % 2 ? (rec && l == 1 ? SF_LAYER_RLIF : SF_LAYER_LIF) : SF_LAYER_LINEAR, &d);
                d.out_features = sizes[l];
                d.init_gain = l % 2 ? 1.0f : 5.0f;
                tu_seed_neuron(&d.lif, 2, 0.4f);
                CHECK_OK(sf_net_add(net, &d, NULL));
            }
            CHECK_OK(sf_net_compile(net, T, B));
            sf_step_result r;
            CHECK_OK(sf_net_forward(net, x, 1));
            CHECK_OK(sf_net_loss(net, labels, &r));
            CHECK_OK(sf_net_backward(net));
            loss[dev] = r.loss;
            grads[dev] = tu_net_read_role(net, SF_ROLE_GRAD, &ng[dev]);
            sf_net_free(net);
        }
        double num = 0, den = 0;
        for (int64_t i = 0; i < ng[0]; i++) {
            num += ((double)grads[1][i] - grads[0][i]) * ((double)grads[1][i] - grads[0][i]);
            den += (double)grads[0][i] * grads[0][i];
        }
        CHECK(ng[0] == ng[1] && sqrt(num) <= 1e-4 * sqrt(den) && fabsf(loss[0] - loss[1]) <= 1e-5f * fabsf(loss[0]),
              "%s net: loss %g vs %g, gradient relative error %.3g", rec ? "recurrent" : "feed-forward", loss[1],
              loss[0], sqrt(num) / fmax(sqrt(den), 1e-30));
        free(grads[0]), free(grads[1]), free(x);
    }
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_sparse: no CUDA device\n");
        return 1;
    }
    test_nets();
    return tu_finish("test_gpu_sparse");
}
