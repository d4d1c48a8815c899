/* parallel.h — when a CPU op is worth an OpenMP region. Waking the other threads costs microseconds on an idle
 * machine but milliseconds on a busy one (they must first be scheduled), so ops on fewer elements than this run on
 * the calling thread. Results do not depend on it: every op gives the same bits for any thread count. */
#ifndef SF_CPU_PARALLEL_H
#define SF_CPU_PARALLEL_H

#include <stdint.h>

#define SF_CPU_PARALLEL_MIN ((int64_t)1 << 16)

#endif
