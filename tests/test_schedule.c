/* test_schedule.c — sf_schedule_lr against PyTorch's StepLR and CosineAnnealingLR (tests/ref/gen_schedule.py). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

int main(void)
{
    sf_safetensors *fx = tu_fixture("schedule.safetensors");
    const int64_t epochs = 12;
    double *step = tu_get_f64(fx, "step", epochs), *cosine = tu_get_f64(fx, "cosine", epochs);
    sf_schedule_params p;

    sf_schedule_default_params(&p);
    for (int64_t e = 0; e < epochs; e++)
        CHECK(sf_schedule_lr(&p, 0.1f, e, epochs) == 0.1f, "constant schedule changed at epoch %lld", (long long)e);

    p.kind = SF_SCHEDULE_STEP;
    p.step_size = 3;
    p.gamma = 0.5f;
    for (int64_t e = 0; e < epochs; e++) {
        float lr = sf_schedule_lr(&p, 0.1f, e, epochs);
        CHECK(fabs(lr - step[e]) <= 1e-6 * step[e], "step epoch %lld: %g vs %g", (long long)e, lr, step[e]);
    }

    sf_schedule_default_params(&p);
    p.kind = SF_SCHEDULE_COSINE;
    p.min_lr = 1e-3f;
    for (int64_t e = 0; e < epochs; e++) {
        float lr = sf_schedule_lr(&p, 0.1f, e, epochs);
        CHECK(fabs(lr - cosine[e]) <= 1e-6 * cosine[e] + 1e-9, "cosine epoch %lld: %g vs %g", (long long)e, lr,
              cosine[e]);
    }
    free(step);
    free(cosine);
    sf_safetensors_free(fx);
    return tu_finish("test_schedule");
}
