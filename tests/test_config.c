/* test_config.c — INI configs: a full config parsed into its structs, every error kind reported as file:line,
 * the [readout] section, command-line overrides, the writer's round trip, loader parameters, and building the
 * network. */
#include "config/config.h"
#include "config/config_keys.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A residual conv net on CIFAR-10 that touches every section kind and most keys. Line numbers matter below. */
static const char *const full_config =
    "; a test network\n"                       /* 1 */
    "[train]\n"                                /* 2 */
    "dataset = cifar10\n"                      /* 3 */
    "epochs = 3\n"                             /* 4 */
    "batch = 16\n"                             /* 5 */
    "timesteps = 6\n"                          /* 6 */
    "encoding = poisson\n"                     /* 7 */
    "optimizer = adamw\n"                      /* 8 */
    "lr = 0.002\n"                             /* 9 */
    "weight_decay = 0.05\n"                    /* 10 */
    "schedule = cosine\n"                      /* 11 */
    "seed = 18446744073709551615\n"            /* 12 */
    "memory = full\n"                          /* 13 */
    "device = cuda:1\n"                        /* 14 */
    "threads = 2\n"                            /* 15 */
    "min_lr = 0.00001\n"                       /* 16 */
    "normalize = on\n"                         /* 17 */
    "mean = 0.5, 0.25, 0.125\n"                /* 18 */
    "log_every = 7\n"                          /* 19 */
    "\n"                                       /* 20 */
    "[neuron]\n"                               /* 21 */
    "tau = 3\n"                                /* 22 */
    "surrogate = atan\n"                       /* 23 */
    "detach_reset = on\n"                      /* 24 */
    "\n"                                       /* 25 */
    "[conv]\n"                                 /* 26  layer 0 */
    "filters = 8\n"                            /* 27 */
    "size = 3\n"                               /* 28 */
    "pad = 1\n"                                /* 29 */
    "bias = off\n"                             /* 30 */
    "[bn]\n"                                   /* 31  layer 1 */
    "eps = 0.001\n"                            /* 32 */
    "[lif]\n"                                  /* 33  layer 2 */
    "[conv]\n"                                 /* 34  layer 3 */
    "filters = 8\n"                            /* 35 */
    "size = 3\n"                               /* 36 */
    "pad = 1\n"                                /* 37 */
    "[bn]\n"                                   /* 38  layer 4 */
    "[add]\n"                                  /* 39  layer 5 */
    "from = -3 ; the lif output\n"             /* 40 */
    "[lif]\n"                                  /* 41  layer 6 */
    "tau = 5\n"                                /* 42 */
    "surrogate = rect\n"                       /* 43 */
    "reset = soft\n"                           /* 44 */
    "grad_threshold = 0.25\n"                  /* 45 */
    "[conv]\n"                                 /* 46  layer 7: a strided shortcut from layer 2 */
    "from = 2\n"                               /* 47 */
    "filters = 8\n"                            /* 48 */
    "size = 1\n"                               /* 49 */
    "stride = 2\n"                             /* 50 */
    "[maxpool]\n"                              /* 51  layer 8 */
    "size = 2\n"                               /* 52 */
    "[avgpool]\n"                              /* 53  layer 9 */
    "size = 2\n"                               /* 54 */
    "stride = 1\n"                             /* 55 */
    "[flatten]\n"                              /* 56  layer 10 */
    "[dropout]\n"                              /* 57  layer 11 */
    "p = 0.2\n"                                /* 58 */
    "[linear]\n"                               /* 59  layer 12 */
    "out = 10\n"                               /* 60 */
    "[readout]\n"                              /* 61 */
    "type = leaky\n"                           /* 62 */
    "tau = 4\n"                                /* 63 */
    "loss = ce_per_step\n";                    /* 64 */

static void test_full_config(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(full_config, "full.ini", &cfg));
    if (!cfg) return;
    const sf_config_train *t = &cfg->train;
    CHECK(t->dataset == SF_DATASET_CIFAR10 && t->epochs == 3 && t->batch == 16 && t->timesteps == 6, "train sizes");
    CHECK(t->encoding == SF_ENCODING_POISSON && t->augment == -1 && t->normalize == 1 && t->log_every == 7 &&
              t->threads == 2,
          "data");
    CHECK(t->mean[0] == 0.5f && t->mean[1] == 0.25f && t->mean[2] == 0.125f && isnan(t->mean[3]) && isnan(t->std[0]),
          "per-channel mean given, std default");
    CHECK(cfg->optim.kind == SF_OPT_ADAMW && cfg->optim.lr == 0.002f && cfg->optim.weight_decay == 0.05f &&
              cfg->optim.beta2 == 0.999f,
          "optimizer");
    CHECK(cfg->schedule.kind == SF_SCHEDULE_COSINE && cfg->schedule.min_lr == 0.00001f, "schedule");
    CHECK(cfg->net.seed == UINT64_MAX && cfg->net.memory == SF_MEMORY_FULL && cfg->net.device.kind == SF_DEVICE_CUDA &&
              cfg->net.device.index == 1,
          "net settings");
    CHECK(cfg->net.readout == SF_READOUT_LEAKY && cfg->net.readout_tau == 4.0f && cfg->net.loss == SF_LOSS_CE_PER_STEP,
          "[readout] type, tau and loss");
    CHECK(cfg->net.in_channels == 3 && cfg->net.in_height == 32 && cfg->net.in_width == 32, "input shape");
    CHECK(cfg->neuron.tau == 3.0f && cfg->neuron.surrogate == SF_SURROGATE_ATAN && cfg->neuron.alpha == 2.0f &&
              cfg->neuron.detach_reset == 1 && cfg->neuron.decay_input == 1,
          "[neuron]: atan's default alpha follows the surrogate");
    CHECK(cfg->num_layers == 13, "13 layers (got %d)", cfg->num_layers);
    if (cfg->num_layers != 13) return;
    static const sf_layer_kind kinds[13] = {SF_LAYER_CONV2D,    SF_LAYER_BATCHNORM, SF_LAYER_LIF,
                                            SF_LAYER_CONV2D,    SF_LAYER_BATCHNORM, SF_LAYER_ADD,
                                            SF_LAYER_LIF,       SF_LAYER_CONV2D,    SF_LAYER_MAXPOOL2D,
                                            SF_LAYER_AVGPOOL2D, SF_LAYER_FLATTEN,   SF_LAYER_DROPOUT,
                                            SF_LAYER_LINEAR};
    static const int lines[13] = {26, 31, 33, 34, 38, 39, 41, 46, 51, 53, 56, 57, 59};
    int bad = 0;
    for (int i = 0; i < 13; i++) bad += cfg->layers[i].desc.kind != kinds[i] || cfg->layers[i].line != lines[i];
    CHECK(bad == 0, "layer kinds and section lines (%d wrong)", bad);
    const sf_layer_desc *L = &cfg->layers[0].desc;
    CHECK(L->out_channels == 8 && L->kernel == 3 && L->padding == 1 && L->stride == 1 && L->bias == 0 &&
              L->input == -1,
          "conv 0");
    CHECK(cfg->layers[1].desc.bn_eps == 0.001f && cfg->layers[4].desc.bn_eps == 1e-5f &&
              cfg->layers[4].desc.bn_momentum == 0.1f,
          "bn eps given and defaults");
    CHECK(cfg->layers[5].desc.input == -1 && cfg->layers[5].desc.input2 == 3, "add: previous + tensor 3 (layer 2)");
    CHECK(cfg->layers[7].desc.input == 3 && cfg->layers[7].desc.stride == 2 && cfg->layers[7].desc.kernel == 1,
          "shortcut conv reads layer 2's output");
    CHECK(cfg->layers[8].desc.stride == 0 && cfg->layers[9].desc.stride == 1, "pool strides (0: = size)");
    CHECK(cfg->layers[11].desc.dropout_p == 0.2f && cfg->layers[12].desc.out_features == 10 &&
              cfg->layers[12].desc.bias == 1,
          "dropout and linear");
    const sf_lif_params *a = &cfg->layers[2].desc.lif, *b = &cfg->layers[6].desc.lif;
    CHECK(a->tau == 3.0f && a->surrogate == SF_SURROGATE_ATAN && a->alpha == 2.0f && a->detach_reset == 1 &&
              a->soft_reset == 0 && a->use_grad_threshold == 0,
          "a plain [lif] takes the [neuron] defaults");
    CHECK(b->tau == 5.0f && b->surrogate == SF_SURROGATE_RECT && b->alpha == 1.0f && b->soft_reset == 1 &&
              b->detach_reset == 1 && b->use_grad_threshold == 1 && b->grad_threshold == 0.25f,
          "a [lif] overrides some keys (rect's default alpha) and keeps the other defaults");

    sf_loader_params lp;
    sf_config_loader_params(cfg, 1, &lp);
    CHECK(lp.batch == 16 && lp.timesteps == 6 && lp.encoding == SF_ENCODING_POISSON && lp.seed == UINT64_MAX &&
              lp.training == 1 && lp.augment == 1,
          "training loader: augmentation on by default for cifar10");
    CHECK(lp.crop_pad == 4, "the crop's padding defaults to 4");
    CHECK(lp.mean[1] == 0.25f && fabsf(lp.std[1] - 0.2435f) < 1e-7f, "given mean, the dataset's std");
    sf_config_loader_params(cfg, 0, &lp);
    CHECK(lp.training == 0 && lp.augment == 0, "evaluation loader never augments");
    sf_config_free(cfg);
}

