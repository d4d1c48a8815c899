/* rlif_grid.cu — the recurrent LIF layer's forward and backward time loops, each one cooperative kernel over the
 * whole GPU (rlif_grid.cuh says how the work is split). */
#include "cuda/neuron.cuh"
#include "cuda/rlif_grid.cuh"
#include "cuda/spikes.cuh"
#include "cuda/tf32.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

/* A block owns SPB samples and at most NJ neurons; 16 warps. In the dense products each warp holds the block's
 * whole 32 × 24 as 2 × 3 tensor-core tiles of 16 × 8 and sums them over its own columns of the inputs j. */
enum { SPB = 32, NJ = 24, WARPS = 16, THREADS = WARPS * 32 };
enum { PARTS = WARPS * NJ * SPB, SUMS = PARTS + SPB * NJ }; /* a product's buffer: the warps' parts, then the sums */
enum { PAIRS = (SPB * NJ + THREADS - 1) / THREADS }; /* (sample, neuron) pairs a thread steps */
enum { SPW = SPB / WARPS };                          /* samples a warp steps in the event-driven forward */
static_assert(SPB % WARPS == 0, "each warp takes the same number of samples");

/* How the grid splits a call: sample groups × neuron groups, nj neurons each, one block per SM in all. */
struct grid_split {
    int64_t groups, nj, blocks;
};

static bool split_of(const sf_cuda_ctx *c, int64_t B, int64_t n, grid_split *g)
{
    const int64_t sg = (B + SPB - 1) / SPB;
    if (sg > c->num_sms) return false;
    g->nj = (n + c->num_sms / sg - 1) / (c->num_sms / sg);
    g->groups = (n + g->nj - 1) / g->nj;
    g->blocks = sg * g->groups;
    return g->nj <= NJ;
}

/* Rewrites row r's idx and cnt (where c has them) from its bits: one block of SF_SPIKE_SEG threads per segment. */
__global__ void __launch_bounds__(SF_SPIKE_SEG) compact_from_bits_kernel(sf_spikes c, int64_t n)
{
    __shared__ int wc[SF_SPIKE_SEG / 32];
    const int64_t segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG, r = blockIdx.x / segs;
    const int64_t j = blockIdx.x % segs * SF_SPIKE_SEG + threadIdx.x;
    const bool valid = j < n;
    const bool on = valid && (c.bits[r * ((n + 31) / 32) + j / 32] >> (j & 31) & 1u);
    sf_cuda_emit_row(c, n, r, j, valid, on, wc);
}

static sf_status compact_from_bits(sf_cuda_ctx *c, const sf_spikes &s, int64_t rows, int64_t n)
{
    if (!s.cnt) return SF_OK;
    compact_from_bits_kernel<<<(unsigned)(rows * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG)), SF_SPIKE_SEG, 0,
                               c->stream>>>(s, n);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* Launches `kernel` over `blocks` co-resident blocks, or sets *ran = false where they do not all fit at once. */
static sf_status launch_cooperative(sf_cuda_ctx *c, const void *kernel, int blocks, int threads, size_t smem,
                                    void **args, bool *ran)
{
    int optin = 0, per_sm = 0;
    SF_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device));
    *ran = false;
    if (smem > (size_t)optin) return SF_OK;
    SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    SF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    if ((int64_t)per_sm * c->num_sms < blocks) return SF_OK;
    SF_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, blocks, threads, args, smem, c->stream));
    *ran = true;
    return SF_OK;
}

/* ---------------------------------------------------------------- the block's dense product */

/* Four consecutive elements from L2 (another block wrote them during this kernel), widened. */
__device__ __forceinline__ float4 load4(const float *p) { return __ldcg((const float4 *)p); }
template <class H> __device__ __forceinline__ float4 load4(const H *p)
{
    float r[4];
    sf_unpack4(__ldcg((const uint2 *)p), H(), r);
    return make_float4(r[0], r[1], r[2], r[3]);
}

/* Row length of vt: 16 floats past a multiple of 32 (and past n), so that the 8 lanes of a quarter warp, reading a
 * float4 each from two rows, touch 32 different banks. */
__host__ __device__ inline int vt_row(int n) { return (n + 31) / 32 * 32 + 16; }

