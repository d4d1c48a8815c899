/* test_gpu_precision.c — whole networks on the CUDA backend in the opt-in precisions against the CPU's fp32 (the
 * ops one by one are the op harness's, tests/gpu/test_gpu_backend_ops.c): a small conv net's loss within 2% (bf16) /
 * 0.5% (fp16) of the CPU's fp32 loss, its output and gradients within 10% / 5% relative L2 (spikes near the
 * threshold may flip when their input is rounded), fp16's loss scaling (overflowing steps skipped and the scale
 * halved, parameters untouched, growth after 2000 good steps, a NaN loss still fails the step), and 16-bit plans
 * smaller than fp32's; a net whose tensors between convolutions are NHWC against the CPU (fp32) or the same net on
 * NCHW tensors (16 bits); memory = lean against recompute bitwise in every precision; event-driven nets (feed-forward
 * and recurrent, sparse on) within the same bounds, on their sparse paths, fitting a batch; sparse = auto measuring
 * its crossovers in 16 bits. The errors seen are printed. */
#include "core/net_internal.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *prec; /* the name of the precision under test */

enum { NT = 4, NB = 8, NC = 2, NHW = 8, NK = 5 };

static void add(sf_net *net, sf_layer_kind kind, int32_t n) { tu_add_layer(net, kind, n, 1); }

/* The memory mode of the nets image_net makes, and whether their convolutions are chosen without timing (the
 * deterministic choice, the same in every net: test_lean_nets). */
static sf_memory_mode net_memory = SF_MEMORY_RECOMPUTE;
static int net_untimed = 0;

/* An empty net for NC×NHW×NHW inputs on dev in precision, its convolutions as algo asks. */
static sf_net *image_net(sf_device dev, sf_precision precision, sf_conv_algo algo)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = dev;
    p.precision = precision;
    p.memory = net_memory;
    p.cuda.conv_algo = algo;
    p.cuda.deterministic = net_untimed;
    if (net_untimed) p.cuda.conv_lean = 0.0f;
    p.in_channels = NC, p.in_height = NHW, p.in_width = NHW;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    return net;
}

/* conv → BN → LIF → maxpool → conv → BN → LIF → flatten → linear → LIF → linear, mean readout, SGD. */
static sf_net *small_net(sf_device dev, sf_precision precision)
{
    sf_net *net = image_net(dev, precision, SF_CONV_ALGO_AUTO);
    if (!net) return NULL;
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0);
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, 32);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_LINEAR, NK);
    CHECK_OK(sf_net_compile(net, NT, NB));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.1f;
    o.momentum = 0.9f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static void batch(int step, float *x, int32_t *labels)
{
    tu_randn(x, NT * NB * NC * NHW * NHW, 0.5f, 1.0f, 300 + (uint64_t)step);
    for (int b = 0; b < NB; b++) labels[b] = (b * 3 + step) % NK;
}

static double rel_l2(const float *a, const float *b, int64_t n, double scale)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] / scale - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One forward, loss and backward of the same net (same seed: same initial parameters) on the CPU in fp32 (c) and on
 * the GPU (g): the step results, the loss's relative difference (*le) and the gradients' relative L2 error (*ge).
 * fp16 runs at a loss scale of 256, where the weight gradients cuDNN writes in fp16 cannot overflow (the split step
 * has no skipping); its gradients are those of the scaled loss until the update. */
