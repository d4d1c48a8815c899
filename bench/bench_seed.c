/* bench_seed.c — the seed papers' headline measurements for spikefuse (workloads W6 and W7, docs/notebook/perf.md): for each
 * network of seed_nets.h, time step and precision, the median time of a full training step (forward, loss,
 * backward, SGD with momentum 0.9; host clock around sf_net_train_step, which ends in a synchronising read of the
 * loss), the compile time, the memory plan and the net's peak device bytes, in each memory mode --memory lists
 * (default recompute, Liang et al.'s dataflow; lean keeps spikes as bits and reruns the convolutions). Input: one N(0, 1) image per sample repeated over T (direct encoding), uploaded by the first step and
 * reused from the device by the others (x = NULL), as the peers keep theirs on the GPU. Each point is also checked:
 * every step's loss finite, the plan's parts adding up to its total, the peak at least the plan, one firing rate in
 * [0, 1] per LIF layer. Results go to stdout as a table and, with --json, to a file rewritten after every point (a crash
 * keeps what was measured). Runs on the CPU too: --smoke is the CI-sized run (widths / 8, B = 2, T = 2, 2 steps,
 * ImageNet-shaped nets on 64×64).
 *
 * Usage: bench_seed [--device cpu|cuda[:N]] [--workload W6|W7|all] [--nets a,b,..] [--T 2,4,..]
 *                   [--precision fp32,tf32,bf16] [--batch N] [--steps N] [--warmup N] [--conv-workspace-mib N]
 *                   [--conv-lean F] [--memory recompute,lean,full]
 *                   [--json FILE] [--smoke] [--list]
 * Defaults: cuda, all, every net, each net's workload T and batch, fp32 and bf16 on CUDA (fp32 on the CPU), 10 steps
 * after 2 warm-up steps, the library's conv workspace cap (--conv-workspace-mib trades speed for memory). Exit status
 * 1 if any point failed to run or failed a check (the others still run). */
#include "bench_clock.h"
#include "bench_randn.h"
#include "seed_nets.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
    sf_device device;
    const char *workload, *nets, *Ts, *precisions, *memories, *json;
    int steps, warmup, smoke, batch, conv_ws_mib; /* conv_ws_mib < 0: the library's default */
    float conv_lean;                              /* < 0: the library's default */
} options;

typedef struct point {
    const sb_net_kind *kind;
    int64_t T, B;
    sf_precision prec;
    sf_memory_mode memory;
    int32_t div, image;
    /* results */
    double ms, p10, p90, compile_ms, first_loss, last_loss, mean_rate;
    sf_memory_plan plan;
    size_t peak;
    int steps;
    char error[256];
} point;

static void usage(void)
{
    fputs("usage: bench_seed [--device cpu|cuda[:N]] [--workload W6|W7|all] [--nets a,b,..] [--T 2,4,..]\n"
          "                  [--precision fp32,tf32,bf16] [--batch N] [--steps N] [--warmup N]\n"
          "                  [--conv-workspace-mib N] [--conv-lean F] [--memory recompute,lean,full]\n"
          "                  [--json FILE] [--smoke] [--list]\n",
          stderr);
    exit(2);
}

/* Whether `name` is one of the comma-separated items of `list` (NULL: every name is). */
static int listed(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

/* Every name of a comma-separated list passes `ok`, or the program stops naming the one that does not. */
static void check_list(const char *what, const char *list, int (*ok)(const char *))
{
    if (!list) return;
    char buf[256];
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s", (int)len, p);
        if (!ok(buf)) {
            fprintf(stderr, "%s '%s' is not known (--list shows the networks)\n", what, buf);
            exit(2);
        }
        p += len + (e ? 1 : 0);
    }
}

