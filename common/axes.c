/* axes.c: reductions over any axes as passes (axes.h). */
#include "common/axes.h"

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

int gr_axes_plan(int ndim, const int64_t *shape, unsigned mask, struct gr_pass *passes)
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
    return np;
}

int gr_axes_next_op(int op) { return op == GR_COUNT_NONZERO ? GR_SUM : op; }
