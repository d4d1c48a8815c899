/* backend_ops.h — the one list of a compute backend's ops, an X-macro file: SF_OP(ret, name, params) every backend
 * implements; SF_OPT(...) is optional, may be NULL and the engine checks (the CPU leaves them all NULL). An includer
 * defines SF_OP (SF_OPT defaults to it), includes this file and gets one expansion per op in this order; both are
 * undefined at the end. Conventions: core/backend.h. Adding an op: an entry here, sf_cpu_op_<name>, sf_cuda_op_<name>
 * and rows in tests/ops/op_cases.c (docs/architecture.md, Backends). */
#ifndef SF_OPT
#define SF_OPT SF_OP
#endif

/* ---- memory */
SF_OP(sf_status, alloc, (sf_backend *be, size_t bytes, void **out))
SF_OP(void, release, (sf_backend *be, void *p))
/* Bytes the backend holds beyond what alloc gave out: library workspaces and its own scratch. */
SF_OPT(size_t, held_bytes, (sf_backend *be))
SF_OP(sf_status, copy_from_host, (sf_backend *be, void *dst, const void *src, size_t bytes))
SF_OP(sf_status, copy_to_host, (sf_backend *be, void *dst, const void *src, size_t bytes))
/* A copy to the host that does not wait for the stream: dst holds the bytes once wait_host_copies returns. */
SF_OPT(sf_status, copy_to_host_async, (sf_backend *be, void *dst, const void *src, size_t bytes))
SF_OPT(sf_status, wait_host_copies, (sf_backend *be))
SF_OP(sf_status, copy, (sf_backend *be, void *dst, const void *src, size_t bytes))
SF_OP(sf_status, zero, (sf_backend *be, void *dst, size_t bytes))
SF_OP(sf_status, sync, (sf_backend *be))
SF_OP(void, destroy, (sf_backend *be))

/* ---- LIF over [T, N]. The backward takes h (full mode) or, when h is NULL, recomputes it from x (and st->v_in).
 * st (NULL: none) carries the neuron state across calls, see sf_lif_state in spikefuse.h. */
SF_OP(sf_status, lif_forward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_out *out,
       const sf_lif_state *st))
SF_OP(sf_status, lif_backward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h, const float *ds,
       float *dx, const sf_lif_state *st))

/* ---- Batch norm. Statistics: mean and biased var per channel over (rows, hw). */
SF_OP(sf_status, bn_stats, (sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var))
/* y = (x - mean)·invstd·gamma + beta, invstd = 1/sqrt(var + eps) */
SF_OP(sf_status, bn_forward,
      (sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var, float eps,
       const float *gamma, const float *beta, float *y))
/* Training-mode BN backward (batch statistics): dx, dgamma, dbeta from x and dy. */
SF_OP(sf_status, bn_backward,
      (sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var, float eps,
       const float *gamma, const float *dy, float *dx, float *dgamma, float *dbeta))
/* running = (1 - m)·running + m·batch, with the unbiased variance for running_var (PyTorch's rule); the batch mean
 * taken as mean + shift where shift (per channel) is given: the bias of the layer before, which that layer left out
 * because the batch statistics cancel it. */
SF_OP(sf_status, bn_update_running,
      (sf_backend *be, sf_bn_shape sh, float momentum, const float *mean, const float *var, const float *shift,
       float *running_mean, float *running_var))
/* Fused BN → LIF (Liang et al., Alg. 1–3); x [T, B, C, hw], rows = T·B, the recurrence over T for each of B·C·hw
 * neurons. The backward recomputes y = BN(x) and h (or uses h when given), reduces dgamma, dbeta per channel and
 * writes dx (not overlapping x), always treating mean/var as x's batch statistics. st as the LIF ops' ([B·C·hw] each).
 * split (NULL: none): two phases for statistics over several processes (sf_bn_split). scratch: the plan's
 * bn_lif_scratch bytes for the per-neuron sums, or NULL (the backend's own). */
SF_OP(sf_status, bn_lif_forward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x, const float *mean,
       const float *var, float eps, const float *gamma, const float *beta, const sf_lif_out *out,
       const sf_lif_state *st))
SF_OP(sf_status, bn_lif_backward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x, const float *h,
       const float *mean, const float *var, float eps, const float *gamma, const float *beta, const float *ds,
       float *dx, float *dgamma, float *dbeta, const sf_lif_state *st, const sf_bn_split *split, void *scratch))
/* Bytes of the per-neuron sums bn_lif_backward keeps between its passes for [T·B, C, hw] (0: none). */
SF_OP(size_t, bn_lif_scratch, (sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh))
/* Statistics of `parts` equal-sized parts of one batch (time segments, data shards) merged into the whole's:
 * part_stats [parts][2][C] (each part's mean, then biased var, as bn_stats writes them); mean = Σ mean_p / parts,
 * var = Σ (var_p + (mean_p − mean)²) / parts, in double, parts in order: the same bits on every process. */