static void step_both(sf_net *c, sf_net *g, sf_precision p, const float *x, const int32_t *labels, sf_step_result *rc,
                      sf_step_result *rg, double *le, double *ge)
{
    sf_net_state st;
    CHECK_OK(sf_net_get_state(g, &st));
    st.loss_scale = p == SF_PRECISION_FP16 ? 256.0f : 1.0f;
    CHECK_OK(sf_net_set_state(g, &st));
    CHECK_OK(sf_net_forward(c, x, 1));
    CHECK_OK(sf_net_forward(g, x, 1));
    CHECK_OK(sf_net_loss(c, labels, rc));
    CHECK_OK(sf_net_loss(g, labels, rg));
    CHECK_OK(sf_net_backward(c));
    CHECK_OK(sf_net_backward(g));
    *le = fabs((double)rg->loss - rc->loss) / fabs((double)rc->loss);
    int64_t nc, ng;
    float *gc = tu_net_read_role(c, SF_ROLE_GRAD, &nc), *gg = tu_net_read_role(g, SF_ROLE_GRAD, &ng);
    *ge = nc == ng ? rel_l2(gg, gc, nc, st.loss_scale) : INFINITY;
    free(gc), free(gg);
}

/* The small conv net (step_both): loss, output and gradients close; the 16-bit plan keeps fewer bytes; it learns. */
static void test_net(sf_precision p, double loss_tol, double grad_tol)
{
    sf_net *c = small_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32);
    sf_net *g = small_net((sf_device){SF_DEVICE_CUDA, 0}, p);
    if (!c || !g) return;
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    batch(0, x, labels);
    sf_step_result rc, rg;
    double le, ge;
    step_both(c, g, p, x, labels, &rc, &rg, &le, &ge);
    CHECK(le <= loss_tol, "%s net: loss %.6g on the GPU, %.6g on the CPU (fp32): rel %.3g > %g", prec, rg.loss,
          rc.loss, le, loss_tol);
    int32_t L = sf_net_num_layers(c);
    float oc[NT * NB * NK], og[NT * NB * NK];
    CHECK_OK(sf_net_read_activation(c, L, oc));
    CHECK_OK(sf_net_read_activation(g, L, og));
    double oe = rel_l2(og, oc, NT * NB * NK, 1.0);
    CHECK(oe <= grad_tol, "%s net: output rel L2 %.3g > %g", prec, oe, grad_tol);
    CHECK(ge <= grad_tol, "%s net: gradients rel L2 %.3g > %g", prec, ge, grad_tol);
    sf_memory_plan pc, pg;
    CHECK_OK(sf_net_memory_plan(c, &pc));
    CHECK_OK(sf_net_memory_plan(g, &pg));
    CHECK(pg.saved < pc.saved, "%s plan keeps %zu bytes, fp32's %zu", prec, pg.saved, pc.saved);
    printf("%s net vs CPU fp32: loss %.6g vs %.6g (rel %.2e), output rel %.2e, gradients rel %.2e; saved %zu vs %zu "
           "bytes\n",
           prec, rg.loss, rc.loss, le, oe, ge, pg.saved, pc.saved);
    /* a few training steps: the 16-bit net learns as the fp32 one does */
    float first = 0, last = 0;
    for (int s = 1; s <= 30; s++) {
        batch(s % 3, x, labels);
        CHECK_OK(sf_net_train_step(g, x, labels, &rg));
        if (s == 1) first = rg.loss;
        last = rg.loss;
    }
    CHECK(last < first, "%s net: loss %.4g after 30 steps on 3 batches, %.4g at the first", prec, last, first);
    sf_net_free(c);
    sf_net_free(g);
}

static double twin_grad_err(sf_net *d, sf_net *g, sf_precision p, const float *x, const int32_t *labels);

/* conv → BN → LIF → conv → BN → add (the first LIF's spikes) → LIF → conv stride 2 → BN → LIF → flatten → linear,
 * every tensor kept for reading. Under conv_algo = nhwc the seven tensors from the first conv to the add's LIF are
 * NHWC; the last conv writes NCHW, as flatten reads its block's spikes so. */
