/* seed_nets.h — the seed papers' benchmark networks (workloads W6 and W7, docs/notebook/perf.md) built through the public
 * API, for bench_seed.c; bench/peers/seed_torch.py builds the same layers in PyTorch for the baselines.
 *
 * Every LIF: tau 2, decay_input, θ 1, hard reset to 0, detach_reset, sigmoid α 4. Readout: mean over T of the last
 * linear layer, cross-entropy. `div` divides every channel and hidden width (1 for the workloads; the CPU smoke run
 * uses 8). The layers, as our reading of the papers:
 * - W6 (Liang et al., Table I and their CIFAR code): Small 128-256-512, Medium 128-128-128-256-256-512-512, Large
 *   128-128-128-256-256-256-512-512-512 (= W3) 3×3 convs, the last conv of each width with stride 2 (32 → 4), each
 *   conv after the first preceded by [BN →] LIF; then [BN →] LIF → FC 1024 → [BN →] LIF → FC 512 → [BN →] LIF →
 *   FC 10. "_nobn" drops every BN. AlexNet-like (224×224): conv 64 s2, then [BN → LIF → conv] 128 s2, 256 s2,
 *   256 s2, 384, 256, 256 s2 (7×7), BN → LIF → FC 4096 → BN → LIF → FC 4096 → LIF → FC 1000. ResNet-34: conv 7×7
 *   s2 → BN, four stages of 3, 4, 6, 3 blocks (64, 128, 256, 512; each stage's first block has stride 2 and a
 *   1×1 conv + BN shortcut), a block being r → LIF → conv 3×3 → BN → LIF → conv 3×3 → BN, plus r or the shortcut
 *   of LIF(r) (the sum stays membrane input, as in their code); then LIF → global average pool → FC 1000.
 * - W7 (Li et al., on SpikingJelly's spiking_resnet): conv 7×7 s2 p3 → BN → LIF → max-pool 3 s2 p1, four stages of
 *   BasicBlocks (ResNet-18: 2, 2, 2, 2; ResNet-34: 3, 4, 6, 3; widths 64-512, stride 2 from the second stage on):
 *   x → conv 3×3 → BN → LIF → conv 3×3 → BN, plus x or (conv 1×1 → BN)(x) where the shape changes, → LIF; then
 *   global average pool → FC 10. Convs of both ResNets have no bias. */
#ifndef SF_BENCH_SEED_NETS_H
#define SF_BENCH_SEED_NETS_H

#include "spikefuse.h"

#include <string.h>

/* The network being built, and where the next layer reads from. */
typedef struct sb_builder {
    sf_net *net;
    int32_t div;  /* width divisor */
    int32_t lifs; /* LIF layers added (the firing-rate count a step must report) */
    sf_status status;
    int32_t last; /* the last layer's output tensor */
} sb_builder;

static int32_t sb_add(sb_builder *b, sf_layer_desc *d, int32_t from)
{
    if (b->status != SF_OK) return b->last;
    d->input = from;
    b->status = sf_net_add(b->net, d, &b->last);
    return b->last;
}

static int32_t sb_width(const sb_builder *b, int32_t w) { return w / b->div > 0 ? w / b->div : 1; }

static int32_t sb_conv(sb_builder *b, int32_t from, int32_t cout, int32_t k, int32_t stride, int32_t bias)
{
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_CONV2D, &d);
    d.out_channels = sb_width(b, cout);
    d.kernel = k;
    d.stride = stride;
    d.padding = k / 2;
    d.bias = bias;
    return sb_add(b, &d, from);
}

static int32_t sb_simple(sb_builder *b, sf_layer_kind kind, int32_t from)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    if (kind == SF_LAYER_LIF) {
        d.lif.detach_reset = 1; /* the rest are the defaults: tau 2, θ 1, hard reset to 0, sigmoid α 4 */
        b->lifs++;
    }
    return sb_add(b, &d, from);
}

static int32_t sb_linear(sb_builder *b, int32_t from, int32_t out)
{
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_LINEAR, &d);
    d.out_features = out;
    return sb_add(b, &d, from);
}

static int32_t sb_pool(sb_builder *b, sf_layer_kind kind, int32_t from, int32_t k, int32_t stride, int32_t pad)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.kernel = k;
    d.stride = stride;
    d.padding = pad;
    return sb_add(b, &d, from);
}

static int32_t sb_sum(sb_builder *b, int32_t from, int32_t other)
{
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_ADD, &d);
    d.input2 = other;
    return sb_add(b, &d, from);
}

/* [BN →] LIF on `from`. */
static int32_t sb_bn_lif(sb_builder *b, int32_t from, int bn)
{
    if (bn) from = sb_simple(b, SF_LAYER_BATCHNORM, from);
    return sb_simple(b, SF_LAYER_LIF, from);
}

/* Global average pool → flatten → FC `classes`. */
static void sb_head(sb_builder *b, int32_t from, int32_t classes)
{
    int32_t chw[3] = {0, 0, 0};
    if (b->status == SF_OK) b->status = sf_net_tensor_shape(b->net, from, chw);
    from = sb_pool(b, SF_LAYER_AVGPOOL2D, from, chw[1], chw[1], 0);
    sb_linear(b, sb_simple(b, SF_LAYER_FLATTEN, from), classes);
}

