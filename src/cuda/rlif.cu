/* rlif.cu — the recurrent LIF layer on CUDA: y_t = x_t + V·s_{t-1}, then the LIF step. Where the shape fits, both time
 * loops are one kernel over the GPU (rlif_grid.cu); else event-driven is a persistent kernel per call, a block per
 * sample, and dense is a GEMM and a step kernel per step (the step's CUDA graph replays them). Sums in the CPU op's
 * order: event-driven paths give the CPU's fp32 bits. x, V, Vᵀ, s, ds, dx of activation type A; h, state, per-step
 * products and dV float. A mask bit and dx's nonzero count describe dx as stored (a value rounding to 0 is a zero). */
#include "cuda/neuron.cuh"
#include "cuda/ops.cuh"
#include "cuda/rlif_grid.cuh"
#include "cuda/spikes.cuh"

enum { RMAX = 8, MAX_THREADS = 1024 }; /* the persistent kernels hold up to RMAX neurons per thread: n <= 8192 */

/* The workspace: Vᵀ, neuron state and per-step product ([B, n] each), s_{t-1} as the GEMM's operand, h over all steps
 * (recompute; then the expanded spikes where a dense dV's precision needs them), the recompute's compact spikes, the
 * event-driven dV's scratch. Sized in floats, so it holds the activation type's copies (vt, sprev, h's spikes). */
struct rl_ws {
    void *vt;
    float *state, *rec;
    void *sprev;
    float *h;
    sf_spikes c;
    void *sl;
};

