/* op_neuron.c — the harness's families of neuron ops: the time-fused neuron (every model, the state carried, a
 * PLIF's w, the forward's checkpoints), its compact output and masked backward, batch norm, fused BN→neuron (its
 * split backward, its planned scratch) and the merge of statistics, and the recurrent layer. Each family's comment
 * names the row fields it reads, its plain formulation (the CPU runner's reference) and its bounds. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- neurons of a row */

/* The row's neuron: the model (ALIF rho 0.9, beta 0.7), with tu_seed_neuron's θ_grad options where c->grad is set. */
static void neuron_of(const op_case *c, sf_lif_params *p)
{
    if (c->grad) tu_seed_neuron(p, c->grad, 0.6f);
    else sf_lif_default_params(p);
    p->model = c->model;
    p->per_channel = c->per_channel;
    p->rho = 0.9f;
    p->beta = 0.7f;
}

/* The options of sweep variant v: the surrogate (v % 4, its default alpha), soft reset (bit 2), detach_reset
 * (bit 3), θ_grad 0.3 (bit 4); decay_input off where v % 3 == 0 (the IF keeps it). */
static void sweep(sf_lif_params *p, int v)
{
    p->surrogate = (sf_surrogate)(v % 4);
    p->alpha = sf_surrogate_default_alpha(p->surrogate);
    p->soft_reset = (v >> 2) & 1;
    p->detach_reset = (v >> 3) & 1;
    p->use_grad_threshold = (v >> 4) & 1;
    p->grad_threshold = 0.3f;
    p->decay_input = p->model == SF_NEURON_IF || v % 3 != 0;
}

/* Floats of state per neuron: v, and the ALIF's b. */
static int64_t state_size(const sf_lif_params *p) { return p->model == SF_NEURON_ALIF ? 2 : 1; }

/* Neurons per step: B·C·hw where the row gives channels, else B·n. */
static int64_t neurons(const op_case *c) { return c->C ? c->B * c->C * c->hw : c->B * c->n; }

/* The incoming state [S·N] (the ALIF's b is not negative) and its gradient. */
static op_ten state_in(op_harness *h, int64_t S, int64_t N, uint64_t seed)
{
    float *v = op_host_randn((size_t)(S * N), 0.2f, 0.3f, seed);
    for (int64_t i = N; i < S * N; i++) v[i] = fabsf(v[i]);
    op_ten t = op_in(h, OP_F32, (size_t)(S * N), v);
    free(v);
    return t;
}

/* A PLIF's w (one, or one per channel): N(0, 0.5) in fp32; 0 under 16-bit storage and where `zero`, so k = sigmoid(w)
 * is 1/2 on both sides (the device's expf may differ from the host's by an ulp elsewhere, which can flip a spike
 * whose input was rounded to 16 bits). */
static op_ten plif_w(op_harness *h, int32_t wc, bool zero, uint64_t seed)
{
    float *w = op_host_randn((size_t)wc, 0.0f, 0.5f, seed);
    for (int32_t i = 0; i < wc && (zero || h->act != SF_SCALAR_F32); i++) w[i] = 0.0f;
    op_ten t = op_in(h, OP_F32, (size_t)wc, w);
    free(w);
    return t;
}

static int32_t plif_channels(const op_case *c, const sf_lif_params *p)
{
    return p->model != SF_NEURON_PLIF ? 0 : p->per_channel ? c->C : 1;
}

/* The bound of a PLIF's dw: a float sum over every neuron and step that cancels (the two pieces' partial sums
 * added round apart from the one call's by up to 2e-4 of it; another backend's order by up to 1e-4). */
static const op_tol dw_tol = {1e-3, 1e-4, 1e-4, 1e-4, 1e-4};

static double row_tol(const op_case *c, double fallback) { return c->tol > 0 ? c->tol : fallback; }

/* ---------------------------------------------------------------- the time-fused neuron */

/* What one side's neuron calls read and write. */
typedef struct {
    const sf_lif_params *p;
    int64_t T, N;
    op_ten x, ds, s, u8, h, cnt, dx, dxr; /* dxr: the backward that recomputes h */
    op_ten vin, dvin, vout, dvout, dvoutr, w, dw, dwr;
    bool state;
    int32_t wc, w_hw;
} lif_io;

static sf_lif_state lif_state(const lif_io *io, int s, const float *v_in, float *v_out, const float *dv_in,
                              float *dv_out, float *dw)
{
    return (sf_lif_state){.v_in = v_in,
                          .v_out = v_out,
                          .dv_in = dv_in,
                          .dv_out = dv_out,
                          .w = io->wc ? OP_P(io->w, s) : NULL,
                          .dw = io->wc ? dw : NULL,
                          .w_channels = io->wc > 1 ? io->wc : 1,
                          .w_hw = io->w_hw};
}

/* The forward and both backwards in one call over all T steps. */
static void lif_one_call(op_harness *h, const lif_io *io, int s)
{
    const bool st = io->state || io->wc;
    const sf_lif_state f =
        lif_state(io, s, io->state ? OP_P(io->vin, s) : NULL, io->state ? OP_P(io->vout, s) : NULL, NULL, NULL, NULL);
    const sf_lif_out out = {
        .s = OP_P(io->s, s), .s_u8 = OP_U8(io->u8, s), .h = OP_P(io->h, s), .spike_count = OP_P(io->cnt, s)};
    OP(h, s, lif_forward, io->p, io->T, io->N, OP_P(io->x, s), &out, st ? &f : NULL);
    for (int full = 1; full >= 0; full--) {
        const sf_lif_state b =
            lif_state(io, s, io->state ? OP_P(io->vin, s) : NULL, NULL, io->state ? OP_P(io->dvin, s) : NULL,
                      io->state ? OP_P(full ? io->dvout : io->dvoutr, s) : NULL, OP_P(full ? io->dw : io->dwr, s));
        OP(h, s, lif_backward, io->p, io->T, io->N, OP_P(io->x, s), full ? OP_P(io->h, s) : NULL, OP_P(io->ds, s),
           OP_P(full ? io->dx : io->dxr, s), st ? &b : NULL);
    }
}

/* The plain formulation: the sequence in two pieces, the state carried from the first to the second (forward) and
 * back (backward), which sf_lif_state promises gives the one call's bits (a PLIF's dw: the two pieces' sum). */
