/* test_checkpoint.c — the trainer's file handling without the CLI: a checkpoint round trip continues training
 * bitwise, damaged (a flipped bit, a NaN) or mismatched checkpoints are refused with a message naming the tensor,
 * metrics.jsonl is cut back to a checkpoint, run directories are never reused by accident, stale temporaries are
 * removed, locks name their holder, and whole-file reads keep their size limit exactly and refuse directories. */
#include "io/files.h"
#include "spikefuse_train.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "train/metrics.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T = 3, B = 4, C = 2, H = 6, W = 6, CLASSES = 5 };

static sf_net *make_net(sf_optimizer opt, int32_t hidden)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = C;
    p.in_height = H;
    p.in_width = W;
    p.seed = 7;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_CONV2D, &d);
    d.out_channels = 3;
    d.kernel = 3;
    d.padding = 1;
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_BATCHNORM, &d);
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_LIF, &d);
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_FLATTEN, &d);
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_DROPOUT, &d);
    d.dropout_p = 0.2f;
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_layer_default_desc(SF_LAYER_LINEAR, &d);
    d.out_features = hidden;
    CHECK_OK(sf_net_add(net, &d, NULL));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = opt;
    o.lr = 0.05f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    CHECK_OK(sf_net_compile(net, T, B));
    return net;
}

static float train_steps(sf_net *net, int n, uint64_t seed)
{
    float x[T * B * C * H * W];
    int32_t labels[B];
    sf_step_result r = {0};
    for (int i = 0; i < n; i++) {
        tu_randn(x, T * B * C * H * W, 0.8f, 1.0f, seed + (uint64_t)i);
        for (int b = 0; b < B; b++) labels[b] = (b + i) % CLASSES;
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
    }
    return r.loss;
}

/* All parameters, buffers and optimizer state of two nets are bitwise equal. */
static int same_state(const sf_net *a, const sf_net *b)
{
    static const sf_tensor_role roles[] = {SF_ROLE_PARAM, SF_ROLE_BUFFER, SF_ROLE_OPTIMIZER};
    for (int r = 0; r < 3; r++) {
        int32_t n = sf_net_tensor_count(a, roles[r]);
        if (n != sf_net_tensor_count(b, roles[r])) return 0;
        for (int32_t i = 0; i < n; i++) {
            sf_tensor_info ti;
            sf_net_tensor_info(a, roles[r], i, &ti);
            float *x = malloc((size_t)ti.numel * sizeof *x), *y = malloc((size_t)ti.numel * sizeof *y);
            sf_net_tensor_read(a, roles[r], i, x);
            sf_net_tensor_read(b, roles[r], i, y);
            int same = memcmp(x, y, (size_t)ti.numel * sizeof *x) == 0;
            free(x);
            free(y);
            if (!same) return 0;
        }
    }
    return 1;
}

