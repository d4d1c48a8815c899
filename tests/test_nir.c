/* test_nir.c — NIR graphs: the HDF5 files (every field kind, subgraphs, metadata, bad files), the LIF mapping in
 * both directions (and against an Euler simulation of NIR's equations), export -> import round trips that give
 * identical parameters and identical spikes, batch norm folding, and the layers and nodes that are refused.
 * With SF_NIR_SAMPLES=DIR it also writes exported graphs with inputs and the engine's output spikes there, for
 * python/tests/test_nir.py to run through the `nir` package, snnTorch and SpikingJelly. */
#include "config/config_nir.h"
#include "io/files.h"
#include "io/safetensors.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/sf_test_nir_XXXXXX";

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

/* ================================================================ files */

static void test_file_round_trip(void)
{
    sf_nir_graph *g = NULL, *sub = NULL, *r = NULL;
    CHECK_OK(sf_nir_graph_create(&g));
    sf_nir_node *n = NULL;
    const int64_t wshape[2] = {2, 3}, sshape[1] = {3};
    const float w[6] = {1.5f, -2.25f, 3e-8f, 0.1f, -0.0f, 65504.0f};
    const double tau[3] = {2e-4, 3e-4, 1.0 / 3.0}, stride[2] = {2, 2}, groups = 1;
    CHECK_OK(sf_nir_add_node(g, "input", "Input", &n));
    CHECK_OK(sf_nir_set(&n->fields, "shape", SF_NIR_I64, 1, sshape, (const double[]){3, 1, 1}));
    CHECK_OK(sf_nir_add_node(g, "fc", "Linear", &n));
    CHECK_OK(sf_nir_set_f32(&n->fields, "weight", 2, wshape, w));
    CHECK_OK(sf_nir_add_node(g, "lif", "LIF", &n));
    CHECK_OK(sf_nir_set(&n->fields, "tau", SF_NIR_F64, 1, sshape, tau));
    CHECK_OK(sf_nir_set(&n->fields, "groups", SF_NIR_I64, 0, NULL, &groups));
    CHECK_OK(sf_nir_set(&n->fields, "stride", SF_NIR_I64, 1, (const int64_t[]){2}, stride));
    CHECK_OK(sf_nir_set_text(&n->fields, "padding", "same"));
    CHECK_OK(sf_nir_add_node(g, "rec", "NIRGraph", &n));
    CHECK_OK(sf_nir_graph_create(&sub));
    n->subgraph = sub;
    CHECK_OK(sf_nir_add_node(sub, "a", "Input", NULL));
    CHECK_OK(sf_nir_add_node(sub, "b", "Output", NULL));
    CHECK_OK(sf_nir_add_edge(sub, "a", "b"));
    CHECK_OK(sf_nir_add_node(g, "output", "Output", NULL));
    CHECK_OK(sf_nir_add_edge(g, "input", "fc"));
    CHECK_OK(sf_nir_add_edge(g, "fc", "lif"));
    CHECK_OK(sf_nir_add_edge(g, "lif", "lif")); /* a self-loop is a valid edge */
    CHECK_OK(sf_nir_add_edge(g, "lif", "output"));
    CHECK(sf_nir_add_edge(g, "lif", "output") == SF_ERR_FORMAT, "a repeated edge is refused");
    CHECK(sf_nir_add_edge(g, "lif", "nowhere") == SF_ERR_FORMAT, "an edge to a missing node is refused");
    CHECK(sf_nir_add_node(g, "fc", "Affine", NULL) == SF_ERR_INVALID, "node names are unique");
    CHECK_OK(sf_nir_set(&g->metadata, "dt", SF_NIR_F64, 0, NULL, (const double[]){1e-3}));
    char path[256];
    tmp_path(path, sizeof path, "io.nir");
    CHECK_OK(sf_nir_write(g, "1.0.8", path));
    CHECK_OK(sf_nir_read(path, &r));
    if (!r) return;
    CHECK(strcmp(r->version, "1.0.8") == 0, "version %s", r->version);
    CHECK(r->num_nodes == 5 && r->num_edges == 4, "%d nodes, %d edges", r->num_nodes, r->num_edges);
    int32_t fc = sf_nir_find_node(r, "fc"), lif = sf_nir_find_node(r, "lif"), rec = sf_nir_find_node(r, "rec");
    CHECK(fc >= 0 && lif >= 0 && rec >= 0, "nodes found by name");
    if (fc < 0 || lif < 0 || rec < 0) return;
    CHECK(strcmp(r->nodes[fc].type, "Linear") == 0, "type read back");
    const sf_nir_field *fw = sf_nir_field_of(&r->nodes[fc].fields, "weight");
    CHECK(fw && fw->dtype == SF_NIR_F32 && fw->ndim == 2 && fw->shape[0] == 2 && fw->shape[1] == 3, "weight shape");
    for (int i = 0; fw && i < 6; i++) CHECK(fw->values[i] == (double)w[i], "weight[%d] exact", i);
    const sf_nir_field *ft = sf_nir_field_of(&r->nodes[lif].fields, "tau");
    for (int i = 0; ft && i < 3; i++) CHECK(ft->dtype == SF_NIR_F64 && ft->values[i] == tau[i], "float64 exact");
    const sf_nir_field *fg = sf_nir_field_of(&r->nodes[lif].fields, "groups");
    CHECK(fg && fg->dtype == SF_NIR_I64 && fg->ndim == 0 && fg->values[0] == 1, "integer scalar");
    const sf_nir_field *fp = sf_nir_field_of(&r->nodes[lif].fields, "padding");
    CHECK(fp && fp->dtype == SF_NIR_STRING && strcmp(fp->text, "same") == 0, "string field");
    CHECK(r->nodes[rec].subgraph && r->nodes[rec].subgraph->num_nodes == 2 && r->nodes[rec].subgraph->num_edges == 1,
          "subgraph read back");
    int self_loop = 0;
    for (int32_t k = 0; k < r->num_edges; k++) self_loop |= r->edges[k].from == lif && r->edges[k].to == lif;
    CHECK(self_loop, "self-loop edge read back");
    const sf_nir_field *dt = sf_nir_field_of(&r->metadata, "dt");
    CHECK(dt && dt->values[0] == 1e-3, "graph metadata read back");
    sf_nir_graph_free(r);

    /* The same bytes from memory; damaged copies are errors, never crashes. */
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(sf_read_file(path, SIZE_MAX, &buf, &len));
    CHECK_OK(sf_nir_read_memory(buf, len, "mem", &r));
    sf_nir_graph_free(r);
    r = NULL;
    CHECK(sf_nir_read_memory(buf, len / 2, "half", &r) == SF_ERR_FORMAT && !r, "a truncated file: %s", sf_last_error());
    CHECK(sf_nir_read_memory("not hdf5 at all", 15, "text", &r) == SF_ERR_FORMAT && !r, "not HDF5");
    CHECK(strstr(sf_last_error(), "not an HDF5 file") != NULL, "message: %s", sf_last_error());
    for (size_t cut = 8; cut < len; cut += len / 17 + 1) {
        sf_status s = sf_nir_read_memory(buf, cut, "cut", &r);
        CHECK(s == SF_ERR_FORMAT || s == SF_ERR_NOMEM, "cut at %zu: %s", cut, sf_status_str(s));
        sf_nir_graph_free(r);
        r = NULL;
    }
    free(buf);
    CHECK(sf_nir_read("/nonexistent/x.nir", &r) == SF_ERR_IO, "a missing file is an IO error");

    /* A valid HDF5 file that is not a NIR graph (a graph whose root lacks "node"). */
    sf_nir_graph_free(g);
}

