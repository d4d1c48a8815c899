/* bench_mlp_step.c — a launch-bound training step: the Fashion-MNIST MLP (784 → Linear 512 → LIF → Linear 10, mean
 * readout, cross-entropy, SGD momentum 0.9), T=4, B=64, synthetic input, through the public network API, with the
 * step recorded as a CUDA graph and without (a backend created with sf_cuda_options.graph = 0), in the same process.
 * Reports the median time of sf_net_train_step (host clock; the step ends in a synchronising read of the loss).
 * Usage: bench_mlp_step [steps] (default 500). */
#include "core/net_internal.h"
#include "gpu_bench.h"
#include "../bench_clock.h"


enum { T = 4, B = 64, IN = 784, HID = 512, K = 10 };

static sf_net *mlp(bool graphs)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.cuda.graph = graphs;
    p.device = (sf_device){SF_DEVICE_CUDA, 0};
    p.in_channels = 1, p.in_height = 28, p.in_width = 28;
    sf_net *net;
    GB_OK(sf_net_create(&p, &net));
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_FLATTEN, &d);
    GB_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_LINEAR, &d);
    d.out_features = HID;
    GB_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_LIF, &d);
    GB_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_LINEAR, &d);
    d.out_features = K;
    GB_OK(sf_net_add(net, &d, NULL));
    gb_compile_sgd(net, T, B);
    return net;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 500;
    if (steps < 1) steps = 500;
    char card[256];
    gb_card(card, sizeof card);
    printf("fmnist MLP train step 784-512 LIF-10, T=%d B=%d, SGD momentum  card: %s\n", T, B, card);
    float *x = malloc(sizeof(float) * T * B * IN);
    sf_bench_randn(x, (size_t)T * B * IN, 0.3f, 1.0f, 5);
    int32_t labels[B];
    for (int b = 0; b < B; b++) labels[b] = (b * 7) % K;
    printf("%-6s %9s %9s %9s %9s %10s\n", "graph", "ms/step", "p10_ms", "p90_ms", "loss", "recorded");
    double *ts = malloc(sizeof(double) * (size_t)steps);
    for (int on = 1; on >= 0; on--) {
        sf_net *net = mlp(on);
        sf_step_result r;
        for (int i = 0; i < 20; i++) GB_OK(sf_net_train_step(net, x, labels, &r));
        for (int i = 0; i < steps; i++) {
            double t0 = sf_bench_now_ms();
            GB_OK(sf_net_train_step(net, x, labels, &r));
            ts[i] = sf_bench_now_ms() - t0;
        }
        sf_bench_median(ts, steps); /* sorts: p10 and p90 below */
        printf("%-6s %9.4f %9.4f %9.4f %9.4f %10s\n", on ? "on" : "off", ts[steps / 2], ts[steps / 10],
               ts[steps * 9 / 10], r.loss, sf_net_step_replayed(net) ? "yes" : "no");
        sf_net_free(net);
    }
    free(ts);
    free(x);
    return 0;
}
