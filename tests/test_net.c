/* test_net.c — whole networks against PyTorch (tests/ref/gen_net.py, gen_sew.py), with every neuron model and each
 * SEW-ResNet connect function: loss, every parameter gradient (a PLIF's w too), BN running statistics and a 10-step
 * SGD trajectory, in every memory mode; full, recompute and lean must agree bitwise, recompute must plan fewer saved
 * bytes than full and lean no more than recompute (fewer where a conv or linear layer feeds a neuron), and repeated
 * runs must be bitwise identical. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct net_case {
    const char *fixture;
    int32_t T, B, C, H, W;
    sf_readout readout;
    sf_loss loss;
    void (*build)(sf_net *net);
} net_case;

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    return d;
}

static void add(sf_net *net, sf_layer_desc d) { CHECK_OK(sf_net_add(net, &d, NULL)); }

static sf_layer_desc conv(int32_t cout)
{
    sf_layer_desc d = layer(SF_LAYER_CONV2D);
    d.out_channels = cout;
    d.kernel = 3;
    d.padding = 1;
    return d;
}

/* conv -> BN -> LIF -> maxpool -> flatten -> linear -> LIF */
static void build_a(sf_net *net)
{
    add(net, conv(4));
    add(net, layer(SF_LAYER_BATCHNORM));
    add(net, layer(SF_LAYER_LIF));
    add(net, layer(SF_LAYER_MAXPOOL2D));
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 5;
    add(net, fc);
    add(net, layer(SF_LAYER_LIF));
}

/* conv -> BN -> LIF(t3) -> conv -> BN -> add(t3) -> LIF -> avgpool -> flatten -> linear */
static void build_b(sf_net *net)
{
    sf_layer_desc lif = layer(SF_LAYER_LIF);
    lif.lif.soft_reset = 1;
    lif.lif.detach_reset = 1;
    lif.lif.surrogate = SF_SURROGATE_ATAN;
    lif.lif.alpha = 2.0f;
    add(net, conv(4));
    add(net, layer(SF_LAYER_BATCHNORM));
    add(net, lif);
    add(net, conv(4));
    add(net, layer(SF_LAYER_BATCHNORM));
    sf_layer_desc sum = layer(SF_LAYER_ADD);
    sum.input2 = 3;
    add(net, sum);
    add(net, lif);
    add(net, layer(SF_LAYER_AVGPOOL2D));
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 6;
    add(net, fc);
}

/* T = 1, B = 1: linear 5 -> 1 neuron -> LIF -> linear 1 -> 3 */
static void build_c(sf_net *net)
{
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 1;
    add(net, fc);
    add(net, layer(SF_LAYER_LIF));
    fc.out_features = 3;
    add(net, fc);
}

static sf_layer_desc neuron(sf_neuron_model model)
{
    sf_layer_desc d = layer(SF_LAYER_LIF);
    d.lif.model = model;
    return d;
}

/* conv -> BN -> PLIF (w per channel) -> maxpool -> flatten -> linear -> PLIF (one w; soft reset, atan) */
static void build_plif(sf_net *net)
{
    add(net, conv(4));
    add(net, layer(SF_LAYER_BATCHNORM));
    sf_layer_desc plif = neuron(SF_NEURON_PLIF);
    plif.lif.per_channel = 1;
    add(net, plif);
    add(net, layer(SF_LAYER_MAXPOOL2D));
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 6;
    add(net, fc);
    plif = neuron(SF_NEURON_PLIF);
    plif.lif.soft_reset = 1;
    plif.lif.surrogate = SF_SURROGATE_ATAN;
    plif.lif.alpha = 2.0f;
    add(net, plif);
}

/* linear -> ALIF (soft, rho 0.9, beta 0.5) -> linear -> IF (hard reset to -0.1) -> linear */
static void build_alif(sf_net *net)
{
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 10;
    add(net, fc);
    sf_layer_desc n = neuron(SF_NEURON_ALIF);
    n.lif.soft_reset = 1;
    n.lif.rho = 0.9f;
    n.lif.beta = 0.5f;
    add(net, n);
    fc.out_features = 8;
    add(net, fc);
    n = neuron(SF_NEURON_IF);
    n.lif.v_reset = -0.1f;
    add(net, n);
    fc.out_features = 4;
    add(net, fc);
}

/* SpikingJelly's conv_fashion_mnist, small: (conv no bias -> BN -> IF (atan) -> maxpool) × 2 -> flatten ->
 * linear no bias -> IF -> linear no bias -> IF */
