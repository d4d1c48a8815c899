/* test_net_api.c — the network API's contract: shape errors at sf_net_add, state errors, bad labels, NaN
 * detection without an update, named tensors, firing rates, evaluation, dropout determinism, the plan's sums and
 * steps on the input already on the device (x = NULL), a lean conv net planned alike by two compiles, a global
 * average pool equal to the pool of the plane's size. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    return d;
}

static sf_net *new_net(int32_t c, int32_t h, int32_t w, uint64_t seed)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = c;
    p.in_height = h;
    p.in_width = w;
    p.seed = seed;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_net_api"));
    return net;
}

static void test_shape_errors(void)
{
    sf_net *net = new_net(2, 8, 8, 0);
    sf_layer_desc conv = layer(SF_LAYER_CONV2D);
    conv.out_channels = 4;
    CHECK_OK(sf_net_add(net, &conv, NULL));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 3;
    sf_status s = sf_net_add(net, &fc, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "flatten"), "linear after conv: %s", sf_last_error());
    sf_layer_desc pool = layer(SF_LAYER_MAXPOOL2D);
    pool.kernel = 9;
    s = sf_net_add(net, &pool, NULL);
    CHECK(s == SF_ERR_INVALID, "oversized pool accepted");
    pool.kernel = 3, pool.stride = 2, pool.padding = 2;
    s = sf_net_add(net, &pool, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "padding"), "pool padding 2 > 3/2: %s", sf_last_error());
    pool.padding = 1; /* SpikingJelly's ResNet stem: 6x6 -> 3x3 */
    int32_t id, chw[3];
    CHECK_OK(sf_net_add(net, &pool, &id));
    CHECK(sf_net_tensor_shape(net, id, chw) == SF_OK && chw[0] == 4 && chw[1] == 3 && chw[2] == 3,
          "bordered max-pool 3/2/1 of 4x6x6: %dx%dx%d", chw[0], chw[1], chw[2]);
    sf_layer_desc sum = layer(SF_LAYER_ADD);
    sum.input2 = 0; /* 2x8x8 input vs 4x3x3 pool output */
    s = sf_net_add(net, &sum, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "differ"), "add of different shapes: %s", sf_last_error());
    sf_layer_desc lif = layer(SF_LAYER_LIF);
    lif.lif.tau = 0.5f;
    s = sf_net_add(net, &lif, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "tau"), "tau 0.5: %s", sf_last_error());
    CHECK(sf_net_compile(net, 0, 4) == SF_ERR_INVALID, "T = 0 compiled");
    sf_net_free(net);

    sf_net_params p;
    sf_net_default_params(&p);
    p.in_height = 0;
    sf_net *bad = NULL;
    CHECK(sf_net_create(&p, &bad) == SF_ERR_INVALID && !bad, "zero-sized input accepted");
    if (sf_cuda_device_count() == 0) {
        sf_net_default_params(&p);
        p.device.kind = SF_DEVICE_CUDA;
        s = sf_net_create(&p, &bad);
        CHECK(s != SF_OK && !bad && strlen(sf_last_error()) > 0, "cuda without a GPU: %s", sf_status_str(s));
    }
    sf_device d;
    CHECK(sf_device_parse("cuda:1", &d) == SF_OK && d.kind == SF_DEVICE_CUDA && d.index == 1, "cuda:1");
    CHECK(sf_device_parse("gpu", &d) == SF_ERR_INVALID, "'gpu' accepted");
}

/* flatten -> linear 12 -> LIF -> dropout -> linear 4 */
static sf_net *small_net(uint64_t seed, int64_t T, int64_t B)
{
    sf_net *net = new_net(3, 2, 2, seed);
    sf_layer_desc d = layer(SF_LAYER_FLATTEN);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LINEAR);
    d.out_features = 12;
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LIF);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_DROPOUT);
    d.dropout_p = 0.3f;
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LINEAR);
    d.out_features = 4;
    CHECK_OK(sf_net_add(net, &d, NULL));
    CHECK_OK(sf_net_compile(net, T, B));
    return net;
}