/* c += a·b for a 16 × 8 tile over 8 of k, TF32 operands, fp32 accumulation (the PTX ISA's m16n8k8 fragments: lane
 * (g, t) = (lane / 4, lane % 4) holds a at rows g, g + 8 and columns t, t + 4; b at rows t, t + 4 and column g; c at
 * rows g, g + 8 and columns 2t, 2t + 1). */
__device__ __forceinline__ void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void split4(float4 x, uint32_t (&hi)[4], uint32_t (&lo)[4])
{
    sf_tf32_split_mma(x.x, &hi[0], &lo[0]);
    sf_tf32_split_mma(x.y, &hi[1], &lo[1]);
    sf_tf32_split_mma(x.z, &hi[2], &lo[2]);
    sf_tf32_split_mma(x.w, &hi[3], &lo[3]);
}

/* A group of 16 columns of the rows g + 8f (f < 4) of a lane, as its block_product loads them. The group's columns
 * map onto two k-steps so that a lane's four are one float4: k-step s takes column 4t + 2s as k = t and 4t + 2s + 1
 * as k = t + 4, in the rows and in vt alike. */
struct value_frag { /* a[f]: the lane's four columns of row g + 8f */
    float4 a[4];
};
struct spike_frag { /* 0/1 rows: the operand registers of tile m (rows g + 16m, g + 16m + 8) at k-step s, ready */
    uint32_t a[2][2][4];
};

/* The bits of 1.0f where bit k of u is set, else 0. */
__device__ __forceinline__ uint32_t one_if(uint32_t u, int k) { return (u & 1u << k) * (0x3f800000u >> k); }

/* The B operands of a group: vq holds this lane's four columns of vt's row g (the tiles' other rows 8·ld apart),
 * split in TF32 parts (sf_tf32_split_mma). */
__device__ __forceinline__ void vt_parts(const float *vq, int ld, uint32_t (&bh)[3][4], uint32_t (&bl)[3][4])
{
#pragma unroll
    for (int c = 0; c < 3; c++) split4(*(const float4 *)(vq + 8 * c * ld), bh[c], bl[c]);
}

/* Adds to acc one group of 16 columns, the fp32 product on the tensor cores: each operand split in TF32 parts,
 * lo·hi + hi·lo + hi·hi, all but lo·lo and what lies below 2^-21 of each operand. */
__device__ __forceinline__ void product_group(float (&acc)[2][3][4], const float *vq, int ld, const value_frag &r)
{
    uint32_t bh[3][4], bl[3][4];
    vt_parts(vq, ld, bh, bl);
#pragma unroll
    for (int m = 0; m < 2; m++) {
        uint32_t h0[4], l0[4], h1[4], l1[4]; /* rows g and g + 8 of tile m */
        split4(r.a[2 * m], h0, l0);
        split4(r.a[2 * m + 1], h1, l1);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const int x = 2 * s, y = 2 * s + 1;
#pragma unroll
            for (int c = 0; c < 3; c++) mma_tf32(acc[m][c], l0[x], l1[x], l0[y], l1[y], bh[c][x], bh[c][y]);
#pragma unroll
            for (int c = 0; c < 3; c++) mma_tf32(acc[m][c], h0[x], h1[x], h0[y], h1[y], bl[c][x], bl[c][y]);
#pragma unroll
            for (int c = 0; c < 3; c++) mma_tf32(acc[m][c], h0[x], h1[x], h0[y], h1[y], bh[c][x], bh[c][y]);
        }
    }
}

/* The same for 0/1 rows (spikes, exact in TF32): rows·lo + rows·hi. */
__device__ __forceinline__ void product_group(float (&acc)[2][3][4], const float *vq, int ld, const spike_frag &r)
{
    uint32_t bh[3][4], bl[3][4];
    vt_parts(vq, ld, bh, bl);
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const uint32_t(&a)[4] = r.a[m][s];
            const int x = 2 * s, y = 2 * s + 1;
#pragma unroll
            for (int c = 0; c < 3; c++) mma_tf32(acc[m][c], a[0], a[1], a[2], a[3], bl[c][x], bl[c][y]);
#pragma unroll
            for (int c = 0; c < 3; c++) mma_tf32(acc[m][c], a[0], a[1], a[2], a[3], bh[c][x], bh[c][y]);
        }
}

