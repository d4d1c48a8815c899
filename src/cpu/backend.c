/* backend.c — the CPU backend: host memory (64-byte aligned, so vector loads never straddle cache lines) and
 * the op table filled with the CPU kernels of cpu_neuron.h and cpu_layers.h. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_layers.h"
#include "cpu/cpu_neuron.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static sf_status cpu_alloc(sf_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    /* Round up to whole cache lines; zero bytes still gives a distinct, freeable pointer. */
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    if (rounded < bytes || posix_memalign(out, 64, rounded) != 0) {
        *out = NULL;
        return sf_fail(SF_ERR_NOMEM, "CPU backend: cannot allocate %zu bytes of host memory", bytes);
    }
    return SF_OK;
}

static void cpu_release(sf_backend *be, void *p) { free(p); }

static sf_status cpu_copy(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes) memmove(dst, src, bytes);
    return SF_OK;
}

static sf_status cpu_zero(sf_backend *be, void *dst, size_t bytes)
{
    if (bytes) memset(dst, 0, bytes);
    return SF_OK;
}

static sf_status cpu_sync(sf_backend *be) { return SF_OK; } /* every CPU op has finished when it returns */

static void cpu_destroy(sf_backend *be) { free(be); }

sf_status sf_cpu_backend_create(sf_backend **out)
{
    *out = NULL;
    sf_backend *be = calloc(1, sizeof *be);
    if (!be) return sf_fail(SF_ERR_NOMEM, "CPU backend: cannot allocate the backend object");
    be->name = "cpu";
    be->ctx = NULL;

    be->alloc = cpu_alloc;
    be->release = cpu_release;
    be->copy_from_host = cpu_copy; /* host and backend memory are the same on the CPU */
    be->copy_to_host = cpu_copy;
    be->copy = cpu_copy;
    be->zero = cpu_zero;
    be->sync = cpu_sync;
    be->destroy = cpu_destroy;

    be->lif_forward = sf_cpu_op_lif_forward;
    be->lif_backward = sf_cpu_op_lif_backward;
    be->bn_stats = sf_cpu_op_bn_stats;
    be->bn_forward = sf_cpu_op_bn_forward;
    be->bn_backward = sf_cpu_op_bn_backward;
    be->bn_update_running = sf_cpu_op_bn_update_running;
    be->bn_lif_forward = sf_cpu_op_bn_lif_forward;
    be->bn_lif_backward = sf_cpu_op_bn_lif_backward;
    be->bn_lif_scratch = sf_cpu_op_bn_lif_scratch;
    be->bn_stats_merge = sf_cpu_op_bn_stats_merge;

    be->linear_forward = sf_cpu_op_linear_forward;
    be->linear_backward = sf_cpu_op_linear_backward;
    be->binary_linear_forward = sf_cpu_op_linear_forward; /* the CPU's BLAS has no faster path for 0/1 operands */
    be->binary_linear_backward = sf_cpu_op_linear_backward;
    be->conv_workspace = sf_cpu_op_conv_workspace;
    be->conv_forward = sf_cpu_op_conv_forward;
    be->conv_backward = sf_cpu_op_conv_backward;
    be->avgpool_forward = sf_cpu_op_avgpool_forward;
    be->avgpool_backward = sf_cpu_op_avgpool_backward;
    be->maxpool_forward = sf_cpu_op_maxpool_forward;
    be->maxpool_backward = sf_cpu_op_maxpool_backward;
    be->dropout_forward = sf_cpu_op_dropout_forward;
    be->dropout_backward = sf_cpu_op_dropout_backward;
    be->add = sf_cpu_op_add;
    be->axpy = sf_cpu_op_axpy;
    be->u8_to_act = sf_cpu_op_u8_to_f32;
    be->act_to_u8 = sf_cpu_op_f32_to_u8;
    be->leaky_forward = sf_cpu_op_leaky_forward;
    be->leaky_backward = sf_cpu_op_leaky_backward;
    be->softmax_xent = sf_cpu_op_softmax_xent;
    be->mse_rate = sf_cpu_op_mse_rate;
    be->sgd_step = sf_cpu_op_sgd_step;
    be->adam_step = sf_cpu_op_adam_step;
    be->check_finite = sf_cpu_op_check_finite;

    be->host_memory = 1;
    be->spikes_compact = sf_cpu_op_spikes_compact;
    be->spikes_expand = sf_cpu_op_spikes_expand;
    be->spike_linear_workspace = sf_cpu_op_spike_linear_workspace;
    be->spike_linear_forward = sf_cpu_op_spike_linear_forward;
    be->spike_linear_backward = sf_cpu_op_spike_linear_backward;
    be->lif_backward_masked = sf_cpu_op_lif_backward_masked;
    be->rlif_workspace = sf_cpu_op_rlif_workspace;
    be->rlif_forward = sf_cpu_op_rlif_forward;
    be->rlif_backward = sf_cpu_op_rlif_backward;

    *out = be;
    return SF_OK;
}
