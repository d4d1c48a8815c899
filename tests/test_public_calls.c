/* test_public_calls.c — the public calls the PyTorch interface uses beyond the LIF kernels, on the CPU:
 * sf_bn_lif_forward / sf_bn_lif_backward, sf_bn_statistics (against a double reference, where the channel's values
 * sit far from 0) and the typed LIF calls (argument and type checks; the state carried
 * across calls gives one call's spikes bitwise; a backward writes dx, dγ, dβ), the size of the neuron state's
 * checkpoints (sf_lif_ckpt_floats), and sf_checkpoint_load_net with sf_net_layer_desc / sf_net_get_params
 * (a saved network comes back with its layers, parameters and statistics; bad paths and files fail naming them).
 * The values themselves are checked against PyTorch in python/tests (test_bnlif.py, test_load_run.py). */
#include "config/config.h"
#include "testutil.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const sf_device CPU = {SF_DEVICE_CPU, 0};

static void test_bn_lif_arguments(void)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    float x[8] = {0}, stat[2] = {0.0f, 1.0f}, s[8];
    CHECK(sf_bn_lif_forward(&p, 2, 2, 1, 2, SF_SCALAR_F32, NULL, stat, stat + 1, 1e-5f, stat + 1, stat, s, NULL, CPU, NULL) ==
              SF_ERR_INVALID && strstr(sf_last_error(), "NULL"),
          "a NULL x: %s", sf_last_error());
    CHECK(sf_bn_lif_forward(&p, 2, 2, 1, 2, SF_SCALAR_F32, x, stat, stat + 1, 0.0f, stat + 1, stat, s, NULL, CPU, NULL) ==
              SF_ERR_INVALID && strstr(sf_last_error(), "eps"),
          "eps = 0: %s", sf_last_error());
    CHECK(sf_bn_lif_forward(&p, 0, 2, 1, 2, SF_SCALAR_F32, x, stat, stat + 1, 1e-5f, stat + 1, stat, s, NULL, CPU, NULL) ==
              SF_ERR_INVALID && strstr(sf_last_error(), "T=0"),
          "T = 0: %s", sf_last_error());
    CHECK(sf_bn_lif_forward(&p, 2, 2, 0, 2, SF_SCALAR_F32, x, stat, stat + 1, 1e-5f, stat + 1, stat, s, NULL, CPU, NULL) ==
              SF_ERR_INVALID,
          "C = 0");
    p.tau = 0.5f;
    CHECK(sf_bn_lif_forward(&p, 2, 2, 1, 2, SF_SCALAR_F32, x, stat, stat + 1, 1e-5f, stat + 1, stat, s, NULL, CPU, NULL) ==
              SF_ERR_INVALID && strstr(sf_last_error(), "tau"),
          "bad LIF parameters: %s", sf_last_error());
    CHECK(sf_bn_lif_workspace_bytes(2, 2, 1, 2, CPU) == 0, "the CPU needs no workspace");
    p.tau = 2.0f;
    CHECK(sf_bn_lif_forward(&p, 2, 2, 1, 2, SF_SCALAR_BF16, x, stat, stat + 1, 1e-5f, stat + 1, stat, s, NULL, CPU,
                            NULL) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "bfloat16"),
          "bf16 on the CPU: %s", sf_last_error());
    CHECK(sf_lif_forward_typed(&p, 2, 4, (sf_scalar)7, x, s, NULL, CPU, NULL) == SF_ERR_INVALID &&
              strstr(sf_last_error(), "unknown activation type"),
          "an unknown type: %s", sf_last_error());
    CHECK(sf_lif_backward_typed(&p, 2, 4, SF_SCALAR_F16, x, x, s, NULL, CPU, NULL) == SF_ERR_UNSUPPORTED &&
              strstr(sf_last_error(), "float16"),
          "fp16 on the CPU: %s", sf_last_error());
    float y[8] = {0.5f, 1.5f, 3.0f, -1.0f, 2.0f, 0.0f, 1.0f, 4.0f}, s_typed[8], s_plain[8];
    CHECK_OK(sf_lif_forward_typed(&p, 2, 4, SF_SCALAR_F32, y, s_typed, NULL, CPU, NULL));
    CHECK_OK(sf_lif_forward(&p, 2, 4, y, s_plain, CPU, NULL));
    CHECK(memcmp(s_typed, s_plain, sizeof s_plain) == 0, "float32 through the typed call differs");
}

