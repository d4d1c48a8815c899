/* testutil.h — small helpers for the C tests: checks that count failures, fixture loading, error norms. */
#ifndef SF_TESTUTIL_H
#define SF_TESTUTIL_H

#include "io/safetensors.h"
#include "spikefuse.h"

#include <stdint.h>
#include <stdio.h>

extern int tu_checks, tu_failures;

#define CHECK(cond, ...)                                                                                            \
    do {                                                                                                            \
        tu_checks++;                                                                                                \
        if (!(cond)) {                                                                                              \
            tu_failures++;                                                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                                           \
            fputc('\n', stderr);                                                                                    \
        }                                                                                                           \
    } while (0)

#define CHECK_OK(expr)                                                                                              \
    do {                                                                                                            \
        sf_status tu_s_ = (expr);                                                                                   \
        CHECK(tu_s_ == SF_OK, "%s -> %s: %s", #expr, sf_status_str(tu_s_), sf_last_error());                        \
    } while (0)

/* Loads $SF_FIXTURES/<file>; aborts the test with a clear message if it is missing. */
sf_safetensors *tu_fixture(const char *file);
/* Tensor `name` of a fixture as freshly malloc'd float / double arrays of exactly numel elements. */
float *tu_get_f32(const sf_safetensors *st, const char *name, int64_t numel);
double *tu_get_f64(const sf_safetensors *st, const char *name, int64_t numel);
/* ‖got − ref‖₂ / max(‖ref‖₂, tiny); NaN in got gives +inf. */
double tu_rel_err(const float *got, const double *ref, int64_t n);
/* The same against a float reference (one float computation against another). */
double tu_rel_err_f32(const float *got, const float *ref, int64_t n);
/* Compares and records one check: relative error within tol. */
void tu_expect_close(const char *what, const float *got, const double *ref, int64_t n, double tol);
/* The same for a double result (the float64 calls). */
void tu_expect_close_f64(const char *what, const double *got, const double *ref, int64_t n, double tol);
/* Counts positions where got and ref differ (for spikes, which must match exactly). */
int64_t tu_count_diff(const float *got, const double *ref, int64_t n);
/* Deterministic test data: N(mean, std) via Box-Muller from a counter hash. */
void tu_randn(float *x, int64_t n, float mean, float std, uint64_t seed);
/* Neuron parameters from a fixture's TU_LIF_PARAMS-number vector (tests/ref/gen_neuron.py: tau, decay, decay_input,
 * v_threshold, v_reset, soft_reset, detach_reset, surrogate, alpha, use_grad_threshold, grad_threshold, model,
 * per_channel, rho, tau_adapt, beta, grad_cut). */
#define TU_LIF_PARAMS 17
void tu_lif_params_of(const double *v, sf_lif_params *p);
/* Appends a layer of the small test nets: conv 3×3 (padding 1, stride `stride`, 0 meaning 1) with n filters,
 * linear with n outputs, max-pool 2×2, dropout p = 0.2, or any other kind with its defaults. */
void tu_add_layer(sf_net *net, sf_layer_kind kind, int32_t n, int32_t stride);
/* Appends the layers of a small SEW-ResNet (tests/ref/gen_sew.py's layers 0-19) to a net of any image input: a stem
 * conv 3×3 (4 filters, no bias) → BN → neuron (tensor 3); a basic block conv → BN → neuron → conv → BN → neuron
 * (t9), connect `first` of t9 with t3 (t10); SEW's downsampling shortcut conv 1×1 stride 2 (6 filters) → BN →
 * neuron (t13) from t10 beside the strided branch from t10 (conv 3×3/2 → BN → neuron → conv → BN → neuron, t19),
 * connect `second` of t19 with t13 (t20). Every neuron layer is `neuron`. */
void tu_add_sew_blocks(sf_net *net, const sf_layer_desc *neuron, sf_connect first, sf_connect second);
/* Seed paper 000's neuron (tau 2, hard reset, detach_reset, fast_sigmoid β 10) with grad_mode 0: the exact
 * gradient, 1: grad_threshold θ, 2: grad_threshold θ with grad_cut. */
void tu_seed_neuron(sf_lif_params *p, int grad_mode, float theta);
/* Ten training steps of net on a fixture's batch ("x", nx floats, and "labels") follow its "losses" within 1e-4
 * (relative); `what` names the case in messages. */
void tu_check_losses(sf_net *net, const sf_safetensors *fx, int64_t nx, const char *what);
/* One step on the fixture's x (nx floats) and labels against its loss, gradients and BN buffers after the step. */
void tu_check_fixture_step(sf_net *net, const sf_safetensors *fx, int64_t nx, const char *what);
/* Every parameter of a net from a fixture, by name ("0.weight", ...). */
void tu_load_params(sf_net *net, const sf_safetensors *fx);
/* Parsing `text` as config file "bad.ini" fails with SF_ERR_INVALID and a message that starts "bad.ini:line: "
 * and contains needle. */
void tu_expect_config_error(const char *text, int line, const char *needle);
/* Every tensor of a role of a network, concatenated in order, as a malloc'd array of *n floats. */
float *tu_net_read_role(sf_net *net, sf_tensor_role role, int64_t *n);
/* Prints "<name>: N passed, N failed" and returns the process exit code. */
int tu_finish(const char *name);

#endif
