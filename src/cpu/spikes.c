/* spikes.c — the CPU's conversions between 0/1 float tensors and their compact form (core/spikes.h). */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

static sf_status check_rows(const char *op, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0) return sf_fail(SF_ERR_INVALID, "%s: rows = %lld, n = %lld", op, (long long)rows, (long long)n);
    return SF_OK;
}

/* One row: its bits, and the segment lists and counts where wanted; returns the number of ones, sets *bad for values
 * that are neither 0 nor 1 (counted as spikes where nonzero). */
static int64_t compact_row(int64_t n, const float *x, uint32_t *bits, uint8_t *idx, int32_t *cnt, int *bad)
{
    const int64_t words = sf_spike_words(n);
    int64_t ones = 0;
    for (int64_t w = 0; w < words; w++) {
        uint32_t word = 0;
        const int64_t k1 = n - 32 * w < 32 ? n - 32 * w : 32;
        for (int64_t k = 0; k < k1; k++) {
            float v = x[32 * w + k];
            *bad |= v != 0.0f && v != 1.0f;
            word |= (uint32_t)(v != 0.0f) << k;
        }
        bits[w] = word;
        ones += __builtin_popcount(word);
    }
    if (!cnt) return ones;
    for (int64_t g = 0; g < sf_spike_segs(n); g++) {
        int32_t c = 0;
        for (int64_t w = g * (SF_SPIKE_SEG / 32); w < words && w < (g + 1) * (SF_SPIKE_SEG / 32); w++)
            for (uint32_t m = bits[w]; m; m &= m - 1) {
                if (idx) idx[g * SF_SPIKE_SEG + c] = (uint8_t)(32 * w - g * SF_SPIKE_SEG + __builtin_ctz(m));
                c++;
            }
        cnt[g] = c;
    }
    return ones;
}

sf_status sf_cpu_op_spikes_compact(sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                   float *count, float *flag)
{
    SF_TRY(check_rows("spikes_compact", rows, n));
    const int64_t words = sf_spike_words(n), segs = sf_spike_segs(n);
    int64_t ones = 0;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : ones) reduction(| : bad) if (rows * n >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        ones += compact_row(n, x + r * n, out->bits + r * words, out->idx ? out->idx + r * n : NULL,
                            out->cnt ? out->cnt + r * segs : NULL, &bad);
    if (count) *count += (float)ones;
    if (bad && flag) flag[0] = 1.0f;
    return SF_OK;
}

sf_status sf_cpu_op_spikes_expand(sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y)
{
    SF_TRY(check_rows("spikes_expand", rows, n));
    const int64_t words = sf_spike_words(n);
#pragma omp parallel for schedule(static) if (rows * n >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *b = bits + r * words;
        float *yr = y + r * n;
        for (int64_t i = 0; i < n; i++) yr[i] = (float)((b[i >> 5] >> (i & 31)) & 1u);
    }
    return SF_OK;
}