static void lif_in_pieces(op_harness *h, const lif_io *io, int s)
{
    const int64_t T1 = io->T / 2, T2 = io->T - T1, N = io->N, at = T1 * N, S = state_size(io->p);
    op_ten vmid = op_out(h, OP_F32, (size_t)(S * N)), dvmid = op_out(h, OP_F32, (size_t)(S * N));
    op_ten dw1 = op_out(h, OP_F32, (size_t)io->wc), dw2 = op_out(h, OP_F32, (size_t)io->wc);
    const float *vin = io->state ? OP_P(io->vin, s) : NULL, *dvin = io->state ? OP_P(io->dvin, s) : NULL;
    const sf_lif_state f1 = lif_state(io, s, vin, OP_P(vmid, s), NULL, NULL, NULL);
    const sf_lif_state f2 = lif_state(io, s, OP_P(vmid, s), io->state ? OP_P(io->vout, s) : NULL, NULL, NULL, NULL);
    OP(h, s, lif_forward, io->p, T1, N, OP_P(io->x, s),
       &(sf_lif_out){
           .s = OP_P(io->s, s), .s_u8 = OP_U8(io->u8, s), .h = OP_P(io->h, s), .spike_count = OP_P(io->cnt, s)},
       &f1);
    OP(h, s, lif_forward, io->p, T2, N, OP_P(io->x, s) + at,
       &(sf_lif_out){.s = OP_P(io->s, s) + at,
                     .s_u8 = OP_U8(io->u8, s) + at,
                     .h = OP_P(io->h, s) + at,
                     .spike_count = OP_P(io->cnt, s)},
       &f2);
    for (int full = 1; full >= 0; full--) {
        const op_ten *dx = full ? &io->dx : &io->dxr, *dw = full ? &io->dw : &io->dwr;
        const sf_lif_state b2 = lif_state(io, s, OP_P(vmid, s), NULL, dvin, OP_P(dvmid, s), OP_P(dw2, s));
        const sf_lif_state b1 = lif_state(io, s, vin, NULL, OP_P(dvmid, s),
                                          io->state ? OP_P(full ? io->dvout : io->dvoutr, s) : NULL, OP_P(dw1, s));
        OP(h, s, lif_backward, io->p, T2, N, OP_P(io->x, s) + at, full ? OP_P(io->h, s) + at : NULL,
           OP_P(io->ds, s) + at, OP_P(*dx, s) + at, &b2);
        OP(h, s, lif_backward, io->p, T1, N, OP_P(io->x, s), full ? OP_P(io->h, s) : NULL, OP_P(io->ds, s),
           OP_P(*dx, s), &b1);
        if (io->wc) {
            float *a = op_get(h, &dw1, s), *b = op_get(h, &dw2, s);
            for (int32_t i = 0; i < io->wc; i++) a[i] += b[i];
            op_put_side(h, dw, s, a);
            free(a), free(b);
        }
    }
    op_free(h, &vmid), op_free(h, &dvmid), op_free(h, &dw1), op_free(h, &dw2);
}

/* On a backend whose backward starts at the forward's checkpoints (past 32 steps): the forward that writes them and
 * the backward that reads them give the bits of the recompute without them. */
static void lif_from_checkpoints(op_harness *h, const lif_io *io)
{
    const int64_t n = io->T * io->N, S = state_size(io->p);
    op_ten ck = op_out(h, OP_F32, (size_t)sf_lif_ckpt_floats(io->p, io->T, io->N)), s2 = op_out(h, OP_ACTV, (size_t)n);
    op_ten dx = op_out(h, OP_ACTV, (size_t)n), dv = op_out(h, OP_F32, (size_t)(S * io->N));
    op_ten dw = op_out(h, OP_F32, (size_t)io->wc);
    sf_lif_state st = lif_state(io, 1, io->state ? OP_P(io->vin, 1) : NULL, NULL, NULL, NULL, NULL);
    st.v_ckpt = OP_P(ck, 1);
    OP(h, 1, lif_forward, io->p, io->T, io->N, OP_P(io->x, 1), &(sf_lif_out){.s = OP_P(s2, 1)}, &st);
    st = lif_state(io, 1, io->state ? OP_P(io->vin, 1) : NULL, NULL, io->state ? OP_P(io->dvin, 1) : NULL, OP_P(dv, 1),
                   OP_P(dw, 1));
    st.v_ckpt = OP_P(ck, 1);
    OP(h, 1, lif_backward, io->p, io->T, io->N, OP_P(io->x, 1), NULL, OP_P(io->ds, 1), OP_P(dx, 1), &st);
    op_same(h, 1, "dx from the checkpoints", &io->dxr, &dx);
    if (io->state) op_same(h, 1, "dv_out from the checkpoints", &io->dvoutr, &dv);
    if (io->wc) op_same(h, 1, "dw from the checkpoints", &io->dwr, &dw);
    op_free(h, &ck), op_free(h, &s2), op_free(h, &dx), op_free(h, &dv), op_free(h, &dw);
}

/* lif_forward and lif_backward over [T, N] (N from B, C, hw or B, n), the row's model (PLIF: w per layer, or per
 * channel), the state carried in and out where c->state, over the option sweep (variants). Both backwards: from h
 * (full) and recomputing it; on the tested side they give the same bits, and so does a backward from the forward's
 * checkpoints where the backend keeps them. Plain: the sequence in two pieces with the state carried (bitwise).
 * Bounds: spikes, bytes, count exact; h 1e-6; dx c->tol (1e-5) and 16-bit; v_out exact (LIF) or 1e-6, dv_out 1e-5,
 * dw 1e-5 (1e-4 in 16 bits). */
