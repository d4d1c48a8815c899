/* test_sparse_net.c — whole networks with event-driven layers against the same networks run dense, on the CPU:
 * an MLP on input spikes, a conv → LIF → max-pool → linear net and a recurrent net, in every memory mode, with and
 * without grad_threshold (and with grad_cut). Sparse and dense must give the same firing rates (identical spikes), losses within
 * 1e-6 and every gradient within 1e-5 (relative), and follow each other over ten Adam steps. Also: the plan keeps
 * spikes as bits (fewer saved bytes than dense's bytes); auto takes the dense path at full activity, the CPU's
 * crossover of 1/8 without timing, and the sparse path at a fixed crossover above the density; a silent layer; bad
 * input (spikes promised but not given, sparse on where the input is not spikes, a recurrent layer on an image, a
 * nonsense crossover) fails clearly. */
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NET_MLP, NET_CONV, NET_REC, NET_COUNT };
static const char *const net_names[] = {"mlp", "conv", "recurrent"};

typedef struct setup {
    int net;
    sf_sparse_mode mode;
    sf_memory_mode memory;
    int grad_threshold; /* 0 off, 1 on, 2 on with grad_cut */
    float threshold;    /* v_threshold of every neuron layer */
    float crossover;
} setup;

static sf_layer_desc layer(sf_layer_kind kind)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    return d;
}

static sf_layer_desc neuron(sf_layer_kind kind, const setup *s)
{
    sf_layer_desc d = layer(kind);
    tu_seed_neuron(&d.lif, s->grad_threshold, 0.5f);
    d.lif.v_threshold = s->threshold;
    return d;
}

static sf_layer_desc linear(int32_t out)
{
    sf_layer_desc d = layer(SF_LAYER_LINEAR);
    d.out_features = out;
    return d;
}

static void add(sf_net *net, sf_layer_desc d) { CHECK_OK(sf_net_add(net, &d, NULL)); }

enum { T = 7, B = 3 };
static const int32_t in_chw[NET_COUNT][3] = {{45, 1, 1}, {2, 8, 8}, {23, 1, 1}};

static sf_net *build(const setup *s)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = s->memory;
    p.sparse = s->mode;
    p.sparse_crossover = s->crossover;
    p.input_spikes = 1;
    p.in_channels = in_chw[s->net][0];
    p.in_height = in_chw[s->net][1];
    p.in_width = in_chw[s->net][2];
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_sparse_net"));
    if (s->net == NET_MLP) { /* 45 → 70 LIF → 33 LIF → 5 */
        add(net, linear(70));
        add(net, neuron(SF_LAYER_LIF, s));
        add(net, linear(33));
        add(net, neuron(SF_LAYER_LIF, s));
        add(net, linear(5));
    } else if (s->net == NET_CONV) { /* conv 2→4 → LIF → maxpool → flatten → 64 → 20 LIF → 4 */
        sf_layer_desc c = layer(SF_LAYER_CONV2D);
        c.out_channels = 4;
        c.padding = 1;
        add(net, c);
        add(net, neuron(SF_LAYER_LIF, s));
        add(net, layer(SF_LAYER_MAXPOOL2D));
        add(net, layer(SF_LAYER_FLATTEN));
        add(net, linear(20));
        add(net, neuron(SF_LAYER_LIF, s));
        add(net, linear(4));
    } else { /* 23 → 41 RLIF → 6 */
        add(net, linear(41));
        add(net, neuron(SF_LAYER_RLIF, s));
        add(net, linear(6));
    }
    CHECK_OK(sf_net_compile(net, T, B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAM;
    o.lr = 0.01f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    /* Weights scaled up so that the hidden layers fire at a few percent to a few tens of percent. */
    int64_t np;
    float *w = tu_net_read_role(net, SF_ROLE_PARAM, &np);
    for (int64_t i = 0; i < np; i++) w[i] *= 8.0f;
    float *at = w;
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_PARAM); i++) {
        sf_tensor_info info;
        CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, i, &info));
        CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, i, at));
        at += info.numel;
    }
    free(w);
    return net;
}

typedef struct batch {
    float *x;
    int32_t labels[B];
} batch;

static batch make_batch(int net, float density, uint64_t seed)
{
    batch b;
    int64_t n = (int64_t)T * B * in_chw[net][0] * in_chw[net][1] * in_chw[net][2];
    b.x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) b.x[i] = sf_uniform(seed, 1, (uint64_t)i) < density ? 1.0f : 0.0f;
    for (int i = 0; i < B; i++) b.labels[i] = (int32_t)((seed + (uint64_t)i) % 4);
    return b;
}

