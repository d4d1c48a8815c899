/* neuron_f64.c — the CPU neuron ops in double (SF_SCALAR_F64): every model, the state carried across calls, a PLIF's
 * w and dw, and the fused BN → neuron, as a plain loop over each neuron's T steps with lif_math_f64.h's equations.
 * It is the float64 reference (torch.autograd.gradcheck, comparisons with float64 PyTorch), not a fast path: the
 * float kernels (lif.c, bn_lif.c) keep their blocked, vectorised loops. Neurons run in parallel; every sum over
 * neurons (dw, the BN's) is taken afterwards in neuron order, so results do not depend on the thread count. */
#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "core/error.h"
#include "core/lif_math_f64.h"
#include "core/neuron_check.h"

#include <omp.h>
#include <stdlib.h>

/* One call: its parameters and coefficients, a PLIF's w and the state arrays as doubles. y_t of neuron n is
 * x_t·scale + shift of n's channel (scale NULL: x_t itself, the LIF op). */
typedef struct f64_call {
    const sf_lif_params *p;
    sf_lif_coeffs_f64 k;
    int64_t T, N;
    int32_t w_channels; /* a PLIF's w: channels of w_hw neurons (1 channel: one w) */
    int64_t w_hw;
    const double *w, *v_in, *dv_in;
    double *v_out, *dv_out, *dw;
    int32_t bn_c; /* the BN's channels of bn_hw neurons, and its folded scale and shift [bn_c] */
    int64_t bn_hw;
    const double *scale, *shift;
} f64_call;

static sf_status call_init(f64_call *c, const char *op, const sf_lif_params *p, int64_t T, int64_t N,
                           const sf_lif_state *st, int32_t bn_c, int64_t bn_hw)
{
    *c = (f64_call){.p = p, .T = T, .N = N, .w_channels = 1, .w_hw = N > 0 ? N : 1, .bn_c = bn_c, .bn_hw = bn_hw};
    SF_TRY(sf_lif_params_check(p));
    if (T < 1 || N < 0)
        return sf_fail(SF_ERR_INVALID, "%s: shape T=%lld N=%lld (need T >= 1, N >= 0)", op, (long long)T,
                       (long long)N);
    SF_TRY(sf_plif_state_check(op, p, N, st, bn_c, bn_hw));
    c->k = sf_lif_coeffs_of_f64(p);
    if (!st) return SF_OK;
    c->v_in = (const double *)st->v_in;
    c->v_out = (double *)st->v_out;
    c->dv_in = (const double *)st->dv_in;
    c->dv_out = (double *)st->dv_out;
    if (p->model != SF_NEURON_PLIF) return SF_OK;
    c->w = (const double *)st->w;
    c->dw = (double *)st->dw;
    if (p->per_channel) c->w_channels = st->w_channels, c->w_hw = st->w_hw;
    return SF_OK;
}

static int is_plif(const f64_call *c) { return c->p->model == SF_NEURON_PLIF; }
static int is_alif(const f64_call *c) { return c->p->model == SF_NEURON_ALIF; }
static int32_t w_channel(const f64_call *c, int64_t n) { return (int32_t)(n / c->w_hw % c->w_channels); }
static int32_t bn_channel(const f64_call *c, int64_t n) { return (int32_t)(n / c->bn_hw % c->bn_c); }

/* Neuron n's coefficients: a PLIF's a and c from the w of its channel. */
static sf_lif_coeffs_f64 coeffs_at(const f64_call *c, int64_t n)
{
    sf_lif_coeffs_f64 k = c->k;
    if (is_plif(c)) sf_plif_coeffs_f64(c->w[w_channel(c, n)], c->p->decay_input, &k.a, &k.c);
    return k;
}

static double input_at(const f64_call *c, const double *x, int64_t t, int64_t n)
{
    const double xt = x[t * c->N + n];
    if (!c->scale) return xt;
    const int32_t ch = bn_channel(c, n);
    return xt * c->scale[ch] + c->shift[ch];
}

/* The forward of neuron n from its state: spikes to s (stride N) where given, h_t and the ALIF's θ_t to h and th
 * (T each) where given, the state after the last step to v_out where the call keeps it (keep). */
static void neuron_forward(const f64_call *c, int64_t n, const double *x, double *s, double *h, double *th, int keep)
{
    const sf_lif_coeffs_f64 k = coeffs_at(c, n);
    const int soft = c->p->soft_reset, alif = is_alif(c);
    double v = c->v_in ? c->v_in[n] : k.v0, b = alif && c->v_in ? c->v_in[c->N + n] : 0.0;
    for (int64_t t = 0; t < c->T; t++) {
        double ht, tht = 0.0, sp;
        const double y = input_at(c, x, t, n);
        sp = alif ? sf_alif_step_f64(&k, soft, y, &v, &b, &ht, &tht) : sf_lif_step_f64(&k, soft, y, &v, &ht);
        if (s) s[t * c->N + n] = sp;
        if (h) h[t] = ht;
        if (th) th[t] = tht;
    }
    if (keep && c->v_out) {
        c->v_out[n] = v;
        if (alif) c->v_out[c->N + n] = b;
    }
}

