/* parallel.h — when a CPU op is worth an OpenMP region: waking threads costs far more on a busy machine, so ops on
 * fewer elements run on the calling thread. Results do not depend on it (same bits for any thread count). */
#ifndef SF_CPU_PARALLEL_H
#define SF_CPU_PARALLEL_H

#include <stdint.h>

#define SF_CPU_PARALLEL_MIN ((int64_t)1 << 16)

#endif
