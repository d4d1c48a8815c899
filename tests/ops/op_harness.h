/* op_harness.h — the backend op harness: one case table (op_cases.c) of rows (a family of ops, shapes, precisions,
 * options), run by one runner on two sides of every case, the same random inputs on both, every output poisoned
 * first (0xff bytes: NaN in float, bf16 and fp16) so an element an op leaves unwritten fails.
 *   side 0, the reference: the fp32 CPU backend; side 1: the backend under test.
 * Two runners use it: tests/gpu/test_gpu_backend_ops.c (the CUDA backend in each precision against the CPU) and
 * tests/test_backend_ops.c (the CPU's tuned paths against their plain formulations: side 0 then runs, for a family
 * that has one, the same computation the plain way, e.g. the dense product for the event-driven one, BN then LIF for
 * the fused BN→LIF; a family without one runs the op itself on both sides, so its outputs must be complete and equal
 * to the bit). Where the reference backend lacks an optional op, its family computes the reference the plain way.
 *
 * Every family declares the ops it checks; the table must cover every op of core/backend_ops.h, and a runner fails
 * when an op the tested backend has was declared but never called (op_coverage). Inputs of activation type are
 * rounded to the tested side's storage type on the host first, and the CPU gets those rounded values, so what is
 * measured is the op's own error. */
#ifndef SF_TESTS_OP_HARNESS_H
#define SF_TESTS_OP_HARNESS_H

#include "core/backend.h"
#include "testutil.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- precisions and tolerances */

/* The precisions a row runs in (bits of sf_precision). The CPU runner runs the rows that include fp32. */
enum {
    OP_FP32 = 1 << SF_PRECISION_FP32,
    OP_TF32 = 1 << SF_PRECISION_TF32,
    OP_BF16 = 1 << SF_PRECISION_BF16,
    OP_FP16 = 1 << SF_PRECISION_FP16,
    OP_16BIT = OP_BF16 | OP_FP16,
    OP_ACT = OP_FP32 | OP_16BIT, /* ops on activations without products: tf32 runs them as fp32 does */
    OP_ALL = OP_ACT | OP_TF32,   /* products (linear, conv) */
};

/* Row flags. */
enum {
    OP_GPU_SHAPE = 1,  /* a shape chosen for a path of the CUDA kernels (chunks, padding, grid limits): the CPU
                        * runner leaves it out */
    OP_CONV_PATHS = 2, /* the GPU runner runs the row again under every convolution path and workspace cap */
    OP_SPIKE_X = 4,    /* conv: x holds spikes (0/1, marked sf_conv_shape.x_binary) */
};

/* Relative L2 error bounds of one output, per comparison: the CPU runner's tuned against plain (cpu), and the tested
 * backend against the CPU by the tested backend's precision. 0 is exact: the same bits (floats compare by value). */
typedef struct op_tol {
    double cpu, fp32, tf32, bf16, fp16;
} op_tol;

/* The bound of an output stored in 16 bits (rounding: up to 2^-8 for bf16, 2^-11 for fp16, relative), about 4× the
 * error of one rounding step on random data. */
#define OP_BF16_ACT 1e-2
#define OP_FP16_ACT 2e-3
/* An output in the activation type with bound e in fp32 and tf32 (and the CPU's exact self-comparison). */
#define OP_TOL_ACT(e) ((op_tol){0.0, (e), (e), OP_BF16_ACT, OP_FP16_ACT})
/* A float output (fp32 in every precision) with bound e. */
#define OP_TOL_F32(e) ((op_tol){0.0, (e), (e), (e), (e)})
#define OP_TOL_EXACT ((op_tol){0.0, 0.0, 0.0, 0.0, 0.0})

/* ---------------------------------------------------------------- cases */

typedef struct op_harness op_harness;
typedef struct op_case op_case;

/* A family of ops checked together (a forward and its backward, the ops of one layer kind). run is called once per
 * variant of a row (its option sweep: surrogates, resets, densities, ...). */
typedef struct op_family {
    const char *name;
    void (*run)(op_harness *h, const op_case *c, int variant);
    sf_backend_op ops[12];
    int n_ops;
} op_family;

/* Defines family `var` named `label`, run by `fn`, that checks the ops listed after it (SF_BACKEND_OP_...). */
#define OP_FAMILY(var, label, fn, ...)                                                                                 \
    const op_family var = {                                                                                            \
        label, fn, {__VA_ARGS__}, (int)(sizeof((sf_backend_op[]){__VA_ARGS__}) / sizeof(sf_backend_op))}

