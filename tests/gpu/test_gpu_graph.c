/* test_gpu_graph.c — the training step replayed as a CUDA graph computes what the plain step computes: two copies
 * of a small net (conv → BN → LIF → maxpool → linear → BN → LIF → linear, leaky readout), one on a backend with
 * graphs and one created with sf_cuda_options.graph = 0, train on the same batches. Covers SGD and AdamW, an eval step
 * between training steps, a recompile to another batch size (the graph is recorded anew), a net with dropout,
 * which must stay on the plain path, the 16-bit precisions (bf16 with SGD, fp16 with AdamW: its loss scale is
 * read from device memory inside the graph), and an event-driven net whose layers switch paths from step to step
 * (each combination of paths keeps its own recording, replayed when it comes back), its batches given to the graph
 * net from page-locked memory (sf_host_alloc) and to the plain one from pageable memory. The forward and backward
 * on tensors the caller holds on the device (sf_net_forward_device, sf_net_backward_device) replay their own
 * recordings, in training and in evaluation, with the same outputs and input gradients as plain calls.
 * Bitwise: both nets run the same kernels (a fixed cuBLAS workspace keeps cuBLAS's choice the same under capture,
 * and the convolutions take the fixed im2col + SGEMM path), so losses, parameters, gradients, BN statistics and
 * optimizer states must agree to the bit; any difference is printed. */
#include "core/net_internal.h"
#include "testutil.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 4, B_MAX = 8, C_IN = 2, HW = 8, K = 5 };

static void add(sf_net *net, sf_layer_kind kind, int32_t n) { tu_add_layer(net, kind, n, 1); }

static sf_net *make(bool graphs, sf_optimizer opt, bool dropout, sf_precision prec)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.cuda.graph = graphs;
    p.precision = prec;
    /* Both nets must run the same convolution kernels: each backend times cuDNN's algorithms for itself and may pick
     * another (some are not deterministic), and one flipped spike then grows over the steps. The im2col + SGEMM
     * path is fixed and deterministic. */
    p.cuda.conv_algo = SF_CONV_ALGO_GEMM;
    p.device = (sf_device){SF_DEVICE_CUDA, 0};
    p.memory = SF_MEMORY_RECOMPUTE;
    p.readout = SF_READOUT_LEAKY;
    p.in_channels = C_IN, p.in_height = HW, p.in_width = HW;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    add(net, SF_LAYER_CONV2D, 6);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, 16);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    if (dropout) add(net, SF_LAYER_DROPOUT, 0);
    add(net, SF_LAYER_LINEAR, K);
    CHECK_OK(sf_net_compile(net, T, B_MAX));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = opt;
    o.lr = opt == SF_OPT_SGD ? 0.1f : 0.01f;
    o.momentum = 0.9f;
    o.weight_decay = 1e-3f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static void batch(int step, int64_t B, float *x, int32_t *labels)
{
    tu_randn(x, T * B * C_IN * HW * HW, 0.5f, 1.0f, 100 + (uint64_t)step);
    for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)((b * 3 + step) % K);
}

