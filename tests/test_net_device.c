/* test_net_device.c — a network run on tensors another framework holds (sf_net_forward_device, _backward_device):
 * the same output, parameter gradients and batch norm statistics, bit for bit, as the engine's own step seeded with
 * the same output gradient, in every memory mode; the input's gradient against finite differences of a net linear in
 * its input; parameters written in place through their addresses; the state errors, and a spike input that is not
 * spikes. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 3, B = 2, C = 2, H = 6, W = 6, K = 3 };
#define NX ((int64_t)T * B * C * H * W)
#define NY ((int64_t)T * B * K)

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    return d;
}

/* conv 4 → BN → LIF (fused) → max-pool → flatten → linear K, or (spiking = 0) conv 4 → flatten → linear K, which is
 * linear in its input. */
static sf_net *new_net(sf_memory_mode memory, int spiking)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = C, p.in_height = H, p.in_width = W;
    p.memory = memory;
    p.seed = 7;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_net_device"));
    sf_layer_desc conv = layer(SF_LAYER_CONV2D), fc = layer(SF_LAYER_LINEAR);
    conv.out_channels = 4;
    fc.out_features = K;
    CHECK_OK(sf_net_add(net, &conv, NULL));
    if (spiking) {
        sf_layer_desc bn = layer(SF_LAYER_BATCHNORM), lif = layer(SF_LAYER_LIF), pool = layer(SF_LAYER_MAXPOOL2D);
        lif.lif.v_threshold = 0.3f;
        pool.kernel = 2;
        CHECK_OK(sf_net_add(net, &bn, NULL));
        CHECK_OK(sf_net_add(net, &lif, NULL));
        CHECK_OK(sf_net_add(net, &pool, NULL));
    }
    sf_layer_desc flat = layer(SF_LAYER_FLATTEN);
    CHECK_OK(sf_net_add(net, &flat, NULL));
    CHECK_OK(sf_net_add(net, &fc, NULL));
    return net;
}

/* Every parameter gradient (or buffer) of a net, concatenated, into a fresh array; *n gets the count. */
static float *role_values(sf_net *net, sf_tensor_role role, int64_t *n)
{
    int32_t count = sf_net_tensor_count(net, role);
    int64_t total = 0;
    sf_tensor_info info;
    for (int32_t i = 0; i < count; i++) {
        CHECK_OK(sf_net_tensor_info(net, role, i, &info));
        total += info.numel;
    }
    float *v = malloc(sizeof *v * (size_t)(total ? total : 1));
    int64_t at = 0;
    for (int32_t i = 0; i < count; i++) {
        CHECK_OK(sf_net_tensor_info(net, role, i, &info));
        CHECK_OK(sf_net_tensor_read(net, role, i, v + at));
        at += info.numel;
    }
    *n = total;
    return v;
}

static void test_same_as_engine_step(sf_memory_mode memory)
{
    float *x = malloc(sizeof *x * NX), *y_ref = malloc(sizeof *y_ref * NY), *y = malloc(sizeof *y * NY);
    float *dy = malloc(sizeof *dy * NY), *dx = malloc(sizeof *dx * NX);
    tu_randn(x, NX, 0.5f, 1.0f, 11);
    const int32_t labels[B] = {1, 2};

    sf_net *ref = new_net(memory, 1);
    CHECK_OK(sf_net_compile(ref, T, B));
    CHECK_OK(sf_net_forward(ref, x, 1));
    CHECK_OK(sf_net_loss(ref, labels, NULL));
    CHECK_OK(sf_net_read_output_grad(ref, dy));
    CHECK_OK(sf_net_backward(ref));
    CHECK_OK(sf_net_read_activation(ref, sf_net_num_layers(ref), y_ref));

    for (int input_grad = 0; input_grad <= 1; input_grad++) {
        sf_net *net = new_net(memory, 1);
        CHECK_OK(sf_net_set_input_grad(net, input_grad));
        CHECK_OK(sf_net_compile(net, T, B));
        CHECK_OK(sf_net_forward_device(net, x, 1, y));
        CHECK(memcmp(y, y_ref, sizeof *y * NY) == 0, "%s, input grad %d: output differs from the engine's step",
              sf_memory_mode_name(memory), input_grad);
        CHECK_OK(sf_net_backward_device(net, dy, input_grad ? dx : NULL));
        const sf_tensor_role roles[2] = {SF_ROLE_GRAD, SF_ROLE_BUFFER};
        for (int r = 0; r < 2; r++) {
            int64_t n_ref, n;
            float *a = role_values(ref, roles[r], &n_ref), *b = role_values(net, roles[r], &n);
            CHECK(n == n_ref && memcmp(a, b, sizeof *a * (size_t)n) == 0,
                  "%s, input grad %d: %s differ from the engine's step", sf_memory_mode_name(memory), input_grad,
                  r == 0 ? "gradients" : "batch norm statistics");
            free(a);
            free(b);
        }
        if (input_grad) {
            double norm = 0;
            for (int64_t i = 0; i < NX; i++) norm += (double)dx[i] * dx[i];
            CHECK(norm > 0 && isfinite(norm), "%s: the input's gradient is zero or not finite (%g)",
                  sf_memory_mode_name(memory), norm);
        }
        sf_net_free(net);
    }
    sf_net_free(ref);
    free(x), free(y_ref), free(y), free(dy), free(dx);
}

