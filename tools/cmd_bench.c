/* cmd_bench.c — `spikefuse bench`: training-step throughput of a config, time per phase and per layer, memory. */
#include "cli.h"
#include "spikefuse_train.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const char *bench_help =
    "usage: spikefuse bench CONFIG [--steps N] [--warmup N] [--set section.key=value ...] [--device D]\n"
    "                       [--synthetic] [--fixed-activity] [--data] [--json]\n\n"
    "Times training steps of the network CONFIG describes, at its batch size and time steps:\n"
    "  - samples/s and ms per step over N plain steps (sf_net_train_step);\n"
    "  - ms per phase (forward with the loss, backward, optimizer update) and ms per layer from N more steps\n"
    "    with per-layer profiling on (which synchronises a GPU after each layer, so those steps run slower);\n"
    "  - the memory plan (parameters, gradients, optimizer state, saved activations, workspace), the peak bytes\n"
    "    the network allocated, and the process's peak resident memory;\n"
    "  - the firing rate of every spiking layer, and for the layers that can run event-driven (sparse) the\n"
    "    spike density they saw and the path (sparse or dense) their forward and backward took.\n"
    "Batches come from the config's dataset (real spike densities) unless --synthetic is given. With --data, the\n"
    "data loader alone is timed too: samples/s of a synchronous training loader (encoding or binning and\n"
    "augmentation on its OpenMP threads, as the prefetch thread does beside training), printed beside the step's.\n\n"
    "options:\n"
    "  --steps N      timed steps per pass (default 20)\n"
    "  --warmup N     untimed steps first (default 3)\n"
    "  --set k=v      override a config value (repeatable), e.g. --set train.batch=128\n"
    "  --device D     cpu, cuda, cuda:N or auto\n"
    "  --synthetic    random inputs (spikes at 10% where the input is spikes) and labels instead of the dataset\n"
    "                 (no data files needed)\n"
    "  --fixed-activity  every spiking layer fires at every step (threshold -1e9): the slowest case for the\n"
    "                 event-driven layers\n"
    "  --data         also time the data loader alone (samples/s)\n"
    "  --json         print one JSON object instead of text\n"
    "  -h, --help     this text\n\n" SF_CLI_EXIT_CODES;

typedef struct bench_args {
    const char *config, *device;
    int64_t steps, warmup;
    int synthetic, data, json, fixed_activity;
    char *sets[SF_CLI_MAX_SETS];
    int nsets;
} bench_args;

