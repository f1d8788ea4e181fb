/* gr.c: the shared vocabulary's tables and helpers (errors, ops, dtypes, results, time).
 * Stateless; safe from any thread. */
#include "common/gr.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    int http;
    const char *title, *slug;
} codes[GR_NCODES] = {
    [GR_OK] = {200, "OK", "ok"},
    [GR_EINVAL] = {400, "Bad Request", "invalid-request"},
    [GR_EUNAUTH] = {401, "Unauthorized", "unauthorized"},
    [GR_ENOTFOUND] = {404, "Not Found", "not-found"},
    [GR_EMETHOD] = {405, "Method Not Allowed", "method-not-allowed"},
    [GR_ECONFLICT] = {409, "Conflict", "conflict"},
    [GR_ETOOBIG] = {413, "Content Too Large", "too-large"},
    [GR_EMEDIA] = {415, "Unsupported Media Type", "unsupported-media-type"},
    [GR_EUNPROC] = {422, "Unprocessable Content", "unprocessable"},
    [GR_EFULL] = {429, "Too Many Requests", "queue-full"},
    [GR_EUNAVAIL] = {503, "Service Unavailable", "unavailable"},
    [GR_ENOMEM] = {507, "Insufficient Storage", "out-of-memory"},
    [GR_ECUDA] = {500, "Internal Server Error", "cuda-error"},
    [GR_EIO] = {500, "Internal Server Error", "storage-error"},
    [GR_EINTERNAL] = {500, "Internal Server Error", "internal-error"},
};

void gr_err_field(struct gr_err *e, const char *field)
{
    /* a name too long is cut on a character boundary: half a UTF-8 character is no JSON string */
    size_t n = field ? strlen(field) : 0;
    if (n >= sizeof e->field)
        for (n = sizeof e->field - 1; n > 0 && ((unsigned char)field[n] & 0xC0) == 0x80;)
            n--;
    memmove(e->field, field ? field : "", n);
    e->field[n] = 0;
}