/* Two pieces of time with v_out fed to v_in give one call's spikes and final state, bitwise. */
static void test_bn_lif_state(void)
{
    enum { T = 6, B = 3, C = 4, HW = 5, N = B * C * HW, T1 = 2 };
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = malloc(sizeof(float) * T * N), *ds = malloc(sizeof(float) * T * N);
    float s_one[T * N], s_two[T * N], dx[T * N], v_one[N], v_mid[N], v_two[N], dg[C], db[C];
    float mean[C], var[C], gamma[C], beta[C];
    tu_randn(x, T * N, 0.5f, 1.5f, 3);
    tu_randn(ds, T * N, 0.0f, 1.0f, 4);
    for (int c = 0; c < C; c++) mean[c] = 0.4f, var[c] = 2.0f, gamma[c] = 1.0f + 0.1f * c, beta[c] = 0.1f;
    sf_lif_state one = {.v_out = v_one}, first = {.v_out = v_mid}, second = {.v_in = v_mid, .v_out = v_two};
    CHECK_OK(sf_bn_lif_forward(&p, T, B, C, HW, SF_SCALAR_F32, x, mean, var, 1e-5f, gamma, beta, s_one, &one, CPU, NULL));
    CHECK_OK(sf_bn_lif_forward(&p, T1, B, C, HW, SF_SCALAR_F32, x, mean, var, 1e-5f, gamma, beta, s_two, &first, CPU, NULL));
    CHECK_OK(sf_bn_lif_forward(&p, T - T1, B, C, HW, SF_SCALAR_F32, x + T1 * N, mean, var, 1e-5f, gamma, beta, s_two + T1 * N,
                               &second, CPU, NULL));
    CHECK(memcmp(s_one, s_two, sizeof s_one) == 0, "two pieces give other spikes than one call");
    CHECK(memcmp(v_one, v_two, sizeof v_one) == 0, "two pieces end in another state than one call");
    int spikes = 0;
    for (int i = 0; i < T * N; i++) spikes += s_one[i] != 0.0f;
    CHECK(spikes > 0 && spikes < T * N, "%d spikes: the check would be weak", spikes);
    for (int i = 0; i < T * N; i++) dx[i] = NAN;
    dg[0] = db[0] = NAN;
    CHECK_OK(sf_bn_lif_backward(&p, T, B, C, HW, SF_SCALAR_F32, x, mean, var, 1e-5f, gamma, beta, ds, dx, dg, db, NULL, NULL, 0, CPU,
                                NULL));
    int finite = 1;
    for (int i = 0; i < T * N; i++) finite &= isfinite(dx[i]) != 0;
    CHECK(finite && isfinite(dg[0]) && isfinite(db[0]), "the backward left values unwritten");
    free(x);
    free(ds);
}

static const char *CONFIG = "[train]\ndataset = synthetic\ninput_shape = 2, 6, 6\nclasses = 3\n"
                            "[conv]\nfilters = 4\nsize = 3\npad = 1\n[bn]\n[lif]\nreset = soft\n"
                            "[flatten]\n[linear]\nout = 3\n[readout]\ntype = leaky\ntau = 4\n";

/* The checkpoints' size (sf_lif_state.v_ckpt): one slot per start T − 32j > 0, v per neuron, the ALIF's b too; a
 * CPU forward leaves them alone (its backward recomputes whole sequences). */
static void test_ckpt_floats(void)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    const int64_t T[] = {1, 32, 33, 64, 65, 1024}, slots[] = {0, 0, 1, 1, 2, 31};
    for (int i = 0; i < 6; i++) {
        p.model = SF_NEURON_LIF;
        CHECK(sf_lif_ckpt_floats(&p, T[i], 7) == slots[i] * 7, "T = %lld: %lld checkpoint floats, expected %lld",
              (long long)T[i], (long long)sf_lif_ckpt_floats(&p, T[i], 7), (long long)(slots[i] * 7));
        p.model = SF_NEURON_ALIF;
        CHECK(sf_lif_ckpt_floats(&p, T[i], 7) == slots[i] * 14, "ALIF T = %lld: %lld checkpoint floats",
              (long long)T[i], (long long)sf_lif_ckpt_floats(&p, T[i], 7));
    }
    p.model = SF_NEURON_LIF;
    float x[40 * 3], s[40 * 3], ck[3] = {-7.0f, -7.0f, -7.0f};
    tu_randn(x, 40 * 3, 0.6f, 1.0f, 5);
    sf_lif_state st = {.v_ckpt = ck};
    CHECK_OK(sf_lif_forward_state(&p, 40, 3, x, s, &st, CPU, NULL));
    CHECK(ck[0] == -7.0f && ck[1] == -7.0f && ck[2] == -7.0f, "the CPU forward wrote checkpoints");
}