static double rel_l2(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void close_role(sf_net *a, sf_net *b, sf_tensor_role role, const char *what, double tol)
{
    int64_t na, nb;
    float *va = tu_net_read_role(a, role, &na), *vb = tu_net_read_role(b, role, &nb);
    CHECK(na == nb, "%s: %lld vs %lld values", what, (long long)na, (long long)nb);
    if (na == nb) {
        int64_t differ = 0;
        for (int64_t i = 0; i < na; i++) differ += memcmp(va + i, vb + i, sizeof(float)) != 0;
        double e = rel_l2(va, vb, na);
        printf("  %-22s rel. L2 %.3g, %lld of %lld values not bitwise equal\n", what, e, (long long)differ,
               (long long)na);
        CHECK(e <= tol, "%s differ between graph and plain steps: rel. L2 %g > %g", what, e, tol);
    }
    free(va);
    free(vb);
}

/* `steps` training steps at batch size B on both nets, an eval step after the second. */
static void train_both(sf_net *g, sf_net *p, int steps, int64_t B, int first)
{
    static float x[T * B_MAX * C_IN * HW * HW];
    int32_t labels[B_MAX];
    sf_step_result rg = {0}, rp = {0};
    for (int s = first; s < first + steps; s++) {
        batch(s, B, x, labels);
        CHECK_OK(sf_net_train_step(g, x, labels, &rg));
        CHECK_OK(sf_net_train_step(p, x, labels, &rp));
        CHECK(rg.loss == rp.loss && rg.correct == rp.correct && rg.skipped == rp.skipped,
              "step %d: loss %.9g / %d correct with the graph, %.9g / %d without", s, rg.loss, rg.correct, rp.loss,
              rp.correct);
        if (s == first + 1) {
            sf_step_result eg, ep;
            CHECK_OK(sf_net_eval_step(g, x, labels, &eg));
            CHECK_OK(sf_net_eval_step(p, x, labels, &ep));
            CHECK(eg.loss == ep.loss, "eval loss differs: %.9g vs %.9g", eg.loss,
                  ep.loss);
        }
    }
}

static void compare(sf_optimizer opt, sf_precision prec)
{
    printf("%s, %s:\n", opt == SF_OPT_SGD ? "SGD" : "AdamW", sf_precision_name(prec));
    sf_net *g = make(true, opt, false, prec), *p = make(false, opt, false, prec);
    CHECK(g->be->graph_begin != NULL && p->be->graph_begin == NULL, "sf_cuda_options.graph did not select graphs");
    int64_t n0;
    float *initial = tu_net_read_role(g, SF_ROLE_PARAM, &n0);
    train_both(g, p, 8, B_MAX, 0);
    CHECK(sf_net_step_replayed(g) && !g->recorded[SF_BODY_TRAIN_STEP].failed, "no graph was recorded (capture failed: %s)", sf_last_error());
    CHECK_OK(sf_net_compile(g, T, B_MAX / 2));
    CHECK_OK(sf_net_compile(p, T, B_MAX / 2));
    CHECK(!sf_net_step_replayed(g), "the recompile kept the old graph");
    train_both(g, p, 4, B_MAX / 2, 8);
    CHECK(sf_net_step_replayed(g), "no graph after the recompile");
    int64_t n1;
    float *trained = tu_net_read_role(g, SF_ROLE_PARAM, &n1);
    CHECK(n0 == n1 && rel_l2(trained, initial, n0) > 1e-5, "the parameters hardly moved: the steps did not train");
    free(initial);
    free(trained);
    close_role(g, p, SF_ROLE_PARAM, "parameters", 0.0);
    close_role(g, p, SF_ROLE_BUFFER, "BN running statistics", 0.0);
    close_role(g, p, SF_ROLE_OPTIMIZER, "optimizer states", 0.0);
    close_role(g, p, SF_ROLE_GRAD, "gradients", 0.0);
    sf_net_free(g);
    sf_net_free(p);
}

/* A spiking MLP on spike input with sparse = auto, its crossovers set before each step so that the two event-driven
 * layers take the combinations A, B, A, C, B, A of forward paths: three recordings, each replayed when its paths
 * come back, and the same results as the plain steps. */
static void switching_paths(void)
{
    printf("event-driven paths switching between steps:\n");
    sf_net *nets[2];
    for (int k = 0; k < 2; k++) {
        sf_net_params p;
        sf_net_default_params(&p);
        p.cuda.graph = k == 0;
        p.device = (sf_device){SF_DEVICE_CUDA, 0};
        p.in_channels = 40;
        p.input_spikes = 1;
        p.sparse = SF_SPARSE_AUTO;
        p.sparse_crossover = 0.5f; /* fixed: nothing timed, both nets alike */
        CHECK_OK(sf_net_create(&p, &nets[k]));
        add(nets[k], SF_LAYER_LINEAR, 24);
        add(nets[k], SF_LAYER_LIF, 0);
        add(nets[k], SF_LAYER_LINEAR, K);
        CHECK_OK(sf_net_compile(nets[k], T, B_MAX));
        sf_optim_params o;
        sf_optim_default_params(&o);
        o.lr = 0.05f;
        CHECK_OK(sf_net_set_optimizer(nets[k], &o));
    }
    static const float crossover[][2] = {{1.0f, 1.0f}, {0.0f, 1.0f}, {1.0f, 1.0f},
                                         {1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 1.0f}};
    float x[T * B_MAX * 40];
    int32_t labels[B_MAX];
    const sf_device gpu = {SF_DEVICE_CUDA, 0};
    float *locked = sf_host_alloc(gpu, sizeof x);
    struct cudaPointerAttributes at;
    CHECK(locked && cudaPointerGetAttributes(&at, locked) == cudaSuccess && at.type == cudaMemoryTypeHost,
          "sf_host_alloc on a GPU gave no page-locked memory");
    for (int s = 0; s < 7; s++) {
        for (int64_t i = 0; i < T * B_MAX * 40; i++) x[i] = (float)((i * 7919 + s * 104729) % 5 == 0);
        memcpy(locked, x, sizeof x);
        for (int64_t b = 0; b < B_MAX; b++) labels[b] = (int32_t)((b + s) % K);
        sf_step_result r[2];
        for (int k = 0; k < 2; k++) {
            if (s > 0) /* the first step runs plainly and measures the densities the choices read */
                for (int32_t layer = 0; layer < 3; layer += 2) {
                    sf_layer_sparsity q[3];
                    sf_net_layer_sparsity(nets[k], q, 3);
                    q[layer].crossover_forward = q[layer].crossover_backward = crossover[s - 1][layer / 2];
                    CHECK_OK(sf_net_set_layer_sparsity(nets[k], layer, &q[layer]));
                }
            CHECK_OK(sf_net_train_step(nets[k], k == 0 ? locked : x, labels, &r[k]));
        }
        CHECK(r[0].loss == r[1].loss, "step %d: loss %.9g with graphs, %.9g without", s, r[0].loss, r[1].loss);
    }
    CHECK(nets[0]->recorded[SF_BODY_TRAIN_STEP].n == 3 && nets[0]->recorded[SF_BODY_TRAIN_STEP].plain_runs == 1,
          "%d recordings and %d plain steps, expected 3 and 1 (one per combination of paths, each replayed)",
          nets[0]->recorded[SF_BODY_TRAIN_STEP].n, nets[0]->recorded[SF_BODY_TRAIN_STEP].plain_runs);
    close_role(nets[0], nets[1], SF_ROLE_PARAM, "parameters", 0.0);
    sf_host_free(gpu, locked);
    sf_net_free(nets[0]);
    sf_net_free(nets[1]);
}

static float *device_copy(const float *host, size_t n)
{
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, n * sizeof(float)) == cudaSuccess, "cudaMalloc of %zu floats", n);
    if (host) CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    return d;
}

