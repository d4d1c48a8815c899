/* test_sew_connect.c — SEW-ResNet's connect functions as the backend computes them, against PyTorch's autograd in
 * float64 (tests/ref/gen_sew.py, sew_connect): AND a·b and IAND (1 − a)·b through connect_forward and
 * connect_backward, ADD a + b through add (its gradient is dy to both inputs), on spikes and on real values; a
 * backward that wants one gradient writes it alone, without the input it does not read. A small net whose
 * connect reads the network input (no gradient) trains alike in every memory mode. The whole networks are
 * test_net.c's sew_* cases. */
#include "cpu/cpu_backend.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 97

static void check_connect(sf_backend *be, const sf_safetensors *fx, const char *inputs, const char *name, sf_connect c)
{
    char key[64], what[96];
    snprintf(key, sizeof key, "%s.a", inputs);
    float *a = tu_get_f32(fx, key, N);
    snprintf(key, sizeof key, "%s.b", inputs);
    float *b = tu_get_f32(fx, key, N);
    float *dy = tu_get_f32(fx, "dy", N), y[N], da[N], db[N];
    if (c == SF_CONNECT_ADD) {
        CHECK_OK(be->add(be, N, a, b, y));
        memcpy(da, dy, sizeof da), memcpy(db, dy, sizeof db);
    } else {
        CHECK_OK(be->connect_forward(be, c, N, a, b, y));
        CHECK_OK(be->connect_backward(be, c, N, a, b, dy, da, db));
    }
    const char *outs[3] = {"y", "da", "db"};
    const float *got[3] = {y, da, db};
    for (int k = 0; k < 3; k++) {
        snprintf(key, sizeof key, "%s.%s.%s", inputs, name, outs[k]);
        double *ref = tu_get_f64(fx, key, N);
        snprintf(what, sizeof what, "%s %s", name, key);
        tu_expect_close(what, got[k], ref, N, 1e-7);
        free(ref);
    }
    if (c != SF_CONNECT_ADD) { /* one gradient alone: the other pointer NULL, the result the same */
        float only[N];
        CHECK_OK(be->connect_backward(be, c, N, a, NULL, dy, NULL, only));
        CHECK(memcmp(only, db, sizeof only) == 0, "%s %s: db alone differs", inputs, name);
        CHECK_OK(be->connect_backward(be, c, N, NULL, b, dy, only, NULL));
        CHECK(memcmp(only, da, sizeof only) == 0, "%s %s: da alone differs", inputs, name);
    }
    free(a), free(b), free(dy);
}

/* AND and IAND with the network's input as `from` (no gradient): the backward reads only that input, for the branch's
 * gradient, so the branch's spikes are kept for no one; a training step of conv -> BN -> LIF -> connect(·, input)
 * -> flatten -> linear runs in every memory mode with the same gradients bit for bit. */
static void check_input_shortcut(sf_connect c)
{
    const sf_memory_mode modes[3] = {SF_MEMORY_FULL, SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN};
    enum { T = 3, B = 2, C = 2, HW = 5, NX = T * B * C * HW * HW };
    float x[NX], *grads[3];
    int64_t n[3];
    for (int i = 0; i < NX; i++) x[i] = (float)((i * 7 + i / 5) % 3 == 0); /* input spikes */
    const int32_t labels[B] = {1, 3};
    for (int m = 0; m < 3; m++) {
        sf_net_params p;
        sf_net_default_params(&p);
        p.memory = modes[m];
        p.in_channels = C, p.in_height = p.in_width = HW;
        sf_net *net = NULL;
        CHECK_OK(sf_net_create(&p, &net));
        if (!net) return;
        tu_add_layer(net, SF_LAYER_CONV2D, C, 1);
        tu_add_layer(net, SF_LAYER_BATCHNORM, 0, 0);
        tu_add_layer(net, SF_LAYER_LIF, 0, 0);
        sf_layer_desc g;
        sf_layer_default_desc(SF_LAYER_ADD, &g);
        g.input2 = 0, g.connect = c;
        CHECK_OK(sf_net_add(net, &g, NULL));
        tu_add_layer(net, SF_LAYER_FLATTEN, 0, 0);
        tu_add_layer(net, SF_LAYER_LINEAR, 4, 0);
        CHECK_OK(sf_net_compile(net, T, B));
        sf_step_result r;
        CHECK_OK(sf_net_forward(net, x, 1));
        CHECK_OK(sf_net_loss(net, labels, &r));
        CHECK_OK(sf_net_backward(net));
        grads[m] = tu_net_read_role(net, SF_ROLE_GRAD, &n[m]);
        sf_net_free(net);
    }
    for (int m = 1; m < 3; m++)
        CHECK(n[m] == n[0] && memcmp(grads[m], grads[0], sizeof(float) * (size_t)n[0]) == 0,
              "%s with the input: %s gradients differ from full's", sf_connect_name(c), sf_memory_mode_name(modes[m]));
    double norm = 0.0;
    for (int64_t i = 0; i < n[0]; i++) norm += (double)grads[0][i] * grads[0][i];
    CHECK(norm > 0.0 && isfinite(norm), "%s with the input: gradients' squared norm %g", sf_connect_name(c), norm);
    for (int m = 0; m < 3; m++) free(grads[m]);
}

int main(void)
{
    sf_backend *be = NULL;
    CHECK_OK(sf_cpu_backend_create(&be));
    if (!be) return tu_finish("test_sew_connect");
    sf_safetensors *fx = tu_fixture("sew_connect.safetensors");
    const char *names[3] = {"add", "and", "iand"};
    const char *inputs[2] = {"spikes", "real"};
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 3; c++) check_connect(be, fx, inputs[i], names[c], (sf_connect)c);
    check_input_shortcut(SF_CONNECT_AND);
    check_input_shortcut(SF_CONNECT_IAND);
    float y[1];
    CHECK(be->connect_forward(be, SF_CONNECT_ADD, 1, y, y, y) == SF_ERR_INVALID, "connect_forward refuses add");
    CHECK(strstr(sf_last_error(), "connect_forward") != NULL, "the error names the op: %s", sf_last_error());
    CHECK(strcmp(sf_connect_name(SF_CONNECT_IAND), "iand") == 0, "sf_connect_name");
    sf_safetensors_free(fx);
    be->destroy(be);
    return tu_finish("test_sew_connect");
}
