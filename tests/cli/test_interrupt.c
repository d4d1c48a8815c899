/* test_interrupt.c — a request to stop (io/interrupt.h, what the CLI's SIGINT/SIGTERM handler makes) heard in each
 * phase of a run: the readers of files and of event datasets return at once; a run asked to stop while it loads its
 * data writes nothing and says it cannot be resumed; a run asked to stop in its test pass keeps the state after
 * the epoch's training, and resumed, ends exactly as an uninterrupted run (metrics and checkpoint, bitwise). */
#include "config/config.h"
#include "io/files.h"
#include "io/interrupt.h"
#include "io/safetensors.h"
#include "testutil.h"
#include "spikefuse_train.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[] = "/tmp/sf_test_interrupt_XXXXXX";

/* N-MNIST files: each class's events in its own band of the sensor, in Train/ and Test/. */
static void write_nmnist(const char *root)
{
    for (int split = 0; split < 2; split++)
        for (int d = 0; d < 10; d++) {
            char dir[700], cmd[800];
            snprintf(dir, sizeof dir, "%s/%s/%d", root, split ? "Test" : "Train", d);
            snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
            CHECK(system(cmd) == 0, "%s", cmd);
            for (int k = 0; k < (split ? 2 : 4); k++) {
                uint8_t ev[40 * 5];
                for (int i = 0; i < 40; i++) {
                    const unsigned t = 100u * (unsigned)i;
                    ev[5 * i] = (uint8_t)((3 * d + i % 3) % 34);
                    ev[5 * i + 1] = (uint8_t)((7 * i + k) % 34);
                    ev[5 * i + 2] = (uint8_t)((i & 1) << 7 | ((t >> 16) & 0x7f));
                    ev[5 * i + 3] = (uint8_t)(t >> 8);
                    ev[5 * i + 4] = (uint8_t)t;
                }
                char path[800];
                snprintf(path, sizeof path, "%s/%05d.bin", dir, k);
                FILE *f = fopen(path, "wb");
                CHECK(f && fwrite(ev, 1, sizeof ev, f) == sizeof ev, "writing %s", path);
                if (f) fclose(f);
            }
        }
}

static sf_config *config(const char *data)
{
    char text[1024];
    snprintf(text, sizeof text,
             "[train]\ndataset = nmnist\ndata_dir = %s\nepochs = 2\nbatch = 8\ntimesteps = 3\ndownsample = 2\n"
             "optimizer = adam\nlr = 0.01\nseed = 5\nlog_every = 1\nsparse = off\n"
             "[flatten]\n[linear]\nout = 16\n[lif]\n[linear]\nout = 10\n",
             data);
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_parse_string(text, "interrupt.ini", &cfg));
    return cfg;
}

/* The readers hear a request: a whole-file read and an event dataset's samples. */
static void test_readers(const char *data)
{
    char path[700];
    snprintf(path, sizeof path, "%s/Train/0/00000.bin", data);
    char *buf = NULL;
    sf_dataset *ds = NULL;
    sf_interrupt_request();
    CHECK(sf_read_file(path, SIZE_MAX, &buf, NULL) == SF_ERR_STATE && strstr(sf_last_error(), "interrupted"),
          "a file read stops: %s", sf_last_error());
    CHECK(sf_dataset_load(SF_DATASET_NMNIST, data, SF_SPLIT_TRAIN, NULL, &ds) == SF_ERR_STATE && !ds,
          "an event dataset's loading stops: %s", sf_last_error());
    sf_interrupt_clear();
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, data, SF_SPLIT_TRAIN, NULL, &ds));
    CHECK(ds && ds->count == 40, "and loads once the request is cleared");
    sf_dataset_free(ds);
    free(buf);
}

/* A run asked to stop before it starts (as while its data loads) writes nothing and has nothing to resume. */
static void test_stop_while_loading(const char *data)
{
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/loading", tmpdir);
    sf_config *cfg = config(data);
    sf_train_options o = {.run_dir = run_dir};
    sf_train_summary sum;
    sf_interrupt_request();
    CHECK_OK(cfg ? sf_train_run(cfg, &o, &sum) : SF_ERR_INVALID);
    sf_interrupt_clear();
    CHECK(sum.interrupted && !sum.resumable && sum.steps == 0, "interrupted %d, resumable %d, %lld steps",
          sum.interrupted, sum.resumable, (long long)sum.steps);
    CHECK(!sf_path_exists(run_dir), "the run directory was not created");
    sf_config_free(cfg);
}

