/* op_cases.c — the case table of the backend op harness (op_harness.h): one row per shape of a family, with the
 * precisions it runs in, its flags and its option sweep. Shapes are awkward on purpose: odd sizes, T = 1, B = 1, one
 * channel, one neuron; the rows marked OP_GPU_SHAPE take a path of the CUDA kernels (chunks, padding, grid limits)
 * and are too large to be worth the CPU runner's time. A new op gets rows here (and its family in op_neuron.c or
 * op_layers.c). */
#include "op_harness.h"

extern const op_family op_memory, op_lif, op_lif_compact, op_lif_masked, op_bn, op_bn_merge, op_bn_lif, op_rlif,
    op_linear, op_binary_linear, op_conv, op_conv_lean, op_conv_choices, op_pool, op_dropout, op_elementwise,
    op_connect, op_check_finite, op_readout, op_optim, op_convert, op_spikes, op_spike_linear, op_graph, op_layernorm,
    op_ssa, op_token, op_transpose;

/* A LIF over [T, N] (N = n: B = 1) with `var` variants of the option sweep, and a neuron over [T, B, C, hw] with the
 * state carried in and out over all 32. */
#define LIF(T_, N_, var, ...)                                                                                          \
    {                                                                                                                  \
        .f = &op_lif, .prec = OP_ACT, .variants = var, .T = T_, .B = 1, .n = N_, __VA_ARGS__                           \
    }
#define NEURON(m, pc, T_, B_, C_, hw_)                                                                                 \
    {                                                                                                                  \
        .f = &op_lif, .prec = OP_ACT, .variants = 32, .T = T_, .B = B_, .C = C_, .hw = hw_, .model = m,                \
        .per_channel = pc, .state = 1                                                                                  \
    }
/* A fused BN→neuron over [T, B, C, hw]: variants sweep h kept, the planned scratch, then the options (op_neuron.c). */
#define BN_LIF(T_, B_, C_, hw_, var, ...)                                                                              \
    {                                                                                                                  \
        .f = &op_bn_lif, .prec = OP_ACT, .variants = var, .T = T_, .B = B_, .C = C_, .hw = hw_, __VA_ARGS__            \
    }
#define BN_NEURON(m, pc, T_, B_, C_, hw_)                                                                              \
    {                                                                                                                  \
        .f = &op_bn_lif, .prec = OP_ACT, .variants = 16, .T = T_, .B = B_, .C = C_, .hw = hw_, .model = m,             \
        .per_channel = pc                                                                                              \
    }
/* A convolution on every conv path (fl: OP_CONV_PATHS), or of spikes (fl: OP_SPIKE_X: the default paths and the
 * split one). */
#define CONV(n_, cin, h_, w_, co, k_, s_, p_, b_, fl)                                                                  \
    {                                                                                                                  \
        .f = &op_conv, .prec = OP_ALL, .flags = fl, .n = n_, .C = cin, .h = h_, .w = w_, .cout = co, .k = k_,          \
        .stride = s_, .pad = p_, .bias = b_                                                                            \
    }
/* conv_lean's choices on a convolution of that shape. */
#define CONV_LEAN(n_, cin, h_, w_, co, k_, s_, p_, b_)                                                                 \
    {                                                                                                                  \
        .f = &op_conv_lean, .prec = OP_ALL, .n = n_, .C = cin, .h = h_, .w = w_, .cout = co, .k = k_, .stride = s_,    \
        .pad = p_, .bias = b_                                                                                          \
    }
/* conv_choices of a convolution of that shape given back by conv_set_choice (fl: OP_SPIKE_X, the split path). */
#define CONV_CHOICES(n_, cin, h_, w_, co, k_, s_, p_, b_, fl)                                                          \
    {                                                                                                                  \
        .f = &op_conv_choices, .prec = OP_ALL, .flags = fl, .n = n_, .C = cin, .h = h_, .w = w_, .cout = co, .k = k_,  \
        .stride = s_, .pad = p_, .bias = b_                                                                            \
    }
/* Spike inputs at every density of op_density. */
#define COMPACT(m, T_, B_, n_)                                                                                         \
    {                                                                                                                  \
        .f = &op_lif_compact, .prec = OP_ACT, .variants = OP_DENSITIES, .T = T_, .B = B_, .n = n_, .model = m          \
    }
