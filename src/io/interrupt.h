/* interrupt.h — a request to stop, for the whole process: the command line's SIGINT/SIGTERM handler makes it (the
 * call is async-signal-safe), and the loops that may run long (reading a file, parsing a dataset's samples,
 * binning and caching them, evaluating) poll it and return, so that a run stops promptly from any phase and its
 * caller can leave everything as a clean interrupt does. */
#ifndef SF_IO_INTERRUPT_H
#define SF_IO_INTERRUPT_H

#include "spikefuse.h"

/* Records the request; safe in a signal handler and from any thread. */
void sf_interrupt_request(void);
/* Whether a request was made (and not cleared). */
int sf_interrupt_requested(void);
/* Forgets a request (a caller that has handled it and goes on, or a test). */
void sf_interrupt_clear(void);
/* SF_OK, or after a request SF_ERR_STATE "interrupted (SIGINT or SIGTERM)": what a polling loop returns. */
sf_status sf_interrupt_check(void);

#endif
