/* test_config_sparse.c — the config side of event-driven execution and recurrent layers: [train] sparse and
 * sparse_crossover, a layer's own sparse, [rlif] sections, input spikes from the encoding, the writer's round trip,
 * overrides, and every misuse as an error naming file:line (recurrent on a [lif], [rlif] where it cannot apply,
 * sparse = on for a layer whose input is not spikes, nonsense densities and choices). */
#include "config/config.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define HEAD "[train]\ndataset = fashion-mnist\n" /* lines 1-2 */

/* A recurrent SNN on latency-coded input: lines matter below. */
static const char *const rec_config = HEAD /* 1-2 */
    "encoding = latency\n"                 /* 3 */
    "timesteps = 5\n"                      /* 4 */
    "sparse_crossover = 0.2\n"             /* 5 */
    "[neuron]\n"                           /* 6 */
    "surrogate = fast_sigmoid\n"           /* 7 */
    "[flatten]\n"                          /* 8  layer 0 */
    "[linear]\n"                           /* 9  layer 1 */
    "out = 40\n"                           /* 10 */
    "sparse = on\n"                        /* 11 */
    "[rlif]\n"                             /* 12 layer 2 */
    "tau = 4\n"                            /* 13 */
    "sparse = off\n"                       /* 14 */
    "[linear]\n"                           /* 15 layer 3 */
    "out = 10\n";                          /* 16 */

#define expect_error tu_expect_config_error

/* Parses, then building the network fails at file:line. */
static void expect_build_error(const char *text, int line, const char *needle)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    CHECK_OK(sf_config_parse_string(text, "bad.ini", &cfg));
    if (!cfg) return;
    sf_status s = sf_config_build_net(cfg, &net);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bad.ini:%d: ", line);
    CHECK(s == SF_ERR_INVALID && net == NULL, "build status %s for:\n%s", sf_status_str(s), text);
    CHECK(strncmp(sf_last_error(), prefix, strlen(prefix)) == 0, "message '%s' does not start with '%s'",
          sf_last_error(), prefix);
    CHECK(strstr(sf_last_error(), needle) != NULL, "message '%s' lacks '%s'", sf_last_error(), needle);
    sf_net_free(net);
    sf_config_free(cfg);
}

