/* rlif.c — the recurrent LIF layer on the CPU: y_t = x_t + V·s_{t-1}, then the LIF step (core/lif_math.h), step by
 * step; V·s_{t-1} is an SGEMM (dense) or the rows of Vᵀ of the neurons that spiked (sf_cpu_masked_product). The
 * backward runs BPTT in reverse with Vᵀ·dy_{t+1} per step (SGEMM, or over the nonzero dy) and dV = Σ_t dy_tᵀ·s_{t-1}
 * in one pass at the end. */
#include "cpu/cpu_layers.h"
#include "cpu/cpu_neuron.h"
#include "cpu/neuron_block.h"

#include "core/error.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Per-step work is B·n neurons; below this the other threads cost more to wake than they save (parallel.h). */
#define RLIF_PARALLEL_MIN 16384

/* The workspace: Vᵀ by tiles (and dV's tiles), the neuron state, the per-step product, s_{t-1} as floats, for the
 * backward's recompute h over all steps with the compact spikes, and the bits of the nonzero dy. */
typedef struct rlif_ws {
    float *vt, *state, *rec, *sprev, *h;
    sf_spikes c;
    uint32_t *dy_bits; /* [T·B, words(n)] */
} rlif_ws;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t layout(int64_t T, int64_t B, int64_t n, void *base, rlif_ws *w)
{
    const size_t f = sizeof(float), N = (size_t)(B * n), rows = (size_t)(T * B);
    const size_t sizes[] = {sf_cpu_op_spike_linear_workspace(NULL, 0, (int32_t)n, (int32_t)n), N * f, N * f, N * f,
                            rows * (size_t)n * f, rows * (size_t)sf_spike_words(n) * 4, rows * (size_t)n,
                            rows * (size_t)sf_spike_segs(n) * 4, rows * (size_t)sf_spike_words(n) * 4};
    char *p = base;
    void *ptr[9];
    size_t total = 0;
    for (int i = 0; i < 9; i++) {
        ptr[i] = p ? p + total : NULL;
        total += align64(sizes[i]);
    }
    if (w) *w = (rlif_ws){ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], {ptr[5], ptr[6], ptr[7]}, ptr[8]};
    return total;
}

size_t sf_cpu_op_rlif_workspace(sf_backend *be, int64_t T, int64_t B, int64_t n) { return layout(T, B, n, NULL, NULL); }

static sf_status check(const char *op, const sf_lif_params *p, int64_t T, int64_t B, int64_t n)
{
    SF_TRY(sf_lif_params_check(p));
    if (T < 1 || B < 1 || n < 1 || n > SF_CPU_BLAS_MAX || B > SF_CPU_BLAS_MAX || T * B > SF_CPU_BLAS_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: shape T=%lld B=%lld n=%lld", op, (long long)T, (long long)B, (long long)n);
    return SF_OK;
}

/* How many of a row's n neurons the block starting at `first` holds. */
static int block_width(int64_t n, int64_t first) { return (int)(n - first < SF_CPU_BLOCK ? n - first : SF_CPU_BLOCK); }

/* The block of row r starting at `first` (v: its values) into the compact c where nonzero: bits, and lists and
 * counts where c has them; the blocks of a row go in order. Returns how many are set. */
static int emit_block(const sf_spikes *c, int64_t n, int64_t r, int64_t first, const float *v)
{
    const int64_t g = first / SF_SPIKE_SEG;
    sf_block_emit e = {c->bits + r * sf_spike_words(n) + first / 32, c->idx ? c->idx + r * n + g * SF_SPIKE_SEG : NULL,
                       c->cnt ? c->cnt + r * sf_spike_segs(n) + g : NULL, 0, 0, 0, (int32_t)(first % SF_SPIKE_SEG)};
    return sf_block_emit_row(&e, 0, v, block_width(n, first));
}

static int64_t emit_row(const sf_spikes *c, int64_t n, int64_t r, const float *v)
{
    int64_t set = 0;
    for (int64_t first = 0; first < n; first += SF_CPU_BLOCK) set += emit_block(c, n, r, first, v + first);
    return set;
}

static int64_t count_nonzero(int64_t n, const float *v)
{
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; i++) nonzero += v[i] != 0.0f;
    return nonzero;
}

