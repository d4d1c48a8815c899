/* test_gpu_checkpoint.c — checkpoints across devices: a net trained on the GPU is saved, restored into the same net
 * on the CPU (every parameter, BN statistic, optimizer state and the RNG position to the bit), evaluates there as on
 * the GPU (losses and logits within float rounding), trains on, and is restored on the GPU again to the bit and
 * trains on there. The file is the one format `spikefuse train --resume DIR --device cpu|cuda` and `spikefuse eval
 * --device` read (src/train/checkpoint.h). */
#include "testutil.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 4, B = 8, C_IN = 2, HW = 8, K = 5 };

static sf_net *make(sf_device_kind kind)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = (sf_device){kind, 0};
    p.in_channels = C_IN, p.in_height = HW, p.in_width = HW;
    p.seed = kind == SF_DEVICE_CPU ? 99 : 7; /* different initial weights: only the restore may make them equal */
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    static const sf_layer_kind layers[] = {SF_LAYER_CONV2D,  SF_LAYER_BATCHNORM, SF_LAYER_LIF,    SF_LAYER_FLATTEN,
                                           SF_LAYER_DROPOUT, SF_LAYER_LINEAR,    SF_LAYER_LIF,    SF_LAYER_LINEAR};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        sf_layer_desc d;
        sf_layer_default_desc(layers[i], &d);
        if (layers[i] == SF_LAYER_CONV2D) d.out_channels = 4, d.kernel = 3, d.padding = 1;
        if (layers[i] == SF_LAYER_DROPOUT) d.dropout_p = 0.2f;
        if (layers[i] == SF_LAYER_LINEAR) d.out_features = i + 1 < sizeof layers / sizeof layers[0] ? 16 : K;
        CHECK_OK(sf_net_add(net, &d, NULL));
    }
    CHECK_OK(sf_net_compile(net, T, B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAM;
    o.lr = 0.01f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* Noise with a brighter row per class (row = label, in every channel and step), so the net has something to learn. */
static void batch(int step, float *x, int32_t *labels)
{
    tu_randn(x, T * B * C_IN * HW * HW, 0.0f, 1.0f, 500 + (uint64_t)step);
    for (int b = 0; b < B; b++) {
        labels[b] = (b * 3 + step) % K;
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C_IN; c++)
                for (int w = 0; w < HW; w++) x[(((t * B + b) * C_IN + c) * HW + labels[b]) * HW + w] += 2.0f;
    }
}

static float train(sf_net *net, int first, int last)
{
    static float x[T * B * C_IN * HW * HW];
    int32_t labels[B];
    sf_step_result r = {0};
    for (int s = first; s < last; s++) {
        batch(s, x, labels);
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
    }
    return r.loss;
}

/* Saves `from` to `path` and restores it into `to`; every saved tensor and the net state must arrive bitwise. */
static void move(sf_net *from, sf_net *to, const char *path, const char *what)
{
    sf_checkpoint_info info = {.config = "[train]\n", .best_metric = -1, .best_step = -1};
    CHECK_OK(sf_checkpoint_save(from, &info, path));
    sf_safetensors *st = NULL;
    sf_checkpoint_info got;
    CHECK_OK(sf_checkpoint_open(path, &st, &got));
    if (st) CHECK_OK(sf_checkpoint_restore(st, to, 1));
    sf_safetensors_free(st);
    static const sf_tensor_role roles[] = {SF_ROLE_PARAM, SF_ROLE_BUFFER, SF_ROLE_OPTIMIZER};
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++) {
        int64_t na, nb;
        float *a = tu_net_read_role(from, roles[r], &na), *b = tu_net_read_role(to, roles[r], &nb);
        CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0, "%s: role %d not restored bitwise", what,
              (int)roles[r]);
        free(a);
        free(b);
    }
    sf_net_state sa, sb;
    CHECK_OK(sf_net_get_state(from, &sa));
    CHECK_OK(sf_net_get_state(to, &sb));
    CHECK(sa.optimizer_steps == sb.optimizer_steps && sa.rng_seed == sb.rng_seed && sa.rng_counter == sb.rng_counter,
          "%s: net state not restored", what);
    printf("  %s: restored bitwise (%lld optimizer steps)\n", what, (long long)sb.optimizer_steps);
}

/* The same evaluation batch on both nets: losses and logits agree within float rounding. */
static void same_eval(sf_net *a, sf_net *b)
{
    static float x[T * B * C_IN * HW * HW];
    int32_t labels[B];
    float la[B * K], lb[B * K];
    batch(1000, x, labels);
    sf_step_result ra, rb;
    CHECK_OK(sf_net_eval_step(a, x, labels, &ra));
    CHECK_OK(sf_net_logits(a, la));
    CHECK_OK(sf_net_eval_step(b, x, labels, &rb));
    CHECK_OK(sf_net_logits(b, lb));
    double worst = 0;
    for (int i = 0; i < B * K; i++) worst = fmax(worst, fabs((double)la[i] - lb[i]));
    printf("  eval on the GPU and the CPU: loss %.6f vs %.6f, largest logit difference %.3g\n", ra.loss, rb.loss,
           worst);
    CHECK(fabs((double)ra.loss - rb.loss) <= 1e-4 * fmax(1.0, fabs(ra.loss)) && worst <= 1e-3,
          "the checkpoint evaluates differently on the two devices");
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        printf("test_gpu_checkpoint: no CUDA device\n");
        return 1;
    }
    char dir[] = "/tmp/sf_gpu_checkpoint.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char path[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    sf_net *gpu = make(SF_DEVICE_CUDA), *cpu = make(SF_DEVICE_CPU);
    float l0 = train(gpu, 0, 6);
    move(gpu, cpu, path, "GPU -> CPU");
    same_eval(gpu, cpu);
    float l1 = train(cpu, 6, 12);
    sf_net *gpu2 = make(SF_DEVICE_CUDA);
    move(cpu, gpu2, path, "CPU -> GPU");
    float l2 = train(gpu2, 12, 18);
    printf("  losses: after 6 GPU steps %.4f, 6 more on the CPU %.4f, 6 more on the GPU %.4f\n", l0, l1, l2);
    CHECK(isfinite(l0) && isfinite(l1) && isfinite(l2) && l2 < l0, "training across devices did not go on");
    sf_net_free(gpu);
    sf_net_free(cpu);
    sf_net_free(gpu2);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_gpu_checkpoint");
}