static sf_net *layout_net(sf_device dev, sf_precision precision, sf_conv_algo algo, bool keep)
{
    sf_net *net = image_net(dev, precision, algo);
    if (!net) return NULL;
    CHECK_OK(sf_net_set_keep_activations(net, keep));
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_ADD, &d);
    d.input2 = 3; /* the first LIF's spikes */
    CHECK_OK(sf_net_add(net, &d, NULL));
    add(net, SF_LAYER_LIF, 0);
    tu_add_layer(net, SF_LAYER_CONV2D, 16, 2);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, NK);
    CHECK_OK(sf_net_compile(net, NT, NB));
    return net;
}

static int nhwc_tensors(const sf_net *net)
{
    int n = 0;
    for (int32_t t = 0; t <= net->n_layers; t++) n += net->tensors[t].nhwc;
    return n;
}

/* The layout net with NHWC tensors on the GPU in precision p against a reference: in fp32 the CPU (the arithmetic
 * differs only in the order of sums); in 16 bits the same net on NCHW tensors on the GPU in p, as 16-bit potentials
 * that round across θ flip spikes, and the flips cascade through this net's add and three blocks (against the CPU
 * its gradients differ by about 0.3 in either layout). Not in TF32: there each layout's convolutions take the path
 * timed fastest, and a first convolution on im2col + GEMM (TF32-rounded) instead of an FMA kernel of cuDNN's flipped
 * enough spikes for 0.19 of gradient error against the CPU (H200). The loss, the gradients, and every tensor and
 * membrane potential read back (NCHW order on both sides). */
static void test_nhwc_net(sf_precision p, double loss_tol, double grad_tol)
{
    const bool cpu_ref = p == SF_PRECISION_FP32;
    sf_net *r = cpu_ref ? layout_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32, SF_CONV_ALGO_AUTO, true)
                        : layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_NCHW, true);
    sf_net *g = layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_NHWC, true);
    if (!r || !g) return;
    CHECK(nhwc_tensors(g) == 7 && nhwc_tensors(r) == 0, "%s layout net: %d and %d NHWC tensors, expected 7 and 0",
          prec, nhwc_tensors(g), nhwc_tensors(r));
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    batch(0, x, labels);
    sf_step_result rr, rg;
    double le, ge;
    if (cpu_ref) {
        step_both(r, g, p, x, labels, &rr, &rg, &le, &ge);
    } else {
        ge = twin_grad_err(r, g, p, x, labels);
        CHECK_OK(sf_net_loss(r, labels, &rr));
        CHECK_OK(sf_net_loss(g, labels, &rg));
        le = fabs((double)rg.loss - rr.loss) / fabs((double)rr.loss);
    }
    const char *ref = cpu_ref ? "the CPU (fp32)" : "NCHW tensors";
    CHECK(le <= loss_tol, "%s NHWC net: loss %.6g, %.6g on %s: rel %.3g > %g", prec, rg.loss, rr.loss, ref, le,
          loss_tol);
    CHECK(ge <= grad_tol, "%s NHWC net: gradients rel L2 %.3g > %g against %s", prec, ge, grad_tol, ref);
    double worst_t = 0.0;
    for (int32_t t = 1; t <= g->n_layers; t++) {
        if (g->layers[t - 1].absorbed) continue; /* a BN that its LIF runs: its output is never stored */
        const int64_t n = (int64_t)NT * NB * g->tensors[t].per_sample;
        float *vr = malloc(sizeof *vr * (size_t)n), *vg = malloc(sizeof *vg * (size_t)n);
        const bool lif = g->layers[t - 1].d.kind == SF_LAYER_LIF;
        for (int what = 0; what < 1 + lif; what++) {
            CHECK_OK(what ? sf_net_read_membrane(r, t, vr) : sf_net_read_activation(r, t, vr));
            CHECK_OK(what ? sf_net_read_membrane(g, t, vg) : sf_net_read_activation(g, t, vg));
            /* spikes: the share that differs (elements in a wrong order would differ in about half); other values:
             * the relative L2 error */
            const bool spikes = what == 0 && g->tensors[t].binary;
            double e = 0.0;
            if (spikes) {
                for (int64_t i = 0; i < n; i++) e += vg[i] != vr[i];
                e /= (double)n;
            } else {
                e = rel_l2(vg, vr, n, 1.0);
            }
            const double bound = spikes ? 0.05 : grad_tol;
            CHECK(e <= bound, "%s NHWC net: tensor %d %s error %.3g > %g against %s", prec, t,
                  what ? "membrane" : "value", e, bound, ref);
            if (e > worst_t) worst_t = e;
        }
        free(vr), free(vg);
    }
    printf("%s NHWC net vs %s: loss rel %.2e, gradients rel %.2e, tensors read back %.2e\n", prec, ref, le, ge,
           worst_t);
    sf_net_free(r);
    sf_net_free(g);
}