/* One row of the case table; each family reads the fields it needs (the family's comment says which). */
struct op_case {
    const op_family *f;
    unsigned prec;   /* OP_FP32 | ...: where it runs */
    unsigned flags;  /* OP_GPU_SHAPE | ... */
    int variants;    /* run with variant 0 .. variants - 1 (0: once, variant 0): the family's sweep (its comment says
                      * what a variant selects; the families of spike inputs: the densities of op_density) */
    int64_t T, B, n; /* neurons: T steps of B rows of n (N = B·n); images, planes or parameters elsewhere */
    int64_t rows;    /* linear: T·B rows */
    int32_t in, out; /* linear: features */
    int32_t C;       /* channels (BN, conv input) */
    int64_t hw;      /* BN: pixels per channel */
    int32_t h, w, cout, k, stride, pad; /* conv and pool */
    int32_t bias, want_dx;              /* linear and conv */
    sf_neuron_model model;
    int32_t per_channel; /* PLIF: w per channel */
    int32_t state;       /* neuron ops: carry the state in and out (sf_lif_state) */
    int32_t grad;        /* θ_grad: 0 off, 1 on, 2 with grad_cut (tu_seed_neuron) */
    int32_t parts;       /* BN→LIF: the backward in two phases as one of `parts` processes (0: one call) */
    double density;      /* spikes: the share of ones (1 one per row where one_per_row) */
    int32_t one_per_row;
    double tol; /* the fp32 bound of the family's float gradients where a row sets it (0: the family's) */
};

/* The table (op_cases.c). */
extern const op_case op_cases[];
extern const size_t op_case_count;

/* ---------------------------------------------------------------- the harness */

struct op_harness {
    sf_backend *be[2]; /* 0: the fp32 CPU backend, 1: the backend under test */
    bool cpu_mode;     /* the CPU runner: side 0 runs plain formulations */
    bool nhwc_layouts; /* the tested backend takes NHWC convolution tensors: conv runs those layouts too */
    sf_precision prec; /* of the tested backend */
    sf_scalar act;     /* its storage type */
    bool exact_parts;  /* the tested backend multiplies spike inputs in exact parts (CUDA's conv_algo = split in
                         * fp32): its convolutions of spikes meet the CPU's within 1e-6 */
    char what[224];    /* the current case, for messages */
    double worst;      /* the largest relative error of a bounded (not exact) comparison */
};

/* Sets up a harness over the two backends (which it does not own). */
void op_harness_init(op_harness *h, sf_backend *ref, sf_backend *test, sf_precision prec, bool cpu_mode);
/* Runs every row whose precisions include h->prec and whose flags include every bit of `need` and none of
 * `skip`. */
void op_run_cases(op_harness *h, unsigned need, unsigned skip);
/* Whether side s runs the plain formulation of op (the reference side in the CPU runner, or where the reference
 * backend lacks the op). */
bool op_plain(const op_harness *h, int s, sf_backend_op op);
/* Records that the tested side ran op (OP and OPV do it); op_coverage checks the record. */
void op_mark(op_harness *h, int s, sf_backend_op op);
/* Fails for every op of core/backend_ops.h that no family of the table declares, and for every declared op that the
 * backends given to op_harness_init (tested sides) implement but no case called. Prints the coverage. */
void op_coverage(const char *runner);
/* Destroys a tested backend (marks destroy). */
void op_backend_free(sf_backend *be);

/* Calls op on side s: OPV gives its value, OP checks that it returned SF_OK, OP0 is OP for ops with no argument
 * beyond the backend. */
#define OPV(h, s, op, ...) (op_mark((h), (s), SF_BACKEND_OP_##op), (h)->be[s]->op((h)->be[s], __VA_ARGS__))
#define OP(h, s, op, ...) CHECK_OK(OPV(h, s, op, __VA_ARGS__))
#define OPV0(h, s, op) (op_mark((h), (s), SF_BACKEND_OP_##op), (h)->be[s]->op((h)->be[s]))
#define OP0(h, s, op) CHECK_OK(OPV0(h, s, op))
/* Both sides, s = 0 then 1. */
#define OP_SIDES(s) for (int s = 0; s < 2; s++)

/* ---------------------------------------------------------------- tensors on both sides */

typedef enum op_kind {
    OP_ACTV, /* activations: the side's storage type */
    OP_F32,  /* float on every backend */
    OP_RAW   /* bytes */
} op_kind;

typedef struct op_ten {
    op_kind kind;
    size_t n;   /* elements (bytes for OP_RAW) */
    void *p[2]; /* side 0, side 1 */
} op_ten;

/* Inputs: host floats (bytes for OP_RAW), rounded to the tested side's type where kind is OP_ACTV; random normal
 * values; and outputs, poisoned. */
op_ten op_in(op_harness *h, op_kind kind, size_t n, const void *host);
op_ten op_randn(op_harness *h, op_kind kind, size_t n, float mean, float std, uint64_t seed);
op_ten op_out(op_harness *h, op_kind kind, size_t n);
/* New contents for both sides from host floats (rounded as op_in does); for side s alone, as they are (a plain
 * formulation's result computed on the host). */
