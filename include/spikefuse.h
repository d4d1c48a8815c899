/* spikefuse.h — the public API of libspikefuse: BPTT training of spiking networks, time-fused neurons, CPU and CUDA.
 * A call that can fail returns sf_status, and sf_last_error() then holds this thread's message. Handles are opaque;
 * each *_create has a *_free, which takes NULL. Tensors are contiguous float32, time-major: [T, B, C, H, W] or
 * [T, B, N]. Pointers passed in are borrowed (none is kept after the call unless noted). The library never exits the
 * process and never writes to stdout. */
#ifndef SPIKEFUSE_H
#define SPIKEFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the shared library exports; everything else in it is built hidden (-fvisibility=hidden). */
#if defined(_WIN32)
#define SF_API __declspec(dllexport)
#else
#define SF_API __attribute__((visibility("default")))
#endif

#define SF_VERSION_MAJOR 0
#define SF_VERSION_MINOR 1
#define SF_VERSION_PATCH 0
SF_API const char *sf_version(void);

/* ---------------------------------------------------------------- status */
typedef enum sf_status {
    SF_OK = 0,
    SF_ERR_INVALID,     /* an argument, shape or configuration is not acceptable */
    SF_ERR_NOMEM,       /* a host or device allocation failed */
    SF_ERR_IO,          /* a file could not be opened, read or written */
    SF_ERR_FORMAT,      /* a file's content is malformed or inconsistent */
    SF_ERR_UNSUPPORTED, /* the feature is not built in or not available on this device */
    SF_ERR_DEVICE,      /* a CUDA, cuBLAS or cuDNN call failed */
    SF_ERR_NUMERIC,     /* a NaN or Inf appeared in a loss or gradient */
    SF_ERR_STATE        /* the call is not valid in the object's current state */
} sf_status;

SF_API const char *sf_status_str(sf_status s);
/* The message of the last failure on the calling thread ("" if none). Valid until the next failing call. */
SF_API const char *sf_last_error(void);

/* For callers' own sf_status functions: sf_fail sets this thread's message (printf format) and returns `status`;
 * sf_fail_context prefixes the current message with context ("loading x.safetensors: ") and returns `status`. */
#if defined(__GNUC__)
#define SF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SF_PRINTF(a, b)
#endif
SF_API sf_status sf_fail(sf_status status, const char *fmt, ...) SF_PRINTF(2, 3);
SF_API sf_status sf_fail_context(sf_status status, const char *fmt, ...) SF_PRINTF(2, 3);
/* Propagates a failure from an expression returning sf_status. */
#define SF_TRY(expr)                                                                                                   \
    do {                                                                                                               \
        sf_status sf_try_status_ = (expr);                                                                             \
        if (sf_try_status_ != SF_OK) return sf_try_status_;                                                            \
    } while (0)

/* ---------------------------------------------------------------- devices */
typedef enum sf_device_kind { SF_DEVICE_CPU = 0, SF_DEVICE_CUDA = 1 } sf_device_kind;
typedef struct sf_device {
    sf_device_kind kind;
    int32_t index; /* CUDA ordinal; 0 for the CPU */
} sf_device;

/* Parses "cpu", "cuda" or "cuda:N". */
SF_API sf_status sf_device_parse(const char *text, sf_device *out);
/* Number of usable CUDA devices (0 when built without CUDA or when no GPU is present). */
SF_API int32_t sf_cuda_device_count(void);
/* SF_OK when this build has kernels for CUDA device `device`'s compute capability; else (or without CUDA)
 * SF_ERR_UNSUPPORTED naming the device, its compute capability and the cmake command that builds for it. */
SF_API sf_status sf_cuda_arch_check(int32_t device);
/* Host memory for a net's batches: page-locked on a CUDA device (full-speed uploads), else or failing that malloc's.
 * NULL when out of memory. Free with sf_host_free on the same device. */
SF_API void *sf_host_alloc(sf_device device, size_t bytes);
SF_API void sf_host_free(sf_device device, void *p);
/* Sets the number of OpenMP threads the CPU backend uses (<= 0: the OpenMP default). */
SF_API void sf_set_num_threads(int32_t n);
SF_API int32_t sf_get_num_threads(void);
/* One line on this build (a per-thread static buffer): OpenMP threads, the BLAS, CUDA's runtime, cuBLAS and cuDNN
 * versions and device count, or that CUDA is not built in. */
SF_API const char *sf_build_info(void);

/* ---------------------------------------------------------------- LIF neuron
 * Per neuron, for t = 1..T, with input current x_t:
 *   h_t = a·v_{t-1} + c·x_t        a = 1 - 1/tau (or `decay`), c = (1 - a) if decay_input else 1
 *   s_t = Θ(h_t - v_threshold)     Θ(z) = 1 if z >= 0 else 0
 *   v_t = h_t·(1 - s_t) + v_reset·s_t   (hard reset)   or   v_t = h_t - v_threshold·s_t   (soft reset)
 * v_0 = v_reset (hard) or 0 (soft). The surrogate ∂s/∂h with z = h - v_threshold is
 *   sigmoid       alpha·σ(alpha·z)·(1 - σ(alpha·z))
 *   atan          (alpha/2) / (1 + (π/2·alpha·z)²)
 *   fast_sigmoid  1 / (alpha·|z| + 1)²
 *   rect          alpha if |z| < 1/(2·alpha) else 0
 * and is 0 where h < grad_threshold when use_grad_threshold is set; with grad_cut, dL/dh is 0 there as well. */