SF_OP(sf_status, bn_stats_merge,
      (sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean, float *var))

/* ---- Linear: y[rows, out] = x[rows, in]·W[out, in]ᵀ + b[out] (b may be NULL). */
SF_OP(sf_status, linear_forward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w, const float *b,
       float *y))
/* dx (may be NULL) = dy·W; dW = dyᵀ·x; db (may be NULL) = Σ_rows dy. */
SF_OP(sf_status, linear_backward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w, const float *dy,
       float *dx, float *dw, float *db))
/* linear_forward and _backward for an x of only 0 and 1 (spikes): the same results, which a backend may compute faster
 * (CUDA fp32: tensor-core products with parts of the other operand; the CPU runs its dense ops). _backward_bits takes
 * x as its spike bits [rows][words] (core/spikes.h), where the backend has a faster way than expanding them. */
SF_OP(sf_status, binary_linear_forward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w, const float *b,
       float *y))
SF_OP(sf_status, binary_linear_backward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w, const float *dy,
       float *dx, float *dw, float *db))
SF_OPT(sf_status, binary_linear_backward_bits,
       (sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *xbits, const float *w, const float *dy,
        float *dx, float *dw, float *db))

/* ---- Conv2d, NCHW with n = T·B images; W is [cout, cin, k, k]. Workspace bytes come from conv_workspace: what
 * conv_forward, conv_backward or either (SF_CONV_PASS_BOTH) needs. */
SF_OP(size_t, conv_workspace, (sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass))
/* Whether `pass` (forward or backward) of the convolution of sh has a measured choice that needs less workspace
 * than the one it runs (*out: that choice), and with apply, takes it: conv_workspace answers for it from then
 * on, for every layer of that shape. */
SF_OPT(bool, conv_lean, (sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass, bool apply, sf_conv_lean *out))
/* The convolution choices the backend made by measuring (per shape conv_workspace has seen), as newline-ended text
 * lines only it reads: returns the text's length, written NUL-terminated where it fits in cap. */
SF_OPT(size_t, conv_choices, (sf_backend *be, char *out, size_t cap))
/* Takes one line of conv_choices for its shape instead of measuring (replacing what the shape had): conv_workspace
 * and the convolutions follow it, and conv_lean offers nothing for it. A line it cannot take is SF_ERR_FORMAT. */
SF_OPT(sf_status, conv_set_choice, (sf_backend *be, const char *line))
SF_OP(sf_status, conv_forward,
      (sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w, const float *b, float *y, void *ws))
/* dx may be NULL (first layer); db may be NULL (no bias). dx may be x itself: each image of x is read before
 * that image of dx is written. */
SF_OP(sf_status, conv_backward,
      (sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w, const float *dy, float *dx, float *dw,
       float *db, void *ws))

/* ---- Pools over n planes of h×w. maxpool keeps the argmax position inside each window as a byte. */
SF_OP(sf_status, avgpool_forward, (sf_backend *be, const sf_pool_shape *sh, const float *x, float *y))
SF_OP(sf_status, avgpool_backward, (sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx))
SF_OP(sf_status, maxpool_forward, (sf_backend *be, const sf_pool_shape *sh, const float *x, float *y, uint8_t *argmax))
SF_OP(sf_status, maxpool_backward,
      (sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax, const float *dy, float *dx))

/* ---- Dropout with one mask over all T steps: mask[i] = hash(seed, counter, i) >= p for i in [0, n) where
 * n = B·features; y[t, i] = x[t, i]·mask[i]/(1 - p). The same (seed, counter) give the same mask on
 * every backend (see sf_dropout_keep in rng.h). The backward applies the same scaling to dy. */
SF_OP(sf_status, dropout_forward,
      (sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter, const float *x, float *y))
SF_OP(sf_status, dropout_backward,
      (sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter, const float *dy, float *dx))

/* ---- Element-wise helpers: y = a + b; y += alpha·x; spike bytes to the act type and back (x is 0/1). */
SF_OP(sf_status, add, (sf_backend *be, int64_t n, const float *a, const float *b, float *y))
SF_OP(sf_status, axpy, (sf_backend *be, int64_t n, float alpha, const float *x, float *y))
SF_OP(sf_status, u8_to_act, (sf_backend *be, int64_t n, const uint8_t *x, float *y))
SF_OP(sf_status, act_to_u8, (sf_backend *be, int64_t n, const float *x, uint8_t *y))
/* ---- SEW-ResNet's product connect functions (sf_connect, AND or IAND) over n values: y = a·b or (1 − a)·b. The
 * backward writes da = dy·∂y/∂a and db = dy·∂y/∂b (AND: b·dy and a·dy; IAND: −b·dy and (1 − a)·dy); NULL for
 * either: not wanted, and then the input it alone reads (b for da, a for db) may be NULL. ADD is the add op. */
