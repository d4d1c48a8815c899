/* test_dist_step.c — training steps over several processes against the same steps in one process, under
 * `mpirun -np P test_dist_step TIME_PARALLEL SYNC_BN [DEVICE]`: every rank trains its time segment of its data rank's
 * part of a global batch; every rank also trains a reference copy of the network alone on the whole batch and all T,
 * and compares. Networks: an MLP (mean readout, recompute), the same with a leaky readout, the per-step loss and an
 * ALIF for its second neuron layer (full memory mode), the MLP with event-driven layers (sparse on: compact LIF outputs, spike-list products, masked
 * LIF backward), and a conv → BN → LIF → linear → BN → LIF → linear net (recompute, and BN statistics merged
 * over the time segments, and over the data ranks with SYNC_BN), also with a second conv block under conv_algo =
 * nhwc and memory = lean, which on a GPU keeps the first block's tensors NHWC ([rows, C, 1] to BN and LIF, rows split
 * over time) and reruns every conv and linear layer in the backward, and a small SEW-ResNet (tu_add_sew_blocks: an
 * ADD block, then a downsampling block with IAND; recompute), and a small Spikformer (a conv stem to tokens, one SSA
 * block with its residual, the mean over tokens; recompute).
 * What must hold (≤ 1e-5 relative, float sums in another order): the loss of every step (averaged over the data
 * ranks), every gradient after the all-reduce, the parameters after three SGD-momentum steps, this process's slice of
 * the output; the spike count of every LIF layer summed over all processes equals the reference's exactly. Then bad
 * input: T not divisible by the segments, a batch norm that cannot be fused, configs that differ across ranks. */
#include "core/net_hooks.h"
#include "distributed/dist.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

static sf_dist *g_dist;
static sf_device g_dev;

typedef enum {
    NET_MLP,
    NET_MLP_LEAKY,
    NET_CONV_BN,
    NET_CONV_NHWC,
    NET_SPIKES_OUT,
    NET_SPARSE,
    NET_RLIF,
    NET_SEW,
    NET_SPIKFORMER
} net_kind;
static const char *const net_names[] = {"mlp",        "mlp-leaky",  "conv-bn",     "conv-nhwc",
                                        "spikes-out", "mlp-sparse", "rlif-sparse", "sew-resnet",
                                        "spikformer"};

static void add_model(sf_net *net, sf_layer_kind kind, int32_t size, sf_neuron_model model)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.out_features = d.out_channels = size;
    d.kernel = 3;
    d.padding = 1;
    d.lif.v_threshold = 0.3f; /* the second LIF fires too, at every step of the test */
    d.lif.model = model;
    d.lif.rho = 0.9f;
    d.lif.beta = 0.2f;
    CHECK_OK(sf_net_add(net, &d, NULL));
}

static void add(sf_net *net, sf_layer_kind kind, int32_t size) { add_model(net, kind, size, SF_NEURON_LIF); }