typedef enum sf_surrogate {
    SF_SURROGATE_SIGMOID = 0,
    SF_SURROGATE_ATAN,
    SF_SURROGATE_FAST_SIGMOID,
    SF_SURROGATE_RECT
} sf_surrogate;

/* The neuron models (sf_lif_params.model). All share the surrogates, resets, detach_reset and θ_grad above.
 *   lif   the LIF above
 *   plif  parametric LIF (Fang et al. 2021): a = 1 - k, c = k (decay_input) or 1, k = sigmoid(w), w learned (one per
 *         layer, or per channel with per_channel), starting at -ln(tau - 1) so k = 1/tau (tau > 1; no decay)
 *   if    integrate-and-fire: a = 1, c = 1 (tau, decay and decay_input do not apply)
 *   alif  adaptive-threshold LIF (Bellec et al. 2018): a and c as the LIF's, s_t = Θ(h_t - θ_t) with
 *             θ_t = v_threshold + beta·b_t,   b_t = rho·b_{t-1} + (1 - rho)·s_{t-1},   b_0 = 0;
 *         the surrogate at z = h_t - θ_t, the soft reset subtracts θ_t, gradients flow through b (BPTT). */
typedef enum sf_neuron_model { SF_NEURON_LIF = 0, SF_NEURON_PLIF, SF_NEURON_IF, SF_NEURON_ALIF } sf_neuron_model;
SF_API const char *sf_neuron_model_name(sf_neuron_model m); /* "lif", "plif", "if", "alif" */

typedef struct sf_lif_params {
    float tau;                  /* membrane time constant (> 1 with decay_input, >= 1 without; PLIF: > 1, the start
                                 * value); default 2 */
    float decay;                /* if > 0, a = decay directly and tau is ignored; default 0 (use tau) */
    int32_t decay_input;        /* default 1 */
    float v_threshold;          /* default 1 */
    float v_reset;              /* hard-reset value; default 0 */
    int32_t soft_reset;         /* 1: subtract the threshold instead of resetting to v_reset; default 0 */
    int32_t detach_reset;       /* 1: the reset path carries no gradient; default 0 */
    sf_surrogate surrogate;     /* default sigmoid */
    float alpha;                /* surrogate sharpness; default 4 (sigmoid) */
    int32_t use_grad_threshold; /* default 0 */
    float grad_threshold;       /* θ_grad, used when use_grad_threshold is set */
    int32_t grad_cut;           /* with use_grad_threshold: dL/dh is 0 where h < grad_threshold too (Perez-Nieves &
                                 * Goodman's sparse gradient), so the backward is sparse; default 0 */
    sf_neuron_model model;      /* default lif */
    int32_t per_channel;        /* PLIF: one w per channel instead of one per layer; default 0 */
    float rho;                  /* ALIF: the decay of b, in [0, 1); default 0.95 */
    float tau_adapt;            /* ALIF: if > 0, rho = exp(-1/tau_adapt) and rho is ignored; default 0 (use rho) */
    float beta;                 /* ALIF: the threshold's rise per unit of b, >= 0; default 1.8 (Bellec et al.) */
} sf_lif_params;

/* The defaults: the LIF, tau=2, decay_input, θ=1, hard reset to 0, sigmoid alpha=4 (the ALIF's as above). */
SF_API void sf_lif_default_params(sf_lif_params *p);
/* The default alpha of each surrogate (sigmoid 4, atan 2, fast_sigmoid 10, rect 1). */
SF_API float sf_surrogate_default_alpha(sf_surrogate s);
/* Checks ranges; SF_ERR_INVALID with a message naming the field otherwise. */
SF_API sf_status sf_lif_params_check(const sf_lif_params *p);
/* Parses "sigmoid", "atan", "fast_sigmoid", "rect". */
SF_API sf_status sf_surrogate_parse(const char *name, sf_surrogate *out);
SF_API const char *sf_surrogate_name(sf_surrogate s);

/* Sets tau or decay, decay_input, v_threshold, v_reset and the hard reset of *p (its other fields kept) so that it
 * computes the forward-Euler steps (dt > 0) of a NIR neuron, LIF tau·dv/dt = (v_leak - v) + r·I or IF (is_if; tau
 * ignored) dv/dt = r·I (docs/nir.md). SF_ERR_UNSUPPORTED where no LIF computes it (tau < dt, r·dt/tau <= 0). */
SF_API sf_status sf_lif_params_from_nir(int32_t is_if, double tau, double r, double v_leak, double v_threshold,
                                        double v_reset, double dt, sf_lif_params *p);