/* Parses `text` as "bad.ini" and expects SF_ERR_INVALID with "bad.ini:<line>: " and `needle` in the message. */
#define expect_error tu_expect_config_error

#define HEAD "[train]\ndataset = fashion-mnist\n" /* lines 1-2 */
#define MLP "[flatten]\n[linear]\nout = 10\n"

static void test_errors(void)
{
    expect_error(HEAD "[convolution]\nfilters = 3\n", 3, "unknown section [convolution]");
    expect_error(HEAD "epoch = 3\n" MLP, 3, "unknown key 'epoch' in [train]");
    expect_error(HEAD MLP "[conv]\nfilters = 4\nsize = 3\nkernel = 3\n", 9, "unknown key 'kernel' in [conv]");
    expect_error(HEAD MLP "[lif]\nthreshold = 1\n", 7, "accepted: tau, decay");
    expect_error(HEAD "epochs = ten\n" MLP, 3, "[train] epochs = ten: expects an integer");
    expect_error(HEAD "lr = 1e-3x\n" MLP, 3, "expects a number");
    expect_error(HEAD "nesterov = maybe\n" MLP, 3, "expects on or off");
    expect_error(HEAD "encoding = morse\n" MLP, 3, "expects direct, poisson or latency");
    expect_error(HEAD "crop_pad = -1\n" MLP, 3, "crop_pad");
    expect_error(HEAD "device = gpu\n" MLP, 3, "bad device 'gpu'");
    expect_error(HEAD "seed = -1\n" MLP, 3, "expects an integer in [0, 2^64)");
    expect_error(HEAD "batch = 0\n" MLP, 3, "must be in [1, 65536]");
    expect_error(HEAD "lr = 0\n" MLP, 3, "must be in (0, 1000]");
    expect_error(HEAD "[flatten]\n[dropout]\np = 1\n[linear]\nout = 10\n", 5, "[dropout] p = 1");
    expect_error(HEAD "[conv]\nfilters = 4\nsize = 0\n", 5, "[conv] size = 0: must be in [1, 64]");
    expect_error(HEAD "mean = 0.5, 0.5\n" MLP, 1, "mean has 2 values; the dataset has 1 channel");
    expect_error(HEAD "[conv]\nsize = 3\n" MLP, 3, "[conv] (layer 0) lacks the required key filters");
    expect_error(HEAD "[flatten]\n[linear]\nbias = on\n", 4, "[linear] (layer 1) lacks the required key out");
    expect_error(HEAD MLP "[add]\nfrom = -1\nconnect = or\n", 8, "expects add, and or iand");
    expect_error(HEAD MLP "[add]\n", 6, "[add] (layer 2) lacks the required key from");
    expect_error(HEAD "[maxpool]\nstride = 2\n" MLP, 3, "lacks the required key size");
    expect_error("[train]\nepochs = 2\n" MLP, 1, "lacks the required key dataset");
    expect_error(MLP, 1, "lacks the required key dataset");
    expect_error(HEAD, 2, "no layers");
    expect_error(HEAD "epochs = 2\nepochs = 3\n" MLP, 4, "epochs given twice");
    expect_error(HEAD MLP "[train]\n", 6, "[train] given twice (first at line 1)");
    expect_error(HEAD MLP "[add]\nfrom = -4\n", 7, "reaches before the network input");
    expect_error(HEAD MLP "[add]\nfrom = 2\n", 7, "not an earlier layer");
    expect_error(HEAD MLP "[add]\nfrom = x\n", 7, "from expects a layer number");
    expect_error("epochs = 3\n" HEAD MLP, 1, "outside any known section");
    /* A line inih rejects, after several sections and empty ones (the line count must survive the markers). */
    expect_error(HEAD "[neuron]\n[flatten]\n[flatten]\n[linear]\nout = 10\nthis line has no equals sign\n", 8,
                 "expected [section], key = value, or a comment");
    expect_error(HEAD "[neuron]\n[flatten]\n[conv\n", 5, "expected [section]");
    expect_error(HEAD MLP "  [lif]\n", 6, "must start at the beginning of its line");
    expect_error(HEAD MLP "[lif]\ntau = 3\n   4\n", 8, "tau given twice"); /* an inih continuation line */
    char long_line[400];
    memset(long_line, 'x', sizeof long_line);
    memcpy(long_line, "data_dir = ", 11);
    long_line[398] = '\n';
    long_line[399] = 0;
    char text[600];
    snprintf(text, sizeof text, HEAD "%s" MLP, long_line);
    expect_error(text, 3, "longer than 198 characters");
    /* A comment line of any length is a comment (inih's line limit would cut it into a bogus line). */
    long_line[0] = ';';
    snprintf(text, sizeof text, HEAD "%s" "epochs = 3\n" MLP, long_line);
    sf_config *commented = NULL;
    CHECK_OK(sf_config_parse_string(text, "long_comment.ini", &commented));
    if (commented) CHECK(commented->train.epochs == 3, "the line after a long comment is read");
    sf_config_free(commented);
    long_line[0] = ' ';
    long_line[1] = '#';
    snprintf(text, sizeof text, HEAD "%s" MLP, long_line);
    CHECK_OK(sf_config_parse_string(text, "long_comment.ini", &commented));
    sf_config_free(commented);
    /* Ranges are printed as the tables hold them. */
    expect_error(HEAD "[flatten]\n[linear]\nout = 20000000\n", 5, "must be in [1, 16777216]");
    expect_error(HEAD "log_every = -1\n" MLP, 3, "must be in [0, 1000000000000]");
    /* Checks of the LIF parameters as a whole locate the section that made them. */
    expect_error(HEAD MLP "[lif]\ndecay = 1\n", 6, "[lif] (layer 2) LIF decay = 1 with decay_input");
    expect_error(HEAD "[neuron]\ndecay = 1\n" MLP, 3, "[neuron] LIF decay = 1 with decay_input");
}