static sf_net *build(net_kind kind)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = g_dev;
    p.seed = 11;
    if (kind == NET_SEW) p.in_channels = 2, p.in_height = 6, p.in_width = 6;
    if (kind == NET_SPIKFORMER) p.in_channels = 2, p.in_height = 4, p.in_width = 4;
    if (kind == NET_CONV_BN || kind == NET_CONV_NHWC) {
        p.in_channels = 2, p.in_height = 5, p.in_width = 5;
        if (kind == NET_CONV_NHWC) { /* the first block's tensors NHWC on a GPU; the backward reruns the convs */
            p.cuda.conv_algo = SF_CONV_ALGO_NHWC;
            p.memory = SF_MEMORY_LEAN;
        }
    } else {
        p.in_channels = 12;
    }
    if (kind == NET_MLP_LEAKY) {
        p.memory = SF_MEMORY_FULL;
        p.readout = SF_READOUT_LEAKY;
        p.loss = SF_LOSS_CE_PER_STEP;
    }
    if (kind == NET_SPARSE || kind == NET_RLIF) p.sparse = SF_SPARSE_ON; /* compact spikes carry the LIF state */
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) return NULL;
    if (kind == NET_CONV_BN || kind == NET_CONV_NHWC) {
        for (int block = 0; block < (kind == NET_CONV_NHWC ? 2 : 1); block++) {
            add(net, SF_LAYER_CONV2D, 4);
            add(net, SF_LAYER_BATCHNORM, 0);
            add(net, SF_LAYER_LIF, 0);
        }
        add(net, SF_LAYER_FLATTEN, 0);
        add(net, SF_LAYER_LINEAR, 24);
        add(net, SF_LAYER_BATCHNORM, 0);
        add(net, SF_LAYER_LIF, 0);
        add(net, SF_LAYER_LINEAR, 4);
    } else if (kind == NET_SEW) { /* SEW-ResNet's blocks: ADD, then IAND beside the downsampling shortcut */
        sf_layer_desc n;
        sf_layer_default_desc(SF_LAYER_LIF, &n);
        n.lif.v_threshold = 0.3f;
        tu_add_sew_blocks(net, &n, SF_CONNECT_ADD, SF_CONNECT_IAND);
        add(net, SF_LAYER_FLATTEN, 0);
        add(net, SF_LAYER_LINEAR, 4);
    } else if (kind == NET_SPIKFORMER) { /* a stem to 16 tokens of 4 channels, one SSA block, the mean of tokens */
        add(net, SF_LAYER_CONV2D, 4);
        add(net, SF_LAYER_BATCHNORM, 0);
        add(net, SF_LAYER_LIF, 0);
        add(net, SF_LAYER_TOKENS, 0); /* tensor 4 */
        add(net, SF_LAYER_LINEAR, 12);
        add(net, SF_LAYER_BATCHNORM, 0);
        add(net, SF_LAYER_LIF, 0);
        sf_layer_desc ssa;
        sf_layer_default_desc(SF_LAYER_SSA, &ssa);
        ssa.heads = 2;
        CHECK_OK(sf_net_add(net, &ssa, NULL));
        add(net, SF_LAYER_LIF, 0);
        add(net, SF_LAYER_LINEAR, 4);
        add(net, SF_LAYER_BATCHNORM, 0);
        add(net, SF_LAYER_LIF, 0);
        sf_layer_desc res;
        sf_layer_default_desc(SF_LAYER_ADD, &res);
        res.input2 = 4;
        CHECK_OK(sf_net_add(net, &res, NULL));
        add(net, SF_LAYER_TOKEN_MEAN, 0);
        add(net, SF_LAYER_LINEAR, 4);
    } else if (kind == NET_RLIF) { /* W5weak's layers (W4rec), data parallel only */
        add(net, SF_LAYER_LINEAR, 32);
        add(net, SF_LAYER_RLIF, 0);
        add(net, SF_LAYER_LINEAR, 4);
    } else if (kind == NET_SPIKES_OUT) { /* the output is spikes: this segment's must equal the reference's exactly */
        add(net, SF_LAYER_LINEAR, 32);
        add(net, SF_LAYER_LIF, 0);
        add(net, SF_LAYER_LINEAR, 4);
        add(net, SF_LAYER_LIF, 0);
    } else { /* the leaky net's second neuron is an ALIF: in full mode its backward rebuilds θ from the carried b */
        add(net, SF_LAYER_LINEAR, 32);
        add(net, SF_LAYER_LIF, 0);
        add(net, SF_LAYER_LINEAR, 32);
        add_model(net, SF_LAYER_LIF, 0, kind == NET_MLP_LEAKY ? SF_NEURON_ALIF : SF_NEURON_LIF);
        add(net, SF_LAYER_LINEAR, 4);
    }
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.1f;
    o.momentum = 0.9f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* Input [T, B, F] of global batch B: ~N(0.5, 1) so that the LIFs fire; labels b mod 4. */
static void make_batch(int step, int64_t T, int64_t B, int64_t F, float *x, int32_t *labels)
{
    tu_randn(x, T * B * F, 0.5f, 1.0f, 1000 + (uint64_t)step);
    for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)((b + step) % 4);
}

/* The rows of data rank d: samples [d·Bl, (d+1)·Bl) of every step. */
static void shard(const float *x, int64_t T, int64_t B, int64_t F, int d, int64_t Bl, float *out)
{
    for (int64_t t = 0; t < T; t++)
        memcpy(out + t * Bl * F, x + (t * B + d * Bl) * F, (size_t)(Bl * F) * sizeof *out);
}

/* Spikes of each LIF layer in the last forward: rate · steps · batch · neurons (exact integers in float range). */
static int spike_counts(sf_net *net, int64_t steps_times_batch, const int64_t *neurons, int n_lif, double *out)
{
    float rates[8];
    int32_t n = sf_net_firing_rates(net, rates, 8);
    for (int i = 0; i < n && i < n_lif; i++) out[i] = (double)llround((double)rates[i] * steps_times_batch * neurons[i]);
    return n;
}

