/* test_rlif.c — networks with a recurrent LIF layer against PyTorch float64 (tests/ref/gen_rlif.py): the loss,
 * every parameter gradient (BPTT through the recurrence) and a 10-step SGD trajectory, with the recurrence dense
 * and event-driven, in both memory modes; one of them with grad_cut's sparse gradient in a recurrent and a plain
 * LIF layer. Full and recompute must agree bitwise. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rlif_case {
    const char *fixture;
    int32_t T, B, in, hidden, classes;
    int first_is_rlif; /* rlif_c: the recurrent layer reads the network input */
    sf_lif_params lif;
    int32_t hidden2;   /* rlif_e: then linear -> lif (the same neuron) of this size -> linear */
} rlif_case;

static sf_lif_params neuron(float tau, int soft, int detach, sf_surrogate sg, float alpha, float grad_threshold,
                            int grad_cut)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.tau = tau;
    p.soft_reset = soft;
    p.detach_reset = detach;
    p.surrogate = sg;
    p.alpha = alpha;
    p.use_grad_threshold = grad_threshold > 0.0f;
    p.grad_threshold = grad_threshold;
    p.grad_cut = grad_cut;
    return p;
}

/* A layer: linear with `out` features, or a neuron layer with the case's neuron. */
static void add(sf_net *net, sf_layer_kind kind, int32_t out, const sf_lif_params *lif)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.out_features = out;
    d.lif = *lif;
    CHECK_OK(sf_net_add(net, &d, NULL));
}

static sf_net *make(const rlif_case *c, const sf_safetensors *fx, sf_memory_mode memory, sf_sparse_mode sparse)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = memory;
    p.sparse = sparse;
    p.in_channels = c->in;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_rlif"));
    if (!c->first_is_rlif) add(net, SF_LAYER_LINEAR, c->hidden, &c->lif);
    add(net, SF_LAYER_RLIF, 0, &c->lif);
    if (c->hidden2) {
        add(net, SF_LAYER_LINEAR, c->hidden2, &c->lif);
        add(net, SF_LAYER_LIF, 0, &c->lif);
    }
    add(net, SF_LAYER_LINEAR, c->classes, &c->lif);
    CHECK_OK(sf_net_compile(net, c->T, c->B));
    tu_load_params(net, fx);
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = (float)atof(sf_safetensors_meta(fx, "lr"));
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static void labels_of(const sf_safetensors *fx, int32_t *labels)
{
    const sf_st_entry *le = sf_safetensors_find(fx, "labels");
    memcpy(labels, fx->data + le->offset, le->nbytes);
}

static void check_step(const rlif_case *c, const sf_safetensors *fx, sf_net *net, const char *mode)
{
    float *x = tu_get_f32(fx, "x", (int64_t)c->T * c->B * c->in);
    int32_t labels[8];
    labels_of(fx, labels);
    sf_step_result r;
    CHECK_OK(sf_net_forward(net, x, 1));
    CHECK_OK(sf_net_loss(net, labels, &r));
    CHECK_OK(sf_net_backward(net));
    double *loss = tu_get_f64(fx, "loss", 1);
    CHECK(fabs(r.loss - loss[0]) <= 1e-5 * fabs(loss[0]), "%s %s: loss %.8f vs %.8f", c->fixture, mode, r.loss, loss[0]);
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_GRAD); i++) {
        sf_tensor_info info;
        CHECK_OK(sf_net_tensor_info(net, SF_ROLE_GRAD, i, &info));
        float *g = malloc((size_t)info.numel * sizeof *g);
        CHECK_OK(sf_net_tensor_read(net, SF_ROLE_GRAD, i, g));
        double *ref = tu_get_f64(fx, info.name, info.numel);
        char what[128];
        snprintf(what, sizeof what, "%s %s %s", c->fixture, mode, info.name);
        tu_expect_close(what, g, ref, info.numel, 1e-4);
        free(g);
        free(ref);
    }
    float rate[2];
    CHECK(sf_net_firing_rates(net, rate, 2) == 1 + (c->hidden2 > 0) && rate[0] > 0.0f && rate[0] < 1.0f,
          "%s %s: firing rate %g", c->fixture, mode, rate[0]);
    free(x);
    free(loss);
}

static void check_trajectory(const rlif_case *c, const sf_safetensors *fx, sf_net *net, const char *mode)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s", c->fixture, mode);
    tu_check_losses(net, fx, (int64_t)c->T * c->B * c->in, what);
}

int main(void)
{
    const rlif_case cases[] = {
        {"rlif_a.safetensors", 6, 3, 10, 24, 5, 0, neuron(2.0f, 0, 1, SF_SURROGATE_FAST_SIGMOID, 10.0f, 0.0f, 0), 0},
        {"rlif_b.safetensors", 5, 2, 10, 16, 4, 0, neuron(2.0f, 1, 0, SF_SURROGATE_SIGMOID, 4.0f, 0.3f, 0), 0},
        {"rlif_c.safetensors", 4, 2, 12, 12, 3, 1, neuron(4.0f, 0, 0, SF_SURROGATE_ATAN, 2.0f, 0.0f, 0), 0},
        {"rlif_d.safetensors", 1, 1, 5, 7, 3, 0, neuron(2.0f, 0, 1, SF_SURROGATE_FAST_SIGMOID, 10.0f, 0.0f, 0), 0},
        {"rlif_e.safetensors", 6, 3, 10, 20, 4, 0, neuron(2.0f, 0, 1, SF_SURROGATE_FAST_SIGMOID, 10.0f, 0.5f, 1), 18},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const rlif_case *c = &cases[k];
        sf_safetensors *fx = tu_fixture(c->fixture);
        for (int sparse = 0; sparse < 2; sparse++) {
            sf_sparse_mode mode = sparse ? SF_SPARSE_ON : SF_SPARSE_OFF;
            const char *name = sparse ? "sparse" : "dense";
            sf_net *full = make(c, fx, SF_MEMORY_FULL, mode), *rec = make(c, fx, SF_MEMORY_RECOMPUTE, mode);
            char what[64];
            snprintf(what, sizeof what, "%s full", name);
            check_step(c, fx, full, what);
            snprintf(what, sizeof what, "%s recompute", name);
            check_step(c, fx, rec, what);
            int64_t n1, n2;
            float *g1 = tu_net_read_role(full, SF_ROLE_GRAD, &n1), *g2 = tu_net_read_role(rec, SF_ROLE_GRAD, &n2);
            CHECK(n1 == n2 && memcmp(g1, g2, (size_t)n1 * sizeof *g1) == 0, "%s %s: full and recompute differ",
                  c->fixture, name);
            free(g1);
            free(g2);
            check_trajectory(c, fx, rec, name);
            sf_net_free(full);
            sf_net_free(rec);
        }
        sf_safetensors_free(fx);
    }
    return tu_finish("test_rlif");
}