/* The backward of neuron n: h and θ recomputed into h, th (T each), then the reverse-time pass writing
 * dy_t = c·dh_t to dy (stride N) and ∂L/∂state before the first step to dv_out; returns a PLIF's Σ_t dh_t·∂h_t/∂k. */
static double neuron_backward(const f64_call *c, int64_t n, const double *x, const double *ds, double *dy, double *h,
                              double *th)
{
    neuron_forward(c, n, x, NULL, h, th, 0);
    const sf_lif_coeffs_f64 k = coeffs_at(c, n);
    const int alif = is_alif(c), plif = is_plif(c);
    const double v_init = c->v_in ? c->v_in[n] : k.v0;
    double dv = c->dv_in ? c->dv_in[n] : 0.0, db = alif && c->dv_in ? c->dv_in[c->N + n] : 0.0, dk = 0.0;
    for (int64_t t = c->T - 1; t >= 0; t--) {
        const double dst = ds[t * c->N + n];
        const double dh = alif ? sf_alif_step_back_f64(c->p, &k, h[t], th[t], dst, &dv, &db)
                               : sf_lif_step_back_f64(c->p, &k, h[t], dst, &dv);
        if (plif) {
            const double v_prev = t > 0 ? sf_lif_v_after_f64(&k, c->p->soft_reset, h[t - 1]) : v_init;
            dk += dh * (c->p->decay_input ? input_at(c, x, t, n) - v_prev : -v_prev);
        }
        dy[t * c->N + n] = k.c * dh;
    }
    if (c->dv_out) {
        c->dv_out[n] = dv;
        if (alif) c->dv_out[c->N + n] = db;
    }
    return dk;
}

static sf_status alloc_f64(int64_t n, const char *op, double **out)
{
    *out = calloc((size_t)(n > 0 ? n : 1), sizeof **out);
    return *out ? SF_OK : sf_fail(SF_ERR_NOMEM, "%s: cannot allocate %lld doubles", op, (long long)n);
}

static void forward_all(const f64_call *c, const double *x, double *s)
{
#pragma omp parallel for schedule(static) if (c->T * c->N >= SF_CPU_PARALLEL_MIN)
    for (int64_t n = 0; n < c->N; n++) neuron_forward(c, n, x, s, NULL, NULL, 1);
}

/* dy [T, N] of every neuron, with each neuron's PLIF sum in dk [N] (dk NULL: not a PLIF). */
static sf_status backward_all(const f64_call *c, const char *op, const double *x, const double *ds, double *dy,
                              double *dk)
{
    double *scratch = NULL; /* per thread: h and θ rows of T */
    SF_TRY(alloc_f64(2 * c->T * omp_get_max_threads(), op, &scratch));
#pragma omp parallel if (c->T * c->N >= SF_CPU_PARALLEL_MIN)
    {
        double *h = scratch + 2 * c->T * omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t n = 0; n < c->N; n++) {
            const double sum = neuron_backward(c, n, x, ds, dy, h, h + c->T);
            if (dk) dk[n] = sum;
        }
    }
    free(scratch);
    return SF_OK;
}

/* A PLIF's dw: the neurons' sums of each channel in neuron order, times ∂k/∂w = k(1 - k). */
static sf_status plif_dw(const f64_call *c, const char *op, const double *dk)
{
    double *sums = NULL;
    SF_TRY(alloc_f64(c->w_channels, op, &sums));
    for (int64_t n = 0; n < c->N; n++) sums[w_channel(c, n)] += dk[n];
    for (int32_t ch = 0; ch < c->w_channels; ch++) {
        const double k = sf_plif_k_f64(c->w[ch]);
        c->dw[ch] = sums[ch] * k * (1.0 - k);
    }
    free(sums);
    return SF_OK;
}

/* The backward's dy and, for a PLIF that wants it, dw. */
static sf_status backward_dy(const f64_call *c, const char *op, const double *x, const double *ds, double *dy)
{
    double *dk = NULL;
    const int want_dw = is_plif(c) && c->dw;
    if (want_dw) SF_TRY(alloc_f64(c->N, op, &dk));
    sf_status status = backward_all(c, op, x, ds, dy, dk);
    if (status == SF_OK && want_dw) status = plif_dw(c, op, dk);
    free(dk);
    return status;
}