static void test_parse(void)
{
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(rec_config, "rec.ini", &cfg));
    if (!cfg) return;
    CHECK(cfg->net.sparse == SF_SPARSE_OFF && cfg->net.sparse_crossover == 0.2f && cfg->net.input_spikes == 1,
          "[train]: sparse %d (off unless asked), crossover %g, input spikes %d", cfg->net.sparse,
          cfg->net.sparse_crossover, cfg->net.input_spikes);
    CHECK_OK(sf_config_set_arg(cfg, "train.sparse=auto"));
    CHECK(cfg->num_layers == 4 && cfg->layers[2].desc.kind == SF_LAYER_RLIF, "layer 2 is an rlif");
    CHECK(cfg->layers[1].desc.sparse == SF_SPARSE_ON && cfg->layers[2].desc.sparse == SF_SPARSE_OFF &&
              cfg->layers[3].desc.sparse == -1,
          "layer sparse modes %d %d %d", cfg->layers[1].desc.sparse, cfg->layers[2].desc.sparse,
          cfg->layers[3].desc.sparse);
    CHECK(cfg->layers[2].desc.lif.tau == 4.0f && cfg->layers[2].desc.lif.surrogate == SF_SURROGATE_FAST_SIGMOID &&
              cfg->layers[2].desc.lif.alpha == 10.0f,
          "rlif neuron keys: own tau, [neuron]'s surrogate and its alpha");
    sf_net *net = NULL;
    CHECK_OK(sf_config_build_net(cfg, &net));
    if (net) {
        CHECK_OK(sf_net_compile(net, 5, 2));
        sf_layer_sparsity info[4];
        CHECK(sf_net_layer_sparsity(net, info, 4) == 4, "4 layers");
        CHECK(info[1].eligible && info[1].mode == SF_SPARSE_ON && info[2].eligible && info[2].mode == SF_SPARSE_OFF &&
                  info[3].eligible && info[3].mode == SF_SPARSE_AUTO && info[3].crossover_forward == 0.2f,
              "resolved modes");
        sf_tensor_info ti;
        CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, 2, &ti));
        CHECK(strcmp(ti.name, "2.weight") == 0 && ti.ndim == 2 && ti.shape[0] == 40 && ti.shape[1] == 40,
              "the recurrent weight is %s [%lld, %lld]", ti.name, (long long)ti.shape[0], (long long)ti.shape[1]);
        sf_net_free(net);
    }

    /* written and read back: the same */
    char *text = NULL;
    CHECK_OK(sf_config_write(cfg, &text));
    sf_config *again = NULL;
    CHECK_OK(sf_config_parse_string(text ? text : "", "written.ini", &again));
    if (again) {
        CHECK(again->net.sparse == cfg->net.sparse && again->net.sparse_crossover == cfg->net.sparse_crossover &&
                  again->num_layers == 4,
              "round trip of [train]");
        for (int i = 0; i < 4; i++)
            CHECK(memcmp(&again->layers[i].desc, &cfg->layers[i].desc, sizeof cfg->layers[i].desc) == 0,
                  "round trip of layer %d", i);
    }
    CHECK(text && strstr(text, "[rlif]\ntau = 4\nsparse = off\n") && strstr(text, "out = 10\nsparse = default\n"),
          "written layers:\n%s", text ? text : "");
    free(text);
    sf_config_free(again);

    /* overrides */
    CHECK_OK(sf_config_set_arg(cfg, "train.sparse=off"));
    CHECK_OK(sf_config_set_arg(cfg, "layer3.sparse=on"));
    CHECK_OK(sf_config_set_arg(cfg, "layer2.v_threshold=0.5"));
    CHECK(cfg->net.sparse == SF_SPARSE_OFF && cfg->layers[3].desc.sparse == SF_SPARSE_ON &&
              cfg->layers[2].desc.lif.v_threshold == 0.5f,
          "overrides applied");
    CHECK(sf_config_set_arg(cfg, "train.sparse_crossover=-0.1") == SF_ERR_INVALID &&
              strstr(sf_last_error(), "must be in [0, 1]"),
          "override crossover -0.1: %s", sf_last_error());
    CHECK(sf_config_set_arg(cfg, "layer0.sparse=on") == SF_ERR_INVALID, "sparse on a flatten layer");
    CHECK_OK(sf_config_set_arg(cfg, "train.encoding=direct"));
    CHECK(cfg->net.input_spikes == 0, "direct encoding gives no input spikes");
    sf_config_free(cfg);
}

static void test_errors(void)
{
    expect_error(HEAD "[flatten]\n[linear]\nout = 32\n[lif]\nrecurrent = on\n[linear]\nout = 10\n", 7,
                 "a recurrent spiking layer is an [rlif] section");
    expect_error(HEAD "sparse = maybe\n[flatten]\n[linear]\nout = 10\n", 3, "expects off, auto or on");
    expect_error(HEAD "sparse_crossover = 1.5\n[flatten]\n[linear]\nout = 10\n", 3, "must be in [0, 1]");
    expect_error(HEAD "sparse_crossover = nan\n[flatten]\n[linear]\nout = 10\n", 3, "expects a number");
    expect_error(HEAD "[flatten]\n[linear]\nout = 10\nsparse = sometimes\n", 6, "expects off, auto or on, or default");
    expect_error(HEAD "[conv]\nfilters = 4\nsize = 3\nsparse = on\n[flatten]\n[linear]\nout = 10\n", 6,
                 "unknown key 'sparse' in [conv]");
    expect_error(HEAD "[flatten]\n[linear]\nout = 10\n[rlif]\ndecay = 1\n[linear]\nout = 10\n", 6, "[rlif] (layer 2)");
    expect_error(HEAD "[flatten]\n[linear]\nout = 10\n[rlif]\nsparse = on\nsparse = off\n[linear]\nout = 10\n", 8,
                 "sparse given twice");
    /* errors only the network can tell: [rlif] on an image, sparse = on without spikes */
    expect_build_error(HEAD "[conv]\nfilters = 4\nsize = 3\n[rlif]\n[flatten]\n[linear]\nout = 10\n", 6,
                       "a recurrent layer needs a vector");
    expect_build_error(HEAD "[flatten]\n[linear]\nout = 10\nsparse = on\n", 4, "sparse = on needs spikes");
    expect_build_error(HEAD "[flatten]\n[linear]\nout = 16\n[lif]\n[dropout]\n[linear]\nout = 10\nsparse = on\n", 8,
                       "sparse = on needs spikes");
}

int main(void)
{
    test_parse();
    test_errors();
    return tu_finish("test_config_sparse");
}
