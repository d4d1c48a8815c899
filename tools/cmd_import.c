/* cmd_import.c — `spikefuse import`: a NIR graph as a config and a checkpoint of its parameters. */
#include "cli.h"
#include "spikefuse_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *import_help =
    "usage: spikefuse import IN.nir --out CONFIG.ini [--checkpoint FILE] [--dataset NAME] [--dt SECONDS]\n\n"
    "Reads a NIR graph (Neuromorphic Intermediate Representation, HDF5: written by spikefuse export, snnTorch,\n"
    "SpikingJelly, Norse, ...) and writes a config whose network computes the same spikes, and a checkpoint\n"
    "holding its parameters. The config's [train] init names the checkpoint, so `spikefuse train CONFIG.ini`\n"
    "starts from the graph's parameters, and `spikefuse eval CHECKPOINT` evaluates them as they are. NIR's\n"
    "continuous-time neurons are discretised with time step --dt (docs/nir.md). Nodes spikefuse has no layer for\n"
    "are refused with a message naming them.\n\n"
    "options:\n"
    "  --out CONFIG      the config to write (must not exist)\n"
    "  --checkpoint FILE the checkpoint to write (must not exist, nor be CONFIG; default: CONFIG with\n"
    "                    .safetensors for .ini)\n"
    "  --dataset NAME    the dataset the network is for (default: the first whose input has the graph's size)\n"
    "  --dt SECONDS      the time step (default: the file's own, if spikefuse wrote it, else 1e-4)\n"
    "  -h, --help        this text\n\n"
    "exit codes: 0 written, 1 failed (unreadable or unsupported graph, an output that exists, a write error),\n"
    "2 bad command line (the outputs are one file, or the input).\n";

typedef struct import_args {
    const char *in, *out, *checkpoint, *dataset;
    double dt; /* 0: the file's or the default */
} import_args;

static int parse_args(int argc, char **argv, import_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("import", argc, argv, &i, "--out", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->out = v;
        } else if ((m = sf_cli_value("import", argc, argv, &i, "--checkpoint", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->checkpoint = v;
        } else if ((m = sf_cli_value("import", argc, argv, &i, "--dataset", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->dataset = v;
        } else if ((m = sf_cli_value("import", argc, argv, &i, "--dt", &v)) != 0) {
            if (m < 0 || !sf_cli_positive("import", "--dt", v, &a->dt)) return SF_EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("import", argv[i], "--out, --checkpoint, --dataset, --dt, --help");
        } else if (!a->in) {
            a->in = argv[i];
        } else {
            return sf_cli_error("import", SF_EXIT_USAGE, "unexpected argument '%s' (import takes one IN.nir)", argv[i]);
        }
    }
    if (!a->in) return sf_cli_error("import", SF_EXIT_USAGE, "no IN.nir given (see spikefuse import --help)");
    if (!a->out) return sf_cli_error("import", SF_EXIT_USAGE, "no --out CONFIG given (see spikefuse import --help)");
    return SF_EXIT_OK;
}

/* The checkpoint of the imported parameters: built from the config (parsed back), filled, saved. */
static sf_status save_checkpoint(const char *config_text, const char *name, const sf_tensor_list *params,
                                 const char *path)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    char *resolved = NULL;
    sf_status s = sf_config_parse_string(config_text, name, &cfg);
    if (s == SF_OK) {
        cfg->net.device = (sf_device){.kind = SF_DEVICE_CPU};
        s = sf_config_build_net(cfg, &net);
    }
    if (s == SF_OK) s = sf_net_compile(net, 1, 1);
    if (s == SF_OK) s = sf_tensor_list_apply(params, net);
    if (s == SF_OK) s = sf_config_write(cfg, &resolved);
    if (s == SF_OK) {
        sf_checkpoint_info info = {.config = resolved, .epoch = 0, .step = 0, .best_metric = -1.0};
        s = sf_checkpoint_save(net, &info, path);
    }
    free(resolved);
    sf_net_free(net);
    sf_config_free(cfg);
    return s;
}

/* The config and the checkpoint must be two new files, neither of them the input: import never writes over
 * anything, its own other output included. */
static int check_outputs(const import_args *a, const char *ckpt)
{
    if (sf_same_path(a->out, ckpt))
        return sf_cli_error("import", SF_EXIT_USAGE,
                            "--out and --checkpoint name the same file (%s): the config and the checkpoint need one "
                            "each", ckpt);
    const char *const outputs[2] = {a->out, ckpt};
    for (int i = 0; i < 2; i++) {
        if (sf_same_path(outputs[i], a->in))
            return sf_cli_error("import", SF_EXIT_USAGE, "%s is the input: import writes new files beside it",
                                outputs[i]);
        if (sf_path_exists(outputs[i]))
            return sf_cli_error("import", SF_EXIT_FAILURE, "%s exists%s: import does not replace anything (remove it "
                                "first, or name another %s)", outputs[i], sf_dir_exists(outputs[i]) ? " (a directory)" : "",
                                i ? "--checkpoint" : "--out");
    }
    return SF_EXIT_OK;
}

int sf_cmd_import(int argc, char **argv)
{
    import_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(import_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    char ckpt[4096];
    size_t n = strlen(a.out);
    if (a.checkpoint)
        snprintf(ckpt, sizeof ckpt, "%s", a.checkpoint);
    else
        snprintf(ckpt, sizeof ckpt, "%.*s.safetensors", (int)(n > 4 && strcmp(a.out + n - 4, ".ini") == 0 ? n - 4 : n),
                 a.out);
    sf_nir_import_options o = {.source = a.in, .dt = a.dt, .dataset = -1, .init = ckpt};
    if (a.dataset) {
        sf_dataset_kind k;
        if (sf_dataset_kind_parse(a.dataset, &k) != SF_OK)
            return sf_cli_error("import", SF_EXIT_USAGE, "--dataset: %s", sf_last_error());
        o.dataset = (int32_t)k;
    }
    if ((rc = check_outputs(&a, ckpt)) != SF_EXIT_OK) return rc;
    sf_nir_graph *g = NULL;
    char *text = NULL;
    sf_tensor_list params = {0};
    sf_status s = sf_nir_read(a.in, &g);
    if (s == SF_OK) s = sf_config_from_nir(g, &o, &text, &params);
    if (s == SF_OK) s = save_checkpoint(text, a.out, &params, ckpt);
    if (s == SF_OK && (s = sf_write_file_atomic(a.out, text, strlen(text))) != SF_OK)
        remove(ckpt); /* a checkpoint without its config is no import: nothing of it stays */
    if (s == SF_OK)
        printf("wrote %s and %s from %s (%d NIR nodes)\ntrain it: spikefuse train %s\nevaluate it: spikefuse eval %s\n",
               a.out, ckpt, a.in, sf_nir_graph_nodes(g), a.out, ckpt);
    else
        rc = sf_cli_status("import", s);
    free(text);
    sf_tensor_list_free(&params);
    sf_nir_graph_free(g);
    return rc;
}