/* ================================================================ the LIF mapping */

static void lif(sf_lif_params *p, float tau, float decay, int decay_input, float theta, float reset)
{
    sf_lif_default_params(p);
    p->tau = tau;
    p->decay = decay;
    p->decay_input = decay_input;
    p->v_threshold = theta;
    p->v_reset = reset;
}

static void test_lif_round_trip(void)
{
    const float taus[] = {2.0f, 3.0f, 1.5f, 7.3f, 100.0f, 1.0f}, decays[] = {0.9f, 0.37f, 0.5f, 0.999f, 1.0f};
    const double dts[] = {1e-4, 1e-3, 1.0};
    for (size_t d = 0; d < 3; d++)
        for (int di = 0; di < 2; di++)
            for (size_t k = 0; k < sizeof taus / sizeof taus[0] + sizeof decays / sizeof decays[0]; k++) {
                int by_tau = k < sizeof taus / sizeof taus[0];
                float tau = by_tau ? taus[k] : 2.0f, decay = by_tau ? 0.0f : decays[k - sizeof taus / sizeof taus[0]];
                int input = di && !(by_tau && tau <= 1.0f) && decay < 1.0f;
                sf_lif_params p, q;
                lif(&p, tau, decay, input, 0.75f, -0.125f);
                sf_lif_default_params(&q);
                sf_nir_neuron n;
                CHECK_OK(sf_lif_to_nir(&p, dts[d], &n));
                CHECK_OK(sf_lif_params_from_nir(n.is_if, n.tau, n.r, n.v_leak, n.v_threshold, n.v_reset, dts[d], &q));
                /* What the kernel computes must be identical: its a, c, threshold and reset. */
                float a_p = p.decay > 0 ? p.decay : 1.0f - 1.0f / p.tau, a_q = q.decay > 0 ? q.decay : 1.0f - 1.0f / q.tau;
                CHECK(a_p == a_q && p.decay_input == q.decay_input && p.v_threshold == q.v_threshold &&
                          p.v_reset == q.v_reset && !q.soft_reset,
                      "dt %g tau %g decay %g decay_input %d: a %.9g vs %.9g, input %d, theta %g, reset %g", dts[d],
                      (double)tau, (double)decay, input, (double)a_p, (double)a_q, q.decay_input,
                      (double)q.v_threshold, (double)q.v_reset);
                CHECK(by_tau ? q.tau == p.tau && q.decay == 0 : 1, "tau-configured stays tau (%g)", (double)q.tau);
                CHECK(n.is_if == (decay >= 1.0f), "IF exactly when the leak is 1");
                CHECK_OK(sf_lif_params_check(&q));
            }
    sf_lif_params p;
    lif(&p, 2.0f, 0, 1, 1, 0);
    p.soft_reset = 1;
    sf_nir_neuron n;
    CHECK(sf_lif_to_nir(&p, 1e-4, &n) == SF_ERR_UNSUPPORTED, "a soft reset has no NIR form");
    /* The neuron models: the IF is NIR's IF; the PLIF's learned tau and the ALIF's threshold have no NIR form. */
    lif(&p, 2.0f, 0, 1, 1, 0);
    p.model = SF_NEURON_IF;
    CHECK_OK(sf_lif_to_nir(&p, 1e-4, &n));
    CHECK(n.is_if && n.r == 1.0 / 1e-4, "the IF model exports as NIR's IF (is_if %d, r %g)", n.is_if, n.r);
    for (int m = SF_NEURON_PLIF; m <= SF_NEURON_ALIF; m += SF_NEURON_ALIF - SF_NEURON_PLIF) {
        p.model = (sf_neuron_model)m;
        CHECK(sf_lif_to_nir(&p, 1e-4, &n) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "no NIR export"),
              "the %s is refused: %s", sf_neuron_model_name(p.model), sf_last_error());
    }

    /* Other frameworks' conventions. snnTorch's Leaky(beta): tau = dt/(1-beta), r = tau/dt, v_leak = 0. */
    const float beta = 0.9f;
    sf_nir_neuron sn = {.tau = 1e-4 / (1.0 - (double)beta), .v_threshold = 1.0};
    sn.r = sn.tau / 1e-4;
    sf_lif_default_params(&p);
    CHECK_OK(sf_lif_params_from_nir(0, sn.tau, sn.r, 0, 1, 0, 1e-4, &p));
    CHECK(p.decay == beta && !p.decay_input && p.v_threshold == 1.0f, "snnTorch: decay %.9g, input %d", (double)p.decay,
          p.decay_input);
    /* SpikingJelly's LIFNode(tau=2, v_reset=-0.2): tau = 2·dt, r = 1, v_leak = v_reset: measured from v_leak. */
    sf_nir_neuron sj = {.tau = 2e-4, .r = 1.0, .v_leak = -0.2, .v_threshold = 1.0, .v_reset = -0.2};
    CHECK_OK(sf_lif_params_from_nir(0, sj.tau, sj.r, sj.v_leak, sj.v_threshold, sj.v_reset, 1e-4, &p));
    CHECK(p.tau == 2.0f && p.decay == 0 && p.decay_input && p.v_threshold == 1.2f && p.v_reset == 0.0f,
          "SpikingJelly: tau %g input %d theta %g reset %g", (double)p.tau, p.decay_input, (double)p.v_threshold,
          (double)p.v_reset);
    sf_nir_neuron tiny = {.tau = 5e-5, .r = 1, .v_threshold = 1};
    CHECK(sf_lif_params_from_nir(0, tiny.tau, 1, 0, 1, 0, 1e-4, &p) == SF_ERR_UNSUPPORTED, "tau < dt is refused");
}

