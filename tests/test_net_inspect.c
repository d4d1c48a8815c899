/* test_net_inspect.c — looking inside a network: with sf_net_set_keep_activations every tensor and each LIF
 * layer's membrane potential can be read after an evaluation forward (checked against host references), results
 * stay bitwise the same, and sf_net_read_membrane refuses clearly where h is not held. A convolution whose bias
 * the batch norm after it cancels leaves the bias out of its training forward; its output reads the same after
 * either forward. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 5, B = 3 };

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    return d;
}

/* input 1×4×4 → flatten → linear 12 → LIF → linear 5 (tensors 0..4) */
static sf_net *mlp(sf_memory_mode memory, int keep)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 1;
    p.in_height = p.in_width = 4;
    p.seed = 7;
    p.memory = memory;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_net_inspect"));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    sf_layer_desc flat = layer(SF_LAYER_FLATTEN), lif = layer(SF_LAYER_LIF);
    CHECK_OK(sf_net_add(net, &flat, NULL));
    fc.out_features = 12;
    CHECK_OK(sf_net_add(net, &fc, NULL));
    CHECK_OK(sf_net_add(net, &lif, NULL));
    fc.out_features = 5;
    CHECK_OK(sf_net_add(net, &fc, NULL));
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    if (keep) CHECK_OK(sf_net_set_keep_activations(net, 1));
    CHECK_OK(sf_net_compile(net, T, B));
    return net;
}

/* The LIF equations of spikefuse.h with the default parameters (tau 2, decay_input, θ 1, hard reset to 0). */
static void lif_reference(const float *y, int64_t n, float *h)
{
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        for (int t = 0; t < T; t++) {
            double ht = 0.5 * v + 0.5 * y[t * n + i];
            h[t * n + i] = (float)ht;
            v = ht >= 1.0 ? 0.0 : ht;
        }
    }
}

static float *read_tensor(const sf_net *net, int32_t id, int64_t n)
{
    float *out = calloc((size_t)n, sizeof *out);
    CHECK_OK(sf_net_read_activation(net, id, out));
    return out;
}

