/* evaluate.h — one pass over an evaluation loader: test accuracy and the firing rate of every LIF layer. */
#ifndef SF_TRAIN_EVALUATE_H
#define SF_TRAIN_EVALUATE_H

#include "data/dataset.h"
#include "spikefuse.h"

#include <stdint.h>

typedef struct sf_eval_result {
    int64_t samples, correct;
    double accuracy;      /* correct / samples */
    float *firing_rates;  /* [num_rates]: mean spikes per neuron and step of each LIF layer, weighted by samples */
    int32_t num_rates;
    double seconds;
} sf_eval_result;

/* Runs the rest of the loader's current epoch (it must be an evaluation loader, compiled shapes equal to the
 * net's) through sf_net_eval_step. Only the `valid` samples of a partial last batch count. `classes` is the
 * number of readout outputs. With `stoppable`, a request to stop (io/interrupt.h) ends the pass between batches with
 * its error (a process alone: the processes of a job run the pass to its end together). Free the result with
 * sf_eval_result_free. */
sf_status sf_evaluate(sf_net *net, sf_loader *loader, int32_t classes, int stoppable, sf_eval_result *out);
void sf_eval_result_free(sf_eval_result *r);

/* Index of the largest of n values (the first on ties). */
int32_t sf_argmax(const float *v, int32_t n);

#endif