/* NIR's LIF by forward Euler in float64, starting at v_reset: v += dt/tau·(v_leak - v + r·I); spike when v > θ. */
static void euler(const sf_nir_neuron *n, double dt, int64_t T, int64_t N, const float *x, float *s)
{
    for (int64_t j = 0; j < N; j++) {
        double v = n->v_reset;
        for (int64_t t = 0; t < T; t++) {
            double I = x[t * N + j];
            v = n->is_if ? v + dt * n->r * I : v + dt / n->tau * (n->v_leak - v + n->r * I);
            s[t * N + j] = v >= n->v_threshold;
            if (v >= n->v_threshold) v = n->v_reset;
        }
    }
}

/* The imported LIF spikes as NIR's equations do, v_leak and odd input scales included (up to threshold ties). */
static void test_lif_against_euler(void)
{
    const sf_nir_neuron cases[] = {
        {.tau = 2e-4, .r = 1, .v_threshold = 1},
        {.tau = 5e-4, .r = 5, .v_threshold = 0.5, .v_reset = -0.3},
        {.tau = 3e-4, .r = 1, .v_leak = 0.4, .v_threshold = 1, .v_reset = 0.4},
        {.tau = 4e-4, .r = 0.37, .v_leak = 0.1, .v_threshold = 0.2, .v_reset = -1},
        {.is_if = 1, .r = 1e4, .v_threshold = 1},
        {.is_if = 1, .r = 2.5e3, .v_threshold = 0.8, .v_reset = 0.1},
    };
    const int64_t T = 64, N = 97;
    float *x = malloc(sizeof(float) * T * N), *s = malloc(sizeof(float) * T * N), *ref = malloc(sizeof(float) * T * N);
    tu_randn(x, T * N, 0.5f, 1.0f, 11);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sf_lif_params p;
        sf_lif_default_params(&p);
        const sf_nir_neuron *n = &cases[c];
        CHECK_OK(sf_lif_params_from_nir(n->is_if, n->tau, n->r, n->v_leak, n->v_threshold, n->v_reset, 1e-4, &p));
        CHECK_OK(sf_lif_forward(&p, T, N, x, s, (sf_device){SF_DEVICE_CPU, 0}, NULL));
        euler(&cases[c], 1e-4, T, N, x, ref);
        int64_t diff = 0, spikes = 0;
        for (int64_t i = 0; i < T * N; i++) {
            diff += s[i] != ref[i];
            spikes += ref[i] != 0;
        }
        printf("NIR neuron case %zu: %lld of %lld steps differ from float64 Euler (%lld spikes)\n", c, (long long)diff,
               (long long)(T * N), (long long)spikes);
        /* float32 against float64: a spike may flip where v lands within rounding of the threshold, and then the
         * neuron's later steps differ; allow 1% of the steps. */
        CHECK(diff <= T * N / 100 && spikes > 0, "case %zu: %lld of %lld steps differ (%lld spikes)", c,
              (long long)diff, (long long)(T * N), (long long)spikes);
    }
    free(x);
    free(s);
    free(ref);
}

/* ================================================================ export -> import */

typedef struct built {
    sf_config *cfg;
    sf_net *net;
} built;

static void built_free(built *b)
{
    sf_net_free(b->net);
    sf_config_free(b->cfg);
    memset(b, 0, sizeof *b);
}

static const int64_t T = 8, B = 4;