static void run_lif(op_harness *h, const op_case *c, int v)
{
    sf_lif_params p;
    neuron_of(c, &p);
    sweep(&p, v);
    const int64_t T = c->T, N = neurons(c), n = T * N, S = state_size(&p);
    snprintf(h->what, sizeof h->what, "lif %s %s soft=%d detach=%d θ=%d decay_input=%d T=%lld N=%lld state=%d%s",
             sf_neuron_model_name(p.model), sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset,
             p.use_grad_threshold, p.decay_input, (long long)T, (long long)N, c->state,
             p.per_channel ? " per channel" : "");
    lif_io io = {.p = &p, .T = T, .N = N, .state = c->state != 0, .wc = plif_channels(c, &p), .w_hw = c->hw};
    io.x = op_randn(h, OP_ACTV, (size_t)n, p.decay_input ? 0.6f : 0.35f, p.decay_input ? 1.0f : 0.6f,
                    100 + (uint64_t)(v + T + N));
    io.ds = op_randn(h, OP_ACTV, (size_t)n, 0.0f, 1.0f, 200 + (uint64_t)v);
    io.s = op_out(h, OP_ACTV, (size_t)n), io.u8 = op_out(h, OP_RAW, (size_t)n), io.h = op_out(h, OP_F32, (size_t)n);
    io.cnt = op_in(h, OP_F32, 1, (float[]){0.0f});
    io.dx = op_out(h, OP_ACTV, (size_t)n), io.dxr = op_out(h, OP_ACTV, (size_t)n);
    io.vin = state_in(h, S, N, 5), io.dvin = op_randn(h, OP_F32, (size_t)(S * N), 0.0f, 0.5f, 6);
    io.vout = op_out(h, OP_F32, (size_t)(S * N)), io.dvout = op_out(h, OP_F32, (size_t)(S * N));
    io.dvoutr = op_out(h, OP_F32, (size_t)(S * N));
    io.w = plif_w(h, io.wc, false, 7), io.dw = op_out(h, OP_F32, (size_t)io.wc),
    io.dwr = op_out(h, OP_F32, (size_t)io.wc);
    OP_SIDES(s)
    {
        if (op_plain(h, s, SF_BACKEND_OP_lif_forward) && T > 1) lif_in_pieces(h, &io, s);
        else lif_one_call(h, &io, s);
    }
    const op_tol dx_tol = OP_TOL_ACT(row_tol(c, 1e-5));
    op_cmp(h, "spikes", &io.s, OP_TOL_EXACT);
    op_cmp_raw(h, "spike bytes", &io.u8);
    op_cmp(h, "spike count", &io.cnt, OP_TOL_EXACT);
    op_cmp(h, "h", &io.h, OP_TOL_F32(1e-6));
    op_cmp(h, "dx (saved h)", &io.dx, dx_tol);
    op_cmp(h, "dx (recompute)", &io.dxr, dx_tol);
    op_same(h, 1, "dx, saved h against recompute", &io.dx, &io.dxr);
    if (io.state) {
        op_cmp(h, "v_out", &io.vout, p.model == SF_NEURON_LIF ? OP_TOL_EXACT : OP_TOL_F32(1e-6));
        op_cmp(h, "dv_out (saved h)", &io.dvout, OP_TOL_F32(1e-5));
        op_cmp(h, "dv_out (recompute)", &io.dvoutr, OP_TOL_F32(1e-5));
        op_same(h, 1, "dv_out, saved h against recompute", &io.dvout, &io.dvoutr);
    }
    if (io.wc) {
        op_cmp(h, "dw (saved h)", &io.dw, dw_tol);
        op_cmp(h, "dw (recompute)", &io.dwr, dw_tol);
        op_same(h, 1, "dw, saved h against recompute", &io.dw, &io.dwr);
    }
    if (h->be[1]->neuron_ckpt && T > SF_LIF_CKPT_STEPS) lif_from_checkpoints(h, &io);
    op_ten *all[] = {&io.x,   &io.ds,   &io.s,    &io.u8,    &io.h,      &io.cnt, &io.dx, &io.dxr,
                     &io.vin, &io.dvin, &io.vout, &io.dvout, &io.dvoutr, &io.w,   &io.dw, &io.dwr};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
}

OP_FAMILY(op_lif, "lif", run_lif, SF_BACKEND_OP_lif_forward, SF_BACKEND_OP_lif_backward);

/* ---------------------------------------------------------------- compact output, masked backward */

/* The LIF input that makes the spikes of variant v: 1000 (fires whatever the state) or -1 (never). */
static op_ten firing_input(op_harness *h, const op_case *c, int v, int64_t rows, int64_t n, uint64_t seed)
{
    double density;
    bool one;
    op_density(c, v, &density, &one);
    float *x = op_host_spikes(rows, n, density, one, seed);
    for (int64_t i = 0; i < rows * n; i++) x[i] = x[i] != 0.0f ? 1000.0f : -1.0f;
    op_ten t = op_in(h, OP_ACTV, (size_t)(rows * n), x);
    free(x);
    return t;
}

/* lif_forward writing the compact spikes of its T·B rows of n neurons itself (bits, lists, counts; core/spikes.h),
 * on inputs that fire or never do at the density of op_density, the state carried where c->state. Plain: the forward
 * without them, then spikes_compact. Bounds: spikes, h, count, the compact form exact; v_out 1e-6. */
static void run_lif_compact(op_harness *h, const op_case *c, int v)
{
    sf_lif_params p;
    neuron_of(c, &p);
    const int64_t rows = c->T * c->B, n = c->n, N = c->B * n, total = rows * n, S = state_size(&p);
    double density;
    bool one;
    op_density(c, v, &density, &one);
    snprintf(h->what, sizeof h->what, "lif compact %s T=%lld B=%lld n=%lld density %.2f%s state=%d",
             sf_neuron_model_name(p.model), (long long)c->T, (long long)c->B, (long long)n, density,
             one ? " (one per row)" : "", c->state);
    op_ten x = firing_input(h, c, v, rows, n, 81 + (uint64_t)n), spk = op_out(h, OP_ACTV, (size_t)total);
    op_ten hh = op_out(h, OP_F32, (size_t)total), cnt = op_in(h, OP_F32, 1, (float[]){0.0f});
    op_ten vin = state_in(h, S, N, 46), vout = op_out(h, OP_F32, (size_t)(S * N)), w = plif_w(h, 1, true, 0);
    op_spk cs = op_spk_out(h, rows, n, true);
    OP_SIDES(s)
    {
        const sf_lif_state st = {.v_in = c->state ? OP_P(vin, s) : NULL,
                                 .v_out = c->state ? OP_P(vout, s) : NULL,
                                 .w = OP_P(w, s),
                                 .w_channels = 1,
                                 .w_hw = N};
        const sf_spikes compact = op_spk_at(&cs, s, true);
        sf_lif_out out = {.s = OP_P(spk, s), .h = OP_P(hh, s), .spike_count = OP_P(cnt, s)};
        if (op_plain(h, s, SF_BACKEND_OP_lif_forward)) {
            OP(h, s, lif_forward, &p, c->T, N, OP_P(x, s), &out, &st);
            OP(h, s, spikes_compact, rows, n, OP_P(spk, s), &compact, NULL, NULL);
        } else {
            out.c = compact;
            out.row = n;
            OP(h, s, lif_forward, &p, c->T, N, OP_P(x, s), &out, &st);
        }
    }
    op_cmp(h, "spikes", &spk, OP_TOL_EXACT);
    op_cmp(h, "h", &hh, OP_TOL_EXACT);
    op_cmp(h, "spike count", &cnt, OP_TOL_EXACT);
    op_cmp_spk(h, "compact spikes", &cs, true);
    if (c->state) op_cmp(h, "v_out", &vout, OP_TOL_F32(1e-6));
    op_free(h, &x), op_free(h, &spk), op_free(h, &hh), op_free(h, &cnt), op_free(h, &vin), op_free(h, &vout);
    op_free(h, &w), op_spk_free(h, &cs);
}

OP_FAMILY(op_lif_compact, "lif_compact", run_lif_compact, SF_BACKEND_OP_lif_forward);

