/* test_sparse_state.c — the run state of layers that choose their path (sparse = auto): sf_net_set_layer_sparsity
 * sets crossovers and densities (bad layers and values refused, naming them) and the next step chooses by them; a
 * checkpoint records them and a net restored from it gets them back bitwise (densities only when it continues the
 * run); a checkpoint without them (written before they were recorded) or from another precision keeps the net's
 * own, and one whose layers do not match is refused. deterministic = on fixes the crossovers without timing. */
#include "testutil.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T = 4, B = 3, IN = 24, HIDDEN = 16, CLASSES = 5, LAYERS = 3 };

/* input spikes → linear (auto) → lif → linear (auto unless second_off) */
static sf_net *make_net_det(int second_off, int deterministic)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = IN;
    p.input_spikes = 1;
    p.sparse = SF_SPARSE_AUTO;
    p.seed = 5;
    p.cuda.deterministic = deterministic;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    tu_add_layer(net, SF_LAYER_LINEAR, HIDDEN, 0);
    tu_add_layer(net, SF_LAYER_LIF, 0, 0);
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_LINEAR, &d);
    d.out_features = CLASSES;
    if (second_off) d.sparse = SF_SPARSE_OFF;
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    CHECK_OK(sf_net_compile(net, T, B));
    return net;
}

static sf_net *make_net(int second_off) { return make_net_det(second_off, 0); }

/* One training step on input spikes of density about 1/4. */
static void step(sf_net *net)
{
    float x[T * B * IN];
    int32_t labels[B];
    for (int i = 0; i < T * B * IN; i++) x[i] = (float)((i * 7 + 3) % 4 == 0);
    for (int b = 0; b < B; b++) labels[b] = b % CLASSES;
    sf_step_result r;
    CHECK_OK(sf_net_train_step(net, x, labels, &r));
}

static void expect_refused(sf_net *net, int32_t layer, sf_layer_sparsity s, const char *needle, const char *what)
{
    sf_status st = sf_net_set_layer_sparsity(net, layer, &s);
    CHECK(st == SF_ERR_INVALID && strstr(sf_last_error(), needle), "%s: %s (%s)", what, sf_status_str(st),
          sf_last_error());
}

static void test_set(void)
{
    sf_net *net = make_net(0);
    sf_layer_sparsity q[LAYERS];
    CHECK(sf_net_layer_sparsity(net, q, LAYERS) == LAYERS, "layer count");
    CHECK(q[0].eligible && q[0].mode == SF_SPARSE_AUTO && q[2].eligible && !q[1].eligible, "eligible layers");
    sf_layer_sparsity s = {.crossover_forward = 0.75f, .crossover_backward = 0.0f, .density = -1.0f,
                           .grad_density = -1.0f};
    expect_refused(net, 3, s, "layer 3", "a layer past the last");
    expect_refused(net, -1, s, "layer -1", "a negative layer");
    expect_refused(net, 1, s, "layer 1 does not choose", "a layer that cannot run event-driven");
    sf_layer_sparsity bad = s;
    bad.crossover_forward = 1.5f;
    expect_refused(net, 0, bad, "1.5", "a crossover above 1");
    bad = s;
    bad.crossover_backward = NAN;
    expect_refused(net, 0, bad, "nan", "a NaN crossover");
    bad = s;
    bad.density = -0.5f;
    expect_refused(net, 0, bad, "-0.5", "a negative density other than -1");
    CHECK(sf_net_set_layer_sparsity(net, 0, NULL) == SF_ERR_INVALID, "NULL state");
    CHECK(sf_net_set_layer_sparsity(NULL, 0, &s) == SF_ERR_INVALID, "NULL net");

    /* forward sparse below 0.75 (the input's density is 1/4), backward dense above 0 */
    CHECK_OK(sf_net_set_layer_sparsity(net, 0, &s));
    step(net);
    sf_net_layer_sparsity(net, q, LAYERS);
    CHECK(q[0].crossover_forward == 0.75f && q[0].crossover_backward == 0.0f, "crossovers %g %g kept",
          q[0].crossover_forward, q[0].crossover_backward);
    CHECK(q[0].density > 0.2f && q[0].density < 0.3f && q[0].forward_sparse && !q[0].backward_sparse,
          "density %g: paths %d/%d, expected sparse/dense", q[0].density, q[0].forward_sparse, q[0].backward_sparse);
    s.crossover_forward = 0.0f;
    s.crossover_backward = 1.0f;
    CHECK_OK(sf_net_set_layer_sparsity(net, 0, &s));
    step(net);
    sf_net_layer_sparsity(net, q, LAYERS);
    CHECK(!q[0].forward_sparse && q[0].backward_sparse, "swapped crossovers: paths %d/%d, expected dense/sparse",
          q[0].forward_sparse, q[0].backward_sparse);
    sf_net_free(net);

    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = IN;
    CHECK_OK(sf_net_create(&p, &net));
    tu_add_layer(net, SF_LAYER_LINEAR, HIDDEN, 0);
    expect_refused(net, 0, s, "not compiled", "a net not compiled");
    CHECK_OK(sf_net_compile(net, T, B));
    expect_refused(net, 0, s, "its mode is off", "a layer whose input is not spikes");
    sf_net_free(net);
}

/* deterministic = on measures nothing: every auto layer gets the fixed crossover 1/8, so the input at density 1/4
 * runs dense, and an all-silent hidden layer sparse. */
