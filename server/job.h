/* job.h: a job in memory: its request, input, state and result (its document: job_doc.h).
 * Shared by the API threads, a worker and the store writer; mutable fields are guarded by
 * the jobs lock in jobs.c; everything else is fixed once the job is submitted. */
#ifndef GR_JOB_H
#define GR_JOB_H

#include "common/axes.h"
#include "common/gr.h"

#include <jansson.h>

enum gr_status { GR_QUEUED, GR_RUNNING, GR_SUCCEEDED, GR_FAILED, GR_CANCELED, GR_NSTATUS };
const char *gr_status_name(int s);
int gr_status_parse(const char *s); /* -1 if unknown */
#define GR_TERMINAL(s) ((s) >= GR_SUCCEEDED)

struct gr_waiter;
struct gr_backend;
struct gr_bench_row;
struct gr_store;

/* A result with more outputs than this is kept as datasets, not inline in the job resource. */
#define GR_RESULT_INLINE_MAX 4096

enum gr_kind { GR_JOB_REDUCE, GR_JOB_BENCH, GR_JOB_MATMUL };

/* A matmul operand (a, b, c): inline, its values at the job's input + off, or a dataset the job
 * holds against DELETE as it holds a reduction's (pinned: jobs lock). */
#define GR_MM_OPERANDS 3
extern const char *const gr_operand_names[GR_MM_OPERANDS]; /* "a", "b", "c": their JSON members */
struct gr_operand {
    int present;
    int64_t rows, cols;
    size_t off;
    char dataset[24]; /* "" when inline */
    int pinned;
};

struct gr_job {
    int refs; /* atomic */
    char id[24];
    char tenant[65];      /* whose it is (tokens.h) */
    char *idem_key;       /* the Idempotency-Key it was submitted with (malloc'd) or NULL */
    char idem_fp[65];     /* and that request's fingerprint */

    /* the request (fixed) */
    int kind;
    int op, dtype, ties_last, keepdims;
    unsigned axes;  /* a reduction's: bit d set, axis d reduced (every axis: the whole array) */
    int axis_null;  /* "axis" was null or absent (a 1-D array's axis 0 reduces it whole too) */
    int ddof;       /* var, std: the divisor is the count less this */
    int acc64;      /* "accumulate": "float64": a float32 sum, mean, spread... kept float64 */
    int ndim;
    int64_t shape[GR_MAX_DIMS]; /* dimensions past ndim are 1 */
    char algorithm[32], device[16]; /* requested; replaced by what ran */
    void *input;
    size_t input_bytes;   /* the values' size, also of a dataset's (input NULL then); matmul: inline operands' */
    char dataset[24];     /* "" or the dataset the values are in, mapped when the job runs */
    int dataset_pinned;   /* the job holds the dataset against DELETE (jobs lock) */
    struct gr_operand mm[GR_MM_OPERANDS]; /* matmul: a, b, c; the product is shape[0] x shape[1] */
    double alpha, beta;
    struct gr_backend *backend; /* where it runs */
    int offered;       /* shared store: inserted for the replicas to claim, first offer (store.h's gr_owner) */
    int deferred;      /* 1: submitted with Prefer: wait, so no one knows of it until it is answered: its one
                        * store write is its final state, or queued once its wait runs out (2: being
                        * written so); 0: stored (jobs lock) */
    char offer[96];
    int repeats, nalgos;        /* benchmark: n is shape[0]; nalgos 0 = every variant */
    char (*algos)[32];
    double created_at;

    /* state (jobs lock) */
    int status;    /* in memory */
    int counted;   /* held in its tenant's count of queued and running jobs until its final state is stored */
    int committed; /* last status the store has committed; -1: not yet stored; -2: refused; -3: another
                    * replica claimed it (its lease ran out here) */
    int refused;   /* why the store refused it (GR_ENOMEM: the disk is full) */
    int final_tries; /* writes of its final state the store refused so far */
    double stored_ms;  /* when the store's first commit of it was told (gr_mono_ms), 0 before */
    struct gr_job *retry_next; /* on a list of final states to write again (commits.c) */
    int64_t epoch; /* this replica's claim on it (store.h: fences a late final state), 1 at submit */
    double started_at, finished_at;
    char replica[96]; /* shared store: the replica that ran it */
    char *final_doc;  /* its JSON once final (malloc'd; jobs lock): answers send it as it was stored */
    struct gr_result result;
    /* a large result's datasets ("" when inline): the worker sets them before the final status */
    char result_dataset[24], indices_dataset[24];
    struct gr_bench_row *rows; /* benchmark result */
    int nrows;
    struct gr_timings t;
    int group;         /* jobs in the launch it ran in (queues.c's launch groups); 1: alone */
    struct gr_err err; /* when failed */
    struct gr_waiter *waiters;
    struct gr_job *hnext, *qnext; /* in-flight table, queue */
};

/* A new job with one reference, a fresh time-ordered id, status queued. NULL if out of memory. */
struct gr_job *gr_job_new(void);
/* How a job freed while it still holds datasets against DELETE (one refused before it was queued)
 * lets go of them: the job pipeline sets it before anything pins (jobs.h's gr_jobs_start). */
extern void (*gr_job_unpin)(const char *dataset);
void gr_job_ref(struct gr_job *j);
void gr_job_unref(struct gr_job *j);

/* The values as a matrix: the last dimension its columns, the ones before its rows. */
int64_t gr_job_rows(const struct gr_job *j);
int64_t gr_job_cols(const struct gr_job *j);
/* Whether a reduction reduces every axis: its whole array. */
int gr_job_whole(const struct gr_job *j);

/* A reduction's result shape into shape, as NumPy's: its ndim (0: one value), the reduced axes
 * gone, or kept as 1 with keepdims. */
int gr_job_result_shape(const struct gr_job *j, int64_t shape[GR_MAX_DIMS]);

/* A new job of t's op, dtype, ties, algorithm, device and tenant that reduces row r of t's 2-D
 * inline values whole (a copy of them); NULL when memory is out. */
struct gr_job *gr_job_row(const struct gr_job *t, int64_t r);

#endif