static bool same_on_device(const float *a, const float *b, size_t n)
{
    float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
    cudaMemcpy(ha, a, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, b, n * sizeof(float), cudaMemcpyDeviceToHost);
    const bool same = memcmp(ha, hb, n * sizeof(float)) == 0;
    free(ha), free(hb);
    return same;
}

/* Five training rounds of forward_device, backward_device (with the input's gradient) and sf_net_update, and an
 * evaluation forward after the second, on a net with graphs and one without: bitwise the same outputs, input
 * gradients and parameters, and the graph net replays recordings of both calls. */
static void device_calls(sf_precision prec)
{
    printf("forward and backward on device tensors, %s:\n", sf_precision_name(prec));
    sf_net *nets[2] = {make(true, SF_OPT_SGD, false, prec), make(false, SF_OPT_SGD, false, prec)};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(sf_net_set_input_grad(nets[k], 1));
        CHECK_OK(sf_net_compile(nets[k], T, B_MAX));
    }
    const size_t nx = (size_t)T * B_MAX * C_IN * HW * HW, ny = (size_t)T * B_MAX * K;
    static float x[T * B_MAX * C_IN * HW * HW], dy[T * B_MAX * K];
    int32_t labels[B_MAX];
    float *dev_x = device_copy(NULL, nx), *dev_dy = device_copy(NULL, ny), *y[2], *dx[2];
    for (int k = 0; k < 2; k++) y[k] = device_copy(NULL, ny), dx[k] = device_copy(NULL, nx);
    for (int s = 0; s < 5; s++) {
        batch(s, B_MAX, x, labels);
        tu_randn(dy, (int64_t)ny, 0.0f, 0.1f, 200 + (uint64_t)s);
        cudaMemcpy(dev_x, x, sizeof x, cudaMemcpyHostToDevice);
        cudaMemcpy(dev_dy, dy, sizeof dy, cudaMemcpyHostToDevice);
        for (int k = 0; k < 2; k++) {
            CHECK_OK(sf_net_forward_device(nets[k], dev_x, 1, y[k]));
            CHECK_OK(sf_net_backward_device(nets[k], dev_dy, dx[k]));
            CHECK_OK(sf_net_update(nets[k]));
        }
        CHECK(same_on_device(y[0], y[1], ny), "round %d: the outputs differ between graph and plain calls", s);
        CHECK(same_on_device(dx[0], dx[1], nx), "round %d: the input gradients differ", s);
        if (s == 1) {
            for (int k = 0; k < 2; k++) CHECK_OK(sf_net_forward_device(nets[k], dev_x, 0, y[k]));
            CHECK(same_on_device(y[0], y[1], ny), "the evaluation outputs differ between graph and plain calls");
        }
    }
    CHECK_OK(sf_net_forward_device(nets[0], dev_x, 0, y[0])); /* the evaluation's second run replays */
    const sf_net_recordings *r = nets[0]->recorded;
    CHECK(r[SF_BODY_FORWARD_TRAINING].current && r[SF_BODY_BACKWARD].current && r[SF_BODY_FORWARD_EVAL].current &&
              r[SF_BODY_FORWARD_TRAINING].plain_runs == 1 && r[SF_BODY_BACKWARD].plain_runs == 1,
          "the graph net did not replay its device calls (%d and %d plain runs)",
          r[SF_BODY_FORWARD_TRAINING].plain_runs, r[SF_BODY_BACKWARD].plain_runs);
    CHECK(nets[1]->recorded[SF_BODY_FORWARD_TRAINING].n == 0, "the net without graphs recorded one");
    close_role(nets[0], nets[1], SF_ROLE_PARAM, "parameters", 0.0);
    close_role(nets[0], nets[1], SF_ROLE_BUFFER, "BN running statistics", 0.0);
    cudaFree(dev_x), cudaFree(dev_dy);
    for (int k = 0; k < 2; k++) cudaFree(y[k]), cudaFree(dx[k]), sf_net_free(nets[k]);
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        printf("test_gpu_graph: no CUDA device\n");
        return 1;
    }
    compare(SF_OPT_SGD, SF_PRECISION_FP32);
    compare(SF_OPT_ADAMW, SF_PRECISION_FP32);
    compare(SF_OPT_SGD, SF_PRECISION_BF16);
    compare(SF_OPT_ADAMW, SF_PRECISION_FP16);
    sf_net *d = make(true, SF_OPT_SGD, true, SF_PRECISION_FP32), *dp = make(false, SF_OPT_SGD, true, SF_PRECISION_FP32);
    train_both(d, dp, 4, B_MAX, 0);
    CHECK(!sf_net_step_replayed(d), "a net with dropout was recorded");
    printf("dropout net (plain path on both):\n");
    close_role(d, dp, SF_ROLE_PARAM, "parameters", 0.0);
    sf_net_free(d);
    sf_net_free(dp);
    switching_paths();
    device_calls(SF_PRECISION_FP32);
    device_calls(SF_PRECISION_BF16);
    return tu_finish("test_gpu_graph");
}
