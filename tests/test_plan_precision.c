/* test_plan_precision.c — the memory plan and the engine's bookkeeping under 16-bit activations, without a GPU: a
 * plan-only backend (host memory, the CPU's conv workspace sizes, act = bf16 or fp16, no kernels) compiles the same
 * nets as the CPU backend. Checked: every activation and gradient buffer is half the fp32 one, h (full mode), BN
 * statistics, spike bytes and argmax keep their size, so the saved bytes drop by exactly half the act-typed kept
 * bytes; parameters gain their 16-bit copy (params 1.5×, gradients and optimizer state unchanged); a 16-bit upload
 * stages its float input; writing a parameter rewrites exactly its range of the 16-bit copy; fp16 starts at loss
 * scale 2^16 and writes it (and its reciprocal) for the device, other precisions keep 1. Also: a conv that writes
 * its input's gradient first gets that input rebuilt in the gradient's buffer (no buffer of its own). An
 * event-driven net (input spikes → sparse linear → θ_grad LIF → sparse linear → RLIF → linear) halves the same
 * buffers, and its compact spikes (bits, lists, counts), gradient masks and the sparse ops' workspaces keep their
 * size. */
#include "core/net_internal.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_layers.h"
#include "cpu/cpu_neuron.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the plan-only backend */

static struct {
    int calls;
    int64_t n;
    sf_scalar from, to;
    const void *x;
    void *y;
} last_convert;

static sf_status stub_alloc(sf_backend *be, size_t bytes, void **out)
{
    *out = calloc(1, bytes ? bytes : 1);
    return *out ? SF_OK : SF_ERR_NOMEM;
}
static void stub_release(sf_backend *be, void *p) { free(p); }
static sf_status stub_copy(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes) memmove(dst, src, bytes);
    return SF_OK;
}
static sf_status stub_zero(sf_backend *be, void *dst, size_t bytes)
{
    if (bytes) memset(dst, 0, bytes);
    return SF_OK;
}
static void stub_destroy(sf_backend *be) { free(be); }
static sf_status stub_convert(sf_backend *be, int64_t n, sf_scalar from, const void *x, sf_scalar to, void *y)
{
    last_convert.calls++;
    last_convert.n = n, last_convert.from = from, last_convert.to = to, last_convert.x = x, last_convert.y = y;
    return SF_OK;
}

static sf_backend *stub_backend(sf_scalar act)
{
    sf_backend *be = calloc(1, sizeof *be);
    if (!be) return NULL;
    be->name = "plan-only";
    be->act = act;
    be->alloc = stub_alloc;
    be->release = stub_release;
    be->copy_from_host = be->copy_to_host = be->copy = stub_copy;
    be->zero = stub_zero;
    be->destroy = stub_destroy;
    be->conv_workspace = sf_cpu_op_conv_workspace; /* sizes only: the same on both sides */
    be->spike_linear_workspace = sf_cpu_op_spike_linear_workspace;
    be->rlif_workspace = sf_cpu_op_rlif_workspace;
    be->bn_lif_scratch = sf_cpu_op_bn_lif_scratch;
    be->convert = stub_convert;
    return be;
}

/* ---------------------------------------------------------------- nets */


/* conv → BN → LIF → conv(stride 2) → BN → LIF → maxpool → flatten → linear → LIF → linear, T = 4, B = 4: every
 * buffer a multiple of 512 bytes, so halving keeps the plan's 256-byte alignment exact. */
