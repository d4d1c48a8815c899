
/* testutil.c — implementation of the test helpers. */
#include "testutil.h"

#include "config/config.h"

#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tu_checks, tu_failures;

sf_safetensors *tu_fixture(const char *file)
{
    const char *dir = getenv("SF_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "fixtures", file);
    sf_safetensors *st = NULL;
    if (sf_safetensors_load(path, &st) != SF_OK) {
        fprintf(stderr, "cannot load fixture %s: %s\n(fixtures are written by tests/ref/generate_all.sh; run ctest)\n",
                path, sf_last_error());
        exit(2);
    }
    return st;
}

static void *must_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

float *tu_get_f32(const sf_safetensors *st, const char *name, int64_t numel)
{
    float *p = must_alloc((size_t)numel * sizeof *p);
    if (sf_safetensors_get_f32(st, name, p, numel) != SF_OK) {
        fprintf(stderr, "fixture: %s\n", sf_last_error());
        exit(2);
    }
    return p;
}

double *tu_get_f64(const sf_safetensors *st, const char *name, int64_t numel)
{
    double *p = must_alloc((size_t)numel * sizeof *p);
    if (sf_safetensors_get_f64(st, name, p, numel) != SF_OK) {
        fprintf(stderr, "fixture: %s\n", sf_last_error());
        exit(2);
    }
    return p;
}

double tu_rel_err(const float *got, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}

double tu_rel_err_f32(const float *got, const float *ref, int64_t n)
{
    double *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    for (int64_t i = 0; i < n; i++) r[i] = ref[i];
    double e = tu_rel_err(got, r, n);
    free(r);
    return e;
}

void tu_expect_close(const char *what, const float *got, const double *ref, int64_t n, double tol)
{
    double e = tu_rel_err(got, ref, n);
    CHECK(e <= tol, "%s: relative error %.3g > %.3g", what, e, tol);
}

void tu_expect_close_f64(const char *what, const double *got, const double *ref, int64_t n, double tol)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double e = sqrt(num) / fmax(sqrt(den), 1e-30);
    CHECK(e <= tol, "%s: relative error %.3g > %.3g", what, e, tol); /* NaN fails too */
}

int64_t tu_count_diff(const float *got, const double *ref, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) k += (double)got[i] != ref[i];
    return k;
}

void tu_randn(float *x, int64_t n, float mean, float std, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        double u1 = (sf_uniform(seed, 1, (uint64_t)i) + 0.5 / 16777216.0), u2 = sf_uniform(seed, 2, (uint64_t)i);
        x[i] = mean + std * (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

void tu_lif_params_of(const double *v, sf_lif_params *p)
{
    sf_lif_default_params(p);
    p->tau = (float)v[0];
    p->decay = (float)v[1];
    p->decay_input = (int32_t)v[2];
    p->v_threshold = (float)v[3];
    p->v_reset = (float)v[4];
    p->soft_reset = (int32_t)v[5];
    p->detach_reset = (int32_t)v[6];
    p->surrogate = (sf_surrogate)(int)v[7];
    p->alpha = (float)v[8];
    p->use_grad_threshold = (int32_t)v[9];
    p->grad_threshold = (float)v[10];
    p->model = (sf_neuron_model)(int)v[11];
    p->per_channel = (int32_t)v[12];
    p->rho = (float)v[13];
    p->tau_adapt = (float)v[14];
    p->beta = (float)v[15];
    p->grad_cut = (int32_t)v[16];
}

void tu_add_layer(sf_net *net, sf_layer_kind kind, int32_t n, int32_t stride)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    if (kind == SF_LAYER_CONV2D) d.out_channels = n, d.kernel = 3, d.padding = 1, d.stride = stride ? stride : 1;
    if (kind == SF_LAYER_LINEAR) d.out_features = n;
    if (kind == SF_LAYER_MAXPOOL2D) d.kernel = 2, d.stride = 2;
    if (kind == SF_LAYER_DROPOUT) d.dropout_p = 0.2f;
    CHECK_OK(sf_net_add(net, &d, NULL));
}

void tu_add_sew_blocks(sf_net *net, const sf_layer_desc *neuron, sf_connect first, sf_connect second)
{
    sf_layer_desc c, g;
    sf_layer_default_desc(SF_LAYER_CONV2D, &c);
    sf_layer_default_desc(SF_LAYER_ADD, &g);
    c.out_channels = 4, c.kernel = 3, c.padding = 1, c.bias = 0;
    for (int k = 0; k < 3; k++) {
        CHECK_OK(sf_net_add(net, &c, NULL));
        tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
        CHECK_OK(sf_net_add(net, neuron, NULL));
    }
    g.input2 = 3, g.connect = first;
    CHECK_OK(sf_net_add(net, &g, NULL));
    sf_layer_desc down = c, strided = c;
    down.out_channels = 6, down.kernel = 1, down.padding = 0, down.stride = 2;
    strided.out_channels = c.out_channels = 6, strided.stride = 2, strided.input = 10;
    const sf_layer_desc *convs[3] = {&down, &strided, &c};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(sf_net_add(net, convs[k], NULL));
        tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
        CHECK_OK(sf_net_add(net, neuron, NULL));
    }
    g.input2 = 13, g.connect = second;
    CHECK_OK(sf_net_add(net, &g, NULL));
}