/* The exchanges timed over `steps` training steps: each LIF layer receives v from the segment before and sends its
 * own on (∂L/∂v the other way), the output is gathered once, each fused BN gathers its statistics and sums its Σdy
 * terms, the gradients are joined once and the parameters gathered once (sharded state); every time >= 0. */
static void check_profile(net_kind kind, int n_lif, int n_bn, int steps)
{
    const int G = sf_dist_time_parallel(g_dist), g = sf_dist_segment(g_dist);
    double ms[SF_DIST_TIMER_COUNT];
    int64_t calls[SF_DIST_TIMER_COUNT];
    CHECK_OK(sf_dist_profile_read(g_dist, ms, calls));
    const int64_t links = (g > 0) + (g < G - 1), bn = G > 1 || sf_dist_data_size(g_dist) > 1 ? n_bn : 0;
    const int64_t want[SF_DIST_TIMER_COUNT] = {
        [SF_DIST_TIMER_STATE] = steps * n_lif * links,
        [SF_DIST_TIMER_GRAD_STATE] = steps * n_lif * links,
        [SF_DIST_TIMER_OUTPUT] = G > 1 ? steps : 0,
        [SF_DIST_TIMER_BN] = steps * bn * 2,
        [SF_DIST_TIMER_GRADS] = steps,
        [SF_DIST_TIMER_PARAMS] = G > 1 ? steps : 0, /* sharded by default; every net here keeps momentum */
    };
    /* the timeline holds every timed exchange once, each starting after profiling began; the host's in order */
    const sf_dist_span *sp;
    const int64_t n_spans = sf_dist_profile_spans(g_dist, &sp);
    int64_t total = 0, out_of_order = 0, negative = 0;
    for (int k = 0; k < SF_DIST_TIMER_COUNT; k++) total += calls[k];
    for (int64_t k = 0; k < n_spans; k++) {
        negative += sp[k].at_ms < 0 || sp[k].ms < 0;
        out_of_order += k > 0 && sp[k].at_ms < sp[k - 1].at_ms;
    }
    CHECK(n_spans == total && negative == 0, "%s: %lld spans (%lld with a negative time) for %lld timed exchanges",
          net_names[kind], (long long)n_spans, (long long)negative, (long long)total);
    if (g_dev.kind == SF_DEVICE_CPU)
        CHECK(out_of_order == 0, "%s: %lld spans start before the one timed before them", net_names[kind],
              (long long)out_of_order);
    for (int k = 0; k < SF_DIST_TIMER_COUNT; k++) {
        /* on the GPU the gradient all-reduces are timed on their own stream too: at least one bucket a step */
        if (k == SF_DIST_TIMER_ALLREDUCE && g_dev.kind == SF_DEVICE_CUDA) {
            CHECK(calls[k] >= steps && ms[k] >= 0, "%s: %lld all-reduce buckets timed over %d steps", net_names[kind],
                  (long long)calls[k], steps);
            continue;
        }
        CHECK(calls[k] == want[k] && ms[k] >= 0, "%s: %lld %s exchanges timed (%g ms), expected %lld", net_names[kind],
              (long long)calls[k], sf_dist_timer_name((sf_dist_timer)k), ms[k], (long long)want[k]);
    }
    CHECK_OK(sf_dist_profile(g_dist, 0));
}