/* A net from config text, compiled for T, B in full memory, parameters randomised (seeded) and BN statistics set. */
static int build(const char *text, uint64_t seed, built *b)
{
    memset(b, 0, sizeof *b);
    sf_status s = sf_config_parse_string(text, "test.ini", &b->cfg);
    if (s == SF_OK) {
        b->cfg->net.memory = SF_MEMORY_FULL;
        s = sf_config_build_net(b->cfg, &b->net);
    }
    if (s == SF_OK) s = sf_net_compile(b->net, T, B);
    CHECK(s == SF_OK, "building: %s", sf_last_error());
    if (s != SF_OK || !seed) return s == SF_OK;
    for (int role = SF_ROLE_PARAM; role <= SF_ROLE_BUFFER; role += SF_ROLE_BUFFER - SF_ROLE_PARAM) {
        for (int32_t i = 0; i < sf_net_tensor_count(b->net, (sf_tensor_role)role); i++) {
            sf_tensor_info ti;
            CHECK_OK(sf_net_tensor_info(b->net, (sf_tensor_role)role, i, &ti));
            float *v = malloc((size_t)ti.numel * sizeof *v);
            tu_randn(v, ti.numel, 0.0f, 0.5f, seed * 100 + (uint64_t)i + (uint64_t)role * 50);
            int is_var = strstr(ti.name, "running_var") != NULL, is_bn_w = role == SF_ROLE_PARAM && ti.ndim == 1 &&
                                                                            strstr(ti.name, "weight") != NULL;
            for (int64_t k = 0; k < ti.numel; k++)
                if (is_var || is_bn_w) v[k] = 0.5f + fabsf(v[k]);
            CHECK_OK(sf_net_tensor_write(b->net, (sf_tensor_role)role, i, v));
            free(v);
        }
    }
    return 1;
}

/* The output of the net's last layer, all T steps, on input x (eval mode), into a malloc'd array of *n floats. */
static float *run_net(sf_net *net, const float *x, int64_t *n)
{
    int32_t chw[3];
    CHECK_OK(sf_net_forward(net, x, 0));
    CHECK_OK(sf_net_tensor_shape(net, sf_net_num_layers(net), chw));
    *n = T * B * chw[0] * chw[1] * chw[2];
    float *out = malloc((size_t)*n * sizeof *out);
    CHECK_OK(sf_net_read_activation(net, sf_net_num_layers(net), out));
    return out;
}

/* Exports b to a file, reads it back and imports it: the imported net (with its parameters) in *out. */
static int round_trip(const built *b, const char *file, built *out, char **text)
{
    sf_nir_graph *g = NULL, *r = NULL;
    sf_tensor_list params = {0};
    char path[256];
    tmp_path(path, sizeof path, file);
    sf_status s = sf_config_to_nir(b->cfg, b->net, 1e-4, &g);
    CHECK(s == SF_OK, "export %s: %s", file, sf_last_error());
    if (s == SF_OK) CHECK_OK(s = sf_nir_write(g, SF_NIR_VERSION, path));
    if (s == SF_OK) CHECK_OK(s = sf_nir_read(path, &r));
    sf_nir_import_options o = {.source = path, .dataset = -1};
    if (s == SF_OK) {
        s = sf_config_from_nir(r, &o, text, &params);
        CHECK(s == SF_OK, "import %s: %s", file, sf_last_error());
    }
    int ok = s == SF_OK && build(*text, 0, out);
    if (ok) CHECK_OK(sf_tensor_list_apply(&params, out->net));
    sf_tensor_list_free(&params);
    sf_nir_graph_free(g);
    sf_nir_graph_free(r);
    return ok;
}

/* Whether two nets give the same outputs on the same inputs: *flips counts differing elements. */
static void compare_outputs(sf_net *a, sf_net *b, const char *what, int64_t max_flips)
{
    int32_t chw[3];
    CHECK_OK(sf_net_tensor_shape(a, 0, chw));
    const int64_t n_in = T * B * chw[0] * chw[1] * chw[2];
    float *x = malloc((size_t)n_in * sizeof *x);
    tu_randn(x, n_in, 0.3f, 1.0f, 77);
    int64_t na = 0, nb = 0;
    float *ya = run_net(a, x, &na), *yb = run_net(b, x, &nb);
    CHECK(na == nb, "%s: output sizes %lld and %lld", what, (long long)na, (long long)nb);
    int64_t flips = 0, nonzero = 0;
    for (int64_t i = 0; na == nb && i < na; i++) {
        flips += ya[i] != yb[i];
        nonzero += ya[i] != 0;
    }
    printf("%s: %lld of %lld outputs differ (allowed %lld), %lld non-zero\n", what, (long long)flips, (long long)na,
           (long long)max_flips, (long long)nonzero);
    CHECK(flips <= max_flips && nonzero > 0, "%s: %lld of %lld outputs differ (allowed %lld), %lld non-zero", what,
          (long long)flips, (long long)na, (long long)max_flips, (long long)nonzero);
    free(x);
    free(ya);
    free(yb);
}

static const char *const mlp_ini =
    "[train]\ndataset = fashion-mnist\n[neuron]\nsurrogate = atan\n"
    "[flatten]\n[linear]\nout = 40\n[lif]\ntau = 3\nv_reset = -0.125\n"
    "[linear]\nout = 30\nbias = off\n[lif]\ndecay = 0.8\ndecay_input = off\nv_threshold = 0.5\n"
    "[dropout]\np = 0.3\n[linear]\nout = 10\n[lif]\ndecay = 1\ndecay_input = off\nv_threshold = 0.25\n"
    "[readout]\ntype = leaky\ntau = 3\n";

/* Conv, average pooling with a border, a residual sum whose operand is not the previous layer, a global average
 * pool (exported as the pool of the plane's size), flatten of a [C,1,1] image. */
static const char *const conv_ini =
    "[train]\ndataset = fashion-mnist\n"
    "[conv]\nfilters = 4\nsize = 3\nstride = 2\npad = 1\nbias = off\n[lif]\ntau = 2\n"   /* 0, 1: 4x14x14 */
    "[avgpool]\nsize = 3\nstride = 2\npad = 1\n"                                        /* 2: 4x7x7 */
    "[conv]\nfilters = 4\nsize = 3\npad = 1\n[lif]\ndecay = 0.6\nv_threshold = 0.3\n"  /* 3, 4 */
    "[add]\nfrom = 2\n"                                                                 /* 5: 4 + 2 */
    "[conv]\nfilters = 6\nsize = 3\npad = 1\n[avgpool]\nsize = global\n"                  /* 6, 7: 6x1x1 */
    "[lif]\n[linear]\nout = 10\n";                                                      /* 8, 9 */