/* lif_backward_masked over T steps of B rows of n neurons (recompute, the state carried where c->state; θ_grad mode
 * c->grad, or variant v where the row sweeps): dx, the mask of its nonzero entries with their count, dv_out, a
 * PLIF's dw (w = 0). Plain: lif_backward, the mask packed from its dx. Bounds: dx c->tol (1e-4) and 16-bit (exact
 * against plain); the masks as op_cmp_mask; dv_out 1e-4; dw. */
static void run_lif_masked(op_harness *h, const op_case *c, int v)
{
    op_case row = *c;
    if (c->variants > 0) row.grad = v;
    c = &row;
    sf_lif_params p;
    neuron_of(c, &p);
    const int64_t rows = c->T * c->B, n = c->n, N = c->B * n, total = rows * n, S = state_size(&p);
    snprintf(h->what, sizeof h->what, "lif masked backward %s T=%lld B=%lld n=%lld θ_grad %d state=%d",
             sf_neuron_model_name(p.model), (long long)c->T, (long long)c->B, (long long)n, c->grad, c->state);
    op_ten x = op_randn(h, OP_ACTV, (size_t)total, 0.6f, 1.0f, 82), ds = op_randn(h, OP_ACTV, (size_t)total, 0, 1, 83);
    op_ten dx = op_out(h, OP_ACTV, (size_t)total), count = op_in(h, OP_F32, 1, (float[]){0.0f});
    op_ten vin = state_in(h, S, N, 46), dvin = op_randn(h, OP_F32, (size_t)(S * N), 0.0f, 1.0f, 47);
    op_ten dvout = op_out(h, OP_F32, (size_t)(S * N)), w = plif_w(h, 1, true, 0), dw = op_out(h, OP_F32, 1);
    op_spk mask = op_spk_out(h, rows, n, false);
    OP_SIDES(s)
    {
        const bool plif = p.model == SF_NEURON_PLIF;
        const sf_lif_state st = {.v_in = c->state ? OP_P(vin, s) : NULL,
                                 .dv_in = c->state ? OP_P(dvin, s) : NULL,
                                 .dv_out = c->state ? OP_P(dvout, s) : NULL,
                                 .w = OP_P(w, s),
                                 .dw = plif ? OP_P(dw, s) : NULL,
                                 .w_channels = 1,
                                 .w_hw = N};
        if (op_plain(h, s, SF_BACKEND_OP_lif_backward_masked)) {
            OP(h, s, lif_backward, &p, c->T, N, OP_P(x, s), NULL, OP_P(ds, s), OP_P(dx, s), &st);
            uint32_t *bits = malloc(mask.bits.n + 4);
            int32_t *segs = malloc(mask.cnt.n + 4);
            float *d = op_get(h, &dx, s);
            const float ones = (float)op_host_pack(rows, n, d, bits, NULL, segs);
            op_put_side(h, &mask.bits, s, bits);
            op_put_side(h, &mask.cnt, s, segs);
            op_put_side(h, &count, s, &ones);
            free(bits), free(segs), free(d);
        } else {
            const sf_spikes m = op_spk_at(&mask, s, false);
            OP(h, s, lif_backward_masked, &p, c->T, c->B, n, OP_P(x, s), NULL, OP_P(ds, s), OP_P(dx, s), &m,
               OP_P(count, s), &st);
        }
    }
    op_cmp(h, "dx", &dx, OP_TOL_ACT(row_tol(c, 1e-4)));
    op_cmp_mask(h, "dx", &mask, &dx, &count);
    if (c->state) op_cmp(h, "dv_out", &dvout, OP_TOL_F32(1e-4));
    if (p.model == SF_NEURON_PLIF) op_cmp(h, "dw", &dw, dw_tol);
    op_free(h, &x), op_free(h, &ds), op_free(h, &dx), op_free(h, &count), op_free(h, &vin), op_free(h, &dvin);
    op_free(h, &dvout), op_free(h, &w), op_free(h, &dw), op_spk_free(h, &mask);
}

OP_FAMILY(op_lif_masked, "lif_masked", run_lif_masked, SF_BACKEND_OP_lif_backward_masked);

/* ---------------------------------------------------------------- batch norm */

/* Side 0's batch statistics of x, as inputs of both sides (the later ops get the same statistics). */
static void reference_stats(op_harness *h, sf_bn_shape sh, const op_ten *x, op_ten *mean, op_ten *var)
{
    op_ten m = op_out(h, OP_F32, (size_t)sh.c), q = op_out(h, OP_F32, (size_t)sh.c);
    CHECK_OK(h->be[0]->bn_stats(h->be[0], sh, OP_P(*x, 0), OP_P(m, 0), OP_P(q, 0)));
    float *hm = op_get(h, &m, 0), *hq = op_get(h, &q, 0);
    *mean = op_in(h, OP_F32, (size_t)sh.c, hm);
    *var = op_in(h, OP_F32, (size_t)sh.c, hq);
    free(hm), free(hq);
    op_free(h, &m), op_free(h, &q);
}

/* bn_stats, bn_forward, bn_backward and bn_update_running over [rows, C, hw] (c->rows, c->C, c->hw); the ops after
 * the statistics get side 0's. One value per channel has no unbiased variance: bn_update_running refuses it on both
 * sides; the update takes a shift (the β values stand in). Plain: the statistics and the running update in double
 * on the host (1e-6); BN itself has none. Bounds:
 * statistics 1e-5; y 1e-4 (the CPU folds γ·invstd first: outputs near 0 lose digits to cancellation) and 16-bit;
 * dx 1e-5 and 16-bit; dγ, dβ 1e-5; the running statistics 1e-6. */