/* What a neuron call takes beyond x: the state carried across calls of consecutive pieces of time, and a PLIF's w.
 * State pointers are optional, float32 on the kernel's device, [N] (v) or [2, N] for the ALIF (v, then the next
 * step's b). NULL is one whole call: v starts at v_reset (hard) or 0 (soft), b at 0, ∂L/∂state after the last step
 * is 0. Pieces run in order with v_out → next v_in, backwards in reverse with dv_out → previous dv_in, give one
 * call's spikes and gradients bitwise.
 *   v_in    forward (and the backward's recompute of h): the state before this piece's first step
 *   v_out   forward: the state after this piece's last step; may be v_in itself
 *   dv_in   backward: ∂L/∂state after this piece's last step (the later piece's dv_out)
 *   dv_out  backward: ∂L/∂state before this piece's first step (∂L/∂v_in); may be dv_in itself
 * PLIF only (and required): w [w_channels] on the kernel's device, one for the layer or one per channel (neuron n of
 * N = B·C·w_hw is in channel (n / w_hw) mod w_channels); the backward overwrites dw [w_channels] with ∂L/∂w summed
 * in a fixed order (dw NULL: not wanted).
 * v_ckpt (optional; CUDA only, the CPU ignores it): sf_lif_ckpt_floats(p, T, N) floats, slot j − 1 the v [N] before
 * step T − j·SF_LIF_CKPT_STEPS for j = 1, 2, … while > 0 (the ALIF's b after all v slots). The forward writes them;
 * a recomputing backward given the same v_in and x starts its segments there, with the same bits. */
typedef struct sf_lif_state {
    const float *v_in;
    float *v_out;
    const float *dv_in;
    float *dv_out;
    const float *w;
    float *dw;
    int32_t w_channels;
    int64_t w_hw;
    float *v_ckpt;
} sf_lif_state;

/* Steps between two checkpoints of sf_lif_state.v_ckpt, and the floats they take for T steps of N neurons of
 * model p->model (0 for T <= SF_LIF_CKPT_STEPS). */
#define SF_LIF_CKPT_STEPS 32
SF_API int64_t sf_lif_ckpt_floats(const sf_lif_params *p, int64_t T, int64_t N);

/* All T steps of N independent neurons in one pass. x, s, ds, dx: [T, N] float32 on `device` (host memory for the
 * CPU). `stream`: a cudaStream_t (NULL: the default), on which CUDA calls are asynchronous; ignored on the CPU.
 * The backward recomputes the membrane from x, so nothing else is kept. */
SF_API sf_status sf_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, float *s,
                                sf_device device, void *stream);
SF_API sf_status sf_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds,
                                 float *dx, sf_device device, void *stream);
/* The same with st (sf_lif_state; NULL: the calls above, which run every model but the PLIF). The backward
 * recomputes h from x and st->v_in, so it needs the v_in its forward had. */
SF_API sf_status sf_lif_forward_state(const sf_lif_params *p, int64_t T, int64_t N, const float *x, float *s,
                                      const sf_lif_state *st, sf_device device, void *stream);
SF_API sf_status sf_lif_backward_state(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds,
                                       float *dx, const sf_lif_state *st, sf_device device, void *stream);

/* Storage type of the low-level calls' x, s, ds, dx. In the 16-bit types the membrane, sf_lif_state, BN statistics
 * and parameters stay fp32; spikes are exactly 0 and 1. SF_SCALAR_F64 (the CPU only, a reference for float64
 * callers) runs the whole call in double: x, s, ds, dx, the membrane, every sf_lif_state array and the BN+LIF's mean,
 * var, gamma, beta, dgamma, dbeta are doubles behind their pointers; sf_lif_params and eps stay float. */
typedef enum sf_scalar { SF_SCALAR_F32 = 0, SF_SCALAR_BF16, SF_SCALAR_F16, SF_SCALAR_F64 } sf_scalar;
/* sf_lif_forward_state / sf_lif_backward_state with x, s, ds, dx stored in `dtype`: 16-bit types on CUDA devices,
 * float64 on the CPU (SF_ERR_UNSUPPORTED where the build or device has no kernels of that type). */
SF_API sf_status sf_lif_forward_typed(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar dtype, const void *x,
                                      void *s, const sf_lif_state *st, sf_device device, void *stream);
SF_API sf_status sf_lif_backward_typed(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar dtype, const void *x,
                                       const void *ds, void *dx, const sf_lif_state *st, sf_device device,
                                       void *stream);

/* Fused batch norm → LIF (Liang et al.'s kernels, which the engine runs for a [bn] layer directly before its [lif]):
 * x is [T, B, C, hw] on `device`, stored in `dtype` as s, ds and dx are (see sf_scalar); the LIF input current of
 * channel c is
 *   y = (x - mean[c])·gamma[c] / sqrt(var[c] + eps) + beta[c],
 * normalised inside the time-fused loop, so y is never stored. mean, var, gamma, beta are fp32 [C] on `device`; in
 * training the caller passes x's batch statistics over (T, B, hw) (biased var), in evaluation the running ones. s
 * is [T, B, C, hw]; st as for sf_lif_forward_state, [B·C·hw] per pointer. */
SF_API sf_status sf_bn_lif_forward(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, sf_scalar dtype,
                                   const void *x, const float *mean, const float *var, float eps, const float *gamma,
                                   const float *beta, void *s, const sf_lif_state *st, sf_device device,
                                   void *stream);
/* The backward of the forward above with mean and var the batch statistics of x (the gradient runs through them,
 * as in training-mode batch norm): dx [T, B, C, hw], dgamma and dbeta [C] (fp32), recomputing y and h from x; dx
 * must not overlap x (on CUDA it holds ∂L/∂y between the backward's two passes).
 * `workspace` is scratch memory on `device` of sf_bn_lif_workspace_bytes bytes (0 on the CPU, where NULL is fine;
 * for CUDA the size depends on the current device). */