/* memory = lean against recompute on the GPU in precision p, on the small net (conv, max-pool, linear → LIF) and the
 * layout net (NHWC tensors outside fp32, an add, a stride-2 conv), their convolutions chosen alike without timing:
 * the lean backward reruns the layers that feed each neuron from the kept spike bits, so the loss and the gradients
 * of a step, and the parameters after three training steps (the step's CUDA graph), are bitwise the same; the lean
 * plan keeps fewer bytes. */
static void test_lean_nets(sf_precision p)
{
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    for (int which = 0; which < 2; which++) {
        sf_net *n[2];
        net_untimed = 1;
        for (int m = 0; m < 2; m++) {
            net_memory = m ? SF_MEMORY_LEAN : SF_MEMORY_RECOMPUTE;
            n[m] = which ? layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_AUTO, false)
                         : small_net((sf_device){SF_DEVICE_CUDA, 0}, p);
        }
        net_untimed = 0;
        net_memory = SF_MEMORY_RECOMPUTE;
        if (!n[0] || !n[1]) return;
        const char *name = which ? "layout net" : "small net";
        sf_step_result r[2];
        float *g[2], *w[2];
        int64_t ng[2], nw[2];
        sf_memory_plan plan[2];
        for (int m = 0; m < 2; m++) {
            sf_optim_params o;
            sf_optim_default_params(&o);
            o.lr = 0.1f;
            o.momentum = 0.9f;
            if (which) CHECK_OK(sf_net_set_optimizer(n[m], &o));
            batch(0, x, labels);
            CHECK_OK(sf_net_forward(n[m], x, 1));
            CHECK_OK(sf_net_loss(n[m], labels, &r[m]));
            CHECK_OK(sf_net_backward(n[m]));
            g[m] = tu_net_read_role(n[m], SF_ROLE_GRAD, &ng[m]);
            for (int s = 1; s <= 3; s++) {
                batch(s, x, labels);
                sf_step_result ignored;
                CHECK_OK(sf_net_train_step(n[m], x, labels, &ignored));
            }
            w[m] = tu_net_read_role(n[m], SF_ROLE_PARAM, &nw[m]);
            CHECK_OK(sf_net_memory_plan(n[m], &plan[m]));
        }
        CHECK(r[0].loss == r[1].loss, "%s %s lean: loss %.9g, recompute %.9g", prec, name, r[1].loss, r[0].loss);
        CHECK(ng[0] == ng[1] && !memcmp(g[0], g[1], sizeof *g[0] * (size_t)ng[0]),
              "%s %s lean: gradients differ from recompute's (rel %.3g)", prec, name,
              ng[0] == ng[1] ? rel_l2(g[1], g[0], ng[0], 1.0) : INFINITY);
        CHECK(nw[0] == nw[1] && !memcmp(w[0], w[1], sizeof *w[0] * (size_t)nw[0]),
              "%s %s lean: parameters after 3 steps differ from recompute's (rel %.3g)", prec, name,
              nw[0] == nw[1] ? rel_l2(w[1], w[0], nw[0], 1.0) : INFINITY);
        CHECK(plan[1].saved < plan[0].saved, "%s %s: lean keeps %zu bytes, recompute %zu", prec, name, plan[1].saved,
              plan[0].saved);
        printf("%s %s: lean keeps %zu bytes, recompute %zu; workspace %zu / %zu\n", prec, name, plan[1].saved,
               plan[0].saved, plan[1].workspace, plan[0].workspace);
        for (int m = 0; m < 2; m++) free(g[m]), free(w[m]), sf_net_free(n[m]);
    }
}