static size_t up(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t layout(int64_t T, int64_t B, int64_t n, void *base, rl_ws *w)
{
    const size_t f = sizeof(float), N = (size_t)(B * n), rows = (size_t)(T * B);
    const size_t sizes[] = {(size_t)(n * n) * f, N * f, N * f, N * f, rows * (size_t)n * f,
                            rows * (size_t)((n + 31) / 32) * 4, rows * (size_t)n,
                            rows * (size_t)((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG) * 4,
                            sf_cuda_spike_linear_ws(T > 1 ? (T - 1) * B : 1, (int32_t)n, (int32_t)n)};
    char *p = (char *)base;
    void *ptr[9];
    size_t total = 0;
    for (int i = 0; i < 9; i++) {
        ptr[i] = p ? p + total : NULL;
        total += up(sizes[i] ? sizes[i] : 4);
    }
    if (w)
        *w = rl_ws{ptr[0], (float *)ptr[1], (float *)ptr[2], ptr[3], (float *)ptr[4],
                   sf_spikes{(uint32_t *)ptr[5], (uint8_t *)ptr[6], (int32_t *)ptr[7]}, ptr[8]};
    return total;
}

size_t sf_cuda_op_rlif_workspace(sf_backend *be, int64_t T, int64_t B, int64_t n)
{
    return layout(T, B, n, NULL, NULL);
}

/* Threads of a persistent block: whole segments, up to 1024; the sample's n neurons in at most RMAX rounds. */
static int persistent_threads(int64_t n)
{
    int64_t t = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG * SF_SPIKE_SEG;
    return (int)(t < MAX_THREADS ? t : MAX_THREADS);
}

static bool persistent_ok(int64_t n) { return n <= (int64_t)RMAX * MAX_THREADS; }

/* fn(std::integral_constant<int, QN>) with QN neurons per thread of a persistent block: the least of 1, 2, 4, RMAX
 * that covers n (the per-neuron register arrays are QN long: RMAX-long ones spilled at 1024 threads). */
template <class F> static sf_status with_rounds(int64_t n, F fn)
{
    const int64_t q = (n + persistent_threads(n) - 1) / persistent_threads(n);
    if (q <= 1) return fn(std::integral_constant<int, 1>());
    if (q <= 2) return fn(std::integral_constant<int, 2>());
    if (q <= 4) return fn(std::integral_constant<int, 4>());
    return fn(std::integral_constant<int, RMAX>());
}

/* ---------------------------------------------------------------- event-driven: persistent kernels */

template <class A, int QN>
__global__ void __launch_bounds__(MAX_THREADS)
    forward_sparse_kernel(sf_lif_params p, sf_lif_coeffs k, int64_t T, int64_t B, int64_t n, const A *x, const A *vt,
                          A *s, float *hout, sf_spikes c, float *count)
{
    __shared__ int list[SF_SPIKE_SEG];
    __shared__ int wc[2][MAX_THREADS / 32];
    const int64_t b = blockIdx.x, segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG;
    const int Q = (int)((n + blockDim.x - 1) / blockDim.x);
    float v[QN], spikes = 0.0f;
#pragma unroll
    for (int q = 0; q < QN; q++) v[q] = k.v0;
    int e = 0; /* emits so far: their count buffers alternate */
    for (int64_t t = 0; t < T; t++) {
        float acc[QN];
#pragma unroll
        for (int q = 0; q < QN; q++) acc[q] = 0.0f;
        for (int64_t g = 0; t > 0 && g < segs; g++) {
            const int len = sf_cuda_stage_segment(c, n, (t - 1) * B + b, g, list);
            __syncthreads();
#pragma unroll 4 /* several rows' loads in flight per thread: the loop is latency-bound, not bandwidth-bound */
            for (int m = 0; m < len; m++) {
                const A *vr = vt + (int64_t)list[m] * n + threadIdx.x;
#pragma unroll
                for (int q = 0; q < QN; q++)
                    if (q < Q && threadIdx.x + (int64_t)q * blockDim.x < n) acc[q] += sf_widen(vr[q * blockDim.x]);
            }
            __syncthreads();
        }
        const int64_t r = t * B + b;
#pragma unroll
        for (int q = 0; q < QN; q++) {
            if (q >= Q) break; /* the same for the whole block */
            const int64_t j = threadIdx.x + (int64_t)q * blockDim.x;
            const bool valid = j < n;
            float st = 0.0f, h;
            if (valid) {
                st = sf_lif_step(&k, p.soft_reset, sf_widen(x[r * n + j]) + acc[q], &v[q], &h);
                if (s) s[r * n + j] = sf_narrow<A>(st);
                if (hout) hout[r * n + j] = h;
            }
            spikes += (float)sf_cuda_emit_row(c, n, r, j, valid, st != 0.0f, wc[e++ & 1]);
        }
        __syncthreads(); /* the step's lists, read by the next step's staging */
    }
    if (count) sf_cuda_add_count(count, spikes);
}

/* Lists the nonzero entries (indices, values) of segment g of row[0..n) for the block (blockDim >= a segment) and
 * returns their number; wc: SF_SPIKE_SEG/32 shared ints. Synchronises; the caller too, before the next call. */
template <class A>
__device__ __forceinline__ int stage_nonzero(const A *row, int64_t n, int64_t g, int *list, float *vals, int *wc,
                                             int *len)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t j = g * SF_SPIKE_SEG + threadIdx.x;
    float d = 0.0f;
    unsigned m = 0;
    if (threadIdx.x < SF_SPIKE_SEG) {
        d = j < n ? sf_widen(row[j]) : 0.0f;
        m = __ballot_sync(0xffffffffu, d != 0.0f);
        if (lane == 0) wc[warp] = __popc(m);
    }
    __syncthreads();
    if (threadIdx.x < SF_SPIKE_SEG && d != 0.0f) {
        int before = 0;
        for (int w = 0; w < warp; w++) before += wc[w];
        const int pos = before + __popc(m & ((1u << lane) - 1u));
        list[pos] = (int)j;
        vals[pos] = d;
    }
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < SF_SPIKE_SEG / 32; w++) total += wc[w];
        *len = total;
    }
    __syncthreads();
    return *len;
}

/* dy as stored in dx: the value the next step's products read back, and whether it is nonzero. */
template <class A> __device__ __forceinline__ A stored_grad(float dy, bool *nonzero)
{
    const A q = sf_narrow<A>(dy);
    *nonzero = sf_widen(q) != 0.0f;
    return q;
}