/* One forward, loss and backward; the firing rates, the loss and all gradients. */
typedef struct result {
    float loss, rates[4];
    int32_t n_rates;
    float *grads;
    int64_t n_grads;
} result;

static result one_step(sf_net *net, const batch *b)
{
    result r = {0};
    sf_step_result sr;
    CHECK_OK(sf_net_forward(net, b->x, 1));
    CHECK_OK(sf_net_loss(net, b->labels, &sr));
    CHECK_OK(sf_net_backward(net));
    r.loss = sr.loss;
    r.n_rates = sf_net_firing_rates(net, r.rates, 4);
    r.grads = tu_net_read_role(net, SF_ROLE_GRAD, &r.n_grads);
    return r;
}

static double rel(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}

static const char *describe(const setup *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s θ_grad %d", net_names[s->net], sf_memory_mode_name(s->memory), s->grad_threshold);
    return buf;
}

/* Sparse (on) against dense (off): one step, then ten Adam steps. */
static void compare(setup s)
{
    char what[96];
    describe(&s, what, sizeof what);
    setup dense_s = s, sparse_s = s;
    dense_s.mode = SF_SPARSE_OFF;
    sparse_s.mode = SF_SPARSE_ON;
    sf_net *dense = build(&dense_s), *sparse = build(&sparse_s);
    batch b = make_batch(s.net, 0.15f, 5);
    result rd = one_step(dense, &b), rs = one_step(sparse, &b);
    CHECK(rd.n_rates == rs.n_rates && memcmp(rd.rates, rs.rates, sizeof(float) * (size_t)rd.n_rates) == 0,
          "%s: firing rates differ (%g vs %g)", what, rd.rates[0], rs.rates[0]);
    for (int32_t i = 0; i < rd.n_rates; i++)
        CHECK(rd.rates[i] > 0.005f && rd.rates[i] < 0.6f, "%s: hidden layer %d fires at %g: not a useful test", what,
              i, rd.rates[i]);
    CHECK(fabsf(rd.loss - rs.loss) <= 1e-6f * fabsf(rd.loss), "%s: loss %.8g vs %.8g", what, rs.loss, rd.loss);
    CHECK(rd.n_grads == rs.n_grads && rel(rs.grads, rd.grads, rd.n_grads) <= 1e-5, "%s: gradients relative error %.3g",
          what, rel(rs.grads, rd.grads, rd.n_grads));
    sf_layer_sparsity info[8];
    int32_t L = sf_net_layer_sparsity(sparse, info, 8);
    int eligible = 0, sparse_paths = 0;
    for (int32_t i = 0; i < L; i++) {
        eligible += info[i].eligible;
        sparse_paths += info[i].forward_sparse && info[i].backward_sparse;
        if (info[i].eligible) CHECK(info[i].density >= 0.0f && info[i].density <= 1.0f, "%s: layer %d density %g", what, i, info[i].density);
    }
    CHECK(eligible >= 2 && sparse_paths == eligible, "%s: %d eligible layers, %d ran sparse", what, eligible,
          sparse_paths);
    /* with grad_cut the gradient below a layer is nonzero at the neuron-steps above θ_grad only: sparse */
    for (int32_t i = 0; i < L && s.grad_threshold == 2; i++)
        if (info[i].eligible && i + 1 < L)
            CHECK(info[i].grad_density >= 0.0f && info[i].grad_density < 0.5f, "%s: layer %d gradient density %g",
                  what, i, info[i].grad_density);
    for (int k = 0; k < 10; k++) {
        batch bk = make_batch(s.net, 0.15f, 100 + (uint64_t)k);
        sf_step_result a, c;
        CHECK_OK(sf_net_train_step(dense, bk.x, bk.labels, &a));
        CHECK_OK(sf_net_train_step(sparse, bk.x, bk.labels, &c));
        CHECK(fabsf(a.loss - c.loss) <= 1e-4f * fabsf(a.loss) + 1e-6f, "%s: step %d loss %.7g vs %.7g", what, k,
              c.loss, a.loss);
        free(bk.x);
    }
    free(rd.grads), free(rs.grads), free(b.x);
    sf_net_free(dense);
    sf_net_free(sparse);
}

