/* error.h — recording failures: every failing library call sets a thread-local message and returns a status, with
 * sf_fail, sf_fail_context and SF_TRY, which programs use too (include/spikefuse.h). */
#ifndef SF_CORE_ERROR_H
#define SF_CORE_ERROR_H

#include "spikefuse.h"

#endif
