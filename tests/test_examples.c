/* test_examples.c — every config in examples/ parses and builds its network, the configs of the benchmark networks
 * build exactly what the benchmarks time (bench/seed_nets.h): layer for layer the same kind, inputs, output shape,
 * geometry, bias and neuron parameters, and the ImageNet ResNets (SEW and plain, 18/34/50) train a few steps. */
#include "../bench/seed_nets.h"
#include "config/config.h"
#include "core/net_internal.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sf_net *build_config(const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SF_EXAMPLES_DIR, file);
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    CHECK_OK(sf_config_load(path, &cfg));
    if (cfg) cfg->net.precision = SF_PRECISION_FP32; /* GPU examples ask for tf32; this CPU build computes in fp32 */
    if (cfg) CHECK_OK(sf_config_build_net(cfg, &net));
    sf_config_free(cfg);
    return net;
}

static int same_layer(const sf_net_layer *a, const sf_net_layer *b)
{
    const sf_layer_desc *x = &a->d, *y = &b->d;
    /* a sum reads its two tensors in either order (IEEE addition commutes) */
    int same_in = a->in == b->in || (x->kind == SF_LAYER_ADD && a->in == b->in2 && a->in2 == b->in);
    if (x->kind != y->kind || !same_in || a->out_c != b->out_c || a->out_h != b->out_h || a->out_w != b->out_w)
        return 0;
    switch (x->kind) {
    case SF_LAYER_CONV2D:
        return x->out_channels == y->out_channels && x->kernel == y->kernel && x->stride == y->stride &&
               x->padding == y->padding && x->bias == y->bias;
    case SF_LAYER_AVGPOOL2D:
    case SF_LAYER_MAXPOOL2D:
        return x->kernel == y->kernel && a->pool.stride == b->pool.stride && x->padding == y->padding;
    case SF_LAYER_LINEAR: return x->out_features == y->out_features && x->bias == y->bias;
    case SF_LAYER_BATCHNORM: return x->bn_eps == y->bn_eps && x->bn_momentum == y->bn_momentum;
    case SF_LAYER_LIF: return memcmp(&x->lif, &y->lif, sizeof x->lif) == 0;
    case SF_LAYER_ADD: return a->in2 == b->in2 || (a->in == b->in2 && a->in2 == b->in);
    default: return 1;
    }
}

/* The example `file` against the benchmark network `name` (CIFAR-shaped, full width). */
static void test_same_as_benchmark(const char *file, const char *name)
{
    sf_net *got = build_config(file);
    const sb_net_kind *kind = sb_net_find(name);
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 3, p.in_height = p.in_width = kind->image;
    sb_builder b = {NULL, 1, 0, SF_OK, 0};
    CHECK_OK(sf_net_create(&p, &b.net));
    if (!got || !b.net) return;
    kind->build(&b, kind->bn);
    CHECK_OK(b.status);
    CHECK(got->n_layers == b.net->n_layers, "%s: %d layers, %s has %d", file, got->n_layers, name, b.net->n_layers);
    for (int32_t i = 0; i < got->n_layers && i < b.net->n_layers; i++)
        CHECK(same_layer(&got->layers[i], &b.net->layers[i]), "%s: layer %d (%s) differs from %s's", file, i,
              sf_layer_kind_name(got->layers[i].d.kind), name);
    CHECK(got->n_params == b.net->n_params, "%s: %lld parameters, %s has %lld", file, (long long)got->n_params, name,
          (long long)b.net->n_params);
    sf_net_free(got);
    sf_net_free(b.net);
}

/* An ImageNet config has torchvision's ResNet's parameter count (the neurons have none) and trains: at 16x16
 * (image_size, and a global pool of the 1x1 map that is left) with T = 2, B = 2 and lr 0.01, three steps of SGD on
 * one batch of random images in fp32 on the CPU, each loss finite, the loss falling over the steps and every
 * parameter tensor moving. */
static void test_imagenet_trains(const char *file, int64_t torchvision_params)
{
    char path[512], pool_key[32];
    snprintf(path, sizeof path, "%s/%s", SF_EXAMPLES_DIR, file);
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    CHECK_OK(sf_config_load(path, &cfg));
    if (!cfg) return;
    snprintf(pool_key, sizeof pool_key, "layer%d.size", cfg->num_layers - 3);
    CHECK_OK(sf_config_set(cfg, "train.image_size", "16"));
    CHECK_OK(sf_config_set(cfg, pool_key, "1"));
    CHECK_OK(sf_config_set(cfg, "train.lr", "0.01"));
    CHECK_OK(sf_config_build_net(cfg, &net));
    sf_config_free(cfg);
    if (!net) return;
    enum { T = 2, B = 2, N = T * B * 3 * 16 * 16 };
    CHECK(net->n_params == torchvision_params, "%s: %lld parameters, torchvision's ResNet has %lld", file,
          (long long)net->n_params, (long long)torchvision_params);
    CHECK_OK(sf_net_compile(net, T, B));
    float *x = malloc(N * sizeof *x);
    tu_randn(x, N, 0.0f, 1.0f, 43);
    const int32_t labels[B] = {3, 997};
    int64_t n0, n1;
    float *before = tu_net_read_role(net, SF_ROLE_PARAM, &n0), losses[3];
    for (int k = 0; k < 3; k++) {
        sf_step_result r;
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
        losses[k] = r.loss;
        CHECK(isfinite(r.loss), "%s: step %d: loss %g", file, k, r.loss);
    }
    CHECK(losses[2] < losses[0], "%s: losses %g, %g, %g do not fall", file, losses[0], losses[1], losses[2]);
    float *after = tu_net_read_role(net, SF_ROLE_PARAM, &n1);
    int64_t off = 0;
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_PARAM); i++) {
        sf_tensor_info info;
        sf_net_tensor_info(net, SF_ROLE_PARAM, i, &info);
        CHECK(memcmp(before + off, after + off, (size_t)info.numel * sizeof *before) != 0, "%s: %s never changed",
              file, info.name);
        off += info.numel;
    }
    printf("%s at 16x16: %lld parameters, losses %.4f %.4f %.4f\n", file, (long long)n1, losses[0], losses[1],
           losses[2]);
    free(before), free(after), free(x);
    sf_net_free(net);
}

int main(void)
{
    DIR *dir = opendir(SF_EXAMPLES_DIR);
    CHECK(dir != NULL, "cannot open %s", SF_EXAMPLES_DIR);
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") != 0) continue;
        sf_net *net = build_config(e->d_name);
        CHECK(net != NULL, "examples/%s builds", e->d_name);
        sf_net_free(net);
        n++;
    }
    if (dir) closedir(dir);
    CHECK(n >= 6, "%d example configs found", n);
    test_same_as_benchmark("cifar10_vgg9.ini", "large"); /* W3 = Liang et al.'s Large net with BN */
    test_same_as_benchmark("cifar10_resnet18.ini", "sj_resnet18");
    test_same_as_benchmark("cifar10_resnet34.ini", "sj_resnet34");
    const int64_t resnet_params[3] = {11689512, 21797672, 25557032}; /* torchvision's resnet18, 34, 50 */
    const char *depths[3] = {"18", "34", "50"};
    for (int k = 0; k < 6; k++) {
        char file[64];
        snprintf(file, sizeof file, "imagenet_%s_resnet%s.ini", k < 3 ? "sew" : "spiking", depths[k % 3]);
        test_imagenet_trains(file, resnet_params[k % 3]);
    }
    return tu_finish("test_examples");
}