static int parse_args(int argc, char **argv, bench_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    a->steps = 20;
    a->warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("bench", argc, argv, &i, "--steps", &v)) != 0) {
            if (m < 0 || !sf_cli_int("bench", "--steps", v, 1, 1000000, &a->steps)) return SF_EXIT_USAGE;
        } else if ((m = sf_cli_value("bench", argc, argv, &i, "--warmup", &v)) != 0) {
            if (m < 0 || !sf_cli_int("bench", "--warmup", v, 0, 1000000, &a->warmup)) return SF_EXIT_USAGE;
        } else if ((m = sf_cli_value("bench", argc, argv, &i, "--set", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            if (a->nsets == SF_CLI_MAX_SETS)
                return sf_cli_error("bench", SF_EXIT_USAGE, "more than %d --set options", SF_CLI_MAX_SETS);
            a->sets[a->nsets++] = (char *)v;
        } else if ((m = sf_cli_value("bench", argc, argv, &i, "--device", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->device = v;
        } else if (strcmp(argv[i], "--synthetic") == 0) {
            a->synthetic = 1;
        } else if (strcmp(argv[i], "--data") == 0) {
            a->data = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (strcmp(argv[i], "--fixed-activity") == 0) {
            a->fixed_activity = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("bench", argv[i],
                                  "--steps, --warmup, --set, --device, --synthetic, --fixed-activity, --data, --json, "
                                  "--help");
        } else if (!a->config) {
            a->config = argv[i];
        } else {
            return sf_cli_error("bench", SF_EXIT_USAGE, "unexpected argument '%s' (bench takes one CONFIG)", argv[i]);
        }
    }
    if (!a->config) return sf_cli_error("bench", SF_EXIT_USAGE, "no CONFIG given (see spikefuse bench --help)");
    return SF_EXIT_OK;
}

/* Where the batches come from: the dataset's training loader, or one fixed random batch. */
typedef struct batch_source {
    sf_dataset *ds;
    sf_loader *ld;
    float *x; /* the fixed batch, in host memory for the net's device */
    int32_t *labels;
    sf_device device;
} batch_source;

static sf_status source_open(batch_source *src, const sf_config *cfg, int synthetic)
{
    memset(src, 0, sizeof *src);
    src->device = cfg->net.device;
    if (!synthetic) {
        SF_TRY(sf_config_load_split(cfg, SF_SPLIT_TRAIN, &src->ds));
        sf_loader_params lp;
        sf_config_loader_params(cfg, 1, &lp);
        return sf_loader_create(src->ds, &lp, &src->ld);
    }
    const sf_net_params *np = &cfg->net;
    size_t n = (size_t)cfg->train.timesteps * (size_t)cfg->train.batch * (size_t)np->in_channels *
               (size_t)np->in_height * (size_t)np->in_width;
    src->x = sf_host_alloc(cfg->net.device, n * sizeof *src->x);
    src->labels = malloc((size_t)cfg->train.batch * sizeof *src->labels);
    if (!src->x || !src->labels) return sf_fail(SF_ERR_NOMEM, "out of memory for a synthetic batch");
    for (size_t i = 0; i < n; i++) { /* spikes (10%) where the net takes spikes, else uniform values */
        float u = sf_random_uniform(cfg->net.seed, 1, i);
        src->x[i] = cfg->net.input_spikes ? (float)(u < 0.1f) : u;
    }
    for (int64_t i = 0; i < cfg->train.batch; i++)
        src->labels[i] = (int32_t)(sf_random_bits(cfg->net.seed, 2, (uint64_t)i) % (uint64_t)cfg->classes);
    return SF_OK;
}

static sf_status source_next(batch_source *src, const float **x, const int32_t **labels)
{
    if (!src->ld) {
        *x = src->x;
        *labels = src->labels;
        return SF_OK;
    }
    const sf_batch *b = NULL;
    SF_TRY(sf_loader_next(src->ld, &b));
    if (!b) SF_TRY(sf_loader_next(src->ld, &b)); /* an epoch ended: the next one starts */
    *x = b->x;
    *labels = b->labels;
    return SF_OK;
}

static void source_close(batch_source *src)
{
    sf_loader_free(src->ld);
    sf_dataset_free(src->ds);
    sf_host_free(src->device, src->x);
    free(src->labels);
}

typedef struct bench_result {
    double step_ms;                        /* plain steps */
    double forward_ms, backward_ms, update_ms; /* profiled steps */
    sf_layer_timing *layers;               /* [num_layers], per step */
    sf_layer_sparsity *sparsity;           /* [num_layers], after the plain steps */
    float *rates;                          /* [num_layers]: firing rates of the spiking layers, in order */
    int32_t num_layers, num_rates;
    sf_memory_plan plan;
    size_t peak_bytes, peak_rss_bytes;
    double loader_samples_per_s; /* --data: the data loader alone; 0 when not measured */
} bench_result;

static sf_status timed_steps(sf_net *net, batch_source *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float *x;
        const int32_t *labels;
        SF_TRY(source_next(src, &x, &labels));
        sf_step_result res;
        SF_TRY(sf_net_train_step(net, x, labels, &res));
    }
    return SF_OK;
}

/* Steps through the split API so each phase can be timed; the logits copy after the update makes the update's
 * time include its completion on a GPU. */
static sf_status phase_steps(sf_net *net, batch_source *src, int64_t n, bench_result *r, float *logits)
{
    for (int64_t i = 0; i < n; i++) {
        const float *x;
        const int32_t *labels;
        SF_TRY(source_next(src, &x, &labels));
        sf_step_result res;
        double t0 = sf_now_seconds();
        SF_TRY(sf_net_forward(net, x, 1));
        SF_TRY(sf_net_loss(net, labels, &res));
        double t1 = sf_now_seconds();
        SF_TRY(sf_net_backward(net));
        SF_TRY(sf_net_logits(net, logits));
        double t2 = sf_now_seconds();
        SF_TRY(sf_net_update(net));
        SF_TRY(sf_net_logits(net, logits));
        double t3 = sf_now_seconds();
        r->forward_ms += 1e3 * (t1 - t0) / (double)n;
        r->backward_ms += 1e3 * (t2 - t1) / (double)n;
        r->update_ms += 1e3 * (t3 - t2) / (double)n;
    }
    return SF_OK;
}

static sf_status run_bench(const bench_args *a, sf_net *net, batch_source *src, float *logits, bench_result *r)
{
    SF_TRY(timed_steps(net, src, a->warmup));
    double t0 = sf_now_seconds();
    SF_TRY(timed_steps(net, src, a->steps));
    SF_TRY(sf_net_logits(net, logits)); /* waits for a GPU to finish the last step */
    r->step_ms = 1e3 * (sf_now_seconds() - t0) / (double)a->steps;
    sf_net_layer_sparsity(net, r->sparsity, r->num_layers);
    r->num_rates = sf_net_firing_rates(net, r->rates, r->num_layers);

    SF_TRY(sf_net_set_profiling(net, 1));
    SF_TRY(phase_steps(net, src, a->steps, r, logits));
    SF_TRY(sf_net_layer_timings(net, r->layers, r->num_layers));
    SF_TRY(sf_net_set_profiling(net, 0));
    for (int32_t i = 0; i < r->num_layers; i++) {
        r->layers[i].forward_ms /= (double)a->steps;
        r->layers[i].backward_ms /= (double)a->steps;
    }
    SF_TRY(sf_net_memory_plan(net, &r->plan));
    r->peak_bytes = sf_net_peak_bytes(net);
    struct rusage ru;
    r->peak_rss_bytes = getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024u : 0;
    return SF_OK;
}

/* Samples/s of a synchronous training loader of the config's dataset over `n` batches after one untimed one. */
static sf_status time_loader(const sf_config *cfg, int64_t n, double *out)
{
    sf_dataset *ds = NULL;
    sf_loader *ld = NULL;
    sf_loader_params lp;
    sf_config_loader_params(cfg, 1, &lp);
    lp.prefetch = 0;
    sf_status s = sf_config_load_split(cfg, SF_SPLIT_TRAIN, &ds);
    if (s == SF_OK) s = sf_loader_create(ds, &lp, &ld);
    int64_t samples = 0;
    double t0 = 0.0;
    for (int64_t i = 0; s == SF_OK && i <= n;) {
        const sf_batch *b = NULL;
        s = sf_loader_next(ld, &b);
        if (s != SF_OK || !b) continue; /* an epoch ended: the next one starts */
        if (i++ == 0) t0 = sf_now_seconds();
        else samples += b->B;
    }
    if (s == SF_OK) *out = (double)samples / (sf_now_seconds() - t0);
    sf_loader_free(ld);
    sf_dataset_free(ds);
    return s;
}

static const char *layer_label(const sf_config *cfg, const sf_net *net, int32_t i, char *buf, size_t cap)
{
    int32_t chw[3] = {0, 0, 0};
    sf_net_tensor_shape(net, i + 1, chw);
    snprintf(buf, cap, "%d %s -> %dx%dx%d", (int)i, sf_layer_kind_name(cfg->layers[i].desc.kind), (int)chw[0],
             (int)chw[1], (int)chw[2]);
    return buf;
}

static void print_text(const bench_args *a, const sf_config *cfg, const sf_net *net, const bench_result *r)
{
    char b[32];
    double B = (double)cfg->train.batch;
    printf("bench %s: batch %lld, T=%lld, %s, precision %s, %lld steps after %lld warm-up, %s data\n", cfg->source,
           (long long)cfg->train.batch, (long long)cfg->train.timesteps,
           cfg->net.device.kind == SF_DEVICE_CUDA ? "cuda" : "cpu", sf_precision_name(cfg->net.precision),
           (long long)a->steps, (long long)a->warmup,
           a->synthetic ? "synthetic" : "dataset");
    printf("throughput:   %.1f samples/s (%.3f ms per step)\n", 1e3 * B / r->step_ms, r->step_ms);
    if (a->data)
        printf("data loader:  %.1f samples/s (synchronous, %s; the step above: %.1f samples/s)\n",
               r->loader_samples_per_s, sf_dataset_kind_name(cfg->train.dataset), 1e3 * B / r->step_ms);
    printf("phases (profiled steps, ms): forward+loss %.3f  backward %.3f  update %.3f\n", r->forward_ms,
           r->backward_ms, r->update_ms);
    printf("memory plan:  params %s", sf_cli_bytes((double)r->plan.params, b, sizeof b));
    printf("  grads %s", sf_cli_bytes((double)r->plan.grads, b, sizeof b));
    printf("  optimizer %s", sf_cli_bytes((double)r->plan.optimizer, b, sizeof b));
    printf("  buffers %s", sf_cli_bytes((double)r->plan.buffers, b, sizeof b));
    printf("  saved %s", sf_cli_bytes((double)r->plan.saved, b, sizeof b));
    printf("  workspace %s", sf_cli_bytes((double)r->plan.workspace, b, sizeof b));
    printf("  total %s\n", sf_cli_bytes((double)r->plan.total, b, sizeof b));
    printf("peak memory:  %s allocated by the network", sf_cli_bytes((double)r->peak_bytes, b, sizeof b));
    printf(", %s resident (process)\n", sf_cli_bytes((double)r->peak_rss_bytes, b, sizeof b));
    printf("per layer (ms per step; spiking layers: firing rate; event-driven layers: input density, path of the "
           "forward/backward, and under auto the densities below which each runs event-driven):\n  %-32s %10s %10s\n",
           "layer", "forward", "backward");
    for (int32_t i = 0, k = 0; i < r->num_layers; i++) {
        char label[96];
        printf("  %-32s %10.3f %10.3f", layer_label(cfg, net, i, label, sizeof label), r->layers[i].forward_ms,
               r->layers[i].backward_ms);
        sf_layer_kind kind = cfg->layers[i].desc.kind;
        if ((kind == SF_LAYER_LIF || kind == SF_LAYER_RLIF) && k < r->num_rates) printf("  rate %.4f", r->rates[k++]);
        const sf_layer_sparsity *q = &r->sparsity[i];
        if (q->eligible)
            printf("  density %.4f %s/%s (%s)", q->density, q->forward_sparse ? "sparse" : "dense",
                   q->backward_sparse ? "sparse" : "dense", sf_sparse_mode_name(q->mode));
        if (q->eligible && q->mode == SF_SPARSE_AUTO)
            printf(" below %.3f/%.3f", q->crossover_forward, q->crossover_backward);
        putchar('\n');
    }
}

static void print_json(const bench_args *a, const sf_config *cfg, const sf_net *net, const bench_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "config", cfg->source);
    cJSON_AddNumberToObject(o, "batch", (double)cfg->train.batch);
    cJSON_AddNumberToObject(o, "timesteps", (double)cfg->train.timesteps);
    cJSON_AddNumberToObject(o, "steps", (double)a->steps);
    cJSON_AddBoolToObject(o, "synthetic", a->synthetic);
    cJSON_AddStringToObject(o, "precision", sf_precision_name(cfg->net.precision));
    cJSON_AddNumberToObject(o, "samples_per_s", 1e3 * (double)cfg->train.batch / r->step_ms);
    cJSON_AddNumberToObject(o, "step_ms", r->step_ms);
    if (a->data) cJSON_AddNumberToObject(o, "loader_samples_per_s", r->loader_samples_per_s);
    cJSON_AddNumberToObject(o, "forward_ms", r->forward_ms);
    cJSON_AddNumberToObject(o, "backward_ms", r->backward_ms);
    cJSON_AddNumberToObject(o, "update_ms", r->update_ms);
    cJSON *plan = cJSON_AddObjectToObject(o, "memory_plan");
    cJSON_AddNumberToObject(plan, "params", (double)r->plan.params);
    cJSON_AddNumberToObject(plan, "grads", (double)r->plan.grads);
    cJSON_AddNumberToObject(plan, "optimizer", (double)r->plan.optimizer);
    cJSON_AddNumberToObject(plan, "buffers", (double)r->plan.buffers);
    cJSON_AddNumberToObject(plan, "saved", (double)r->plan.saved);
    cJSON_AddNumberToObject(plan, "workspace", (double)r->plan.workspace);
    cJSON_AddNumberToObject(plan, "total", (double)r->plan.total);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)r->peak_bytes);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)r->peak_rss_bytes);
    cJSON_AddBoolToObject(o, "fixed_activity", a->fixed_activity);
    cJSON *rates = cJSON_AddArrayToObject(o, "firing_rates");
    for (int32_t k = 0; k < r->num_rates && k < r->num_layers; k++)
        cJSON_AddItemToArray(rates, cJSON_CreateNumber(r->rates[k]));
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int32_t i = 0; i < r->num_layers; i++) {
        char label[96];
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "layer", layer_label(cfg, net, i, label, sizeof label));
        cJSON_AddNumberToObject(l, "forward_ms", r->layers[i].forward_ms);
        cJSON_AddNumberToObject(l, "backward_ms", r->layers[i].backward_ms);
        const sf_layer_sparsity *q = &r->sparsity[i];
        if (q->eligible) {
            cJSON_AddStringToObject(l, "sparse_mode", sf_sparse_mode_name(q->mode));
            cJSON_AddNumberToObject(l, "input_density", q->density);
            if (q->grad_density >= 0.0f) cJSON_AddNumberToObject(l, "grad_density", q->grad_density);
            cJSON_AddStringToObject(l, "forward_path", q->forward_sparse ? "sparse" : "dense");
            cJSON_AddStringToObject(l, "backward_path", q->backward_sparse ? "sparse" : "dense");
            cJSON_AddNumberToObject(l, "crossover_forward", q->crossover_forward);
            cJSON_AddNumberToObject(l, "crossover_backward", q->crossover_backward);
        }
        cJSON_AddItemToArray(layers, l);
    }
    char *text = cJSON_PrintUnformatted(o);
    if (text) puts(text);
    free(text);
    cJSON_Delete(o);
}

