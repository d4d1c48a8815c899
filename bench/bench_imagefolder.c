/* bench_imagefolder.c — W11, the image-folder loader alone: images/s of a training loader of `dataset =
 * imagefolder` over whole epochs of DIR/train, as peers_w9_w10.py times torchvision's ImageFolder + PIL
 * DataLoader: RandomResizedCrop(224) + flip + normalisation into [B, 3, 224, 224] float batches (T = 1), batch 256,
 * the batches in page-locked memory when a GPU is named, prefetched on the loader's threads; nothing consumes them
 * but the loop taking them.
 *
 * usage: bench_imagefolder DIR [threads = 0 (all)] [epochs = 3] [batch = 256] [size = 224] [device = cpu]
 *
 * DIR holds train/<class>/ folders (make_imagefolder writes one; for the peer's own folder, link it:
 * mkdir -p /tmp/w11 && ln -sfn /tmp/jpegs /tmp/w11/train). One JSON line per epoch (the first includes starting
 * the threads and reading the files into the page cache), and one with the median of the epochs after the first;
 * images_per_cpu_s counts the process's CPU time, what one core delivers on a machine shared with other work. */
#include "bench_clock.h"
#include "data/dataset.h"
#include "io/files.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void *pinned_alloc(size_t bytes, void *device) { return sf_host_alloc(*(const sf_device *)device, bytes); }
static void pinned_release(void *p, void *device) { sf_host_free(*(const sf_device *)device, p); }

/* The CPU seconds this process has used: the images per CPU-second are what one core delivers, however busy the
 * machine is with other work. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * ru.ru_stime.tv_usec;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_imagefolder: %s: %s\n", what, sf_last_error());
    return 1;
}

/* The class folders of dir/train. */
static int count_classes(const char *dir, int32_t *classes)
{
    char train[4096];
    sf_dir_entry *e = NULL;
    size_t n = 0;
    *classes = 0;
    if (sf_path_join(train, sizeof train, dir, "train") != SF_OK || sf_dir_entries(train, &e, &n) != SF_OK) return 0;
    for (size_t i = 0; i < n; i++) *classes += e[i].kind == SF_ENTRY_DIR;
    free(e);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_imagefolder DIR [threads = 0 (all)] [epochs = 3] [batch = 256] [size = 224] "
                        "[device = cpu]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 0, epochs = argc > 3 ? atoi(argv[3]) : 3;
    const int batch = argc > 4 ? atoi(argv[4]) : 256, size = argc > 5 ? atoi(argv[5]) : 224;
    sf_device device;
    if (sf_device_parse(argc > 6 ? argv[6] : "cpu", &device) != SF_OK) return fail("device");
    sf_data_params dp;
    sf_data_default_params(&dp);
    dp.images.size = size;
    if (!count_classes(argv[1], &dp.images.classes)) return fail(argv[1]);
    sf_dataset *ds = NULL;
    if (sf_dataset_load(SF_DATASET_IMAGEFOLDER, argv[1], SF_SPLIT_TRAIN, &dp, &ds) != SF_OK) return fail("loading");
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = batch;
    p.augment = 1;
    p.threads = threads;
    if (device.kind == SF_DEVICE_CUDA) p.memory = (sf_batch_memory){pinned_alloc, pinned_release, &device};
    sf_loader *l = NULL;
    if (sf_loader_create(ds, &p, &l) != SF_OK) return fail("loader");
    const int used = threads > 0 ? threads : omp_get_max_threads();
    double rates[64], per_cpu[64];
    int measured = 0;
    for (int e = 0; e < epochs && e < 64; e++) {
        const double t0 = sf_bench_now_s(), c0 = cpu_seconds();
        int64_t images = 0;
        for (const sf_batch *b = NULL;;) {
            if (sf_loader_next(l, &b) != SF_OK) return fail("batch");
            if (!b) break;
            images += b->B;
        }
        const double rate = (double)images / (sf_bench_now_s() - t0), cpu = (double)images / (cpu_seconds() - c0);
        if (e > 0) rates[measured] = rate, per_cpu[measured++] = cpu;
        printf("{\"bench\":\"loader_imagefolder_spikefuse\",\"epoch\":%d,\"threads\":%d,\"batch\":%d,\"size\":%d,"
               "\"images\":%lld,\"images_per_s\":%.1f,\"per_thread\":%.1f,\"images_per_cpu_s\":%.1f}\n",
               e, used, batch, size, (long long)images, rate, rate / used, cpu);
        fflush(stdout);
    }
    if (measured) {
        const double rate = sf_bench_median(rates, measured);
        printf("{\"bench\":\"loader_imagefolder_spikefuse\",\"threads\":%d,\"steady_images_per_s\":%.1f,"
               "\"per_thread\":%.1f,\"images_per_cpu_s\":%.1f,\"bad_images\":%lld}\n",
               used, rate, rate / used, sf_bench_median(per_cpu, measured), (long long)sf_dataset_bad_images(ds));
    }
    sf_loader_free(l);
    sf_dataset_free(ds);
    return 0;
}
