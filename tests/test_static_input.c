/* test_static_input.c — a network told that its input is the same at every step (sf_net_set_static_input) reads
 * step 0 of x only (the other steps are NaN here), and where a convolution, or a linear layer past a flatten, alone
 * reads the input it runs once on the B samples: the output, loss and batch norm statistics equal those of the same net over all T·B images, the
 * parameter gradients within float rounding (the weight gradient sums over T first), in every memory mode, and the
 * losses of five SGD steps agree. Where the input has a second reader, or its gradient is wanted, every step's
 * product runs, bit for bit the same as without the setting. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 4, B = 3, C = 3, H = 8, W = 8, K = 5 };
#define NX ((int64_t)T * B * C * H * W)
#define STEP ((int64_t)B * C * H * W)

enum { CONV, CONV_SKIP, MLP };

/* CONV: conv 3×3 → BN → LIF → max-pool → flatten → linear K; CONV_SKIP: the conv keeps C channels and an add of the
 * input follows it (the input then has two readers); MLP: flatten → linear 32 → LIF → linear K. */
static sf_net *with_sgd(sf_net *net)
{
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.05f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static sf_net *new_net(sf_memory_mode memory, int kind)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = C, p.in_height = H, p.in_width = W;
    p.memory = memory;
    p.seed = 3;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_static_input"));
    sf_layer_desc lif;
    sf_layer_default_desc(SF_LAYER_LIF, &lif);
    lif.lif.v_threshold = 0.4f;
    if (kind == MLP) {
        tu_add_layer(net, SF_LAYER_FLATTEN, 0, 0);
        tu_add_layer(net, SF_LAYER_LINEAR, 32, 0);
        CHECK_OK(sf_net_add(net, &lif, NULL));
        tu_add_layer(net, SF_LAYER_LINEAR, K, 0);
        return with_sgd(net);
    }
    tu_add_layer(net, SF_LAYER_CONV2D, kind == CONV_SKIP ? C : 6, 1);
    if (kind == CONV_SKIP) {
        sf_layer_desc add;
        sf_layer_default_desc(SF_LAYER_ADD, &add);
        add.input2 = 0;
        CHECK_OK(sf_net_add(net, &add, NULL));
    }
    tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
    CHECK_OK(sf_net_add(net, &lif, NULL));
    tu_add_layer(net, SF_LAYER_MAXPOOL2D, 0, 0);
    tu_add_layer(net, SF_LAYER_FLATTEN, 0, 0);
    tu_add_layer(net, SF_LAYER_LINEAR, K, 0);
    return with_sgd(net);
}

/* The net with and without the setting on one input whose steps are equal (NaN past step 0 for the static one). */
static void check(sf_memory_mode memory, int kind, int input_grad)
{
    static const char *const kinds[] = {"conv", "conv, input read twice", "mlp"};
    char what[96];
    snprintf(what, sizeof what, "%s, %s%s", kinds[kind], sf_memory_mode_name(memory),
             input_grad ? ", input gradient" : "");
    float *x = malloc(sizeof *x * NX), *x_nan = malloc(sizeof *x_nan * NX);
    tu_randn(x, STEP, 0.6f, 1.0f, 21);
    for (int64_t t = 1; t < T; t++) memcpy(x + t * STEP, x, sizeof *x * STEP);
    memcpy(x_nan, x, sizeof *x * STEP);
    for (int64_t i = STEP; i < NX; i++) x_nan[i] = NAN;
    const int32_t labels[B] = {1, 4, 0};
    sf_net *ref = new_net(memory, kind), *net = new_net(memory, kind);
    CHECK_OK(sf_net_set_static_input(net, 1));
    CHECK_OK(sf_net_set_input_grad(ref, input_grad));
    CHECK_OK(sf_net_set_input_grad(net, input_grad));
    CHECK_OK(sf_net_compile(ref, T, B));
    CHECK_OK(sf_net_compile(net, T, B));
    const int exact = kind == CONV_SKIP || input_grad; /* every step's product: nothing may differ */
    CHECK((strstr(sf_net_summary(net), "once over T") == NULL) == exact, "%s: the input's reader %s once over T:\n%s",
          what, exact ? "runs" : "does not run", sf_net_summary(net));
    sf_step_result a, b;
    CHECK_OK(sf_net_forward(ref, x, 1));
    CHECK_OK(sf_net_forward(net, x_nan, 1));
    CHECK_OK(sf_net_loss(ref, labels, &a));
    CHECK_OK(sf_net_loss(net, labels, &b));
    CHECK(a.loss == b.loss && isfinite(b.loss), "%s: loss %.9g against %.9g over every step", what, b.loss, a.loss);
    CHECK_OK(sf_net_backward(ref));
    CHECK_OK(sf_net_backward(net));
    int64_t n_ref, n;
    float *ga = tu_net_read_role(ref, SF_ROLE_GRAD, &n_ref), *gb = tu_net_read_role(net, SF_ROLE_GRAD, &n);
    const double dg = n == n_ref ? tu_rel_err_f32(gb, ga, n) : INFINITY;
    CHECK(exact ? dg == 0 : dg < 1e-5, "%s: parameter gradients rel L2 %.3g from those over every step", what, dg);
    free(ga), free(gb);
    float *ba = tu_net_read_role(ref, SF_ROLE_BUFFER, &n_ref), *bb = tu_net_read_role(net, SF_ROLE_BUFFER, &n);
    CHECK(n == n_ref && memcmp(ba, bb, sizeof *ba * (size_t)n) == 0, "%s: batch norm statistics differ", what);
    free(ba), free(bb);
    CHECK_OK(sf_net_update(ref));
    CHECK_OK(sf_net_update(net));
    for (int s = 0; s < 5; s++) {
        CHECK_OK(sf_net_train_step(ref, x, labels, &a));
        CHECK_OK(sf_net_train_step(net, s % 2 ? NULL : x_nan, labels, &b)); /* NULL: the input held on the device */
        CHECK(exact ? a.loss == b.loss : fabs(a.loss - b.loss) <= 1e-4 * fabs(a.loss),
              "%s: SGD step %d's loss %.9g against %.9g", what, s + 1, b.loss, a.loss);
    }
    sf_net_free(ref), sf_net_free(net);
    free(x), free(x_nan);
}

int main(void)
{
    const sf_memory_mode modes[] = {SF_MEMORY_FULL, SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN};
    for (int m = 0; m < 3; m++) {
        check(modes[m], CONV, 0);
        check(modes[m], CONV_SKIP, 0);
        check(modes[m], CONV, 1);
        check(modes[m], MLP, 0);
        check(modes[m], MLP, 1);
    }
    return tu_finish("test_static_input");
}