/* Max pooling of spikes (SumPool2d + Threshold in NIR), after a LIF layer and after dropout (with a border: zeros
 * in the sum, -inf in the max, the same over spikes), and of Poisson input. */
static const char *const maxpool_ini =
    "[train]\ndataset = fashion-mnist\nencoding = poisson\n"
    "[maxpool]\nsize = 2\n"                                                   /* 0: of the (binary) input */
    "[conv]\nfilters = 4\nsize = 3\npad = 1\n[bn]\n[lif]\n[dropout]\n[maxpool]\nsize = 3\nstride = 2\npad = 1\n"
    "[flatten]\n[linear]\nout = 10\n";

/* Batch norm after a conv, after an average pool, and after a linear layer without bias. */
static const char *const bn_ini =
    "[train]\ndataset = cifar10\n"
    "[conv]\nfilters = 6\nsize = 3\nbias = off\n[bn]\n[lif]\n"
    "[conv]\nfilters = 5\nsize = 3\n[avgpool]\nsize = 2\n[bn]\n[lif]\n"
    "[flatten]\n[linear]\nout = 12\nbias = off\n[bn]\n[lif]\n[linear]\nout = 10\n[lif]\ntau = 1.5\n";

static void test_round_trip_exact(void)
{
    const char *const nets[][2] = {{"mlp.nir", mlp_ini}, {"conv.nir", conv_ini}};
    for (size_t k = 0; k < 2; k++) {
        built a, b, c;
        char *text = NULL, *text2 = NULL;
        if (!build(nets[k][1], 3 + k, &a)) continue;
        if (round_trip(&a, nets[k][0], &b, &text)) {
            /* identical spikes: every element of the last layer's output, all steps */
            compare_outputs(a.net, b.net, nets[k][0], 0);
            /* and a second trip changes nothing: same config (but for its source line), same parameters */
            if (round_trip(&b, "again.nir", &c, &text2)) {
                char *r1 = NULL, *r2 = NULL;
                CHECK_OK(sf_config_write(b.cfg, &r1));
                CHECK_OK(sf_config_write(c.cfg, &r2));
                CHECK(r1 && r2 && strcmp(r1, r2) == 0, "%s: the second import differs:\n%s\n%s", nets[k][0], text,
                      text2);
                free(r1);
                free(r2);
                int64_t n1 = 0, n2 = 0;
                float *p1 = tu_net_read_role(b.net, SF_ROLE_PARAM, &n1), *p2 = tu_net_read_role(c.net, SF_ROLE_PARAM, &n2);
                CHECK(n1 == n2 && memcmp(p1, p2, (size_t)n1 * sizeof *p1) == 0, "%s: parameters identical", nets[k][0]);
                free(p1);
                free(p2);
                built_free(&c);
            }
            built_free(&b);
        }
        if (k == 0) { /* the MLP maps layer for layer: parameters identical to the original's */
            int64_t n1 = 0, n2 = 0;
            built d;
            char *t = NULL;
            if (round_trip(&a, "mlp2.nir", &d, &t)) {
                float *p1 = tu_net_read_role(a.net, SF_ROLE_PARAM, &n1), *p2 = tu_net_read_role(d.net, SF_ROLE_PARAM, &n2);
                CHECK(n1 == n2 && memcmp(p1, p2, (size_t)n1 * sizeof *p1) == 0, "MLP parameters identical");
                CHECK(d.cfg->net.readout == SF_READOUT_LEAKY && d.cfg->net.readout_tau == 3.0f, "leaky readout kept");
                free(p1);
                free(p2);
                built_free(&d);
            }
            free(t);
        }
        free(text);
        free(text2);
        built_free(&a);
    }
}

static void test_maxpool_of_spikes(void)
{
    built a, b;
    char *text = NULL;
    if (!build(maxpool_ini, 12, &a)) return;
    if (round_trip(&a, "maxpool.nir", &b, &text)) {
        CHECK(strstr(text, "[maxpool]") && strstr(strstr(text, "[maxpool]") + 1, "[maxpool]"),
              "both max pools come back:\n%s", text);
        /* the input of a Poisson-encoded net is spikes: feed 0/1 values */
        int32_t chw[3];
        CHECK_OK(sf_net_tensor_shape(a.net, 0, chw));
        const int64_t n_in = T * B * chw[0] * chw[1] * chw[2];
        float *x = malloc((size_t)n_in * sizeof *x);
        tu_randn(x, n_in, 0.0f, 1.0f, 5);
        for (int64_t i = 0; i < n_in; i++) x[i] = x[i] > 0.5f;
        int64_t na = 0, nb = 0;
        float *ya = run_net(a.net, x, &na), *yb = run_net(b.net, x, &nb);
        int64_t diff = na == nb ? 0 : 1;
        /* the outputs are the last linear layer's currents: in the imported net (no dropout between the max pool and
         * it) that layer may run event-driven (sparse = auto) and sum in another order, so compare to 1e-4 */
        for (int64_t i = 0; na == nb && i < na; i++) diff += fabsf(ya[i] - yb[i]) > 1e-4f * (1.0f + fabsf(ya[i]));
        printf("maxpool.nir: %lld of %lld outputs differ by more than 1e-4 (BN folded)\n", (long long)diff,
               (long long)na);
        CHECK(diff <= na / 50, "max pools of spikes: %lld of %lld outputs differ", (long long)diff, (long long)na);
        free(x);
        free(ya);
        free(yb);
        built_free(&b);
    }
    free(text);
    built_free(&a);
}

