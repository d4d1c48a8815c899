/* op_harness.c — the runner, the tensors on both sides, the comparisons and the coverage record of the op harness
 * (op_harness.h). The harness's own allocations and copies call the backends directly: only the families' calls
 * (OP, OPV, OP0) count as coverage. */
#include "op_harness.h"

#include "core/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Over every harness of a runner: the ops some tested backend implements, and those a case called on it. */
static bool offered[SF_BACKEND_OP_COUNT], called[SF_BACKEND_OP_COUNT];

void op_harness_init(op_harness *h, sf_backend *ref, sf_backend *test, sf_precision prec, bool cpu_mode)
{
    memset(h, 0, sizeof *h);
    h->be[0] = ref;
    h->be[1] = test;
    h->cpu_mode = cpu_mode;
    h->prec = prec;
    h->act = test->act;
    for (int op = 0; op < SF_BACKEND_OP_COUNT; op++) {
        const bool has = sf_backend_supports(test, (sf_backend_op)op);
        CHECK(has || sf_backend_op_optional((sf_backend_op)op), "the %s backend lacks op %s, which every backend has",
              test->name, sf_backend_op_name((sf_backend_op)op));
        offered[op] |= has;
    }
}

bool op_plain(const op_harness *h, int s, sf_backend_op op)
{
    return s == 0 && (h->cpu_mode || !sf_backend_supports(h->be[0], op));
}

void op_mark(op_harness *h, int s, sf_backend_op op)
{
    if (s == 1) called[op] = true;
}

void op_backend_free(sf_backend *be)
{
    if (be) called[SF_BACKEND_OP_destroy] = true;
    sf_backend_free(be);
}

void op_run_cases(op_harness *h, unsigned need, unsigned skip)
{
    if (h->cpu_mode) skip |= OP_GPU_SHAPE;
    for (size_t i = 0; i < op_case_count; i++) {
        const op_case *c = &op_cases[i];
        if (!(c->prec & (1u << h->prec)) || (c->flags & need) != need || (c->flags & skip)) continue;
        for (int v = 0; v < (c->variants > 0 ? c->variants : 1); v++) {
            snprintf(h->what, sizeof h->what, "%s (row %zu, variant %d)", c->f->name, i, v);
            c->f->run(h, c, v);
        }
    }
}

void op_coverage(const char *runner)
{
    bool declared[SF_BACKEND_OP_COUNT] = {false};
    for (size_t i = 0; i < op_case_count; i++)
        for (int k = 0; k < op_cases[i].f->n_ops; k++) declared[op_cases[i].f->ops[k]] = true;
    int covered = 0, offers = 0;
    for (int op = 0; op < SF_BACKEND_OP_COUNT; op++) {
        const char *name = sf_backend_op_name((sf_backend_op)op);
        CHECK(declared[op], "op %s of core/backend_ops.h has no case in tests/ops/op_cases.c", name);
        CHECK(!offered[op] || called[op], "op %s: the tested backend has it, but no case called it", name);
        offers += offered[op];
        covered += offered[op] && called[op];
    }
    printf("%s: %d of the %d ops of the list run on the tested backend, %d of them called by cases\n", runner, offers,
           (int)SF_BACKEND_OP_COUNT, covered);
}

/* ---------------------------------------------------------------- storage */

static size_t elem_size(const op_harness *h, op_kind kind, int s)
{
    return kind == OP_RAW ? 1 : kind == OP_F32 || s == 0 ? 4 : sf_scalar_size(h->act);
}

/* The storage type of an OP_ACTV tensor on side s. */
static sf_scalar side_type(const op_harness *h, int s) { return s == 0 ? SF_SCALAR_F32 : h->act; }

static void *side_alloc(op_harness *h, int s, size_t bytes)
{
    void *p = NULL;
    CHECK_OK(h->be[s]->alloc(h->be[s], bytes ? bytes : 4, &p));
    return p;
}

