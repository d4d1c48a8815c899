/* test_gpu_neuron_nets.c — small networks of every neuron model at T = 70 (37 inputs → linear 64 → neuron → linear 48 →
 * neuron → linear 5, recompute) on the CUDA backend, whose neuron backward starts at the forward's checkpoints, and
 * on the CPU, which recomputes whole sequences: the GPU plan keeps exactly the checkpoints more, and the loss and
 * the gradients agree within 1e-5 relative (the neuron ops one by one are the op harness's,
 * tests/gpu/test_gpu_backend_ops.c). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

/* 37 inputs → linear 64 → neuron → linear 48 → neuron → linear 5 at T = 70, B = 3, recompute, every model: on the GPU
 * each neuron layer's backward starts its segments at the forward's checkpoints (the plan keeps 1/32 of h for them:
 * 2·3·(64 + 48) floats per state value), on the CPU it recomputes whole sequences; the loss and the gradients agree. */
static sf_net *long_net(sf_device dev, sf_neuron_model model)
{
    sf_net_params np;
    sf_net_default_params(&np);
    np.device = dev;
    np.memory = SF_MEMORY_RECOMPUTE;
    np.in_channels = 37;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&np, &net));
    if (!net) return NULL;
    const int32_t sizes[] = {64, 0, 48, 0, 5};
    for (int l = 0; l < 5; l++) {
        sf_layer_desc d;
        sf_layer_default_desc(l % 2 ? SF_LAYER_LIF : SF_LAYER_LINEAR, &d);
        d.out_features = sizes[l];
        d.lif.model = model;
        d.lif.rho = 0.9f;
        d.lif.beta = 0.7f;
        CHECK_OK(sf_net_add(net, &d, NULL));
    }
    CHECK_OK(sf_net_compile(net, 70, 3));
    return net;
}

static void test_long_nets(void)
{
    static float x[70 * 3 * 37];
    tu_randn(x, 70 * 3 * 37, 0.4f, 1.0f, 51);
    int32_t labels[3] = {0, 3, 1};
    const sf_neuron_model models[] = {SF_NEURON_LIF, SF_NEURON_PLIF, SF_NEURON_IF, SF_NEURON_ALIF};
    for (int m = 0; m < 4; m++) {
        sf_net *nets[2] = {long_net((sf_device){SF_DEVICE_CPU, 0}, models[m]),
                           long_net((sf_device){SF_DEVICE_CUDA, 0}, models[m])};
        if (!nets[0] || !nets[1]) return;
        sf_step_result r[2];
        float *grads[2];
        int64_t n[2];
        sf_memory_plan plan[2];
        for (int i = 0; i < 2; i++) {
            CHECK_OK(sf_net_forward(nets[i], x, 1));
            CHECK_OK(sf_net_loss(nets[i], labels, &r[i]));
            CHECK_OK(sf_net_backward(nets[i]));
            grads[i] = tu_net_read_role(nets[i], SF_ROLE_GRAD, &n[i]);
            CHECK_OK(sf_net_memory_plan(nets[i], &plan[i]));
        }
        const char *name = sf_neuron_model_name(models[m]);
        const size_t ckpt = 4 * (size_t)(2 * 3 * (64 + 48) * (models[m] == SF_NEURON_ALIF ? 2 : 1));
        CHECK(plan[1].saved >= plan[0].saved + ckpt && plan[1].saved < plan[0].saved + ckpt + 2 * 256,
              "%s net at T = 70: the GPU plan keeps %zu bytes, the CPU's %zu + %zu of checkpoints (two slots aligned "
              "to 256 bytes) expected",
              name, plan[1].saved, plan[0].saved, ckpt);
        const double le = fabs((double)r[1].loss - r[0].loss) / fabs((double)r[0].loss);
        const double ge = n[0] == n[1] ? tu_rel_err_f32(grads[1], grads[0], n[0]) : INFINITY;
        CHECK(le < 1e-5 && ge < 1e-5,
              "%s net at T = 70 from checkpoints: loss %.7g vs the CPU's %.7g (rel %.2e), "
              "gradients rel %.2e",
              name, r[1].loss, r[0].loss, le, ge);
        for (int i = 0; i < 2; i++) free(grads[i]), sf_net_free(nets[i]);
    }
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        fprintf(stderr, "test_gpu_neuron_nets: no CUDA device\n");
        return 1;
    }
    test_long_nets();
    return tu_finish("test_gpu_neuron_nets");
}
