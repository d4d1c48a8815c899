/* transformer.c — the shape checks of the spiking transformers' ops (core/transformer.h), one set for every
 * backend, so a bad shape gets the same message on each. */
#include "core/transformer.h"

#include "core/error.h"

#include <limits.h>
#include <stddef.h>

sf_status sf_token_shape_check(const char *op, const sf_token_shape *sh)
{
    if (!sh) return sf_fail(SF_ERR_INVALID, "%s: shape is NULL", op);
    if (sh->tb < 0 || sh->n < 1 || sh->d < 1)
        return sf_fail(SF_ERR_INVALID, "%s: shape tb=%lld n=%d d=%d: need tb >= 0 sets of n >= 1 tokens of d >= 1 "
                                       "channels",
                       op, (long long)sh->tb, (int)sh->n, (int)sh->d);
    return SF_OK;
}

sf_status sf_token_ld_check(const char *op, const char *name, int64_t ld, int32_t d)
{
    if (ld < d || ld > INT_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: %s = %lld: rows of %d channels need a stride of at least %d (and at most "
                                       "%d)",
                       op, name, (long long)ld, (int)d, (int)d, INT_MAX);
    return SF_OK;
}

sf_status sf_ssa_check(const char *op, const sf_token_shape *sh, int32_t heads, int64_t ld)
{
    SF_TRY(sf_token_shape_check(op, sh));
    if (heads < 1 || sh->d % heads != 0)
        return sf_fail(SF_ERR_INVALID, "%s: %d heads do not divide d = %d channels", op, (int)heads, (int)sh->d);
    return sf_token_ld_check(op, "ld", ld, sh->d);
}

sf_status sf_layernorm_check(const char *op, int64_t rows, int32_t d)
{
    if (rows < 0 || d < 1)
        return sf_fail(SF_ERR_INVALID, "%s: shape rows=%lld d=%d: need rows >= 0 and d >= 1", op, (long long)rows,
                       (int)d);
    return SF_OK;
}
