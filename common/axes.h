/* axes.h: a reduction over any set of axes of an N-D array as passes the backends run, each over
 * (groups, rows, cols) with one of the three kernel shapes. Pure functions; no state. */
#ifndef GR_AXES_H
#define GR_AXES_H

#include "common/gr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GR_MAX_DIMS 8

/* One pass: rows x cols (x groups) values reduced along axis (GR_AXIS_ALL, 0 or 1), as
 * struct gr_reduce_req takes them. */
struct gr_pass {
    int axis;
    int64_t groups, rows, cols;
};

/* The passes that reduce op over the axes in mask (bit d: axis d) of an ndim-D array of shape,
 * innermost reduced axes first: adjacent axes reduced alike are merged, and each pass reduces one
 * run of reduced axes (outer x reduced x inner). Returns how many (1 to GR_MAX_DIMS / 2 + 1);
 * each pass after the first reduces the one before's outputs. An op whose outputs do not reduce
 * further (var, std, ptp, the nan-means and spreads) takes one pass instead, over a copy of the values gathered with the reduced
 * axes last (*gather set: gr_axes_gather). An array of one or two dimensions always takes one
 * pass over the values as they are. */
int gr_axes_plan(int ndim, const int64_t *shape, unsigned mask, int op, struct gr_pass *passes, int *gather);

/* The op that reduces a pass's outputs further: count_nonzero's counts are summed, and nansum's
 * and nanprod's partials reduced as plain sums and products, since a NaN among them came from
 * numbers (inf - inf, 0 * inf) and must stay. */
int gr_axes_next_op(int op);

/* in's values (es bytes each) of an ndim-D array of shape copied to out with the kept axes first
 * and the axes in mask last, each in its order: out is kept x reduced, row after row. */
void gr_axes_gather(int ndim, const int64_t *shape, unsigned mask, size_t es, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif
