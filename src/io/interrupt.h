/* interrupt.h — the polling side of a request to stop (sf_interrupt_request, include/spikefuse_train.h): what the
 * library's long loops return when one was made. */
#ifndef SF_IO_INTERRUPT_H
#define SF_IO_INTERRUPT_H

#include "spikefuse_train.h"

/* SF_OK, or after a request SF_ERR_STATE "interrupted (SIGINT or SIGTERM)": what a polling loop returns. */
sf_status sf_interrupt_check(void);

#endif