static void test_batchnorm_folded(void)
{
    built a, b;
    char *text = NULL;
    if (!build(bn_ini, 9, &a)) return;
    if (round_trip(&a, "bn.nir", &b, &text)) {
        CHECK(strstr(text, "[bn]") == NULL, "no batch norm after import:\n%s", text);
        /* Folding rounds differently from normalising: a spike may flip where h is within rounding of θ. */
        compare_outputs(a.net, b.net, "bn.nir", T * B * 10 / 50);
        built_free(&b);
    }
    free(text);
    built_free(&a);
}

/* Export refusals name the layer and its config line. */
static void test_export_refusals(void)
{
    static const struct {
        const char *ini, *expect;
    } cases[] = {
        {"[train]\ndataset = mnist\n[conv]\nfilters = 2\nsize = 3\n[maxpool]\nsize = 2\n[flatten]\n[linear]\nout = 10\n",
         "test.ini:6: layer 1 (maxpool2d): NIR has no max pooling"},
        {"[train]\ndataset = mnist\n[flatten]\n[linear]\nout = 10\n[lif]\nreset = soft\n", "layer 2 (lif): a soft reset"},
        {"[train]\ndataset = mnist\n[bn]\n[flatten]\n[linear]\nout = 10\n", "layer 0 (batchnorm): NIR has no batch norm"},
        {"[train]\ndataset = mnist\n[conv]\nfilters = 2\nsize = 3\n[dropout]\n[bn]\n[conv]\nfrom = 0\nfilters = 2\nsize = 3\n"
         "[flatten]\n[linear]\nout = 10\n", "layer 2 (batchnorm)"},
        /* an average pool's zero border is not scaled and shifted by a batch norm after it: nothing to fold into */
        {"[train]\ndataset = mnist\n[conv]\nfilters = 2\nsize = 3\n[avgpool]\nsize = 3\nstride = 2\npad = 1\n[bn]\n"
         "[flatten]\n[linear]\nout = 10\n", "layer 2 (batchnorm)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        built a;
        sf_nir_graph *g = NULL;
        if (!build(cases[k].ini, 1, &a)) continue;
        sf_status s = sf_config_to_nir(a.cfg, a.net, 1e-4, &g);
        CHECK(s == SF_ERR_UNSUPPORTED && !g && strstr(sf_last_error(), cases[k].expect),
              "case %zu: %s: %s", k, sf_status_str(s), sf_last_error());
        built_free(&a);
    }
}

/* ---------------------------------------------------------------- import refusals on graphs built here */

static sf_nir_node *node(sf_nir_graph *g, const char *name, const char *type)
{
    sf_nir_node *n = NULL;
    CHECK_OK(sf_nir_add_node(g, name, type, &n));
    return n;
}

static void set_vec(sf_nir_node *n, const char *field, int64_t len, double value)
{
    double *v = malloc((size_t)len * sizeof *v);
    for (int64_t i = 0; i < len; i++) v[i] = value;
    CHECK_OK(sf_nir_set(&n->fields, field, SF_NIR_F64, 1, &len, v));
    free(v);
}

/* Input [784] -> Affine(784 -> 10) -> <tail> -> Output: a graph each case changes. */
static sf_nir_graph *base_graph(const char *tail_type)
{
    sf_nir_graph *g = NULL;
    CHECK_OK(sf_nir_graph_create(&g));
    set_vec(node(g, "input", "Input"), "shape", 1, 784);
    sf_nir_node *fc = node(g, "fc", "Affine");
    float *w = calloc(7840, sizeof *w);
    CHECK_OK(sf_nir_set_f32(&fc->fields, "weight", 2, (const int64_t[]){10, 784}, w));
    free(w);
    set_vec(fc, "bias", 10, 0.5);
    sf_nir_node *t = node(g, "tail", tail_type);
    set_vec(t, "tau", 10, 2e-4);
    set_vec(t, "tau_mem", 10, 2e-4);
    set_vec(t, "tau_syn", 10, 2e-4);
    set_vec(t, "r", 10, 1);
    set_vec(t, "v_leak", 10, 0);
    set_vec(t, "v_threshold", 10, 1);
    set_vec(node(g, "output", "Output"), "shape", 1, 10);
    CHECK_OK(sf_nir_add_edge(g, "input", "fc"));
    CHECK_OK(sf_nir_add_edge(g, "fc", "tail"));
    CHECK_OK(sf_nir_add_edge(g, "tail", "output"));
    return g;
}

/* Input [1, 28, 28] -> one node of `type` -> Output: *layer is that node, for the case to give its fields. */
static sf_nir_graph *image_graph(const char *type, sf_nir_node **layer)
{
    sf_nir_graph *g = NULL;
    CHECK_OK(sf_nir_graph_create(&g));
    CHECK_OK(sf_nir_set(&node(g, "input", "Input")->fields, "shape", SF_NIR_I64, 1, (const int64_t[]){3},
                        (const double[]){1, 28, 28}));
    node(g, "layer", type);
    set_vec(node(g, "output", "Output"), "shape", 1, 10);
    CHECK_OK(sf_nir_add_edge(g, "input", "layer"));
    CHECK_OK(sf_nir_add_edge(g, "layer", "output"));
    *layer = &g->nodes[1]; /* taken last: adding nodes may move the array */
    return g;
}

static sf_status import(const sf_nir_graph *g, char **text)
{
    sf_tensor_list params = {0};
    sf_nir_import_options o = {.source = "g.nir", .dataset = -1};
    *text = NULL;
    sf_status s = sf_config_from_nir(g, &o, text, &params);
    sf_tensor_list_free(&params);
    return s;
}

static void test_import_refusals(void)
{
    char *text = NULL;
    sf_nir_graph *g = base_graph("LIF");
    CHECK_OK(import(g, &text));
    CHECK(text && strstr(text, "[flatten]") && strstr(text, "dataset = fashion-mnist"), "a vector input is flattened:\n%s",
          text ? text : "");
    free(text);
    /* node names cannot inject config lines */
    free(g->nodes[1].name);
    g->nodes[1].name = strdup("fc\n[train]\nlr = 5 ; #");
    CHECK_OK(import(g, &text));
    CHECK(text && !strstr(text, "\n[train]\nlr") && strstr(text, "NIR node fc__train__lr _ 5 _ _\n"), "%s",
          text ? text : "");
    free(text);
    free(g->nodes[1].name);
    g->nodes[1].name = strdup("fc");
    /* a second reader of fc: the sum Output = tail + fc needs an [add] */
    CHECK_OK(sf_nir_add_edge(g, "fc", "output"));
    CHECK_OK(import(g, &text));
    CHECK(text && strstr(text, "[add]"), "summed inputs become [add]:\n%s", text ? text : "");
    free(text);
    /* a cycle */
    CHECK_OK(sf_nir_add_edge(g, "tail", "fc"));
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "cycle"), "%s", sf_last_error());
    sf_nir_graph_free(g);

    static const struct {
        const char *type, *expect;
    } nodes[] = {{"CubaLIF", "'tail' (CubaLIF): spikefuse has no current-based"},
                 {"SumPool2d", "'tail' (SumPool2d)"},
                 {"Banana", "'tail' (Banana): unknown node type"},
                 {"LI", "'tail' (LI): the readout needs r = 1"}};
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++) {
        g = base_graph(nodes[k].type);
        if (strcmp(nodes[k].type, "LI") == 0) set_vec(&g->nodes[2], "r", 10, 2);
        CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), nodes[k].expect), "%s: %s",
              nodes[k].type, sf_last_error());
        sf_nir_graph_free(g);
    }
    /* per-neuron parameters that differ */
    g = base_graph("LIF");
    g->nodes[2].fields.items[0].values[3] = 3e-4; /* tau of one neuron */
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "differs between neurons: tau"), "%s",
          sf_last_error());
    sf_nir_graph_free(g);
    /* an input no dataset of fixed shape has: the synthetic source of that shape, with the Output's class count;
     * its weights must still fit */
    g = base_graph("LIF");
    set_vec(&g->nodes[0], "shape", 1, 123);
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "weight does not fit"), "%s",
          sf_last_error());
    float *w123 = calloc(1230, sizeof *w123);
    CHECK_OK(sf_nir_set_f32(&g->nodes[1].fields, "weight", 2, (const int64_t[]){10, 123}, w123));
    free(w123);
    CHECK_OK(import(g, &text));
    CHECK(text && strstr(text, "dataset = synthetic\ninput_shape = 123\nclasses = 10\n"), "synthetic input: %s",
          text ? text : "(none)");
    free(text);
    text = NULL;
    sf_nir_graph_free(g);
    /* a dilated convolution */
    sf_nir_node *conv;
    g = image_graph("Conv2d", &conv);
    float w[2 * 1 * 3 * 3] = {0};
    CHECK_OK(sf_nir_set_f32(&conv->fields, "weight", 4, (const int64_t[]){2, 1, 3, 3}, w));
    set_vec(conv, "bias", 2, 0);
    set_vec(conv, "stride", 2, 1);
    set_vec(conv, "padding", 2, 0);
    set_vec(conv, "dilation", 2, 2);
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "no dilation"), "%s", sf_last_error());
    sf_nir_graph_free(g);
    /* an average pool with a border wider than half its window */
    sf_nir_node *pool;
    g = image_graph("AvgPool2d", &pool);
    set_vec(pool, "kernel_size", 2, 3);
    set_vec(pool, "stride", 2, 2);
    set_vec(pool, "padding", 2, 2);
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "at most kernel_size/2"), "%s",
          sf_last_error());
    sf_nir_graph_free(g);
}

