/* evaluate.c — test-set accuracy and firing rates, counted from the readout logits so that a partial last batch
 * contributes only its real samples. */
#include "spikefuse_train.h"

#include "core/error.h"
#include "io/interrupt.h"

#include <stdlib.h>
#include <string.h>

int32_t sf_argmax(const float *v, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

void sf_eval_result_free(sf_eval_result *r)
{
    if (!r) return;
    free(r->firing_rates);
    r->firing_rates = NULL;
    r->num_rates = 0;
}

sf_status sf_evaluate(sf_net *net, sf_loader *loader, int32_t classes, int stoppable, sf_eval_result *out)
{
    memset(out, 0, sizeof *out);
    double t0 = sf_now_seconds();
    int32_t nl = sf_net_firing_rates(net, NULL, 0);
    float *logits = NULL, *rates = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *rates);
    double *rate_sums = calloc((size_t)(nl > 0 ? nl : 1), sizeof *rate_sums);
    sf_status s = rates && rate_sums ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
    for (;;) {
        const sf_batch *b = NULL;
        if (s == SF_OK && stoppable) s = sf_interrupt_check();
        if (s == SF_OK) s = sf_loader_next(loader, &b);
        if (s != SF_OK || !b) break;
        if (!logits && !(logits = malloc((size_t)b->B * (size_t)classes * sizeof *logits))) {
            s = sf_fail(SF_ERR_NOMEM, "out of memory");
            break;
        }
        sf_step_result r;
        s = sf_net_eval_step(net, b->x, b->labels, &r);
        if (s == SF_OK) s = sf_net_logits(net, logits);
        if (s != SF_OK) break;
        for (int32_t i = 0; i < b->valid; i++)
            out->correct += sf_argmax(logits + (size_t)i * (size_t)classes, classes) == b->labels[i];
        out->samples += b->valid;
        sf_net_firing_rates(net, rates, nl);
        for (int32_t l = 0; l < nl; l++) rate_sums[l] += (double)rates[l] * b->valid;
    }
    free(logits);
    if (s != SF_OK) {
        free(rates);
        free(rate_sums);
        return s;
    }
    for (int32_t l = 0; l < nl; l++) rates[l] = out->samples ? (float)(rate_sums[l] / (double)out->samples) : 0.0f;
    free(rate_sums);
    out->firing_rates = rates;
    out->num_rates = nl > 0 ? nl : 0;
    out->accuracy = out->samples ? (double)out->correct / (double)out->samples : 0.0;
    out->seconds = sf_now_seconds() - t0;
    return SF_OK;
}
