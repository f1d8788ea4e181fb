/* parse.h: a job submission (a JSON body, or query arguments and a binary body) into a job's
 * request fields and values. Pure functions of their arguments (a dataset is looked up through
 * the callback given); called on the HTTP thread that read the body. */
#ifndef GR_PARSE_H
#define GR_PARSE_H

#include "server/job.h"

/* Values that come apart from a JSON body (a stored dataset, a binary body): their dtype,
 * dimensions (0: a single value; 1 to GR_MAX_DIMS) and element count. */
struct gr_source {
    int dtype, ndim;
    int64_t shape[GR_MAX_DIMS]; /* dimensions past ndim are 1 */
    int64_t count;
};

/* "N", "R,C" or more (a ?shape= query argument) into ndim and shape: GR_OK, GR_EINVAL (not
 * whole numbers separated by commas) or GR_EUNPROC (a dimension under 1 or too large, more than
 * GR_MAX_DIMS); e->field is "shape". */
int gr_parse_dims(const char *text, int *ndim, int64_t shape[GR_MAX_DIMS], struct gr_err *e);

/* Look up the dataset a job names (id as sent): GR_OK with src and the job's hold on the
 * dataset taken (j->dataset, dataset_pinned); else the code (404 when there is none). */
typedef int (*gr_dataset_fn)(void *ctx, struct gr_job *j, const char *id, struct gr_source *src, struct gr_err *e);

/* Fill j's op, dtype, ndim/shape, axes, ties_last, algorithm, device and its values from body:
 * inline "data" (packed into input/input_bytes), or "dataset" (found through dataset; NULL
 * answers 422); "dtype" is then optional and "shape" a view of the dataset. Returns GR_OK,
 * GR_EINVAL (malformed, wrong type, unknown name: 400), GR_EUNPROC (well-formed but
 * impossible: 422) or what dataset returns, with e->field naming the member. */
int gr_parse_job(const char *body, size_t len, gr_dataset_fn dataset, void *ctx, struct gr_job *j, struct gr_err *e);

/* A batch: a JSON array of 1 to max job objects, each read as gr_parse_job reads a body, into
 * *out (malloc'd, *n new jobs). On failure nothing is kept (every dataset taken is let go) and
 * e says which item failed: field "[k].member", the message "job [k] of the batch: ...". A
 * body that is no array, or an empty one or one over max, is GR_EUNPROC. */
int gr_parse_batch(const char *body, size_t len, int max, gr_dataset_fn dataset, void *ctx, struct gr_job ***out,
                   int *n, struct gr_err *e);

/* Name item k of a batch in e (field "[k].field", message "job [k] of the batch: ..."). */
void gr_err_at(struct gr_err *e, int k);

/* A one-shot job: POST /v1/jobs?op=..[&dtype=][&shape=R,C][&axis=][&ties=][&algorithm=][&device=]
 * with the values as the body, raw little-endian (npy 0; ?dtype= required, ?shape= an optional
 * view) or a .npy (npy 1; its header gives dtype and shape). query holds the arguments as JSON
 * strings (changed here). On GR_OK the job keeps *body as its input (*body is set to NULL).
 * Returns the codes of gr_parse_job, GR_EMEDIA for a .npy dtype it cannot take. */
int gr_parse_binary_job(json_t *query, int npy, char **body, size_t len, struct gr_job *j, struct gr_err *e);

/* A benchmark request (POST /v1/benchmarks: op, dtype, n, algorithms, repeats, device) into
 * a job of kind GR_JOB_BENCH. Same codes as gr_parse_job. */
int gr_parse_benchmark(const char *body, size_t len, struct gr_job *j, struct gr_err *e);

#endif