/* [train] precision: fp32 by default; tf32, bf16 and fp16 are parsed here (the CPU backend refuses them at
 * creation). */
static void test_precision(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &cfg));
    if (cfg) CHECK(cfg->net.precision == SF_PRECISION_FP32, "precision defaults to fp32");
    sf_config_free(cfg);
    cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD "precision = bf16\n" MLP, "bf16.ini", &cfg));
    if (cfg) CHECK(cfg->net.precision == SF_PRECISION_BF16, "precision = bf16");
    sf_config_free(cfg);
    CHECK_OK(sf_config_parse_string(HEAD "precision = fp16\n" MLP, "fp16.ini", &cfg));
    if (cfg) CHECK(cfg->net.precision == SF_PRECISION_FP16, "precision = fp16");
    sf_config_free(cfg);
    expect_error(HEAD "precision = fp8\n" MLP, 3, "[train] precision = fp8: expects fp32, tf32, bf16 or fp16");
}

/* erase_p: off by default, parsed, written back, given to the training loader, and refused outside [0, 1]. */
static void test_erase_p(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &cfg));
    if (cfg) CHECK(cfg->train.erase_p == 0.0f, "erase_p defaults to 0 (off)");
    sf_config_free(cfg);
    cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD "augment = on\nerase_p = 0.5\n" MLP, "erase.ini", &cfg));
    if (!cfg) return;
    sf_loader_params lp;
    sf_config_loader_params(cfg, 1, &lp);
    CHECK(cfg->train.erase_p == 0.5f && lp.augment == 1 && lp.erase_p == 0.5f, "erase_p = 0.5 reaches the loader");
    char *text = NULL;
    CHECK_OK(sf_config_write(cfg, &text));
    CHECK(text && strstr(text, "\nerase_p = 0.5\n"), "the writer keeps erase_p");
    free(text);
    CHECK_OK(sf_config_set_arg(cfg, "train.erase_p=1"));
    CHECK(cfg->train.erase_p == 1.0f, "train.erase_p override");
    sf_config_free(cfg);
    expect_error(HEAD "erase_p = 1.5\n" MLP, 3, "[train] erase_p = 1.5: must be in [0, 1]");
    expect_error(HEAD "erase_p = -0.1\n" MLP, 3, "[train] erase_p = -0.1: must be in [0, 1]");
}

/* [train] CUDA options: defaults, parsed values, and range or choice errors with file:line. */
static void test_cuda_options(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &cfg));
    if (cfg)
        CHECK(cfg->net.cuda.graph == 1 && cfg->net.cuda.conv_workspace_mib == 512 &&
                  cfg->net.cuda.conv_algo == SF_CONV_ALGO_AUTO && cfg->net.cuda.deterministic == 0,
              "CUDA options default to graph on, 512 MiB, auto, not deterministic");
    sf_config_free(cfg);
    cfg = NULL;
    CHECK_OK(sf_config_parse_string(
        HEAD "cuda_graph = off\nconv_workspace_mib = 64\nconv_algo = gemm\ndeterministic = on\nconv_lean = 0\n" MLP,
        "cuda.ini", &cfg));
    if (cfg)
        CHECK(cfg->net.cuda.graph == 0 && cfg->net.cuda.conv_workspace_mib == 64 &&
                  cfg->net.cuda.conv_algo == SF_CONV_ALGO_GEMM && cfg->net.cuda.deterministic == 1 &&
                  cfg->net.cuda.conv_lean == 0.0f,
              "cuda_graph = off, conv_workspace_mib = 64, conv_algo = gemm, deterministic = on, conv_lean = 0");
    sf_config_free(cfg);
    expect_error(HEAD "conv_algo = winograd\n" MLP, 3, "[train] conv_algo = winograd: expects auto, cudnn, gemm, nhwc, nchw or split");
    expect_error(HEAD "conv_workspace_mib = -1\n" MLP, 3, "[train] conv_workspace_mib = -1: must be in [0, 65536]");
    expect_error(HEAD "deterministic = mostly\n" MLP, 3, "[train] deterministic = mostly: expects on or off");
    expect_error(HEAD "conv_lean = 2\n" MLP, 3, "[train] conv_lean = 2: must be in [0, 1]");
}