SF_OP(sf_status, connect_forward, (sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b, float *y))
SF_OP(sf_status, connect_backward,
      (sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b, const float *dy, float *da, float *db))

/* ---- Spiking transformers over tokens [T·B, n, d] (core/transformer.h says what each op computes, its shapes and
 * strides): LayerNorm, the SSA's attention product, the per-channel token products (the SDSA, a mean over tokens). */
SF_OP(sf_status, layernorm_forward,
      (sf_backend *be, int64_t rows, int32_t d, float eps, const float *x, const float *gamma, const float *beta,
       float *y, float *mean, float *rstd))
SF_OP(sf_status, layernorm_backward,
      (sf_backend *be, int64_t rows, int32_t d, const float *x, const float *mean, const float *rstd,
       const float *gamma, const float *dy, float *dx, float *dgamma, float *dbeta, void *ws))
SF_OP(size_t, layernorm_workspace, (sf_backend *be, int64_t rows, int32_t d))
SF_OP(size_t, ssa_workspace, (sf_backend *be, const sf_token_shape *sh, int32_t heads, bool backward))
SF_OP(sf_status, ssa_forward,
      (sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld, const float *q,
       const float *k, const float *v, float *y, void *ws))
SF_OP(sf_status, ssa_backward,
      (sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld, const float *q,
       const float *k, const float *v, const float *dy, float *dq, float *dk, float *dv, void *ws))
SF_OP(sf_status, token_sum,
      (sf_backend *be, const sf_token_shape *sh, float alpha, const float *a, int64_t lda, const float *b,
       int64_t ldb, float *out))
SF_OP(sf_status, token_scale,
      (sf_backend *be, const sf_token_shape *sh, float alpha, const float *g, const float *b, int64_t ldb,
       float *out, int64_t ldo))
/* y[i, c, r] = x[i, r, c] for `batch` matrices of rows × cols in the act type (y must not overlap x): the SPS stem's
 * planes [T·B, C, H·W] become tokens [T·B, N = H·W, D = C], and their gradient goes back. */
SF_OP(sf_status, transpose,
      (sf_backend *be, int64_t batch, int64_t rows, int64_t cols, const float *x, float *y))

/* ---- Readout over [T, B, K]: r_t = a·r_{t-1} + c·o_t (a = 0, c = 1 is the identity; the engine uses that
 * for the mean readout and skips the op). The backward runs in reverse time. */
SF_OP(sf_status, leaky_forward, (sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r))
SF_OP(sf_status, leaky_backward, (sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr, float *doo))
/* Softmax cross-entropy on r[T, B, K]: per_step 0: z = mean_t r_t, loss = mean_b CE(z_b); 1: loss = mean_{t,b}
 * CE(r_{t,b}); CE against the label smoothed by eps (1 − eps on it, eps/K on every class). Writes dr[T, B, K] (may be
 * NULL: evaluation), logits_mean[B, K] = mean_t r_t, stats[0] = loss, stats[1] = samples whose argmax(logits_mean) is
 * the label. labels: B int32 on the backend. */
SF_OP(sf_status, softmax_xent,
      (sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps, const float *r,
       const int32_t *labels, float *dr, float *logits_mean, float *stats))
/* MSE between the T-mean of r (the firing rate) and the one-hot label over B·K values: loss = Σ (mean_t r_t −
 * onehot)² / (B·K), dr_t = 2·(mean_t r_t − onehot) / (B·K·T). Other arguments as softmax_xent's. */
SF_OP(sf_status, mse_rate,
      (sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels, float *dr,
       float *logits_mean, float *stats))

/* ---- One update over all n parameters (one allocation). SGD as PyTorch's: g += wd·p; buf = momentum·buf + g (buf = g
 * at step 1); g = nesterov ? g + momentum·buf : buf; p -= lr·g. Adam/AdamW (decoupled = 1: p -= lr·wd·p first, else
 * g += wd·p), bias-corrected with `step` counted from 1. */
SF_OP(sf_status, sgd_step,
      (sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd, int64_t step, float *p,
       const float *g, float *buf))
SF_OP(sf_status, adam_step,
      (sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd, int32_t decoupled,
       int64_t step, float *p, const float *g, float *m, float *v))
/* flag[0] = 1 if any of x[0..n) is NaN or Inf (flag is one float on the backend, set, never cleared). */
SF_OP(sf_status, check_finite, (sf_backend *be, int64_t n, const float *x, float *flag))