float op_round(const op_harness *h, float x)
{
    if (h->act == SF_SCALAR_F32 || !isfinite(x) || x == 0.0f) return x;
    /* p significant bits, a smallest step of 2^qmin (subnormals), infinity from half an ulp above the largest finite
     * value */
    const bool bf = h->act == SF_SCALAR_BF16;
    const int p = bf ? 8 : 11, qmin = bf ? -133 : -24;
    const double inf_at = bf ? ldexp(2.0 - ldexp(1.0, -8), 127) : 65520.0;
    const double a = fabs((double)x);
    if (a >= inf_at) return copysignf(INFINITY, x);
    int e;
    frexp(a, &e);
    const int q = e - p < qmin ? qmin : e - p;
    return copysignf((float)ldexp(nearbyint(ldexp(a, -q)), q), x);
}

/* Host floats (or bytes) into side s: converted on the device where its type is 16-bit. */
void op_put_side(op_harness *h, const op_ten *t, int s, const void *host)
{
    sf_backend *be = h->be[s];
    if (!t->n) return;
    if (t->kind != OP_ACTV || side_type(h, s) == SF_SCALAR_F32) {
        CHECK_OK(be->copy_from_host(be, t->p[s], host, t->n * elem_size(h, t->kind, s)));
        return;
    }
    float *stage = side_alloc(h, s, 4 * t->n);
    CHECK_OK(be->copy_from_host(be, stage, host, 4 * t->n));
    CHECK_OK(be->convert(be, (int64_t)t->n, SF_SCALAR_F32, stage, side_type(h, s), t->p[s]));
    be->release(be, stage);
}

void *op_get(op_harness *h, const op_ten *t, int s)
{
    sf_backend *be = h->be[s];
    const size_t host_bytes = t->n * (t->kind == OP_RAW ? 1 : 4);
    void *out = malloc(host_bytes + 4);
    if (!t->n) return out;
    if (t->kind != OP_ACTV || side_type(h, s) == SF_SCALAR_F32) {
        CHECK_OK(be->copy_to_host(be, out, t->p[s], host_bytes));
        return out;
    }
    float *stage = side_alloc(h, s, 4 * t->n);
    CHECK_OK(be->convert(be, (int64_t)t->n, side_type(h, s), t->p[s], SF_SCALAR_F32, stage));
    CHECK_OK(be->copy_to_host(be, out, stage, host_bytes));
    be->release(be, stage);
    return out;
}

op_ten op_out(op_harness *h, op_kind kind, size_t n)
{
    op_ten t = {kind, n, {NULL, NULL}};
    OP_SIDES(s)
    {
        const size_t bytes = n * elem_size(h, kind, s);
        t.p[s] = side_alloc(h, s, bytes);
        void *poison = malloc(bytes + 1);
        memset(poison, 0xff, bytes);
        if (bytes) CHECK_OK(h->be[s]->copy_from_host(h->be[s], t.p[s], poison, bytes));
        free(poison);
    }
    return t;
}

void op_put(op_harness *h, op_ten *t, const void *host)
{
    if (t->kind != OP_ACTV) {
        OP_SIDES(s) op_put_side(h, t, s, host);
        return;
    }
    float *r = malloc(4 * t->n + 4);
    for (size_t i = 0; i < t->n; i++) r[i] = op_round(h, ((const float *)host)[i]);
    OP_SIDES(s) op_put_side(h, t, s, r);
    free(r);
}

op_ten op_in(op_harness *h, op_kind kind, size_t n, const void *host)
{
    op_ten t = op_out(h, kind, n);
    op_put(h, &t, host);
    return t;
}

op_ten op_randn(op_harness *h, op_kind kind, size_t n, float mean, float std, uint64_t seed)
{
    float *x = op_host_randn(n, mean, std, seed);
    op_ten t = op_in(h, kind, n, x);
    free(x);
    return t;
}

void op_free(op_harness *h, op_ten *t)
{
    OP_SIDES(s) h->be[s]->release(h->be[s], t->p[s]);
    t->p[0] = t->p[1] = NULL;
}