/* The reverse time loop with Vᵀ·dy_{t+1} over the nonzero entries of dy_{t+1} (read back from dx). */
template <class A, int QN>
__global__ void __launch_bounds__(MAX_THREADS)
    backward_sparse_kernel(sf_lif_params p, sf_lif_coeffs k, int64_t T, int64_t B, int64_t n, const float *h,
                           const A *v, const A *ds, A *dx, sf_spikes mask, float *count)
{
    __shared__ int list[SF_SPIKE_SEG];
    __shared__ float vals[SF_SPIKE_SEG];
    __shared__ int nz_wc[SF_SPIKE_SEG / 32], len;
    __shared__ int wc[2][MAX_THREADS / 32];
    const int64_t b = blockIdx.x, segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG;
    const int Q = (int)((n + blockDim.x - 1) / blockDim.x);
    float dv[QN], nonzero = 0.0f;
#pragma unroll
    for (int q = 0; q < QN; q++) dv[q] = 0.0f;
    int e = 0;
    for (int64_t t = T - 1; t >= 0; t--) {
        float g[QN];
#pragma unroll
        for (int q = 0; q < QN; q++) g[q] = 0.0f;
        for (int64_t gg = 0; t < T - 1 && gg < segs; gg++) {
            const int num = stage_nonzero(dx + ((t + 1) * B + b) * n, n, gg, list, vals, nz_wc, &len);
#pragma unroll 4
            for (int m = 0; m < num; m++) {
                const float d = vals[m];
                const A *vr = v + (int64_t)list[m] * n + threadIdx.x;
#pragma unroll
                for (int q = 0; q < QN; q++)
                    if (q < Q && threadIdx.x + (int64_t)q * blockDim.x < n) g[q] += d * sf_widen(vr[q * blockDim.x]);
            }
            __syncthreads();
        }
        const int64_t r = t * B + b;
#pragma unroll
        for (int q = 0; q < QN; q++) {
            if (q >= Q) break;
            const int64_t j = threadIdx.x + (int64_t)q * blockDim.x;
            const bool valid = j < n;
            bool nz = false;
            if (valid) {
                float d = dv[q];
                const float dy = k.c * sf_lif_step_back(&p, &k, h[r * n + j], sf_widen(ds[r * n + j]) + g[q], &d);
                dv[q] = d;
                dx[r * n + j] = stored_grad<A>(dy, &nz);
            }
            if (mask.bits)
                nonzero += (float)sf_cuda_emit_row(mask, n, r, j, valid, nz, wc[e++ & 1]);
            else
                nonzero += (float)__popc(__ballot_sync(0xffffffffu, nz)) * ((threadIdx.x & 31) == 0);
        }
        __syncthreads(); /* the step's dx, read by the next step's staging */
    }
    if (count) sf_cuda_add_count(count, nonzero);
}

/* ---------------------------------------------------------------- dense: a product and a step kernel per step */

/* One forward step for all samples: y = x_t + rec (t > 0), the neuron state in global memory. */
template <class A>
__global__ void __launch_bounds__(SF_SPIKE_SEG)
    forward_step_kernel(sf_lif_params p, sf_lif_coeffs k, int64_t t, int64_t B, int64_t n, const A *x,
                        const float *rec, float *state, A *sprev, A *s, float *hout, sf_spikes c, float *count)
{
    __shared__ int wc[SF_SPIKE_SEG / 32];
    const int64_t segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG, b = blockIdx.x / segs;
    const int64_t j = blockIdx.x % segs * SF_SPIKE_SEG + threadIdx.x, r = t * B + b;
    const bool valid = j < n;
    float st = 0.0f;
    if (valid) {
        float v = t == 0 ? k.v0 : state[b * n + j], h;
        st = sf_lif_step(&k, p.soft_reset, sf_widen(x[r * n + j]) + (t == 0 ? 0.0f : rec[b * n + j]), &v, &h);
        state[b * n + j] = v;
        sprev[b * n + j] = sf_narrow<A>(st);
        if (s) s[r * n + j] = sf_narrow<A>(st);
        if (hout) hout[r * n + j] = h;
    }
    float ones;
    if (c.bits) ones = (float)sf_cuda_emit_row(c, n, r, j, valid, st != 0.0f, wc);
    else ones = (float)__popc(__ballot_sync(0xffffffffu, st != 0.0f)) * ((threadIdx.x & 31) == 0);
    if (count) sf_cuda_add_count(count, ones);
}

