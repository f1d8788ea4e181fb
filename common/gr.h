/* gr.h: vocabulary shared by every module: status codes, errors, ops, dtypes, the
 * reduction and matrix-product requests and their results. Plain data; whoever holds a struct owns it. */
#ifndef GR_H
#define GR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* CUDA sources include this too */
#endif

/* Status codes (redis/curl style): functions return one and fill a struct gr_err. */
enum gr_code {
    GR_OK = 0,
    GR_EINVAL,    /* malformed request or parameter          -> 400 */
    GR_EUNAUTH,   /* missing or wrong bearer token           -> 401 */
    GR_ENOTFOUND, /* unknown id                              -> 404 */
    GR_EMETHOD,   /* method not allowed on this route        -> 405 */
    GR_ECONFLICT, /* state conflict (cancel a finished job)  -> 409 */
    GR_ETOOBIG,   /* body over the limit                     -> 413 */
    GR_EMEDIA,    /* unsupported Content-Type                -> 415 */
    GR_EUNPROC,   /* well-formed but impossible              -> 422 */
    GR_EFULL,     /* queue full                              -> 429 */
    GR_EUNAVAIL,  /* not ready, no such device               -> 503 */
    GR_ENOMEM,    /* out of host or GPU memory for this job  -> 507 */
    GR_ECUDA,     /* CUDA runtime error                      -> 500 */
    GR_EIO,       /* storage error                           -> 500 */
    GR_EINTERNAL, /* bug                                     -> 500 */
    GR_NCODES
};

struct gr_err {
    int code;
    char field[32]; /* request member the error is about, "" if none */
    char msg[256];
};