op_spk op_spk_out(op_harness *h, int64_t rows, int64_t n, bool lists)
{
    op_spk c = {op_out(h, OP_RAW, 4 * (size_t)(rows * sf_spike_words(n))),
                op_out(h, OP_RAW, lists ? (size_t)(rows * n) : 0),
                op_out(h, OP_RAW, 4 * (size_t)(rows * sf_spike_segs(n))), rows, n};
    return c;
}

void op_spk_free(op_harness *h, op_spk *c) { op_free(h, &c->bits), op_free(h, &c->idx), op_free(h, &c->cnt); }

sf_spikes op_spk_at(const op_spk *c, int s, bool lists)
{
    return (sf_spikes){OP_U32(c->bits, s), lists ? OP_U8(c->idx, s) : NULL, OP_I32(c->cnt, s)};
}

enum { WS_GUARD = 4096 };

op_ws op_ws_alloc(op_harness *h, int s, size_t bytes)
{
    op_ws ws = {side_alloc(h, s, bytes + WS_GUARD), bytes};
    unsigned char guard[WS_GUARD];
    memset(guard, 0xA5, sizeof guard);
    CHECK_OK(h->be[s]->copy_from_host(h->be[s], (char *)ws.p + bytes, guard, sizeof guard));
    return ws;
}

void op_ws_free(op_harness *h, int s, op_ws *ws, const char *pass)
{
    unsigned char guard[WS_GUARD];
    CHECK_OK(h->be[s]->copy_to_host(h->be[s], guard, (char *)ws->p + ws->bytes, sizeof guard));
    int bad = 0;
    for (int i = 0; i < WS_GUARD; i++) bad += guard[i] != 0xA5;
    CHECK(bad == 0, "%s: side %d's %s wrote %d bytes past its %zu bytes of workspace", h->what, s, pass, bad,
          ws->bytes);
    h->be[s]->release(h->be[s], ws->p);
    ws->p = NULL;
}

/* ---------------------------------------------------------------- comparisons */

static double bound_of(const op_harness *h, op_tol tol)
{
    if (h->cpu_mode) return tol.cpu;
    switch (h->prec) {
    case SF_PRECISION_TF32: return tol.tf32;
    case SF_PRECISION_BF16: return tol.bf16;
    case SF_PRECISION_FP16: return tol.fp16;
    default: return tol.fp32;
    }
}

/* b (side 1) against a (side 0) over n floats. */
static double compare(op_harness *h, const char *name, const float *a, const float *b, size_t n, op_tol tol)
{
    const double bound = bound_of(h, tol);
    size_t nan = 0, bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const bool na = isnan(a[i]) || isnan(b[i]);
        if (na && !nan++) first = i;
        bad += !na && bound == 0.0 && a[i] != b[i];
    }
    if (nan) {
        CHECK(false, "%s %s: %zu of %zu elements NaN or unwritten (first at %zu: %g on side 0, %g on side 1)", h->what,
              name, nan, n, first, a[first], b[first]);
        return INFINITY;
    }
    if (bound == 0.0) {
        CHECK(bad == 0, "%s %s: %zu of %zu elements differ", h->what, name, bad, n);
        return bad ? INFINITY : 0.0;
    }
    const double e = tu_rel_err_f32(b, a, (int64_t)n);
    CHECK(e <= bound, "%s %s: relative error %.3e > %.0e", h->what, name, e, bound);
    if (e > h->worst) h->worst = e;
    return e;
}

double op_cmp(op_harness *h, const char *name, const op_ten *t, op_tol tol)
{
    if (t->kind == OP_RAW) {
        op_cmp_raw(h, name, t);
        return 0.0;
    }
    float *a = op_get(h, t, 0), *b = op_get(h, t, 1);
    const double e = compare(h, name, a, b, t->n, tol);
    free(a), free(b);
    return e;
}

double op_cmp_host(op_harness *h, const char *name, const float *got, const op_ten *ref, op_tol tol)
{
    float *a = op_get(h, ref, 0);
    const double e = compare(h, name, a, got, ref->n, tol);
    free(a);
    return e;
}