/* One step of one sample: y = x + rec, the LIF step for its n neurons, its outputs, the compact row r and s_{t-1}
 * for the dense recurrence (sprev, NULL: not wanted); returns the spike count. */
static int64_t step_row(const sf_lif_coeffs *k, int soft, int64_t n, int64_t r, const float *x, const float *rec,
                        float *v, float *sprev, const sf_lif_out *out)
{
    const sf_lif_coeffs kc = *k;
    int64_t spikes = 0;
    for (int64_t first = 0; first < n; first += SF_CPU_BLOCK) {
        const int nb = block_width(n, first);
        float s_row[SF_CPU_BLOCK], h_row[SF_CPU_BLOCK];
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float vv = v[first + i], hv;
            s_row[i] = sf_lif_step(&kc, soft, x[first + i] + rec[first + i], &vv, &hv);
            v[first + i] = vv;
            h_row[i] = hv;
        }
        spikes += out->c.bits ? emit_block(&out->c, n, r, first, s_row) : count_nonzero(nb, s_row);
        if (sprev) memcpy(sprev + first, s_row, sizeof(float) * (size_t)nb);
        if (out->s) memcpy(out->s + r * n + first, s_row, sizeof(float) * (size_t)nb);
        if (out->h) memcpy(out->h + r * n + first, h_row, sizeof(float) * (size_t)nb);
    }
    return spikes;
}

/* The samples [*r0, *r1) this thread runs through all steps of the event-driven recurrences: samples do not
 * interact, and a barrier per step costs as much as a step's work at small B (docs/notebook/perf.md). */
static void own_rows(int64_t B, int64_t *r0, int64_t *r1)
{
    const int64_t id = omp_get_thread_num(), threads = omp_get_num_threads();
    *r0 = B * id / threads;
    *r1 = B * (id + 1) / threads;
}

/* The dense recurrence: one SGEMM per step, the LIF over the batch's rows. */
static int64_t forward_dense(const sf_lif_coeffs *k, int soft, int64_t T, int64_t B, int64_t n, const float *x,
                             const float *v, const sf_lif_out *out, const rlif_ws *w)
{
    int64_t spikes = 0;
    for (int64_t t = 0; t < T; t++) {
        if (t > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)n, (int)n, 1.0f, w->sprev, (int)n, v,
                        (int)n, 0.0f, w->rec, (int)n);
#pragma omp parallel for schedule(static) reduction(+ : spikes) if (B > 1 && B * n >= RLIF_PARALLEL_MIN)
        for (int64_t b = 0; b < B; b++)
            spikes += step_row(k, soft, n, t * B + b, x + (t * B + b) * n, w->rec + b * n, w->state + b * n,
                               w->sprev + b * n, out);
    }
    return spikes;
}

/* The event-driven recurrence: each thread sums its samples' spikes of step t-1 against Vᵀ (by tiles in w->vt)
 * and steps their neurons. */
static int64_t forward_events(const sf_lif_coeffs *k, int soft, int64_t T, int64_t B, int64_t n, const float *x,
                              const sf_lif_out *out, const rlif_ws *w)
{
    int64_t spikes = 0;
#pragma omp parallel reduction(+ : spikes) if (B > 1 && B * n >= RLIF_PARALLEL_MIN)
    {
        int64_t r0, r1;
        own_rows(B, &r0, &r1);
        for (int64_t t = 0; t < T && r0 < r1; t++) {
            if (t > 0)
                sf_cpu_masked_product_here(r1 - r0, (int32_t)n, (int32_t)n,
                                           out->c.bits + ((t - 1) * B + r0) * sf_spike_words(n), NULL, w->vt,
                                           w->rec + r0 * n);
            for (int64_t b = r0; b < r1; b++)
                spikes += step_row(k, soft, n, t * B + b, x + (t * B + b) * n, w->rec + b * n, w->state + b * n,
                                   NULL, out);
        }
    }
    return spikes;
}