/* P[SPB][NJ] = rows·vtᵀ over k < n on the tensor cores in fp32 (product_group); vt [NJ][ld], zero past n. Warp w takes
 * the 16-column groups w, w + WARPS, …, loaded by rows(q, a) into a Frag (lane's columns 16q + 4t .. + 3 of rows
 * g + 8f, zero past n or B), the next group in flight. The warps' parts meet in buf ([WARPS][24][32]) and their sums,
 * in warp order, are left after them as [SPB][NJ] for product_at; buf [SUMS] must be free on entry. */
template <class Frag, class Rows>
__device__ __forceinline__ void block_product(const float *vt, int ld, float *buf, int n, Rows rows)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, groups = (n + 15) / 16;
    const float *vq = vt + (lane >> 2) * ld + 4 * (lane & 3);
    float acc[2][3][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int c = 0; c < 3; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[m][c][e] = 0.0f;
    Frag a0, a1; /* two groups' rows: one being multiplied, the next one loading */
    int q = warp;
    if (q < groups) rows(q, a0);
    for (; q < groups; q += 2 * WARPS) {
        if (q + WARPS < groups) rows(q + WARPS, a1);
        product_group(acc, vq + 16 * q, ld, a0);
        if (q + WARPS >= groups) break;
        if (q + 2 * WARPS < groups) rows(q + 2 * WARPS, a0);
        product_group(acc, vq + 16 * (q + WARPS), ld, a1);
    }
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int c = 0; c < 3; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) buf[(warp * 24 + (m * 3 + c) * 4 + e) * 32 + lane] = acc[m][c][e];
    __syncthreads();
    for (int at = threadIdx.x; at < 24 * 32; at += THREADS) { /* consecutive threads, consecutive parts */
        float sum = 0.0f;
        for (int w = 0; w < WARPS; w++) sum += buf[w * 24 * 32 + at];
        const int l = at & 31, e = at >> 5 & 3, m = (at >> 7) / 3, c = (at >> 7) % 3; /* accumulator e of tile m, c */
        buf[PARTS + (16 * m + 8 * (e >> 1) + (l >> 2)) * NJ + 8 * c + 2 * (l & 3) + (e & 1)] = sum;
    }
    __syncthreads();
}

/* Entry (row bl, column jj) of the product block_product left in buf. */
__device__ __forceinline__ float product_at(const float *buf, int bl, int jj) { return buf[PARTS + bl * NJ + jj]; }

/* Copies step t's bit rows of the block's samples into sbits [SPB][words], zero past B: warp w rows w, w + WARPS, …, a
 * lane per word, a thread's loads of a row all issued before its first store (L2 reads: other blocks wrote them). */
__device__ __forceinline__ void stage_bits(uint32_t *sbits, const uint32_t *bits, int t, int B, int b0, int words)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int w0 = 0; w0 < words; w0 += 64) {
        uint32_t v[SPW][2];
#pragma unroll
        for (int u = 0; u < SPW; u++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int bl = warp + u * WARPS, w = w0 + lane + 32 * e;
                v[u][e] = w < words && b0 + bl < B ? __ldcg(bits + ((int64_t)t * B + b0 + bl) * words + w) : 0u;
            }
#pragma unroll
        for (int u = 0; u < SPW; u++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int w = w0 + lane + 32 * e;
                if (w < words) sbits[(warp + u * WARPS) * words + w] = v[u][e];
            }
    }
}

/* ---------------------------------------------------------------- forward */

/* Shared memory: vs [n][nj] (V[j0 + jj][i] at vs[i·nj + jj]), the block's samples' v [SPB][NJ], the step before's
 * staged bits [SPB][words], a list of n inputs (offsets in vs) per warp. Warp w steps samples w, w + WARPS, …, lane jj
 * neuron j0 + jj: the warp lists the inputs that spiked at the step before, ascending, then each lane sums its row of V
 * over the list, eight reads at a time, adding in list order. x is loaded first, its latency hidden by the staging. */