SF_API size_t sf_bn_lif_workspace_bytes(int64_t T, int64_t B, int32_t C, int64_t hw, sf_device device);
SF_API sf_status sf_bn_lif_backward(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw,
                                    sf_scalar dtype, const void *x, const float *mean, const float *var, float eps,
                                    const float *gamma, const float *beta, const void *ds, void *dx, float *dgamma,
                                    float *dbeta, const sf_lif_state *st, void *workspace, size_t workspace_bytes,
                                    sf_device device, void *stream);

/* Batch statistics for the forward above: per channel c of x [rows, C, hw] (fp32, rows = T·B), the mean and the
 * biased variance over rows and hw, summed in double in a fixed order (as the engine's [bn] layers sum). The CPU
 * only (on CUDA, compute them with the framework's reduction); mean and var are [C]. */
SF_API sf_status sf_bn_statistics(int64_t rows, int32_t C, int64_t hw, const float *x, float *mean, float *var,
                                  sf_device device);

/* ---------------------------------------------------------------- networks */
typedef enum sf_layer_kind {
    SF_LAYER_LINEAR = 0,
    SF_LAYER_CONV2D,
    SF_LAYER_AVGPOOL2D,
    SF_LAYER_MAXPOOL2D,
    SF_LAYER_FLATTEN,
    SF_LAYER_DROPOUT,
    SF_LAYER_BATCHNORM,
    SF_LAYER_LIF,
    SF_LAYER_ADD,
    SF_LAYER_RLIF, /* LIF with recurrent weight V [N, N] ("<layer>.weight", no bias): input x_t + V·s_{t-1}, s_0 = 0 */
    /* Spiking transformers (Spikformer; the Spike-driven Transformer). Tokens: (D, N, 1) per sample and step, stored
     * channels-last; linear, batchnorm, lif, add and dropout act on each token over D and make tokens; flatten makes
     * N·D features, token by token. */
    SF_LAYER_TOKENS,     /* (C, H, W) → tokens (C, H·W, 1): the end of the SPS stem */
    SF_LAYER_LAYERNORM,  /* LayerNorm over the D channels of each token (or the C features of a (C, 1, 1) input) */
    SF_LAYER_SSA,        /* spiking self-attention without softmax: reads q|k|v spikes (3D, N, 1) of one linear → BN
                          * → LIF, writes per head scale·Q·(KᵀV), (D, N, 1) */
    SF_LAYER_SDSA,       /* spike-driven self-attention: reads q|k|v spikes (3D, N, 1), writes q·LIF(Σ_N k·v) with the
                          * layer's own neuron (lif: threshold 0.5 in the paper), (D, N, 1) spikes */
    SF_LAYER_TOKEN_MEAN  /* the mean over the N tokens: (D, N, 1) → (D, 1, 1), before a transformer's head */
} sf_layer_kind;

/* How an ADD layer combines a (`input`, a residual branch's output) with b (`input2`, the shortcut), SEW-ResNet's
 * connect functions: ADD a + b, AND a·b, IAND (1 − a)·b. Gradients are the products' (exact for any values). */
typedef enum sf_connect { SF_CONNECT_ADD = 0, SF_CONNECT_AND, SF_CONNECT_IAND } sf_connect;
SF_API const char *sf_connect_name(sf_connect c); /* "add", "and", "iand" */

/* Event-driven LINEAR and RLIF layers reading spikes: the forward and the weight gradient touch only the inputs that
 * spiked (dx only nonzero gradients, with grad_threshold). Same function as dense, within float rounding. */
typedef enum sf_sparse_mode {
    SF_SPARSE_OFF = 0, /* dense everywhere */
    SF_SPARSE_AUTO,    /* per layer and step, sparse below a density crossover: timed on a GPU (deterministic: as ON),
                        * 1/8 on the CPU; checkpoints record the crossovers */
    SF_SPARSE_ON       /* sparse wherever the input is spikes */
} sf_sparse_mode;
SF_API const char *sf_sparse_mode_name(sf_sparse_mode m); /* "off", "auto", "on" */

/* Tensor ids: 0 is the network input, layer i (counted from 0) produces tensor i + 1. */
typedef struct sf_layer_desc {
    sf_layer_kind kind;
    int32_t input;        /* the tensor this layer reads; -1: the previous layer's output */
    int32_t input2;       /* ADD: the tensor added to `input` (a residual shortcut) */
    int32_t out_features; /* LINEAR */
    int32_t out_channels; /* CONV2D */
    int32_t kernel;       /* CONV2D, pools: square kernel size (AVGPOOL2D: 0 is global, the whole plane) */
    int32_t stride;       /* CONV2D, pools (pools: 0 means = kernel) */
    int32_t padding;      /* CONV2D; pools: at most kernel/2, as PyTorch's (max: -inf border, avg: zeros counted) */
    int32_t bias;         /* LINEAR, CONV2D: 1 to learn a bias; default 1 */
    float dropout_p;      /* DROPOUT: probability of zeroing; one mask for all time steps */
    float bn_eps;         /* BATCHNORM, LAYERNORM: default 1e-5 */
    float bn_momentum;    /* BATCHNORM: running-statistics momentum, PyTorch convention; default 0.1 */
    sf_lif_params lif;    /* LIF: the neuron, of any model (a PLIF layer learns its w, see sf_lif_params); RLIF: the
                           * LIF or IF; SDSA: the LIF or IF of its channel mask, threshold 0.5 by default */
    int32_t sparse;       /* LINEAR, RLIF: -1 follows sf_net_params.sparse (default), else an sf_sparse_mode; ON
                           * for a layer whose input is not spikes is an error */
    float init_gain;      /* LINEAR, CONV2D, RLIF: the weights of PyTorch's default initialisation times this (the
                           * bias stays as drawn); default 1 */
    int32_t heads;        /* SSA: attention heads, dividing D; default 8 */
    float attn_scale;     /* SSA: the factor of Q·KᵀV; default 0.125 (Spikformer's) */
    int32_t connect;      /* ADD: an sf_connect, how `input` and `input2` combine; default SF_CONNECT_ADD */
} sf_layer_desc;