static void compare_run(net_kind kind, int64_t T, int64_t B)
{
    const int R = sf_dist_data_size(g_dist), d = sf_dist_data_rank(g_dist), G = sf_dist_time_parallel(g_dist);
    const int g = sf_dist_segment(g_dist);
    const int64_t Bl = B / R, Tl = T / G;
    sf_net *ref = build(kind), *net = build(kind);
    if (!ref || !net) return;
    CHECK_OK(sf_dist_attach(g_dist, net));
    CHECK_OK(sf_net_compile(ref, T, B));
    CHECK_OK(sf_net_compile(net, T, Bl));
    if (sf_dist_size(g_dist) > 1) CHECK_OK(sf_dist_profile(g_dist, 1));
    CHECK(sf_net_local_steps(net) == Tl, "%s: %lld local steps, expected %lld", net_names[kind],
          (long long)sf_net_local_steps(net), (long long)Tl);
    int32_t chw[3];
    sf_net_tensor_shape(net, 0, chw);
    const int64_t F = (int64_t)chw[0] * chw[1] * chw[2];
    const int32_t L = sf_net_num_layers(net);
    int64_t neurons[8];
    int n_lif = 0, n_bn = 0;
    for (int32_t id = 1; id <= L; id++) { /* layer id - 1 makes tensor id */
        sf_net_tensor_shape(net, id, chw);
        sf_layer_desc ld;
        CHECK_OK(sf_net_layer_desc(net, id - 1, &ld));
        if (ld.kind == SF_LAYER_LIF || ld.kind == SF_LAYER_RLIF) neurons[n_lif++] = (int64_t)chw[0] * chw[1] * chw[2];
        n_bn += ld.kind == SF_LAYER_BATCHNORM;
    }
    sf_net_tensor_shape(net, L, chw);
    const int64_t K = chw[0];
    float *x = malloc((size_t)(T * B * F) * sizeof *x), *xl = malloc((size_t)(T * Bl * F) * sizeof *xl);
    int32_t labels[64];
    for (int step = 0; step < 3; step++) {
        make_batch(step, T, B, F, x, labels);
        shard(x, T, B, F, d, Bl, xl);
        sf_step_result rr, rd;
        CHECK_OK(sf_net_train_step(ref, x, labels, &rr));
        CHECK_OK(sf_net_train_step(net, xl, labels + d * Bl, &rd));
        double loss = rd.loss;
        CHECK_OK(sf_dist_sum_data(g_dist, &loss, 1));
        loss /= R;
        CHECK(fabs(loss - rr.loss) <= TOL * fabs(rr.loss), "%s step %d: loss %.8g, alone %.8g", net_names[kind], step,
              loss, (double)rr.loss);
        int64_t n_ref, n_got;
        float *gr = tu_net_read_role(ref, SF_ROLE_GRAD, &n_ref), *gd = tu_net_read_role(net, SF_ROLE_GRAD, &n_got);
        CHECK(n_ref == n_got && tu_rel_err_f32(gd, gr, n_ref) < TOL, "%s step %d: gradients differ by %g", net_names[kind],
              step, tu_rel_err_f32(gd, gr, n_ref));
        free(gr);
        free(gd);
        /* spikes: every process's count of each LIF layer, summed over the world, equals the reference's */
        double cr[8] = {0}, cd[8] = {0};
        spike_counts(ref, T * B, neurons, n_lif, cr);
        spike_counts(net, Tl * Bl, neurons, n_lif, cd);
        CHECK_OK(sf_dist_sum_all(g_dist, cd, n_lif));
        for (int i = 0; i < n_lif; i++)
            CHECK(cd[i] == cr[i] && (step > 0 || cr[i] > 0), /* it fires at least before training changes it */
                  "%s step %d: LIF %d fired %.0f times over the processes, %.0f alone",
                  net_names[kind], step, i, cd[i], cr[i]);
        /* this segment's slice of the output, against the reference's rows of this data rank */
        float *out_ref = malloc((size_t)(T * B * K) * sizeof(float)), *out = malloc((size_t)(Tl * Bl * K) * sizeof(float));
        CHECK_OK(sf_net_read_activation(ref, L, out_ref));
        CHECK_OK(sf_net_read_activation(net, L, out));
        float *want = malloc((size_t)(Tl * Bl * K) * sizeof(float));
        for (int64_t t = 0; t < Tl; t++)
            memcpy(want + t * Bl * K, out_ref + ((g * Tl + t) * B + d * Bl) * K, (size_t)(Bl * K) * sizeof(float));
        CHECK(tu_rel_err_f32(out, want, Tl * Bl * K) < TOL, "%s step %d: the output of segment %d, rank %d differs by %g",
              net_names[kind], step, g, d, tu_rel_err_f32(out, want, Tl * Bl * K));
        if (kind == NET_SPIKES_OUT)
            CHECK(memcmp(out, want, (size_t)(Tl * Bl * K) * sizeof(float)) == 0, "%s step %d: spikes differ", net_names[kind],
                  step);
        free(out_ref);
        free(out);
        free(want);
        if (kind == NET_SPARSE) { /* the second linear layer read the first LIF's spikes event-driven */
            sf_layer_sparsity ls[8];
            sf_net_layer_sparsity(net, ls, 8);
            CHECK(ls[2].eligible && ls[2].forward_sparse && ls[2].backward_sparse,
                  "%s step %d: layer 2 ran eligible %d, forward sparse %d, backward sparse %d", net_names[kind], step,
                  ls[2].eligible, ls[2].forward_sparse, ls[2].backward_sparse);
        }
    }
    if (sf_dist_size(g_dist) > 1) check_profile(kind, n_lif, n_bn, 3);
    int64_t n_ref, n_got;
    float *pr = tu_net_read_role(ref, SF_ROLE_PARAM, &n_ref), *pd = tu_net_read_role(net, SF_ROLE_PARAM, &n_got);
    CHECK(n_ref == n_got && tu_rel_err_f32(pd, pr, n_ref) < TOL, "%s: parameters after 3 steps differ by %g", net_names[kind],
          tu_rel_err_f32(pd, pr, n_ref));
    free(pr);
    free(pd);
    free(x);
    free(xl);
    sf_net_free(ref);
    sf_net_free(net);
}