template <class A>
__global__ void __launch_bounds__(THREADS)
    grid_forward_kernel(sf_lif_params p, sf_lif_coeffs k, int T, int B, int n, int nj, int groups, const A *x,
                        const A *v, A *s, float *hout, uint32_t *bits, float *count)
{
    extern __shared__ float sm[];
    const int j0 = blockIdx.x % groups * nj, mj = min(nj, n - j0), b0 = blockIdx.x / groups * SPB;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, words = (n + 31) / 32, lj = lane < mj ? lane : 0;
    float *vs = sm, *state = vs + (size_t)n * nj;
    uint32_t *sbits = (uint32_t *)(state + SPB * NJ);
    uint16_t *list = (uint16_t *)(sbits + SPB * words) + (size_t)warp * n;
    for (int64_t q = threadIdx.x; q < (int64_t)n * mj; q += blockDim.x) /* along V's rows: coalesced */
        vs[q % n * nj + q / n] = sf_widen(v[(int64_t)(j0 + q / n) * n + q % n]);
    for (int q = threadIdx.x; q < SPB * NJ; q += blockDim.x) state[q] = k.v0;
    cg::grid_group grid = cg::this_grid();
    __syncthreads();
    float spikes = 0.0f;
    for (int t = 0; t < T; t++) {
        float xq[SPW];
#pragma unroll
        for (int u = 0; u < SPW; u++) {
            const int bl = warp + u * WARPS;
            xq[u] = lane < mj && b0 + bl < B ? sf_widen(x[((int64_t)t * B + b0 + bl) * n + j0 + lane]) : 0.0f;
        }
        if (t > 0) {
            stage_bits(sbits, bits, t - 1, B, b0, words);
            __syncthreads();
        }
#pragma unroll
        for (int u = 0; u < SPW; u++) {
            const int bl = warp + u * WARPS;
            if (b0 + bl >= B) break; /* the same for the whole warp */
            int len = 0;
            if (t > 0) { /* lane l lists word w0 + l's inputs after the earlier lanes' */
                const uint32_t *row = sbits + bl * words;
                for (int w0 = 0; w0 < words; w0 += 32) {
                    uint32_t m = w0 + lane < words ? row[w0 + lane] : 0u;
                    int end = __popc(m);
                    for (int o = 1; o < 32; o <<= 1) {
                        const int e = __shfl_up_sync(0xffffffffu, end, o);
                        if (lane >= o) end += e;
                    }
                    for (int at = len + end - __popc(m); m; m &= m - 1u) /* as offsets into vs (< n·nj < 2^16) */
                        list[at++] = (uint16_t)(((w0 + lane) * 32 + __ffs(m) - 1) * nj);
                    len += __shfl_sync(0xffffffffu, end, 31);
                }
                __syncwarp();
            }
            float acc = 0.0f;
            int m = 0;
            for (; m + 8 <= len; m += 8) {
                float r[8];
#pragma unroll
                for (int e = 0; e < 8; e++) r[e] = vs[list[m + e] + lj];
#pragma unroll
                for (int e = 0; e < 8; e++) acc += r[e];
            }
            for (; m < len; m++) acc += vs[list[m] + lj];
            __syncwarp(); /* the list is rewritten for the warp's next sample */
            const int64_t r = (int64_t)t * B + b0 + bl, j = j0 + lane;
            float st = 0.0f;
            if (lane < mj) {
                float vv = state[bl * NJ + lane], h;
                st = sf_lif_step(&k, p.soft_reset, xq[u] + acc, &vv, &h);
                state[bl * NJ + lane] = vv;
                if (s) s[r * n + j] = sf_narrow<A>(st);
                if (hout) hout[r * n + j] = h;
            }
            const uint32_t fired = __ballot_sync(0xffffffffu, st != 0.0f); /* bit jj: neuron j0 + jj */
            if (lane == 0 && fired) {
                uint32_t *row = bits + r * words;
                atomicOr(row + j0 / 32, fired << (j0 & 31));
                if ((j0 & 31) + mj > 32) atomicOr(row + j0 / 32 + 1, fired >> (32 - (j0 & 31)));
                spikes += (float)__popc(fired);
            }
        }
        grid.sync(); /* the step's bits, read by every block at the next step; sbits is free again */
    }
    if (count) sf_cuda_add_count(count, spikes);
}