#define SPIKES(rows_, n_)                                                                                              \
    {                                                                                                                  \
        .f = &op_spikes, .prec = OP_ACT, .variants = OP_DENSITIES, .rows = rows_, .n = n_                              \
    }
#define SPIKE_LINEAR(r, i, o, ...)                                                                                     \
    {                                                                                                                  \
        .f = &op_spike_linear, .prec = OP_ACT, .variants = OP_DENSITIES, .rows = r, .in = i, .out = o, __VA_ARGS__     \
    }
/* The masked LIF backward in each θ_grad mode. */
#define MASKED(m, T_, B_, n_, ...)                                                                                     \
    {                                                                                                                  \
        .f = &op_lif_masked, .prec = OP_ACT, .variants = 3, .T = T_, .B = B_, .n = n_, .model = m, __VA_ARGS__         \
    }
#define RLIF(T_, B_, n_, g, ...)                                                                                       \
    {                                                                                                                  \
        .f = &op_rlif, .prec = OP_ACT, .variants = 2, .T = T_, .B = B_, .n = n_, .grad = g, __VA_ARGS__                \
    }
#define POOL(n_, h_, w_, k_, s_, p_, ...)                                                                              \
    {                                                                                                                  \
        .f = &op_pool, .prec = OP_ACT, .n = n_, .h = h_, .w = w_, .k = k_, .stride = s_, .pad = p_, __VA_ARGS__        \
    }
#define BINARY(r, i, o, b, ...)                                                                                        \
    {                                                                                                                  \
        .f = &op_binary_linear, .prec = OP_ALL, .rows = r, .in = i, .out = o, .bias = b, __VA_ARGS__                   \
    }