/* Event-driven nets: input spikes → linear 300 → LIF (or RLIF) → linear 260 → LIF → linear 4, sparse on, θ_grad
 * with grad_cut, on the GPU in precision p (step_both): the loss within test_net's bound of the CPU's fp32, the
 * gradients within its bound of the same net run dense on the GPU in p (θ_grad cuts where the potential crosses it,
 * so a 16-bit potential rounded across θ_grad drops or keeps a whole step's gradient: against fp32 the gradients
 * differ by more than the arithmetic's error; the dense twin in p cuts alike), every eligible layer on its
 * event-driven paths; fifteen Adam steps on that batch (the step's
 * CUDA graph recorded) fit it. A net with sparse = auto measures its crossovers in p at compile: each in [0, 0.5]. */
enum { ST = 9, SB = 5, SIN = 37 };

static sf_net *sparse_net(sf_device dev, sf_precision precision, sf_sparse_mode mode, bool rec)
{
    sf_net_params np;
    sf_net_default_params(&np);
    np.device = dev;
    np.precision = precision;
    np.in_channels = SIN;
    np.sparse = mode;
    np.input_spikes = 1;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&np, &net));
    if (!net) return NULL;
    const int32_t sizes[] = {300, 0, 260, 0, 4};
    for (int l = 0; l < 5; l++) {
        sf_layer_desc d;
        sf_layer_default_desc(l % 2 ? (rec && l == 1 ? SF_LAYER_RLIF : SF_LAYER_LIF) : SF_LAYER_LINEAR, &d);
        d.out_features = sizes[l];
        d.init_gain = l % 2 ? 1.0f : 5.0f;
        tu_seed_neuron(&d.lif, 2, 0.4f);
        CHECK_OK(sf_net_add(net, &d, NULL));
    }
    CHECK_OK(sf_net_compile(net, ST, SB));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAM;
    o.lr = 0.01f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* The gradients of net g against its twin d (same parameters), both on the GPU in p under the same loss scale. */
static double twin_grad_err(sf_net *d, sf_net *g, sf_precision p, const float *x, const int32_t *labels)
{
    sf_net *nets[2] = {d, g};
    for (int i = 0; i < 2; i++) {
        sf_net_state st;
        sf_step_result r;
        CHECK_OK(sf_net_get_state(nets[i], &st));
        st.loss_scale = p == SF_PRECISION_FP16 ? 256.0f : 1.0f;
        CHECK_OK(sf_net_set_state(nets[i], &st));
        CHECK_OK(sf_net_forward(nets[i], x, 1));
        CHECK_OK(sf_net_loss(nets[i], labels, &r));
        CHECK_OK(sf_net_backward(nets[i]));
    }
    int64_t nd, ng;
    float *gd = tu_net_read_role(d, SF_ROLE_GRAD, &nd), *gg = tu_net_read_role(g, SF_ROLE_GRAD, &ng);
    double e = nd == ng ? rel_l2(gg, gd, nd, 1.0) : INFINITY;
    free(gd), free(gg);
    return e;
}