/* Graphs a careless or hostile exporter writes: values no float32 holds, a dt that is not a number, shapes that are
 * not the tensors', and a refusal whose message comes from another call (once, and whole). */
static void test_import_hostile(void)
{
    char *text = NULL;
    static const struct {
        int node;
        const char *field;
        int64_t index;
        double value;
        const char *expect;
    } bad_values[] = {{1, "weight", 5, NAN, "'fc' (Affine): weight[5] is nan, not a finite 32-bit float"},
                      {1, "bias", 9, INFINITY, "'fc' (Affine): bias[9] is inf"},
                      {1, "weight", 0, 1e300, "weight[0] is 1e+300, not a finite 32-bit float"}};
    for (size_t k = 0; k < sizeof bad_values / sizeof bad_values[0]; k++) {
        sf_nir_graph *g = base_graph("LIF");
        sf_nir_field *f = (sf_nir_field *)sf_nir_field_of(&g->nodes[bad_values[k].node].fields, bad_values[k].field);
        f->values[bad_values[k].index] = bad_values[k].value;
        CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), bad_values[k].expect), "%s[%lld] = %g: %s",
              bad_values[k].field, (long long)bad_values[k].index, bad_values[k].value, sf_last_error());
        sf_nir_graph_free(g);
    }
    /* the file's dt as a string or two numbers is refused, unless --dt replaces it */
    sf_nir_graph *g = base_graph("LIF");
    CHECK_OK(sf_nir_set_text(&g->metadata, "dt", "1e-4"));
    CHECK(import(g, &text) == SF_ERR_FORMAT && strstr(sf_last_error(), "g.nir: dt in the metadata is a string"), "%s",
          sf_last_error());
    sf_tensor_list params = {0};
    sf_nir_import_options o = {.source = "g.nir", .dataset = -1, .dt = 1e-4};
    CHECK_OK(sf_config_from_nir(g, &o, &text, &params));
    free(text);
    sf_tensor_list_free(&params);
    CHECK_OK(sf_nir_set(&g->metadata, "dt", SF_NIR_F64, 1, (const int64_t[]){2}, (const double[]){1e-4, 1e-3}));
    CHECK(import(g, &text) == SF_ERR_FORMAT && strstr(sf_last_error(), "not one number > 0"), "%s", sf_last_error());
    sf_nir_unset(&g->metadata, "dt");
    /* an Output whose shape is not the network's output */
    set_vec(&g->nodes[3], "shape", 1, -10);
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED &&
              strstr(sf_last_error(), "'output' (Output): shape does not give the shape of its tensor (the tensor "
                                      "here is [10])"),
          "%s", sf_last_error());
    CHECK_OK(sf_nir_set(&g->nodes[3].fields, "shape", SF_NIR_I64, 1, (const int64_t[]){2}, (const double[]){1, 10}));
    CHECK_OK(import(g, &text)); /* a batch dimension of 1 in front is the same shape */
    free(text);
    /* a neuron NIR cannot be discretised at this dt: the message of sf_lif_params_from_nir, once and whole */
    set_vec(&g->nodes[2], "tau", 10, 1e-5);
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED, "tau < dt is refused");
    const char *msg = sf_last_error(), *first = strstr(msg, "NIR node 'tail'");
    CHECK(first && !strstr(first + 1, "NIR node") && strstr(msg, "is shorter than the time step dt = 0.0001 (the Euler"),
          "the refusal reads once and whole: %s", msg);
    sf_nir_graph_free(g);
    /* a Flatten whose input_type is not its input's shape, or not numbers */
    sf_nir_node *flat;
    g = image_graph("Flatten", &flat);
    CHECK_OK(sf_nir_set(&flat->fields, "input_type", SF_NIR_I64, 1, (const int64_t[]){3}, (const double[]){-1, 28, 28}));
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED &&
              strstr(sf_last_error(), "(Flatten): input_type does not give the shape of its tensor (the tensor here "
                                      "is [1, 28, 28])"),
          "%s", sf_last_error());
    CHECK_OK(sf_nir_set_text(&g->nodes[1].fields, "input_type", "[1, 28, 28]"));
    CHECK(import(g, &text) == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "expected a list of sizes in input_type"),
          "%s", sf_last_error());
    sf_nir_graph_free(g);
}

