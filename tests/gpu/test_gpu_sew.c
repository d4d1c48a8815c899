/* test_gpu_sew.c — SEW-ResNet's connect functions in whole networks on the CUDA backend (the ops one by one are the
 * op harness's, test_gpu_backend_ops): the small SEW-ResNet of tu_add_sew_blocks (IF neurons, ATan, detach_reset;
 * then global avgpool → flatten → linear) with each connect, ADD, AND and IAND, on the GPU in fp32 against the CPU
 * (loss within 1e-5, gradients within 1e-4 relative L2: sums in another order); and on the GPU in every precision,
 * its convolutions chosen without timing, memory = lean and full against recompute: the lean backward rebuilds the
 * connect's spike inputs from their bits, so its loss and gradients are recompute's bit for bit; full keeps them as
 * bytes and the neurons' potentials: within 1e-5 of recompute in fp32 and tf32 (in 16 bits the kept potentials are
 * rounded, the recomputed ones not: printed only). And with its input repeated over T, told so (a static input:
 * the first convolution runs once per image) against the same net over every step: within 1e-5 (loss) and 1e-4
 * (gradients) in fp32 and tf32; in 16 bits the bounds of one more rounding of the summed output gradient (1e-3 and
 * 2e-2). The errors seen are printed. */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { NT = 3, NB = 8, NC = 3, NHW = 8, NK = 5 };

static sf_net *sew_net(sf_device dev, sf_precision prec, sf_memory_mode mode, sf_connect cnf, int static_input)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = dev;
    p.precision = prec;
    p.memory = mode;
    p.cuda.deterministic = 1; /* the same convolution choices in every net */
    p.cuda.conv_lean = 0.0f;
    p.in_channels = NC, p.in_height = NHW, p.in_width = NHW;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) return NULL;
    sf_layer_desc n, pool, fc;
    sf_layer_default_desc(SF_LAYER_LIF, &n);
    n.lif.model = SF_NEURON_IF, n.lif.surrogate = SF_SURROGATE_ATAN, n.lif.alpha = 2.0f, n.lif.detach_reset = 1;
    tu_add_sew_blocks(net, &n, cnf, cnf);
    sf_layer_default_desc(SF_LAYER_AVGPOOL2D, &pool);
    pool.kernel = NHW / 2;
    CHECK_OK(sf_net_add(net, &pool, NULL));
    tu_add_layer(net, SF_LAYER_FLATTEN, 0, 0);
    sf_layer_default_desc(SF_LAYER_LINEAR, &fc);
    fc.out_features = NK;
    CHECK_OK(sf_net_add(net, &fc, NULL));
    CHECK_OK(sf_net_set_static_input(net, static_input));
    CHECK_OK(sf_net_compile(net, NT, NB));
    return net;
}

/* One training forward, loss and backward: the loss, and the gradients (malloc'd, *n of them). repeat: step 0's
 * input at every step. */
static float *step(sf_net *net, int repeat, float *loss, int64_t *n)
{
    enum { STEP = NB * NC * NHW * NHW };
    static float x[NT * STEP];
    int32_t labels[NB];
    tu_randn(x, NT * STEP, 0.5f, 1.0f, 77);
    for (int t = 1; t < NT && repeat; t++) memcpy(x + t * STEP, x, sizeof(float) * STEP);
    for (int b = 0; b < NB; b++) labels[b] = (b * 3) % NK;
    sf_step_result r;
    CHECK_OK(sf_net_forward(net, x, 1));
    CHECK_OK(sf_net_loss(net, labels, &r));
    CHECK_OK(sf_net_backward(net));
    *loss = r.loss;
    return tu_net_read_role(net, SF_ROLE_GRAD, n);
}

static void test_against_cpu(sf_connect cnf)
{
    sf_net *c = sew_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32, SF_MEMORY_RECOMPUTE, cnf, 0);
    sf_net *g = sew_net((sf_device){SF_DEVICE_CUDA, 0}, SF_PRECISION_FP32, SF_MEMORY_RECOMPUTE, cnf, 0);
    if (!c || !g) return;
    float lc, lg;
    int64_t nc, ng;
    float *gc = step(c, 0, &lc, &nc), *gg = step(g, 0, &lg, &ng);
    const double le = fabs((double)lg - lc) / fabs((double)lc), ge = nc == ng ? tu_rel_err_f32(gg, gc, nc) : INFINITY;
    CHECK(le <= 1e-5, "sew %s: GPU loss %.8g, CPU %.8g", sf_connect_name(cnf), lg, lc);
    CHECK(ge <= 1e-4, "sew %s: GPU gradients rel L2 %.3g against the CPU's", sf_connect_name(cnf), ge);
    printf("sew %s fp32 GPU vs CPU: loss rel %.2e, gradients rel %.2e\n", sf_connect_name(cnf), le, ge);
    free(gc), free(gg);
    sf_net_free(c), sf_net_free(g);
}

