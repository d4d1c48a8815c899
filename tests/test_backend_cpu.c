/* test_backend_cpu.c — the CPU backend table: every op filled in, the memory ops (aligned allocation, copies,
 * zeroing) behave, the device dispatcher returns it, and an op called through the table computes. */
#include "backends/backends.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_layers.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void test_table(sf_backend *be)
{
#define FILLED(field) CHECK(be->field != NULL, "CPU backend: " #field " is not filled in")
    FILLED(alloc); FILLED(release); FILLED(copy_from_host); FILLED(copy_to_host); FILLED(copy); FILLED(zero);
    FILLED(sync); FILLED(destroy); FILLED(lif_forward); FILLED(lif_backward); FILLED(bn_stats); FILLED(bn_forward);
    FILLED(bn_backward); FILLED(bn_update_running); FILLED(bn_lif_forward); FILLED(bn_lif_backward);
    FILLED(linear_forward); FILLED(linear_backward); FILLED(conv_workspace); FILLED(conv_forward);
    FILLED(conv_backward); FILLED(avgpool_forward); FILLED(avgpool_backward); FILLED(maxpool_forward);
    FILLED(maxpool_backward); FILLED(dropout_forward); FILLED(dropout_backward); FILLED(add); FILLED(axpy);
    FILLED(u8_to_act); FILLED(act_to_u8); FILLED(leaky_forward); FILLED(leaky_backward); FILLED(softmax_xent);
    FILLED(sgd_step); FILLED(adam_step); FILLED(check_finite);
#undef FILLED
    CHECK(be->name && strcmp(be->name, "cpu") == 0, "backend name '%s'", be->name ? be->name : "(null)");
}

static void test_memory(sf_backend *be)
{
    const size_t sizes[] = {0, 1, 63, 64, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        void *p = NULL;
        CHECK_OK(be->alloc(be, sizes[k], &p));
        CHECK(p != NULL && ((uintptr_t)p & 63) == 0, "alloc(%zu) gave %p, not 64-byte aligned", sizes[k], p);
        be->release(be, p);
    }
    be->release(be, NULL); /* releasing NULL is a no-op */

    enum { N = 1001 };
    float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.5f - 3.0f;
    float *a = NULL, *b = NULL;
    CHECK_OK(be->alloc(be, sizeof host, (void **)&a));
    CHECK_OK(be->alloc(be, sizeof host, (void **)&b));
    CHECK_OK(be->copy_from_host(be, a, host, sizeof host));
    CHECK_OK(be->copy(be, b, a, sizeof host));
    CHECK_OK(be->sync(be));
    CHECK_OK(be->copy_to_host(be, back, b, sizeof back));
    CHECK(memcmp(back, host, sizeof host) == 0, "copy_from_host → copy → copy_to_host changed the data");
    CHECK_OK(be->zero(be, b + 1, sizeof(float) * (N - 2)));
    CHECK_OK(be->copy_to_host(be, back, b, sizeof back));
    int wrong = back[0] != host[0] || back[N - 1] != host[N - 1];
    for (int i = 1; i < N - 1; i++) wrong += back[i] != 0.0f;
    CHECK(wrong == 0, "zero touched the wrong range (%d values)", wrong);

    /* An op through the table: y = a + a, and an absurd allocation fails with a message instead of crashing. */
    CHECK_OK(be->add(be, N, a, a, b));
    CHECK_OK(be->copy_to_host(be, back, b, sizeof back));
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += back[i] != 2.0f * host[i];
    CHECK(wrong == 0, "add through the table: %d wrong values", wrong);
    /* The other element-wise helpers: y += alpha·x, spikes between float and byte form. */
    CHECK_OK(be->copy_from_host(be, b, host, sizeof host));
    CHECK_OK(be->axpy(be, N, -0.5f, a, b));
    CHECK_OK(be->copy_to_host(be, back, b, sizeof back));
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += back[i] != host[i] + -0.5f * host[i];
    CHECK(wrong == 0, "axpy through the table: %d wrong values", wrong);
    uint8_t *u8 = NULL;
    CHECK_OK(be->alloc(be, N, (void **)&u8));
    for (int i = 0; i < N; i++) host[i] = (float)(i % 3 == 0);
    CHECK_OK(be->copy_from_host(be, a, host, sizeof host));
    CHECK_OK(be->act_to_u8(be, N, a, u8));
    CHECK_OK(be->u8_to_act(be, N, u8, b));
    CHECK_OK(be->copy_to_host(be, back, b, sizeof back));
    wrong = 0;
    for (int i = 0; i < N; i++) wrong += u8[i] != (i % 3 == 0) || back[i] != host[i];
    CHECK(wrong == 0, "spikes float → byte → float: %d wrong values", wrong);
    be->release(be, u8);

    void *huge = NULL;
    CHECK(be->alloc(be, SIZE_MAX - 8, &huge) == SF_ERR_NOMEM && huge == NULL, "absurd allocation did not fail");
    CHECK(strstr(sf_last_error(), "allocate") != NULL, "allocation failure message: %s", sf_last_error());
    be->release(be, a);
    be->release(be, b);
}

int main(void)
{
    sf_backend *be = NULL;
    CHECK_OK(sf_cpu_backend_create(&be));
    if (be) {
        test_table(be);
        test_memory(be);
    }
    sf_backend_free(be);
    sf_backend_free(NULL);

    sf_backend *viadev = NULL;
    CHECK_OK(sf_backend_create((sf_device){.kind = SF_DEVICE_CPU, .index = 0}, SF_PRECISION_FP32, NULL, &viadev));
    CHECK(viadev && viadev->linear_forward == sf_cpu_op_linear_forward, "sf_backend_create(cpu) is not the CPU table");
    sf_backend_free(viadev);

    /* tf32, bf16 and fp16 are CUDA options: the CPU refuses them with a message that says so */
    for (sf_precision pr = SF_PRECISION_TF32; pr <= SF_PRECISION_FP16; pr++) {
        sf_backend *no = NULL;
        sf_status s = sf_backend_create((sf_device){.kind = SF_DEVICE_CPU, .index = 0}, pr, NULL, &no);
        CHECK(s == SF_ERR_UNSUPPORTED && !no, "CPU backend with precision %s: status %d", sf_precision_name(pr), s);
        CHECK(strstr(sf_last_error(), "fp32 only") != NULL, "message: %s", sf_last_error());
    }
    return tu_finish("test_backend_cpu");
}
