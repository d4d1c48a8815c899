/* test_cuda_archs.c — the rule by which a CUDA device is refused when the build has no kernels for it
 * (sf_cuda_archs_run_on, what src/backends checks each device against), on the CPU: machine code runs on later
 * minor versions of its major only, PTX on every later capability, an arch-specific build on its own alone, so the
 * default list (Ampere, Ada, Hopper machine code, Hopper PTX) takes an A100, an RTX 30/40, an L4, an H100 and newer
 * GPUs, and refuses a Turing T4; a Hopper-only build refuses an A100. */
#include "backends/backends.h"
#include "testutil.h"

int main(void)
{
    static const struct {
        const char *archs;
        int cc, runs;
    } cases[] = {
        {"80-real,86-real,89-real,90", 75, 0},  {"80-real,86-real,89-real,90", 80, 1},
        {"80-real,86-real,89-real,90", 86, 1},  {"80-real,86-real,89-real,90", 87, 1},
        {"80-real,86-real,89-real,90", 89, 1},  {"80-real,86-real,89-real,90", 90, 1},
        {"80-real,86-real,89-real,90", 100, 1}, {"80-real,86-real,89-real,90", 120, 1},
        {"90", 80, 0},                          {"90-real", 100, 0},
        {"90-virtual", 120, 1},                 {"90-virtual", 86, 0},
        {"86-real", 89, 1},                     {"89-real", 86, 0},
        {"90a-real", 90, 1},                    {"90a-real", 100, 0},
        {"all", 75, 1},                         {"", 75, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(sf_cuda_archs_run_on(cases[i].archs, cases[i].cc) == cases[i].runs,
              "kernels for %s on compute capability %d.%d: expected %s", cases[i].archs, cases[i].cc / 10,
              cases[i].cc % 10, cases[i].runs ? "runs" : "refused");
    return tu_finish("test_cuda_archs");
}