/* The optimizer state sharded over the time group (the default) against whole state on every process, Adam: the
 * same parameters bit for bit after three steps; the plan counts this process's part; an optimizer tensor outside
 * the part is refused; gathered whole, the state is the whole-state run's bit for bit; sharded again, a fourth step
 * still agrees bit for bit. */
static void shard_bitwise(int64_t T, int64_t B)
{
    const int G = sf_dist_time_parallel(g_dist), R = sf_dist_data_size(g_dist), d = sf_dist_data_rank(g_dist);
    if (G == 1) return;
    sf_dist_params wp;
    sf_dist_default_params(&wp);
    wp.time_parallel = G;
    wp.shard_optimizer = 0;
    sf_dist *whole = NULL;
    CHECK_OK(sf_dist_init(&wp, &whole));
    sf_dist *dists[2] = {g_dist, whole};
    sf_net *nets[2] = {build(NET_MLP), build(NET_MLP)};
    if (!whole || !nets[0] || !nets[1]) return;
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAM;
    o.lr = 0.01f;
    const int64_t Bl = B / R, F = 12;
    float *x = malloc((size_t)(T * B * F) * sizeof *x), *xl = malloc((size_t)(T * Bl * F) * sizeof *xl);
    int32_t labels[64];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(sf_dist_attach(dists[k], nets[k]));
        CHECK_OK(sf_net_compile(nets[k], T, Bl));
        CHECK_OK(sf_net_set_optimizer(nets[k], &o)); /* allocated for the part the hooks name */
        for (int step = 0; step < 3; step++) {
            make_batch(step, T, B, F, x, labels);
            shard(x, T, B, F, d, Bl, xl);
            CHECK_OK(sf_net_train_step(nets[k], xl, labels + d * Bl, NULL));
        }
    }
    int64_t np, n1;
    float *p0 = tu_net_read_role(nets[0], SF_ROLE_PARAM, &np), *p1 = tu_net_read_role(nets[1], SF_ROLE_PARAM, &n1);
    CHECK(np == n1 && memcmp(p0, p1, (size_t)np * sizeof *p0) == 0, "sharded optimizer: parameters differ from whole "
                                                                   "state after 3 Adam steps (%g)",
          tu_rel_err_f32(p0, p1, np));
    free(p0);
    free(p1);
    sf_memory_plan m0, m1;
    CHECK_OK(sf_net_memory_plan(nets[0], &m0));
    CHECK_OK(sf_net_memory_plan(nets[1], &m1));
    int64_t lo, cnt;
    sf_net_part(m1.params / sizeof(float), sf_dist_segment(g_dist), G, &lo, &cnt);
    CHECK(m1.optimizer == m1.params * 2 && m0.optimizer == (size_t)cnt * 2 * sizeof(float),
          "sharded optimizer: the plan counts %zu bytes of state (whole %zu, part %lld floats)", m0.optimizer,
          m1.optimizer, (long long)cnt);
    const int32_t n_opt = sf_net_tensor_count(nets[0], SF_ROLE_OPTIMIZER);
    float buf[2048];
    sf_status s = sf_net_tensor_read(nets[0], SF_ROLE_OPTIMIZER, sf_dist_segment(g_dist) == 0 ? n_opt - 1 : 0, buf);
    CHECK(s == SF_ERR_STATE && strstr(sf_last_error(), "sharded"), "an optimizer tensor outside this part: %s",
          sf_last_error());
    CHECK_OK(sf_dist_optimizer_gather(g_dist, nets[0]));
    float *o0 = tu_net_read_role(nets[0], SF_ROLE_OPTIMIZER, &np), *o1 = tu_net_read_role(nets[1], SF_ROLE_OPTIMIZER, &n1);
    CHECK(o0 && o1 && np == n1 && memcmp(o0, o1, (size_t)np * sizeof *o0) == 0,
          "gathered optimizer state differs from whole state");
    free(o0);
    free(o1);
    CHECK_OK(sf_dist_optimizer_shard(g_dist, nets[0]));
    CHECK_OK(sf_net_memory_plan(nets[0], &m0));
    CHECK(m0.optimizer == (size_t)cnt * 2 * sizeof(float), "sharded again: %zu bytes of state", m0.optimizer);
    for (int k = 0; k < 2; k++) CHECK_OK(sf_net_train_step(nets[k], xl, labels + d * Bl, NULL));
    p0 = tu_net_read_role(nets[0], SF_ROLE_PARAM, &np);
    p1 = tu_net_read_role(nets[1], SF_ROLE_PARAM, &n1);
    CHECK(np == n1 && memcmp(p0, p1, (size_t)np * sizeof *p0) == 0,
          "sharded optimizer: a step after gathering and sharding again differs from whole state");
    free(p0);
    free(p1);
    free(x);
    free(xl);
    sf_net_free(nets[0]);
    sf_net_free(nets[1]);
    sf_dist_free(whole);
}