static sf_net *make(sf_backend *be, sf_memory_mode mode)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = mode;
    p.sparse = SF_SPARSE_OFF; /* the dense plan (make_sparse has the event-driven one); auto would time kernels */
    p.in_channels = 2, p.in_height = 16, p.in_width = 16;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create_on(&p, be, &net));
    if (!net) return NULL;
    tu_add_layer(net, SF_LAYER_CONV2D, 8, 1);
    tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
    tu_add_layer(net, SF_LAYER_LIF, 0, 0);
    tu_add_layer(net, SF_LAYER_CONV2D, 16, 2);
    tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
    tu_add_layer(net, SF_LAYER_LIF, 0, 0);
    tu_add_layer(net, SF_LAYER_MAXPOOL2D, 0, 0);
    tu_add_layer(net, SF_LAYER_FLATTEN, 0, 0);
    tu_add_layer(net, SF_LAYER_LINEAR, 64, 0);
    tu_add_layer(net, SF_LAYER_LIF, 0, 0);
    tu_add_layer(net, SF_LAYER_LINEAR, 16, 0);
    CHECK_OK(sf_net_compile(net, 4, 4));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.momentum = 0.9f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* 128 input spikes → linear 64 → LIF (θ_grad: its input's gradient gets a mask) → linear 128 → RLIF → linear 16,
 * sparse on, T = 4, B = 4 (every act-typed buffer a multiple of 512 bytes). */
static sf_net *make_sparse(sf_backend *be, sf_memory_mode mode)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = mode;
    p.sparse = SF_SPARSE_ON;
    p.input_spikes = 1;
    p.in_channels = 128, p.in_height = 1, p.in_width = 1;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create_on(&p, be, &net));
    if (!net) return NULL;
    sf_layer_desc lif, rlif;
    sf_layer_default_desc(SF_LAYER_LIF, &lif);
    lif.lif.use_grad_threshold = 1;
    sf_layer_default_desc(SF_LAYER_RLIF, &rlif);
    tu_add_layer(net, SF_LAYER_LINEAR, 64, 0);
    CHECK_OK(sf_net_add(net, &lif, NULL));
    tu_add_layer(net, SF_LAYER_LINEAR, 128, 0);
    CHECK_OK(sf_net_add(net, &rlif, NULL));
    tu_add_layer(net, SF_LAYER_LINEAR, 16, 0);
    CHECK_OK(sf_net_compile(net, 4, 4));
    return net;
}

static bool same_slot_bytes(sf_slot a, sf_slot b) { return a.bytes == b.bytes && a.where == b.where; }

/* The event-driven bookkeeping of the sparse net: compact forms, masks and workspaces as in fp32. */
static void compare_sparse_slots(const sf_net *a, const sf_net *b, const char *m)
{
    int compact = 0, masks = 0;
    for (int32_t t = 0; t <= a->n_layers; t++) {
        const sf_net_tensor *x = &a->tensors[t], *y = &b->tensors[t];
        compact += x->compact, masks += x->gmask;
        CHECK(x->compact == y->compact && x->gmask == y->gmask && same_slot_bytes(x->cbits, y->cbits) &&
                  same_slot_bytes(x->cidx, y->cidx) && same_slot_bytes(x->ccnt, y->ccnt) &&
                  same_slot_bytes(x->gbits, y->gbits) && same_slot_bytes(x->gcnt, y->gcnt),
              "%s: tensor %d: compact spikes or gradient mask planned differently", m, t);
    }
    CHECK(compact == 3 && masks == 1, "%s: %d compact tensors, %d gradient masks (expected 3, 1)", m, compact, masks);
    for (int32_t i = 0; i < a->n_layers; i++) {
        const sf_net_layer *x = &a->layers[i], *y = &b->layers[i];
        CHECK(x->sparse == y->sparse && same_slot_bytes(x->sws_f, y->sws_f) && same_slot_bytes(x->sws_b, y->sws_b),
              "%s: layer %d: sparse workspaces differ", m, i);
        CHECK(y->dx_tmp.bytes * 2 == x->dx_tmp.bytes, "%s: layer %d: dx scratch %zu bytes, fp32 %zu", m, i,
              y->dx_tmp.bytes, x->dx_tmp.bytes);
    }
    CHECK(a->layers[2].sws_f.bytes > 0 && a->layers[3].sws_f.bytes > 0 && a->layers[2].in_float.bytes > 0,
          "%s: the sparse linear and RLIF layers have no workspace, or no buffer to expand spikes into", m);
}