static void test_memory_modes(sf_precision prec, sf_connect cnf)
{
    const sf_memory_mode modes[3] = {SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN, SF_MEMORY_FULL};
    float loss[3], *grads[3];
    int64_t n[3];
    for (int m = 0; m < 3; m++) {
        sf_net *net = sew_net((sf_device){SF_DEVICE_CUDA, 0}, prec, modes[m], cnf, 0);
        if (!net) return;
        grads[m] = step(net, 0, &loss[m], &n[m]);
        sf_net_free(net);
    }
    const char *p = sf_precision_name(prec), *name = sf_connect_name(cnf);
    CHECK(loss[1] == loss[0] && n[1] == n[0] && !memcmp(grads[1], grads[0], sizeof(float) * (size_t)n[0]),
          "sew %s %s: lean differs from recompute (loss %.9g vs %.9g, gradients rel %.3g)", name, p, loss[1], loss[0],
          n[1] == n[0] ? tu_rel_err_f32(grads[1], grads[0], n[0]) : INFINITY);
    const double full_err = n[2] == n[0] ? tu_rel_err_f32(grads[2], grads[0], n[0]) : INFINITY;
    if (prec == SF_PRECISION_FP32 || prec == SF_PRECISION_TF32) /* 16 bits: full keeps h rounded, recompute not */
        CHECK(fabs((double)loss[2] - loss[0]) <= 1e-5 * fabs((double)loss[0]) && full_err <= 1e-5,
              "sew %s %s: full against recompute: loss %.9g vs %.9g, gradients rel %.3g", name, p, loss[2], loss[0],
              full_err);
    printf("sew %s %s: lean = recompute bitwise; full against recompute: gradients rel %.2e\n", name, p, full_err);
    for (int m = 0; m < 3; m++) free(grads[m]);
}

static void test_static_input(sf_precision prec)
{
    const sf_device gpu = {SF_DEVICE_CUDA, 0};
    sf_net *every = sew_net(gpu, prec, SF_MEMORY_RECOMPUTE, SF_CONNECT_ADD, 0);
    sf_net *once = sew_net(gpu, prec, SF_MEMORY_RECOMPUTE, SF_CONNECT_ADD, 1);
    if (!every || !once) return;
    const char *p = sf_precision_name(prec);
    CHECK(strstr(sf_net_summary(once), "once over T") != NULL, "sew %s: the stem does not run once over T:\n%s", p,
          sf_net_summary(once));
    float le, lo;
    int64_t ne, no;
    float *ge = step(every, 1, &le, &ne), *go = step(once, 1, &lo, &no);
    const double loss_err = fabs((double)lo - le) / fabs((double)le),
                 grad_err = ne == no ? tu_rel_err_f32(go, ge, ne) : INFINITY;
    const bool wide = prec == SF_PRECISION_FP32 || prec == SF_PRECISION_TF32;
    CHECK(loss_err <= (wide ? 1e-5 : 1e-3) && grad_err <= (wide ? 1e-4 : 2e-2),
          "sew %s: static input against every step: loss %.9g vs %.9g, gradients rel %.3g", p, lo, le, grad_err);
    printf("sew %s: static input against every step: loss rel %.2e, gradients rel %.2e\n", p, loss_err, grad_err);
    free(ge), free(go);
    sf_net_free(every), sf_net_free(once);
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_sew: no CUDA device\n");
        return 1;
    }
    const sf_precision every[4] = {SF_PRECISION_FP32, SF_PRECISION_TF32, SF_PRECISION_BF16, SF_PRECISION_FP16};
    for (int c = 0; c < 3; c++) {
        test_against_cpu((sf_connect)c);
        for (int k = 0; k < 4; k++) test_memory_modes(every[k], (sf_connect)c);
    }
    for (int k = 0; k < 4; k++) test_static_input(every[k]);
    return tu_finish("test_gpu_sew");
}