static void bad_input(void)
{
    const int G = sf_dist_time_parallel(g_dist);
    sf_net *net = build(NET_MLP);
    if (!net) return;
    CHECK_OK(sf_dist_attach(g_dist, net));
    if (G > 1) {
        sf_status s = sf_net_compile(net, 2 * G + 1, 2);
        CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "does not divide"), "T = %d over %d segments: %s", 2 * G + 1,
              G, sf_last_error());
    }
    sf_net_free(net);
    if (G > 1) { /* a BN that no LIF follows cannot merge its statistics */
        sf_net_params p;
        sf_net_default_params(&p);
        p.device = g_dev;
        p.in_channels = 6;
        CHECK_OK(sf_net_create(&p, &net));
        add(net, SF_LAYER_LINEAR, 8);
        add(net, SF_LAYER_BATCHNORM, 0);
        add(net, SF_LAYER_LINEAR, 4);
        CHECK_OK(sf_dist_attach(g_dist, net));
        sf_status s = sf_net_compile(net, 2 * G, 2);
        CHECK(s == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "fused"), "unfused BN over segments: %s",
              sf_last_error());
        sf_net_free(net);
    }
    /* the config check: the same hash passes, one that differs on the last rank is found on every rank */
    CHECK_OK(sf_dist_check_same(g_dist, "config", 42));
    const int last = sf_dist_size(g_dist) - 1;
    sf_status s = sf_dist_check_same(g_dist, "config", sf_dist_rank(g_dist) == last ? 43 : 42);
    CHECK(sf_dist_size(g_dist) == 1 || (s == SF_ERR_INVALID && strstr(sf_last_error(), "differs")),
          "differing configs: %s", sf_last_error());
}

int main(int argc, char **argv)
{
    sf_dist_params dp;
    sf_dist_default_params(&dp);
    dp.time_parallel = argc > 1 ? atoi(argv[1]) : 1;
    dp.sync_bn = argc > 2 ? atoi(argv[2]) : 0;
    g_dev = (sf_device){SF_DEVICE_CPU, 0};
    if (argc > 3) CHECK_OK(sf_device_parse(argv[3], &g_dev));
    sf_set_num_threads(1);
    CHECK_OK(sf_dist_init(&dp, &g_dist));
    if (!g_dist) return tu_finish("test_dist_step");
    g_dev = sf_dist_device(g_dist, g_dev);
    const int R = sf_dist_data_size(g_dist), G = sf_dist_time_parallel(g_dist);
    const int64_t T = 3 * G, B = 2 * R;
    compare_run(NET_MLP, T, B);
    compare_run(NET_MLP_LEAKY, T, B);
    compare_run(NET_SPIKES_OUT, T, B);
    compare_run(NET_SPARSE, T, B);
    if (G == 1) compare_run(NET_RLIF, T, B); /* a recurrent layer cannot be split over time */
    shard_bitwise(T, B);
    /* BN over a data-parallel split matches one process only with synchronised statistics */
    if (R == 1 || dp.sync_bn) {
        compare_run(NET_CONV_BN, T, B);
        compare_run(NET_CONV_NHWC, T, B);
        compare_run(NET_SEW, T, B);
        compare_run(NET_SPIKFORMER, T, B);
    }
    bad_input();
    char name[64];
    snprintf(name, sizeof name, "test_dist_step rank %d/%d", sf_dist_rank(g_dist), sf_dist_size(g_dist));
    int rc = tu_finish(name);
    sf_dist_free(g_dist);
    return rc;
}