static void test_states_and_steps(void)
{
    const int64_t T = 3, B = 5;
    sf_net *net = small_net(7, T, B);
    float x[3 * 5 * 12];
    tu_randn(x, T * B * 12, 1.0f, 1.0f, 3);
    int32_t labels[5] = {0, 1, 2, 3, 1};
    sf_step_result r;

    CHECK(sf_net_loss(net, labels, &r) == SF_ERR_STATE, "loss before forward");
    CHECK(sf_net_train_step(net, x, labels, &r) == SF_ERR_STATE, "train step without an optimizer");
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAMW;
    o.lr = 1e-2f;
    o.weight_decay = 0.01f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    int32_t bad[5] = {0, 1, 4, 0, 0};
    CHECK(sf_net_train_step(net, x, bad, &r) == SF_ERR_INVALID && strstr(sf_last_error(), "label 4"),
          "label out of range: %s", sf_last_error());
    CHECK_OK(sf_net_train_step(net, x, labels, &r));
    CHECK(isfinite(r.loss) && r.loss > 0 && r.correct >= 0 && r.correct <= B, "step result %g %d", r.loss, r.correct);

    /* Names and shapes follow PyTorch's state_dict of the same nn.Sequential. */
    sf_tensor_info info;
    CHECK(sf_net_tensor_count(net, SF_ROLE_PARAM) == 4, "4 parameter tensors");
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, 0, &info));
    CHECK(strcmp(info.name, "1.weight") == 0 && info.ndim == 2 && info.shape[0] == 12 && info.shape[1] == 12,
          "first parameter %s", info.name);
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_OPTIMIZER, 6, &info)); /* [m of 4 params, v of 4] */
    CHECK(strcmp(info.name, "4.weight.adam_v") == 0, "optimizer tensor %s", info.name);

    float rates[4] = {-1, -1, -1, -1};
    CHECK(sf_net_firing_rates(net, rates, 4) == 1, "one LIF layer");
    CHECK(rates[0] >= 0.0f && rates[0] <= 1.0f, "firing rate %g", rates[0]);

    CHECK_OK(sf_net_eval_step(net, x, labels, &r));
    float logits[5 * 4];
    CHECK_OK(sf_net_logits(net, logits));
    int32_t correct = 0;
    for (int b = 0; b < B; b++) {
        int best = 0;
        for (int k = 1; k < 4; k++)
            if (logits[b * 4 + k] > logits[b * 4 + best]) best = k;
        correct += best == labels[b];
    }
    CHECK(correct == r.correct, "eval correct %d vs argmax of logits %d", r.correct, correct);
    CHECK_OK(sf_net_eval_step(net, x, NULL, &r));

    /* A NaN parameter is caught before the update, and the parameters stay as they were. */
    int64_t n;
    float *w = tu_net_read_role(net, SF_ROLE_PARAM, &n);
    float *poisoned = malloc(12 * 12 * sizeof *poisoned);
    memcpy(poisoned, w, 12 * 12 * sizeof *poisoned);
    poisoned[5] = NAN;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, 0, poisoned));
    CHECK(sf_net_train_step(net, x, labels, &r) == SF_ERR_NUMERIC, "NaN not detected");
    int64_t n2;
    float *after = tu_net_read_role(net, SF_ROLE_PARAM, &n2);
    CHECK(memcmp(after + 12 * 12, w + 12 * 12, (size_t)(n - 144) * sizeof(float)) == 0,
          "parameters changed by a step that saw NaN");
    free(w);
    free(after);
    free(poisoned);

    sf_memory_plan plan;
    CHECK_OK(sf_net_memory_plan(net, &plan));
    CHECK(plan.total == plan.params + plan.grads + plan.optimizer + plan.buffers + plan.saved + plan.workspace,
          "plan total");
    CHECK(plan.optimizer == 2 * plan.params, "AdamW keeps two moments");
    sf_net_free(net);
}

