/* test_transformer_net.c — spiking transformers built from the engine's layers against PyTorch in float64
 * (tests/ref/gen_transformer.py: tf_spikformer, tf_sdt, tf_layernorm): the loss, every parameter gradient (the
 * q|k|v linear's among them, BNs, LayerNorms, the stem's convolutions through the tokens layer) and the BN running
 * statistics after one step, in every memory mode; recompute and lean must give full's gradients to the bit, and
 * the Spike-driven Transformer's event-driven head the dense one's; and what the plan keeps of the attention: q|k|v
 * as bytes (full), rebuilt by their LIF (recompute) or as bits (lean), the SSA's output not at all in full mode (the
 * LIF after it keeps h) or lean mode (that LIF reruns the SSA). */
#include "core/net_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct tf_case {
    const char *fixture;
    int32_t T, B, C, H, W;
    void (*build)(sf_net *net, int32_t heads);
} tf_case;

enum { D = 8, HIDDEN = 32, CLASSES = 5 };

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.lif.detach_reset = 1; /* SpikingJelly's LIFNode(detach_reset=True), as the papers' code */
    return d;
}

static void add(sf_net *net, sf_layer_desc d) { CHECK_OK(sf_net_add(net, &d, NULL)); }

static void conv(sf_net *net, int32_t cout)
{
    sf_layer_desc d = layer(SF_LAYER_CONV2D);
    d.out_channels = cout;
    d.kernel = 3;
    d.padding = 1;
    add(net, d);
}

static void linear(sf_net *net, int32_t out, int32_t bias)
{
    sf_layer_desc d = layer(SF_LAYER_LINEAR);
    d.out_features = out;
    d.bias = bias;
    add(net, d);
}

static void lif(sf_net *net, float theta)
{
    sf_layer_desc d = layer(SF_LAYER_LIF);
    d.lif.v_threshold = theta;
    add(net, d);
}

/* The residual: the previous layer's output plus tensor `from`. */
static void residual(sf_net *net, int32_t from)
{
    sf_layer_desc d = layer(SF_LAYER_ADD);
    d.input2 = from;
    add(net, d);
}

static void kind(sf_net *net, sf_layer_kind k) { add(net, layer(k)); }

/* Layers 0–3: conv → BN → LIF → maxpool. */
static void stem_start(sf_net *net)
{
    conv(net, 4);
    kind(net, SF_LAYER_BATCHNORM);
    lif(net, 1.0f);
    kind(net, SF_LAYER_MAXPOOL2D);
}

/* The stem (0–10), tokens (11), a Spikformer block (12–27), the mean over tokens (28), the head (29). */
static void build_spikformer(sf_net *net, int32_t heads)
{
    stem_start(net);
    conv(net, D), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 4–6: the features, tensor 7 */
    conv(net, D), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 7–9: the position embedding */
    residual(net, 7);                                            /* 10 */
    kind(net, SF_LAYER_TOKENS);                                  /* 11: tensor 12 */
    linear(net, 3 * D, 0), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 12–14: q|k|v */
    sf_layer_desc ssa = layer(SF_LAYER_SSA);
    ssa.heads = heads;
    add(net, ssa);                                                  /* 15 */
    lif(net, 0.5f);                                                 /* 16 */
    linear(net, D, 1), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 17–19 */
    residual(net, 12);                                              /* 20: tensor 21 */
    linear(net, HIDDEN, 1), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 21–23 */
    linear(net, D, 1), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f);      /* 24–26 */
    residual(net, 21);                                                     /* 27 */
    kind(net, SF_LAYER_TOKEN_MEAN);                                        /* 28 */
    linear(net, CLASSES, 1);                                               /* 29 */
}

/* The stem with the membrane shortcut (0–9), tokens (10), a Spike-driven Transformer block (11–25), the mean over
 * tokens (26), a LIF (27), the head (28). */
static void build_sdt(sf_net *net, int32_t heads)
{
    stem_start(net);
    conv(net, D), kind(net, SF_LAYER_BATCHNORM);                                /* 4–5: tensor 6 */
    lif(net, 1.0f), conv(net, D), kind(net, SF_LAYER_BATCHNORM), residual(net, 6); /* 6–9 */
    kind(net, SF_LAYER_TOKENS);                                                 /* 10: tensor 11 */
    lif(net, 1.0f), linear(net, 3 * D, 0), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 11–14 */
    kind(net, SF_LAYER_SDSA);                                                              /* 15 */
    linear(net, D, 1), kind(net, SF_LAYER_BATCHNORM), residual(net, 11);                   /* 16–18: tensor 19 */
    lif(net, 1.0f), linear(net, HIDDEN, 1), kind(net, SF_LAYER_BATCHNORM), lif(net, 1.0f); /* 19–22 */
    linear(net, D, 1), kind(net, SF_LAYER_BATCHNORM), residual(net, 19);                   /* 23–25 */
    kind(net, SF_LAYER_TOKEN_MEAN), lif(net, 1.0f), linear(net, CLASSES, 1);               /* 26–28 */
}

/* Tokens of the input (0), a token linear → LayerNorm → LIF (1–3), flatten (4), LayerNorm of features (5), head. */
static void build_layernorm(sf_net *net, int32_t heads)
{
    kind(net, SF_LAYER_TOKENS);
    linear(net, 8, 1), kind(net, SF_LAYER_LAYERNORM), lif(net, 1.0f);
    kind(net, SF_LAYER_FLATTEN), kind(net, SF_LAYER_LAYERNORM);
    linear(net, 3, 1);
}

