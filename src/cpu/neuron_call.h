/* neuron_call.h — one call of a CPU neuron op (the LIF op and the fused BN→neuron op, any model): what the model
 * needs checked and prepared (a PLIF's coefficients from its w), the forward of one block of neurons, the dy of one
 * block for the backward, and a PLIF's dw from its per-neuron sums. Internal to src/cpu. */
#ifndef SF_CPU_NEURON_CALL_H
#define SF_CPU_NEURON_CALL_H

#include "cpu/neuron_block.h"

typedef struct sf_neuron_call {
    const sf_lif_params *p;
    sf_lif_coeffs k;          /* a PLIF with one w: a and c from it */
    int64_t T, N;             /* N neurons per step */
    const sf_lif_state *st;   /* NULL: none */
    int32_t w_channels;       /* PLIF: w's channels (1 for one w per layer) and their runs of w_hw neurons */
    int64_t w_hw;
    float *ch;                /* PLIF with a w per channel: a [w_channels], then c [w_channels]; else NULL */
    sf_block_backward_fn back;
} sf_neuron_call;

/* Checks p, the shape and what the model needs from st (a PLIF's w; its channels must be those of bn_c and bn_hw
 * when the call is BN-fused, bn_c = 0 when not), and prepares the call. `op` names the op in messages. */
sf_status sf_neuron_call_init(sf_neuron_call *nc, const char *op, const sf_lif_params *p, int64_t T, int64_t N,
                              const sf_lif_state *st, int32_t bn_c, int64_t bn_hw);
void sf_neuron_call_free(sf_neuron_call *nc);

/* Floats of per-thread scratch the backward of one block needs: T rows of SF_CPU_BLOCK (h, then dy), and the ALIF's
 * θ rows after them. */
int64_t sf_neuron_scratch_floats(const sf_neuron_call *nc);

/* Forward of the block of nb <= SF_CPU_BLOCK neurons from n0 over all T steps: y = x, or x·sc + sh with the
 * block's own BN scale and shift (nb values each); writes what `out` asks for, the state's v_out and, where emit is
 * given, the compact form of the spikes. Returns the number of spikes. */
int64_t sf_neuron_block_forward(const sf_neuron_call *nc, int64_t n0, int nb, const float *x, const float *sc,
                                const float *sh, const sf_lif_out *out, const sf_block_emit *emit);

/* The block's dy_t = c·dh_t into scratch rows [T × SF_CPU_BLOCK] (sf_neuron_scratch_floats per thread), from h (the
 * forward's, row stride N) or, when h is NULL, from h recomputed from x (and sc, sh as in the forward). The state's
 * dv_out is written when write_state is set. A PLIF adds Σ_t dh_t·∂h_t/∂k of each neuron to dk [nb]. */
void sf_neuron_block_dy(const sf_neuron_call *nc, int64_t n0, int nb, const float *x, const float *h,
                        const float *sc, const float *sh, const float *ds, float *scratch, int write_state,
                        double *dk);

/* A PLIF's per-neuron sums: *dk = N zeroed doubles (free with free()); after every block's dy, st->dw = the sum
 * over each channel's neurons, in neuron order (the same for any thread count), times k(1 - k). */
sf_status sf_neuron_plif_sums(const sf_neuron_call *nc, double **dk);
sf_status sf_neuron_plif_dw(const sf_neuron_call *nc, const double *dk);

static inline int sf_neuron_is_plif(const sf_neuron_call *nc) { return nc->p->model == SF_NEURON_PLIF; }

#endif
