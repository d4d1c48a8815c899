/* interrupt.c — the process-wide request to stop (interrupt.h): one lock-free atomic flag, so that a signal handler
 * may set it and every thread may read it. */
#include "io/interrupt.h"

#include "core/error.h"

#include <stdatomic.h>

static atomic_int requested;

void sf_interrupt_request(void) { atomic_store_explicit(&requested, 1, memory_order_relaxed); }

int sf_interrupt_requested(void) { return atomic_load_explicit(&requested, memory_order_relaxed) != 0; }

void sf_interrupt_clear(void) { atomic_store_explicit(&requested, 0, memory_order_relaxed); }

sf_status sf_interrupt_check(void)
{
    return sf_interrupt_requested() ? sf_fail(SF_ERR_STATE, "interrupted (SIGINT or SIGTERM)") : SF_OK;
}
