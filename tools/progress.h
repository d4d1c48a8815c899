/* progress.h — how `spikefuse train` shows a run: on a terminal a live bar per epoch on stderr, otherwise one
 * line per epoch; in both cases a summary line at each epoch end. */
#ifndef SF_TOOLS_PROGRESS_H
#define SF_TOOLS_PROGRESS_H

#include "spikefuse_train.h"

#include <stdio.h>

typedef struct sf_progress {
    FILE *out;          /* stderr */
    int live;           /* redraw a bar in place (out is a terminal) */
    double last_draw;   /* when the bar was last redrawn */
    int bar_shown;      /* a bar is on the current line */
    const char *run_dir;
    const sf_config *cfg;
} sf_progress;

void sf_progress_init(sf_progress *p, const sf_config *cfg, const char *run_dir);
/* The trainer callback: renders the event; returns nonzero once Ctrl-C or SIGTERM was received. */
int sf_progress_event(const sf_train_event *ev, void *user);

#endif
