/* net_backward.c — the backward pass: the readout's, then the layers' in reverse order, each by its kind (core/layers/,
 * which rebuild the inputs they read through core/layer.c), handing gradients over as they become final. */
#include "core/error.h"
#include "core/layer.h"

#include <time.h>

/* Layer i's backward by its kind, where it runs: its output takes a gradient, and it is neither an alias nor run by
 * the next layer. */
static sf_status layer_backward(sf_net *net, int32_t i)
{
    sf_net_layer *l = &net->layers[i];
    if (sf_kind_has(l, SF_KIND_ALIAS) || l->absorbed || !net->tensors[l->out].requires_grad) return SF_OK;
    return l->ops->backward(net, l);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

sf_status sf_net_backward(sf_net *net)
{
    if (!net->have_loss) return sf_fail(SF_ERR_STATE, "backward: run a training forward and the loss first");
    sf_backend *be = net->be;
    float *g = sf_net_grad(net, net->n_layers);
    if (net->p.readout == SF_READOUT_LEAKY) {
        int32_t K = sf_net_classes(net);
        float a = 1.0f - 1.0f / net->p.readout_tau;
        float *dout = sf_net_pipelined(net) ? net->dout_all : g;
        if (dout) SF_TRY(be->leaky_backward(be, net->T_all, net->B * K, a, 1.0f - a, net->dreadout, dout));
    }
    SF_TRY(sf_net_scatter_output_grad(net, g));
    return sf_net_backward_layers(net);
}

sf_status sf_net_backward_layers(sf_net *net)
{
    sf_backend *be = net->be;
    int64_t final_from = net->n_params;
    for (int32_t i = net->n_layers - 1; i >= 0; i--) {
        if (!net->profiling) {
            SF_TRY(layer_backward(net, i));
        } else {
            SF_TRY(be->sync(be));
            double t0 = now_ms();
            SF_TRY(layer_backward(net, i));
            SF_TRY(be->sync(be));
            net->layers[i].timing.backward_ms += now_ms() - t0;
        }
        SF_TRY(sf_net_grads_ready(net, i, &final_from));
    }
    SF_TRY(sf_net_grads_done(net));
    net->have_backward = true;
    if (be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    return SF_OK;
}