SF_API void sf_layer_default_desc(sf_layer_kind kind, sf_layer_desc *d);
SF_API const char *sf_layer_kind_name(sf_layer_kind kind);

typedef enum sf_memory_mode {
    SF_MEMORY_FULL = 0,  /* keep membrane potentials for the backward */
    SF_MEMORY_RECOMPUTE, /* keep only each neuron layer's input current; recompute h and s in the backward */
    SF_MEMORY_LEAN       /* keep spikes as bits and the network input; rerun the conv, linear and avg-pool layers
                          * that make a neuron layer's input current (from those), then h and s, in the backward */
} sf_memory_mode;
SF_API const char *sf_memory_mode_name(sf_memory_mode m); /* "full", "recompute", "lean" */

typedef enum sf_readout { SF_READOUT_MEAN = 0, SF_READOUT_LEAKY } sf_readout;

/* Arithmetic and storage. bf16 and fp16 store activations, their gradients and a weight copy for the GEMMs in 16
 * bits and compute in fp32; parameters, gradients, optimizer state, BN statistics and the loss stay fp32. fp16 scales
 * the loss: a step whose gradients overflow is skipped (sf_step_result.skipped) and the scale halves. */
typedef enum sf_precision {
    SF_PRECISION_FP32 = 0, /* fp32 products and sums, no tensor cores (TF32 off): the reference */
    SF_PRECISION_TF32,     /* CUDA only: TF32 tensor cores (operands rounded to a 10-bit mantissa), fp32 sums */
    SF_PRECISION_BF16,     /* CUDA only: bf16 activations and GEMM/conv operands (8-bit mantissa), fp32 sums */
    SF_PRECISION_FP16      /* CUDA only: fp16 activations and operands (11-bit mantissa), fp32 sums, loss scaling */
} sf_precision;
SF_API const char *sf_precision_name(sf_precision p); /* "fp32", "tf32", "bf16", "fp16" */
SF_API sf_status sf_precision_parse(const char *name, sf_precision *out);
/* The loss on the readout r_t: softmax cross-entropy of its T-mean, or per step averaged over T; or the mean squared
 * error of its T-mean against the one-hot label, over B·classes values. Accuracy: the argmax of the T-mean. */
typedef enum sf_loss { SF_LOSS_CE_MEAN = 0, SF_LOSS_CE_PER_STEP, SF_LOSS_MSE_RATE } sf_loss;

/* How convolutions run on a GPU (docs/architecture.md, Layouts). auto: NHWC tensors in tf32/bf16/fp16, NCHW in fp32,
 * each conv op the fastest path timed at compile. nchw: NCHW, the faster of cuDNN and im2col + GEMM. cudnn: cuDNN on
 * NCHW. gemm: im2col + GEMM where the shape allows (else cuDNN). nhwc: NHWC in every precision. split: in fp32, convs
 * of spikes as TF32 products of exact parts, the others as auto. */
typedef enum sf_conv_algo {
    SF_CONV_ALGO_AUTO = 0,
    SF_CONV_ALGO_CUDNN,
    SF_CONV_ALGO_GEMM,
    SF_CONV_ALGO_NHWC,
    SF_CONV_ALGO_NCHW,
    SF_CONV_ALGO_SPLIT
} sf_conv_algo;
SF_API const char *sf_conv_algo_name(sf_conv_algo a); /* "auto", "cudnn", "gemm", "nhwc", "nchw", "split" */
SF_API sf_status sf_conv_algo_parse(const char *name, sf_conv_algo *out);

/* Choices of the CUDA backend (the CPU backend has none of these and ignores them). */
typedef struct sf_cuda_options {
    int32_t graph;              /* 1: replay each training step as one recorded CUDA graph (nets without dropout);
                                 * default 1 */
    int32_t conv_workspace_mib; /* the most scratch memory cuDNN's convolution algorithms may use, shared by all
                                 * layers (faster algorithms need more); default 512 */
    sf_conv_algo conv_algo;     /* default auto */
    int32_t deterministic;      /* 1: deterministic algorithms chosen without timing: a run repeats to the bit on the
                                 * same GPU and software (the CPU always does); slower; default 0 */
    float conv_lean;            /* fraction of the convs' time the plan may add for leaner-workspace algorithms where
                                 * they set the peak; 0: fastest only; default 0.05 */
} sf_cuda_options;