static int net_known(const char *name) { return sb_net_find(name) != NULL; }
static int precision_known(const char *name)
{
    return !strcmp(name, "fp32") || !strcmp(name, "tf32") || !strcmp(name, "bf16");
}
static int memory_known(const char *name)
{
    for (int m = SF_MEMORY_FULL; m <= SF_MEMORY_LEAN; m++)
        if (!strcmp(name, sf_memory_mode_name((sf_memory_mode)m))) return 1;
    return 0;
}
static int T_valid(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v <= 100000;
}

static options parse(int argc, char **argv)
{
    options o = {{SF_DEVICE_CUDA, 0}, "all", NULL, NULL, NULL, NULL, NULL, 10, 2, 0, 0, -1, -1.0f};
    int device_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--smoke")) {
            o.smoke = 1;
            continue;
        }
        if (!strcmp(a, "--list")) {
            for (int k = 0; k < SB_NUM_NETS; k++) printf("%s %s\n", sb_nets[k].workload, sb_nets[k].name);
            exit(0);
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--device")) {
            if (sf_device_parse(v, &o.device) != SF_OK) usage();
            device_given = 1;
        } else if (!strcmp(a, "--workload")) {
            o.workload = v;
        } else if (!strcmp(a, "--nets")) {
            o.nets = v;
        } else if (!strcmp(a, "--T")) {
            o.Ts = v;
        } else if (!strcmp(a, "--precision")) {
            o.precisions = v;
        } else if (!strcmp(a, "--steps")) {
            o.steps = atoi(v);
        } else if (!strcmp(a, "--warmup")) {
            o.warmup = atoi(v);
        } else if (!strcmp(a, "--batch")) {
            o.batch = atoi(v);
            if (o.batch < 1) usage();
        } else if (!strcmp(a, "--conv-workspace-mib")) {
            o.conv_ws_mib = atoi(v);
            if (o.conv_ws_mib < 0) usage();
        } else if (!strcmp(a, "--conv-lean")) { /* [train] conv_lean: time the plan may add to save memory */
            o.conv_lean = (float)atof(v);
            if (!(o.conv_lean >= 0.0f)) usage();
        } else if (!strcmp(a, "--memory")) {
            o.memories = v;
        } else if (!strcmp(a, "--json")) {
            o.json = v;
        } else {
            usage();
        }
    }
    if (strcmp(o.workload, "all") && strcmp(o.workload, "W6") && strcmp(o.workload, "W7")) usage();
    if (o.smoke) {
        if (!device_given) o.device = (sf_device){SF_DEVICE_CPU, 0};
        if (!o.Ts) o.Ts = "2";
        o.steps = 2, o.warmup = 0;
    }
    if (o.steps < 1 || o.warmup < 0) usage();
    if (!o.precisions) o.precisions = o.device.kind == SF_DEVICE_CUDA ? "fp32,bf16" : "fp32";
    check_list("network", o.nets, net_known);
    check_list("precision", o.precisions, precision_known);
    if (!o.memories) o.memories = "recompute";
    check_list("memory mode", o.memories, memory_known);
    check_list("time-step count", o.Ts, T_valid);
    return o;
}

static void fail_point(point *pt, const char *what, sf_status s)
{
    if (!pt->error[0])
        snprintf(pt->error, sizeof pt->error, "%s: %s: %s", what, sf_status_str(s), s == SF_OK ? "" : sf_last_error());
}

/* The result checks of a point that ran; the first failure goes into pt->error. */
static void check_point(point *pt, const sf_net *net, int lifs)
{
    const sf_memory_plan *m = &pt->plan;
    if (m->params + m->grads + m->optimizer + m->buffers + m->saved + m->workspace != m->total)
        snprintf(pt->error, sizeof pt->error, "memory plan: parts do not add up to the total %zu", m->total);
    else if (pt->peak < m->total)
        snprintf(pt->error, sizeof pt->error, "peak %zu bytes below the plan's %zu", pt->peak, m->total);
    float rates[128];
    int32_t n = sf_net_firing_rates(net, rates, 128);
    double sum = 0;
    for (int32_t i = 0; i < n && i < 128; i++) {
        if (!(rates[i] >= 0.0f && rates[i] <= 1.0f) && !pt->error[0])
            snprintf(pt->error, sizeof pt->error, "firing rate of LIF layer %d is %g", i, rates[i]);
        sum += rates[i];
    }
    if (n != lifs && !pt->error[0]) snprintf(pt->error, sizeof pt->error, "%d firing rates for %d LIF layers", n, lifs);
    pt->mean_rate = n > 0 ? sum / n : 0;
}

