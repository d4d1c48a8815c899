/* gemm_cases.h — the linear and conv shapes the GPU op tests run in every precision (test_gpu_ops: fp32, tf32;
 * test_gpu_precision: bf16, fp16): odd sizes, one row, one channel; strided convolutions with odd sizes, with and
 * without padding; and one that the im2col + GEMM path runs in chunks of 9, 9, 9, 8 images under a 1 MiB workspace
 * cap. */
#ifndef SF_TESTS_GEMM_CASES_H
#define SF_TESTS_GEMM_CASES_H

#include <stddef.h>
#include <stdint.h>

static const struct {
    int64_t rows;
    int32_t in, out, bias, want_dx;
} gemm_linear_cases[] = {{37, 33, 17, 1, 1}, {1, 1, 1, 0, 1}, {640, 512, 10, 1, 0}};

static const struct {
    int64_t n;
    int32_t cin, h, w, cout, k, stride, pad, bias;
} gemm_conv_cases[] = {
    {3, 3, 9, 7, 5, 3, 1, 1, 1},     {2, 4, 8, 8, 6, 3, 2, 1, 0},    {1, 5, 5, 5, 3, 1, 1, 0, 1},
    {20, 16, 16, 16, 32, 3, 1, 1, 0}, {7, 5, 13, 11, 9, 3, 2, 1, 1}, {5, 3, 10, 9, 4, 3, 2, 0, 0},
    {3, 6, 9, 9, 8, 5, 3, 2, 1},     {35, 32, 15, 15, 64, 3, 2, 1, 1},
};

/* Runs a test's linear and conv checks over every case. */
static inline void gemm_cases_run(void (*linear)(int64_t rows, int32_t in, int32_t out, int bias, int want_dx),
                                  void (*conv)(int64_t n, int32_t cin, int32_t h, int32_t w, int32_t cout, int32_t k,
                                               int32_t stride, int32_t pad, int bias))
{
    for (size_t i = 0; i < sizeof gemm_linear_cases / sizeof gemm_linear_cases[0]; i++)
        linear(gemm_linear_cases[i].rows, gemm_linear_cases[i].in, gemm_linear_cases[i].out, gemm_linear_cases[i].bias,
               gemm_linear_cases[i].want_dx);
    for (size_t i = 0; i < sizeof gemm_conv_cases / sizeof gemm_conv_cases[0]; i++)
        conv(gemm_conv_cases[i].n, gemm_conv_cases[i].cin, gemm_conv_cases[i].h, gemm_conv_cases[i].w,
             gemm_conv_cases[i].cout, gemm_conv_cases[i].k, gemm_conv_cases[i].stride, gemm_conv_cases[i].pad,
             gemm_conv_cases[i].bias);
}

#endif