static void compare_plans(sf_scalar act, sf_memory_mode mode, bool sparse)
{
    sf_backend *cpu = NULL;
    CHECK_OK(sf_cpu_backend_create(&cpu));
    sf_net *(*build)(sf_backend *, sf_memory_mode) = sparse ? make_sparse : make;
    sf_net *a = build(cpu, mode), *b = build(stub_backend(act), mode);
    if (!a || !b) return;
    const char *m = sparse ? (mode == SF_MEMORY_FULL ? "sparse, full" : "sparse, recompute")
                           : (mode == SF_MEMORY_FULL ? "full" : "recompute");
    size_t kept_act = 0;
    for (int32_t t = 0; t <= a->n_layers; t++) {
        const sf_net_tensor *x = &a->tensors[t], *y = &b->tensors[t];
        CHECK(x->keep == y->keep, "%s: tensor %d kept differently", m, t);
        CHECK(y->act.bytes * 2 == x->act.bytes, "%s: tensor %d: %zu activation bytes, fp32 %zu", m, t, y->act.bytes,
              x->act.bytes);
        CHECK(y->grad.bytes * 2 == x->grad.bytes, "%s: tensor %d: %zu gradient bytes, fp32 %zu", m, t, y->grad.bytes,
              x->grad.bytes);
        CHECK(y->bytes.bytes == x->bytes.bytes, "%s: tensor %d: spike bytes differ", m, t);
        if (x->act.where == SF_ARENA_SAVED) kept_act += x->act.bytes;
    }
    for (int32_t i = 0; i < a->n_layers; i++) {
        const sf_net_layer *x = &a->layers[i], *y = &b->layers[i];
        CHECK(y->h.bytes == x->h.bytes && y->mean.bytes == x->mean.bytes && y->argmax.bytes == x->argmax.bytes,
              "%s: layer %d: float or byte buffers changed size", m, i);
        CHECK(y->in_float.bytes * 2 == x->in_float.bytes, "%s: layer %d: rebuilt input %zu bytes, fp32 %zu", m, i,
              y->in_float.bytes, x->in_float.bytes);
    }
    if (sparse)
        compare_sparse_slots(a, b, m);
    else
        CHECK(a->layers[3].rebuild_in_grad && b->layers[3].rebuild_in_grad && a->layers[3].in_float.bytes == 0,
              "%s: the second conv's input is not rebuilt in its gradient's buffer", m);
    sf_memory_plan pa, pb;
    CHECK_OK(sf_net_memory_plan(a, &pa));
    CHECK_OK(sf_net_memory_plan(b, &pb));
    /* (the sparse net in full mode keeps bits and h only) */
    CHECK((kept_act > 0 || (sparse && mode == SF_MEMORY_FULL)) && pb.saved + kept_act / 2 == pa.saved,
          "%s: saved %zu bytes, fp32 %zu, act-typed kept %zu", m, pb.saved, pa.saved, kept_act);
    CHECK(pb.params * 2 == pa.params * 3 && pb.grads == pa.grads && pb.optimizer == pa.optimizer &&
              pb.buffers == pa.buffers,
          "%s: params %zu / %zu, grads %zu / %zu, optimizer %zu / %zu", m, pb.params, pa.params, pb.grads, pa.grads,
          pb.optimizer, pa.optimizer);
    CHECK(pb.workspace < pa.workspace && b->input_f32 != NULL && a->input_f32 == NULL,
          "%s: workspace %zu, fp32 %zu; staging %p / %p", m, pb.workspace, pa.workspace, (void *)b->input_f32,
          (void *)a->input_f32);
    CHECK(pb.total == pb.params + pb.grads + pb.optimizer + pb.buffers + pb.saved + pb.workspace, "%s: total", m);
    printf("%s, %s: saved %zu bytes (fp32 %zu, %.2fx), workspace %zu (%zu), total %zu (%zu, %.2fx)\n",
           act == SF_SCALAR_BF16 ? "bf16" : "fp16", m, pb.saved, pa.saved, (double)pb.saved / (double)pa.saved,
           pb.workspace, pa.workspace, pb.total, pa.total, (double)pb.total / (double)pa.total);
    sf_net_free(a);
    sf_net_free(b);
}