/* ---- Needed only where act is 16-bit: convert (to nearest, ties to even) between storage types, for the upload,
 * the weights' 16-bit copy and read-backs; scale: x *= factor[0] over n elements of type t, factor read from backend
 * memory when the op runs (a recorded graph sees later values): fp16's loss scaling. */
SF_OPT(sf_status, convert, (sf_backend *be, int64_t n, sf_scalar from, const void *x, sf_scalar to, void *y))
SF_OPT(sf_status, scale, (sf_backend *be, int64_t n, sf_scalar t, const float *factor, void *x))

/* ---- Event-driven execution (core/spikes.h; Finkbeiner & Neftci): sums over active inputs in ascending order, so
 * deterministic, and equal to the dense ops' within float rounding. spikes_compact: x [rows, n] of 0/1 → compact form
 * (bits; idx and cnt where out has them); *count += ones; flag[0] = 1 where a value is neither 0 nor 1 (flag may be
 * NULL; never cleared). */
SF_OP(sf_status, spikes_compact,
      (sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out, float *count, float *flag))
/* bits [rows, words] → y [rows, n] of 0/1 values. */
SF_OP(sf_status, spikes_expand, (sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y))
/* Scratch bytes that spike_linear_forward and _backward need for this shape. */
SF_OP(size_t, spike_linear_workspace, (sf_backend *be, int64_t rows, int32_t in, int32_t out))
/* y[r, :] = b + Σ_{i active in row r of x} W[:, i] (x: idx and cnt; b may be NULL). */
SF_OP(sf_status, spike_linear_forward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x, const float *w, const float *b,
       float *y, void *ws))
/* The linear backward with a spike input x (its bits): dW[j, i] = Σ over rows where x_i is active of dy[r, j];
 * dx (may be NULL) = dy·W, summed over the nonzero entries of dy when dy_mask (their bits and cnt, from
 * lif_backward_masked) is given, else dense; db (may be NULL) as linear_backward. */
SF_OP(sf_status, spike_linear_backward,
      (sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x, const float *w, const float *dy,
       const sf_spikes *dy_mask, float *dx, float *dw, float *db, void *ws))
/* lif_backward over T steps of B rows of n neurons (N = B·n) that also writes where dx is nonzero (mask bits and
 * cnt) and adds their number to *count: with grad_threshold, dL/dh is zero wherever the surrogate and the
 * membrane path are both zero, and the linear layer before uses that. */
SF_OP(sf_status, lif_backward_masked,
      (sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n, const float *x, const float *h,
       const float *ds, float *dx, const sf_spikes *mask, float *count, const sf_lif_state *st))
/* Recurrent LIF (SF_LAYER_RLIF) over x [T, B, n] with V [n, n]: y_t = x_t + V·s_{t-1}, then the LIF step on y_t.
 * `sparse`: V·s_{t-1} sums the columns of V of the neurons that spiked (out->c must then hold idx and cnt: the
 * lists the next step reads), else a dense product per step. out: as lif_forward (s, h, c, spike_count). */
SF_OP(size_t, rlif_workspace, (sf_backend *be, int64_t T, int64_t B, int64_t n))
SF_OP(sf_status, rlif_forward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n, const float *x, const float *v,
       int32_t sparse, const sf_lif_out *out, void *ws))
/* BPTT through the recurrence: ds = dL/ds from above; writes dx = dL/dy and dv = dL/dV. h: the forward's potentials,
 * or NULL to rerun the forward from x with fwd_sparse (bitwise the same h). bwd_sparse: SF_RLIF_SPARSE_DV takes dV
 * from the spike bits, SF_RLIF_SPARSE_DY sums Vᵀ·dy_{t+1} over its nonzero entries only. mask, *grad_count (each may
 * be NULL): as lif_backward_masked. s_bits (may be NULL): the forward's bits [T·B][words], else remade from h. */
SF_OP(sf_status, rlif_backward,
      (sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n, const float *x, const float *h,
       const uint32_t *s_bits, const float *v, const float *ds, int32_t fwd_sparse, int32_t bwd_sparse, float *dx,
       float *dv, const sf_spikes *mask, float *grad_count, void *ws))

/* ---- Recording (optional): ops issued between graph_begin and graph_end are recorded, not run, then replayed by one
 * graph_launch with their arguments as recorded (so they must be repeatable). graph_end always ends the recording; on
 * failure *graph is NULL and ops run normally. graph_launch: SF_ERR_STATE when backend memory the graph uses has moved
 * (record again). graph_free accepts NULL. */
SF_OPT(sf_status, graph_begin, (sf_backend *be))
SF_OPT(sf_status, graph_end, (sf_backend *be, void **graph))
SF_OPT(sf_status, graph_launch, (sf_backend *be, void *graph))
SF_OPT(void, graph_free, (sf_backend *be, void *graph))

#undef SF_OP
#undef SF_OPT
