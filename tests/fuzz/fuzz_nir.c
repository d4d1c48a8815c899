/* fuzz_nir.c — libFuzzer target for the NIR reader and importer. The input bytes are a small program that builds an
 * HDF5 file with libhdf5 (groups, numeric and string datasets of any shape and type, names drawn from NIR's
 * vocabulary), so every run is a well-formed HDF5 file with arbitrary content: what spikefuse's reader must judge.
 * (libhdf5's own parsing of corrupt bytes is libhdf5's; tests/test_nir.c checks truncated files.) The file is read
 * from memory, imported as a config when it reads (whose parameters must all be finite floats), and an imported
 * network is exported again. */
#include "config/config_nir.h"
#include "io/nir.h"

#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
    "node", "nodes", "type", "edges", "version", "metadata", "input", "output", "fc", "lif", "conv", "shape",
    "weight", "bias", "tau", "r", "v_leak", "v_threshold", "v_reset", "stride", "padding", "dilation", "groups",
    "kernel_size", "start_dim", "end_dim", "input_type", "scale", "dt", "x"};
static const char *const texts[] = {
    "NIRGraph", "Input", "Output", "Affine", "Linear", "Conv2d", "AvgPool2d", "Flatten", "LIF", "IF", "LI",
    "Scale", "CubaLIF", "SumPool2d", "same", "valid", "input", "output", "fc", "lif", "conv", "1.0.8", ""};
#define COUNT(a) (int)(sizeof(a) / sizeof(a[0]))

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static int next(reader *r) { return r->n ? (r->n--, *r->p++) : -1; }

/* A value: 0..4 (bytes below 100), 0..99 (100..199), -20..272.5 in steps of 7.5 (200..239), 1e-4..1.2e-3
 * (240..251), what no float32 holds: NaN, Inf, 1e39 (252..254), or 784 (255); 1 once the input is used up, so a
 * large array may end the program. */
static double small_value(reader *r)
{
    static const double unheld[3] = {NAN, INFINITY, 1e39};
    int b = next(r);
    if (b < 0) return 1;
    if (b < 100) return b % 5;
    if (b < 200) return b - 100;
    if (b < 240) return (b - 200) * 7.5 - 20;
    if (b >= 252 && b <= 254) return unheld[b - 252];
    return b == 255 ? 784 : 1e-4 * (b - 239);
}

static void put_numbers(hid_t loc, const char *name, reader *r)
{
    int kind = next(r), ndim = next(r);
    ndim = ndim < 0 ? 0 : ndim % 4;
    hsize_t dims[3];
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        int b = next(r);
        dims[d] = b < 0 ? 1 : b == 255 ? 784 : (hsize_t)(b % 12);
        n *= dims[d];
    }
    if (n > 65536) return;
    double *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = small_value(r);
    hid_t type = kind % 3 == 0 ? H5T_IEEE_F32LE : kind % 3 == 1 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
    hid_t sp = ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0) {
        H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(ds);
    }
    H5Sclose(sp);
    free(v);
}

/* Strings: a scalar, or an [n, 2] array (edges), variable or fixed length. */
static void put_strings(hid_t loc, const char *name, reader *r)
{
    int shape = next(r), fixed = next(r);
    hsize_t dims[2] = {shape < 0 ? 1 : (hsize_t)(shape % 6), 2};
    int ndim = shape < 0 || shape >= 128 ? 0 : 2;
    size_t n = ndim ? dims[0] * 2 : 1;
    const char *s[12];
    for (size_t i = 0; i < n; i++) {
        int b = next(r);
        s[i] = texts[(b < 0 ? 0 : b) % COUNT(texts)];
    }
    hid_t t = H5Tcopy(H5T_C_S1);
    char buf[12 * 16] = {0};
    const void *data = s;
    if (fixed >= 0 && fixed % 2) {
        H5Tset_size(t, 16);
        for (size_t i = 0; i < n; i++) strncpy(buf + 16 * i, s[i], 16);
        data = buf;
    } else {
        H5Tset_size(t, H5T_VARIABLE);
    }
    hid_t sp = ndim ? H5Screate_simple(2, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0) {
        H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
        H5Dclose(ds);
    }
    H5Sclose(sp);
    H5Tclose(t);
}

/* Ops, each followed by a name byte: 0 create or open a group and go into it, 1 leave it, 2 numbers (type, rank,
 * dimensions, values), 3 strings (shape: >= 128 a scalar, else [shape % 6, 2]; fixed-length when odd; text
 * indices), 4 a soft link to /node. */
static void build(hid_t file, reader *r)
{
    hid_t stack[8] = {file};
    int depth = 0;
    for (int op; (op = next(r)) >= 0;) {
        int b = next(r);
        const char *name = names[(b < 0 ? 0 : b) % COUNT(names)];
        hid_t loc = stack[depth];
        int exists = H5Lexists(loc, name, H5P_DEFAULT) > 0;
        if (exists && op % 5 != 1 && op % 5 != 0) continue;
        switch (op % 5) {
        case 0:
            if (depth < 7) {
                hid_t g = exists ? H5Gopen2(loc, name, H5P_DEFAULT)
                                 : H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                if (g >= 0) stack[++depth] = g;
            }
            break;
        case 1:
            if (depth > 0) H5Gclose(stack[depth--]);
            break;
        case 2: put_numbers(loc, name, r); break;
        case 3: put_strings(loc, name, r); break;
        case 4: H5Lcreate_soft("/node", loc, name, H5P_DEFAULT, H5P_DEFAULT); break;
        }
    }
    while (depth > 0) H5Gclose(stack[depth--]);
}

/* An imported network is exported again: its config builds, its parameters fit. */
static void reexport(const char *text, const sf_tensor_list *params)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    sf_nir_graph *g = NULL;
    if (sf_config_parse_string(text, "fuzz", &cfg) != SF_OK) __builtin_trap();
    if (sf_config_build_net(cfg, &net) != SF_OK) __builtin_trap();
    if (sf_net_compile(net, 1, 1) == SF_OK && sf_tensor_list_apply(params, net) == SF_OK) {
        sf_status s = sf_config_to_nir(cfg, net, 1e-4, &g);
        if (s != SF_OK && s != SF_ERR_UNSUPPORTED) __builtin_trap();
    }
    sf_nir_graph_free(g);
    sf_net_free(net);
    sf_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    hid_t file = H5Fcreate("/dev/null/fuzz-nir", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0) return 0;
    reader r = {data, size};
    build(file, &r);
    H5Fflush(file, H5F_SCOPE_GLOBAL);
    ssize_t n = H5Fget_file_image(file, NULL, 0);
    void *image = n > 0 ? malloc((size_t)n) : NULL;
    if (image && H5Fget_file_image(file, image, (size_t)n) != n) n = 0;
    H5Fclose(file);
    sf_nir_graph *g = NULL;
    if (image && n > 0 && sf_nir_read_memory(image, (size_t)n, "fuzz.nir", &g) == SF_OK) {
        char *text = NULL;
        sf_tensor_list params = {0};
        sf_nir_import_options o = {.source = "fuzz.nir", .dataset = -1};
        if (sf_config_from_nir(g, &o, &text, &params) == SF_OK) {
            /* what imports is what training and evaluation take: finite float32 parameters */
            for (int32_t i = 0; i < params.count; i++)
                for (int64_t k = 0; k < params.items[i].numel; k++)
                    if (!isfinite(params.items[i].data[k])) __builtin_trap();
            reexport(text, &params);
        }
        free(text);
        sf_tensor_list_free(&params);
        sf_nir_graph_free(g);
    }
    free(image);
    return 0;
}