/* The same seed gives the same run (dropout included); another seed another; state round-trips. */
static void test_determinism(void)
{
    const int64_t T = 2, B = 4;
    float x[2 * 4 * 12];
    tu_randn(x, T * B * 12, 1.0f, 1.0f, 5);
    int32_t labels[4] = {3, 2, 1, 0};
    float *runs[3];
    int64_t n = 0;
    uint64_t seeds[3] = {11, 11, 12};
    for (int k = 0; k < 3; k++) {
        sf_net *net = small_net(seeds[k], T, B);
        sf_optim_params o;
        sf_optim_default_params(&o);
        o.momentum = 0.9f;
        o.nesterov = 1;
        CHECK_OK(sf_net_set_optimizer(net, &o));
        sf_step_result r;
        for (int s = 0; s < 5; s++) CHECK_OK(sf_net_train_step(net, x, labels, &r));
        sf_net_state st;
        CHECK_OK(sf_net_get_state(net, &st));
        CHECK(st.optimizer_steps == 5 && st.rng_counter == 5 && st.rng_seed == seeds[k], "state %lld %llu",
              (long long)st.optimizer_steps, (unsigned long long)st.rng_counter);
        runs[k] = tu_net_read_role(net, SF_ROLE_PARAM, &n);
        sf_net_free(net);
    }
    CHECK(memcmp(runs[0], runs[1], (size_t)n * sizeof(float)) == 0, "same seed, different parameters");
    CHECK(memcmp(runs[0], runs[2], (size_t)n * sizeof(float)) != 0, "different seeds, same parameters");
    for (int k = 0; k < 3; k++) free(runs[k]);
}

/* x = NULL runs on the input of the last call that gave one, still on the device; before any there is none. The
 * net starts with a pool, whose backward needs no input, so the plan must keep the input's buffer for it. */
static void test_reused_input(void)
{
    const int64_t T = 2, B = 3;
    float x[2][2 * 3 * 12];
    tu_randn(x[0], T * B * 12, 1.0f, 1.0f, 8);
    tu_randn(x[1], T * B * 12, 1.0f, 1.0f, 9);
    int32_t labels[3] = {0, 1, 2};
    float *params[2];
    int64_t n = 0;
    for (int k = 0; k < 2; k++) { /* k = 0: x[1] given twice; k = 1: then NULL */
        sf_net *net = new_net(3, 2, 2, 21);
        sf_layer_desc d = layer(SF_LAYER_AVGPOOL2D);
        d.kernel = 2;
        CHECK_OK(sf_net_add(net, &d, NULL));
        d = layer(SF_LAYER_FLATTEN);
        CHECK_OK(sf_net_add(net, &d, NULL));
        d = layer(SF_LAYER_LINEAR);
        d.out_features = 16;
        CHECK_OK(sf_net_add(net, &d, NULL));
        d = layer(SF_LAYER_LIF);
        CHECK_OK(sf_net_add(net, &d, NULL));
        d = layer(SF_LAYER_LINEAR);
        d.out_features = 3;
        CHECK_OK(sf_net_add(net, &d, NULL));
        CHECK_OK(sf_net_compile(net, T, B));
        sf_optim_params o;
        sf_optim_default_params(&o);
        CHECK_OK(sf_net_set_optimizer(net, &o));
        sf_step_result r;
        CHECK(sf_net_train_step(net, NULL, labels, &r) == SF_ERR_STATE, "a step with x = NULL before any input");
        CHECK(sf_net_eval_step(net, NULL, labels, &r) == SF_ERR_STATE, "an eval with x = NULL before any input");
        CHECK_OK(sf_net_train_step(net, x[0], labels, &r));
        CHECK_OK(sf_net_train_step(net, x[1], labels, &r));
        CHECK_OK(sf_net_train_step(net, k ? NULL : x[1], labels, &r));
        CHECK_OK(sf_net_eval_step(net, k ? NULL : x[1], labels, &r));
        params[k] = tu_net_read_role(net, SF_ROLE_PARAM, &n);
        CHECK_OK(sf_net_compile(net, T, B));
        CHECK(sf_net_train_step(net, NULL, labels, &r) == SF_ERR_STATE, "x = NULL after a new compile");
        sf_net_free(net);
    }
    CHECK(memcmp(params[0], params[1], (size_t)n * sizeof(float)) == 0, "x = NULL trained otherwise than x again");
    for (int k = 0; k < 2; k++) free(params[k]);
}

/* PyTorch's defaults: weights and biases of linear and conv U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BN weight 1, bias 0,
 * running mean 0, running var 1. Checked by range and variance (bound^2/3). */