void op_cmp_raw(op_harness *h, const char *name, const op_ten *t)
{
    uint8_t *a = op_get(h, t, 0), *b = op_get(h, t, 1);
    size_t bad = 0;
    for (size_t i = 0; i < t->n; i++) bad += a[i] != b[i];
    CHECK(bad == 0, "%s %s: %zu of %zu bytes differ", h->what, name, bad, t->n);
    free(a), free(b);
}

void op_cmp_rounded(op_harness *h, const char *name, const op_ten *t)
{
    float *a = op_get(h, t, 0), *b = op_get(h, t, 1);
    size_t bad = 0;
    for (size_t i = 0; i < t->n; i++) bad += !(b[i] == op_round(h, a[i]));
    CHECK(bad == 0, "%s %s: %zu of %zu elements are not side 0's value rounded once", h->what, name, bad, t->n);
    free(a), free(b);
}

void op_cmp_spk(op_harness *h, const char *name, const op_spk *c, bool lists)
{
    char w[256];
    snprintf(w, sizeof w, "%s bits", name);
    op_cmp_raw(h, w, &c->bits);
    snprintf(w, sizeof w, "%s counts", name);
    op_cmp_raw(h, w, &c->cnt);
    if (!lists) return;
    const int64_t segs = sf_spike_segs(c->n);
    uint8_t *a = op_get(h, &c->idx, 0), *b = op_get(h, &c->idx, 1);
    int32_t *cnt = op_get(h, &c->cnt, 0);
    int64_t bad = 0;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t g = 0; g < segs; g++)
            for (int32_t m = 0; m < cnt[r * segs + g]; m++) {
                const int64_t at = r * c->n + g * SF_SPIKE_SEG + m;
                bad += a[at] != b[at];
            }
    CHECK(bad == 0, "%s %s lists: %lld entries differ", h->what, name, (long long)bad);
    free(a), free(b), free(cnt);
}

void op_cmp_mask(op_harness *h, const char *name, const op_spk *mask, const op_ten *dx, const op_ten *count)
{
    const int64_t words = sf_spike_words(mask->n);
    const bool tiny_may_differ = h->act != SF_SCALAR_F32 && !h->cpu_mode;
    uint32_t *bits[2];
    float *d[2], *k[2];
    OP_SIDES(s) bits[s] = op_get(h, &mask->bits, s), d[s] = op_get(h, dx, s), k[s] = op_get(h, count, s);
    int64_t own[2] = {0, 0}, ones[2] = {0, 0}, other = 0;
    for (int64_t r = 0; r < mask->rows; r++)
        for (int64_t i = 0; i < mask->n; i++) {
            int on[2];
            OP_SIDES(s)
            {
                on[s] = (bits[s][r * words + i / 32] >> (i % 32)) & 1;
                ones[s] += on[s];
                own[s] += on[s] != (d[s][r * mask->n + i] != 0.0f);
            }
            other += on[0] != on[1] && (!tiny_may_differ || fabsf(d[0][r * mask->n + i]) >= 0x1p-22f);
        }
    int64_t segs_wrong = 0;
    const int64_t segs = sf_spike_segs(mask->n);
    OP_SIDES(s)
    {
        int32_t *cnt = op_get(h, &mask->cnt, s);
        for (int64_t r = 0; r < mask->rows; r++)
            for (int64_t g = 0; g < segs; g++) {
                int32_t ones_here = 0;
                for (int64_t i = g * SF_SPIKE_SEG; i < mask->n && i < (g + 1) * SF_SPIKE_SEG; i++)
                    ones_here += (bits[s][r * words + i / 32] >> (i % 32)) & 1;
                segs_wrong += cnt[r * segs + g] != ones_here;
            }
        free(cnt);
    }
    CHECK(segs_wrong == 0, "%s %s mask: %lld segment counts disagree with their bits", h->what, name,
          (long long)segs_wrong);
    /* another backend decides elements at the edge of θ_grad or of zero from fp32 sums in another order: a few flip */
    const int64_t flips_allowed = h->cpu_mode ? 0 : (mask->rows * mask->n) / 10000;
    CHECK(own[0] == 0 && own[1] == 0 && other <= flips_allowed && k[0][0] == (float)ones[0] &&
              k[1][0] == (float)ones[1],
          "%s %s mask: %lld and %lld bits disagree with their side's dx, %lld between the sides; counts %g and %g of "
          "%lld and %lld ones",
          h->what, name, (long long)own[0], (long long)own[1], (long long)other, k[0][0], k[1][0], (long long)ones[0],
          (long long)ones[1]);
    OP_SIDES(s) free(bits[s]), free(d[s]), free(k[s]);
}