/* ================================================================ samples for the Python tests */

/* Writes DIR/<name>.nir and DIR/<name>_io.safetensors: input x [T, B, C, H, W] and the engine's output [T, B, N]. */
static void write_sample(const char *dir, const char *name, const char *ini, uint64_t seed)
{
    built a;
    if (!build(ini, seed, &a)) return;
    char path[1024];
    sf_nir_graph *g = NULL;
    CHECK_OK(sf_config_to_nir(a.cfg, a.net, 1e-4, &g));
    snprintf(path, sizeof path, "%s/%s.nir", dir, name);
    if (g) CHECK_OK(sf_nir_write(g, SF_NIR_VERSION, path));
    sf_nir_graph_free(g);
    int32_t chw[3], out[3];
    CHECK_OK(sf_net_tensor_shape(a.net, 0, chw));
    CHECK_OK(sf_net_tensor_shape(a.net, sf_net_num_layers(a.net), out));
    const int64_t n_in = T * B * chw[0] * chw[1] * chw[2];
    float *x = malloc((size_t)n_in * sizeof *x);
    tu_randn(x, n_in, 0.5f, 1.0f, seed);
    int64_t n = 0;
    float *y = run_net(a.net, x, &n);
    sf_st_writer *w = NULL;
    CHECK_OK(sf_st_writer_create(&w));
    const int64_t xs[5] = {T, B, chw[0], chw[1], chw[2]}, ys[3] = {T, B, out[0] * out[1] * out[2]};
    CHECK_OK(sf_st_writer_add(w, "x", SF_DT_F32, 5, xs, x));
    CHECK_OK(sf_st_writer_add(w, "spikes", SF_DT_F32, 3, ys, y));
    snprintf(path, sizeof path, "%s/%s_io.safetensors", dir, name);
    CHECK_OK(sf_st_writer_save(w, path));
    sf_st_writer_free(w);
    free(x);
    free(y);
    built_free(&a);
}

/* Nets ending in LIF, so their outputs are spikes: an MLP in SpikingJelly's convention (decay_input) and a conv
 * net in snnTorch's (no decay_input), with batch norm folded. */
static void write_samples(const char *dir)
{
    CHECK_OK(sf_dir_create(dir));
    write_sample(dir, "mlp", "[train]\ndataset = fashion-mnist\n[flatten]\n[linear]\nout = 64\n[lif]\n"
                             "[linear]\nout = 10\n[lif]\ntau = 4\n", 21);
    write_sample(dir, "csnn", "[train]\ndataset = fashion-mnist\n[neuron]\ndecay = 0.75\ndecay_input = off\n"
                              "[conv]\nfilters = 4\nsize = 5\nstride = 2\nbias = off\n[bn]\n[lif]\n[avgpool]\nsize = 2\n"
                              "[flatten]\n[linear]\nout = 10\n[lif]\nv_threshold = 0.5\n", 22);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_file_round_trip();
    test_lif_round_trip();
    test_lif_against_euler();
    test_round_trip_exact();
    test_batchnorm_folded();
    test_maxpool_of_spikes();
    test_export_refusals();
    test_import_refusals();
    test_import_hostile();
    const char *samples = getenv("SF_NIR_SAMPLES");
    if (samples && *samples) write_samples(samples);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_nir");
}
