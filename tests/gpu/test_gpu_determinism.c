/* test_gpu_determinism.c — sf_cuda_options.deterministic ([train] deterministic): two runs of a conv net (conv with
 * bias → BN → LIF → strided conv → BN → LIF → maxpool → linear; conv shapes large enough that cuDNN's fastest
 * backward algorithms are the atomic ones) train to the same bits, and a run stopped after a few steps, saved to a
 * checkpoint, restored into a new net (a new backend, whose convolution algorithms are chosen again) and continued,
 * ends with the bits of the uninterrupted run. Covered in fp32 twice: SGD with momentum on the CUDA-graph path, and
 * AdamW with dropout (plain path, dropout RNG restored); then SGD again with 16-bit activations (bf16, and fp16 with
 * its loss scale, which the checkpoint carries). Bitwise: losses, parameters, gradients, BN statistics and
 * optimizer states; any difference is printed. For comparison, the same two runs without deterministic mode report
 * how many values differ (information only: they may or may not). */
#include "core/net_internal.h"
#include "cuda/cuda_backend.h"
#include "testutil.h"
#include "train/checkpoint.h"

#include <stdlib.h>
#include <string.h>

enum { T = 4, B = 16, C_IN = 3, HW = 16, K = 10, STEPS = 6, STOP = 3 };

static void add(sf_net *net, sf_layer_kind kind, int32_t n, int32_t stride)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    if (kind == SF_LAYER_CONV2D) d.out_channels = n, d.kernel = 3, d.padding = 1, d.stride = stride;
    if (kind == SF_LAYER_LINEAR) d.out_features = n;
    if (kind == SF_LAYER_MAXPOOL2D) d.kernel = 2, d.stride = 2;
    if (kind == SF_LAYER_DROPOUT) d.dropout_p = 0.2f;
    CHECK_OK(sf_net_add(net, &d, NULL));
}

static sf_net *make(int deterministic, int dropout, sf_precision prec)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = (sf_device){SF_DEVICE_CUDA, 0};
    p.precision = prec;
    p.cuda.deterministic = deterministic;
    p.in_channels = C_IN, p.in_height = HW, p.in_width = HW;
    p.seed = 5;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    add(net, SF_LAYER_CONV2D, 64, 1);
    add(net, SF_LAYER_BATCHNORM, 0, 0);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_CONV2D, 128, 2);
    add(net, SF_LAYER_BATCHNORM, 0, 0);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0, 0);
    add(net, SF_LAYER_FLATTEN, 0, 0);
    if (dropout) add(net, SF_LAYER_DROPOUT, 0, 0);
    add(net, SF_LAYER_LINEAR, K, 0);
    CHECK_OK(sf_net_compile(net, T, B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = dropout ? SF_OPT_ADAMW : SF_OPT_SGD;
    o.lr = dropout ? 0.01f : 0.1f;
    o.momentum = 0.9f;
    o.weight_decay = 1e-3f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* Training steps first..last-1 on batches that depend only on the step; returns the last loss. */
static float train(sf_net *net, int first, int last)
{
    static float x[T * B * C_IN * HW * HW];
    int32_t labels[B];
    sf_step_result r = {0};
    for (int s = first; s < last; s++) {
        tu_randn(x, T * B * C_IN * HW * HW, 0.5f, 1.0f, 300 + (uint64_t)s);
        for (int b = 0; b < B; b++) labels[b] = (b * 7 + s) % K;
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
    }
    return r.loss;
}

/* Values of every role that differ bitwise between two nets (-1: the nets hold different tensor counts). */
static int64_t differing(sf_net *a, sf_net *b, int verbose)
{
    static const struct {
        sf_tensor_role role;
        const char *name;
    } roles[] = {{SF_ROLE_PARAM, "parameters"},
                 {SF_ROLE_GRAD, "gradients"},
                 {SF_ROLE_BUFFER, "BN statistics"},
                 {SF_ROLE_OPTIMIZER, "optimizer state"}};
    int64_t total = 0;
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++) {
        int64_t na, nb, differ = 0;
        float *va = tu_net_read_role(a, roles[r].role, &na), *vb = tu_net_read_role(b, roles[r].role, &nb);
        if (na != nb) differ = -1;
        for (int64_t i = 0; na == nb && i < na; i++) differ += memcmp(va + i, vb + i, sizeof(float)) != 0;
        if (verbose) printf("    %-16s %lld of %lld values differ\n", roles[r].name, (long long)differ, (long long)na);
        free(va);
        free(vb);
        if (differ < 0) return -1;
        total += differ;
    }
    return total;
}

static void two_runs(int dropout, sf_precision prec)
{
    sf_net *a = make(1, dropout, prec), *b = make(1, dropout, prec);
    float la = train(a, 0, STEPS), lb = train(b, 0, STEPS);
    printf("  two deterministic runs (loss %.6f, %.6f):\n", la, lb);
    CHECK(memcmp(&la, &lb, sizeof la) == 0, "losses differ: %.9g vs %.9g", la, lb);
    CHECK(differing(a, b, 1) == 0, "two deterministic runs differ");
    if (!dropout) {
        char report[16384];
        sf_cuda_conv_report(a->be, report, sizeof report);
        fputs(report, stdout);
    }
    sf_net_free(a);
    sf_net_free(b);
    sf_net *c = make(0, dropout, prec), *d = make(0, dropout, prec);
    train(c, 0, STEPS);
    train(d, 0, STEPS);
    printf("  two runs without deterministic mode (information): %lld values differ\n", (long long)differing(c, d, 0));
    sf_net_free(c);
    sf_net_free(d);
}

static void resumed_run(int dropout, sf_precision prec, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/step%d.safetensors", dir, STOP);
    sf_net *whole = make(1, dropout, prec), *first = make(1, dropout, prec);
    float lw = train(whole, 0, STEPS);
    train(first, 0, STOP);
    sf_checkpoint_info info = {.config = "[train]\n", .epoch = 0, .step = STOP, .best_metric = -1, .best_step = -1};
    CHECK_OK(sf_checkpoint_save(first, &info, path));
    sf_net_free(first);
    sf_net *second = make(1, dropout, prec);
    sf_safetensors *st = NULL;
    sf_checkpoint_info got;
    CHECK_OK(sf_checkpoint_open(path, &st, &got));
    if (st) CHECK_OK(sf_checkpoint_restore(st, second, 1));
    sf_safetensors_free(st);
    float lr = train(second, STOP, STEPS);
    printf("  resumed after step %d against uninterrupted (loss %.6f, %.6f):\n", STOP, lr, lw);
    CHECK(memcmp(&lr, &lw, sizeof lr) == 0, "losses differ: %.9g vs %.9g", lr, lw);
    CHECK(differing(second, whole, 1) == 0, "the resumed run differs from the uninterrupted one");
    sf_net_free(whole);
    sf_net_free(second);
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        printf("test_gpu_determinism: no CUDA device\n");
        return 1;
    }
    char dir[] = "/tmp/sf_gpu_determinism.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    const struct {
        int dropout;
        sf_precision prec;
    } cases[] = {{0, SF_PRECISION_FP32}, {1, SF_PRECISION_FP32}, {0, SF_PRECISION_BF16}, {0, SF_PRECISION_FP16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("%s, %s:\n", cases[i].dropout ? "AdamW with dropout (plain path)" : "SGD, momentum (CUDA graph)",
               sf_precision_name(cases[i].prec));
        two_runs(cases[i].dropout, cases[i].prec);
        resumed_run(cases[i].dropout, cases[i].prec, dir);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_gpu_determinism");
}