static sf_status forward(const sf_lif_params *p, int64_t T, int64_t B, int64_t n, const float *x, const float *v,
                         int32_t sparse, const sf_lif_out *out, const rlif_ws *w)
{
    if (sparse && !out->c.bits)
        return sf_fail(SF_ERR_INVALID, "recurrent LIF forward: the event-driven recurrence needs the spike bits");
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const int64_t N = B * n;
    if (sparse) sf_cpu_tiled_transpose((int32_t)n, (int32_t)n, v, w->vt);
    for (int64_t i = 0; i < N; i++) w->state[i] = k.v0;
    memset(w->rec, 0, sizeof(float) * (size_t)N);
    const int64_t spikes = sparse ? forward_events(&k, p->soft_reset, T, B, n, x, out, w)
                                  : forward_dense(&k, p->soft_reset, T, B, n, x, v, out, w);
    if (out->spike_count) *out->spike_count += (float)spikes;
    return SF_OK;
}

sf_status sf_cpu_op_rlif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                 const float *x, const float *v, int32_t sparse, const sf_lif_out *out, void *ws)
{
    SF_TRY(check("recurrent LIF forward", p, T, B, n));
    rlif_ws w;
    layout(T, B, n, ws, &w);
    return forward(p, T, B, n, x, v, sparse, out, &w);
}

/* The spikes of the forward as bits, from its membrane potentials (s = h >= θ). */
static void bits_from_h(const sf_lif_params *p, int64_t rows, int64_t n, const float *h, uint32_t *bits)
{
    const int64_t words = sf_spike_words(n);
#pragma omp parallel for schedule(static) if (rows * n >= RLIF_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < words; q++) {
            uint32_t word = 0;
            for (int64_t i = 32 * q; i < n && i < 32 * q + 32; i++) word |= (uint32_t)(h[r * n + i] >= p->v_threshold) << (i & 31);
            bits[r * words + q] = word;
        }
}

/* One reverse step of one sample: dy = c·dh from h, ds plus the recurrent gradient g (which it overwrites) and dv
 * (∂L/∂v_t in, ∂L/∂v_{t-1} out), by the LIF's vector loop for p's flags. */
static void back_row(sf_block_backward_fn back, const sf_lif_params *p, const sf_lif_coeffs *k, int64_t n,
                     const float *h, const float *ds, float *g, float *dv, float *dy)
{
    for (int64_t i = 0; i < n; i++) g[i] += ds[i];
    for (int64_t first = 0; first < n; first += SF_CPU_BLOCK) {
        const sf_block_back io = {.h = h + first, .ds = g + first, .dy = dy + first, .dv_in = dv + first,
                                  .dv_out = dv + first};
        back(p, k, 1, n, block_width(n, first), &io);
    }
}

/* The reverse sweep with the dense recurrence: Vᵀ·dy_{t+1} by one SGEMM per step; the nonzero dy into mask (NULL:
 * only counted). Returns their number. */
static int64_t backward_dense(sf_block_backward_fn back, const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T,
                              int64_t B, int64_t n, const float *h, const float *v, const float *ds, float *dx,
                              const sf_spikes *mask, const rlif_ws *w)
{
    const int64_t N = B * n;
    int64_t nonzero = 0;
    for (int64_t t = T - 1; t >= 0; t--) {
        if (t < T - 1)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)n, (int)n, 1.0f, dx + (t + 1) * N,
                        (int)n, v, (int)n, 0.0f, w->rec, (int)n);
#pragma omp parallel for schedule(static) reduction(+ : nonzero) if (B > 1 && N >= RLIF_PARALLEL_MIN)
        for (int64_t b = 0; b < B; b++) {
            float *g = w->rec + b * n;
            if (t == T - 1) memset(g, 0, sizeof(float) * (size_t)n);
            const int64_t o = (t * B + b) * n;
            back_row(back, p, k, n, h + o, ds + o, g, w->state + b * n, dx + o);
            nonzero += mask ? emit_row(mask, n, t * B + b, dx + o) : count_nonzero(n, dx + o);
        }
    }
    return nonzero;
}