static void test_sparse_nets(sf_precision p, double loss_tol, double grad_tol)
{
    static float x[ST * SB * SIN];
    for (int i = 0; i < ST * SB * SIN; i++) x[i] = sf_uniform(141, 1, (uint64_t)i) < 0.2f ? 1.0f : 0.0f;
    int32_t labels[SB] = {0, 1, 2, 3, 1};
    for (int rec = 0; rec < 2; rec++) {
        const char *kind = rec ? "recurrent" : "feed-forward";
        sf_net *c = sparse_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32, SF_SPARSE_ON, rec);
        sf_net *d = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_OFF, rec);
        sf_net *g = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_ON, rec);
        if (!c || !d || !g) return;
        sf_step_result rc, rg;
        double le, ge;
        const double dense_ge = twin_grad_err(d, g, p, x, labels);
        step_both(c, g, p, x, labels, &rc, &rg, &le, &ge);
        CHECK(le <= loss_tol && dense_ge <= grad_tol, "%s sparse %s net: loss %.6g vs CPU fp32 %.6g (rel %.3g > %g?), "
              "gradients vs the dense net in %s rel L2 %.3g (> %g?)", prec, kind, rg.loss, rc.loss, le, loss_tol, prec,
              dense_ge, grad_tol);
        sf_net_free(d);
        sf_layer_sparsity sp[5];
        CHECK(sf_net_layer_sparsity(g, sp, 5) == 5, "layer count");
        for (int l = 0; l < 5; l++)
            CHECK(!sp[l].eligible || (sp[l].forward_sparse && sp[l].backward_sparse),
                  "%s sparse %s net: layer %d ran forward %s, backward %s", prec, kind, l,
                  sp[l].forward_sparse ? "sparse" : "dense", sp[l].backward_sparse ? "sparse" : "dense");
        printf("%s sparse %s net vs CPU fp32: loss %.6g vs %.6g (rel %.2e), gradients rel %.2e; vs dense in %s: "
               "gradients rel %.2e\n", prec, kind, rg.loss, rc.loss, le, ge, prec, dense_ge);
        float first = 0, last = 0;
        for (int s = 0; s < 15; s++) {
            CHECK_OK(sf_net_train_step(g, x, labels, &rg));
            CHECK(isfinite(rg.loss), "%s sparse %s net: step %d loss %g", prec, kind, s, rg.loss);
            if (s == 0) first = rg.loss;
            last = rg.loss;
        }
        CHECK(last < first, "%s sparse %s net: loss %.4g after 15 steps on one batch, %.4g at the first", prec, kind,
              last, first);
        sf_net_free(c);
        sf_net_free(g);
    }
    sf_net *a = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_AUTO, true);
    if (!a) return;
    sf_layer_sparsity sp[5];
    sf_net_layer_sparsity(a, sp, 5);
    for (int l = 0; l < 5; l++)
        CHECK(!sp[l].eligible || (sp[l].crossover_forward >= 0.0f && sp[l].crossover_forward <= 0.5f &&
                                  sp[l].crossover_backward >= 0.0f && sp[l].crossover_backward <= 0.5f),
              "%s auto: layer %d crossovers %g, %g", prec, l, sp[l].crossover_forward, sp[l].crossover_backward);
    sf_net_free(a);
}

static bool params_equal(sf_net *net, const float *ref, int64_t n)
{
    int64_t m;
    float *p = tu_net_read_role(net, SF_ROLE_PARAM, &m);
    bool same = m == n && memcmp(p, ref, (size_t)n * sizeof *p) == 0;
    free(p);
    return same;
}

/* fp16: a step whose gradients overflow is skipped (parameters untouched) and halves the scale, until steps go
 * through; 2000 good steps double it; a NaN loss still fails. */