typedef struct sf_net_params {
    sf_device device;      /* default cpu */
    sf_memory_mode memory; /* default recompute */
    uint64_t seed;         /* initialisation and dropout; default 0 */
    int32_t in_channels, in_height, in_width; /* per-sample, per-step input shape; [N] inputs use 1×1 images */
    sf_readout readout;    /* default mean */
    float readout_tau;     /* SF_READOUT_LEAKY: r_t = a·r_{t-1} + (1-a)·o_t with a = 1 - 1/tau; default 2 */
    sf_loss loss;          /* default CE on the T-mean of the readout */
    float label_smoothing; /* cross-entropy losses: the target puts 1 − ε on the label and ε/K on each of the K
                            * classes (torch's CrossEntropyLoss(label_smoothing = ε)); in [0, 1], default 0 */
    sf_precision precision; /* arithmetic and storage; default fp32 (the CPU backend accepts only fp32) */
    sf_cuda_options cuda;   /* how the CUDA backend runs (ignored on the CPU) */
    sf_sparse_mode sparse;  /* event-driven layers; default auto */
    float sparse_crossover; /* AUTO: 0 times it per layer shape on a GPU, 1/8 on the CPU; a value in (0, 1] is used
                             * as is (reproducible); a resumed run takes its checkpoint's */
    int32_t input_spikes;   /* 1: the input holds 0/1 spikes (Poisson or latency encoding, event data), so layers
                             * reading it can run event-driven; a step fails if it holds other values */
} sf_net_params;

SF_API void sf_net_default_params(sf_net_params *p);
/* The loss options of p (label_smoothing in [0, 1], and only with a cross-entropy loss); sf_net_create checks them
 * too. */
SF_API sf_status sf_net_loss_check(const sf_net_params *p);

typedef struct sf_net sf_net;

SF_API sf_status sf_net_create(const sf_net_params *p, sf_net **out);
SF_API void sf_net_free(sf_net *net);
/* Appends a layer; *out_id (optional) receives the id of its output tensor. Shapes are checked here. */
SF_API sf_status sf_net_add(sf_net *net, const sf_layer_desc *d, int32_t *out_id);
SF_API int32_t sf_net_num_layers(const sf_net *net);
/* Layer i's description as added, with `input` and `input2` as resolved tensor ids (never -1). */
SF_API sf_status sf_net_layer_desc(const sf_net *net, int32_t i, sf_layer_desc *out);
/* The parameters the net was created with. */
SF_API void sf_net_get_params(const sf_net *net, sf_net_params *out);
/* The output shape of tensor `id` per sample and step: C, H, W (1×1 for vectors). */
SF_API sf_status sf_net_tensor_shape(const sf_net *net, int32_t id, int32_t chw[3]);
/* A multi-line human-readable summary (layers, shapes, parameter counts); owned by the net. */
SF_API const char *sf_net_summary(sf_net *net);

/* Plans memory for T time steps and batch B and allocates it; called again with other (T, B) it replans.
 * Adjacent BATCHNORM → LIF layers are fused here. Must be called after the last sf_net_add. */
SF_API sf_status sf_net_compile(sf_net *net, int64_t T, int64_t B);

typedef struct sf_memory_plan {
    size_t params;     /* parameters (weights, biases, BN affine) */
    size_t grads;      /* their gradients */
    size_t optimizer;  /* optimizer state (momentum, Adam moments) */
    size_t buffers;    /* non-trained state (BN running statistics) */
    size_t saved;      /* activations kept from the forward for the backward */
    size_t workspace;  /* transient activations, gradients and scratch, reused across layers */
    size_t total;
} sf_memory_plan;
SF_API sf_status sf_net_memory_plan(const sf_net *net, sf_memory_plan *out);

/* ---------------------------------------------------------------- optimisation */
typedef enum sf_optimizer { SF_OPT_SGD = 0, SF_OPT_ADAM, SF_OPT_ADAMW } sf_optimizer;
typedef struct sf_optim_params {
    sf_optimizer kind;  /* default SGD */
    float lr;           /* default 0.01 */
    float momentum;     /* SGD; default 0 */
    int32_t nesterov;   /* SGD; default 0 */
    float weight_decay; /* L2 added to the gradient for SGD/Adam, decoupled for AdamW; default 0 */
    float beta1, beta2, eps; /* Adam/AdamW; defaults 0.9, 0.999, 1e-8 */
} sf_optim_params;
SF_API void sf_optim_default_params(sf_optim_params *p);
SF_API sf_status sf_net_set_optimizer(sf_net *net, const sf_optim_params *p);
/* Changes the learning rate of the next updates (schedules call this each step or epoch). */
SF_API sf_status sf_net_set_lr(sf_net *net, float lr);

typedef enum sf_schedule { SF_SCHEDULE_CONSTANT = 0, SF_SCHEDULE_STEP, SF_SCHEDULE_COSINE } sf_schedule;
typedef struct sf_schedule_params {
    sf_schedule kind;
    int64_t step_size; /* STEP: multiply by gamma every step_size epochs */
    float gamma;       /* STEP; default 0.1 */
    float min_lr;      /* COSINE: the value reached at the end; default 0 */
} sf_schedule_params;
SF_API void sf_schedule_default_params(sf_schedule_params *p);
/* The learning rate for `epoch` (0-based) of `total_epochs`, as PyTorch's StepLR / CosineAnnealingLR give. */
SF_API float sf_schedule_lr(const sf_schedule_params *p, float base_lr, int64_t epoch, int64_t total_epochs);

/* ---------------------------------------------------------------- training and evaluation
 * x: host [T, B, C, H, W] as compiled, or NULL to reuse the last input given (no upload); labels: B values in
 * [0, classes). */
typedef struct sf_step_result {
    float loss;        /* mean over the batch */
    int32_t correct;   /* samples whose argmax of the T-mean readout equals the label */
    int32_t skipped;   /* fp16: 1 when a gradient overflowed, so the update was skipped and the loss scale halved */
} sf_step_result;