/* <dy, y(x)> of the linear net: its derivative along v is <dx, v> (central differences are exact up to rounding). */
static double dot_output(sf_net *net, const float *x, const float *dy, float *y)
{
    CHECK_OK(sf_net_forward_device(net, x, 1, y));
    double s = 0;
    for (int64_t i = 0; i < NY; i++) s += (double)dy[i] * y[i];
    return s;
}

static void test_input_grad(void)
{
    float *x = malloc(sizeof *x * NX), *v = malloc(sizeof *v * NX), *xs = malloc(sizeof *xs * NX);
    float *dx = malloc(sizeof *dx * NX), *dy = malloc(sizeof *dy * NY), *y = malloc(sizeof *y * NY);
    tu_randn(x, NX, 0.0f, 1.0f, 3);
    tu_randn(v, NX, 0.0f, 1.0f, 4);
    tu_randn(dy, NY, 0.0f, 1.0f, 5);
    sf_net *net = new_net(SF_MEMORY_RECOMPUTE, 0);
    CHECK_OK(sf_net_set_input_grad(net, 1));
    CHECK_OK(sf_net_compile(net, T, B));
    CHECK_OK(sf_net_forward_device(net, x, 1, y));
    CHECK_OK(sf_net_backward_device(net, dy, dx));
    double analytic = 0;
    for (int64_t i = 0; i < NX; i++) analytic += (double)dx[i] * v[i];
    const float eps = 1e-2f;
    for (int64_t i = 0; i < NX; i++) xs[i] = x[i] + eps * v[i];
    double up = dot_output(net, xs, dy, y);
    for (int64_t i = 0; i < NX; i++) xs[i] = x[i] - eps * v[i];
    double down = dot_output(net, xs, dy, y);
    double numeric = (up - down) / (2.0 * eps);
    CHECK(fabs(numeric - analytic) <= 1e-3 * fabs(analytic), "input gradient: <dx, v> = %g, finite differences %g",
          analytic, numeric);
    sf_net_free(net);
    free(x), free(v), free(xs), free(dx), free(dy), free(y);
}

