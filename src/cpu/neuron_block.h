/* neuron_block.h — the per-block LIF loops shared by the CPU LIF and fused BN→LIF kernels (internal to src/cpu).
 *
 * A block is SF_CPU_BLOCK contiguous neurons of one time step; the whole time loop runs inside it with
 * the neuron loop innermost, so gcc vectorises over neurons while the recurrence stays sequential in time. A neuron's
 * arithmetic does not depend on the block it falls in, so the block width is free to follow the memory system. */
#ifndef SF_CPU_NEURON_BLOCK_H
#define SF_CPU_NEURON_BLOCK_H

#include "core/backend.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* expf for the sigmoid surrogate, branch-free so the backward vectorises (glibc's expf is a call that stops gcc's
 * if-conversion): e^x = 2^n·e^r with n = round(x/ln 2), r = x - n·ln 2 in two parts, and a degree-6 minimax
 * polynomial for e^r (Cephes' coefficients, about 1 ulp). Only IEEE basic operations, so the vector and the
 * scalar remainder loops give the same bits. Clamped to the normal range: the surrogate is then 0 or tiny. */
static inline float sf_cpu_expf(float x)
{
    const float hi = 88.3762626647949f, lo = -87.3365447505531f, round = 12582912.0f; /* 1.5·2^23 */
    float xc = x > hi ? hi : (x < lo ? lo : x);
    float n = (xc * 1.44269504088896341f + round) - round;
    float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* NaN reaches the result through p; n is made finite only so the conversion to int is defined. */
    int32_t bits = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
#define SF_EXPF sf_cpu_expf
#include "core/lif_math.h"

/* The block loops are compiled for AVX-512, AVX2 and baseline x86-64 (SF_CPU_CLONES, cpu/clones.h). */
#include "cpu/clones.h"

/* 64 neurons: the per-row working set of a block (x, h, s rows, state, counts: 256 bytes each) stays in L1 and the
 * backward's [T × 64] scratch is 64 KiB at T = 256. Wider blocks (128 to 1024) measured slower here, the forward
 * at T >= 16 down to half the copy bandwidth (docs/notebook/perf.md). */
#define SF_CPU_BLOCK 64

#if defined(__GNUC__)
#define SF_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define SF_ALWAYS_INLINE static inline
#endif

/* Copies one row of n floats to dst, with streaming stores when dst is a whole number of aligned cache lines: the
 * outputs are written once and read much later, so skipping the read-for-ownership of their lines saves a third
 * of a write's memory traffic. Callers end their parallel region with sf_stream_fence(). */
#ifndef SF_STREAM_OK
#define SF_STREAM_OK 1
#endif
static inline void sf_stream_row(float *dst, const float *src, int n)
{
#if defined(__SSE2__)
    if (SF_STREAM_OK && ((uintptr_t)dst & 63) == 0 && (n & 15) == 0) {
        for (int i = 0; i < n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        return;
    }
#endif
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

static inline void sf_stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/* Where a block of neurons writes the compact form (core/spikes.h) of a per-step row of values: the block lies in
 * one row of a sample and one segment, starting `off` (a multiple of 64) neurons into the segment; the pointers
 * are its first word, its segment's list and count at step 0, and each step adds its stride (rows of one step
 * are B apart). idx NULL: bits and counts only (cnt may be NULL too). */
typedef struct sf_block_emit {
    uint32_t *bits;
    uint8_t *idx;
    int32_t *cnt;
    int64_t bits_stride, idx_stride, cnt_stride;
    int32_t off;
} sf_block_emit;

/* Emits step t of the block's row: bit i where v[i] != 0, and (with idx) the offsets of those neurons after the
 * ones the segment's earlier blocks listed. Returns how many were set. */
static inline int sf_block_emit_row(const sf_block_emit *e, int64_t t, const float *v, int nb)
{
    uint32_t w[2] = {0, 0};
    for (int i = 0; i < nb; i++) w[i >> 5] |= (uint32_t)(v[i] != 0.0f) << (i & 31);
    uint32_t *bw = e->bits + t * e->bits_stride;
    bw[0] = w[0];
    if (nb > 32) bw[1] = w[1];
    const int set = __builtin_popcount(w[0]) + __builtin_popcount(w[1]);
    if (!e->cnt) return set;
    int32_t *c = e->cnt + t * e->cnt_stride;
    const int32_t k = e->off ? *c : 0;
    if (e->idx) {
        uint8_t *ix = e->idx + t * e->idx_stride + k;
        for (int h = 0; h < 2; h++)
            for (uint32_t m = w[h]; m; m &= m - 1) *ix++ = (uint8_t)(e->off + 32 * h + __builtin_ctz(m));
    }
    *c = k + set;
    return set;
}

/* Forward over one block of nb <= SF_CPU_BLOCK neurons for all T steps, x with row stride N. y_t = x_t
 * (sc == NULL) or x_t·sc + sh per neuron (BN folded into a scale and shift); a and c are k's, or each neuron's own
 * where av/cv are given (a PLIF with a w per channel); `alif` runs the ALIF (sf_alif_step). The state starts at v_in
 * (the block's nb values; the ALIF's b at v_in + N) or at k->v0 (b = 0) when v_in is NULL, and ends in v_out (b at
 * v_out + N) when that is given (sf_lif_state). h_t goes to the scratch rows h_rows (stride hs) when given, and the
 * ALIF's θ_t to the rows after them (h_rows + T·hs); with `spikes` set, s and h rows go to s_out and h_out (stride N)
 * where those are not NULL, byte spikes to s8_out when `bytes` is set, the compact form through `emit` when it is
 * not NULL, and the spikes are counted. Inlined with constant soft/alif/spikes/bytes/sc/av so each caller gets a
 * branch-free vector loop; h is bitwise the same for every caller. */
SF_ALWAYS_INLINE int64_t sf_block_forward(const sf_lif_coeffs *k, int soft, int alif, int spikes, int bytes,
                                          int64_t T, int64_t N, int nb, const float *x, const float *sc,
                                          const float *sh, const float *av, const float *cv, const float *v_in,
                                          float *v_out, float *h_rows, int64_t hs, float *s_out, float *h_out,
                                          uint8_t *s8_out, const sf_block_emit *emit)
{
    /* A local copy: the stores below could alias *k for all gcc knows, and a conditional load of k->v_reset
     * inside the loop stops vectorisation. */
    const sf_lif_coeffs kc = *k;
    float v[SF_CPU_BLOCK], b[SF_CPU_BLOCK], h_row[SF_CPU_BLOCK], th_row[SF_CPU_BLOCK], s_row[SF_CPU_BLOCK];
    int32_t count[SF_CPU_BLOCK];
    for (int i = 0; i < nb; i++) {
        v[i] = v_in ? v_in[i] : kc.v0;
        b[i] = alif && v_in ? v_in[N + i] : 0.0f;
        count[i] = 0;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * N;
        float *ht = h_rows ? h_rows + t * hs : h_row;
        float *tht = alif && h_rows ? h_rows + (T + t) * hs : th_row;
        uint8_t *s8t = bytes ? s8_out + t * N : NULL;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float y = xt[i];
            if (sc) y = y * sc[i] + sh[i];
            float hv, sp, vv = v[i];
            if (alif) {
                float bb = b[i], th;
                sp = sf_alif_step(&kc, soft, y, &vv, &bb, &hv, &th);
                b[i] = bb;
                tht[i] = th;
            } else if (av) {
                sf_lif_coeffs ki = kc;
                ki.a = av[i];
                ki.c = cv[i];
                sp = sf_lif_step(&ki, soft, y, &vv, &hv);
            } else {
                sp = sf_lif_step(&kc, soft, y, &vv, &hv);
            }
            v[i] = vv;
            ht[i] = hv;
            if (spikes) {
                s_row[i] = sp;
                if (bytes) s8t[i] = (uint8_t)sp;
                count[i] += (int32_t)sp;
            }
        }
        if (spikes && emit) sf_block_emit_row(emit, t, s_row, nb);
        if (spikes && s_out) sf_stream_row(s_out + t * N, s_row, nb);
        if (spikes && h_out) sf_stream_row(h_out + t * N, ht, nb);
    }
    if (v_out)
        for (int i = 0; i < nb; i++) {
            v_out[i] = v[i];
            if (alif) v_out[N + i] = b[i];
        }
    int64_t total = 0;
    for (int i = 0; i < nb; i++) total += count[i];
    return total;
}

/* The reverse-time pass over one block: from h (rows of stride hs) and ds (row stride N) it writes dy_t = c·dh_t
 * (row stride dys). dy may be h itself (same stride): each h_t (and h_{t-1}, which a PLIF reads at step t) is read
 * before dy_t overwrites it. ∂L/∂state starts from dv_in (the block's nb values, the ALIF's ∂L/∂b at dv_in + N;
 * NULL: 0) and its value before the first step goes to dv_out (b's at dv_out + N) when given. */
typedef struct sf_block_back {
    const float *h;
    int64_t hs;
    const float *th; /* ALIF: θ_t rows, stride ths */
    int64_t ths;
    const float *ds;
    float *dy;
    int64_t dys;
    const float *dv_in;
    float *dv_out;
    /* PLIF: ∂L/∂k (k = 1/tau) per neuron, from ∂h_t/∂k = y_t - v_{t-1} (decay_input) or -v_{t-1} */
    const float *a, *c;       /* each neuron's a and c, or NULL: k's */
    const float *x, *sc, *sh; /* the input rows (stride N) and the BN fold (NULL: none) that give y_t */
    const float *v_init;      /* v before the first step (the block's nb values), or NULL: k->v0 */
    double *dk;               /* [nb]: += Σ_t dh_t·∂h_t/∂k */
} sf_block_back;
typedef void (*sf_block_backward_fn)(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb,
                                     const sf_block_back *io);

/* The backward loop for p's model, specialised for its surrogate (and, for the LIF and IF, its flags), so the vector
 * loop has no branches. */
sf_block_backward_fn sf_block_backward_for(const sf_lif_params *p);

/* The ALIF's θ_t rows (stride ths) from given h rows (stride hs), sweeping forward from the state's b (b_in NULL:
 * 0), for a backward whose h was kept (the threshold is not). */
void sf_block_alif_thresholds(const sf_lif_coeffs *k, int64_t T, int nb, const float *h, int64_t hs,
                              const float *b_in, float *th, int64_t ths);

/* The block's slice of an optional per-neuron state array. */
static inline const float *sf_state_at(const float *a, int64_t n0) { return a ? a + n0 : NULL; }
static inline float *sf_state_at_mut(float *a, int64_t n0) { return a ? a + n0 : NULL; }

/* Per-thread scratch of `per_thread` floats for every thread of the next parallel region (free with free()). */
sf_status sf_thread_scratch(int64_t per_thread, const char *what, float **out);

/* ---- batch norm helpers shared by bn.c and bn_lif.c */

/* Checks a BN shape; names the op in the message. */
sf_status sf_bn_check(const char *op, sf_bn_shape sh);
/* Per channel: invstd = 1/sqrt(var + eps), scale = gamma·invstd, shift = beta - mean·scale, so y = x·scale + shift.
 * gamma NULL means 1, beta NULL means 0. Every BN path folds the same way, so their y agree bitwise. */
void sf_bn_fold(int32_t C, const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                float *invstd, float *scale, float *shift);
/* Allocates n floats or fails naming the op. */
sf_status sf_cpu_alloc_f32(int64_t n, const char *what, float **out);

#endif