static void test_checkpoint_load_net(const char *dir)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL, *back = NULL;
    CHECK_OK(sf_config_parse_string(CONFIG, "inline.ini", &cfg));
    CHECK_OK(sf_config_build_net(cfg, &net));
    if (!net) return;
    char path[512];
    snprintf(path, sizeof path, "%s/net.safetensors", dir);
    sf_checkpoint_info info = {.config = CONFIG, .best_metric = -1.0, .best_step = -1};
    CHECK_OK(sf_checkpoint_save(net, &info, path));
    CHECK_OK(sf_checkpoint_load_net(path, CPU, &back));
    if (back) {
        CHECK(sf_net_num_layers(back) == 5, "%d layers", sf_net_num_layers(back));
        sf_layer_desc d;
        CHECK_OK(sf_net_layer_desc(back, 0, &d));
        CHECK(d.kind == SF_LAYER_CONV2D && d.out_channels == 4 && d.padding == 1 && d.input == 0, "conv layer");
        CHECK_OK(sf_net_layer_desc(back, 2, &d));
        CHECK(d.kind == SF_LAYER_LIF && d.lif.soft_reset == 1 && d.input == 2, "LIF layer: input %d", d.input);
        CHECK(sf_net_layer_desc(back, 5, &d) == SF_ERR_INVALID && strstr(sf_last_error(), "out of range"),
              "layer 5 of 5");
        sf_net_params np;
        sf_net_get_params(back, &np);
        CHECK(np.readout == SF_READOUT_LEAKY && np.readout_tau == 4.0f && np.in_channels == 2 && np.in_width == 6,
              "net parameters");
        int64_t n_a = 0, n_b = 0;
        float *a = tu_net_read_role(net, SF_ROLE_PARAM, &n_a), *b = tu_net_read_role(back, SF_ROLE_PARAM, &n_b);
        CHECK(n_a == n_b && n_a > 0 && memcmp(a, b, sizeof(float) * (size_t)n_a) == 0, "parameters differ");
        free(a);
        free(b);
    }
    sf_net_free(back);
    back = NULL;
    CHECK(sf_checkpoint_load_net("/nonexistent/x.safetensors", CPU, &back) != SF_OK && !back &&
              strstr(sf_last_error(), "/nonexistent/x.safetensors"),
          "a missing file: %s", sf_last_error());
    snprintf(path, sizeof path, "%s/config.ini", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(CONFIG, f);
        fclose(f);
    }
    CHECK(sf_checkpoint_load_net(path, CPU, &back) != SF_OK && !back && strstr(sf_last_error(), "config.ini"),
          "not a checkpoint: %s", sf_last_error());
    sf_net_free(net);
    sf_config_free(cfg);
}

/* Saves a checkpoint of `config`'s network (built from synthetic data of the same input shape, so no dataset files
 * are read) and returns sf_checkpoint_input_encoding's answer for it. */
static sf_status encoding_of(const char *dir, const char *config, const char *net_config, sf_input_encoding *e)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/enc.safetensors", dir);
    sf_status s = sf_config_parse_string(net_config, "inline.ini", &cfg);
    if (s == SF_OK) s = sf_config_build_net(cfg, &net);
    sf_checkpoint_info info = {.config = config, .best_metric = -1.0, .best_step = -1};
    if (s == SF_OK) s = sf_checkpoint_save(net, &info, path);
    sf_net_free(net);
    sf_config_free(cfg);
    return s == SF_OK ? sf_checkpoint_input_encoding(path, e) : s;
}