/* Parameters written through sf_net_tensor_ptr act as sf_net_tensor_write's: the same output. */
static void test_params_in_place(void)
{
    float *x = malloc(sizeof *x * NX), *y1 = malloc(sizeof *y1 * NY), *y2 = malloc(sizeof *y2 * NY);
    tu_randn(x, NX, 0.5f, 1.0f, 9);
    sf_net *a = new_net(SF_MEMORY_RECOMPUTE, 1), *b = new_net(SF_MEMORY_RECOMPUTE, 1);
    sf_tensor_info info;
    CHECK_OK(sf_net_tensor_info(a, SF_ROLE_PARAM, 0, &info));
    float *w = NULL, *g = NULL;
    CHECK_OK(sf_net_tensor_ptr(a, SF_ROLE_PARAM, 0, &w));
    CHECK_OK(sf_net_tensor_ptr(a, SF_ROLE_GRAD, 0, &g));
    CHECK(w && g && w != g, "tensor_ptr: weight %p, gradient %p", (void *)w, (void *)g);
    float *vals = malloc(sizeof *vals * (size_t)info.numel);
    CHECK_OK(sf_net_tensor_read(a, SF_ROLE_PARAM, 0, vals));
    CHECK(memcmp(vals, w, sizeof *vals * (size_t)info.numel) == 0, "tensor_ptr's weight is not the parameter");
    for (int64_t i = 0; i < info.numel; i++) vals[i] *= -1.5f;
    memcpy(w, vals, sizeof *vals * (size_t)info.numel);
    CHECK_OK(sf_net_params_changed(a));
    CHECK_OK(sf_net_tensor_write(b, SF_ROLE_PARAM, 0, vals));
    CHECK_OK(sf_net_compile(a, T, B));
    CHECK_OK(sf_net_compile(b, T, B));
    float *w_after = NULL;
    CHECK_OK(sf_net_tensor_ptr(a, SF_ROLE_PARAM, 0, &w_after));
    CHECK(w_after == w, "the parameters moved at compile");
    CHECK_OK(sf_net_forward_device(a, x, 0, y1));
    CHECK_OK(sf_net_forward_device(b, x, 0, y2));
    CHECK(memcmp(y1, y2, sizeof *y1 * NY) == 0, "in-place weights differ from written ones");
    CHECK(sf_net_stream(a) == NULL, "a CPU net has a stream");
    sf_net_free(a);
    sf_net_free(b);
    free(x), free(y1), free(y2), free(vals);
}

static void test_state_errors(void)
{
    float *x = calloc((size_t)NX, sizeof *x), *y = calloc((size_t)NY, sizeof *y), *dx = calloc((size_t)NX, sizeof *dx);
    sf_net *net = new_net(SF_MEMORY_RECOMPUTE, 1);
    CHECK(sf_net_forward_device(net, x, 1, y) == SF_ERR_STATE, "forward before compile");
    CHECK_OK(sf_net_compile(net, T, B));
    CHECK(sf_net_backward_device(net, y, NULL) == SF_ERR_STATE, "backward before a forward");
    CHECK_OK(sf_net_forward_device(net, x, 0, y));
    sf_status s = sf_net_backward_device(net, y, NULL);
    CHECK(s == SF_ERR_STATE && strstr(sf_last_error(), "evaluation"), "backward after eval: %s", sf_last_error());
    CHECK_OK(sf_net_forward_device(net, x, 1, y));
    s = sf_net_backward_device(net, y, dx);
    CHECK(s == SF_ERR_STATE && strstr(sf_last_error(), "sf_net_set_input_grad"), "dx unplanned: %s", sf_last_error());
    CHECK(sf_net_backward_device(net, NULL, NULL) == SF_ERR_INVALID, "dy NULL");
    CHECK(sf_net_read_output_grad(net, y) == SF_ERR_STATE, "output grad without a loss");
    sf_net_free(net);

    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 8;
    p.input_spikes = 1;
    CHECK_OK(sf_net_create(&p, &net));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 2;
    CHECK_OK(sf_net_add(net, &fc, NULL));
    CHECK_OK(sf_net_compile(net, 1, 1));
    float spikes[8] = {0, 1, 0, 0, 1, 1, 0, 0}, out[2];
    CHECK_OK(sf_net_forward_device(net, spikes, 0, out));
    spikes[3] = 0.5f;
    s = sf_net_forward_device(net, spikes, 0, out);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "input_spikes"), "0.5 in a spike input: %s", sf_last_error());
    sf_net_free(net);
    free(x), free(y), free(dx);
}

int main(void)
{
    const sf_memory_mode modes[3] = {SF_MEMORY_FULL, SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN};
    for (int m = 0; m < 3; m++) test_same_as_engine_step(modes[m]);
    test_input_grad();
    test_params_in_place();
    test_state_errors();
    return tu_finish("test_net_device");
}