/* The dense forward: V·s_{t-1} for the block's samples and neurons j0.. by block_product over all n inputs (vt: V's
 * rows j0..; rows: s_{t-1} from the bits all blocks wrote at the step before, staged, made operand registers), then the
 * LIF step. Shared memory: vt [NJ][vt_row(n)], buf [SUMS], the samples' v [SPB·NJ], the staged bits [SPB][words]. */
template <class A>
__global__ void __launch_bounds__(THREADS)
    grid_dense_forward_kernel(sf_lif_params p, sf_lif_coeffs k, int T, int B, int n, int nj, int groups, const A *x,
                              const A *v, A *s, float *hout, uint32_t *bits, float *count)
{
    extern __shared__ float sm[];
    const int ld = vt_row(n), words = (n + 31) / 32;
    float *vt = sm, *buf = vt + (size_t)NJ * ld, *state = buf + SUMS;
    uint32_t *sbits = (uint32_t *)(state + SPB * NJ);
    const int j0 = blockIdx.x % groups * nj, mj = min(nj, n - j0), b0 = blockIdx.x / groups * SPB;
    for (int64_t q = threadIdx.x; q < (int64_t)NJ * ld; q += blockDim.x) { /* along V's rows: coalesced */
        const int jj = (int)(q / ld), i = (int)(q % ld);
        vt[q] = jj < mj && i < n ? sf_widen(v[(int64_t)(j0 + jj) * n + i]) : 0.0f;
    }
    for (int q = threadIdx.x; q < SPB * NJ; q += blockDim.x) state[q] = k.v0;
    cg::grid_group grid = cg::this_grid();
    float spikes = 0.0f;
    __syncthreads();
    for (int t = 0; t < T; t++) {
        float xq[PAIRS]; /* loaded now so that their latency hides behind the sums */
#pragma unroll
        for (int u = 0; u < PAIRS; u++) {
            const int q = threadIdx.x + u * THREADS, bl = q / NJ, jj = q % NJ;
            xq[u] = q < SPB * NJ && jj < mj && b0 + bl < B ? sf_widen(x[((int64_t)t * B + b0 + bl) * n + j0 + jj]) : 0.0f;
        }
        if (t > 0) {
            stage_bits(sbits, bits, t - 1, B, b0, words);
            __syncthreads();
            const int t4 = threadIdx.x & 3;
            const uint32_t *rows = sbits + ((threadIdx.x & 31) >> 2) * words; /* row g; row g + 8f 8f·words on */
            block_product<spike_frag>(vt, ld, buf, n, [&](int q, spike_frag &a) {
                const int j = 16 * q + 4 * t4; /* four inputs from one bits word (a multiple of 4) */
                uint32_t u[4];                 /* row g + 8f's four bits */
#pragma unroll
                for (int f = 0; f < 4; f++) u[f] = rows[8 * f * words + (j >> 5)] >> (j & 31);
#pragma unroll
                for (int m = 0; m < 2; m++)
#pragma unroll
                    for (int s = 0; s < 2; s++) {
                        a.a[m][s][0] = one_if(u[2 * m], 2 * s), a.a[m][s][1] = one_if(u[2 * m + 1], 2 * s);
                        a.a[m][s][2] = one_if(u[2 * m], 2 * s + 1), a.a[m][s][3] = one_if(u[2 * m + 1], 2 * s + 1);
                    }
            });
        }
#pragma unroll
        for (int u = 0; u < PAIRS; u++) {
            const int q = threadIdx.x + u * THREADS, bl = q / NJ, jj = q % NJ;
            if (q >= SPB * NJ || jj >= mj || b0 + bl >= B) continue;
            const int64_t r = (int64_t)t * B + b0 + bl, j = j0 + jj;
            float vv = state[q], h;
            const float st = sf_lif_step(&k, p.soft_reset, xq[u] + (t > 0 ? product_at(buf, bl, jj) : 0.0f), &vv, &h);
            state[q] = vv;
            if (s) s[r * n + j] = sf_narrow<A>(st);
            if (hout) hout[r * n + j] = h;
            if (st != 0.0f) {
                atomicOr(bits + r * words + j / 32, 1u << (j & 31));
                spikes += 1.0f;
            }
        }
        grid.sync(); /* the step's bits, read by every block at the next step; buf and sbits are free again */
    }
    if (count) sf_cuda_add_count(count, spikes);
}