void op_same(op_harness *h, int s, const char *name, const op_ten *a, const op_ten *b)
{
    const size_t bytes = a->n * elem_size(h, a->kind, s);
    uint8_t *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    if (bytes) {
        CHECK_OK(h->be[s]->copy_to_host(h->be[s], x, a->p[s], bytes));
        CHECK_OK(h->be[s]->copy_to_host(h->be[s], y, b->p[s], bytes));
    }
    CHECK(a->n == b->n && memcmp(x, y, bytes) == 0, "%s %s: side %d's two results differ", h->what, name, s);
    free(x), free(y);
}

int64_t op_count_diff(op_harness *h, const op_ten *t)
{
    float *a = op_get(h, t, 0), *b = op_get(h, t, 1);
    int64_t k = 0;
    for (size_t i = 0; i < t->n; i++) k += !(a[i] == b[i]);
    free(a), free(b);
    return k;
}

void op_density(const op_case *c, int v, double *density, bool *one_per_row)
{
    static const double sweep[OP_DENSITIES] = {0.0, 0.0, 0.05, 0.5, 1.0};
    *density = c->variants > 0 ? sweep[v % OP_DENSITIES] : c->density;
    *one_per_row = c->variants > 0 ? v % OP_DENSITIES == 1 : c->one_per_row != 0;
}

float *op_host_randn(size_t n, float mean, float std, uint64_t seed)
{
    float *x = malloc(4 * n + 4);
    tu_randn(x, (int64_t)n, mean, std, seed);
    return x;
}

float *op_host_spikes(int64_t rows, int64_t n, double density, bool one_per_row, uint64_t seed)
{
    float *x = malloc(4 * (size_t)(rows * n) + 4);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            x[r * n + i] =
                one_per_row ? i == (r * 7 + 3) % n : sf_uniform(seed, (uint64_t)n, (uint64_t)(r * n + i)) < density;
    return x;
}

int64_t op_host_pack(int64_t rows, int64_t n, const float *x, uint32_t *bits, uint8_t *idx, int32_t *cnt)
{
    const int64_t words = sf_spike_words(n), segs = sf_spike_segs(n);
    int64_t ones = 0;
    memset(bits, 0, 4 * (size_t)(rows * words));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < segs; g++) {
            int32_t k = 0;
            for (int64_t i = g * SF_SPIKE_SEG; i < n && i < (g + 1) * SF_SPIKE_SEG; i++) {
                if (x[r * n + i] == 0.0f) continue;
                bits[r * words + i / 32] |= 1u << (i % 32);
                if (idx) idx[r * n + g * SF_SPIKE_SEG + k] = (uint8_t)(i - g * SF_SPIKE_SEG);
                k++;
            }
            if (cnt) cnt[r * segs + g] = k;
            ones += k;
        }
    return ones;
}

void op_pack_side0(op_harness *h, const op_ten *x, const op_spk *c, bool lists)
{
    float *v = op_get(h, x, 0);
    uint32_t *bits = malloc(c->bits.n + 4);
    uint8_t *idx = op_get(h, &c->idx, 0); /* what is not a list entry keeps its bytes */
    int32_t *cnt = malloc(c->cnt.n + 4);
    op_host_pack(c->rows, c->n, v, bits, lists ? idx : NULL, cnt);
    op_put_side(h, &c->bits, 0, bits);
    if (lists) op_put_side(h, &c->idx, 0, idx);
    op_put_side(h, &c->cnt, 0, cnt);
    free(v), free(bits), free(idx), free(cnt);
}