static void test_mlp_tensors(void)
{
    sf_net *net = mlp(SF_MEMORY_RECOMPUTE, 1);
    float x[T * B * 16];
    tu_randn(x, T * B * 16, 0.5f, 1.5f, 11);
    CHECK_OK(sf_net_forward(net, x, 0));

    float *in = read_tensor(net, 0, T * B * 16);
    CHECK(memcmp(in, x, sizeof x) == 0, "tensor 0 is the input");

    /* the linear layer's output against W·x + b on the host */
    float w[12 * 16], bias[12];
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, 0, w));
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, 1, bias));
    float *y = read_tensor(net, 2, T * B * 12);
    double worst = 0;
    for (int r = 0; r < T * B; r++)
        for (int j = 0; j < 12; j++) {
            double acc = bias[j];
            for (int k = 0; k < 16; k++) acc += (double)w[j * 16 + k] * x[r * 16 + k];
            worst = fmax(worst, fabs(acc - y[r * 12 + j]));
        }
    CHECK(worst < 1e-5, "linear output differs from W·x + b by %g", worst);

    /* h against the LIF equations on that current; spikes are exactly h >= θ */
    float h[T * B * 12], href[T * B * 12];
    CHECK_OK(sf_net_read_membrane(net, 3, h));
    lif_reference(y, B * 12, href);
    float *s = read_tensor(net, 3, T * B * 12);
    int64_t bad_h = 0, bad_s = 0, spikes = 0;
    for (int i = 0; i < T * B * 12; i++) {
        bad_h += fabsf(h[i] - href[i]) > 1e-5f;
        bad_s += s[i] != (h[i] >= 1.0f ? 1.0f : 0.0f);
        spikes += s[i] != 0;
    }
    CHECK(bad_h == 0, "%lld membrane values differ from the reference", (long long)bad_h);
    CHECK(bad_s == 0, "%lld spikes are not h >= threshold", (long long)bad_s);
    CHECK(spikes > 0 && spikes < T * B * 12, "the test input should make some neurons spike, not all (%lld)",
          (long long)spikes);

    /* keeping everything changes no result: the output, the loss and a training step match a plain net bitwise */
    sf_net *plain = mlp(SF_MEMORY_RECOMPUTE, 0);
    CHECK_OK(sf_net_forward(plain, x, 0));
    float *out_keep = read_tensor(net, 4, T * B * 5), *out_plain = read_tensor(plain, 4, T * B * 5);
    CHECK(memcmp(out_keep, out_plain, T * B * 5 * sizeof(float)) == 0, "output differs with keep_activations");
    int32_t labels[B] = {0, 3, 4};
    for (int step = 0; step < 2; step++) {
        sf_step_result a, b;
        CHECK_OK(sf_net_train_step(net, x, labels, &a));
        CHECK_OK(sf_net_train_step(plain, x, labels, &b));
        CHECK(a.loss == b.loss, "step %d: loss %.9g with keep_activations, %.9g without", step, a.loss, b.loss);
    }
    int64_t n_keep, n_plain;
    float *p_keep = tu_net_read_role(net, SF_ROLE_PARAM, &n_keep),
          *p_plain = tu_net_read_role(plain, SF_ROLE_PARAM, &n_plain);
    CHECK(n_keep == n_plain && memcmp(p_keep, p_plain, (size_t)n_keep * sizeof(float)) == 0,
          "parameters differ after training with keep_activations");
    /* after a training forward the kept tensors are still readable */
    CHECK_OK(sf_net_read_membrane(net, 3, h));
    free(p_keep);
    free(p_plain);
    free(out_keep);
    free(out_plain);
    free(in);
    free(y);
    free(s);
    sf_net_free(plain);
    sf_net_free(net);
}

static void test_membrane_errors(void)
{
    float x[T * B * 16], h[T * B * 12];
    tu_randn(x, T * B * 16, 0.5f, 1.5f, 12);
    sf_net *net = mlp(SF_MEMORY_RECOMPUTE, 0);
    CHECK(sf_net_read_membrane(net, 3, h) == SF_ERR_STATE, "read before any forward");
    CHECK_OK(sf_net_forward(net, x, 0));
    sf_status s = sf_net_read_membrane(net, 3, h);
    CHECK(s == SF_ERR_STATE && strstr(sf_last_error(), "sf_net_set_keep_activations"), "recompute mode keeps no h: %s",
          sf_last_error());
    s = sf_net_read_membrane(net, 2, h);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "not the output of a LIF layer"),
          "a linear tensor has no h: %s", sf_last_error());
    CHECK(sf_net_read_membrane(net, 9, h) == SF_ERR_INVALID, "tensor id out of range");
    CHECK(sf_net_read_membrane(net, 0, h) == SF_ERR_INVALID, "the input has no h");
    CHECK(sf_net_read_activation(net, 3, h) == SF_ERR_STATE, "hidden spikes are not held without keep_activations");
    /* switching it on needs a new compile */
    CHECK_OK(sf_net_set_keep_activations(net, 1));
    CHECK(sf_net_forward(net, x, 0) == SF_ERR_STATE, "forward ran on a plan made before keep_activations");
    CHECK_OK(sf_net_compile(net, T, B));
    CHECK_OK(sf_net_forward(net, x, 0));
    CHECK_OK(sf_net_read_membrane(net, 3, h));
    sf_net_free(net);

    /* full mode keeps h for the backward: readable after a training forward, not after an evaluation one */
    net = mlp(SF_MEMORY_FULL, 0);
    CHECK_OK(sf_net_forward(net, x, 1));
    CHECK_OK(sf_net_read_membrane(net, 3, h));
    CHECK_OK(sf_net_forward(net, x, 0));
    CHECK(sf_net_read_membrane(net, 3, h) == SF_ERR_STATE, "full mode: h of an evaluation forward is not written");
    sf_net_free(net);
}