/* Liang et al.'s CIFAR nets: `n` convs of widths ch[] (stride 2 where st[] says), then the 1024-512 FC head. */
static void sb_vgg(sb_builder *b, int bn, int n, const int32_t *ch, const int32_t *st)
{
    int32_t t = sb_conv(b, 0, ch[0], 3, st[0], 1);
    for (int i = 1; i < n; i++) t = sb_conv(b, sb_bn_lif(b, t, bn), ch[i], 3, st[i], 1);
    t = sb_linear(b, sb_simple(b, SF_LAYER_FLATTEN, sb_bn_lif(b, t, bn)), sb_width(b, 1024));
    t = sb_linear(b, sb_bn_lif(b, t, bn), sb_width(b, 512));
    sb_linear(b, sb_bn_lif(b, t, bn), 10);
}

static void sb_small(sb_builder *b, int bn)
{
    static const int32_t ch[] = {128, 256, 512}, st[] = {2, 2, 2};
    sb_vgg(b, bn, 3, ch, st);
}

static void sb_medium(sb_builder *b, int bn)
{
    static const int32_t ch[] = {128, 128, 128, 256, 256, 512, 512}, st[] = {1, 1, 2, 1, 2, 1, 2};
    sb_vgg(b, bn, 7, ch, st);
}

static void sb_large(sb_builder *b, int bn)
{
    static const int32_t ch[] = {128, 128, 128, 256, 256, 256, 512, 512, 512}, st[] = {1, 1, 2, 1, 1, 2, 1, 1, 2};
    sb_vgg(b, bn, 9, ch, st);
}

static void sb_alexnet(sb_builder *b, int bn)
{
    static const int32_t ch[] = {64, 128, 256, 256, 384, 256, 256}, st[] = {2, 2, 2, 2, 1, 1, 2};
    int32_t t = sb_conv(b, 0, ch[0], 3, st[0], 1);
    for (int i = 1; i < 7; i++) t = sb_conv(b, sb_bn_lif(b, t, bn), ch[i], 3, st[i], 1);
    t = sb_linear(b, sb_simple(b, SF_LAYER_FLATTEN, sb_bn_lif(b, t, bn)), sb_width(b, 4096));
    t = sb_linear(b, sb_bn_lif(b, t, bn), sb_width(b, 4096));
    sb_linear(b, sb_simple(b, SF_LAYER_LIF, t), 1000);
}

static void sb_resnet34_liang(sb_builder *b, int bn)
{
    static const int32_t width[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
    int32_t r = sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, 0, 64, 7, 2, 0));
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < blocks[s]; i++) {
            int32_t stride = i == 0 ? 2 : 1, a = sb_simple(b, SF_LAYER_LIF, r);
            int32_t y = sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, a, width[s], 3, stride, 0));
            y = sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, sb_simple(b, SF_LAYER_LIF, y), width[s], 3, 1, 0));
            int32_t shortcut = i == 0 ? sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, a, width[s], 1, 2, 0)) : r;
            r = sb_sum(b, y, shortcut);
        }
    sb_head(b, sb_simple(b, SF_LAYER_LIF, r), 1000);
}

static void sb_sj_resnet(sb_builder *b, const int32_t *blocks)
{
    static const int32_t width[] = {64, 128, 256, 512};
    int32_t x = sb_simple(b, SF_LAYER_LIF, sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, 0, 64, 7, 2, 0)));
    x = sb_pool(b, SF_LAYER_MAXPOOL2D, x, 3, 2, 1);
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < blocks[s]; i++) {
            int32_t stride = s > 0 && i == 0 ? 2 : 1;
            int32_t y =
                sb_simple(b, SF_LAYER_LIF, sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, x, width[s], 3, stride, 0)));
            y = sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, y, width[s], 3, 1, 0));
            int32_t shortcut = s > 0 && i == 0 ? sb_simple(b, SF_LAYER_BATCHNORM, sb_conv(b, x, width[s], 1, 2, 0)) : x;
            x = sb_simple(b, SF_LAYER_LIF, sb_sum(b, y, shortcut));
        }
    sb_head(b, x, 10);
}

static void sb_sj_resnet18(sb_builder *b, int bn)
{
    static const int32_t blocks[] = {2, 2, 2, 2};
    sb_sj_resnet(b, blocks);
}

static void sb_sj_resnet34(sb_builder *b, int bn)
{
    static const int32_t blocks[] = {3, 4, 6, 3};
    sb_sj_resnet(b, blocks);
}

/* One network of the sweep: its name, workload, input side, the batch and time steps the workload sets. */
typedef struct sb_net_kind {
    const char *name, *workload;
    void (*build)(sb_builder *b, int bn);
    int bn;
    int32_t image;
    int64_t batch;
    int n_T;
    int64_t T[5];
} sb_net_kind;

static const sb_net_kind sb_nets[] = {
    {"small", "W6", sb_small, 1, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"small_nobn", "W6", sb_small, 0, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"medium", "W6", sb_medium, 1, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"medium_nobn", "W6", sb_medium, 0, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"large", "W6", sb_large, 1, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"large_nobn", "W6", sb_large, 0, 32, 64, 5, {2, 4, 6, 8, 10}},
    {"alexnet", "W6", sb_alexnet, 1, 224, 16, 1, {6}},
    {"resnet34", "W6", sb_resnet34_liang, 1, 224, 16, 1, {6}},
    {"sj_resnet18", "W7", sb_sj_resnet18, 1, 32, 64, 4, {4, 8, 16, 32}},
    {"sj_resnet34", "W7", sb_sj_resnet34, 1, 32, 64, 4, {4, 8, 16, 32}},
};
enum { SB_NUM_NETS = (int)(sizeof sb_nets / sizeof sb_nets[0]) };

static const sb_net_kind *sb_net_find(const char *name)
{
    for (int i = 0; i < SB_NUM_NETS; i++)
        if (strcmp(sb_nets[i].name, name) == 0) return &sb_nets[i];
    return NULL;
}

#endif