/* [readout]: optional, the last section, at most once; its keys left [train]. */
static void test_readout(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &cfg));
    if (cfg)
        CHECK(cfg->net.readout == SF_READOUT_MEAN && cfg->net.readout_tau == 2.0f && cfg->net.loss == SF_LOSS_CE_MEAN,
              "without [readout]: mean readout, tau 2, CE on the mean");
    sf_config_free(cfg);
    cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP "[readout]\n", "empty.ini", &cfg));
    if (cfg)
        CHECK(cfg->net.readout == SF_READOUT_MEAN && cfg->net.readout_tau == 2.0f && cfg->net.loss == SF_LOSS_CE_MEAN,
              "an empty [readout] keeps the defaults");
    sf_config_free(cfg);
    cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP "[readout]\nloss = ce_per_step\n", "loss.ini", &cfg));
    if (cfg)
        CHECK(cfg->net.readout == SF_READOUT_MEAN && cfg->net.readout_tau == 2.0f &&
                  cfg->net.loss == SF_LOSS_CE_PER_STEP,
              "[readout] with one key keeps the others' defaults");
    sf_config_free(cfg);

    /* HEAD MLP spans lines 1-5, so [readout] is line 6. */
    expect_error(HEAD MLP "[readout]\ntype = sum\n", 7, "[readout] type = sum: expects mean or leaky");
    expect_error(HEAD MLP "[readout]\ntau = 0.5\n", 7, "[readout] tau = 0.5: must be in [1, 1000000]");
    expect_error(HEAD MLP "[readout]\ntau = fast\n", 7, "[readout] tau = fast: expects a number");
    expect_error(HEAD MLP "[readout]\nloss = mse\n", 7, "[readout] loss = mse: expects ce_mean, ce_per_step or mse_rate");
    expect_error(HEAD MLP "[readout]\ntau = 3\ntau = 4\n", 8, "[readout] tau given twice");
    expect_error(HEAD MLP "[readout]\nreadout_tau = 3\n", 7,
                 "unknown key 'readout_tau' in [readout] (accepted: type, tau, loss, label_smoothing)");
    expect_error(HEAD MLP "[readout]\n[lif]\n", 7,
                 "[lif] after [readout] (line 6): [readout] must be the last section");
    expect_error(HEAD "[flatten]\n[readout]\n[linear]\nout = 10\n", 5, "[linear] after [readout] (line 4)");
    expect_error(HEAD MLP "[readout]\n[neuron]\ntau = 3\n", 7, "[neuron] after [readout] (line 6)");
    expect_error(HEAD MLP "[readout]\ntype = leaky\n[readout]\n", 8, "[readout] given twice (first at line 6)");
    expect_error(HEAD "readout = leaky\n" MLP, 3, "unknown key 'readout' in [train]: moved to [readout] as type");
    expect_error(HEAD "readout_tau = 4\n" MLP, 3, "unknown key 'readout_tau' in [train]: moved to [readout] as tau");
    expect_error(HEAD "loss = ce_per_step\n" MLP, 3, "unknown key 'loss' in [train]: moved to [readout] as loss");
    expect_error(HEAD "[readout]\n", 3, "no layers");
}

static void test_readout_overrides(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &cfg));
    if (!cfg) return;
    CHECK_OK(sf_config_set_arg(cfg, "readout.type=leaky"));
    CHECK_OK(sf_config_set_arg(cfg, "readout.tau=4"));
    CHECK_OK(sf_config_set(cfg, "readout.loss", "ce_per_step"));
    CHECK(cfg->net.readout == SF_READOUT_LEAKY && cfg->net.readout_tau == 4.0f && cfg->net.loss == SF_LOSS_CE_PER_STEP,
          "readout overrides reach the net parameters");
    struct {
        const char *arg, *needle;
    } bad[] = {
        {"readout.type=sum", "override readout.type=sum: expects mean or leaky"},
        {"readout.tau=0.5", "override readout.tau=0.5: must be in [1, 1000000]"},
        {"readout.tau=", "override readout.tau=: expects a number"},
        {"readout.loss=mse", "override readout.loss=mse: expects ce_mean, ce_per_step or mse_rate"},
        {"readout.readout_tau=3", "unknown key 'readout_tau' in [readout]"},
        {"train.readout=leaky", "unknown key 'readout' in [train]: moved to [readout] as type"},
        {"train.loss=ce_mean", "unknown key 'loss' in [train]: moved to [readout] as loss"},
        {"readouts.tau=3", "unknown section 'readouts' (train, neuron, layerN or readout)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(sf_config_set_arg(cfg, bad[i].arg) == SF_ERR_INVALID, "%s is refused", bad[i].arg);
        CHECK(strstr(sf_last_error(), bad[i].needle) != NULL, "%s: message '%s' lacks '%s'", bad[i].arg,
              sf_last_error(), bad[i].needle);
    }
    CHECK(cfg->net.readout == SF_READOUT_LEAKY && cfg->net.readout_tau == 4.0f && cfg->net.loss == SF_LOSS_CE_PER_STEP,
          "refused readout overrides change nothing");
    sf_config_free(cfg);
}

static void test_overrides(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(full_config, "full.ini", &cfg));
    if (!cfg) return;
    CHECK_OK(sf_config_set(cfg, "train.lr", "0.1"));
    CHECK(cfg->optim.lr == 0.1f, "train.lr override");
    CHECK_OK(sf_config_set_arg(cfg, "train.device=cpu"));
    CHECK(cfg->net.device.kind == SF_DEVICE_CPU, "train.device override");
    CHECK_OK(sf_config_set_arg(cfg, "neuron.tau=7"));
    CHECK(cfg->layers[2].desc.lif.tau == 7.0f && cfg->layers[6].desc.lif.tau == 5.0f,
          "neuron.tau reaches the [lif] that did not set tau and no other");
    CHECK_OK(sf_config_set_arg(cfg, "neuron.surrogate=sigmoid"));
    CHECK(cfg->layers[2].desc.lif.alpha == 4.0f && cfg->layers[6].desc.lif.surrogate == SF_SURROGATE_RECT,
          "neuron.surrogate brings its default alpha to the layers that follow [neuron]");
    CHECK_OK(sf_config_set_arg(cfg, "neuron.alpha=3"));
    CHECK(cfg->layers[2].desc.lif.alpha == 3.0f && cfg->layers[6].desc.lif.alpha == 1.0f, "neuron.alpha");
    CHECK_OK(sf_config_set_arg(cfg, "layer6.alpha=0.5"));
    CHECK(cfg->layers[6].desc.lif.alpha == 0.5f, "layer6.alpha");
    CHECK_OK(sf_config_set_arg(cfg, "layer0.filters=16"));
    CHECK(cfg->layers[0].desc.out_channels == 16, "layer0.filters");
    CHECK_OK(sf_config_set_arg(cfg, "layer5.from=input"));
    CHECK(cfg->layers[5].desc.input2 == 0, "layer5.from=input");
    CHECK(sf_config_set_arg(cfg, "train.dataset=fashion-mnist") == SF_ERR_INVALID &&
              strstr(sf_last_error(), "mean has 3 values; the dataset has 1 channel"),
          "a dataset override must agree with the per-channel mean: %s", sf_last_error());
    CHECK_OK(sf_config_set_arg(cfg, "train.mean=default"));
    CHECK_OK(sf_config_set_arg(cfg, "train.dataset=fashion-mnist"));
    CHECK(cfg->net.in_channels == 1 && cfg->net.in_height == 28, "a dataset override changes the input shape");
    CHECK_OK(sf_config_set_arg(cfg, "train.dataset=cifar10"));

    struct {
        const char *arg, *needle;
    } bad[] = {
        {"train.lr=abc", "override train.lr=abc: expects a number"},
        {"train.lr", "expected section.key=value"},
        {"lr=0.1", "expected section.key"},
        {"optim.lr=0.1", "unknown section 'optim'"},
        {"layer99.size=3", "no layer 99 (layers are numbered 0 to 12)"},
        {"layer0.out=3", "unknown key 'out' in [conv]"},
        {"train.nope=1", "unknown key 'nope' in [train]"},
        {"layer2.decay=1", "decay_input"},
        {"train.std=1,2", "std has 2 values"},
        {"train.data_dir=a\tb", "control character"},
        {"train.data_dir=/0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890"
         "123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
         "longer than 180 characters"},
    };
    char *before = NULL, *after = NULL;
    CHECK_OK(sf_config_write(cfg, &before));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sf_status s = sf_config_set_arg(cfg, bad[i].arg);
        CHECK(s == SF_ERR_INVALID, "%s is refused", bad[i].arg);
        CHECK(strstr(sf_last_error(), bad[i].needle) != NULL, "%s: message '%s' lacks '%s'", bad[i].arg,
              sf_last_error(), bad[i].needle);
    }
    CHECK_OK(sf_config_write(cfg, &after));
    CHECK(before && after && strcmp(before, after) == 0, "refused overrides leave the config unchanged");
    free(before);
    free(after);
    sf_config_free(cfg);
}