static void test_deterministic(void)
{
    sf_net *net = make_net_det(0, 1);
    step(net);
    sf_layer_sparsity q[LAYERS];
    sf_net_layer_sparsity(net, q, LAYERS);
    for (int i = 0; i < LAYERS; i += 2)
        CHECK(q[i].mode == SF_SPARSE_AUTO && q[i].crossover_forward == 0.125f && q[i].crossover_backward == 0.125f,
              "deterministic, layer %d: mode %d, crossovers %g %g", i, (int)q[i].mode, q[i].crossover_forward,
              q[i].crossover_backward);
    CHECK(!q[0].forward_sparse && q[0].density > 0.125f, "deterministic: input at density %g ran sparse",
          q[0].density);
    CHECK(q[2].forward_sparse == (q[2].density < 0.125f), "deterministic: hidden spikes at %g, sparse %d",
          q[2].density, q[2].forward_sparse);
    sf_net_free(net);
}

static void save(sf_net *net, const char *path)
{
    sf_checkpoint_info info = {.config = "[train]\n", .best_metric = -1.0, .best_step = -1};
    CHECK_OK(sf_checkpoint_save(net, &info, path));
}

/* Restores `path` into net (training state or not); returns the status. */
static sf_status restore(sf_net *net, const char *path, int with_training_state)
{
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_status s = sf_checkpoint_open(path, &st, &info);
    if (s == SF_OK) s = sf_checkpoint_restore(st, net, with_training_state);
    if (s == SF_OK) s = sf_checkpoint_restore_sparse(st, net, with_training_state);
    sf_safetensors_free(st);
    return s;
}

/* Replaces the first `from` in the file by `to` (same length): a checkpoint as another build would have written. */
static void patch(const char *path, const char *from, const char *to)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    const size_t len = strlen(from);
    char *at = NULL;
    for (size_t i = 0; !at && i + len <= n; i++)
        if (memcmp(buf + i, from, len) == 0) at = buf + i;
    CHECK(at != NULL, "'%s' is in the header of %s", from, path);
    if (at) {
        fseek(f, (long)(at - buf), SEEK_SET);
        fwrite(to, 1, strlen(to), f);
    }
    fclose(f);
}

static void test_checkpoint(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    sf_net *a = make_net(0);
    step(a);
    /* values no measurement gives, so that getting them back proves they came from the file */
    sf_layer_sparsity set[2] = {{.crossover_forward = 0.3125f, .crossover_backward = 0.0625f, .density = 0.1875f,
                                 .grad_density = -1.0f},
                                {.crossover_forward = 0.4375f, .crossover_backward = 0.15625f, .density = 0.0390625f,
                                 .grad_density = 0.5f}};
    CHECK_OK(sf_net_set_layer_sparsity(a, 0, &set[0]));
    CHECK_OK(sf_net_set_layer_sparsity(a, 2, &set[1]));
    save(a, path);

    sf_net *b = make_net(0);
    sf_layer_sparsity measured[LAYERS], q[LAYERS];
    sf_net_layer_sparsity(b, measured, LAYERS);
    CHECK_OK(restore(b, path, 1));
    sf_net_layer_sparsity(b, q, LAYERS);
    for (int k = 0; k < 2; k++) {
        int i = k ? 2 : 0;
        CHECK(q[i].crossover_forward == set[k].crossover_forward &&
                  q[i].crossover_backward == set[k].crossover_backward && q[i].density == set[k].density &&
                  q[i].grad_density == set[k].grad_density,
              "continued run, layer %d: %g %g %g %g", i, q[i].crossover_forward, q[i].crossover_backward,
              q[i].density, q[i].grad_density);
    }
    sf_net_free(b);

    b = make_net(0); /* an evaluation: the crossovers, but no last step */
    CHECK_OK(restore(b, path, 0));
    sf_net_layer_sparsity(b, q, LAYERS);
    CHECK(q[2].crossover_forward == set[1].crossover_forward && q[2].density == -1.0f && q[2].grad_density == -1.0f,
          "evaluation, layer 2: %g, densities %g %g", q[2].crossover_forward, q[2].density, q[2].grad_density);
    sf_net_free(b);

    b = make_net(1); /* its last layer is dense: the layers do not match */
    sf_status s = restore(b, path, 1);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "2 layers") && strstr(sf_last_error(), "1 such"),
          "one auto layer fewer: %s (%s)", sf_status_str(s), sf_last_error());
    sf_net_free(b);

    /* another precision measured other crossovers: the net keeps its own */
    patch(path, "cpu fp32", "cpu tf32");
    b = make_net(0);
    CHECK_OK(restore(b, path, 1));
    sf_net_layer_sparsity(b, q, LAYERS);
    CHECK(q[0].crossover_forward == measured[0].crossover_forward && q[0].density == -1.0f,
          "another precision: crossover %g (measured %g), density %g", q[0].crossover_forward,
          measured[0].crossover_forward, q[0].density);
    sf_net_free(b);

    /* an older checkpoint has no sparse state: it loads, and the net keeps what it measured */
    patch(path, "\"sparse_state\"", "\"unknown_key_\"");
    b = make_net(0);
    CHECK_OK(restore(b, path, 1));
    sf_net_layer_sparsity(b, q, LAYERS);
    CHECK(q[2].crossover_forward == measured[2].crossover_forward &&
              q[2].crossover_backward == measured[2].crossover_backward,
          "older checkpoint: crossovers %g %g, measured %g %g", q[2].crossover_forward, q[2].crossover_backward,
          measured[2].crossover_forward, measured[2].crossover_backward);
    sf_net_free(b);
    sf_net_free(a);
    unlink(path);
}

int main(void)
{
    char dir[] = "/tmp/sf_test_sparse_state.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    test_set();
    test_deterministic();
    test_checkpoint(dir);
    rmdir(dir);
    return tu_finish("test_sparse_state");
}