static void test_round_trip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    sf_net *a = make_net(SF_OPT_ADAM, CLASSES);
    train_steps(a, 3, 100);
    sf_checkpoint_info info = {.config = "[train]\ndataset = mnist\n", .epoch = 2, .step = 3,
                               .loader_state = "{\"epoch\":2}", .best_metric = 0.5, .best_step = 2};
    CHECK_OK(sf_checkpoint_save(a, &info, path));
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0044) != 0, "checkpoint should be readable like other files");

    sf_safetensors *st = NULL;
    sf_checkpoint_info got;
    CHECK_OK(sf_checkpoint_open(path, &st, &got));
    if (!st) return;
    CHECK(got.epoch == 2 && got.step == 3 && got.best_metric == 0.5 && got.best_step == 2,
          "metadata epoch/step/best/best_step");
    CHECK(strcmp(got.config, info.config) == 0, "config text round trip");
    CHECK(got.loader_state && strcmp(got.loader_state, info.loader_state) == 0, "loader state round trip");
    CHECK(sf_safetensors_find(st, "0.weight") != NULL, "parameter 0.weight saved");
    CHECK(sf_safetensors_find(st, "1.running_mean") != NULL, "BN running mean saved");

    sf_net *b = make_net(SF_OPT_ADAM, CLASSES);
    CHECK_OK(sf_checkpoint_restore(st, b, 1));
    CHECK(same_state(a, b), "restored state equals the saved one");
    float la = train_steps(a, 2, 200), lb = train_steps(b, 2, 200);
    CHECK(memcmp(&la, &lb, sizeof la) == 0, "continued losses differ: %.9g vs %.9g", la, lb);
    CHECK(same_state(a, b), "continued training diverged (dropout RNG or optimizer state not restored?)");

    /* Mismatches are refused with a message naming the tensor. */
    sf_net *wide = make_net(SF_OPT_ADAM, CLASSES + 1);
    sf_status s = sf_checkpoint_restore(st, wide, 1);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "shape"), "other shape: %s", sf_last_error());
    sf_net *sgd = make_net(SF_OPT_SGD, CLASSES);
    sf_optim_params mom;
    sf_optim_default_params(&mom);
    mom.momentum = 0.9f;
    CHECK_OK(sf_net_set_optimizer(sgd, &mom));
    s = sf_checkpoint_restore(st, sgd, 1);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "not in the checkpoint"), "other optimizer: %s",
          sf_last_error());
    CHECK_OK(sf_checkpoint_restore(st, sgd, 0)); /* weights alone still load */
    sf_net_free(sgd);
    sf_net_free(wide);
    sf_safetensors_free(st);
    sf_net_free(a);
    sf_net_free(b);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_damaged(const char *dir)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(sf_read_file(path, SIZE_MAX, &buf, &len));
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    /* Every truncation is an error, never a crash. */
    for (size_t cut = 0; cut < len; cut += len / 37 + 1) {
        write_bytes(bad, buf, cut);
        sf_status s = sf_checkpoint_open(bad, &st, &info);
        CHECK(s != SF_OK && st == NULL, "truncated at %zu accepted", cut);
    }
    /* A safetensors file that is not a checkpoint. */
    sf_st_writer *w = NULL;
    CHECK_OK(sf_st_writer_create(&w));
    int64_t shape[1] = {2};
    float v[2] = {1, 2};
    CHECK_OK(sf_st_writer_add(w, "x", SF_DT_F32, 1, shape, v));
    CHECK_OK(sf_st_writer_save(w, bad));
    sf_st_writer_free(w);
    sf_status s = sf_checkpoint_open(bad, &st, &info);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "not a spikefuse checkpoint"), "plain file: %s",
          sf_last_error());
    free(buf);
}

static void test_metrics(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    sf_metrics *m = NULL;
    CHECK_OK(sf_metrics_open(path, &m));
    for (int step = 1; step <= 5; step++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", step);
        CHECK_OK(sf_metrics_write(m, o));
        cJSON_Delete(o);
    }
    sf_metrics_close(m);
    FILE *f = fopen(path, "a");
    fputs("{\"step\":6,\"lo", f); /* a line cut short by a crash */
    fclose(f);
    CHECK_OK(sf_metrics_truncate(path, 3));
    char *text = NULL;
    CHECK_OK(sf_read_file(path, SIZE_MAX, &text, NULL));
    CHECK(text && strcmp(text, "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n") == 0, "truncated metrics: %s", text);
    free(text);
    char missing[512];
    snprintf(missing, sizeof missing, "%s/none.jsonl", dir);
    CHECK_OK(sf_metrics_truncate(missing, 3));
}

static int ignore_user_txt(const char *name) { return strcmp(name, "user.txt") == 0; }

