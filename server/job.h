/* job.h: a job in memory: its request, input, state and result, and its JSON form.
 * Shared by the API threads, a worker and the store writer; mutable fields are guarded by
 * the jobs lock in jobs.c; everything else is fixed once the job is submitted. */
#ifndef GR_JOB_H
#define GR_JOB_H

#include "gr.h"

#include <jansson.h>

enum gr_status { GR_QUEUED, GR_RUNNING, GR_SUCCEEDED, GR_FAILED, GR_CANCELED, GR_NSTATUS };
const char *gr_status_name(int s);
int gr_status_parse(const char *s); /* -1 if unknown */
#define GR_TERMINAL(s) ((s) >= GR_SUCCEEDED)

struct gr_waiter;
struct gr_backend;
struct gr_bench_row;

enum gr_kind { GR_JOB_REDUCE, GR_JOB_BENCH };

struct gr_job {
    int refs; /* atomic */
    char id[24];

    /* the request (fixed) */
    int kind;
    int op, dtype, axis, ties_last;
    int ndim;
    int64_t shape[2]; /* ndim 1: shape[0] = n, shape[1] = 1 */
    char algorithm[32], device[16]; /* requested; replaced by what ran */
    void *input;
    size_t input_bytes;   /* the values' size, also of a dataset's (input NULL then) */
    char dataset[24];     /* "" or the dataset the values are in, mapped when the job runs */
    int dataset_pinned;   /* the job holds the dataset against DELETE (jobs lock) */
    struct gr_backend *backend; /* where it runs */
    int repeats, nalgos;        /* benchmark: n is shape[0]; nalgos 0 = every variant */
    char (*algos)[32];
    double created_at;

    /* state (jobs lock) */
    int status;    /* in memory */
    int committed; /* last status the store has committed; -1: not yet stored */
    double started_at, finished_at;
    struct gr_result result;
    struct gr_bench_row *rows; /* benchmark result */
    int nrows;
    struct gr_timings t;
    struct gr_err err; /* when failed */
    struct gr_waiter *waiters;
    struct gr_job *hnext, *qnext; /* in-flight table, queue */
};

/* A new job with one reference, a fresh time-ordered id, status queued. NULL if out of memory. */
struct gr_job *gr_job_new(void);
void gr_job_ref(struct gr_job *j);
void gr_job_unref(struct gr_job *j);

int64_t gr_job_rows(const struct gr_job *j);
int64_t gr_job_cols(const struct gr_job *j);

/* The job resource (API.md) as JSON text, malloc'd; NULL if out of memory. Caller holds the
 * jobs lock or otherwise knows the job is not changing. */
char *gr_job_render(const struct gr_job *j);

/* Rebuild a stored queued/running job from its doc and input (start-up recovery).
 * Returns GR_OK with *out (status queued) or GR_EINVAL when the doc is unreadable. */
int gr_job_restore(const char *id, const char *doc, const void *input, size_t bytes, struct gr_job **out,
                   struct gr_err *e);

/* RFC 3339 UTC with milliseconds into buf (>= 32 bytes). */
void gr_rfc3339(double t, char *buf, size_t len);

/* JSON number for a double; non-finite values become the strings "NaN", "Infinity",
 * "-Infinity" (JSON has no literal for them). */
json_t *gr_json_double(double v);

#endif