/* conv 3×3 (2 → 3 channels) → BN → LIF (fused) → maxpool 2 → flatten → linear 4: the LIF's spikes, read before the
 * pool, give the pool's output; the BN output is never materialised. */
static void test_conv_block(void)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 2;
    p.in_height = p.in_width = 6;
    p.seed = 3;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) return;
    sf_layer_desc conv = layer(SF_LAYER_CONV2D), bn = layer(SF_LAYER_BATCHNORM), lif = layer(SF_LAYER_LIF);
    sf_layer_desc pool = layer(SF_LAYER_MAXPOOL2D), flat = layer(SF_LAYER_FLATTEN), fc = layer(SF_LAYER_LINEAR);
    conv.out_channels = 3;
    conv.kernel = 3;
    conv.padding = 1;
    pool.kernel = 2;
    fc.out_features = 4;
    lif.lif.v_threshold = 0.5f;
    const sf_layer_desc *all[] = {&conv, &bn, &lif, &pool, &flat, &fc};
    for (int i = 0; i < 6; i++) CHECK_OK(sf_net_add(net, all[i], NULL));
    CHECK_OK(sf_net_set_keep_activations(net, 1));
    CHECK_OK(sf_net_compile(net, T, B));
    float x[T * B * 72];
    tu_randn(x, T * B * 72, 0.0f, 2.0f, 13);
    sf_step_result r;
    CHECK_OK(sf_net_eval_step(net, x, NULL, &r));

    enum { N = 3 * 6 * 6, P = 3 * 3 * 3 };
    float *h = calloc(T * B * N, sizeof *h);
    CHECK_OK(sf_net_read_membrane(net, 3, h));
    float *s = read_tensor(net, 3, T * B * N), *pooled = read_tensor(net, 4, T * B * P);
    int64_t bad_s = 0, bad_pool = 0, spikes = 0;
    for (int i = 0; i < T * B * N; i++) {
        bad_s += s[i] != (h[i] >= 0.5f ? 1.0f : 0.0f);
        spikes += s[i] != 0;
    }
    for (int r2 = 0; r2 < T * B; r2++)
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    float m = 0;
                    for (int di = 0; di < 2; di++)
                        for (int dj = 0; dj < 2; dj++) m = fmaxf(m, s[r2 * N + c * 36 + (2 * i + di) * 6 + 2 * j + dj]);
                    bad_pool += pooled[r2 * P + c * 9 + i * 3 + j] != m;
                }
    CHECK(bad_s == 0, "%lld spikes are not h >= threshold in the fused BN+LIF layer", (long long)bad_s);
    CHECK(bad_pool == 0, "%lld pooled values are not the max of the LIF's spikes", (long long)bad_pool);
    CHECK(spikes > 0 && spikes < T * B * N, "some spikes, not all (%lld of %d)", (long long)spikes, T * B * N);
    CHECK(sf_net_read_activation(net, 2, h) == SF_ERR_STATE, "the fused BN's output is never materialised");
    float *conv_eval = read_tensor(net, 1, T * B * N);
    CHECK_OK(sf_net_forward(net, x, 1));
    float *conv_train = read_tensor(net, 1, T * B * N);
    double worst = 0;
    for (int i = 0; i < T * B * N; i++) worst = fmax(worst, fabs((double)conv_train[i] - conv_eval[i]));
    CHECK(worst < 1e-5, "the convolution's output read after a training forward is off by %g", worst);
    free(conv_eval);
    free(conv_train);
    free(h);
    free(s);
    free(pooled);
    sf_net_free(net);
}

int main(void)
{
    test_mlp_tensors();
    test_membrane_errors();
    test_conv_block();
    return tu_finish("test_net_inspect");
}