/* The plan keeps spikes as bits: fewer saved bytes than dense's bytes (full mode keeps the LIF outputs). */
static void test_plan(void)
{
    setup s = {NET_MLP, SF_SPARSE_OFF, SF_MEMORY_FULL, 0, 1.0f, 0};
    sf_net *dense = build(&s);
    s.mode = SF_SPARSE_ON;
    sf_net *sparse = build(&s);
    sf_memory_plan pd, ps;
    CHECK_OK(sf_net_memory_plan(dense, &pd));
    CHECK_OK(sf_net_memory_plan(sparse, &ps));
    /* both keep the input's bits (its floats stay on the device for the whole step, in either mode); dense keeps
     * both LIF outputs as bytes, sparse as bits */
    size_t spikes_dense = (size_t)T * B * (4 * 2 + 70 + 33), spikes_sparse = (size_t)T * B * 4 * (2 + 3 + 2);
    CHECK(pd.saved - ps.saved >= spikes_dense - spikes_sparse - 3 * 256,
          "saved bytes: sparse %zu, dense %zu (expected about %zu less)", ps.saved, pd.saved,
          spikes_dense - spikes_sparse);
    printf("plan: saved bytes dense %zu, sparse %zu\n", pd.saved, ps.saved);
    sf_net_free(dense);
    sf_net_free(sparse);
}

/* AUTO: at full activity (every neuron fires) dense; the CPU's crossover is 1/8 without timing; with a fixed
 * crossover above the density, sparse. */
static void test_auto(void)
{
    setup s = {NET_MLP, SF_SPARSE_AUTO, SF_MEMORY_RECOMPUTE, 0, -1e9f, 0};
    sf_net *net = build(&s);
    batch b = make_batch(NET_MLP, 0.15f, 9);
    sf_step_result r;
    CHECK_OK(sf_net_train_step(net, b.x, b.labels, &r));
    sf_layer_sparsity info[5];
    sf_net_layer_sparsity(net, info, 5);
    CHECK(info[2].eligible && info[2].density == 1.0f, "full activity: layer 2 density %g", info[2].density);
    CHECK(!info[2].forward_sparse && !info[2].backward_sparse && !info[4].forward_sparse,
          "full activity: auto took the sparse path (crossovers %g %g)", info[2].crossover_forward,
          info[2].crossover_backward);
    CHECK(info[0].eligible && info[0].forward_sparse == (info[0].density < info[0].crossover_forward),
          "input layer: density %g, crossover %g, sparse %d", info[0].density, info[0].crossover_forward,
          info[0].forward_sparse);
    /* the CPU measures nothing (sparse_tune.c): every auto layer takes the fixed crossover 1/8, in every process */
    for (int i = 0; i < 5; i += 2)
        CHECK(info[i].crossover_forward == 0.125f && info[i].crossover_backward == 0.125f,
              "layer %d: crossovers %g %g, expected the CPU's fixed 1/8", i, info[i].crossover_forward,
              info[i].crossover_backward);
    sf_net_free(net);

    s.threshold = 1.0f;
    s.crossover = 0.3f;
    net = build(&s);
    CHECK_OK(sf_net_train_step(net, b.x, b.labels, &r));
    sf_net_layer_sparsity(net, info, 5);
    for (int i = 0; i < 5; i += 2)
        CHECK(info[i].crossover_forward == 0.3f && info[i].forward_sparse == (info[i].density < 0.3f) &&
                  info[i].density >= 0.0f,
              "fixed crossover: layer %d density %g sparse %d", i, info[i].density, info[i].forward_sparse);
    CHECK(info[0].forward_sparse, "input at 15%% with crossover 0.3 ran dense");
    CHECK(!info[1].eligible && info[1].density == -1.0f, "a LIF layer reported as eligible");
    sf_net_free(net);
    free(b.x);
}

/* A layer that never fires: its outgoing weights get no gradient, the next layer sees only its bias. */
static void test_silent(void)
{
    setup s = {NET_MLP, SF_SPARSE_ON, SF_MEMORY_RECOMPUTE, 0, 1e9f, 0};
    sf_net *net = build(&s);
    batch b = make_batch(NET_MLP, 0.15f, 10);
    result r = one_step(net, &b);
    CHECK(r.rates[0] == 0.0f && r.rates[1] == 0.0f, "silent layers fire at %g, %g", r.rates[0], r.rates[1]);
    int64_t off = 45 * 70 + 70; /* layer 2's weight gradient follows layer 0's weight and bias */
    for (int64_t i = 0; i < 33 * 70; i++) CHECK(r.grads[off + i] == 0.0f, "silent input: dW[%lld] = %g", (long long)i, r.grads[off + i]);
    s.mode = SF_SPARSE_OFF;
    sf_net *dense = build(&s);
    result d = one_step(dense, &b);
    CHECK(rel(r.grads, d.grads, r.n_grads) <= 1e-5 && r.loss == d.loss, "silent: sparse and dense differ");
    free(r.grads), free(d.grads), free(b.x);
    sf_net_free(net);
    sf_net_free(dense);
}