static void run_bn(op_harness *h, const op_case *c, int v)
{
    const sf_bn_shape sh = {c->rows, c->C, c->hw};
    const size_t n = (size_t)(c->rows * c->C * c->hw), C = (size_t)c->C;
    const uint64_t seed = 300 + (uint64_t)n;
    snprintf(h->what, sizeof h->what, "bn rows=%lld C=%d hw=%lld", (long long)c->rows, c->C, (long long)c->hw);
    op_ten x = op_randn(h, OP_ACTV, n, 0.3f, 2.0f, seed), dy = op_randn(h, OP_ACTV, n, 0.0f, 1.0f, seed + 1);
    op_ten g = op_randn(h, OP_F32, C, 1.0f, 0.2f, seed + 2), b = op_randn(h, OP_F32, C, 0.1f, 0.2f, seed + 3);
    op_ten m = op_out(h, OP_F32, C), q = op_out(h, OP_F32, C), y = op_out(h, OP_ACTV, n), dx = op_out(h, OP_ACTV, n);
    op_ten dg = op_out(h, OP_F32, C), db = op_out(h, OP_F32, C);
    float *rm0 = op_host_randn(C, 0.0f, 0.1f, seed + 4), *rv0 = op_host_randn(C, 1.0f, 0.1f, seed + 5);
    op_ten rm = op_in(h, OP_F32, C, rm0), rv = op_in(h, OP_F32, C, rv0);
    const double count = (double)c->rows * (double)c->hw;
    OP_SIDES(s)
    {
        if (!op_plain(h, s, SF_BACKEND_OP_bn_stats)) {
            OP(h, s, bn_stats, sh, OP_P(x, s), OP_P(m, s), OP_P(q, s));
            continue;
        }
        float *hx = op_get(h, &x, s), *hm = malloc(4 * C), *hq = malloc(4 * C);
        for (size_t ch = 0; ch < C; ch++) {
            double sum = 0.0, sq = 0.0;
            for (int64_t r = 0; r < c->rows; r++)
                for (int64_t i = 0; i < c->hw; i++) sum += hx[((size_t)r * C + ch) * (size_t)c->hw + (size_t)i];
            const double mu = sum / count;
            for (int64_t r = 0; r < c->rows; r++)
                for (int64_t i = 0; i < c->hw; i++) {
                    const double d = hx[((size_t)r * C + ch) * (size_t)c->hw + (size_t)i] - mu;
                    sq += d * d;
                }
            hm[ch] = (float)mu, hq[ch] = (float)(sq / count);
        }
        op_put_side(h, &m, s, hm), op_put_side(h, &q, s, hq);
        free(hx), free(hm), free(hq);
    }
    op_cmp(h, "bn_stats mean", &m, (op_tol){1e-6, 1e-5, 1e-5, 1e-5, 1e-5});
    op_cmp(h, "bn_stats var", &q, (op_tol){1e-6, 1e-5, 1e-5, 1e-5, 1e-5});
    op_ten mean, var;
    reference_stats(h, sh, &x, &mean, &var);
    OP_SIDES(s)
    OP(h, s, bn_forward, sh, OP_P(x, s), OP_P(mean, s), OP_P(var, s), 1e-5f, OP_P(g, s), OP_P(b, s), OP_P(y, s));
    op_cmp(h, "bn_forward y", &y, OP_TOL_ACT(1e-4));
    OP_SIDES(s)
    OP(h, s, bn_backward, sh, OP_P(x, s), OP_P(mean, s), OP_P(var, s), 1e-5f, OP_P(g, s), OP_P(dy, s), OP_P(dx, s),
       OP_P(dg, s), OP_P(db, s));
    op_cmp(h, "bn_backward dx", &dx, OP_TOL_ACT(1e-5));
    op_cmp(h, "bn_backward dgamma", &dg, OP_TOL_F32(1e-5));
    op_cmp(h, "bn_backward dbeta", &db, OP_TOL_F32(1e-5));
    if (count > 1) {
        float *hm = op_get(h, &mean, 0), *hq = op_get(h, &var, 0), *hs = op_get(h, &b, 0);
        float *um = malloc(4 * C), *uv = malloc(4 * C);
        for (size_t ch = 0; ch < C; ch++) { /* the plain running update */
            um[ch] = (float)(0.9 * rm0[ch] + 0.1 * ((double)hm[ch] + hs[ch]));
            uv[ch] = (float)(0.9 * rv0[ch] + 0.1 * hq[ch] * count / (count - 1.0));
        }
        OP_SIDES(s)
        {
            if (op_plain(h, s, SF_BACKEND_OP_bn_update_running)) op_put_side(h, &rm, s, um), op_put_side(h, &rv, s, uv);
            else
                OP(h, s, bn_update_running, sh, 0.1f, OP_P(mean, s), OP_P(var, s), OP_P(b, s), OP_P(rm, s),
                   OP_P(rv, s));
        }
        op_cmp(h, "running mean", &rm, (op_tol){1e-6, 1e-6, 1e-6, 1e-6, 1e-6});
        op_cmp(h, "running var", &rv, (op_tol){1e-6, 1e-6, 1e-6, 1e-6, 1e-6});
        free(hm), free(hq), free(hs), free(um), free(uv);
    } else {
        OP_SIDES(s)
        CHECK(OPV(h, s, bn_update_running, sh, 0.1f, OP_P(mean, s), OP_P(var, s), NULL, OP_P(rm, s), OP_P(rv, s)) ==
                  SF_ERR_INVALID,
              "%s: side %d accepted a running variance of one value per channel", h->what, s);
    }
    op_ten *all[] = {&x, &dy, &g, &b, &m, &q, &y, &dx, &dg, &db, &rm, &rv, &mean, &var};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
    free(rm0), free(rv0);
}

OP_FAMILY(op_bn, "bn", run_bn, SF_BACKEND_OP_bn_stats, SF_BACKEND_OP_bn_forward, SF_BACKEND_OP_bn_backward,
          SF_BACKEND_OP_bn_update_running);

/* bn_stats_merge of `parts` (c->parts) equal parts of a [parts·rows, C, hw] batch: each part's bn_stats (side 0's, the
 * same inputs on both sides) merged. Plain: bn_stats over the whole batch (1e-6). Bounds: exact (the merge is
 * specified to the bit). */
static void run_bn_merge(op_harness *h, const op_case *c, int v)
{
    const int32_t P = c->parts, C = c->C;
    const sf_bn_shape part = {c->rows, C, c->hw}, whole = {c->rows * P, C, c->hw};
    const size_t per = (size_t)(c->rows * C * c->hw);
    snprintf(h->what, sizeof h->what, "bn_stats_merge of %d parts of rows=%lld C=%d hw=%lld", P, (long long)c->rows, C,
             (long long)c->hw);
    op_ten x = op_randn(h, OP_F32, per * (size_t)P, 0.4f, 1.5f, 33), stats = op_out(h, OP_F32, 2 * (size_t)(P * C));
    for (int32_t k = 0; k < P; k++) /* the parts' statistics, from side 0 */
        CHECK_OK(h->be[0]->bn_stats(h->be[0], part, OP_P(x, 0) + (size_t)k * per, OP_P(stats, 0) + 2 * k * C,
                                    OP_P(stats, 0) + (2 * k + 1) * C));
    float *hs = op_get(h, &stats, 0);
    op_put(h, &stats, hs);
    free(hs);
    op_ten m = op_out(h, OP_F32, (size_t)C), q = op_out(h, OP_F32, (size_t)C);
    OP_SIDES(s)
    {
        if (op_plain(h, s, SF_BACKEND_OP_bn_stats_merge)) OP(h, s, bn_stats, whole, OP_P(x, s), OP_P(m, s), OP_P(q, s));
        else OP(h, s, bn_stats_merge, P, C, OP_P(stats, s), OP_P(m, s), OP_P(q, s));
    }
    op_cmp(h, "merged mean", &m, (op_tol){1e-6, 0, 0, 0, 0});
    op_cmp(h, "merged var", &q, (op_tol){1e-6, 0, 0, 0, 0});
    op_free(h, &x), op_free(h, &stats), op_free(h, &m), op_free(h, &q);
}