static int layers_equal(const sf_config *a, const sf_config *b)
{
    if (a->num_layers != b->num_layers) return 0;
    for (int32_t i = 0; i < a->num_layers; i++)
        if (memcmp(&a->layers[i].desc, &b->layers[i].desc, sizeof(sf_layer_desc)) != 0 ||
            a->layers[i].lif_own != b->layers[i].lif_own)
            return 0;
    return 1;
}

static void test_round_trip(void)
{
    sf_config *cfg = NULL, *back = NULL;
    CHECK_OK(sf_config_parse_string(full_config, "full.ini", &cfg));
    if (!cfg) return;
    CHECK_OK(sf_config_set_arg(cfg, "neuron.grad_threshold=-0.5"));
    CHECK_OK(sf_config_set_arg(cfg, "train.data_dir=/data/some where"));
    CHECK_OK(sf_config_set_arg(cfg, "train.std=0.3, 0.2,0.1"));
    CHECK_OK(sf_config_set_arg(cfg, "train.lr=0.123456789"));
    CHECK_OK(sf_config_set_arg(cfg, "layer5.connect=iand"));
    CHECK_OK(sf_config_set_arg(cfg, "layer9.size=global"));
    CHECK(sf_config_set_arg(cfg, "layer8.size=global") == SF_ERR_INVALID && strstr(sf_last_error(), "integer"),
          "a global max pool accepted: %s", sf_last_error());
    char *text = NULL, *again = NULL;
    CHECK_OK(sf_config_write(cfg, &text));
    if (!text) return;
    CHECK_OK(sf_config_parse_string(text, "written.ini", &back));
    if (back) {
        CHECK_OK(sf_config_write(back, &again));
        CHECK(again && strcmp(text, again) == 0, "writing the parsed text gives the same text");
        CHECK(layers_equal(cfg, back), "the layers parse back equal");
        CHECK(memcmp(&cfg->neuron, &back->neuron, sizeof cfg->neuron) == 0, "[neuron] parses back equal");
        CHECK(memcmp(&cfg->optim, &back->optim, sizeof cfg->optim) == 0 &&
                  memcmp(&cfg->schedule, &back->schedule, sizeof cfg->schedule) == 0 &&
                  memcmp(&cfg->net, &back->net, sizeof cfg->net) == 0,
              "optimizer, schedule and net settings parse back equal (floats exactly)");
        CHECK(strcmp(back->train.data_dir, "/data/some where") == 0 && back->train.std[2] == 0.1f &&
                  isnan(back->train.std[3]),
              "train strings and lists parse back");
        CHECK(back->layers[12].line > cfg->layers[12].line, "the written text has its own line numbers");
        CHECK(back->layers[5].desc.connect == SF_CONNECT_IAND, "[add] connect parses back");
        CHECK(back->layers[9].desc.kernel == 0 && strstr(text, "[avgpool]\nsize = global\n"),
              "[avgpool] size = global is written as global and parses back");
    }
    const char *readout = strstr(text, "\n[readout]\ntype = leaky\ntau = 4\nloss = ce_per_step\n");
    CHECK(readout && readout > strstr(text, "[linear]") && !strchr(readout + 2, '['),
          "the writer ends with the [readout] section:\n%s", text);
    sf_config_free(back);
    back = NULL;
    /* The defaults round-trip too (a config without [readout] is written with one). */
    sf_config *plain = NULL;
    char *plain_text = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "plain.ini", &plain));
    if (plain) CHECK_OK(sf_config_write(plain, &plain_text));
    if (plain_text) CHECK_OK(sf_config_parse_string(plain_text, "written.ini", &back));
    CHECK(plain && back && memcmp(&plain->net, &back->net, sizeof plain->net) == 0 && plain_text &&
              strstr(plain_text, "[readout]\ntype = mean\ntau = 2\nloss = ce_mean\n"),
          "default readout settings are written and parse back equal");
    free(plain_text);
    sf_config_free(plain);
    /* The file reader gives the same, and names the file in errors. */
    char path[] = "/tmp/sf_test_config_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs(text, f);
        fputs("[bogus]\n", f);
        fclose(f);
        sf_config *fromfile = NULL;
        sf_status s = sf_config_load(path, &fromfile);
        CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), path) == sf_last_error() &&
                  strstr(sf_last_error(), "unknown section [bogus]"),
              "file errors start with the path: %s", sf_last_error());
        unlink(path);
    }
    sf_config_free(back);
    CHECK(sf_config_load("/nonexistent/x.ini", &back) == SF_ERR_IO && back == NULL, "missing file");
    free(text);
    free(again);
    sf_config_free(cfg);
}

/* The longest accepted string value still fits a config line when written out. */
/* Every numeric key, set as --set sets it with values at and past the edges of its range and of a float32 (1e-50
 * is 0 as a float, 1e39 infinite): what is accepted is stored inside the key's range, and the config then writes
 * out and reads back as itself, so that a run can be resumed and retrained from its own config.ini. */