static const tf_case cases[] = {
    {"tf_spikformer.safetensors", 2, 2, 2, 8, 8, build_spikformer},
    {"tf_sdt.safetensors", 2, 2, 2, 8, 8, build_sdt},
    {"tf_layernorm.safetensors", 3, 2, 4, 3, 2, build_layernorm},
};

static sf_net *make(const tf_case *c, const sf_safetensors *fx, sf_memory_mode mode, sf_sparse_mode sparse)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = mode;
    p.sparse = sparse;
    p.in_channels = c->C;
    p.in_height = c->H;
    p.in_width = c->W;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_transformer_net"));
    c->build(net, atoi(sf_safetensors_meta(fx, "heads")));
    CHECK_OK(sf_net_compile(net, c->T, c->B));
    tu_load_params(net, fx);
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* One forward, loss and backward against the fixture. */
static void check_step(const tf_case *c, const sf_safetensors *fx, sf_net *net, const char *mode)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s", c->fixture, mode);
    tu_check_fixture_step(net, fx, (int64_t)c->T * c->B * c->C * c->H * c->W, what);
}

static void expect_same_grads(const tf_case *c, sf_net *a, sf_net *b, const char *what)
{
    int64_t na, nb;
    float *ga = tu_net_read_role(a, SF_ROLE_GRAD, &na), *gb = tu_net_read_role(b, SF_ROLE_GRAD, &nb);
    CHECK(na == nb && memcmp(ga, gb, (size_t)na * sizeof *ga) == 0, "%s: %s gradients differ", c->fixture, what);
    free(ga);
    free(gb);
}

/* tf_spikformer's attention: q|k|v is tensor 15 (layer 14's LIF), the SSA's output tensor 16. */
static void check_attention_plan(sf_net *full, sf_net *rec, sf_net *lean)
{
    CHECK(full->tensors[15].keep == SF_KEEP_BYTES, "q|k|v kept as bytes in full mode (%d)", (int)full->tensors[15].keep);
    CHECK(rec->tensors[15].keep == SF_KEEP_RECOMPUTE, "q|k|v rebuilt from the linear's output in recompute mode (%d)",
          (int)rec->tensors[15].keep);
    CHECK(lean->tensors[15].keep == SF_KEEP_BITS, "q|k|v kept as bits in lean mode (%d)", (int)lean->tensors[15].keep);
    CHECK(lean->tensors[16].keep == SF_KEEP_RERUN, "the SSA's output rerun in lean mode (%d)",
          (int)lean->tensors[16].keep);
    CHECK(full->tensors[16].keep == SF_KEEP_NONE, "the SSA's output not kept in full mode, its LIF keeps h (%d)",
          (int)full->tensors[16].keep);
}

int main(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tf_case *c = &cases[k];
        sf_safetensors *fx = tu_fixture(c->fixture);
        sf_net *full = make(c, fx, SF_MEMORY_FULL, SF_SPARSE_OFF), *rec = make(c, fx, SF_MEMORY_RECOMPUTE, SF_SPARSE_OFF);
        sf_net *lean = make(c, fx, SF_MEMORY_LEAN, SF_SPARSE_OFF), *events = make(c, fx, SF_MEMORY_FULL, SF_SPARSE_ON);
        check_step(c, fx, full, "full");
        check_step(c, fx, rec, "recompute");
        check_step(c, fx, lean, "lean");
        check_step(c, fx, events, "event-driven");
        expect_same_grads(c, full, rec, "full and recompute");
        expect_same_grads(c, full, lean, "full and lean");
        if (c->build == build_spikformer) check_attention_plan(full, rec, lean);
        int64_t nd, ne; /* the event-driven head sums the same products in another order */
        float *gd = tu_net_read_role(full, SF_ROLE_GRAD, &nd), *ge = tu_net_read_role(events, SF_ROLE_GRAD, &ne);
        const double ev = nd == ne ? tu_rel_err_f32(ge, gd, nd) : INFINITY;
        CHECK(ev <= 1e-6, "%s: event-driven gradients rel %.3g from dense", c->fixture, ev);
        if (c->build == build_sdt) /* its head reads the spikes of the LIF after the mean over tokens */
            CHECK(events->layers[28].fwd_sparse && events->layers[28].bwd_flags, "tf_sdt's head ran event-driven");
        free(gd);
        free(ge);
        sf_memory_plan pf, pr, pl;
        CHECK_OK(sf_net_memory_plan(full, &pf));
        CHECK_OK(sf_net_memory_plan(rec, &pr));
        CHECK_OK(sf_net_memory_plan(lean, &pl));
        CHECK(pr.saved <= pf.saved && pl.saved <= pr.saved, "%s: saved bytes full %zu, recompute %zu, lean %zu",
              c->fixture, pf.saved, pr.saved, pl.saved);
        printf("%s: saved bytes full %zu, recompute %zu, lean %zu\n", c->fixture, pf.saved, pr.saved, pl.saved);
        sf_net_free(full);
        sf_net_free(rec);
        sf_net_free(lean);
        sf_net_free(events);
        sf_safetensors_free(fx);
    }
    return tu_finish("test_transformer_net");
}