/* Requests a stop when the test pass of epoch `at` starts. */
static int stop_at_test(const sf_train_event *ev, void *user)
{
    if (ev->kind == SF_TRAIN_EV_TEST && ev->epoch == *(const int64_t *)user) sf_interrupt_request();
    return 0;
}

/* The lines of metrics.jsonl with their timing fields removed, as one string. */
static char *metrics_without_times(const char *run_dir)
{
    char path[600], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", run_dir, SF_RUN_METRICS);
    CHECK_OK(sf_read_file(path, SIZE_MAX, &text, NULL));
    size_t cap = text ? strlen(text) + 1 : 1, n = 0;
    char *out = calloc(cap, 1);
    static const char *const times[] = {"samples_per_s", "train_seconds", "test_seconds", "data_wait_seconds", "peak_rss_bytes"};
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line && out;
         line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) cJSON_DeleteItemFromObject(o, times[i]);
        char *printed = o ? cJSON_PrintUnformatted(o) : NULL;
        if (printed && n + strlen(printed) + 2 <= cap) n += (size_t)sprintf(out + n, "%s\n", printed);
        free(printed);
        cJSON_Delete(o);
    }
    free(text);
    return out;
}

/* Whether two checkpoints hold the same tensors, bitwise. */
static int same_tensors(const char *a_path, const char *b_path)
{
    sf_safetensors *a = NULL, *b = NULL;
    CHECK_OK(sf_safetensors_load(a_path, &a));
    CHECK_OK(sf_safetensors_load(b_path, &b));
    int same = a && b && a->count == b->count && a->data_size == b->data_size;
    for (int32_t i = 0; same && i < a->count; i++) {
        const sf_st_entry *e = sf_safetensors_find(b, a->entries[i].name);
        same = e && e->nbytes == a->entries[i].nbytes &&
               memcmp(a->data + a->entries[i].offset, b->data + e->offset, e->nbytes) == 0;
    }
    sf_safetensors_free(a);
    sf_safetensors_free(b);
    return same;
}

static void test_stop_in_test_pass(const char *data)
{
    char whole[512], cut[512], last_a[600], last_b[600];
    snprintf(whole, sizeof whole, "%s/whole", tmpdir);
    snprintf(cut, sizeof cut, "%s/cut", tmpdir);
    sf_config *cfg = config(data);
    if (!cfg) return;
    sf_train_summary sum;
    sf_train_options o = {.run_dir = whole};
    CHECK_OK(sf_train_run(cfg, &o, &sum));
    CHECK(!sum.interrupted && sum.epochs_done == 2, "the uninterrupted run trains its 2 epochs");
    const int64_t at = 1;
    o = (sf_train_options){.run_dir = cut, .callback = stop_at_test, .user = (void *)&at};
    CHECK_OK(sf_train_run(cfg, &o, &sum));
    sf_interrupt_clear();
    CHECK(sum.interrupted && sum.resumable && sum.epochs_done == 0 && sum.steps == 5,
          "stopped in epoch 1's test pass after its 5 steps (interrupted %d, resumable %d, %lld epochs, %lld steps)",
          sum.interrupted, sum.resumable, (long long)sum.epochs_done, (long long)sum.steps);
    o = (sf_train_options){.run_dir = cut, .resume_dir = cut};
    CHECK_OK(sf_train_run(cfg, &o, &sum));
    CHECK(!sum.interrupted && sum.epochs_done == 2, "the resumed run ends its 2 epochs");
    char *a = metrics_without_times(whole), *b = metrics_without_times(cut);
    CHECK(a && strstr(a, "\"type\":\"epoch\",\"epoch\":2"), "the uninterrupted run logged its epochs:\n%s", a ? a : "");
    CHECK(a && b && strcmp(a, b) == 0, "metrics.jsonl is the uninterrupted run's:\n%s\nagainst\n%s", a ? a : "",
          b ? b : "");
    snprintf(last_a, sizeof last_a, "%s/%s", whole, SF_RUN_LAST);
    snprintf(last_b, sizeof last_b, "%s/%s", cut, SF_RUN_LAST);
    CHECK(same_tensors(last_a, last_b), "the last checkpoint is the uninterrupted run's, bitwise");
    free(a);
    free(b);
    sf_config_free(cfg);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    char data[512];
    snprintf(data, sizeof data, "%s/nm", tmpdir);
    write_nmnist(data);
    test_readers(data);
    test_stop_while_loading(data);
    test_stop_in_test_pass(data);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_interrupt");
}