/* --fixed-activity: every LIF and RLIF layer fires at every step (a threshold no potential stays below). */
static int force_activity(sf_config *cfg)
{
    for (int32_t i = 0; i < cfg->num_layers; i++) {
        sf_layer_kind kind = cfg->layers[i].desc.kind;
        if (kind != SF_LAYER_LIF && kind != SF_LAYER_RLIF) continue;
        char key[64];
        snprintf(key, sizeof key, "layer%d.v_threshold", (int)i);
        sf_status s = sf_config_set(cfg, key, "-1e9");
        if (s != SF_OK) return sf_cli_status("bench", s);
    }
    return SF_EXIT_OK;
}

int sf_cmd_bench(int argc, char **argv)
{
    bench_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(bench_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    rc = sf_cli_load_config("bench", a.config, a.sets, a.nsets, &cfg);
    if (rc == SF_EXIT_OK && a.fixed_activity) rc = force_activity(cfg);
    if (rc == SF_EXIT_OK && a.device) rc = sf_cli_apply_device("bench", cfg, a.device);
    if (rc == SF_EXIT_OK) rc = sf_cli_build_net("bench", cfg, &net);
    if (rc != SF_EXIT_OK) {
        sf_config_free(cfg);
        return rc;
    }
    batch_source src = {0};
    bench_result r = {.num_layers = sf_net_num_layers(net)};
    r.layers = calloc((size_t)r.num_layers + 1, sizeof *r.layers);
    r.sparsity = calloc((size_t)r.num_layers + 1, sizeof *r.sparsity);
    r.rates = calloc((size_t)r.num_layers + 1, sizeof *r.rates);
    float *logits = malloc((size_t)cfg->train.batch * (size_t)cfg->classes * sizeof *logits);
    sf_status s = r.layers && r.sparsity && r.rates && logits ? source_open(&src, cfg, a.synthetic)
                                                              : sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK) s = run_bench(&a, net, &src, logits, &r);
    if (s == SF_OK && a.data) s = time_loader(cfg, a.steps, &r.loader_samples_per_s);
    if (s == SF_OK) {
        if (a.json) print_json(&a, cfg, net, &r);
        else print_text(&a, cfg, net, &r);
    } else {
        rc = sf_cli_status("bench", s);
    }
    source_close(&src);
    free(logits);
    free(r.layers);
    free(r.sparsity);
    free(r.rates);
    sf_net_free(net);
    sf_config_free(cfg);
    return rc;
}
