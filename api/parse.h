/* parse.h: a job submission's JSON body into a job's request fields and packed input.
 * Pure function of its arguments; called on the HTTP thread that read the body. */
#ifndef GR_PARSE_H
#define GR_PARSE_H

#include "job.h"

/* Values that come apart from a JSON body (a stored dataset, a binary body): their dtype,
 * dimensions (0: a single value; 1; 2) and element count. */
struct gr_source {
    int dtype, ndim;
    int64_t shape[2]; /* dimensions past ndim are 1 */
    int64_t count;
};

/* "N" or "R,C" (a ?shape= query argument) into ndim and shape: GR_OK, GR_EINVAL (not whole
 * numbers separated by a comma) or GR_EUNPROC (a dimension under 1, more than 2, too large);
 * e->field is "shape". */
int gr_parse_dims(const char *text, int *ndim, int64_t shape[2], struct gr_err *e);

/* Fill j's op, dtype, ndim/shape, axis, ties_last, algorithm, device, input/input_bytes
 * from body. Returns GR_OK, GR_EINVAL (malformed, wrong type, unknown name: 400) or
 * GR_EUNPROC (well-formed but impossible: 422), with e->field naming the member. */
int gr_parse_job(const char *body, size_t len, struct gr_job *j, struct gr_err *e);

/* A benchmark request (POST /v1/benchmarks: op, dtype, n, algorithms, repeats, device) into
 * a job of kind GR_JOB_BENCH. Same codes as gr_parse_job. */
#define GR_BENCH_MAX_N (1LL << 28)
int gr_parse_benchmark(const char *body, size_t len, struct gr_job *j, struct gr_err *e);

#endif