static void build_sj(sf_net *net)
{
    sf_layer_desc n = neuron(SF_NEURON_IF);
    n.lif.surrogate = SF_SURROGATE_ATAN;
    n.lif.alpha = 2.0f;
    for (int k = 0; k < 2; k++) {
        sf_layer_desc c = conv(4);
        c.bias = 0;
        add(net, c);
        add(net, layer(SF_LAYER_BATCHNORM));
        add(net, n);
        add(net, layer(SF_LAYER_MAXPOOL2D));
    }
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.bias = 0;
    fc.out_features = 8;
    add(net, fc);
    add(net, n);
    fc.out_features = 5;
    add(net, fc);
    add(net, n);
}

/* conv -> BN -> LIF -> conv (stride 2, the spikes' only reader) -> BN -> LIF -> flatten -> linear */
static void build_d(sf_net *net)
{
    add(net, conv(4));
    add(net, layer(SF_LAYER_BATCHNORM));
    add(net, layer(SF_LAYER_LIF));
    sf_layer_desc c2 = conv(4);
    c2.stride = 2;
    add(net, c2);
    add(net, layer(SF_LAYER_BATCHNORM));
    add(net, layer(SF_LAYER_LIF));
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 5;
    add(net, fc);
}

/* A small SEW-ResNet (tests/ref/gen_sew.py, tu_add_sew_blocks) with IF neurons (ATan, detach_reset), then a global
 * avgpool -> flatten -> linear. */
static void build_sew(sf_net *net, sf_connect cnf)
{
    sf_layer_desc n = neuron(SF_NEURON_IF);
    n.lif.surrogate = SF_SURROGATE_ATAN;
    n.lif.alpha = 2.0f;
    n.lif.detach_reset = 1;
    tu_add_sew_blocks(net, &n, cnf, cnf);
    sf_layer_desc pool = layer(SF_LAYER_AVGPOOL2D);
    pool.kernel = 4;
    add(net, pool);
    add(net, layer(SF_LAYER_FLATTEN));
    sf_layer_desc fc = layer(SF_LAYER_LINEAR);
    fc.out_features = 5;
    add(net, fc);
}
static void build_sew_add(sf_net *net) { build_sew(net, SF_CONNECT_ADD); }
static void build_sew_and(sf_net *net) { build_sew(net, SF_CONNECT_AND); }
static void build_sew_iand(sf_net *net) { build_sew(net, SF_CONNECT_IAND); }

static const net_case cases[] = {
    {"net_a.safetensors", 4, 3, 2, 8, 8, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_a},
    {"net_b.safetensors", 3, 2, 3, 6, 6, SF_READOUT_LEAKY, SF_LOSS_CE_PER_STEP, build_b},
    {"net_c.safetensors", 1, 1, 5, 1, 1, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_c},
    {"net_plif.safetensors", 4, 3, 2, 6, 6, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_plif},
    {"net_alif.safetensors", 6, 3, 12, 1, 1, SF_READOUT_LEAKY, SF_LOSS_CE_PER_STEP, build_alif},
    {"net_sj.safetensors", 4, 3, 1, 8, 8, SF_READOUT_MEAN, SF_LOSS_MSE_RATE, build_sj},
    {"net_d.safetensors", 3, 2, 2, 8, 8, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_d},
    {"sew_add.safetensors", 3, 2, 3, 8, 8, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_sew_add},
    {"sew_and.safetensors", 3, 2, 3, 8, 8, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_sew_and},
    {"sew_iand.safetensors", 3, 2, 3, 8, 8, SF_READOUT_MEAN, SF_LOSS_CE_MEAN, build_sew_iand},
};

static sf_net *make_as(const net_case *c, const sf_safetensors *fx, sf_memory_mode mode, sf_sparse_mode sparse)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = mode;
    p.sparse = sparse;
    p.in_channels = c->C;
    p.in_height = c->H;
    p.in_width = c->W;
    p.readout = c->readout;
    p.loss = c->loss;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_net"));
    c->build(net);
    CHECK_OK(sf_net_compile(net, c->T, c->B));
    tu_load_params(net, fx);
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = (float)atof(sf_safetensors_meta(fx, "lr"));
    o.momentum = (float)atof(sf_safetensors_meta(fx, "momentum"));
    o.weight_decay = (float)atof(sf_safetensors_meta(fx, "weight_decay"));
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* The default engine: linear layers reading spikes choose their path (sparse = auto). */
static sf_net *make(const net_case *c, const sf_safetensors *fx, sf_memory_mode mode)
{
    return make_as(c, fx, mode, SF_SPARSE_AUTO);
}