OP_FAMILY(op_bn_merge, "bn_merge", run_bn_merge, SF_BACKEND_OP_bn_stats_merge);

/* ---------------------------------------------------------------- fused BN → neuron */

typedef struct {
    const sf_lif_params *p;
    int64_t T;
    sf_bn_shape sh;
    bool keep, planned, state;
    int32_t parts, wc;
    op_ten x, ds, g, b, mean, var, s, hh, dx, dg, db, vin, dvin, dvout, w, dw;
} bnl_io;

static sf_lif_state bnl_state(const bnl_io *io, int s, bool backward)
{
    return (sf_lif_state){.v_in = io->state ? OP_P(io->vin, s) : NULL,
                          .dv_in = io->state && backward ? OP_P(io->dvin, s) : NULL,
                          .dv_out = io->state && backward ? OP_P(io->dvout, s) : NULL,
                          .w = io->wc ? OP_P(io->w, s) : NULL,
                          .dw = io->wc && backward ? OP_P(io->dw, s) : NULL,
                          .w_channels = io->wc > 1 ? io->wc : 1,
                          .w_hw = io->sh.hw};
}

/* The fused ops on side s: the forward, then the backward in one call, or in two phases as one of `parts`
 * processes whose sums are this one's (phase 2 from parts × this part's sums over parts × the rows). */
static void bnl_fused(op_harness *h, const bnl_io *io, int s)
{
    const sf_lif_state fs = bnl_state(io, s, false), bs = bnl_state(io, s, true);
    const bool st = io->state || io->wc;
    OP(h, s, bn_lif_forward, io->p, io->T, io->sh, OP_P(io->x, s), OP_P(io->mean, s), OP_P(io->var, s), 1e-5f,
       OP_P(io->g, s), OP_P(io->b, s), &(sf_lif_out){.s = OP_P(io->s, s), .h = io->keep ? OP_P(io->hh, s) : NULL},
       st ? &fs : NULL);
    void *scratch = NULL;
    if (io->planned) CHECK_OK(h->be[s]->alloc(h->be[s], OPV(h, s, bn_lif_scratch, io->p, io->T, io->sh) + 4, &scratch));
    const float *hkept = io->keep ? OP_P(io->hh, s) : NULL;
    if (!io->parts) {
        OP(h, s, bn_lif_backward, io->p, io->T, io->sh, OP_P(io->x, s), hkept, OP_P(io->mean, s), OP_P(io->var, s),
           1e-5f, OP_P(io->g, s), OP_P(io->b, s), OP_P(io->ds, s), OP_P(io->dx, s), OP_P(io->dg, s), OP_P(io->db, s),
           st ? &bs : NULL, NULL, scratch);
    } else {
        const sf_bn_split one = {.phase = 1};
        OP(h, s, bn_lif_backward, io->p, io->T, io->sh, OP_P(io->x, s), hkept, OP_P(io->mean, s), OP_P(io->var, s),
           1e-5f, OP_P(io->g, s), OP_P(io->b, s), OP_P(io->ds, s), OP_P(io->dx, s), OP_P(io->dg, s), OP_P(io->db, s),
           st ? &bs : NULL, &one, scratch);
        const int32_t C = io->sh.c;
        float *pg = op_get(h, &io->dg, s), *pb = op_get(h, &io->db, s), *sums = malloc(8 * (size_t)C);
        for (int32_t k = 0; k < C; k++) sums[k] = (float)io->parts * pg[k], sums[C + k] = (float)io->parts * pb[k];
        op_ten all = op_out(h, OP_F32, 2 * (size_t)C);
        op_put_side(h, &all, s, sums);
        const sf_bn_split two = {
            .phase = 2, .sum_dyx = OP_P(all, s), .sum_dy = OP_P(all, s) + C, .rows = io->parts * io->sh.rows};
        sf_lif_state bs2 = bs;
        bs2.dv_out = NULL; /* phase 2 writes dx only */
        bs2.dw = NULL;
        OP(h, s, bn_lif_backward, io->p, io->T, io->sh, OP_P(io->x, s), hkept, OP_P(io->mean, s), OP_P(io->var, s),
           1e-5f, OP_P(io->g, s), OP_P(io->b, s), OP_P(io->ds, s), OP_P(io->dx, s), NULL, NULL, st ? &bs2 : NULL, &two,
           scratch);
        op_free(h, &all);
        free(pg), free(pb), free(sums);
    }
    h->be[s]->release(h->be[s], scratch);
}

/* The plain formulation: bn_forward, then the neuron op on its output, and back: lif_backward, then bn_backward. */
static void bnl_composed(op_harness *h, const bnl_io *io, int s)
{
    const int64_t n = io->sh.rows * io->sh.c * io->sh.hw, N = n / io->T;
    const sf_lif_state fs = bnl_state(io, s, false), bs = bnl_state(io, s, true);
    const bool st = io->state || io->wc;
    op_ten y = op_out(h, OP_ACTV, (size_t)n), hh = op_out(h, OP_F32, (size_t)n), dy = op_out(h, OP_ACTV, (size_t)n);
    OP(h, s, bn_forward, io->sh, OP_P(io->x, s), OP_P(io->mean, s), OP_P(io->var, s), 1e-5f, OP_P(io->g, s),
       OP_P(io->b, s), OP_P(y, s));
    OP(h, s, lif_forward, io->p, io->T, N, OP_P(y, s), &(sf_lif_out){.s = OP_P(io->s, s), .h = OP_P(hh, s)},
       st ? &fs : NULL);
    if (io->keep) CHECK_OK(h->be[s]->copy(h->be[s], OP_P(io->hh, s), OP_P(hh, s), 4 * (size_t)n));
    OP(h, s, lif_backward, io->p, io->T, N, OP_P(y, s), io->keep ? OP_P(hh, s) : NULL, OP_P(io->ds, s), OP_P(dy, s),
       st ? &bs : NULL);
    OP(h, s, bn_backward, io->sh, OP_P(io->x, s), OP_P(io->mean, s), OP_P(io->var, s), 1e-5f, OP_P(io->g, s),
       OP_P(dy, s), OP_P(io->dx, s), OP_P(io->dg, s), OP_P(io->db, s));
    if (io->parts) { /* phase 1's sums: Σdy·x̂ = dγ, Σdy = dβ over this part, as bn_backward gives them */
    }
    op_free(h, &y), op_free(h, &hh), op_free(h, &dy);
}

