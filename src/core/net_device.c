/* net_device.c — a compiled network run on tensors another framework holds on the net's device (spikefuse.torch's
 * Network): the input and the output's gradient come in as float32 device memory, the output and the input's
 * gradient go back there, and the parameters are addressed in place. Between those copies the forward and the
 * backward replay their recordings as the training step does (net_step.c), and nothing waits for the device. */
#include "core/error.h"
#include "core/layer.h"

static sf_status require_plain(const sf_net *net, const char *what)
{
    if (!net->compiled) return sf_fail(SF_ERR_STATE, "%s: the network is not compiled (call sf_net_compile)", what);
    if (sf_net_pipelined(net))
        return sf_fail(SF_ERR_UNSUPPORTED, "%s: the network's time steps are split over processes", what);
    if (sf_net_scales_loss(net))
        return sf_fail(SF_ERR_UNSUPPORTED, "%s: fp16 needs the engine's own loss scaling (sf_net_train_step); use bf16 "
                                           "where the gradient of the output comes from outside", what);
    return SF_OK;
}

/* n float32 values at src into dst in the act type (the same bytes under fp32), both on the backend. */
static sf_status put_act(sf_backend *be, int64_t n, const float *src, void *dst)
{
    if (be->act == SF_SCALAR_F32) return be->copy(be, dst, src, (size_t)n * sizeof(float));
    return be->convert(be, n, SF_SCALAR_F32, src, be->act, dst);
}

static sf_status get_act(sf_backend *be, int64_t n, const void *src, float *dst)
{
    if (be->act == SF_SCALAR_F32) return be->copy(be, dst, src, (size_t)n * sizeof(float));
    return be->convert(be, n, be->act, src, SF_SCALAR_F32, dst);
}

sf_status sf_net_set_input_grad(sf_net *net, int32_t on)
{
    if (net->input_grad != (on != 0)) net->compiled = false; /* the plan changes */
    net->input_grad = on != 0;
    return SF_OK;
}

sf_status sf_net_set_static_input(sf_net *net, int32_t on)
{
    if (net->static_input != (on != 0)) net->compiled = false; /* the plan changes */
    net->static_input = on != 0;
    return SF_OK;
}

sf_status sf_net_forward_device(sf_net *net, const float *x, int32_t training, float *y)
{
    SF_TRY(require_plain(net, "forward"));
    if (!x) return sf_fail(SF_ERR_INVALID, "forward: input is NULL");
    sf_backend *be = net->be;
    SF_TRY(put_act(be, sf_net_rows(net) * net->tensors[0].per_sample, x, sf_net_act(net, 0)));
    net->have_input = true;
    SF_TRY(sf_net_choose_paths(net));
    SF_TRY(sf_net_run_body(net, training ? SF_BODY_FORWARD_TRAINING : SF_BODY_FORWARD_EVAL));
    if (net->tensors[0].compact) { /* input_spikes: the forward flagged any value other than 0 and 1 */
        float flag;
        SF_TRY(be->copy_to_host(be, &flag, net->stats + SF_STAT_INPUT_BAD, sizeof flag));
        if (flag != 0.0f)
            return sf_fail(SF_ERR_INVALID, "forward: the input holds values other than 0 and 1, but the network "
                                           "takes spikes (input_spikes)");
    }
    if (!y) return SF_OK;
    return get_act(be, sf_net_rows(net) * net->tensors[net->n_layers].per_sample, sf_net_act(net, net->n_layers), y);
}

sf_status sf_net_backward_device(sf_net *net, const float *dy, float *dx)
{
    SF_TRY(require_plain(net, "backward"));
    if (!net->have_forward || !net->last_training)
        return sf_fail(SF_ERR_STATE, "backward: run a training forward first (the last forward was %s)",
                       net->have_forward ? "an evaluation" : "none since the compile, or it failed");
    if (dx && !net->input_grad)
        return sf_fail(SF_ERR_STATE, "backward: the input's gradient was not planned (sf_net_set_input_grad before "
                                     "sf_net_compile)");
    const int32_t L = net->n_layers;
    float *g = sf_net_grad(net, L);
    if (!g) return sf_fail(SF_ERR_STATE, "backward: nothing before the output has parameters or a wanted gradient");
    if (!dy) return sf_fail(SF_ERR_INVALID, "backward: dy is NULL");
    sf_backend *be = net->be;
    SF_TRY(put_act(be, sf_net_rows(net) * net->tensors[L].per_sample, dy, g));
    SF_TRY(sf_net_run_body(net, SF_BODY_BACKWARD));
    if (!be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    if (!dx) return SF_OK;
    return get_act(be, sf_net_rows(net) * net->tensors[0].per_sample, sf_net_grad(net, 0), dx);
}

sf_status sf_net_read_output_grad(const sf_net *net, float *out)
{
    if (!net->have_loss || !net->last_training)
        return sf_fail(SF_ERR_STATE, "read_output_grad: run a training forward and the loss first");
    const float *g = sf_net_grad((sf_net *)net, net->n_layers);
    if (!g || sf_net_pipelined(net) || net->be->act != SF_SCALAR_F32)
        return sf_fail(SF_ERR_UNSUPPORTED, "read_output_grad: only for a net of one process in fp32 whose output "
                                           "takes a gradient");
    return net->be->copy_to_host(net->be, out, g,
                                 (size_t)(sf_net_rows(net) * net->tensors[net->n_layers].per_sample) * sizeof(float));
}

sf_status sf_net_params_changed(sf_net *net)
{
    if (!net->params_ready) return SF_OK;
    return sf_net_refresh_params_act(net, 0, net->n_params);
}
