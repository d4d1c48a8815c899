/* test_backend_ops.c — the backend op harness (tests/ops/) on the CPU: every fp32 row of the case table runs with
 * the CPU's tuned path on one side and its plain formulation on the other (the event-driven ops against the dense
 * ones, fused BN→neuron against BN then the neuron, the neuron in two pieces with the state carried against one call,
 * the masked and compact variants against the plain op and a packing on the host, the merge of statistics against
 * the statistics of the whole batch, ...), the families without one run the op twice and must agree to the bit,
 * every output poisoned first. Then the table must cover every op of core/backend_ops.h, and every op the CPU has
 * must have been called. The CUDA backend runs the same table against the CPU in tests/gpu/test_gpu_backend_ops.c. */
#include "cpu/cpu_backend.h"
#include "ops/op_harness.h"

#include <stdio.h>

int main(void)
{
    sf_backend *cpu = NULL;
    CHECK_OK(sf_cpu_backend_create(&cpu));
    if (!cpu) return tu_finish("test_backend_ops");
    op_harness h;
    op_harness_init(&h, cpu, cpu, SF_PRECISION_FP32, true);
    op_run_cases(&h, 0, 0);
    printf("cpu tuned against plain: worst relative error %.2e\n", h.worst);
    op_backend_free(cpu);
    op_coverage("test_backend_ops");
    return tu_finish("test_backend_ops");
}
