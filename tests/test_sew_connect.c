/* test_sew_connect.c — SEW-ResNet's connect functions as the backend computes them, against PyTorch's autograd in
 * float64 (tests/ref/gen_sew.py, sew_connect): AND a·b and IAND (1 − a)·b through connect_forward and
 * connect_backward, ADD a + b through add (its gradient is dy to both inputs), on spikes and on real values; a
 * backward that wants one gradient writes it alone, without the input it does not read. The whole networks are
 * test_net.c's sew_* cases. */
#include "cpu/cpu_backend.h"
#include "testutil.h"

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
    float y[1];
    CHECK(be->connect_forward(be, SF_CONNECT_ADD, 1, y, y, y) == SF_ERR_INVALID, "connect_forward refuses add");
    CHECK(strstr(sf_last_error(), "connect_forward") != NULL, "the error names the op: %s", sf_last_error());
    CHECK(strcmp(sf_connect_name(SF_CONNECT_IAND), "iand") == 0, "sf_connect_name");
    sf_safetensors_free(fx);
    be->destroy(be);
    return tu_finish("test_sew_connect");
}