static void test_dirs(const char *dir)
{
    char run[512], file[600];
    snprintf(run, sizeof run, "%s/runs/a/b", dir);
    CHECK_OK(sf_dir_create(run));
    CHECK_OK(sf_dir_create(run)); /* existing: fine */
    CHECK_OK(sf_dir_check_empty(run, NULL));
    snprintf(file, sizeof file, "%s/user.txt", run);
    write_bytes(file, "keep me", 7);
    sf_status s = sf_dir_check_empty(run, NULL);
    CHECK(s == SF_ERR_STATE && strstr(sf_last_error(), "not empty (it holds user.txt)"), "non-empty dir accepted: %s",
          sf_last_error());
    CHECK_OK(sf_dir_check_empty(run, ignore_user_txt));
    CHECK(access(file, F_OK) == 0, "the user's file must survive");
    char alias[600], other[600];
    snprintf(alias, sizeof alias, "%s/runs/./a/b/", dir);
    snprintf(other, sizeof other, "%s/runs/a", dir);
    CHECK(sf_same_dir(run, alias), "the same directory spelled another way");
    CHECK(!sf_same_dir(run, other), "different directories");
    sf_status nd = sf_dir_create(file);
    CHECK(nd != SF_OK, "a file is not a directory");

    char tmp[600], keep[600];
    snprintf(tmp, sizeof tmp, "%s/last.safetensors.tmp.AbC123", run);
    snprintf(keep, sizeof keep, "%s/notes.tmp.txt", run);
    write_bytes(tmp, "x", 1);
    write_bytes(keep, "x", 1);
    CHECK(sf_is_temp_of("last.safetensors.tmp.AbC123", "last.safetensors"), "a temporary of last.safetensors");
    CHECK(!sf_is_temp_of("best.safetensors.tmp.AbC123", "last.safetensors"), "another file's temporary");
    CHECK(!sf_is_temp_of("last.safetensors.tmp.AbC", "last.safetensors"), "too few random characters");
    CHECK(!sf_is_temp_of("last.safetensors", "last.safetensors"), "the file itself is no temporary");
    CHECK_OK(sf_remove_stale_temps(run));
    CHECK(access(tmp, F_OK) != 0, "stale temporary removed");
    CHECK(access(keep, F_OK) == 0, "other files kept");

    snprintf(file, sizeof file, "%s/atomic.txt", run);
    CHECK_OK(sf_write_file_atomic(file, "one", 3));
    CHECK_OK(sf_write_file_atomic(file, "two", 3));
    char *text = NULL;
    CHECK_OK(sf_read_file(file, SIZE_MAX, &text, NULL));
    CHECK(text && strcmp(text, "two") == 0, "atomic write content");
    free(text);
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    CHECK(stat(file, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask), "an atomic write gets the default mode");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/no/such/dir/file", run);
    sf_status s_missing = sf_write_file_atomic(missing, "x", 1);
    CHECK(s_missing == SF_ERR_IO && strstr(sf_last_error(), "temporary file"), "atomic write into a missing dir: %s",
          sf_last_error());
}

/* Whole-file reads: the size limit is exact, empty files are empty strings, gz reads plain files too. */
static void test_read_file(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/five.txt", dir);
    write_bytes(path, "12345", 5);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(sf_read_file(path, 5, &text, &len));
    CHECK(text && len == 5 && strcmp(text, "12345") == 0, "a file of exactly max_bytes is read");
    free(text);
    CHECK_OK(sf_read_file_gz(path, 5, &text, &len));
    CHECK(text && len == 5 && strcmp(text, "12345") == 0, "the gz reader reads a plain file as it is");
    free(text);
    sf_status s = sf_read_file(path, 4, &text, &len);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "larger than 4 bytes") && text == NULL,
          "one byte over max_bytes is refused: %s", sf_last_error());
    s = sf_read_file_gz(path, 4, &text, &len);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "larger than 4 bytes") && text == NULL,
          "one byte over max_bytes is refused by the gz reader: %s", sf_last_error());
    snprintf(path, sizeof path, "%s/empty.txt", dir);
    write_bytes(path, "", 0);
    CHECK_OK(sf_read_file(path, 0, &text, &len));
    CHECK(text && len == 0 && text[0] == 0, "an empty file is an empty string");
    free(text);
    snprintf(path, sizeof path, "%s/none.txt", dir);
    s = sf_read_file(path, 10, &text, &len);
    CHECK(s == SF_ERR_IO && strstr(sf_last_error(), "none.txt"), "a missing file is named: %s", sf_last_error());
}

/* The byte offset of tensor `name`'s data in a safetensors file held in memory. */
static size_t tensor_offset(const char *buf, size_t len, const char *name)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | (uint8_t)buf[i];
    sf_safetensors *st = NULL;
    CHECK_OK(sf_safetensors_parse((const uint8_t *)buf, len, &st));
    const sf_st_entry *e = st ? sf_safetensors_find(st, name) : NULL;
    size_t off = e ? 8 + (size_t)hlen + e->offset : 0;
    sf_safetensors_free(st);
    return off;
}

/* A flipped bit in a tensor fails its CRC-32 and a NaN weight is refused, both naming the tensor. */
static void test_integrity(const char *dir)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/flipped.safetensors", dir);
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(sf_read_file(path, SIZE_MAX, &buf, &len));
    size_t off = buf ? tensor_offset(buf, len, "5.bias") : 0;
    CHECK(off > 0, "5.bias found");
    if (!off) return;
    buf[off + 2] ^= 0x10;
    write_bytes(bad, buf, len);
    free(buf);
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_status s = sf_checkpoint_open(bad, &st, &info);
    CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "tensor '5.bias' is damaged") && strstr(sf_last_error(), bad),
          "a flipped bit is found and named: %s", sf_last_error());
    sf_safetensors_free(st);

    sf_net *net = make_net(SF_OPT_ADAM, CLASSES);
    float w[3 * C * 3 * 3];
    CHECK_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, 0, w));
    w[4] = NAN;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, 0, w));
    sf_checkpoint_info nan_info = {.config = "[train]\n", .best_metric = -1, .best_step = -1};
    snprintf(bad, sizeof bad, "%s/nan.safetensors", dir);
    CHECK_OK(sf_checkpoint_save(net, &nan_info, bad));
    CHECK_OK(sf_checkpoint_open(bad, &st, &info)); /* the file itself is intact */
    sf_net *other = make_net(SF_OPT_ADAM, CLASSES);
    if (st) {
        s = sf_checkpoint_restore(st, other, 0);
        CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), "tensor '0.weight' holds nan at element 4"),
              "a NaN weight is refused: %s", sf_last_error());
    }
    sf_safetensors_free(st);
    sf_net_free(other);
    sf_net_free(net);
}

