/* neuron_block.h — the per-block LIF loops shared by the CPU LIF and fused BN→LIF kernels (internal to src/cpu).
 *
 * A block is SF_CPU_NEURON_BLOCK contiguous neurons of one time step; the whole time loop runs inside it with the
 * neuron loop innermost, so gcc vectorises over neurons while the recurrence stays sequential in time. */
#ifndef SF_CPU_NEURON_BLOCK_H
#define SF_CPU_NEURON_BLOCK_H

#include "core/backend.h"

#include <stdint.h>
#include <string.h>

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
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x != x ? x : p * scale;
}
#define SF_EXPF sf_cpu_expf
#include "core/lif_math.h"

/* 64 neurons = 4 cache lines of each row, and a [T × 64] scratch of 64 KiB at T = 256 stays in L2. */
#define SF_CPU_NEURON_BLOCK 64

#if defined(__GNUC__)
#define SF_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define SF_ALWAYS_INLINE static inline
/* ---- batch norm helpers shared by batchnorm.c and bn_lif.c */

/* Checks a BN shape (and that gamma/beta-free calls are consistent); names the op in the message. */
sf_status sf_bn_check(const char *op, sf_bn_shape sh);
/* Per channel: invstd = 1/sqrt(var + eps), scale = gamma·invstd, shift = beta - mean·scale, so y = x·scale + shift.
 * gamma NULL means 1, beta NULL means 0. Every BN path folds the same way, so their y agree bitwise. */
void sf_bn_fold(int32_t C, const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                float *invstd, float *scale, float *shift);
/* Allocates n floats or fails naming the op. */
sf_status sf_cpu_alloc_f32(int64_t n, const char *what, float **out);

#endif

/* Forward over one block of nb neurons for all T steps. y_t = x_t (sc == NULL) or x_t·sc + sh per neuron (BN
 * folded into a scale and shift). h_t goes to h (row stride hs); spikes to s and s8 (row strides ss, s8s; a stride of
 * 0 with a block-sized dummy discards them) when `spikes` is set. Returns the number of spikes. Inlined with
 * constant soft/spikes/sc so each caller gets a branch-free vector loop; h is bitwise the same for every caller. */
SF_ALWAYS_INLINE int64_t sf_block_forward(const sf_lif_coeffs *k, int soft, int spikes, int64_t T, int64_t N,
                                          int nb, const float *x, const float *sc, const float *sh, float *h,
                                          int64_t hs, float *s, int64_t ss, uint8_t *s8, int64_t s8s)
{
    float v[SF_CPU_NEURON_BLOCK];
    int32_t count[SF_CPU_NEURON_BLOCK];
    for (int i = 0; i < nb; i++) {
        v[i] = k->v0;
        count[i] = 0;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * N;
        float *ht = h + t * hs, *st = s + t * ss;
        uint8_t *s8t = s8 + t * s8s;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float y = sc ? xt[i] * sc[i] + sh[i] : xt[i];
            float hv, vv = v[i];
            float sp = sf_lif_step(k, soft, y, &vv, &hv);
            v[i] = vv;
            ht[i] = hv;
            if (spikes) {
                st[i] = sp;
                s8t[i] = (uint8_t)sp;
                count[i] += (int32_t)sp;
            }
        }
    }
    int64_t total = 0;
    for (int i = 0; i < nb; i++) total += count[i];
    return total;
}

/* Reverse-time pass over one block: from h (row stride hs) and ds (row stride N) writes dy_t = c·dh_t (row stride
 * dys). dy may be h itself (same stride): each h_t is read before dy_t overwrites it. */
typedef void (*sf_block_backward_fn)(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb,
                                     const float *h, int64_t hs, const float *ds, float *dy, int64_t dys);

/* The backward loop specialised for p's surrogate and flags (so the vector loop has no branches). */
sf_block_backward_fn sf_block_backward_for(const sf_lif_params *p);

/* Recomputes h of one block into scratch [T × SF_CPU_NEURON_BLOCK] (the recompute memory mode). */
void sf_block_recompute_h(const sf_lif_coeffs *k, int soft, int64_t T, int64_t N, int nb, const float *x,
                          const float *sc, const float *sh, float *scratch);

/* Per-thread scratch of `per_thread` floats for every thread of the next parallel region (free with free()). */
sf_status sf_thread_scratch(int64_t per_thread, const char *what, float **out);

/* ---- batch norm helpers shared by batchnorm.c and bn_lif.c */

/* Checks a BN shape (and that gamma/beta-free calls are consistent); names the op in the message. */
sf_status sf_bn_check(const char *op, sf_bn_shape sh);
/* Per channel: invstd = 1/sqrt(var + eps), scale = gamma·invstd, shift = beta - mean·scale, so y = x·scale + shift.
 * gamma NULL means 1, beta NULL means 0. Every BN path folds the same way, so their y agree bitwise. */
void sf_bn_fold(int32_t C, const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                float *invstd, float *scale, float *shift);
/* Allocates n floats or fails naming the op. */
sf_status sf_cpu_alloc_f32(int64_t n, const char *what, float **out);

#endif