static const char *const every_layer_config =
    "[train]\ndataset = synthetic\ninput_shape = 2, 8, 8\nclasses = 4\n[neuron]\nneuron = alif\n"
    "[conv]\nfilters = 4\nsize = 3\npad = 1\n[bn]\n[lif]\n[maxpool]\nsize = 2\n[avgpool]\nsize = 2\n[flatten]\n"
    "[linear]\nout = 8\n[rlif]\n[dropout]\n[linear]\nout = 4\n";

static int is_number_key(const sf_key_spec *k)
{
    return k->type == SF_V_INT32 || k->type == SF_V_INT64 || k->type == SF_V_U64 || k->type == SF_V_FLOAT ||
           k->type == SF_V_OPT_FLOAT || k->type == SF_V_CHANNELS || k->type == SF_V_SHAPE;
}

/* Sets `key` to each value around its range; `field` finds the stored value in a config. */
static void check_stored(const char *key, const sf_key_spec *k, void *(*field)(sf_config *, int32_t), int32_t layer)
{
    const double edges[] = {k->min, k->max, k->min > 0 ? k->min * 0.5 : -1e-50, k->max * 2, 1e-50, -1e-50, 1e-45,
                            1.5e-45, 1e-39, 3.4e38, 3.5e38, 1e39, 0, 0.5, 1, 2147483648.0, 1e300};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        sf_config *cfg = NULL, *back = NULL;
        CHECK_OK(sf_config_parse_string(every_layer_config, "every.ini", &cfg));
        if (!cfg) return;
        char value[64], *text = NULL, *again = NULL;
        snprintf(value, sizeof value, "%.17g", edges[e]);
        if (sf_config_set(cfg, key, value) == SF_OK) {
            if (k->type == SF_V_FLOAT) {
                float v;
                memcpy(&v, (char *)field(cfg, layer) + k->offset, sizeof v);
                const int in = (k->open_min ? v > k->min : v >= k->min) && v <= k->max;
                CHECK(in, "%s = %s is stored as %.9g, outside %s%g, %g]", key, value, (double)v, k->open_min ? "(" : "[",
                      k->min, k->max);
            }
            CHECK_OK(sf_config_write(cfg, &text));
            if (text) CHECK(sf_config_parse_string(text, "written.ini", &back) == SF_OK,
                            "%s = %s accepted, but the config it writes does not read back: %s", key, value,
                            sf_last_error());
            if (back) CHECK_OK(sf_config_write(back, &again));
            CHECK(!back || (again && strcmp(text, again) == 0), "%s = %s: the written config reads back as itself",
                  key, value);
        }
        sf_config_free(cfg);
        sf_config_free(back);
        free(text);
        free(again);
    }
}

static void *train_field(sf_config *cfg, int32_t layer) { return (void)layer, cfg; }
static void *neuron_field(sf_config *cfg, int32_t layer) { return (void)layer, &cfg->neuron; }
static void *layer_field(sf_config *cfg, int32_t layer) { return &cfg->layers[layer].desc; }

static void test_stored_values(void)
{
    char key[96];
    for (int i = 0; i < sf_num_train_keys; i++)
        if (is_number_key(&sf_train_keys[i])) {
            snprintf(key, sizeof key, "train.%s", sf_train_keys[i].name);
            check_stored(key, &sf_train_keys[i], train_field, 0);
        }
    for (int i = 0; i < sf_num_readout_keys; i++)
        if (is_number_key(&sf_readout_keys[i])) {
            snprintf(key, sizeof key, "readout.%s", sf_readout_keys[i].name);
            check_stored(key, &sf_readout_keys[i], train_field, 0);
        }
    for (int i = 0; i < sf_num_lif_keys; i++)
        if (is_number_key(&sf_lif_keys[i])) {
            snprintf(key, sizeof key, "neuron.%s", sf_lif_keys[i].name);
            check_stored(key, &sf_lif_keys[i], neuron_field, 0);
        }
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(every_layer_config, "every.ini", &cfg));
    for (int32_t l = 0; cfg && l < cfg->num_layers; l++)
        for (int i = 0; i < sf_num_layer_keys; i++)
            if (is_number_key(&sf_layer_keys[i]) && (sf_layer_keys[i].kinds & (1u << cfg->layers[l].desc.kind))) {
                snprintf(key, sizeof key, "layer%d.%s", (int)l, sf_layer_keys[i].name);
                check_stored(key, &sf_layer_keys[i], layer_field, l);
            }
    sf_config_free(cfg);
    /* the case that trained at lr 0: refused with the reason */
    CHECK_OK(sf_config_parse_string(every_layer_config, "every.ini", &cfg));
    CHECK(cfg && sf_config_set(cfg, "train.lr", "1e-50") == SF_ERR_INVALID &&
              strstr(sf_last_error(), "must be in (0, 1000] (1e-50 is stored as the 32-bit float 0)"),
          "lr = 1e-50: %s", sf_last_error());
    sf_config_free(cfg);
}

static void test_longest_path(void)
{
    sf_config *cfg = NULL, *back = NULL;
    CHECK_OK(sf_config_parse_string(HEAD MLP, "p.ini", &cfg));
    if (!cfg) return;
    char path[181];
    memset(path, 'p', 180);
    path[0] = '/';
    path[180] = 0;
    CHECK_OK(sf_config_set(cfg, "train.data_dir", path));
    char *text = NULL;
    CHECK_OK(sf_config_write(cfg, &text));
    if (text) CHECK_OK(sf_config_parse_string(text, "written.ini", &back));
    CHECK(back && strcmp(back->train.data_dir, path) == 0, "a 180-character data_dir round-trips");
    free(text);
    sf_config_free(back);
    sf_config_free(cfg);
}

static void test_key_tables(void)
{
    CHECK(sf_key_index(sf_lif_keys, sf_num_lif_keys, "surrogate", 0) >= 0 &&
              sf_key_index(sf_lif_keys, sf_num_lif_keys, "alpha", 0) >= 0,
          "the parser finds the LIF keys surrogate and alpha by name");
    CHECK(sf_num_train_keys < 64 && sf_num_readout_keys < 64 && sf_num_lif_keys < 31 && sf_num_layer_keys < 31,
          "every key fits its section's given-mask");
    CHECK(sf_key_index(sf_train_keys, sf_num_train_keys, "dataset", 0) >= 0,
          "the parser finds the required [train] key dataset by name");
    const int pool_stride = sf_key_index(sf_layer_keys, sf_num_layer_keys, "stride", 1u << SF_LAYER_MAXPOOL2D),
              conv_stride = sf_key_index(sf_layer_keys, sf_num_layer_keys, "stride", 1u << SF_LAYER_CONV2D);
    CHECK(pool_stride >= 0 && conv_stride >= 0 && sf_layer_keys[pool_stride].min == 0 &&
              sf_layer_keys[conv_stride].min == 1,
          "layer keys are found by name within their layer kind (a pool's stride may be 0, a conv's not)");
}