/* The event-driven reverse sweep: each thread sums its samples' nonzero dy_{t+1} (their bits in dy_nonzero, which it
 * fills) against V (by tiles in w->vt), j ascending, and steps their neurons back. Returns the nonzero count. */
static int64_t backward_events(sf_block_backward_fn back, const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T,
                               int64_t B, int64_t n, const float *h, const float *ds, float *dx,
                               const sf_spikes *dy_nonzero, const rlif_ws *w)
{
    const int64_t N = B * n;
    int64_t nonzero = 0;
#pragma omp parallel reduction(+ : nonzero) if (B > 1 && N >= RLIF_PARALLEL_MIN)
    {
        int64_t r0, r1;
        own_rows(B, &r0, &r1);
        for (int64_t t = T - 1; t >= 0 && r0 < r1; t--) {
            if (t < T - 1)
                sf_cpu_masked_product_here(r1 - r0, (int32_t)n, (int32_t)n,
                                           dy_nonzero->bits + ((t + 1) * B + r0) * sf_spike_words(n),
                                           dx + (t + 1) * N + r0 * n, w->vt, w->rec + r0 * n);
            for (int64_t b = r0; b < r1; b++) {
                float *g = w->rec + b * n;
                if (t == T - 1) memset(g, 0, sizeof(float) * (size_t)n);
                const int64_t o = (t * B + b) * n;
                back_row(back, p, k, n, h + o, ds + o, g, w->state + b * n, dx + o);
                nonzero += emit_row(dy_nonzero, n, t * B + b, dx + o);
            }
        }
    }
    return nonzero;
}

sf_status sf_cpu_op_rlif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                  const float *x, const float *h, const uint32_t *s_bits, const float *v,
                                  const float *ds, int32_t fwd_sparse, int32_t bwd_sparse, float *dx, float *dv,
                                  const sf_spikes *mask, float *grad_count, void *ws)
{
    SF_TRY(check("recurrent LIF backward", p, T, B, n));
    rlif_ws w;
    layout(T, B, n, ws, &w);
    const int64_t N = B * n, rows = T * B;
    const uint32_t *bits = w.c.bits; /* the forward's spikes, for dV */
    if (!h) { /* recompute: the forward again, the same way, keeping h and the spikes */
        sf_lif_out o = {.h = w.h, .c = w.c, .row = n};
        SF_TRY(forward(p, T, B, n, x, v, fwd_sparse, &o, &w));
        h = w.h;
    } else if (s_bits) {
        bits = s_bits;
    } else {
        bits_from_h(p, rows, n, h, w.c.bits);
    }
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const sf_block_backward_fn back = sf_block_backward_for(p);
    memset(w.state, 0, sizeof(float) * (size_t)N);
    int64_t nonzero;
    if (bwd_sparse & SF_RLIF_SPARSE_DY) {
        sf_cpu_tile_columns(n, (int32_t)n, v, w.vt); /* V by column tiles: the recompute is done with Vᵀ */
        const sf_spikes dy_nonzero = mask ? *mask : (sf_spikes){w.dy_bits, NULL, NULL}; /* mask: the layer's own */
        nonzero = backward_events(back, p, &k, T, B, n, h, ds, dx, &dy_nonzero, &w);
    } else {
        nonzero = backward_dense(back, p, &k, T, B, n, h, v, ds, dx, mask, &w);
    }
    if (grad_count) *grad_count += (float)nonzero;
    if (T == 1) {
        memset(dv, 0, sizeof(float) * (size_t)(n * n));
    } else if (bwd_sparse & SF_RLIF_SPARSE_DV) { /* dV = Σ_{t >= 1} dy_tᵀ·s_{t-1}: the spike rows shifted by one step */
        SF_TRY(sf_cpu_spike_weight_grad((T - 1) * B, (int32_t)n, (int32_t)n, bits, dx + N, NULL, dv));
    } else {
        SF_TRY(sf_cpu_op_spikes_expand(be, (T - 1) * B, n, bits, w.h));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)((T - 1) * B), 1.0f, dx + N, (int)n,
                    w.h, (int)n, 0.0f, dv, (int)n);
    }
    return SF_OK;
}