/* Forward in training mode, loss, backward, update. SF_ERR_NUMERIC (no update) if the loss or a gradient is not
 * finite; under fp16 a finite loss with such gradients skips the update instead (SF_OK, skipped = 1) until the scale
 * would fall below 2^-24. fp16 split form: sf_net_backward leaves gradients scaled, sf_net_update unscales them. */
SF_API sf_status sf_net_train_step(sf_net *net, const float *x, const int32_t *labels, sf_step_result *out);
/* Forward and loss only, in evaluation mode (BN running statistics, no dropout). labels may be NULL. */
SF_API sf_status sf_net_eval_step(sf_net *net, const float *x, const int32_t *labels, sf_step_result *out);
/* The split form of a training step, for tests and custom loops. */
SF_API sf_status sf_net_forward(sf_net *net, const float *x, int32_t training);
SF_API sf_status sf_net_loss(sf_net *net, const int32_t *labels, sf_step_result *out); /* also seeds the backward */
SF_API sf_status sf_net_backward(sf_net *net);
SF_API sf_status sf_net_update(sf_net *net);
/* Copies the readout logits of the last forward, averaged over T, to host [B, classes]. */
SF_API sf_status sf_net_logits(const sf_net *net, float *out);
/* Copies tensor `id` of the last forward to host [T, B, C, H, W]; SF_ERR_STATE unless held (the last layer's always,
 * others where the plan keeps them for the backward, all with sf_net_set_keep_activations). */
SF_API sf_status sf_net_read_activation(const sf_net *net, int32_t id, float *out);
/* From the next sf_net_compile on, every tensor and LIF membrane stays held after each forward (a float per
 * activation; results unchanged), for plots and debugging. */
SF_API sf_status sf_net_set_keep_activations(sf_net *net, int32_t on);
/* From the next sf_net_compile on, the input is taken to be the same at every step (images under direct encoding;
 * the trainer sets it for them): a step uploads and reads step 0 of x only, and a convolution or linear layer (past a
 * flatten) that alone reads the input runs once on the B samples, its output repeated over T and its weight gradient
 * taken from its output gradient summed over T (the T·B product's within float rounding). Off by default; with an
 * input gradient (sf_net_set_input_grad) the layer runs on every step. */
SF_API sf_status sf_net_set_static_input(sf_net *net, int32_t on);
/* Copies the membrane potential h (before reset) of the LIF layer that produces tensor `id` in the last forward to
 * host [T, B, C, H, W]: after any forward with keep_activations, or after a training forward in SF_MEMORY_FULL. */
SF_API sf_status sf_net_read_membrane(const sf_net *net, int32_t id, float *out);

/* A compiled net run by another framework (spikefuse.torch.Network) on float32 NCHW [T, B, C, H, W] tensors in the
 * net's device memory (host for the CPU); readout and loss unused; fp16 refused (it needs sf_net_train_step's loss
 * scaling). Asynchronous on sf_net_stream on a CUDA device.
 *   sf_net_set_input_grad   from the next sf_net_compile on, the backward also computes the input's gradient
 *   sf_net_forward_device   forward on x (training: batch statistics, dropout); y (optional): the output [T, B, ...]
 *   sf_net_backward_device  after a training forward, from dy (∂L/∂output): overwrites the parameter gradients
 *                           and, where dx is given (input grad on), writes ∂L/∂x
 *   sf_net_tensor_ptr       named tensor i of a role on the device, valid until sf_net_free (compiles keep it)
 *   sf_net_params_changed   after writes through those pointers: rewrites bf16's 16-bit weight copy
 *   sf_net_read_output_grad after sf_net_loss (fp32, one process): the output gradient it seeded, to host
 *   sf_net_stream           the cudaStream_t the net's work is queued on (NULL on the CPU) */
SF_API sf_status sf_net_set_input_grad(sf_net *net, int32_t on);
SF_API sf_status sf_net_forward_device(sf_net *net, const float *x, int32_t training, float *y);
SF_API sf_status sf_net_backward_device(sf_net *net, const float *dy, float *dx);
SF_API sf_status sf_net_read_output_grad(const sf_net *net, float *out);
SF_API void *sf_net_stream(sf_net *net);

/* Firing rate (mean spikes per neuron and step) of each LIF and RLIF layer in the last forward, in layer order.
 * Returns the number of such layers; writes at most `cap` rates. */
SF_API int32_t sf_net_firing_rates(const sf_net *net, float *rates, int32_t cap);

/* ---------------------------------------------------------------- named tensors (checkpoints, tests)
 * Parameters are "<layer>.<name>" as an nn.Sequential's state_dict names them ("0.weight", "1.running_mean", a PLIF's
 * "2.w"); gradients and optimizer state add ".grad", ".momentum", ".adam_m", ".adam_v". */
typedef enum sf_tensor_role {
    SF_ROLE_PARAM = 0,
    SF_ROLE_GRAD,
    SF_ROLE_BUFFER,   /* BN running mean/var */
    SF_ROLE_OPTIMIZER /* only after sf_net_set_optimizer */
} sf_tensor_role;

typedef struct sf_tensor_info {
    char name[64];
    int32_t ndim;
    int64_t shape[4];
    int64_t numel;
} sf_tensor_info;