/* Builds, compiles and times one point. */
static void run_point(const options *o, point *pt)
{
    const sb_net_kind *k = pt->kind;
    const int64_t T = pt->T, B = pt->B, img = 3 * (int64_t)pt->image * pt->image;
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = o->device;
    p.memory = pt->memory;
    p.precision = pt->prec;
    p.in_channels = 3, p.in_height = p.in_width = pt->image;
    if (o->conv_ws_mib >= 0) p.cuda.conv_workspace_mib = o->conv_ws_mib;
    if (o->conv_lean >= 0.0f) p.cuda.conv_lean = o->conv_lean;
    sb_builder b = {NULL, pt->div, 0, SF_OK, 0};
    sf_status s = sf_net_create(&p, &b.net);
    if (s != SF_OK) {
        fail_point(pt, "create", s);
        return;
    }
    k->build(&b, k->bn);
    if (b.status != SF_OK) {
        fail_point(pt, "build", b.status);
        sf_net_free(b.net);
        return;
    }
    double t0 = sf_bench_now_ms();
    s = sf_net_compile(b.net, T, B);
    sf_optim_params opt;
    sf_optim_default_params(&opt);
    opt.lr = 0.01f;
    opt.momentum = 0.9f;
    if (s == SF_OK) s = sf_net_set_optimizer(b.net, &opt);
    if (s != SF_OK) {
        fail_point(pt, "compile", s);
        sf_net_free(b.net);
        return;
    }
    pt->compile_ms = sf_bench_now_ms() - t0;

    float *x = malloc(sizeof(float) * (size_t)(T * B * img));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)B);
    double *ts = malloc(sizeof(double) * (size_t)o->steps);
    if (!x || !labels || !ts) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    sf_bench_randn(x, (size_t)(B * img), 0.0f, 1.0f, 3);
    for (int64_t t = 1; t < T; t++) memcpy(x + t * B * img, x, sizeof(float) * (size_t)(B * img));
    int32_t out[3] = {1, 1, 1}; /* the classes: the last layer's width */
    sf_net_tensor_shape(b.net, sf_net_num_layers(b.net), out);
    const int32_t classes = out[0];
    for (int64_t i = 0; i < B; i++) labels[i] = (int32_t)((i * 7) % classes);
    sf_step_result r = {.loss = 0.0f};
    for (int i = 0; i < o->warmup + o->steps && s == SF_OK; i++) {
        double a = sf_bench_now_ms();
        s = sf_net_train_step(b.net, i ? NULL : x, labels, &r); /* the input stays on the device, as the peers' */
        if (i >= o->warmup) ts[i - o->warmup] = sf_bench_now_ms() - a;
        if (i == 0) pt->first_loss = r.loss;
        if (s == SF_OK && !isfinite(r.loss)) s = SF_ERR_NUMERIC;
    }
    if (s != SF_OK) {
        fail_point(pt, "train step", s);
    } else {
        pt->steps = o->steps;
        pt->last_loss = r.loss;
        pt->ms = sf_bench_median(ts, o->steps); /* sorts ts */
        pt->p10 = ts[o->steps / 10];
        pt->p90 = ts[o->steps - 1 - o->steps / 10];
        s = sf_net_memory_plan(b.net, &pt->plan);
        pt->peak = sf_net_peak_bytes(b.net);
        if (s != SF_OK) fail_point(pt, "memory plan", s);
        else check_point(pt, b.net, b.lifs);
    }
    free(x), free(labels), free(ts);
    sf_net_free(b.net);
}