const op_case op_cases[] = {
    /* memory */
    {.f = &op_memory, .prec = OP_ALL, .n = 4099},
    {.f = &op_memory, .prec = OP_ALL, .n = 1},
    {.f = &op_memory, .prec = OP_ALL, .n = 1 << 20},

    /* the time-fused neuron: the LIF over every option, then the other models with the state carried */
    LIF(1, 1, 32, .tol = 1e-4),
    LIF(5, 333, 32, .tol = 1e-4),
    LIF(16, 4096, 32, .tol = 1e-4),
    LIF(70, 129, 32, .tol = 1e-4),
    LIF(7, 1001, 32, .state = 1),
    LIF(200, 515, 32, .state = 1), /* segmented recompute with checkpoints */
    LIF(300, 97, 4, .state = 1),   /* segments that end at T, a short first one */
    NEURON(SF_NEURON_PLIF, 0, 1, 3, 5, 7),
    NEURON(SF_NEURON_PLIF, 0, 7, 2, 3, 37),
    NEURON(SF_NEURON_PLIF, 0, 9, 1, 4, 1),
    NEURON(SF_NEURON_PLIF, 0, 200, 2, 3, 17),
    NEURON(SF_NEURON_PLIF, 1, 1, 3, 5, 7),
    NEURON(SF_NEURON_PLIF, 1, 7, 2, 3, 37),
    NEURON(SF_NEURON_PLIF, 1, 9, 1, 4, 1),
    NEURON(SF_NEURON_PLIF, 1, 200, 2, 3, 17),
    NEURON(SF_NEURON_IF, 0, 1, 3, 5, 7),
    NEURON(SF_NEURON_IF, 0, 7, 2, 3, 37),
    NEURON(SF_NEURON_IF, 0, 9, 1, 4, 1),
    NEURON(SF_NEURON_IF, 0, 200, 2, 3, 17),
    NEURON(SF_NEURON_ALIF, 0, 1, 3, 5, 7),
    NEURON(SF_NEURON_ALIF, 0, 7, 2, 3, 37),
    NEURON(SF_NEURON_ALIF, 0, 9, 1, 4, 1),
    NEURON(SF_NEURON_ALIF, 0, 200, 2, 3, 17),

    /* its compact output, the compaction itself, its masked backward */
    COMPACT(SF_NEURON_LIF, 4, 3, 1000),
    COMPACT(SF_NEURON_LIF, 1, 1, 7),
    COMPACT(SF_NEURON_LIF, 5, 2, 64),
    COMPACT(SF_NEURON_LIF, 3, 4, 300),
    COMPACT(SF_NEURON_LIF, 2, 1, 513),
    COMPACT(SF_NEURON_LIF, 3, 2, 512),
    COMPACT(SF_NEURON_LIF, 100, 2, 1472),
    COMPACT(SF_NEURON_PLIF, 4, 3, 1000),
    COMPACT(SF_NEURON_PLIF, 2, 1, 513),
    COMPACT(SF_NEURON_IF, 4, 3, 1000),
    COMPACT(SF_NEURON_IF, 1, 1, 7),
    COMPACT(SF_NEURON_ALIF, 3, 4, 300),
    COMPACT(SF_NEURON_ALIF, 3, 2, 512),
    {.f = &op_lif_compact, .prec = OP_ACT, .T = 5, .B = 3, .n = 300, .density = 0.3, .state = 1},
    {.f = &op_lif_compact, .prec = OP_ACT, .T = 1, .B = 1, .n = 7, .density = 0.3, .state = 1},
    SPIKES(12, 1000),
    SPIKES(1, 7),
    SPIKES(10, 64),
    SPIKES(12, 300),
    SPIKES(2, 513),
    SPIKES(6, 512),
    SPIKES(200, 1472),
    SPIKES(3, 33),
    MASKED(SF_NEURON_LIF, 4, 3, 1000),
    MASKED(SF_NEURON_LIF, 1, 1, 7),
    MASKED(SF_NEURON_LIF, 20, 2, 300),
    MASKED(SF_NEURON_LIF, 3, 2, 512),
    MASKED(SF_NEURON_LIF, 5, 3, 300, .state = 1),
    MASKED(SF_NEURON_LIF, 1, 1, 7, .state = 1),
    MASKED(SF_NEURON_PLIF, 3, 4, 300),
    MASKED(SF_NEURON_PLIF, 2, 1, 513),
    MASKED(SF_NEURON_IF, 3, 4, 300),
    MASKED(SF_NEURON_IF, 2, 1, 513, .state = 1),
    MASKED(SF_NEURON_ALIF, 3, 4, 300),
    MASKED(SF_NEURON_ALIF, 2, 1, 513, .state = 1),

    /* batch norm: one value, odd sizes, hw = 1 with C % 4 == 0 (4 channels per thread over the rows) */
    {.f = &op_bn, .prec = OP_ACT, .rows = 1, .C = 1, .hw = 1},
    {.f = &op_bn, .prec = OP_ACT, .rows = 6, .C = 5, .hw = 7},
    {.f = &op_bn, .prec = OP_ACT, .rows = 8, .C = 5, .hw = 7},
    {.f = &op_bn, .prec = OP_ACT, .rows = 40, .C = 16, .hw = 64},
    {.f = &op_bn, .prec = OP_ACT, .rows = 30, .C = 33, .hw = 1},
    {.f = &op_bn, .prec = OP_ACT, .rows = 50, .C = 64, .hw = 1},
    {.f = &op_bn, .prec = OP_ACT, .rows = 7, .C = 12, .hw = 1},
    {.f = &op_bn_merge, .prec = OP_FP32, .parts = 3, .rows = 4, .C = 6, .hw = 12},
    {.f = &op_bn_merge, .prec = OP_FP32, .parts = 2, .rows = 1, .C = 1, .hw = 5},

    /* fused BN→neuron: T = 1 and T = rows of the BN shapes, the state carried with the backward in one call and in
     * two phases (of one process, and of three), every model */
    BN_LIF(1, 1, 1, 1, 8),
    BN_LIF(1, 6, 5, 7, 8),
    BN_LIF(6, 1, 5, 7, 8),
    BN_LIF(4, 2, 5, 7, 8),
    BN_LIF(1, 40, 16, 64, 8),
    BN_LIF(40, 1, 16, 64, 8),
    BN_LIF(4, 10, 16, 64, 8),
    BN_LIF(1, 30, 33, 1, 8),
    BN_LIF(30, 1, 33, 1, 8),
    BN_LIF(1, 50, 64, 1, 8),
    BN_LIF(50, 1, 64, 1, 8),
    BN_LIF(7, 1, 12, 1, 8),
    BN_LIF(100, 2, 3, 20, 4, .state = 1),
    BN_LIF(100, 2, 3, 20, 4, .state = 1, .parts = 1),
    BN_LIF(6, 3, 6, 12, 2, .state = 1, .parts = 3),
    BN_LIF(70, 3, 6, 12, 2, .state = 1, .parts = 3),
    BN_LIF(300, 3, 6, 12, 2, .state = 1, .parts = 3), /* several recompute segments, a short first one */
    BN_NEURON(SF_NEURON_PLIF, 0, 1, 3, 5, 7),
    BN_NEURON(SF_NEURON_PLIF, 0, 7, 2, 3, 37),
    BN_NEURON(SF_NEURON_PLIF, 0, 9, 1, 4, 1),
    BN_NEURON(SF_NEURON_PLIF, 0, 200, 2, 3, 17),
    BN_NEURON(SF_NEURON_PLIF, 1, 1, 3, 5, 7),
    BN_NEURON(SF_NEURON_PLIF, 1, 7, 2, 3, 37),
    BN_NEURON(SF_NEURON_PLIF, 1, 9, 1, 4, 1),
    BN_NEURON(SF_NEURON_PLIF, 1, 200, 2, 3, 17),
    BN_NEURON(SF_NEURON_IF, 0, 1, 3, 5, 7),
    BN_NEURON(SF_NEURON_IF, 0, 7, 2, 3, 37),
    BN_NEURON(SF_NEURON_IF, 0, 9, 1, 4, 1),
    BN_NEURON(SF_NEURON_IF, 0, 200, 2, 3, 17),
    BN_NEURON(SF_NEURON_ALIF, 0, 1, 3, 5, 7),
    BN_NEURON(SF_NEURON_ALIF, 0, 7, 2, 3, 37),
    BN_NEURON(SF_NEURON_ALIF, 0, 9, 1, 4, 1),
    BN_NEURON(SF_NEURON_ALIF, 0, 200, 2, 3, 17),

    /* the recurrent layer: W4's layer (one block per SM in the grid-wide kernels), three groups of samples with the
     * last one partial (rows of dx not 8-aligned), more neurons than the persistent kernel holds (the dense loop) */
    RLIF(6, 3, 40, 0),
    RLIF(6, 3, 40, 2),
    RLIF(1, 1, 9, 0),
    RLIF(1, 1, 9, 2),
    RLIF(9, 2, 300, 1),
    RLIF(20, 4, 1472, 2, .flags = OP_GPU_SHAPE),
    RLIF(7, 70, 301, 2, .flags = OP_GPU_SHAPE),
    RLIF(5, 33, 1000, 1, .flags = OP_GPU_SHAPE),
    RLIF(12, 64, 1472, 0, .flags = OP_GPU_SHAPE),
    RLIF(3, 2, 8300, 0, .flags = OP_GPU_SHAPE),

    /* linear: odd sizes, one row, a readout-sized output without dx */
    {.f = &op_linear, .prec = OP_ALL, .rows = 37, .in = 33, .out = 17, .bias = 1, .want_dx = 1},
    {.f = &op_linear, .prec = OP_ALL, .rows = 1, .in = 1, .out = 1, .bias = 0, .want_dx = 1},
    {.f = &op_linear, .prec = OP_ALL, .rows = 640, .in = 512, .out = 10, .bias = 1, .want_dx = 0},
    /* of 0/1 inputs, each path of binary_linear.cu */
    BINARY(64, 700, 1472, 1), /* W4's first layer: in padded to 704, dW copied out of scratch */
    BINARY(7, 33, 5, 0),      /* SGEMMs backward, TF32 parts forward */
    BINARY(1, 1, 1, 1),
    BINARY(50, 61, 300, 1),                             /* dW by bf16 parts, dx by SGEMM */
    BINARY(3, 2100, 2003, 1, .flags = OP_GPU_SHAPE),    /* out padded to 2008 in dx's segments */
    BINARY(3, 9000, 500, 1, .flags = OP_GPU_SHAPE),     /* the forward's TF32 parts in two chunks of W's rows */
    BINARY(6000, 3, 4000, 0, .flags = OP_GPU_SHAPE),    /* the backward's dy parts in three chunks of rows */
    BINARY(23000, 1000, 512, 1, .flags = OP_GPU_SHAPE), /* the forward's copies of x in two chunks of rows */
    BINARY(2, 2400, 2400, 1, .flags = OP_GPU_SHAPE),    /* W's parts too large for the backward's room: dx by SGEMM */
    /* event-driven */
    SPIKE_LINEAR(37, 300, 65),
    SPIKE_LINEAR(1, 1, 1),
    SPIKE_LINEAR(12, 513, 17),
    SPIKE_LINEAR(64, 96, 130),
    SPIKE_LINEAR(5, 33, 2100),
    SPIKE_LINEAR(640, 700, 1472, .flags = OP_GPU_SHAPE),

    /* conv: odd sizes, one image, strided with and without padding; one that the im2col + GEMM path runs in chunks
     * of 9, 9, 9, 8 images under a 1 MiB workspace cap; each again on spikes */
    CONV(3, 3, 9, 7, 5, 3, 1, 1, 1, OP_CONV_PATHS),
    CONV(2, 4, 8, 8, 6, 3, 2, 1, 0, OP_CONV_PATHS),
    CONV(1, 5, 5, 5, 3, 1, 1, 0, 1, OP_CONV_PATHS),
    CONV(20, 16, 16, 16, 32, 3, 1, 1, 0, OP_CONV_PATHS),
    CONV(7, 5, 13, 11, 9, 3, 2, 1, 1, OP_CONV_PATHS),
    CONV(5, 3, 10, 9, 4, 3, 2, 0, 0, OP_CONV_PATHS),
    CONV(3, 6, 9, 9, 8, 5, 3, 2, 1, OP_CONV_PATHS),
    CONV(35, 32, 15, 15, 64, 3, 2, 1, 1, OP_CONV_PATHS),
    CONV(3, 3, 9, 7, 5, 3, 1, 1, 1, OP_SPIKE_X),
    CONV(2, 4, 8, 8, 6, 3, 2, 1, 0, OP_SPIKE_X),
    CONV(1, 5, 5, 5, 3, 1, 1, 0, 1, OP_SPIKE_X),
    CONV(20, 16, 16, 16, 32, 3, 1, 1, 0, OP_SPIKE_X),
    CONV(7, 5, 13, 11, 9, 3, 2, 1, 1, OP_SPIKE_X),
    CONV(5, 3, 10, 9, 4, 3, 2, 0, 0, OP_SPIKE_X),
    CONV(3, 6, 9, 9, 8, 5, 3, 2, 1, OP_SPIKE_X),
    CONV(35, 32, 15, 15, 64, 3, 2, 1, 1, OP_SPIKE_X),
    CONV_LEAN(64, 32, 16, 16, 64, 3, 1, 1, 1), /* a shape of its own: the leaner choices it takes stay */
    CONV_CHOICES(6, 5, 11, 9, 7, 3, 1, 1, 1, 0),
    CONV_CHOICES(6, 5, 11, 9, 7, 3, 2, 1, 0, OP_SPIKE_X),

    /* pools: windows that tile the plane (the tiled kernels), overlapping ones, SpikingJelly's ResNet stem (a border
     * of -inf for max, of counted zeros for avg), global average pools (ImageNet's 7x7, a 26x26 plane: avg only) */
    POOL(7, 9, 9, 2, 2, 0),
    POOL(9, 28, 28, 2, 2, 0),
    POOL(5, 28, 28, 2, 2, 0),
    POOL(4, 12, 6, 3, 3, 0),
    POOL(3, 4, 8, 4, 4, 0),
    POOL(3, 9, 9, 3, 2, 0),
    POOL(1, 5, 6, 3, 1, 0),
    POOL(6, 16, 16, 3, 2, 1),
    POOL(3, 9, 9, 3, 2, 1),
    POOL(5, 7, 6, 3, 2, 1),
    POOL(2, 5, 4, 2, 1, 1),
    POOL(64, 7, 7, 7, 7, 0),
    POOL(6, 26, 26, 26, 26, 0),
    /* NHWC: 4 channels a thread where C allows (48: the SPS stem's first), 1 where not */
    POOL(2 * 48, 16, 16, 3, 2, 1, .C = 48),
    POOL(3 * 8, 9, 7, 3, 2, 1, .C = 8),
    POOL(2 * 3, 9, 9, 3, 2, 1, .C = 3),
    POOL(5 * 4, 12, 12, 2, 2, 0, .C = 4),
    POOL(2 * 6, 7, 6, 3, 1, 1, .C = 6),
    POOL(3 * 64, 7, 7, 7, 7, 0, .C = 64),
    POOL(2 * 5, 26, 26, 26, 26, 0, .C = 5),

    /* spiking transformers: LayerNorm (a Spikformer-8-384 block's D, one channel, odd sizes); the SSA as W10's
     * blocks (N 196 and 64 tokens, D 384 in 12 heads: 32 channels a head), a set of one token of one channel, odd
     * sizes, dense spikes, more tokens than the 16-bit exact count (n > 256); the token products and the transpose
     * of the SPS stem's planes, odd sizes */
    {.f = &op_layernorm, .prec = OP_ACT, .variants = 2, .rows = 37, .C = 384},
    {.f = &op_layernorm, .prec = OP_ACT, .variants = 2, .rows = 5, .C = 1},
    {.f = &op_layernorm, .prec = OP_ACT, .variants = 2, .rows = 130, .C = 33},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 4, .n = 64, .C = 384, .k = 12},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 1, .n = 1, .C = 1, .k = 1},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 3, .n = 7, .C = 9, .k = 3},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 2, .n = 33, .C = 16, .k = 1, .density = 0.9},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 8, .n = 196, .C = 384, .k = 12, .flags = OP_GPU_SHAPE},
    {.f = &op_ssa, .prec = OP_ALL, .variants = 2, .B = 2, .n = 300, .C = 64, .k = 2, .density = 0.95,
     .flags = OP_GPU_SHAPE},
    {.f = &op_token, .prec = OP_ACT, .B = 6, .n = 5, .C = 12},
    {.f = &op_token, .prec = OP_ACT, .B = 1, .n = 1, .C = 1},
    {.f = &op_token, .prec = OP_ACT, .B = 3, .n = 31, .C = 70},
    {.f = &op_token, .prec = OP_ACT, .B = 8, .n = 196, .C = 512, .flags = OP_GPU_SHAPE},
    {.f = &op_transpose, .prec = OP_ACT, .B = 3, .n = 64, .C = 48},
    {.f = &op_transpose, .prec = OP_ACT, .B = 1, .n = 1, .C = 1},
    {.f = &op_transpose, .prec = OP_ACT, .B = 2, .n = 37, .C = 5},
    {.f = &op_transpose, .prec = OP_ACT, .B = 4, .n = 196, .C = 384, .flags = OP_GPU_SHAPE},

    /* element-wise, readout, loss, optimizer, storage */
    {.f = &op_dropout, .prec = OP_ACT, .T = 3, .n = 1001},
    {.f = &op_dropout, .prec = OP_ACT, .T = 1, .n = 1},
    {.f = &op_elementwise, .prec = OP_ACT, .n = 3003},
    {.f = &op_elementwise, .prec = OP_ACT, .n = 1},
    {.f = &op_connect, .prec = OP_ACT, .variants = 2, .n = 3003},
    {.f = &op_connect, .prec = OP_ACT, .variants = 2, .n = 1},
    {.f = &op_check_finite, .prec = OP_ALL, .n = 3003},
    {.f = &op_readout, .prec = OP_ACT, .variants = 5, .T = 4, .B = 5, .n = 10},
    {.f = &op_readout, .prec = OP_ACT, .variants = 5, .T = 1, .B = 1, .n = 3},
    {.f = &op_readout, .prec = OP_ACT, .variants = 5, .T = 10, .B = 64, .n = 10},
    {.f = &op_readout, .prec = OP_ACT, .variants = 5, .T = 4, .B = 33, .n = 10},
    {.f = &op_optim, .prec = OP_FP32, .variants = 4, .n = 1001},
    {.f = &op_convert, .prec = OP_16BIT, .n = 4096},
    {.f = &op_graph, .prec = OP_ACT, .n = 1001},
};

const size_t op_case_count = sizeof op_cases / sizeof op_cases[0];
