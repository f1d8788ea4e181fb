/* axes.c: reductions over any axes as passes (axes.h). */
#include "common/axes.h"

#include <string.h>

/* Runs of adjacent axes reduced alike: sizes and whether each is reduced. */
struct runs {
    int n;
    int64_t size[GR_MAX_DIMS];
    int reduced[GR_MAX_DIMS];
};

static void merge(struct runs *r, int64_t size, int reduced)
{
    if (r->n && r->reduced[r->n - 1] == reduced) {
        r->size[r->n - 1] *= size;
        return;
    }
    r->size[r->n] = size;
    r->reduced[r->n++] = reduced;
}

/* Whether op's outputs reduce further to the same answer, as passes need: not a spread, nor a
 * mean over lanes of unequal counts. */
static int chains(int op)
{
    return op != GR_VAR && op != GR_STD && op != GR_NANVAR && op != GR_NANSTD && op != GR_NANMEAN && op != GR_PTP;
}

int gr_axes_plan(int ndim, const int64_t *shape, unsigned mask, int op, struct gr_pass *passes, int *gather)
{
    struct runs r = {0};
    for (int d = 0; d < ndim; d++)
        merge(&r, shape[d], (mask >> d) & 1u);
    int np = 0;
    for (;;) {
        int at = r.n - 1; /* the innermost run reduced */
        while (at >= 0 && !r.reduced[at])
            at--;
        if (at < 0)
            break;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < at; k++)
            outer *= r.size[k];
        for (int k = at + 1; k < r.n; k++)
            inner *= r.size[k];
        struct gr_pass *p = &passes[np++];
        if (r.n == 1)
            *p = (struct gr_pass){GR_AXIS_ALL, 1, 1, r.size[at]};
        else if (at == r.n - 1)
            *p = (struct gr_pass){1, 1, outer, r.size[at]};
        else
            *p = (struct gr_pass){0, outer, outer * r.size[at], inner};
        /* the run is gone: its neighbours, both kept, become one */
        struct runs next = {0};
        for (int k = 0; k < r.n; k++)
            if (k != at)
                merge(&next, r.size[k], r.reduced[k]);
        r = next;
    }
    if (!np) /* nothing reduced: each element is its own output */
        passes[np++] = (struct gr_pass){1, 1, r.n ? r.size[0] : 1, 1};
    *gather = np > 1 && !chains(op);
    if (*gather) { /* one pass over the gathered copy: kept x reduced */
        int64_t kept = 1, reduced = 1;
        for (int d = 0; d < ndim; d++)
            *(mask >> d & 1u ? &reduced : &kept) *= shape[d];
        passes[0] = (struct gr_pass){1, 1, kept, reduced};
        np = 1;
    }
    return np;
}

void gr_axes_gather(int ndim, const int64_t *shape, unsigned mask, size_t es, const void *in, void *out)
{
    int64_t n = 1, reduced = 1;
    for (int d = 0; d < ndim; d++) {
        n *= shape[d];
        if (mask >> d & 1u)
            reduced *= shape[d];
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, kept_at = 0, red_at = 0, kstride = 1, rstride = 1;
        for (int d = ndim - 1; d >= 0; d--) { /* i's index along d, from the last axis */
            int64_t at = rest % shape[d];
            rest /= shape[d];
            if (mask >> d & 1u)
                red_at += at * rstride, rstride *= shape[d];
            else
                kept_at += at * kstride, kstride *= shape[d];
        }
        memcpy((char *)out + (size_t)(kept_at * reduced + red_at) * es, (const char *)in + (size_t)i * es, es);
    }
}

int gr_axes_next_op(int op)
{
    return op == GR_COUNT_NONZERO || op == GR_NANSUM ? GR_SUM : op == GR_NANPROD ? GR_PROD : op;
}