/* On a backend whose backward starts at the forward's checkpoints: the fused pair with them gives the recompute's
 * bits (dx, dγ, dβ, dw). */
static void bnl_from_checkpoints(op_harness *h, const bnl_io *io)
{
    const int64_t n = io->sh.rows * io->sh.c * io->sh.hw, N = n / io->T;
    op_ten ck = op_out(h, OP_F32, (size_t)sf_lif_ckpt_floats(io->p, io->T, N)), s2 = op_out(h, OP_ACTV, (size_t)n);
    op_ten dx = op_out(h, OP_ACTV, (size_t)n), dg = op_out(h, OP_F32, (size_t)io->sh.c);
    op_ten db = op_out(h, OP_F32, (size_t)io->sh.c), dw = op_out(h, OP_F32, (size_t)io->wc);
    sf_lif_state fs = bnl_state(io, 1, false), bs = bnl_state(io, 1, true);
    fs.v_ckpt = bs.v_ckpt = OP_P(ck, 1);
    bs.dv_out = NULL;
    bs.dw = io->wc ? OP_P(dw, 1) : NULL;
    OP(h, 1, bn_lif_forward, io->p, io->T, io->sh, OP_P(io->x, 1), OP_P(io->mean, 1), OP_P(io->var, 1), 1e-5f,
       OP_P(io->g, 1), OP_P(io->b, 1), &(sf_lif_out){.s = OP_P(s2, 1)}, &fs);
    OP(h, 1, bn_lif_backward, io->p, io->T, io->sh, OP_P(io->x, 1), NULL, OP_P(io->mean, 1), OP_P(io->var, 1), 1e-5f,
       OP_P(io->g, 1), OP_P(io->b, 1), OP_P(io->ds, 1), OP_P(dx, 1), OP_P(dg, 1), OP_P(db, 1), &bs, NULL, NULL);
    op_same(h, 1, "dx from the checkpoints", &io->dx, &dx);
    op_same(h, 1, "dgamma from the checkpoints", &io->dg, &dg);
    op_same(h, 1, "dbeta from the checkpoints", &io->db, &db);
    if (io->wc) op_same(h, 1, "dw from the checkpoints", &io->dw, &dw);
    op_free(h, &ck), op_free(h, &s2), op_free(h, &dx), op_free(h, &dg), op_free(h, &db), op_free(h, &dw);
}

/* bn_lif_forward and bn_lif_backward (and bn_lif_scratch) over [T, B, C, hw] with batch statistics (side 0's), the
 * row's model (a PLIF's w per layer or channel), the state carried where c->state, the backward in two phases where
 * c->parts; variant bits: h kept (bit 0), the backward's sums in a planned buffer of bn_lif_scratch bytes (bit 1),
 * then the option sweep. On the tested side the backward from the forward's checkpoints gives the same bits. Plain:
 * BN then the neuron op, and their backwards. Bounds: spikes exact; h 1e-6 against plain, 1e-4 against another
 * backend (its statistics round apart, and 1/σ amplifies that where a channel has few elements); dx 1e-4 and 16-bit;
 * dγ, dβ 1e-4 (in 16 bits twice the output bound: sums of 16-bit dy that cancel); dv_out 1e-5; dw 1e-4. */