static void expect_fail(sf_status got, sf_status want, const char *needle, const char *what)
{
    CHECK(got == want, "%s: status %s, expected %s", what, sf_status_str(got), sf_status_str(want));
    CHECK(strstr(sf_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, sf_last_error(), needle);
}

static void test_bad_input(void)
{
    /* spikes promised, floats given: caught whether the layers run event-driven or dense (whose products take the
     * 0/1 path for checked spikes) */
    sf_net *net;
    sf_step_result r;
    for (int dense = 0; dense < 2; dense++) {
        setup s = {NET_MLP, dense ? SF_SPARSE_OFF : SF_SPARSE_ON, SF_MEMORY_RECOMPUTE, 0, 1.0f, 0};
        net = build(&s);
        batch b = make_batch(NET_MLP, 0.15f, 11);
        b.x[17] = 0.5f;
        expect_fail(sf_net_train_step(net, b.x, b.labels, &r), SF_ERR_INVALID, "other than 0 and 1", "non-spike input");
        expect_fail(sf_net_eval_step(net, b.x, b.labels, &r), SF_ERR_INVALID, "other than 0 and 1", "non-spike eval");
        b.x[17] = 1.0f;
        CHECK_OK(sf_net_train_step(net, b.x, b.labels, &r));
        sf_net_free(net);
        free(b.x);
    }

    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 10;
    CHECK_OK(sf_net_create(&p, &net));
    sf_layer_desc d = linear(8);
    d.sparse = SF_SPARSE_ON;
    expect_fail(sf_net_add(net, &d, NULL), SF_ERR_INVALID, "sparse = on needs spikes", "sparse on a float input");
    d.sparse = SF_SPARSE_AUTO; /* auto where nothing can be sparse is fine: dense */
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_desc l = layer(SF_LAYER_LIF);
    l.sparse = SF_SPARSE_ON;
    expect_fail(sf_net_add(net, &l, NULL), SF_ERR_INVALID, "linear and rlif layers only", "sparse on a LIF");
    l.sparse = 7;
    expect_fail(sf_net_add(net, &l, NULL), SF_ERR_INVALID, "sparse = 7", "sparse mode 7");
    sf_net_free(net);

    p.in_channels = 2;
    p.in_height = p.in_width = 5;
    CHECK_OK(sf_net_create(&p, &net));
    expect_fail(sf_net_add(net, &(sf_layer_desc){.kind = SF_LAYER_RLIF, .input = -1, .lif = l.lif, .sparse = -1}, NULL),
                SF_ERR_INVALID, "needs a vector", "rlif on an image");
    sf_net_free(net);

    for (float bad = -1.0f; bad < 3.0f; bad += 2.5f) {
        p.sparse_crossover = bad;
        expect_fail(sf_net_create(&p, &net), SF_ERR_INVALID, "sparse_crossover", "crossover out of range");
    }
    p.sparse_crossover = NAN;
    expect_fail(sf_net_create(&p, &net), SF_ERR_INVALID, "sparse_crossover", "crossover NaN");
}

/* Every tensor kept readable (sf_net_set_keep_activations, as spikefuse plot asks): the spikes event-driven layers
 * read are readable as floats, and equal the dense net's; the backward still runs. */
static void test_keep_all(void)
{
    float *act[2];
    int64_t n = (int64_t)T * B * 70;
    batch b = make_batch(NET_MLP, 0.15f, 12);
    for (int k = 0; k < 2; k++) {
        setup s = {NET_MLP, k ? SF_SPARSE_ON : SF_SPARSE_OFF, SF_MEMORY_RECOMPUTE, 0, 1.0f, 0};
        sf_net *net = build(&s);
        CHECK_OK(sf_net_set_keep_activations(net, 1));
        CHECK_OK(sf_net_compile(net, T, B));
        result r = one_step(net, &b);
        act[k] = malloc(sizeof(float) * (size_t)n);
        CHECK_OK(sf_net_read_activation(net, 2, act[k]));
        free(r.grads);
        sf_net_free(net);
    }
    CHECK(memcmp(act[0], act[1], sizeof(float) * (size_t)n) == 0, "keep_all: the hidden spikes differ");
    free(act[0]), free(act[1]), free(b.x);
}

int main(void)
{
    for (int net = 0; net < NET_COUNT; net++)
        for (int memory = 0; memory < 3; memory++)
            for (int g = 0; g < 3; g++) compare((setup){net, SF_SPARSE_ON, (sf_memory_mode)memory, g, 1.0f, 0});
    test_plan();
    test_auto();
    test_silent();
    test_keep_all();
    test_bad_input();
    return tu_finish("test_sparse_net");
}
