/* cmd_eval.c — `spikefuse eval`: test accuracy and per-layer firing rates of a checkpoint. */
#include "cli.h"
#include "spikefuse_train.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *eval_help =
    "usage: spikefuse eval CHECKPOINT [--data DIR] [--device D] [--batch N] [--json]\n\n"
    "Evaluates a checkpoint (a .safetensors file written by spikefuse train, or a run directory: its\n"
    "best.safetensors) on the test split of its dataset: test accuracy and the firing rate (mean spikes per\n"
    "neuron and time step) of every LIF layer. The network is rebuilt from the config saved in the checkpoint.\n\n"
    "options:\n"
    "  --data DIR    where the dataset files are (default: the checkpoint's train.data_dir)\n"
    "  --device D    cpu, cuda, cuda:N or auto (default: the checkpoint's device)\n"
    "  --batch N     evaluation batch size (default: the checkpoint's train.batch)\n"
    "  --json        print one JSON object instead of text\n"
    "  -h, --help    this text\n\n"
    "A run trained on a GPU evaluates on the CPU (--device cpu) and back: checkpoints are the same on every device.\n\n"
    SF_CLI_EXIT_CODES;

typedef struct eval_args {
    const char *checkpoint, *data, *device;
    int64_t batch; /* 0: the checkpoint's */
    int json;
} eval_args;

static int parse_args(int argc, char **argv, eval_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("eval", argc, argv, &i, "--data", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->data = v;
        } else if ((m = sf_cli_value("eval", argc, argv, &i, "--device", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->device = v;
        } else if ((m = sf_cli_value("eval", argc, argv, &i, "--batch", &v)) != 0) {
            if (m < 0 || !sf_cli_int("eval", "--batch", v, 1, 65536, &a->batch)) return SF_EXIT_USAGE;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("eval", argv[i], "--data, --device, --batch, --json, --help");
        } else if (!a->checkpoint) {
            a->checkpoint = argv[i];
        } else {
            return sf_cli_error("eval", SF_EXIT_USAGE, "unexpected argument '%s' (eval takes one CHECKPOINT)",
                                argv[i]);
        }
    }
    if (!a->checkpoint) return sf_cli_error("eval", SF_EXIT_USAGE, "no CHECKPOINT given (see spikefuse eval --help)");
    return SF_EXIT_OK;
}

/* The config with the command line's changes; returns an exit code. */
static int eval_config(const eval_args *a, const char *path, sf_config **cfg)
{
    sf_status s = sf_checkpoint_config(path, cfg);
    if (s != SF_OK) return sf_cli_status("eval", s);
    if (a->data) {
        if (strlen(a->data) >= sizeof (*cfg)->train.data_dir)
            return sf_cli_error("eval", SF_EXIT_USAGE, "--data: the path is too long");
        strcpy((*cfg)->train.data_dir, a->data);
    }
    if (a->batch) (*cfg)->train.batch = a->batch;
    return a->device ? sf_cli_apply_device("eval", *cfg, a->device) : SF_EXIT_OK;
}

static void print_text(const sf_config *cfg, const char *path, const sf_eval_result *r)
{
    printf("checkpoint:    %s\n", path);
    printf("test accuracy: %.2f%% (%lld of %lld) in %.2f s\n", 100.0 * r->accuracy, (long long)r->correct,
           (long long)r->samples, r->seconds);
    printf("firing rates (mean spikes per neuron and step):\n");
    for (int32_t i = 0, k = 0; i < cfg->num_layers && k < r->num_rates; i++)
        if (cfg->layers[i].desc.kind == SF_LAYER_LIF)
            printf("  layer %-3d lif (line %d)  %.4f\n", (int)i, (int)cfg->layers[i].line,
                   (double)r->firing_rates[k++]);
}

static void print_json(const sf_config *cfg, const char *path, const sf_eval_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "checkpoint", path);
    cJSON_AddNumberToObject(o, "test_accuracy", r->accuracy);
    cJSON_AddNumberToObject(o, "correct", (double)r->correct);
    cJSON_AddNumberToObject(o, "samples", (double)r->samples);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON *rates = cJSON_AddArrayToObject(o, "firing_rates");
    for (int32_t i = 0, k = 0; i < cfg->num_layers && k < r->num_rates; i++)
        if (cfg->layers[i].desc.kind == SF_LAYER_LIF) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "layer", i);
            sf_json_add_float(e, "rate", r->firing_rates[k++]);
            cJSON_AddItemToArray(rates, e);
        }
    char *text = cJSON_PrintUnformatted(o);
    if (text) puts(text);
    free(text);
    cJSON_Delete(o);
}

/* Loads data, rebuilds the net, restores the checkpoint and evaluates; returns an exit code. */
static int run_eval(const eval_args *a, const char *path, const sf_config *cfg)
{
    sf_dataset *ds = NULL;
    sf_loader *ld = NULL;
    sf_net *net = NULL;
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_eval_result res = {0};
    sf_loader_params lp;
    int rc = sf_cli_build_net("eval", cfg, &net);
    if (rc != SF_EXIT_OK) return rc;
    sf_status s = sf_checkpoint_open(path, &st, &info);
    if (s == SF_OK) {
        s = sf_checkpoint_restore(st, net, 0);
        if (s == SF_OK) s = sf_checkpoint_restore_sparse(st, net, 0); /* the paths the run chose */
        if (s != SF_OK) s = sf_fail_context(s, "%s: ", path);
    }
    if (s == SF_OK) s = sf_config_load_split(cfg, SF_SPLIT_TEST, &ds);
    if (s == SF_OK) {
        sf_config_loader_params(cfg, 0, &lp);
        s = sf_loader_create(ds, &lp, &ld);
    }
    if (s == SF_OK) s = sf_evaluate(net, ld, ds->classes, 1, &res);
    if (s == SF_OK) {
        if (a->json) print_json(cfg, path, &res);
        else print_text(cfg, path, &res);
    } else {
        rc = sf_cli_status("eval", s);
    }
    sf_eval_result_free(&res);
    sf_loader_free(ld);
    sf_dataset_free(ds);
    sf_safetensors_free(st);
    sf_net_free(net);
    return rc;
}

int sf_cmd_eval(int argc, char **argv)
{
    eval_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(eval_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    char path[4096];
    if ((rc = sf_cli_checkpoint_path("eval", a.checkpoint, path, sizeof path)) != SF_EXIT_OK) return rc;
    sf_config *cfg = NULL;
    rc = eval_config(&a, path, &cfg);
    if (rc == SF_EXIT_OK) rc = run_eval(&a, path, cfg);
    sf_config_free(cfg);
    return rc;
}
