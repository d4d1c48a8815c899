/* cmd_export.c — `spikefuse export`: a checkpoint's network as a NIR graph file. */
#include "cli.h"
#include "spikefuse_train.h"

#include <stdio.h>
#include <string.h>

static const char *export_help =
    "usage: spikefuse export CHECKPOINT --nir OUT.nir [--dt SECONDS]\n\n"
    "Writes the network of a checkpoint (a .safetensors file written by spikefuse train or import, or a run\n"
    "directory: its best.safetensors) as a NIR graph (Neuromorphic Intermediate Representation, HDF5), which\n"
    "snnTorch, SpikingJelly, Norse, Lava and neuromorphic hardware toolchains read. Batch norm is folded into the\n"
    "conv or linear layer before it, dropout is dropped, and the LIF neurons become NIR's continuous-time LIF\n"
    "discretised with time step --dt (docs/nir.md). A max pool of spikes becomes a sum pool and a threshold;\n"
    "what NIR cannot express (a max pool of other values, a soft reset) is refused with a message naming it.\n\n"
    "options:\n"
    "  --nir OUT     the NIR file to write (replaced if it exists)\n"
    "  --dt SECONDS  the time step of one simulation step (default 1e-4, as snnTorch and SpikingJelly assume)\n"
    "  -h, --help    this text\n\n"
    "exit codes: 0 written, 1 failed (unreadable checkpoint, a layer NIR cannot express, a write error),\n"
    "2 bad command line.\n";

typedef struct export_args {
    const char *checkpoint, *out;
    double dt;
} export_args;

static int parse_args(int argc, char **argv, export_args *a, int *help)
{
    *a = (export_args){.dt = SF_NIR_DEFAULT_DT};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("export", argc, argv, &i, "--nir", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->out = v;
        } else if ((m = sf_cli_value("export", argc, argv, &i, "--dt", &v)) != 0) {
            if (m < 0 || !sf_cli_positive("export", "--dt", v, &a->dt)) return SF_EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("export", argv[i], "--nir, --dt, --help");
        } else if (!a->checkpoint) {
            a->checkpoint = argv[i];
        } else {
            return sf_cli_error("export", SF_EXIT_USAGE, "unexpected argument '%s' (export takes one CHECKPOINT)",
                                argv[i]);
        }
    }
    if (!a->checkpoint) return sf_cli_error("export", SF_EXIT_USAGE, "no CHECKPOINT given (see spikefuse export --help)");
    if (!a->out) return sf_cli_error("export", SF_EXIT_USAGE, "no --nir OUT given (see spikefuse export --help)");
    return SF_EXIT_OK;
}

/* The checkpoint's network with its parameters, built for one step of one sample (export reads no data). */
static sf_status load_net(const char *path, const sf_config *cfg, sf_net **net)
{
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_status s = sf_config_build_net(cfg, net);
    if (s == SF_OK) s = sf_net_compile(*net, 1, 1);
    if (s == SF_OK) s = sf_checkpoint_open(path, &st, &info);
    if (s == SF_OK) s = sf_checkpoint_restore(st, *net, 0);
    sf_safetensors_free(st);
    return s;
}

int sf_cmd_export(int argc, char **argv)
{
    export_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(export_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    char path[4096];
    if ((rc = sf_cli_checkpoint_path("export", a.checkpoint, path, sizeof path)) != SF_EXIT_OK) return rc;
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    sf_nir_graph *g = NULL;
    sf_status s = sf_checkpoint_config(path, &cfg);
    if (s == SF_OK) {
        /* parameters are only read: on the host, whatever device and arithmetic the run trained with */
        cfg->net.device = (sf_device){.kind = SF_DEVICE_CPU};
        cfg->net.precision = SF_PRECISION_FP32;
        s = load_net(path, cfg, &net);
    }
    if (s == SF_OK) s = sf_config_to_nir(cfg, net, a.dt, &g);
    if (s == SF_OK) s = sf_nir_write(g, SF_NIR_VERSION, a.out);
    if (s == SF_OK)
        printf("wrote %s: %d NIR nodes, %d edges, from %s (dt = %g s)\n", a.out, sf_nir_graph_nodes(g),
               sf_nir_graph_edges(g), path, a.dt);
    else
        rc = sf_cli_status("export", s);
    sf_nir_graph_free(g);
    sf_net_free(net);
    sf_config_free(cfg);
    return rc;
}