/* The text of docs/config.md between `heading` and the next heading, or NULL. */
static char *doc_section(const char *doc, const char *heading)
{
    const char *start = strstr(doc, heading);
    if (!start) return NULL;
    const char *end = strstr(start + strlen(heading), "\n## ");
    size_t n = end ? (size_t)(end - start) : strlen(start);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, start, n);
    out[n] = 0;
    return out;
}

/* Every key of a table has its row "| `key` |" in the doc's section. */
static void check_doc_keys(const char *doc, const char *heading, const sf_key_spec *table, int n)
{
    char *section = doc_section(doc, heading);
    const int len = (int)strlen(heading) - 2; /* without the newlines around it */
    CHECK(section != NULL, "docs/config.md has a section '%.*s'", len, heading + 1);
    if (!section) return;
    for (int i = 0; i < n; i++) {
        char row[64];
        snprintf(row, sizeof row, "| `%s` |", table[i].name);
        CHECK(strstr(section, row) != NULL, "docs/config.md '%.*s' describes %s", len, heading + 1, table[i].name);
    }
    free(section);
}

/* docs/config.md describes every key of the tables, and its example is a config that builds. */
static void test_doc(void)
{
    /* CMake compiles this file by its full path, so the source tree is found from __FILE__. */
    const char *slash = strrchr(__FILE__, '/');
    CHECK(slash != NULL, "__FILE__ is a path: %s", __FILE__);
    if (!slash) return;
    char path[1024];
    snprintf(path, sizeof path, "%.*s/../docs/config.md", (int)(slash - __FILE__), __FILE__);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    CHECK(n > 0 && n < sizeof doc - 1, "docs/config.md read whole (%zu bytes)", n);
    check_doc_keys(doc, "\n## [train]\n", sf_train_keys, sf_num_train_keys);
    check_doc_keys(doc, "\n## [neuron]\n", sf_lif_keys, sf_num_lif_keys);
    check_doc_keys(doc, "\n## Layer sections\n", sf_layer_keys, sf_num_layer_keys);
    check_doc_keys(doc, "\n## [readout]\n", sf_readout_keys, sf_num_readout_keys);
    char *layers = doc_section(doc, "\n## Layer sections\n");
    for (int kind = 0; layers && sf_config_section_name((sf_layer_kind)kind); kind++) {
        char name[64];
        snprintf(name, sizeof name, "`[%s]`", sf_config_section_name((sf_layer_kind)kind));
        CHECK(strstr(layers, name) != NULL, "docs/config.md's layer table names %s", name);
    }
    free(layers);

    char *start = strstr(doc, "```ini\n"), *end = start ? strstr(start + 7, "```") : NULL;
    CHECK(start && end, "docs/config.md has an ini example");
    if (!start || !end) return;
    *end = 0;
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    CHECK_OK(sf_config_parse_string(start + 7, "docs/config.md example", &cfg));
    if (!cfg) return;
    CHECK(cfg->net.readout == SF_READOUT_LEAKY && cfg->layers[5].desc.kind == SF_LAYER_ADD, "the example's network");
    CHECK_OK(sf_config_build_net(cfg, &net));
    sf_net_free(net);
    sf_config_free(cfg);
}

static void test_build_net(void)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    CHECK_OK(
        sf_config_parse_string(HEAD "[flatten]\n[linear]\nout = 32\n[lif]\n[linear]\nout = 10\n", "mlp.ini", &cfg));
    if (!cfg) return;
    CHECK_OK(sf_config_build_net(cfg, &net));
    CHECK(net && sf_net_num_layers(net) == 4, "MLP built with 4 layers");
    int32_t chw[3] = {0};
    if (net) CHECK_OK(sf_net_tensor_shape(net, 2, chw));
    CHECK(chw[0] * chw[1] * chw[2] == 32, "hidden layer of 32");
    sf_net_free(net);
    net = NULL;
    CHECK_OK(sf_config_set_arg(cfg, "layer3.out=7"));
    sf_status s = sf_config_build_net(cfg, &net);
    CHECK(s == SF_ERR_INVALID && net == NULL && strstr(sf_last_error(), "mlp.ini:7: ") &&
              strstr(sf_last_error(), "10 classes"),
          "a wrong number of outputs is named with the last layer's line: %s", sf_last_error());
    sf_config_free(cfg);

    /* A shape the engine refuses is located at the layer's section. */
    CHECK_OK(sf_config_parse_string(HEAD "[flatten]\n[conv]\nfilters = 4\nsize = 3\n[flatten]\n[linear]\nout = 10\n",
                                    "shape.ini", &cfg));
    if (!cfg) return;
    s = sf_config_build_net(cfg, &net);
    CHECK(s != SF_OK && net == NULL && strstr(sf_last_error(), "shape.ini:4: [conv] (layer 1)"),
          "conv after flatten fails at its line: %s", sf_last_error());
    sf_config_free(cfg);

    CHECK_OK(sf_config_parse_string(full_config, "full.ini", &cfg));
    if (!cfg) return;
    CHECK_OK(sf_config_set_arg(cfg, "train.device=cpu"));
    s = sf_config_build_net(cfg, &net);
    /* The add joins layer 4 (8×32×32) and layer 2: it builds; the shortcut conv halves the size. */
    CHECK(s == SF_OK, "the residual network builds: %s", sf_last_error());
    if (net) CHECK_OK(sf_net_tensor_shape(net, 8, chw));
    CHECK(chw[0] == 8 && chw[1] == 16 && chw[2] == 16, "shortcut conv output 8×16×16 (got %d×%d×%d)", chw[0],
          chw[1], chw[2]);
    sf_net_free(net);
    sf_config_free(cfg);
}

/* neuron = lif | plif | if | alif: layers inherit [neuron]'s model or take their own, the config round-trips, a
 * PLIF layer learns its w, and keys of other models, [plif]-like sections and out-of-range values fail at their
 * line. */