static double mib(size_t bytes) { return (double)bytes / 1048576.0; }

/* The plan's bytes that do not grow with T or B: parameters, gradients, optimizer state, buffers. */
static size_t fixed_bytes(const sf_memory_plan *m) { return m->params + m->grads + m->optimizer + m->buffers; }

static cJSON *point_json(const point *pt)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "workload", pt->kind->workload);
    cJSON_AddStringToObject(o, "net", pt->kind->name);
    cJSON_AddBoolToObject(o, "bn", pt->kind->bn);
    cJSON_AddNumberToObject(o, "T", (double)pt->T);
    cJSON_AddNumberToObject(o, "B", (double)pt->B);
    cJSON_AddNumberToObject(o, "image", pt->image);
    cJSON_AddNumberToObject(o, "width_div", pt->div);
    cJSON_AddStringToObject(o, "impl", "spikefuse");
    cJSON_AddStringToObject(o, "precision", sf_precision_name(pt->prec));
    cJSON_AddStringToObject(o, "memory", sf_memory_mode_name(pt->memory));
    cJSON_AddBoolToObject(o, "ok", !pt->error[0]);
    if (pt->error[0]) cJSON_AddStringToObject(o, "error", pt->error);
    if (pt->steps) {
        cJSON_AddNumberToObject(o, "ms", pt->ms);
        cJSON_AddNumberToObject(o, "ms_p10", pt->p10);
        cJSON_AddNumberToObject(o, "ms_p90", pt->p90);
        cJSON_AddNumberToObject(o, "steps", pt->steps);
        cJSON_AddNumberToObject(o, "compile_ms", pt->compile_ms);
        cJSON_AddNumberToObject(o, "peak_mib", mib(pt->peak));
        cJSON_AddNumberToObject(o, "plan_mib", mib(pt->plan.total));
        cJSON_AddNumberToObject(o, "saved_mib", mib(pt->plan.saved));
        cJSON_AddNumberToObject(o, "workspace_mib", mib(pt->plan.workspace));
        cJSON_AddNumberToObject(o, "fixed_mib", mib(fixed_bytes(&pt->plan)));
        /* the fp32 gradients count the parameters in every precision (bf16's params also hold a 16-bit copy) */
        cJSON_AddNumberToObject(o, "params", (double)(pt->plan.grads / sizeof(float)));
        cJSON_AddNumberToObject(o, "first_loss", pt->first_loss);
        cJSON_AddNumberToObject(o, "last_loss", pt->last_loss);
        cJSON_AddNumberToObject(o, "mean_firing_rate", pt->mean_rate);
    }
    return o;
}

static void write_json(const options *o, const point *pts, int n)
{
    if (!o->json) return;
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "program", "bench_seed");
    cJSON_AddStringToObject(root, "version", sf_version());
    cJSON_AddStringToObject(root, "build", sf_build_info());
    cJSON_AddStringToObject(root, "device", o->device.kind == SF_DEVICE_CUDA ? "cuda" : "cpu");
    cJSON_AddBoolToObject(root, "smoke", o->smoke);
    cJSON_AddNumberToObject(root, "warmup", o->warmup);
    if (o->conv_ws_mib >= 0) cJSON_AddNumberToObject(root, "conv_workspace_mib", o->conv_ws_mib);
    if (o->conv_lean >= 0.0f) cJSON_AddNumberToObject(root, "conv_lean", o->conv_lean);
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, point_json(&pts[i]));
    cJSON_AddItemToObject(root, "points", arr);
    char *text = cJSON_Print(root);
    FILE *f = fopen(o->json, "w");
    if (!f || !text || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", o->json);
        exit(1);
    }
    cJSON_free(text);
    cJSON_Delete(root);
}

