/* bench.h: the kernel variants of one backend side by side (POST /v1/benchmarks): each run
 * `repeats` times on the same generated data and checked against the CPU reference. Called
 * by the worker thread that owns the backend. */
#ifndef GR_BENCH_H
#define GR_BENCH_H

#include "backend.h"

struct gr_bench_row {
    char algorithm[32];
    double median_ms, gbps; /* kernel stage */
    int matched;            /* its answer equals the reference's (floats: within rounding) */
    char error[256];        /* why it did not run, "" when it did */
};

/* Run the variants named in algos (nalgos 0: every variant of b covering op/dtype over the
 * whole array) on n generated elements, on b's lane `lane`. *rows (malloc'd, caller frees) gets one row each.
 * Returns GR_OK, GR_EUNPROC (a named variant does not cover op/dtype), GR_EINVAL (unknown
 * name) or GR_ENOMEM; a variant that fails while running gets its error in its row. */
int gr_bench_run(struct gr_backend *b, int lane, struct gr_backend *ref, int op, int dtype, int64_t n, char (*algos)[32],
                 int nalgos, int repeats, struct gr_bench_row **rows, int *nrows, struct gr_err *e);

#endif