/* Fill e (if not NULL) and return code. */
int gr_fail(struct gr_err *e, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* e's field set to field (NULL: none), cut on a UTF-8 character boundary to fit. */
void gr_err_field(struct gr_err *e, const char *field);
int gr_http_status(int code);
const char *gr_code_title(int code); /* "Bad Request", ... */
const char *gr_code_slug(int code);  /* "invalid-request", used in problem "type" URIs */

/* GR_NOPS counts the reductions; the matrix product comes after them, so that loops and masks
 * over the reductions leave it out while names, the store and job listings know it. */
enum gr_op {
    GR_SUM, GR_PROD, GR_MIN, GR_MAX, GR_MEAN, GR_ARGMIN, GR_ARGMAX,
    GR_NANSUM, GR_NANMIN, GR_NANMAX, GR_COUNT_NONZERO, /* NumPy's: NaN skipped; elements not 0 */
    GR_VAR, GR_STD, /* with ddof */
    GR_NANMEAN, GR_NANPROD, GR_NANVAR, GR_NANSTD, GR_NANARGMIN, GR_NANARGMAX, GR_PTP, /* from nanmean: the CPU's only */
    GR_ANY, GR_ALL, /* 1 or 0 (int64): is a value, is every value, not 0 */
    GR_NOPS, GR_MATMUL = GR_NOPS
};
/* GR_BOOL is a result's dtype only (any, all): data, uploads and jobs take the GR_NDTYPES before it. */
enum gr_dtype { GR_INT32, GR_INT64, GR_FLOAT32, GR_FLOAT64, GR_NDTYPES, GR_BOOL = GR_NDTYPES };
#define GR_AXIS_ALL (-1)

const char *gr_op_name(int op);
const char *gr_dtype_name(int dtype);
int gr_op_parse(const char *s);    /* -1 if unknown */
int gr_dtype_parse(const char *s); /* -1 if unknown; an input dtype: never GR_BOOL */
int gr_result_dtype_parse(const char *s); /* the same, and "bool" */
size_t gr_dtype_size(int dtype);
int gr_dtype_is_float(int dtype);
int gr_op_is_arg(int op); /* argmin, argmax, nanargmin, nanargmax */
int gr_op_takes_ddof(int op); /* var, std, nanvar, nanstd */
int gr_op_takes_accumulate(int op); /* those NumPy gives dtype=: sums, products, means, spreads */

/* Output element kind of an op on a dtype: integer sums/products/min/max/ptp/arg values and every
 * count (and any, all) are int64 (an int32 sum must not wrap); other float results, every mean, var and std
 * (nan-ops too) are float64. */
int gr_result_is_int(int op, int dtype);

/* The dtype NumPy gives op's result on dtype, the values a backend gave (int64 or float64)
 * rounded to it: integer sums and products int64, min/max/ptp (and an arg op's value) the
 * input's, means and spreads of integers float64, float32 float32 (float64 with acc64:
 * "accumulate": "float64"), counts int64, any/all GR_BOOL. */
int gr_result_dtype(int op, int dtype, int acc64);

struct gr_pass;

/* A reduction to run. data is row-major rows x cols elements of dtype, little-endian.
 * 1-D inputs are rows = 1. axis GR_AXIS_ALL -> 1 output; 0 -> cols outputs; 1 -> rows.
 * groups > 1 (axis 0 only): the rows are that many groups of rows / groups, each reduced on
 * its own, groups x cols outputs: the middle axes of an N-D array (common/axes.h). */
struct gr_reduce_req {
    int op, dtype, axis;
    int ties_last; /* argmin/argmax: 1 = the last index of equal extremes wins */
    int64_t rows, cols;
    const void *data;      /* the values; NULL when fd gives them */
    const char *algorithm; /* "auto" or a variant name the backend lists */
    int fd;                /* > 0: read the values from this file (offset 0) rather than data */
    const char *dataset;   /* the dataset the values are ("" or NULL: none): a GPU's cache key */
    int lane;              /* which of the backend's lanes runs it (each lane: one worker thread) */
    int64_t groups;        /* 0 or 1: one */
    int ddof;              /* var, std: the divisor is the count less this (NumPy's ddof) */
    /* Passes run on this one's outputs where they lie (a backend with chains; common/axes.h), each
     * on the outputs of the one before it; r is then the last one's. NULL: none. */
    const struct gr_pass *then;
    int nthen;
};

/* out = alpha * a @ b + beta * c, all row-major and dense: a is m x k, b k x n, c and out m x n,
 * of dtype GR_FLOAT32 or GR_FLOAT64. c may be NULL only when beta == 0; as in BLAS, c is not read
 * when beta == 0 (a NaN there does not leak into out). out may be c itself. */
struct gr_mm_req {
    int dtype;
    int64_t m, n, k;
    double alpha, beta;
    const void *a, *b, *c;
    void *out;
    const char *algorithm; /* "auto", NULL, or a variant name of the backend that runs it */
    int streamed;          /* GPU: split a and c in row blocks over the streams */
};

/* n outputs; exactly one of i / f is set, by gr_result_is_int. index set for arg ops. dtype is
 * the values' own: GR_INT64 or GR_FLOAT64 as a backend gives them, narrower once rounded to it
 * (float32 values in f, int32 and bool ones in i). */
struct gr_result {
    int64_t n;
    int64_t *i;
    double *f;
    int64_t *index;
    int dtype;
};

int gr_result_alloc(struct gr_result *r, int64_t n, int is_int, int with_index, struct gr_err *e);
/* r's values rounded to dtype (gr_result_dtype's): float32 to the nearest float, int32 wrapped as
 * NumPy's int32 ptp wraps, bools 0 or 1. */
void gr_result_narrow(struct gr_result *r, int dtype);
void gr_result_free(struct gr_result *r);

/* Per-stage wall times in milliseconds; 0 for stages a backend does not have. */
struct gr_timings {
    double queue, h2d, kernel, d2h, total;
    double overlap; /* copies and kernels that ran at the same time (a streamed product); else 0 */
    int cache; /* GR_CACHE_*: whether the input came from the GPU's dataset cache */
};
enum { GR_CACHE_NONE, GR_CACHE_HIT, GR_CACHE_MISS };

/* Checked size arithmetic: return 0 and set *out, or -1 on overflow. */
int gr_mul_size(size_t a, size_t b, size_t *out);

/* This build: its version (CMake's project version), git commit ("-dirty" when built from
 * uncommitted changes, "unknown" outside git), CUDA toolkit version ("none": CPU only). */
extern const char gr_version[], gr_commit[], gr_cuda_version[];

double gr_now(void);     /* seconds since the epoch, wall clock */
double gr_mono_ms(void); /* monotonic milliseconds */

/* Where an idle thread would wait on cv (mu held) for work that bumps *count (written only with
 * __atomic builtins): the first time in a row (*spun 0) it lets mu go and watches *count for up
 * to GR_SPIN_MS instead, yielding the core to anything else runnable; after that it waits on cv.
 * Returns with mu held, for the caller to look at its queue again. Waking a sleeping thread
 * took tens of microseconds on the GPU hosts' virtual cores, a third of a small job's time
 * (PERFORMANCE.md); the window covers one client's next job. */
#define GR_SPIN_MS 0.25

/* The mutexes every small job takes (the jobs', the store queue's, the tenants'): adaptive, so a
 * thread that finds one held spins briefly before it sleeps in the kernel. Their holds are short
 * and sixteen HTTP threads, the lanes and the writer meet there; a sleep and wake-up each time
 * cost the H100 host a fifth of its small-job throughput (docs/PERFORMANCE.md). */
#define GR_MUTEX_INITIALIZER PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
void gr_mutex_init(pthread_mutex_t *mu);
void gr_idle_wait(pthread_cond_t *cv, pthread_mutex_t *mu, const unsigned *count, int *spun);

#ifdef __cplusplus
}
#endif

#endif