static void run_bn_lif(op_harness *h, const op_case *c, int v)
{
    sf_lif_params p;
    neuron_of(c, &p);
    sweep(&p, v >> 2);
    const int64_t T = c->T, N = c->B * c->C * c->hw, n = T * N, S = state_size(&p);
    const int32_t C = c->C;
    bnl_io io = {.p = &p,
                 .T = T,
                 .sh = {T * c->B, C, c->hw},
                 .keep = v & 1,
                 .planned = (v >> 1) & 1,
                 .state = c->state != 0,
                 .parts = c->parts,
                 .wc = plif_channels(c, &p)};
    snprintf(h->what, sizeof h->what,
             "bn_lif %s %s soft=%d detach=%d θ=%d T=%lld B=%lld C=%d hw=%lld keep_h=%d "
             "planned=%d state=%d parts=%d",
             sf_neuron_model_name(p.model), sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset,
             p.use_grad_threshold, (long long)T, (long long)c->B, C, (long long)c->hw, io.keep, io.planned, c->state,
             c->parts);
    io.x = op_randn(h, OP_ACTV, (size_t)n, 0.3f, 1.5f, 31 + (uint64_t)(T + v)),
    io.ds = op_randn(h, OP_ACTV, (size_t)n, 0, 1, 32);
    io.g = op_randn(h, OP_F32, (size_t)C, 1.0f, 0.2f, 33), io.b = op_randn(h, OP_F32, (size_t)C, 0.8f, 0.3f, 34);
    reference_stats(h, io.sh, &io.x, &io.mean, &io.var);
    io.s = op_out(h, OP_ACTV, (size_t)n), io.hh = op_out(h, OP_F32, (size_t)n), io.dx = op_out(h, OP_ACTV, (size_t)n);
    io.dg = op_out(h, OP_F32, (size_t)C), io.db = op_out(h, OP_F32, (size_t)C);
    io.vin = state_in(h, S, N, 25), io.dvin = op_randn(h, OP_F32, (size_t)(S * N), 0.0f, 0.5f, 26);
    io.dvout = op_out(h, OP_F32, (size_t)(S * N));
    io.w = plif_w(h, io.wc, false, 35), io.dw = op_out(h, OP_F32, (size_t)io.wc);
    OP_SIDES(s)
    {
        if (op_plain(h, s, SF_BACKEND_OP_bn_lif_forward) && !io.parts) bnl_composed(h, &io, s);
        else bnl_fused(h, &io, s);
    }
    const op_tol sums = {1e-5, 1e-4, 1e-4, 2 * OP_BF16_ACT, 2 * OP_FP16_ACT};
    op_cmp(h, "spikes", &io.s, OP_TOL_EXACT);
    if (io.keep) op_cmp(h, "h", &io.hh, (op_tol){1e-6, 1e-4, 1e-4, 1e-4, 1e-4});
    op_cmp(h, "dx", &io.dx, (op_tol){1e-5, 1e-4, 1e-4, OP_BF16_ACT, OP_FP16_ACT});
    if (!io.parts) { /* phase 2 leaves the sums phase 1 wrote */
        op_cmp(h, "dgamma", &io.dg, sums);
        op_cmp(h, "dbeta", &io.db, sums);
    } else {
        op_cmp(h, "phase 1 Σdy·x̂", &io.dg, sums);
        op_cmp(h, "phase 1 Σdy", &io.db, sums);
    }
    if (io.state) op_cmp(h, "dv_out", &io.dvout, (op_tol){1e-5, 1e-5, 1e-5, 1e-5, 1e-5});
    if (io.wc) op_cmp(h, "dw", &io.dw, (op_tol){1e-5, 1e-4, 1e-4, 1e-4, 1e-4});
    if (h->be[1]->neuron_ckpt && T > SF_LIF_CKPT_STEPS && !io.keep && !io.parts) bnl_from_checkpoints(h, &io);
    op_ten *all[] = {&io.x,  &io.ds, &io.g,  &io.b,   &io.mean, &io.var,   &io.s, &io.hh,
                     &io.dx, &io.dg, &io.db, &io.vin, &io.dvin, &io.dvout, &io.w, &io.dw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
}

OP_FAMILY(op_bn_lif, "bn_lif", run_bn_lif, SF_BACKEND_OP_bn_lif_forward, SF_BACKEND_OP_bn_lif_backward,
          SF_BACKEND_OP_bn_lif_scratch);

/* ---------------------------------------------------------------- the recurrent layer */

/* rlif_workspace, rlif_forward and rlif_backward over x [T, B, n], V [n, n] (c->grad: θ_grad mode); variant 1 is the
 * event-driven (sparse) recurrence, 0 the dense one. The backward three ways: from the saved h and the forward's
 * spike bits, from h alone, and recomputing. Plain (variant 1): the dense recurrence. Where both sides sum in the
 * same order (the same path on the CPU; CUDA's event-driven one up to 8192 neurons) spikes, h and the compact output
 * are exact; elsewhere a spike may flip where a potential is within rounding of the threshold, a few are allowed
 * (then the gradients are not compared), h is within 1e-5. Bounds: dx, dV c->tol (1e-4), 4× the 16-bit bound (each
 * step reads the 16-bit dx of the step after); the masks as op_cmp_mask. */
static void run_rlif(op_harness *h, const op_case *c, int v)
{
    const int64_t T = c->T, B = c->B, n = c->n, rows = T * B, total = rows * n;
    const int sparse = v;
    sf_lif_params p;
    tu_seed_neuron(&p, c->grad, 0.5f);
    snprintf(h->what, sizeof h->what, "rlif T=%lld B=%lld n=%lld θ_grad %d %s", (long long)T, (long long)B,
             (long long)n, c->grad, sparse ? "sparse" : "dense");
    op_ten x = op_randn(h, OP_ACTV, (size_t)total, 0.7f, 1.0f, 101);
    op_ten V = op_randn(h, OP_ACTV, (size_t)(n * n), 0.0f, 1.5f / sqrtf((float)n), 102);
    op_ten ds = op_randn(h, OP_ACTV, (size_t)total, 0.0f, 1.0f, 103);
    op_ten s = op_out(h, OP_ACTV, (size_t)total), hh = op_out(h, OP_F32, (size_t)total);
    op_ten cnt = op_in(h, OP_F32, 1, (float[]){0.0f});
    op_spk cs = op_spk_out(h, rows, n, true);
    op_ws ws[2];
    int side_sparse[2];
    OP_SIDES(q)
    {
        side_sparse[q] = op_plain(h, q, SF_BACKEND_OP_rlif_forward) ? 0 : sparse;
        ws[q] = op_ws_alloc(h, q, OPV(h, q, rlif_workspace, T, B, n));
        const sf_lif_out out = {
            .s = OP_P(s, q), .h = OP_P(hh, q), .spike_count = OP_P(cnt, q), .c = op_spk_at(&cs, q, true), .row = n};
        OP(h, q, rlif_forward, &p, T, B, n, OP_P(x, q), OP_P(V, q), side_sparse[q], &out, ws[q].p);
    }
    const bool same_order = side_sparse[0] == side_sparse[1] && (h->cpu_mode || (sparse && n <= 8192));
    const int64_t flips = op_count_diff(h, &s);
    CHECK(same_order ? flips == 0 : flips <= total / 1000, "%s: %lld of %lld spikes differ", h->what, (long long)flips,
          (long long)total);
    if (flips) {
        printf("%s: %lld spikes differ (sums in another order); gradients not compared\n", h->what, (long long)flips);
    } else {
        op_cmp(h, "h", &hh, same_order ? OP_TOL_EXACT : (op_tol){1e-5, 1e-5, 1e-5, 1e-5, 1e-5});
        op_cmp(h, "spike count", &cnt, OP_TOL_EXACT);
        op_cmp_spk(h, "compact spikes", &cs, true);
        const double e = row_tol(c, 1e-4);
        const op_tol grad_tol = {1e-5, e, e, 4 * OP_BF16_ACT, 4 * OP_FP16_ACT};
        static const char *const ways[] = {"saved h and bits", "saved h", "recompute"};
        for (int way = 0; way < 3; way++) {
            op_ten dx = op_out(h, OP_ACTV, (size_t)total), dv = op_out(h, OP_F32, (size_t)(n * n));
            op_ten gc = op_in(h, OP_F32, 1, (float[]){0.0f});
            op_spk m = op_spk_out(h, rows, n, false);
            OP_SIDES(q)
            {
                const int flags = side_sparse[q] ? SF_RLIF_SPARSE_DV | SF_RLIF_SPARSE_DY : 0;
                const sf_spikes mq = op_spk_at(&m, q, false);
                OP(h, q, rlif_backward, &p, T, B, n, OP_P(x, q), way < 2 ? OP_P(hh, q) : NULL,
                   way == 0 ? OP_U32(cs.bits, q) : NULL, OP_P(V, q), OP_P(ds, q), side_sparse[q], flags, OP_P(dx, q),
                   OP_P(dv, q), &mq, OP_P(gc, q), ws[q].p);
            }
            char w[64];
            snprintf(w, sizeof w, "dx (%s)", ways[way]);
            op_cmp(h, w, &dx, grad_tol);
            snprintf(w, sizeof w, "dV (%s)", ways[way]);
            op_cmp(h, w, &dv, grad_tol);
            op_cmp_mask(h, ways[way], &m, &dx, &gc);
            op_free(h, &dx), op_free(h, &dv), op_free(h, &gc), op_spk_free(h, &m);
        }
    }
    OP_SIDES(q) op_ws_free(h, q, &ws[q], "recurrent layer");
    op_free(h, &x), op_free(h, &V), op_free(h, &ds), op_free(h, &s), op_free(h, &hh), op_free(h, &cnt);
    op_spk_free(h, &cs);
}

OP_FAMILY(op_rlif, "rlif", run_rlif, SF_BACKEND_OP_rlif_workspace, SF_BACKEND_OP_rlif_forward,
          SF_BACKEND_OP_rlif_backward);