sf_status sf_cuda_rlif_grid_forward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                    const void *x, const void *v, bool event_driven, const sf_lif_out *out, bool *ran)
{
    *ran = false;
    grid_split g;
    if (!split_of(c, B, n, &g) || T > INT32_MAX || n > INT32_MAX - 64 || (event_driven && n * g.nj > 65536))
        return SF_OK; /* the event-driven lists hold 16-bit offsets */
    const int64_t words = (n + 31) / 32;
    const size_t smem = event_driven ? ((size_t)(n * g.nj) + SPB * NJ + SPB * words) * 4 + (size_t)(WARPS * n) * 2
                                     : ((size_t)NJ * (size_t)vt_row((int)n) + SUMS + SPB * NJ + SPB * words) * 4;
    SF_CUDA_CHECK(cudaMemsetAsync(out->c.bits, 0, (size_t)(T * B * words) * 4, c->stream));
    SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
        using A = decltype(tag);
        const sf_lif_coeffs k = sf_lif_coeffs_of(p);
        int Ti = (int)T, Bi = (int)B, ni = (int)n, nji = (int)g.nj, gi = (int)g.groups;
        const A *xa = (const A *)x, *va = (const A *)v;
        A *sa = (A *)out->s;
        float *h = out->h, *cnt = out->spike_count;
        uint32_t *bits = out->c.bits;
        sf_lif_params pp = *p;
        void *args[] = {&pp, (void *)&k, &Ti, &Bi, &ni, &nji, &gi, &xa, &va, &sa, &h, &bits, &cnt};
        const void *kernel = event_driven ? (const void *)grid_forward_kernel<A> : (const void *)grid_dense_forward_kernel<A>;
        return launch_cooperative(c, kernel, (int)g.blocks, THREADS, smem, args, ran);
    }));
    return *ran ? compact_from_bits(c, out->c, T * B, n) : SF_OK;
}

/* ---------------------------------------------------------------- backward */

/* Shared memory: vt [NJ][vt_row(n)] (V[j][i0 + ii] at vt[ii·vt_row(n) + j]; zero past the block's neurons and in the
 * padding), buf (the warps' partial sums [SUMS]), dL/dv [SPB·NJ]. dy_{t+1}'s rows go from L2 straight into the
 * fragments. VEC: dx rows read four elements at a time (n a multiple of 4, dx aligned to four). */