static void check_uniform(sf_net *net, int32_t i, double bound)
{
    sf_tensor_info info;
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, i, &info));
    float *w = malloc((size_t)info.numel * sizeof *w);
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, i, w));
    double sum = 0, sq = 0, maxabs = 0;
    for (int64_t k = 0; k < info.numel; k++) {
        sum += w[k];
        sq += (double)w[k] * w[k];
        maxabs = fmax(maxabs, fabs(w[k]));
    }
    double mean = sum / info.numel, var = sq / info.numel - mean * mean, expect = bound * bound / 3;
    CHECK(maxabs <= bound, "%s: |w| up to %g beyond the bound %g", info.name, maxabs, bound);
    CHECK(fabs(var - expect) <= 0.05 * expect, "%s: variance %g, expected %g", info.name, var, expect);
    CHECK(fabs(mean) <= 4 * sqrt(expect / info.numel), "%s: mean %g", info.name, mean);
    free(w);
}

static void test_init(void)
{
    sf_net *net = new_net(16, 10, 10, 3);
    sf_layer_desc d = layer(SF_LAYER_CONV2D);
    d.out_channels = 300;
    CHECK_OK(sf_net_add(net, &d, NULL)); /* fan_in 16·3·3 = 144 */
    d = layer(SF_LAYER_BATCHNORM);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_FLATTEN);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LINEAR);
    d.out_features = 40;
    CHECK_OK(sf_net_add(net, &d, NULL)); /* fan_in 300·8·8 = 19200 */
    check_uniform(net, 0, 1.0 / 12.0);
    check_uniform(net, 4, 1.0 / sqrt(19200.0));
    float g[300], b[300];
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, 2, g));
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, 3, b));
    float rm[300], rv[300];
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_BUFFER, 0, rm));
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_BUFFER, 1, rv));
    int bad = 0;
    for (int c = 0; c < 300; c++) bad += g[c] != 1.0f || b[c] != 0.0f || rm[c] != 0.0f || rv[c] != 1.0f;
    CHECK(bad == 0, "%d BN channels not at weight 1, bias 0, mean 0, var 1", bad);
    sf_net_free(net);
}

/* A conv net under memory = lean, built and compiled twice, plans the same memory to the byte and allocates the same
 * peak over a step: the CPU times nothing its plan follows, so it has no convolution choices to record, and it
 * says so when given one. */
static sf_net *lean_conv_net(void)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = SF_MEMORY_LEAN;
    p.in_channels = 2, p.in_height = 9, p.in_width = 7;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_net_api"));
    sf_layer_desc c = layer(SF_LAYER_CONV2D);
    c.out_channels = 6, c.padding = 1;
    CHECK_OK(sf_net_add(net, &c, NULL));
    sf_layer_desc lif = layer(SF_LAYER_LIF);
    CHECK_OK(sf_net_add(net, &lif, NULL));
    c.out_channels = 5, c.stride = 2;
    CHECK_OK(sf_net_add(net, &c, NULL));
    CHECK_OK(sf_net_add(net, &lif, NULL));
    sf_layer_desc flat = layer(SF_LAYER_FLATTEN), lin = layer(SF_LAYER_LINEAR);
    lin.out_features = 4;
    CHECK_OK(sf_net_add(net, &flat, NULL));
    CHECK_OK(sf_net_add(net, &lin, NULL));
    CHECK_OK(sf_net_compile(net, 3, 5));
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static void test_lean_plan_repeats(void)
{
    float x[3 * 5 * 2 * 9 * 7];
    tu_randn(x, 3 * 5 * 2 * 9 * 7, 0.5f, 1.0f, 21);
    int32_t labels[5] = {0, 1, 2, 3, 1};
    sf_memory_plan plan[2];
    size_t peak[2];
    for (int k = 0; k < 2; k++) {
        sf_net *net = lean_conv_net();
        CHECK_OK(sf_net_memory_plan(net, &plan[k]));
        sf_step_result r;
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
        peak[k] = sf_net_peak_bytes(net);
        char text[8] = "x";
        size_t len = 1;
        CHECK_OK(sf_net_conv_choices(net, text, sizeof text, &len));
        CHECK(len == 0 && text[0] == 0, "the CPU recorded %zu bytes of convolution choices", len);
        const sf_status st = sf_net_set_conv_choice(net, "conv 15 2 9 7 6 3 1 1 9 7 0 0 0 0 0 1 3 15 0 1 3 15 0 1 3 15");
        CHECK(st == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "cpu backend times no convolution choices"),
              "a convolution choice given to the CPU: %s, %s", sf_status_str(st), sf_last_error());
        sf_net_free(net);
    }
    CHECK(memcmp(&plan[0], &plan[1], sizeof plan[0]) == 0 && plan[0].workspace > 0,
          "two compiles of one lean net planned %zu and %zu bytes (workspace %zu, %zu)", plan[0].total, plan[1].total,
          plan[0].workspace, plan[1].workspace);
    CHECK(peak[0] == peak[1], "two compiles of one lean net peaked at %zu and %zu bytes", peak[0], peak[1]);
}