/* One holder at a time, named by its pid; the lock is free again once released. */
static void test_lock(const char *dir)
{
    char path[512], pid[64];
    snprintf(path, sizeof path, "%s/train.lock", dir);
    snprintf(pid, sizeof pid, "locked by process %ld", (long)getpid());
    int a = -1, b = -1;
    CHECK_OK(sf_lock_acquire(path, &a));
    sf_status s = sf_lock_acquire(path, &b);
    CHECK(s == SF_ERR_STATE && b == -1 && strstr(sf_last_error(), pid), "a second holder is refused: %s",
          sf_last_error());
    sf_lock_release(a);
    CHECK_OK(sf_lock_acquire(path, &b));
    sf_lock_release(b);
}

/* A directory is free for a new run when it holds nothing but what a run killed before its first checkpoint
 * leaves. */
static void test_run_dir_free(const char *dir)
{
    char run[512], file[600];
    snprintf(run, sizeof run, "%s/fresh", dir);
    CHECK(sf_run_dir_is_free(run), "a missing directory is free");
    CHECK_OK(sf_dir_create(run));
    snprintf(file, sizeof file, "%s/%s", run, SF_RUN_LOCK);
    write_bytes(file, "1\n", 2);
    snprintf(file, sizeof file, "%s/last.safetensors.tmp.Zq81xA", run);
    write_bytes(file, "x", 1);
    CHECK(sf_run_dir_is_free(run), "a lock file and a temporary of last.safetensors leave the directory free");
    snprintf(file, sizeof file, "%s/%s", run, SF_RUN_LAST);
    write_bytes(file, "x", 1);
    CHECK(!sf_run_dir_is_free(run), "a directory with a checkpoint holds a run");
    unlink(file);
    snprintf(file, sizeof file, "%s/notes.txt", run);
    write_bytes(file, "x", 1);
    CHECK(!sf_run_dir_is_free(run), "a directory with the user's files is not free");
    CHECK(!sf_run_dir_is_free(file), "a file is not a free directory");
}

/* A directory where a file should be is refused by name by every whole-file reader. */
static void test_read_directory(const char *dir)
{
    char *text = NULL;
    size_t len = 0;
    sf_status s = sf_read_file(dir, SIZE_MAX, &text, &len);
    CHECK(s == SF_ERR_IO && strstr(sf_last_error(), "is a directory, not a file") && !text, "plain: %s",
          sf_last_error());
    s = sf_read_file_gz(dir, SIZE_MAX, &text, &len);
    CHECK(s == SF_ERR_IO && strstr(sf_last_error(), "is a directory, not a file") && !text, "gz: %s", sf_last_error());
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    s = sf_checkpoint_open(dir, &st, &info);
    CHECK(s == SF_ERR_IO && strstr(sf_last_error(), "is a directory, not a file") && !st, "checkpoint: %s",
          sf_last_error());
    char copy[512];
    snprintf(copy, sizeof copy, "%s/copy.safetensors", dir);
    char src[512];
    snprintf(src, sizeof src, "%s/ck.safetensors", dir);
    CHECK_OK(sf_copy_file_atomic(src, copy));
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK_OK(sf_read_file(src, SIZE_MAX, &a, &na));
    CHECK_OK(sf_read_file(copy, SIZE_MAX, &b, &nb));
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0, "an atomic copy has the same bytes");
    free(a);
    free(b);
}

int main(void)
{
    char dir[] = "/tmp/sf_test_checkpoint.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    test_round_trip(dir);
    test_damaged(dir);
    test_metrics(dir);
    test_dirs(dir);
    test_read_file(dir);
    test_integrity(dir);
    test_lock(dir);
    test_run_dir_free(dir);
    test_read_directory(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_checkpoint");
}