/* Writing one parameter tensor rewrites its range of the 16-bit copy, and only that. */
static void test_refresh(void)
{
    sf_net *net = make(stub_backend(SF_SCALAR_BF16), SF_MEMORY_RECOMPUTE);
    if (!net) return;
    CHECK(net->params_act != NULL, "no 16-bit parameter copy");
    sf_tensor_info ti;
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, 4, &ti)); /* after conv and BN weights and biases: "3.weight" */
    CHECK(strcmp(ti.name, "3.weight") == 0, "parameter 4 is %s", ti.name);
    float *v = calloc((size_t)ti.numel, sizeof *v);
    last_convert.calls = 0;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, 4, v));
    int64_t off = net->layers[3].w_off;
    CHECK(last_convert.calls == 1 && last_convert.n == ti.numel && last_convert.from == SF_SCALAR_F32 &&
              last_convert.to == SF_SCALAR_BF16 && last_convert.x == net->params + off &&
              last_convert.y == (char *)net->params_act + 2 * off,
          "writing %s converted %lld values (%d calls) from %p to %p", ti.name, (long long)last_convert.n,
          last_convert.calls, last_convert.x, last_convert.y);
    last_convert.calls = 0;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_BUFFER, 0, v));
    CHECK(last_convert.calls == 0, "writing a BN buffer touched the 16-bit parameter copy");
    free(v);
    sf_net_free(net);
}

/* fp16 scales its loss from 2^16, written for the device at compile; bf16 keeps 1 and ignores a restored scale. */
static void test_loss_scale_state(void)
{
    sf_net *h = make(stub_backend(SF_SCALAR_F16), SF_MEMORY_RECOMPUTE);
    sf_net *b = make(stub_backend(SF_SCALAR_BF16), SF_MEMORY_RECOMPUTE);
    if (!h || !b) return;
    sf_net_state st;
    CHECK_OK(sf_net_get_state(h, &st));
    CHECK(st.loss_scale == 65536.0f && h->stats[SF_STAT_SCALE] == 65536.0f &&
              h->stats[SF_STAT_UNSCALE] == 1.0f / 65536.0f,
          "fp16: scale %g, device %g / %g", st.loss_scale, h->stats[SF_STAT_SCALE], h->stats[SF_STAT_UNSCALE]);
    st.loss_scale = 1024.0f;
    st.loss_scale_steps = 7;
    CHECK_OK(sf_net_set_state(h, &st));
    sf_net_state back;
    CHECK_OK(sf_net_get_state(h, &back));
    CHECK(back.loss_scale == 1024.0f && back.loss_scale_steps == 7 && h->stats[SF_STAT_UNSCALE] == 1.0f / 1024.0f,
          "restored scale %g, %lld steps", back.loss_scale, (long long)back.loss_scale_steps);
    st.loss_scale = 0.0f;
    CHECK(sf_net_set_state(h, &st) == SF_ERR_INVALID, "a zero loss scale was accepted");
    CHECK_OK(sf_net_get_state(b, &st));
    CHECK(st.loss_scale == 1.0f, "bf16 scales its loss by %g", st.loss_scale);
    st.loss_scale = 1024.0f;
    CHECK_OK(sf_net_set_state(b, &st));
    CHECK_OK(sf_net_get_state(b, &back));
    CHECK(back.loss_scale == 1.0f, "bf16 took a loss scale of %g", back.loss_scale);
    sf_net_free(h);
    sf_net_free(b);
}

int main(void)
{
    for (int sparse = 0; sparse < 2; sparse++)
        for (int a = 0; a < 2; a++)
            for (int mode = 0; mode < 2; mode++)
                compare_plans(a ? SF_SCALAR_F16 : SF_SCALAR_BF16, mode ? SF_MEMORY_RECOMPUTE : SF_MEMORY_FULL, sparse);
    test_refresh();
    test_loss_scale_state();
    return tu_finish("test_plan_precision");
}