sf_status sf_cpu_lif_forward_f64(const sf_lif_params *p, int64_t T, int64_t N, const void *x, void *s,
                                 const sf_lif_state *st)
{
    f64_call c;
    SF_TRY(call_init(&c, "LIF forward (float64)", p, T, N, st, 0, 0));
    forward_all(&c, x, s);
    return SF_OK;
}

sf_status sf_cpu_lif_backward_f64(const sf_lif_params *p, int64_t T, int64_t N, const void *x, const void *ds, void *dx,
                                  const sf_lif_state *st)
{
    f64_call c;
    SF_TRY(call_init(&c, "LIF backward (float64)", p, T, N, st, 0, 0));
    return backward_dy(&c, "LIF backward (float64)", x, ds, dx);
}

/* The BN fold in double: invstd = 1/sqrt(var + eps), scale = gamma·invstd, shift = beta - mean·scale, into f [3C]. */
static void bn_fold_f64(int32_t C, const double *mean, const double *var, float eps, const double *gamma,
                        const double *beta, double *f)
{
    for (int32_t ch = 0; ch < C; ch++) {
        f[ch] = 1.0 / sqrt(var[ch] + eps);
        f[C + ch] = gamma[ch] * f[ch];
        f[2 * C + ch] = beta[ch] - mean[ch] * f[C + ch];
    }
}

static sf_status bn_call_init(f64_call *c, const char *op, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                              const sf_lif_state *st, const void *mean, const void *var, float eps, const void *gamma,
                              const void *beta, double **fold)
{
    *fold = NULL;
    if (T < 1 || sh.rows % T != 0 || sh.c < 1 || sh.hw < 0)
        return sf_fail(SF_ERR_INVALID, "%s: rows = %lld, C = %d, hw = %lld for T = %lld (need rows = T·B, C >= 1)", op,
                       (long long)sh.rows, (int)sh.c, (long long)sh.hw, (long long)T);
    SF_TRY(call_init(c, op, p, T, sh.rows / T * sh.c * sh.hw, st, sh.c, sh.hw > 0 ? sh.hw : 1));
    SF_TRY(alloc_f64(3 * (int64_t)sh.c, op, fold));
    bn_fold_f64(sh.c, mean, var, eps, gamma, beta, *fold);
    c->scale = *fold + sh.c;
    c->shift = *fold + 2 * sh.c;
    return SF_OK;
}

sf_status sf_cpu_bn_lif_forward_f64(const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x, const void *mean,
                                    const void *var, float eps, const void *gamma, const void *beta, void *s,
                                    const sf_lif_state *st)
{
    f64_call c;
    double *fold;
    sf_status status = bn_call_init(&c, "BN-LIF forward (float64)", p, T, sh, st, mean, var, eps, gamma, beta, &fold);
    if (status == SF_OK) forward_all(&c, x, s);
    free(fold);
    return status;
}

/* The backward through the batch statistics: dy = c·dh into dx, then per channel (sums in neuron order)
 * dbeta = Σ dy, dgamma = Σ dy·x̂, and dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)) in place. */
sf_status sf_cpu_bn_lif_backward_f64(const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x,
                                     const void *mean, const void *var, float eps, const void *gamma, const void *beta,
                                     const void *ds, void *dx, void *dgamma, void *dbeta, const sf_lif_state *st)
{
    const char *op = "BN-LIF backward (float64)";
    f64_call c;
    double *fold, *sums = NULL;
    sf_status status = bn_call_init(&c, op, p, T, sh, st, mean, var, eps, gamma, beta, &fold);
    if (status == SF_OK) status = backward_dy(&c, op, x, ds, dx);
    if (status == SF_OK) status = alloc_f64(2 * (int64_t)sh.c, op, &sums);
    if (status != SF_OK) goto done;
    const int32_t C = sh.c;
    const double *xs = x, *mu = mean, *invstd = fold;
    double *d = dx, *sdy = sums, *sdyx = sums + C;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < c.N; n++) {
            const int32_t ch = bn_channel(&c, n);
            sdy[ch] += d[t * c.N + n];
            sdyx[ch] += d[t * c.N + n] * (xs[t * c.N + n] - mu[ch]) * invstd[ch];
        }
    for (int32_t ch = 0; ch < C; ch++) {
        if (dbeta) ((double *)dbeta)[ch] = sdy[ch];
        if (dgamma) ((double *)dgamma)[ch] = sdyx[ch];
        const double count = (double)sh.rows * (double)sh.hw;
        sdy[ch] /= count;
        sdyx[ch] /= count;
    }
#pragma omp parallel for schedule(static) if (T * c.N >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < T * c.N; i++) {
        const int32_t ch = bn_channel(&c, i % c.N);
        const double xhat = (xs[i] - mu[ch]) * invstd[ch];
        d[i] = c.scale[ch] * (d[i] - sdy[ch] - xhat * sdyx[ch]);
    }
done:
    free(sums);
    free(fold);
    return status;
}