/* The points the options select, in sweep order: network, then T, then precision, then memory mode. */
static int plan_points(const options *o, point *pts, int cap)
{
    static const sf_precision precs[] = {SF_PRECISION_FP32, SF_PRECISION_TF32, SF_PRECISION_BF16};
    int n = 0;
    for (int k = 0; k < SB_NUM_NETS; k++) {
        const sb_net_kind *kind = &sb_nets[k];
        if (!listed(o->nets, kind->name)) continue;
        if (strcmp(o->workload, "all") && strcmp(o->workload, kind->workload)) continue;
        int64_t Ts[32];
        int nT = 0;
        if (o->Ts) {
            for (const char *p = o->Ts; *p && nT < 32; nT++) {
                char *end;
                Ts[nT] = strtoll(p, &end, 10);
                p = *end == ',' ? end + 1 : end;
            }
        } else {
            for (nT = 0; nT < kind->n_T; nT++) Ts[nT] = kind->T[nT];
        }
        for (int t = 0; t < nT; t++)
            for (int q = 0; q < 3; q++)
                for (int m = SF_MEMORY_FULL; m <= SF_MEMORY_LEAN; m++) {
                    const sf_memory_mode mode = (sf_memory_mode)m;
                    if (!listed(o->precisions, sf_precision_name(precs[q])) ||
                        !listed(o->memories, sf_memory_mode_name(mode)) || n == cap)
                        continue;
                    pts[n] = (point){.kind = kind,
                                     .T = Ts[t],
                                     .B = o->batch   ? o->batch
                                          : o->smoke ? 2
                                                     : kind->batch,
                                     .prec = precs[q],
                                     .memory = mode,
                                     .div = o->smoke ? 8 : 1,
                                     .image = o->smoke && kind->image > 64 ? 64 : kind->image};
                    n++;
                }
    }
    return n;
}

int main(int argc, char **argv)
{
    options o = parse(argc, argv);
    point pts[512];
    int n = plan_points(&o, pts, 512);
    printf("bench_seed: %d points on %s%s, %d steps after %d warm-up  (%s)\n", n,
           o.device.kind == SF_DEVICE_CUDA ? "cuda" : "cpu",
           o.smoke ? " (smoke: widths / 8, B = 2, 64x64 for ImageNet)" : "", o.steps, o.warmup, sf_build_info());
    printf("%-4s %-12s %4s %3s %-5s %-9s %9s %8s %8s %10s %9s %9s %9s %9s %8s %6s  %s\n", "wl", "net", "T", "B", "prec",
           "memory", "ms/step", "p10", "p90", "compile_ms", "peak_MiB", "fixed_MiB", "saved_MiB", "work_MiB", "loss", "rate",
           "check");
    int bad = 0;
    double t0 = sf_bench_now_s();
    for (int i = 0; i < n; i++) {
        point *pt = &pts[i];
        run_point(&o, pt);
        printf("%-4s %-12s %4lld %3lld %-5s %-9s", pt->kind->workload, pt->kind->name, (long long)pt->T,
               (long long)pt->B, sf_precision_name(pt->prec), sf_memory_mode_name(pt->memory));
        if (pt->steps)
            printf(" %9.2f %8.2f %8.2f %10.0f %9.0f %9.0f %9.0f %9.0f %8.4f %6.3f", pt->ms, pt->p10, pt->p90,
                   pt->compile_ms, mib(pt->peak), mib(fixed_bytes(&pt->plan)), mib(pt->plan.saved),
                   mib(pt->plan.workspace), pt->last_loss, pt->mean_rate);
        printf("  %s\n", pt->error[0] ? pt->error : "ok");
        fflush(stdout);
        bad |= pt->error[0] != 0;
        write_json(&o, pts, i + 1);
    }
    printf("bench_seed: %d points in %.1f s, %s\n", n, sf_bench_now_s() - t0,
           bad ? "SOME FAILED" : "all checks passed");
    return bad || n == 0;
}