static void check_one_step(const net_case *c, const sf_safetensors *fx, sf_net *net, const char *mode)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s", c->fixture, mode);
    tu_check_fixture_step(net, fx, (int64_t)c->T * c->B * c->C * c->H * c->W, what);
}

/* Ten training steps on the fixture's batch follow PyTorch's loss trajectory; returns the final parameters. */
static float *check_trajectory(const net_case *c, const sf_safetensors *fx, sf_net *net, const char *mode,
                               int64_t *n_params)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s", c->fixture, mode);
    tu_check_losses(net, fx, (int64_t)c->T * c->B * c->C * c->H * c->W, what);
    return tu_net_read_role(net, SF_ROLE_PARAM, n_params);
}

int main(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const net_case *c = &cases[k];
        sf_safetensors *fx = tu_fixture(c->fixture);
        sf_net *full = make(c, fx, SF_MEMORY_FULL), *rec = make(c, fx, SF_MEMORY_RECOMPUTE);
        sf_net *lean = make(c, fx, SF_MEMORY_LEAN);
        check_one_step(c, fx, full, "full");
        check_one_step(c, fx, rec, "recompute");
        check_one_step(c, fx, lean, "lean");

        int64_t n1, n2, n3;
        float *g1 = tu_net_read_role(full, SF_ROLE_GRAD, &n1), *g2 = tu_net_read_role(rec, SF_ROLE_GRAD, &n2);
        float *g3 = tu_net_read_role(lean, SF_ROLE_GRAD, &n3);
        CHECK(n1 == n2 && memcmp(g1, g2, (size_t)n1 * sizeof *g1) == 0, "%s: full and recompute gradients differ",
              c->fixture);
        CHECK(n1 == n3 && memcmp(g1, g3, (size_t)n1 * sizeof *g1) == 0, "%s: full and lean gradients differ",
              c->fixture);
        free(g1);
        free(g2);
        free(g3);

        /* Recompute keeps less than full; with the event-driven plan both keep the spikes' bits, and net_c's one
         * neuron keeps h (full) or its input (recompute) in one aligned block either way: equal there. */
        sf_memory_plan pf, pr, dense_f, dense_r;
        CHECK_OK(sf_net_memory_plan(full, &pf));
        CHECK_OK(sf_net_memory_plan(rec, &pr));
        CHECK(pr.saved <= pf.saved, "%s: recompute saves %zu bytes, full %zu", c->fixture, pr.saved, pf.saved);
        sf_memory_plan pl;
        CHECK_OK(sf_net_memory_plan(lean, &pl));
        CHECK(pl.saved < pr.saved, "%s: lean saves %zu bytes, recompute %zu", c->fixture, pl.saved, pr.saved);
        sf_net *dense_full = make_as(c, fx, SF_MEMORY_FULL, SF_SPARSE_OFF);
        sf_net *dense_rec = make_as(c, fx, SF_MEMORY_RECOMPUTE, SF_SPARSE_OFF);
        CHECK_OK(sf_net_memory_plan(dense_full, &dense_f));
        CHECK_OK(sf_net_memory_plan(dense_rec, &dense_r));
        CHECK(dense_r.saved < dense_f.saved, "%s, dense: recompute saves %zu bytes, full %zu", c->fixture,
              dense_r.saved, dense_f.saved);
        sf_net_free(dense_full);
        sf_net_free(dense_rec);
        printf("%s: saved bytes full %zu, recompute %zu (%.2fx), lean %zu (%.2fx); workspace %zu / %zu / %zu\n",
               c->fixture, pf.saved, pr.saved, (double)pr.saved / (double)pf.saved, pl.saved,
               (double)pl.saved / (double)pf.saved, pf.workspace, pr.workspace, pl.workspace);
        sf_net_free(full);
        sf_net_free(rec);
        sf_net_free(lean);

        /* Trajectories, and bitwise repeatability of a whole run. */
        sf_net *a = make(c, fx, SF_MEMORY_RECOMPUTE), *b = make(c, fx, SF_MEMORY_LEAN);
        int64_t na, nb;
        float *pa = check_trajectory(c, fx, a, "recompute", &na);
        float *pb = check_trajectory(c, fx, b, "lean", &nb);
        CHECK(na == nb && memcmp(pa, pb, (size_t)na * sizeof *pa) == 0, "%s: recompute and lean runs differ",
              c->fixture);
        free(pa);
        free(pb);
        sf_net_free(a);
        sf_net_free(b);
        sf_safetensors_free(fx);
    }
    return tu_finish("test_net");
}