float *tu_net_read_role(sf_net *net, sf_tensor_role role, int64_t *n)
{
    sf_tensor_info info;
    *n = 0;
    for (int32_t i = 0; i < sf_net_tensor_count(net, role); i++) {
        CHECK_OK(sf_net_tensor_info(net, role, i, &info));
        *n += info.numel;
    }
    float *all = must_alloc((size_t)*n * sizeof *all), *at = all;
    for (int32_t i = 0; i < sf_net_tensor_count(net, role); i++) {
        CHECK_OK(sf_net_tensor_info(net, role, i, &info));
        CHECK_OK(sf_net_tensor_read(net, role, i, at));
        at += info.numel;
    }
    return all;
}

void tu_seed_neuron(sf_lif_params *p, int grad_mode, float theta)
{
    sf_lif_default_params(p);
    p->surrogate = SF_SURROGATE_FAST_SIGMOID;
    p->alpha = 10.0f;
    p->detach_reset = 1;
    p->use_grad_threshold = grad_mode > 0;
    p->grad_threshold = theta;
    p->grad_cut = grad_mode == 2;
}

/* One forward, loss and backward on the fixture's x and labels: the loss within 1e-5, every gradient within 1e-4
 * (those PyTorch has at ~0, a bias before a BN, below 1e-6) and the BN buffers after the step within 1e-5. */
void tu_check_fixture_step(sf_net *net, const sf_safetensors *fx, int64_t nx, const char *what_step)
{
    float *x = tu_get_f32(fx, "x", nx);
    const sf_st_entry *le = sf_safetensors_find(fx, "labels");
    int32_t labels[64];
    memcpy(labels, fx->data + le->offset, le->nbytes);
    sf_step_result r;
    CHECK_OK(sf_net_forward(net, x, 1));
    CHECK_OK(sf_net_loss(net, labels, &r));
    CHECK_OK(sf_net_backward(net));
    double *loss = tu_get_f64(fx, "loss", 1);
    CHECK(fabs(r.loss - loss[0]) <= 1e-5 * fabs(loss[0]), "%s: loss %.8f vs %.8f", what_step, r.loss, loss[0]);
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_GRAD); i++) {
        sf_tensor_info info;
        sf_net_tensor_info(net, SF_ROLE_GRAD, i, &info);
        float *g = malloc((size_t)info.numel * sizeof *g);
        CHECK_OK(sf_net_tensor_read(net, SF_ROLE_GRAD, i, g));
        double *ref = tu_get_f64(fx, info.name, info.numel);
        char what[128];
        snprintf(what, sizeof what, "%s %s", what_step, info.name);
        double ref_norm = 0, got_max = 0;
        for (int64_t k = 0; k < info.numel; k++) {
            ref_norm += ref[k] * ref[k];
            got_max = fmax(got_max, fabs(g[k]));
        }
        if (sqrt(ref_norm) < 1e-9) /* a conv bias before a BN: zero in exact arithmetic, rounding noise here */
            CHECK(got_max < 1e-6, "%s: expected ~0, max |g| = %g", what, got_max);
        else
            tu_expect_close(what, g, ref, info.numel, 1e-4);
        free(g);
        free(ref);
    }
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_BUFFER); i++) {
        sf_tensor_info info;
        sf_net_tensor_info(net, SF_ROLE_BUFFER, i, &info);
        float *b = malloc((size_t)info.numel * sizeof *b);
        CHECK_OK(sf_net_tensor_read(net, SF_ROLE_BUFFER, i, b));
        char name[80];
        snprintf(name, sizeof name, "%s.after1", info.name);
        double *ref = tu_get_f64(fx, name, info.numel);
        tu_expect_close(name, b, ref, info.numel, 1e-5);
        free(b);
        free(ref);
    }
    free(x);
    free(loss);
}

void tu_check_losses(sf_net *net, const sf_safetensors *fx, int64_t nx, const char *what)
{
    float *x = tu_get_f32(fx, "x", nx);
    const sf_st_entry *le = sf_safetensors_find(fx, "labels");
    int32_t labels[64];
    CHECK(le && le->nbytes <= sizeof labels, "%s: fixture labels", what);
    if (!le || le->nbytes > sizeof labels) return;
    memcpy(labels, fx->data + le->offset, le->nbytes);
    double *losses = tu_get_f64(fx, "losses", 10);
    for (int k = 0; k < 10; k++) {
        sf_step_result r;
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
        CHECK(fabs(r.loss - losses[k]) <= 1e-4 * fabs(losses[k]) + 1e-6, "%s step %d: loss %.7f vs %.7f", what, k,
              r.loss, losses[k]);
    }
    free(x);
    free(losses);
}

void tu_load_params(sf_net *net, const sf_safetensors *fx)
{
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_PARAM); i++) {
        sf_tensor_info info;
        CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, i, &info));
        float *v = tu_get_f32(fx, info.name, info.numel);
        CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, i, v));
        free(v);
    }
}

void tu_expect_config_error(const char *text, int line, const char *needle)
{
    sf_config *cfg = NULL;
    sf_status s = sf_config_parse_string(text, "bad.ini", &cfg);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bad.ini:%d: ", line);
    CHECK(s == SF_ERR_INVALID && cfg == NULL, "status %s for:\n%s", sf_status_str(s), text);
    CHECK(strncmp(sf_last_error(), prefix, strlen(prefix)) == 0, "message '%s' does not start with '%s'",
          sf_last_error(), prefix);
    CHECK(strstr(sf_last_error(), needle) != NULL, "message '%s' lacks '%s'", sf_last_error(), needle);
    sf_config_free(cfg);
}

int tu_finish(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, tu_checks - tu_failures, tu_failures);
    return tu_failures ? 1 : 0;
}