/* conv 3x3 on 2x20x20 -> LIF -> avgpool (kernel k; 0: global) -> flatten -> linear 3, trained 3 steps */
static float *pool_net_params(int32_t k, int64_t *n)
{
    sf_net *net = new_net(2, 20, 20, 5);
    sf_layer_desc d = layer(SF_LAYER_CONV2D);
    d.out_channels = 4;
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LIF);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_AVGPOOL2D);
    d.kernel = k;
    int32_t id, chw[3];
    CHECK_OK(sf_net_add(net, &d, &id));
    CHECK(sf_net_tensor_shape(net, id, chw) == SF_OK && chw[0] == 4 && chw[1] == 1 && chw[2] == 1,
          "avgpool %d of 4x18x18: %dx%dx%d", k, chw[0], chw[1], chw[2]);
    d = layer(SF_LAYER_FLATTEN);
    CHECK_OK(sf_net_add(net, &d, NULL));
    d = layer(SF_LAYER_LINEAR);
    d.out_features = 3;
    CHECK_OK(sf_net_add(net, &d, NULL));
    CHECK_OK(sf_net_compile(net, 2, 3));
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    float x[2 * 3 * 2 * 20 * 20];
    tu_randn(x, 2 * 3 * 2 * 20 * 20, 1.0f, 2.0f, 9);
    int32_t labels[3] = {0, 2, 1};
    sf_step_result r;
    for (int s = 0; s < 3; s++) CHECK_OK(sf_net_train_step(net, x, labels, &r));
    float *params = tu_net_read_role(net, SF_ROLE_PARAM, n);
    sf_net_free(net);
    return params;
}

/* kernel 0 (size = global) pools the whole plane, whatever its size: bitwise the pool of kernel 18 on 18x18; over
 * a plane that is not square, or with a stride, and for a max pool, it is an error. */
static void test_global_pool(void)
{
    int64_t n_global = 0, n_sized = 0;
    float *global = pool_net_params(0, &n_global), *sized = pool_net_params(18, &n_sized);
    CHECK(n_global == n_sized && n_global > 0 && memcmp(global, sized, (size_t)n_global * sizeof(float)) == 0,
          "global average pool trains unlike a pool of the plane's size");
    free(global), free(sized);

    sf_net *net = new_net(2, 6, 4, 0);
    sf_layer_desc pool = layer(SF_LAYER_AVGPOOL2D);
    pool.kernel = 0;
    sf_status s = sf_net_add(net, &pool, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "square"), "global pool of 6x4: %s", sf_last_error());
    sf_net_free(net);
    net = new_net(2, 6, 6, 0);
    pool.stride = 2;
    s = sf_net_add(net, &pool, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "stride"), "global pool with stride: %s", sf_last_error());
    pool = layer(SF_LAYER_MAXPOOL2D);
    pool.kernel = 0;
    s = sf_net_add(net, &pool, NULL);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "avgpool only"), "global max pool: %s", sf_last_error());
    sf_net_free(net);
}

int main(void)
{
    test_init();
    test_shape_errors();
    test_states_and_steps();
    test_determinism();
    test_reused_input();
    test_lean_plan_repeats();
    test_global_pool();
    return tu_finish("test_net_api");
}