/* One reverse step for all samples: dS = ds_t + g (t < T-1), dL/dv in global memory. */
template <class A>
__global__ void __launch_bounds__(SF_SPIKE_SEG)
    backward_step_kernel(sf_lif_params p, sf_lif_coeffs k, int64_t t, int64_t T, int64_t B, int64_t n, const float *h,
                         const A *ds, const float *gsum, float *state, A *dx, sf_spikes mask, float *count)
{
    __shared__ int wc[SF_SPIKE_SEG / 32];
    const int64_t segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG, b = blockIdx.x / segs;
    const int64_t j = blockIdx.x % segs * SF_SPIKE_SEG + threadIdx.x, r = t * B + b;
    const bool valid = j < n;
    bool on = false;
    if (valid) {
        float d = t == T - 1 ? 0.0f : state[b * n + j];
        const float dy = k.c * sf_lif_step_back(&p, &k, h[r * n + j],
                                                sf_widen(ds[r * n + j]) + (t == T - 1 ? 0.0f : gsum[b * n + j]), &d);
        state[b * n + j] = d;
        dx[r * n + j] = stored_grad<A>(dy, &on);
    }
    float nz;
    if (mask.bits) nz = (float)sf_cuda_emit_row(mask, n, r, j, valid, on, wc);
    else nz = (float)__popc(__ballot_sync(0xffffffffu, on)) * ((threadIdx.x & 31) == 0);
    if (count) sf_cuda_add_count(count, nz);
}

/* s = h >= θ as bits (the spikes of a forward whose h was kept): a thread per neuron of a row, its warp's ballot
 * one word, over every gridDim.y-th row (reads coalesced, where a thread per word read 32 strided floats). */
__global__ void bits_from_h_kernel(int64_t rows, int64_t n, float theta, const float *h, uint32_t *bits)
{
    const int64_t words = (n + 31) / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 32 * words) return; /* whole warps: 32·words and the warps both align to 32 */
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const unsigned m = __ballot_sync(0xffffffffu, i < n && h[r * n + i] >= theta);
        if ((threadIdx.x & 31) == 0) bits[r * words + i / 32] = m;
    }
}

/* ---------------------------------------------------------------- the ops */

static sf_status check(const char *op, const sf_lif_params *p, int64_t T, int64_t B, int64_t n)
{
    SF_TRY(sf_lif_params_check(p));
    if (T < 1 || B < 1 || n < 1 || n > INT32_MAX || B > INT32_MAX || T * B * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG) > INT32_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: shape T=%lld B=%lld n=%lld", op, (long long)T, (long long)B, (long long)n);
    return SF_OK;
}

static unsigned step_blocks(int64_t B, int64_t n) { return (unsigned)(B * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG)); }

/* Element `i` of an activation-type array (pointer arithmetic in its element size). */
static const void *at(const sf_cuda_ctx *c, const void *p, int64_t i)
{
    return (const char *)p + (size_t)i * sf_scalar_size(c->act);
}

static sf_status forward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t B, int64_t n, const float *x,
                         const float *v, int32_t sparse, const sf_lif_out *out, const rl_ws &w)
{
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    if (sparse && !(out->c.bits && out->c.idx && out->c.cnt))
        return sf_fail(SF_ERR_INVALID, "recurrent LIF forward: the event-driven recurrence needs the compact output");
    sf_lif_out o = *out;
    if (!o.c.bits) o.c = sf_spikes{w.c.bits, NULL, NULL}; /* the grid kernels pass each step's spikes on as bits */
    bool ran;
    SF_TRY(sf_cuda_rlif_grid_forward(c, p, T, B, n, x, v, sparse != 0, &o, &ran));
    if (ran) return SF_OK;
    if (sparse && persistent_ok(n)) {
        SF_TRY(sf_cuda_transpose(c, c->act, n, n, v, w.vt));
        return sf_cuda_with_act(c->act, [&](auto tag) {
            using A = decltype(tag);
            return with_rounds(n, [&](auto qn) {
                forward_sparse_kernel<A, decltype(qn)::value><<<(unsigned)B, persistent_threads(n), 0, c->stream>>>(
                    *p, k, T, B, n, (const A *)x, (const A *)w.vt, (A *)out->s, out->h, out->c, out->spike_count);
                SF_CUDA_LAUNCHED();
                return SF_OK;
            });
        });
    }
    for (int64_t t = 0; t < T; t++) {
        if (t > 0) /* recᶜ[n, B] = (Vᶜ)ᵀ·sprevᶜ: rec[b, j] = Σ_i V[j, i]·s_{t-1}[b, i], in float */
            SF_TRY(sf_cuda_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)B, (int)n, v, (int)n, w.sprev, (int)n, 0.0f,
                                w.rec, (int)n, true));
        SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
            using A = decltype(tag);
            forward_step_kernel<A><<<step_blocks(B, n), SF_SPIKE_SEG, 0, c->stream>>>(
                *p, k, t, B, n, (const A *)x, w.rec, w.state, (A *)w.sprev, (A *)out->s, out->h, out->c,
                out->spike_count);
            SF_CUDA_LAUNCHED();
            return SF_OK;
        }));
    }
    return SF_OK;
}