static void test_neuron_models(void)
{
    const char *text = HEAD "[neuron]\nneuron = alif\nrho = 0.9\nbeta = 0.5\n"       /* lines 3-6 */
                            "[conv]\nfilters = 4\nsize = 3\n[bn]\n"                 /* 7-10: layers 0, 1 */
                            "[lif]\nneuron = plif\nper_channel = on\ntau = 3\n"     /* 11-14: layer 2 */
                            "[lif]\n"                                                  /* 15: layer 3 */
                            "[flatten]\n[linear]\nout = 10\n[lif]\nneuron = if\n"; /* 16-21: layers 4-6 */
    sf_config *cfg = NULL, *back = NULL;
    CHECK_OK(sf_config_parse_string(text, "models.ini", &cfg));
    if (!cfg) return;
    const sf_lif_params *plif = &cfg->layers[2].desc.lif, *alif = &cfg->layers[3].desc.lif;
    const sf_lif_params *iff = &cfg->layers[6].desc.lif;
    CHECK(plif->model == SF_NEURON_PLIF && plif->per_channel == 1 && plif->tau == 3.0f, "[lif] neuron = plif");
    CHECK(alif->model == SF_NEURON_ALIF && alif->rho == 0.9f && alif->beta == 0.5f, "[lif] inherits the ALIF");
    CHECK(iff->model == SF_NEURON_IF, "[lif] neuron = if");
    CHECK(iff->rho == 0.95f && iff->beta == 1.8f, "[neuron]'s ALIF keys do not reach an IF layer (rho %g, beta %g)",
          (double)iff->rho, (double)iff->beta);
    char *written = NULL;
    CHECK_OK(sf_config_write(cfg, &written));
    CHECK_OK(sf_config_parse_string(written ? written : "", "written.ini", &back));
    CHECK(back && layers_equal(cfg, back) && memcmp(&back->neuron, &cfg->neuron, sizeof cfg->neuron) == 0,
          "the written config parses back to the same neurons:\n%s", written ? written : "");
    free(written);
    sf_config_free(back);
    sf_net *net = NULL;
    CHECK_OK(sf_config_build_net(cfg, &net));
    sf_tensor_info info = {0};
    int32_t wi = 0;
    for (; net && wi < sf_net_tensor_count(net, SF_ROLE_PARAM); wi++) {
        CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, wi, &info));
        if (strcmp(info.name, "2.w") == 0) break;
    }
    CHECK(strcmp(info.name, "2.w") == 0 && info.numel == 4, "the PLIF learns 2.w, one per channel (got %s, %lld)",
          info.name, (long long)info.numel);
    float w[4] = {0};
    if (net && info.numel == 4) CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, wi, w));
    CHECK(fabsf(w[0] + logf(2.0f)) < 1e-6f && w[3] == w[0], "w starts at -ln(tau - 1) = -ln 2: %g", w[0]);
    sf_net_free(net);
    CHECK(sf_config_set_arg(cfg, "layer6.tau=3") == SF_ERR_INVALID &&
              strstr(sf_last_error(), "override layer6.tau=3: [lif] (layer 6) tau does not apply to neuron = if"),
          "an override of a key the model lacks: %s", sf_last_error());
    CHECK(sf_config_set_arg(cfg, "layer2.neuron=lif") == SF_ERR_INVALID &&
              strstr(sf_last_error(), "per_channel does not apply to neuron = lif"),
          "an override of the model that leaves a foreign key: %s", sf_last_error());
    CHECK_OK(sf_config_set_arg(cfg, "neuron.tau_adapt=20"));
    CHECK(cfg->layers[3].desc.lif.tau_adapt == 20.0f, "neuron.tau_adapt reaches the ALIF layers");
    sf_config_free(cfg);

#define LAYERS "[flatten]\n[linear]\nout = 10\n" /* lines 3-5 */
    expect_error(HEAD LAYERS "[lif]\nneuron = if\ntau = 3\n", 8, "[lif] (layer 2) tau does not apply to neuron = if");
    /* a [neuron] default another model lacks is no error where a layer picks that model */
    CHECK_OK(sf_config_parse_string(HEAD "[neuron]\nneuron = plif\nper_channel = on\n" LAYERS "[lif]\nneuron = alif\n",
                                    "inherit.ini", &cfg));
    CHECK(cfg && cfg->layers[2].desc.lif.per_channel == 0, "the alif layer does not take per_channel");
    sf_config_free(cfg);
    CHECK_OK(sf_config_parse_string(HEAD "[neuron]\ndecay = 0.8\n" LAYERS "[lif]\nneuron = plif\n", "inherit.ini",
                                    &cfg));
    CHECK(cfg && cfg->layers[2].desc.lif.decay == 0.0f, "the plif layer does not take [neuron]'s decay");
    sf_config_free(cfg);
    expect_error(HEAD LAYERS "[lif]\ndecay = 0.5\nneuron = plif\n", 7, "decay does not apply to neuron = plif");
    expect_error(HEAD LAYERS "[lif]\nper_channel = on\n", 7, "per_channel does not apply to neuron = lif");
    expect_error(HEAD "[neuron]\nrho = 0.9\n" LAYERS "[lif]\n", 4, "[neuron] rho does not apply to neuron = lif");
    expect_error(HEAD "[neuron]\nneuron = if\n" LAYERS "[lif]\nsurrogate = atan\ndecay_input = off\n", 10,
                 "[lif] (layer 2) decay_input does not apply to neuron = if");
    expect_error(HEAD LAYERS "[lif]\nneuron = alif\ntau_adapt = -10\n", 8, "[lif] tau_adapt = -10: must be in");
    expect_error(HEAD LAYERS "[lif]\nneuron = alif\nbeta = -1\n", 8, "[lif] beta = -1: must be >= 0");
    expect_error(HEAD LAYERS "[lif]\nneuron = alif\nrho = 1\n", 6, "ALIF rho = 1: must be in [0, 1)");
    expect_error(HEAD LAYERS "[lif]\nneuron = plif\ntau = 1\n", 6, "PLIF tau = 1: must be a finite number > 1");
    expect_error(HEAD LAYERS "[lif]\nneuron = izhikevich\n", 7, "expects lif, plif, if or alif");
    expect_error(HEAD LAYERS "[plif]\ntau = 2\n", 6, "a neuron model is a key, neuron = plif");
    expect_error(HEAD LAYERS "[alif]\n", 6, "unknown section [alif]");
#undef LAYERS
    /* the recurrent layer runs the lif and if: another model is refused at its section when the net is built */
    CHECK_OK(sf_config_parse_string(HEAD "[flatten]\n[linear]\nout = 32\n[rlif]\nneuron = alif\n[linear]\nout = 10\n",
                                    "rlif.ini", &cfg));
    if (!cfg) return;
    sf_net *rnet = NULL;
    CHECK(sf_config_build_net(cfg, &rnet) == SF_ERR_INVALID && rnet == NULL &&
              strstr(sf_last_error(), "rlif.ini:6: [rlif] (layer 2)") && strstr(sf_last_error(), "not the alif"),
          "[rlif] neuron = alif: %s", sf_last_error());
    sf_config_free(cfg);
}

int main(void)
{
    test_key_tables();
    test_full_config();
    test_errors();
    test_readout();
    test_precision();
    test_cuda_options();
    test_erase_p();
    test_readout_overrides();
    test_overrides();
    test_round_trip();
    test_longest_path();
    test_stored_values();
    test_build_net();
    test_doc();
    test_neuron_models();
    return tu_finish("test_config");
}