void op_put(op_harness *h, op_ten *t, const void *host);
void op_put_side(op_harness *h, const op_ten *t, int s, const void *host);
void op_free(op_harness *h, op_ten *t);
/* Side s as host floats (bytes for OP_RAW), malloc'd. */
void *op_get(op_harness *h, const op_ten *t, int s);
/* x rounded to the tested side's storage type (to nearest, ties to even; identity in fp32). */
float op_round(const op_harness *h, float x);

#define OP_P(t, s) ((float *)(t).p[s])
#define OP_U8(t, s) ((uint8_t *)(t).p[s])
#define OP_U32(t, s) ((uint32_t *)(t).p[s])
#define OP_I32(t, s) ((int32_t *)(t).p[s])

/* The compact form of a [rows, n] spike tensor on both sides (core/spikes.h; lists where asked). */
typedef struct op_spk {
    op_ten bits, idx, cnt;
    int64_t rows, n;
} op_spk;

op_spk op_spk_out(op_harness *h, int64_t rows, int64_t n, bool lists);
void op_spk_free(op_harness *h, op_spk *c);
/* Side s's sf_spikes (lists: with idx and cnt). */
sf_spikes op_spk_at(const op_spk *c, int s, bool lists);

/* Scratch of `bytes` on side s followed by a guard of known bytes, which op_ws_free checks (a pass that writes past
 * its stated workspace fails). */
typedef struct op_ws {
    void *p;
    size_t bytes;
} op_ws;
op_ws op_ws_alloc(op_harness *h, int s, size_t bytes);
void op_ws_free(op_harness *h, int s, op_ws *ws, const char *pass);

/* ---------------------------------------------------------------- comparisons (side 1 against side 0) */

/* Relative L2 error within the bound of this comparison (op_tol), exact where it is 0; a NaN or unwritten element
 * on either side fails. Returns the error. */
double op_cmp(op_harness *h, const char *name, const op_ten *t, op_tol tol);
/* The same for the tested side's result given as host floats (read back from another layout) against side 0's. */
double op_cmp_host(op_harness *h, const char *name, const float *got, const op_ten *ref, op_tol tol);
/* The bytes of a raw tensor equal. */
void op_cmp_raw(op_harness *h, const char *name, const op_ten *t);
/* Side 1 is side 0's float result rounded once to its type (kernels that sum in the CPU op's order). */
void op_cmp_rounded(op_harness *h, const char *name, const op_ten *t);
/* Compact spikes equal: bits and counts, and the lists where they are defined (the first cnt entries of each
 * segment). */
void op_cmp_spk(op_harness *h, const char *name, const op_spk *c, bool lists);
/* A mask of nonzero gradients ([rows, n] bits, with its count) marks exactly the nonzero entries of its side's dx
 * on both sides, and the sides' masks differ only where side 0's value is below 2^-22 in magnitude under 16-bit
 * storage (fp16 rounds those to 0 or a subnormal the tested side's dx may not reach), and, against another backend,
 * in at most one element in 10^4 (near-threshold elements decided by sums in another order). */
void op_cmp_mask(op_harness *h, const char *name, const op_spk *mask, const op_ten *dx, const op_ten *count);
/* Tensors of one side bitwise equal (a tested backend's two ways to the same result). */
void op_same(op_harness *h, int s, const char *name, const op_ten *a, const op_ten *b);
/* The number of elements that differ between the sides (spikes that flipped). */
int64_t op_count_diff(op_harness *h, const op_ten *t);

/* The spike density of variant v of a row: where the row sweeps (variants > 0) the v-th of none, one per row, 5%,
 * 50% and all, else the row's own. */
void op_density(const op_case *c, int v, double *density, bool *one_per_row);
#define OP_DENSITIES 5

/* Host data: N(mean, std) floats (malloc'd), and spikes: 0/1 at `density` (one per row where one_per_row). */
float *op_host_randn(size_t n, float mean, float std, uint64_t seed);
float *op_host_spikes(int64_t rows, int64_t n, double density, bool one_per_row, uint64_t seed);
/* The compact form of [rows, n] values on the host: bits of the nonzero ones, their lists (idx may be NULL) and
 * segment counts (cnt may be NULL); returns the number of nonzero values. */
int64_t op_host_pack(int64_t rows, int64_t n, const float *x, uint32_t *bits, uint8_t *idx, int32_t *cnt);
/* The compact form of x's side-0 values written to c's side 0 (a plain formulation of spikes_compact). */
void op_pack_side0(op_harness *h, const op_ten *x, const op_spk *c, bool lists);

#endif