static void test_checkpoint_input_encoding(const char *dir)
{
    static const char *layers = "[flatten]\n[linear]\nout = 10\n";
    char fmnist[256], cifar[256], synthetic[256], cifar_net[256];
    snprintf(fmnist, sizeof fmnist, "[train]\ndataset = fashion-mnist\ntimesteps = 6\n%s", layers);
    snprintf(cifar, sizeof cifar, "[train]\ndataset = cifar10\nencoding = latency\nmean = 0.5, 0.4, 0.25\n%s",
             layers);
    snprintf(cifar_net, sizeof cifar_net, "[train]\ndataset = synthetic\ninput_shape = 3, 32, 32\nclasses = 10\n%s",
             layers);
    snprintf(synthetic, sizeof synthetic, "[train]\ndataset = synthetic\ninput_shape = 1, 28, 28\nclasses = 10\n%s",
             layers);
    sf_input_encoding e;
    CHECK_OK(encoding_of(dir, fmnist, synthetic, &e));
    CHECK(strcmp(e.dataset, "fashion-mnist") == 0 && e.images == 1 && e.encoding == 0 && e.normalize == 1 &&
              e.channels == 1 && e.mean[0] == 0.2860f && e.std[0] == 0.3530f && e.timesteps == 6,
          "fashion-mnist: %s images %d encoding %d normalize %d C %d mean %g std %g T %lld", e.dataset, e.images,
          e.encoding, e.normalize, e.channels, (double)e.mean[0], (double)e.std[0], (long long)e.timesteps);
    CHECK_OK(encoding_of(dir, cifar, cifar_net, &e));
    CHECK(e.images == 1 && e.encoding == 2 && e.channels == 3 && e.mean[0] == 0.5f && e.mean[1] == 0.4f &&
              e.mean[2] == 0.25f && e.std[2] == 0.2616f && e.timesteps == 4,
          "cifar10, latency, its own mean, the default std: mean %g %g %g", (double)e.mean[0], (double)e.mean[1],
          (double)e.mean[2]);
    CHECK_OK(encoding_of(dir, synthetic, synthetic, &e));
    CHECK(strcmp(e.dataset, "synthetic") == 0 && e.images == 0 && e.channels == 1, "synthetic: spikes, not images");
    CHECK(sf_checkpoint_input_encoding("/nonexistent/x.safetensors", &e) != SF_OK &&
              strstr(sf_last_error(), "/nonexistent/x.safetensors"),
          "a missing file: %s", sf_last_error());
}

static void test_bn_statistics(void)
{
    enum { R = 3, C = 2, HW = 5 };
    float x[R * C * HW], mean[C], var[C];
    for (int i = 0; i < R * C * HW; i++) x[i] = 1000.0f + (float)((i * 37) % 11) * 0.25f; /* |mean| ≫ std */
    CHECK_OK(sf_bn_statistics(R, C, HW, x, mean, var, CPU));
    for (int c = 0; c < C; c++) {
        double s = 0, s2 = 0;
        for (int r = 0; r < R; r++)
            for (int k = 0; k < HW; k++) s += x[(r * C + c) * HW + k];
        const double m = s / (R * HW);
        for (int r = 0; r < R; r++)
            for (int k = 0; k < HW; k++) s2 += (x[(r * C + c) * HW + k] - m) * (x[(r * C + c) * HW + k] - m);
        CHECK(fabs(mean[c] - m) < 1e-4 && fabs(var[c] - s2 / (R * HW)) < 1e-5, "channel %d: mean %g var %g, expected "
              "%g and %g", c, (double)mean[c], (double)var[c], m, s2 / (R * HW));
    }
    CHECK(sf_bn_statistics(0, C, HW, x, mean, var, CPU) == SF_ERR_INVALID, "no rows");
    CHECK(strstr(sf_last_error(), "rows=0") != NULL, "the message names the shape: %s", sf_last_error());
    CHECK(sf_bn_statistics(R, C, HW, NULL, mean, var, CPU) == SF_ERR_INVALID, "NULL x");
    CHECK(sf_bn_statistics(R, C, HW, x, mean, var, (sf_device){SF_DEVICE_CUDA, 0}) == SF_ERR_UNSUPPORTED,
          "the CPU only");
}

int main(void)
{
    test_bn_lif_arguments();
    test_bn_statistics();
    test_bn_lif_state();
    test_ckpt_floats();
    char dir[] = "/tmp/sf_public_calls_XXXXXX";
    if (mkdtemp(dir)) {
        test_checkpoint_load_net(dir);
        test_checkpoint_input_encoding(dir);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "cleanup");
    }
    return tu_finish("test_public_calls");
}