int gr_fail(struct gr_err *e, int code, const char *field, const char *fmt, ...)
{
    if (!e)
        return code;
    e->code = code;
    gr_err_field(e, field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

static int code_ok(int code) { return code >= 0 && code < GR_NCODES; }
int gr_http_status(int code) { return code_ok(code) ? codes[code].http : 500; }
const char *gr_code_title(int code) { return code_ok(code) ? codes[code].title : "Internal Server Error"; }
const char *gr_code_slug(int code) { return code_ok(code) ? codes[code].slug : "internal-error"; }

static const char *op_names[GR_MATMUL + 1] = {"sum",    "prod",   "min",    "max",           "mean",  "argmin",
                                             "argmax", "nansum", "nanmin", "nanmax", "count_nonzero", "var", "std",
                                             "nanmean", "nanprod", "nanvar", "nanstd", "nanargmin", "nanargmax",
                                             "ptp", "any", "all", "matmul"};
static const char *dtype_names[GR_BOOL + 1] = {"int32", "int64", "float32", "float64", "bool"};
static const size_t dtype_sizes[GR_BOOL + 1] = {4, 8, 4, 8, 1};

static int lookup(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

const char *gr_op_name(int op) { return op >= 0 && op <= GR_MATMUL ? op_names[op] : "?"; }
const char *gr_dtype_name(int dt) { return dt >= 0 && dt <= GR_BOOL ? dtype_names[dt] : "?"; }
int gr_op_parse(const char *s) { return lookup(op_names, GR_MATMUL + 1, s); }
int gr_dtype_parse(const char *s) { return lookup(dtype_names, GR_NDTYPES, s); }
int gr_result_dtype_parse(const char *s) { return lookup(dtype_names, GR_BOOL + 1, s); }
size_t gr_dtype_size(int dt) { return dt >= 0 && dt <= GR_BOOL ? dtype_sizes[dt] : 0; }
int gr_dtype_is_float(int dt) { return dt == GR_FLOAT32 || dt == GR_FLOAT64; }
int gr_op_takes_ddof(int op) { return op == GR_VAR || op == GR_STD || op == GR_NANVAR || op == GR_NANSTD; }
int gr_op_is_arg(int op) { return op == GR_ARGMIN || op == GR_ARGMAX || op == GR_NANARGMIN || op == GR_NANARGMAX; }
static int is_real(int op)
{
    return op == GR_MEAN || op == GR_VAR || op == GR_STD || op == GR_NANMEAN || op == GR_NANVAR || op == GR_NANSTD;
}
int gr_op_takes_accumulate(int op)
{
    return is_real(op) || op == GR_SUM || op == GR_PROD || op == GR_NANSUM || op == GR_NANPROD;
}
int gr_result_is_int(int op, int dtype)
{
    return op == GR_COUNT_NONZERO || op == GR_ANY || op == GR_ALL || (!gr_dtype_is_float(dtype) && !is_real(op));
}

int gr_result_dtype(int op, int dtype, int acc64)
{
    if (op == GR_ANY || op == GR_ALL)
        return GR_BOOL;
    if (op == GR_COUNT_NONZERO)
        return GR_INT64;
    if (dtype == GR_FLOAT32)
        return acc64 && gr_op_takes_accumulate(op) ? GR_FLOAT64 : GR_FLOAT32;
    if (dtype == GR_FLOAT64)
        return GR_FLOAT64;
    return is_real(op) ? GR_FLOAT64 : gr_op_takes_accumulate(op) ? GR_INT64 : dtype;
}

void gr_result_narrow(struct gr_result *r, int dtype)
{
    if (dtype == GR_FLOAT32 && r->f) /* int64 and float64 values are theirs already: no pass */
        for (int64_t k = 0; k < r->n; k++)
            r->f[k] = (double)(float)r->f[k];
    else if (dtype == GR_INT32 && r->i)
        for (int64_t k = 0; k < r->n; k++)
            r->i[k] = (int32_t)(uint32_t)(uint64_t)r->i[k]; /* modulo 2^32, two's complement */
    else if (dtype == GR_BOOL && r->i)
        for (int64_t k = 0; k < r->n; k++)
            r->i[k] = r->i[k] != 0;
    r->dtype = dtype;
}

int gr_result_alloc(struct gr_result *r, int64_t n, int is_int, int with_index, struct gr_err *e)
{
    memset(r, 0, sizeof *r);
    if (n <= 0)
        return gr_fail(e, GR_EINTERNAL, NULL, "result of %lld elements", (long long)n);
    r->n = n;
    r->dtype = is_int ? GR_INT64 : GR_FLOAT64;
    if (is_int)
        r->i = malloc((size_t)n * sizeof *r->i);
    else
        r->f = malloc((size_t)n * sizeof *r->f);
    if (with_index)
        r->index = malloc((size_t)n * sizeof *r->index);
    if ((!r->i && !r->f) || (with_index && !r->index)) {
        gr_result_free(r);
        return gr_fail(e, GR_ENOMEM, NULL, "out of host memory for %lld results", (long long)n);
    }
    return GR_OK;
}

void gr_result_free(struct gr_result *r)
{
    free(r->i);
    free(r->f);
    free(r->index);
    memset(r, 0, sizeof *r);
}

int gr_mul_size(size_t a, size_t b, size_t *out)
{
    size_t p;
    if (__builtin_mul_overflow(a, b, &p))
        return -1;
    *out = p;
    return 0;
}

double gr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double gr_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void gr_mutex_init(pthread_mutex_t *mu)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
}

void gr_idle_wait(pthread_cond_t *cv, pthread_mutex_t *mu, const unsigned *count, int *spun)
{
    if (*spun) {
        pthread_cond_wait(cv, mu);
        return;
    }
    unsigned seen = __atomic_load_n(count, __ATOMIC_ACQUIRE);
    *spun = 1;
    pthread_mutex_unlock(mu);
    for (double until = gr_mono_ms() + GR_SPIN_MS;
         gr_mono_ms() < until && __atomic_load_n(count, __ATOMIC_ACQUIRE) == seen; sched_yield())
        ;
    pthread_mutex_lock(mu);
}
