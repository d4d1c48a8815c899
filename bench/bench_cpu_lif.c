/* bench_cpu_lif.c — workload W1 (docs/notebook/perf.md, Workloads) on the CPU: the time-fused LIF forward + backward in the
 * recompute mode, against the DRAM copy bandwidth measured in the same run; or, given a model, the PLIF (one w, which
 * the backward's dw sums over), IF or ALIF (rho 0.9, beta 0.7) on the same input.
 *
 * usage: bench_cpu_lif [log2(T·M) = 24] [repeats = 15] [lif | plif | if | alif]
 * x[T, M] ~ N(0.6, 1), ds ~ N(0, 1); LIF tau = 2, decay_input, θ = 1, hard reset to 0, detach_reset, sigmoid α = 4.
 * Floor: 20 bytes per element (forward reads x, writes s; backward reads ds and x, writes dx), 20 + 8/T for the PLIF
 * (a float per neuron written and read for dw), over the copy bandwidth (a parallel memcpy of a 256 MiB buffer, bytes
 * read + written). Times are medians after warm-up; each repeat measures the copy right before the kernels, so the
 * reported fraction compares like with like even when the machine is shared. */
#include "bench_clock.h"
#include "cpu/cpu_backend.h"
#include "core/rng.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_floats(int64_t n)
{
    float *p = aligned_alloc(64, (size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_cpu_lif: cannot allocate %lld floats\n", (long long)n);
        exit(1);
    }
    return p;
}

/* Normal draws by Box-Muller from the counter-based RNG, written by the threads that will later read them. */
static void fill_randn(float *x, int64_t n, float mean, float std, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        double u1 = sf_uniform(seed, 1, (uint64_t)i) + 0.5 / 16777216.0, u2 = sf_uniform(seed, 2, (uint64_t)i);
        x[i] = mean + std * (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* The copy-bandwidth probe: a parallel memcpy of a buffer far larger than the last-level cache. */
typedef struct copy_probe {
    float *a, *b;
    int64_t n;
} copy_probe;

static copy_probe copy_probe_make(void)
{
    copy_probe c = {.n = (int64_t)1 << 26}; /* 256 MiB per buffer */
    c.a = alloc_floats(c.n);
    c.b = alloc_floats(c.n);
    fill_randn(c.a, c.n, 0.0f, 1.0f, 9);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < c.n; i++) c.b[i] = 0.0f;
    return c;
}

/* GB/s of one copy, counting bytes read + written. */
static double copy_gbs(const copy_probe *c)
{
    double t0 = sf_bench_now_s();
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t lo = c->n * id / nt, hi = c->n * (id + 1) / nt;
        memcpy(c->b + lo, c->a + lo, (size_t)(hi - lo) * sizeof(float));
    }
    return 2.0 * (double)c->n * sizeof(float) / (sf_bench_now_s() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    const int log2n = argc > 1 ? atoi(argv[1]) : 24, repeats = argc > 2 ? atoi(argv[2]) : 15;
    const char *model = argc > 3 ? argv[3] : "lif";
    sf_lif_params p;
    sf_lif_default_params(&p); /* tau 2, decay_input, θ 1, hard reset to 0, sigmoid α 4 */
    p.detach_reset = 1;
    p.rho = 0.9f;
    p.beta = 0.7f;
    while ((int)p.model <= SF_NEURON_ALIF && strcmp(sf_neuron_model_name(p.model), model) != 0) p.model++;
    if (log2n < 10 || log2n > 30 || repeats < 3 || (int)p.model > SF_NEURON_ALIF) {
        fprintf(stderr, "usage: bench_cpu_lif [log2(T*M) in 10..30] [repeats >= 3] [lif | plif | if | alif]\n");
        return 1;
    }
    const int64_t total = (int64_t)1 << log2n;
    float w = 0.0f, dw = 0.0f; /* a PLIF's one w: tau = 2 */
    const sf_lif_state plif = {.w = &w, .dw = &dw, .w_channels = 1, .w_hw = 1};
    const sf_lif_state *st = p.model == SF_NEURON_PLIF ? &plif : NULL;

    printf("W1 %s on the CPU: %d OpenMP threads, T*M = 2^%d (%.0f MiB per tensor), median of %d\n", model,
           omp_get_max_threads(), log2n, (double)total * 4 / (1 << 20), repeats);
    printf("each repeat times a 256 MiB parallel copy, then forward + backward; 'of copy' is the median of the\n"
           "per-repeat ratios (robust when other processes share the machine); 'best' is the fastest repeat against\n"
           "the fastest copy\n");
    printf("%5s %9s %8s %8s %8s %7s %9s %7s %8s %5s %6s\n", "T", "M", "fwd ms", "bwd ms", "f+b ms", "GB/s",
           "copy GB/s", "of copy", "best ms", "best", "rate");

    copy_probe probe = copy_probe_make();
    float *x = alloc_floats(total), *s = alloc_floats(total), *ds = alloc_floats(total), *dx = alloc_floats(total);
    fill_randn(x, total, 0.6f, 1.0f, 1);
    fill_randn(ds, total, 0.0f, 1.0f, 2);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; i++) s[i] = dx[i] = 0.0f;

    const int64_t Ts[4] = {4, 16, 64, 256};
    double *tf = malloc((size_t)repeats * sizeof *tf), *tb = malloc((size_t)repeats * sizeof *tb);
    double *tt = malloc((size_t)repeats * sizeof *tt), *cg = malloc((size_t)repeats * sizeof *cg);
    double *ratio = malloc((size_t)repeats * sizeof *ratio);
    for (int k = 0; k < 4; k++) {
        const int64_t T = Ts[k], M = total / T;
        const double bytes = 20.0 + (p.model == SF_NEURON_PLIF ? 8.0 / (double)T : 0.0); /* per element */
        float spikes = 0;
        for (int r = -2; r < repeats; r++) {
            sf_lif_out out = {.s = s, .spike_count = r < 0 ? &spikes : NULL};
            const double copy = copy_gbs(&probe);
            double t0 = sf_bench_now_s();
            sf_status ok = sf_cpu_lif_forward(&p, T, M, x, &out, st);
            double t1 = sf_bench_now_s();
            if (ok == SF_OK) ok = sf_cpu_lif_backward(&p, T, M, x, NULL, ds, dx, st);
            double t2 = sf_bench_now_s();
            if (ok != SF_OK) {
                fprintf(stderr, "bench_cpu_lif: %s\n", sf_last_error());
                return 1;
            }
            if (r >= 0) {
                tf[r] = t1 - t0;
                tb[r] = t2 - t1;
                tt[r] = t2 - t0;
                cg[r] = copy;
                ratio[r] = bytes * (double)total / (t2 - t0) / 1e9 / copy;
            }
        }
        double best = tt[0], best_copy = cg[0];
        for (int r = 1; r < repeats; r++) {
            best = tt[r] < best ? tt[r] : best;
            best_copy = cg[r] > best_copy ? cg[r] : best_copy;
        }
        const double t = sf_bench_median(tt, repeats), gbs = bytes * (double)total / t / 1e9;
        const double fwd = sf_bench_median(tf, repeats), bwd = sf_bench_median(tb, repeats);
        const double copy = sf_bench_median(cg, repeats), of_copy = sf_bench_median(ratio, repeats);
        printf("%5lld %9lld %8.2f %8.2f %8.2f %7.2f %9.2f %6.0f%% %8.2f %4.0f%% %5.1f%%\n", (long long)T, (long long)M,
               1e3 * fwd, 1e3 * bwd, 1e3 * t, gbs, copy, 100.0 * of_copy, 1e3 * best,
               100.0 * bytes * (double)total / best / 1e9 / best_copy, 100.0 * spikes / (2.0 * (double)total));
    }
    free(cg);
    free(ratio);
    free(probe.a);
    free(probe.b);
    free(tf);
    free(tb);
    free(tt);
    free(x);
    free(s);
    free(ds);
    free(dx);
    return 0;
}