static void test_loss_scale(void)
{
    sf_net *net = small_net((sf_device){SF_DEVICE_CUDA, 0}, SF_PRECISION_FP16);
    if (!net) return;
    sf_net_state st;
    CHECK_OK(sf_net_get_state(net, &st));
    CHECK(st.loss_scale == 65536.0f && st.loss_scale_steps == 0, "initial scale %g, %lld steps", st.loss_scale,
          (long long)st.loss_scale_steps);
    st.loss_scale = 0x1p40f; /* the loss gradient alone overflows fp16 */
    CHECK_OK(sf_net_set_state(net, &st));
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    int64_t n;
    float *before = tu_net_read_role(net, SF_ROLE_PARAM, &n);
    sf_step_result r = {0};
    int skipped = 0, step = 0;
    for (; step < 60; step++) {
        batch(step, x, labels);
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
        CHECK(isfinite(r.loss), "step %d: loss %g", step, r.loss);
        if (!r.skipped) break;
        skipped++;
        CHECK(params_equal(net, before, n), "a skipped step changed the parameters");
        CHECK_OK(sf_net_get_state(net, &st));
        CHECK(st.loss_scale == ldexpf(1.0f, 40 - skipped), "after %d skips the scale is %g", skipped, st.loss_scale);
    }
    CHECK(skipped >= 19 && !r.skipped, "%d steps skipped from a scale of 2^40, the last %s", skipped,
          r.skipped ? "skipped too" : "went through");
    CHECK(!params_equal(net, before, n), "the step that went through left the parameters as they were");
    printf("fp16 loss scaling: %d steps skipped from 2^40, then a step at scale 2^%d\n", skipped, 40 - skipped);
    CHECK_OK(sf_net_get_state(net, &st));
    st.loss_scale_steps = 1999;
    float scale = st.loss_scale;
    CHECK_OK(sf_net_set_state(net, &st));
    CHECK_OK(sf_net_train_step(net, x, labels, &r));
    CHECK_OK(sf_net_get_state(net, &st));
    CHECK(r.skipped || (st.loss_scale == 2 * scale && st.loss_scale_steps == 0),
          "after 2000 good steps the scale is %g (was %g), %lld steps", st.loss_scale, scale,
          (long long)st.loss_scale_steps);
    /* a NaN in the readout's bias makes the loss NaN: that is a failure in fp16 too, not a skipped step */
    int32_t last = sf_net_tensor_count(net, SF_ROLE_PARAM) - 1;
    sf_tensor_info ti;
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, last, &ti));
    float *bias = calloc((size_t)ti.numel, sizeof *bias);
    bias[0] = NAN;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, last, bias));
    free(bias);
    CHECK(sf_net_train_step(net, x, labels, &r) == SF_ERR_NUMERIC, "a NaN loss (%g) did not fail the step", r.loss);
    free(before);
    sf_net_free(net);
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_precision: no CUDA device\n");
        return 1;
    }
    prec = sf_precision_name(SF_PRECISION_BF16);
    test_net(SF_PRECISION_BF16, 2e-2, 0.1);
    test_nhwc_net(SF_PRECISION_BF16, 2e-2, 0.1);
    /* bf16's 8-bit mantissa: a recurrent net's summed products round differently on the two paths, and θ_grad then cuts
     * a few other steps (0.088 feed-forward, 0.116 recurrent on an H200) */
    test_sparse_nets(SF_PRECISION_BF16, 2e-2, 0.15);
    prec = sf_precision_name(SF_PRECISION_FP16);
    test_net(SF_PRECISION_FP16, 5e-3, 0.05);
    test_nhwc_net(SF_PRECISION_FP16, 5e-3, 0.05);
    prec = sf_precision_name(SF_PRECISION_FP32);
    test_nhwc_net(SF_PRECISION_FP32, 1e-5, 1e-4);
    prec = sf_precision_name(SF_PRECISION_FP16);
    test_sparse_nets(SF_PRECISION_FP16, 5e-3, 0.05);
    const sf_precision every[] = {SF_PRECISION_FP32, SF_PRECISION_TF32, SF_PRECISION_BF16, SF_PRECISION_FP16};
    for (int k = 0; k < 4; k++) {
        prec = sf_precision_name(every[k]);
        test_lean_nets(every[k]);
    }
    test_loss_scale();
    return tu_finish("test_gpu_precision");
}