template <class A, bool VEC>
__global__ void __launch_bounds__(THREADS)
    grid_backward_kernel(sf_lif_params p, sf_lif_coeffs k, int T, int B, int n, int nj, int groups, const float *h,
                         const A *v, const A *ds, A *dx, uint32_t *mbits, float *count)
{
    extern __shared__ float sm[];
    const int ld = vt_row(n);
    float *vt = sm, *buf = vt + (size_t)NJ * ld, *dvs = buf + SUMS;
    const int i0 = blockIdx.x % groups * nj, mi = min(nj, n - i0), b0 = blockIdx.x / groups * SPB;
    const int words = (n + 31) / 32, g = (threadIdx.x & 31) >> 2, t4 = threadIdx.x & 3;
    for (int64_t q = threadIdx.x; q < (int64_t)NJ * ld; q += blockDim.x) {
        const int ii = (int)(q / ld), j = (int)(q % ld);
        vt[q] = ii < mi && j < n ? sf_widen(v[(int64_t)j * n + i0 + ii]) : 0.0f;
    }
    for (int q = threadIdx.x; q < SPB * NJ; q += blockDim.x) dvs[q] = 0.0f;
    cg::grid_group grid = cg::this_grid();
    float nonzero = 0.0f;
    __syncthreads();
    for (int t = T - 1; t >= 0; t--) {
        /* this thread's neurons' h and ds of step t, loaded now so that their latency hides behind the sums */
        float hq[PAIRS], dsq[PAIRS];
#pragma unroll
        for (int u = 0; u < PAIRS; u++) {
            const int q = threadIdx.x + u * THREADS, bl = q / NJ, ii = q % NJ;
            const bool on = q < SPB * NJ && ii < mi && b0 + bl < B;
            const int64_t at = ((int64_t)t * B + b0 + bl) * n + i0 + ii;
            hq[u] = on ? h[at] : 0.0f;
            dsq[u] = on ? sf_widen(ds[at]) : 0.0f;
        }
        if (t < T - 1) { /* Vᵀ·dy_{t+1}: dy_{t+1}'s rows g + 8f (f < on) of the block's samples, from column 4t on */
            const A *row = dx + ((int64_t)(t + 1) * B + min(b0 + g, B - 1)) * n + 4 * t4;
            const int on = (B - b0 - g + 7) / 8;
            block_product<value_frag>(vt, ld, buf, n, [&](int q, value_frag &a) {
                const int j = 16 * q + 4 * t4;
#pragma unroll
                for (int f = 0; f < 4; f++) {
                    const A *at = row + f * 8 * n + 16 * q;
                    float4 d = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    if (f < on && j < n) {
                        if (VEC) {
                            d = load4(at);
                        } else {
                            d.x = sf_widen(__ldcg(at));
                            d.y = j + 1 < n ? sf_widen(__ldcg(at + 1)) : 0.0f;
                            d.z = j + 2 < n ? sf_widen(__ldcg(at + 2)) : 0.0f;
                            d.w = j + 3 < n ? sf_widen(__ldcg(at + 3)) : 0.0f;
                        }
                    }
                    a.a[f] = d;
                }
            });
        }
#pragma unroll
        for (int u = 0; u < PAIRS; u++) {
            const int q = threadIdx.x + u * THREADS, bl = q / NJ, ii = q % NJ, b = b0 + bl;
            bool nz = false;
            if (q < SPB * NJ && ii < mi && b < B) {
                const float g = t < T - 1 ? product_at(buf, bl, ii) : 0.0f;
                const int64_t r = (int64_t)t * B + b, i = i0 + ii;
                float d = dvs[q];
                const float dy = k.c * sf_lif_step_back(&p, &k, hq[u], dsq[u] + g, &d);
                dvs[q] = d;
                const A stored = sf_narrow<A>(dy);
                dx[r * n + i] = stored;
                nz = sf_widen(stored) != 0.0f;
                if (nz && mbits) atomicOr(mbits + r * words + i / 32, 1u << (i & 31));
            }
            nonzero += nz ? 1.0f : 0.0f;
        }
        grid.sync(); /* the step's dx, read by every block at the next step; buf is free again */
    }
    if (count) sf_cuda_add_count(count, nonzero);
}

sf_status sf_cuda_rlif_grid_backward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                     const float *h, const void *v, const void *ds, void *dx, const sf_spikes *mask,
                                     float *count, bool *ran)
{
    *ran = false;
    grid_split g;
    if (!split_of(c, B, n, &g) || T > INT32_MAX || n > INT32_MAX - 64) return SF_OK;
    const size_t smem = ((size_t)NJ * (size_t)vt_row((int)n) + SUMS + SPB * NJ) * 4;
    uint32_t *mbits = mask ? mask->bits : NULL;
    if (mbits) SF_CUDA_CHECK(cudaMemsetAsync(mbits, 0, (size_t)(T * B * ((n + 31) / 32)) * 4, c->stream));
    SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
        using A = decltype(tag);
        const sf_lif_coeffs k = sf_lif_coeffs_of(p);
        sf_lif_params pp = *p;
        int Ti = (int)T, Bi = (int)B, nn = (int)n, nji = (int)g.nj, gi = (int)g.groups;
        const bool vec = n % 4 == 0 && (uintptr_t)dx % (4 * sizeof(A)) == 0;
        const A *va = (const A *)v, *da = (const A *)ds;
        A *xa = (A *)dx;
        void *args[] = {&pp, (void *)&k, &Ti, &Bi, &nn, &nji, &gi, &h, &va, &da, &xa, &mbits, &count};
        const void *kernel =
            vec ? (const void *)grid_backward_kernel<A, true> : (const void *)grid_backward_kernel<A, false>;
        return launch_cooperative(c, kernel, (int)g.blocks, THREADS, smem, args, ran);
    }));
    if (!*ran || !mbits) return SF_OK;
    return compact_from_bits(c, sf_spikes{mask->bits, NULL, mask->cnt}, T * B, n);
}