SF_API int32_t sf_net_tensor_count(const sf_net *net, sf_tensor_role role);
SF_API sf_status sf_net_tensor_info(const sf_net *net, sf_tensor_role role, int32_t i, sf_tensor_info *out);
SF_API sf_status sf_net_tensor_read(const sf_net *net, sf_tensor_role role, int32_t i, float *host_dst);
SF_API sf_status sf_net_tensor_write(sf_net *net, sf_tensor_role role, int32_t i, const float *host_src);

/* For frameworks that hold the tensors in place: see sf_net_forward_device above. */
SF_API sf_status sf_net_tensor_ptr(sf_net *net, sf_tensor_role role, int32_t i, float **out);
SF_API sf_status sf_net_params_changed(sf_net *net);

/* State beyond tensors that a bitwise-exact resume needs: optimizer step count, the RNG position and fp16's loss
 * scale (start with sf_net_get_state's values and change what is restored). */
typedef struct sf_net_state {
    int64_t optimizer_steps;
    uint64_t rng_seed;
    uint64_t rng_counter;
    float loss_scale;         /* the factor the loss gradient is multiplied by (fp16; 1 and ignored otherwise) */
    int64_t loss_scale_steps; /* good steps since the scale last changed */
} sf_net_state;
SF_API sf_status sf_net_get_state(const sf_net *net, sf_net_state *out);
SF_API sf_status sf_net_set_state(sf_net *net, const sf_net_state *st);

/* The network of a checkpoint `spikefuse train` wrote (best/last.safetensors): its config's net on `device` with the
 * stored parameters and BN statistics, no optimizer, not compiled; the caller frees it. */
SF_API sf_status sf_checkpoint_load_net(const char *path, sf_device device, sf_net **out);

/* How the checkpoint's run made its input [T, B, C, H, W] from samples, for feeding the loaded net: images in [0, 1]
 * are repeated T times, (x - mean[c]) / std[c] with `normalize` (direct), or spikes (poisson, latency: docs/config.md);
 * event and synthetic datasets give the T steps themselves (images = 0). */
typedef struct sf_input_encoding {
    char dataset[32];    /* the [train] dataset's name */
    int32_t images;      /* 1: an image dataset, encoded as below */
    int32_t encoding;    /* images: 0 direct, 1 poisson, 2 latency */
    int32_t normalize;   /* direct: normalised with mean and std */
    int32_t channels;    /* C (at most 4 for images) */
    float mean[4];       /* per channel (the first `channels`) */
    float std[4];
    int64_t timesteps;   /* T */
} sf_input_encoding;
SF_API sf_status sf_checkpoint_input_encoding(const char *path, sf_input_encoding *out);

/* ---------------------------------------------------------------- profiling */
typedef struct sf_layer_timing {
    double forward_ms;  /* accumulated since the last reset */
    double backward_ms;
} sf_layer_timing;
/* Enables per-layer timing (synchronises after each layer on a GPU, so only for `bench`). */
SF_API sf_status sf_net_set_profiling(sf_net *net, int32_t on);
SF_API sf_status sf_net_layer_timings(const sf_net *net, sf_layer_timing *out, int32_t cap);
/* Event-driven execution per layer (see sf_sparse_mode). */
typedef struct sf_layer_sparsity {
    int32_t eligible;          /* the layer can run event-driven: a linear layer reading spikes, or an RLIF layer */
    sf_sparse_mode mode;       /* its resolved mode */
    float density;             /* active fraction of its spike input in the last forward (RLIF: of its own spikes,
                                * whose previous step drives the recurrence); -1 before the first */
    float grad_density;        /* nonzero fraction of the gradient of its output in the last backward where a
                                * grad_threshold makes it sparse and it was measured; -1 otherwise */
    float crossover_forward;   /* AUTO: sparse below these densities (measured or sf_net_params.sparse_crossover) */
    float crossover_backward;
    int32_t forward_sparse;    /* the paths the last forward and backward took (1 sparse, 0 dense) */
    int32_t backward_sparse;
} sf_layer_sparsity;
/* Fills out[i] for layers i < cap (ineligible layers: zeros, densities -1); returns the number of layers. */
SF_API int32_t sf_net_layer_sparsity(const sf_net *net, sf_layer_sparsity *out, int32_t cap);
/* For a compiled net's eligible auto layer: sets its crossovers (in [0, 1]) and the densities its next choice follows
 * (in [0, 1], -1: none), other fields ignored, as a resume restores them; compiling again measures anew. */
SF_API sf_status sf_net_set_layer_sparsity(sf_net *net, int32_t layer, const sf_layer_sparsity *s);
/* The conv choices the backend made by timing (CUDA: per conv shape and op the path, algorithm, math type and images
 * per call), as lines sf_net_set_conv_choice takes; empty on the CPU. Writes at most cap bytes, NUL-terminated, and
 * sets *len to the full length (cap 0 sizes it). */
SF_API sf_status sf_net_conv_choices(const sf_net *net, char *out, size_t cap, size_t *len);
/* Makes that line's conv shape take its choice instead of timing, from the next sf_net_compile. SF_ERR_FORMAT naming
 * what is wrong in a line the backend cannot take; SF_ERR_UNSUPPORTED on the CPU. */
SF_API sf_status sf_net_set_conv_choice(sf_net *net, const char *line);

/* Peak bytes the net had allocated on its device (the plan's total plus library scratch). */
SF_API size_t sf_net_peak_bytes(const sf_net *net);

#ifdef __cplusplus
}
#endif
#endif