sf_status sf_cuda_op_rlif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                  const float *x, const float *v, int32_t sparse, const sf_lif_out *out, void *ws)
{
    SF_TRY(check("recurrent LIF forward", p, T, B, n));
    rl_ws w;
    layout(T, B, n, ws, &w);
    return forward(sf_cuda_ctx_of(be), p, T, B, n, x, v, sparse, out, w);
}

sf_status sf_cuda_op_rlif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                   const float *x, const float *h, const uint32_t *s_bits, const float *v,
                                   const float *ds, int32_t fwd_sparse, int32_t bwd_sparse, float *dx, float *dv,
                                   const sf_spikes *mask, float *grad_count, void *ws)
{
    SF_TRY(check("recurrent LIF backward", p, T, B, n));
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    rl_ws w;
    layout(T, B, n, ws, &w);
    const int64_t rows = T * B;
    const uint32_t *bits = w.c.bits; /* the forward's spikes, for dV */
    if (!h) { /* recompute: the forward again, the same way, keeping h and the spikes */
        sf_lif_out o = {};
        o.h = w.h;
        o.c = w.c;
        o.row = n;
        SF_TRY(forward(c, p, T, B, n, x, v, fwd_sparse, &o, w));
        h = w.h;
    } else if (s_bits) {
        bits = s_bits;
    } else {
        bits_from_h_kernel<<<sf_cuda_row_grid(rows, 32 * ((n + 31) / 32), 256), 256, 0, c->stream>>>(
            rows, n, p->v_threshold, h, w.c.bits);
        SF_CUDA_LAUNCHED();
    }
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const sf_spikes m = mask ? sf_spikes{mask->bits, NULL, mask->cnt} : sf_spikes{NULL, NULL, NULL};
    bool ran; /* the whole GPU's kernel where it fits, dense in dy */
    SF_TRY(sf_cuda_rlif_grid_backward(c, p, T, B, n, h, v, ds, dx, mask ? &m : NULL, grad_count, &ran));
    if (!ran && (bwd_sparse & SF_RLIF_SPARSE_DY) && persistent_ok(n)) {
        SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
            using A = decltype(tag);
            return with_rounds(n, [&](auto qn) {
                backward_sparse_kernel<A, decltype(qn)::value><<<(unsigned)B, persistent_threads(n), 0, c->stream>>>(
                    *p, k, T, B, n, h, (const A *)v, (const A *)ds, (A *)dx, m, grad_count);
                SF_CUDA_LAUNCHED();
                return SF_OK;
            });
        }));
    } else if (!ran) {
        for (int64_t t = T - 1; t >= 0; t--) {
            if (t < T - 1) /* gᶜ[n, B] = Vᶜ·dy_{t+1}ᶜ: g[b, i] = Σ_j dy_{t+1}[b, j]·V[j, i], in float */
                SF_TRY(sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)B, (int)n, v, (int)n,
                                    at(c, dx, (t + 1) * B * n), (int)n, 0.0f, w.rec, (int)n, true));
            SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
                using A = decltype(tag);
                backward_step_kernel<A><<<step_blocks(B, n), SF_SPIKE_SEG, 0, c->stream>>>(
                    *p, k, t, T, B, n, h, (const A *)ds, w.rec, w.state, (A *)dx, m, grad_count);
                SF_CUDA_LAUNCHED();
                return SF_OK;
            }));
        }
    }
    if (T == 1) return sf_cuda_zero_f32(c, dv, n * n);
    const int64_t r1 = (T - 1) * B; /* dV = Σ_{t >= 1} dy_tᵀ·s_{t-1}: the spike rows shifted by one step */
    const float *dy1 = (const float *)at(c, dx, B * n);
    if (bwd_sparse & SF_RLIF_SPARSE_DV)
        return sf_cuda_spike_weight_grad(c, r1, (int32_t)n, (int32_t)n, bits, dy1, dv, w.sl);
    /* dV[j, i] = Σ_r dy[r, j]·s[r, i]: the linear layer's dW with the shifted spike rows as its input */
    return sf_cuda_binary_weight_grad(c, r1, (int32_t)n, (int32_t)n, bits, w.h, dy1, dv);
}
