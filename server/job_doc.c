/* job_doc.c: a job's document (API.md's job resource) and a dataset's: rendered on every change
 * of state, stored as is and served as is, and a stored job rebuilt from its document at start-up;
 * the sha256 digests of dataset values. Rendering reads a job the caller keeps still (jobs lock);
 * stateless otherwise. */
#include "server/job_doc.h"

#include "common/buf.h"
#include "common/id.h"
#include "gpu/backend.h"
#include "gpu/bench.h"
#include "server/log.h"
#include "server/tokens.h"

#include <float.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void gr_rfc3339(double t, char *buf, size_t len)
{
    /* a second's date and time formatted once a thread: a job's resource names up to three */
    static _Thread_local time_t last = -1;
    static _Thread_local char head[32];
    time_t s = (time_t)t;
    if (s != last) {
        struct tm tm;
        gmtime_r(&s, &tm);
        if (!strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm))
            head[0] = '\0';
        last = s;
    }
    int ms = (int)((t - (double)s) * 1000.0);
    ms = ms < 0 ? 0 : ms > 999 ? 999 : ms;
    size_t n = strlen(head);
    if (len < n + sizeof ".000Z") {
        snprintf(buf, len, "%s", head);
        return;
    }
    memcpy(buf, head, n);
    char *p = buf + n;
    *p++ = '.', *p++ = (char)('0' + ms / 100), *p++ = (char)('0' + ms / 10 % 10), *p++ = (char)('0' + ms % 10);
    *p++ = 'Z', *p = '\0';
}

/* Bytes the job reads: a benchmark's generated input, a product's operands, else its values. */
static int64_t job_bytes(const struct gr_job *j)
{
    int64_t es = (int64_t)gr_dtype_size(j->dtype), n = 0;
    if (j->kind == GR_JOB_BENCH) /* n values, or the operands a and b, n x n each (bounded by gr_bench_fits) */
        return j->op == GR_MATMUL ? 2 * j->shape[0] * j->shape[0] * es : j->shape[0] * es;
    if (j->kind == GR_JOB_REDUCE)
        return (int64_t)j->input_bytes;
    for (int k = 0; k < GR_MM_OPERANDS; k++) /* each operand's size was checked when the job was made */
        n += j->mm[k].present ? j->mm[k].rows * j->mm[k].cols * es : 0;
    return n;
}

/* --- documents as text: written straight out, not built as jansson objects and dumped
 * (json_pack and json_dumps took 5.5 µs of a queued job's and 9.4 µs of a finished one's, a fifth of a
 * 100k batch's 202). The form is jansson's compact one with 17 digits, which it was before and
 * the docs show, and which the store's reads and jansson's parse keep. --- */

static void put(struct gr_buf *b, const char *s) { gr_buf_add(b, s, strlen(s)); }

/* A JSON string, escaped as jansson escapes (control characters, quote and backslash only). */
static void put_str(struct gr_buf *b, const char *s)
{
    gr_buf_add(b, "\"", 1);
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        gr_buf_add(b, run, (size_t)(s - run));
        if (!c)
            break;
        char esc[8];
        const char *short_form = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                               : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!short_form)
            snprintf(esc, sizeof esc, "\\u%04X", c); /* jansson's case */
        put(b, short_form ? short_form : esc);
        run = s + 1;
    }
    gr_buf_add(b, "\"", 1);
}

static void put_int(struct gr_buf *b, int64_t v)
{
    char d[24], *p = d + sizeof d;
    uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    gr_buf_add(b, p, (size_t)(d + sizeof d - p));
}

/* A finite double as jansson writes it with this many significant digits (17: every double
 * exactly): "%.*g", ".0" where that reads as an integer, and the exponent without '+' or
 * leading zeros; NaN and infinities as strings (JSON has no literal for them): "NaN",
 * "Infinity", "-Infinity". */
static void put_real_digits(struct gr_buf *b, double v, int digits)
{
    if (isnan(v) || isinf(v)) {
        put(b, isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    char d[40];
    int n = snprintf(d, sizeof d, "%.*g", digits, v);
    char *e = strchr(d, 'e');
    if (e) {
        char *from = e + 1 + (e[1] == '+' || e[1] == '-'), *to = e + 1 + (e[1] == '-');
        while (*from == '0' && from[1])
            from++;
        memmove(to, from, strlen(from) + 1);
        n = (int)strlen(d);
    } else if (!strchr(d, '.')) {
        memcpy(d + n, ".0", 3);
        n += 2;
    }
    gr_buf_add(b, d, (size_t)n);
}

static void put_real(struct gr_buf *b, double v) { put_real_digits(b, v, 17); }

/* A stage's time (ms) to 6 decimals, the trailing zeros dropped ("0.054359", "7.0"): a
 * nanosecond, finer than any clock the stages are timed with; "%.17g" printed digits no
 * measurement has, in a tenth more bytes per stored job, at five snprintf calls per render.
 * Others (negative, huge, not finite) as put_real. Rates derived from it: 6 significant digits. */
static void put_ms(struct gr_buf *b, double v)
{
    if (!(v >= 0 && v < 9e12)) {
        put_real(b, v);
        return;
    }
    uint64_t u = (uint64_t)llround(v * 1e6), frac = u % 1000000;
    put_int(b, (int64_t)(u / 1000000));
    char d[8] = ".000000";
    for (int k = 6; k > 0; k--, frac /= 10)
        d[k] = (char)('0' + frac % 10);
    int n = 7;
    while (n > 2 && d[n - 1] == '0')
        n--;
    gr_buf_add(b, d, (size_t)n);
}

static void put_time(struct gr_buf *b, double t)
{
    char at[40];
    if (t <= 0) {
        put(b, "null");
        return;
    }
    gr_rfc3339(t, at, sizeof at);
    put_str(b, at);
}

/* A member: ,"name": (the first has no comma). */
static void key(struct gr_buf *b, const char *name)
{
    gr_buf_add(b, ",\"", 2);
    put(b, name);
    gr_buf_add(b, "\":", 2);
}

/* The first member: {"name": */
static void open_key(struct gr_buf *b, const char *name)
{
    gr_buf_add(b, "{\"", 2);
    put(b, name);
    gr_buf_add(b, "\":", 2);
}

static void put_shape(struct gr_buf *b, int ndim, const int64_t *shape)
{
    put(b, "[");
    for (int d = 0; d < ndim; d++)
        put(b, d ? "," : ""), put_int(b, shape[d]);
    put(b, "]");
}

/* A float32 as NumPy's repr writes it: the fewest digits that read back as that float. From 6
 * (FLT_DIG) for a normal float: "%g" drops trailing zeros, and a normal float's spacing is far
 * finer than a 6-digit step, so fewer digits would read the same; a subnormal may need fewer. */
static void put_float32(struct gr_buf *b, double v)
{
    int digits = fabs(v) < FLT_MIN ? 1 : FLT_DIG;
    char d[40];
    while (digits < 9 && isfinite(v) && (snprintf(d, sizeof d, "%.*g", digits, v), strtof(d, NULL) != (float)v))
        digits++;
    put_real_digits(b, v, digits);
}

/* Output k in its dtype (r->dtype): an integer, true/false, or a real. */
static void put_value(struct gr_buf *b, const struct gr_result *r, int64_t k)
{
    if (r->i && r->dtype == GR_BOOL)
        put(b, r->i[k] ? "true" : "false");
    else if (r->i)
        put_int(b, r->i[k]);
    else if (r->dtype == GR_FLOAT32)
        put_float32(b, r->f[k]);
    else
        put_real(b, r->f[k]);
}

/* A real, or null where there is none (ok 0). */
static void put_real_or_null(struct gr_buf *b, int ok, double v)
{
    if (ok)
        put_real(b, v);
    else
        put(b, "null");
}

/* A download link: "/v1/datasets/ID/data" */
static void put_data_link(struct gr_buf *b, const char *dataset)
{
    put(b, "\"/v1/datasets/");
    put(b, dataset); /* an id: nothing to escape */
    put(b, "/data\"");
}

/* The table of a benchmark: each row's rate beside a baseline, for reductions GB/s against the
 * device's memory ceiling, for products GFLOP/s against the cublas row of the same run (none on
 * the CPU, or when cublas was not among the variants: then its percentage is null). */
static void put_bench(struct gr_buf *b, const struct gr_job *j)
{
    int mm = j->op == GR_MATMUL;
    double base = mm ? 0 : j->backend ? j->backend->info.ceiling_gbps : 0;
    for (int k = 0; mm && k < j->nrows; k++)
        if (!j->rows[k].error[0] && !strcmp(j->rows[k].algorithm, "cublas"))
            base = j->rows[k].rate;
    open_key(b, "rows"), put(b, "[");
    for (int k = 0; k < j->nrows; k++) {
        const struct gr_bench_row *r = &j->rows[k];
        int ran = !r->error[0];
        put(b, k ? "," : "");
        open_key(b, "algorithm"), put_str(b, r->algorithm);
        key(b, "median_ms"), put_real_or_null(b, ran, r->median_ms);
        key(b, mm ? "gflops" : "gbps"), put_real_or_null(b, ran, r->rate);
        key(b, mm ? "pct_of_cublas" : "pct_of_ceiling"), put_real_or_null(b, ran && base > 0, 100 * r->rate / base);
        key(b, "matched"), put(b, r->matched ? "true" : "false");
        key(b, "error");
        if (ran)
            put(b, "null");
        else
            put_str(b, r->error);
        put(b, "}");
    }
    put(b, "]");
    key(b, "reference"), put_str(b, gr_bench_reference(j->op, j->shape[0]));
    key(b, mm ? "cublas_gflops" : "ceiling_gbps"), put_real_or_null(b, base > 0, base);
    put(b, "}");
}

/* A result's values (or indices) from *at on as nested lists in its shape (ndim at least 1). */
static void put_nested_from(struct gr_buf *b, const struct gr_result *r, int ndim, const int64_t *shape, int indices,
                            int64_t *at)
{
    put(b, "[");
    for (int64_t i = 0; i < shape[0]; i++) {
        put(b, i ? "," : "");
        if (ndim > 1)
            put_nested_from(b, r, ndim - 1, shape + 1, indices, at);
        else if (indices)
            put_int(b, r->index[(*at)++]);
        else
            put_value(b, r, (*at)++);
    }
    put(b, "]");
}

static void put_nested(struct gr_buf *b, const struct gr_result *r, int ndim, const int64_t *shape, int indices)
{
    int64_t at = 0;
    put_nested_from(b, r, ndim, shape, indices, &at);
}

/* A result kept as datasets: where its values are, and links to download them; a product's
 * values inline as well when it is small (rows of j->result). */
static void put_kept(struct gr_buf *b, const struct gr_job *j)
{
    int mm = j->kind == GR_JOB_MATMUL;
    open_key(b, "dataset"), put_str(b, j->result_dataset);
    key(b, "shape");
    int64_t shape[GR_MAX_DIMS];
    if (mm)
        put_shape(b, 2, j->shape);
    else
        put_shape(b, gr_job_result_shape(j, shape), shape);
    key(b, "data"), put_data_link(b, j->result_dataset);
    if (mm && j->result.n)
        key(b, "values"), put_nested(b, &j->result, 2, j->shape, 0);
    if (j->indices_dataset[0]) {
        key(b, "indices_dataset"), put_str(b, j->indices_dataset);
        key(b, "indices_data"), put_data_link(b, j->indices_dataset);
    }
    key(b, "dtype"), put_str(b, gr_dtype_name(mm ? j->dtype : gr_result_dtype(j->op, j->dtype, j->acc64)));
    put(b, "}");
}

static void put_result(struct gr_buf *b, const struct gr_job *j)
{
    const struct gr_result *r = &j->result;
    if (j->kind == GR_JOB_BENCH) {
        put_bench(b, j);
        return;
    }
    if (j->result_dataset[0]) {
        put_kept(b, j);
        return;
    }
    int64_t shape[GR_MAX_DIMS];
    int ndim = gr_job_result_shape(j, shape);
    if (ndim == 0) {
        open_key(b, "value"), put_value(b, r, 0);
        if (r->index)
            key(b, "index"), put_int(b, r->index[0]);
    } else {
        open_key(b, "shape"), put_shape(b, ndim, shape);
        key(b, "values"), put_nested(b, r, ndim, shape, 0);
        if (r->index)
            key(b, "indices"), put_nested(b, r, ndim, shape, 1);
    }
    key(b, "dtype"), put_str(b, gr_dtype_name(r->dtype));
    put(b, "}");
}

/* A reduction's axes as a request gives them: null (every one; a list of all of them of an
 * array of 2 or more dimensions too), an axis, or a list. */
static void put_axes(struct gr_buf *b, const struct gr_job *j)
{
    int n = __builtin_popcount(j->axes);
    if (j->kind != GR_JOB_REDUCE || j->axis_null || (gr_job_whole(j) && j->ndim > 1)) {
        put(b, "null");
        return;
    }
    put(b, n > 1 ? "[" : "");
    for (int d = 0, k = 0; d < j->ndim; d++)
        if (j->axes >> d & 1u)
            put(b, k++ ? "," : ""), put_int(b, d);
    put(b, n > 1 ? "]" : "");
}

static void put_error(struct gr_buf *b, const struct gr_job *j)
{
    int code = j->err.code ? j->err.code : GR_EINTERNAL;
    open_key(b, "type"), put(b, "\"https://gpured.dev/problems/"), put(b, gr_code_slug(code)), put(b, "\"");
    key(b, "title"), put_str(b, gr_code_title(code));
    key(b, "status"), put_int(b, gr_http_status(code));
    key(b, "detail"), put_str(b, j->err.msg);
    if (j->err.field[0])
        key(b, "field"), put_str(b, j->err.field);
    put(b, "}");
}

static void put_operand(struct gr_buf *b, const struct gr_operand *x)
{
    const int64_t shape[2] = {x->rows, x->cols};
    open_key(b, "shape"), put_shape(b, 2, shape);
    if (x->dataset[0])
        key(b, "dataset"), put_str(b, x->dataset);
    put(b, "}");
}

/* b's text as a string of its own size, b freed (built with room: a 100k batch keeps 100k
 * documents, and room to spare in each was pages to fault in); NULL if memory ran out. */
static char *finish(struct gr_buf *b)
{
    char *doc = b->oom || !b->p ? NULL : malloc(b->len + 1);
    if (doc)
        memcpy(doc, b->p, b->len + 1);
    free(b->p);
    return doc;
}

char *gr_job_render_as(const struct gr_job *j, int status)
{
    struct gr_buf b = {.p = malloc(1024), .cap = 1024}; /* a job's is ~350 bytes: grown where not */
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    const struct gr_timings *t = &j->t;
    int done = status == GR_SUCCEEDED;
    put(&b, "{\"id\":");
    put_str(&b, j->id);
    key(&b, "tenant"), put_str(&b, j->tenant);
    key(&b, "status"), put_str(&b, gr_status_name(status));
    key(&b, "op"), put_str(&b, gr_op_name(j->op));
    key(&b, "dtype"), put_str(&b, gr_dtype_name(j->dtype));
    key(&b, "shape"), put_shape(&b, j->ndim, j->shape);
    key(&b, "axis"), put_axes(&b, j);
    key(&b, "ties"), put(&b, j->ties_last ? "\"last\"" : "\"first\"");
    key(&b, "keepdims"), put(&b, j->keepdims ? "true" : "false");
    if (gr_op_takes_ddof(j->op))
        key(&b, "ddof"), put_int(&b, j->ddof);
    if (j->acc64)
        key(&b, "accumulate"), put(&b, "\"float64\"");
    key(&b, "device"), put_str(&b, j->device);
    key(&b, "algorithm"), put_str(&b, j->algorithm);
    key(&b, "bytes"), put_int(&b, job_bytes(j));
    if (j->dataset[0]) { /* cache: whether a GPU's dataset cache held the values (null: no cache took part) */
        key(&b, "dataset"), put_str(&b, j->dataset);
        key(&b, "cache"), put(&b, t->cache == GR_CACHE_HIT ? "\"hit\"" : t->cache == GR_CACHE_MISS ? "\"miss\"" : "null");
    }
    if (j->replica[0])
        key(&b, "replica"), put_str(&b, j->replica);
    if (j->group > 1) /* ran in one launch with others: its stage times are its share of the launch's */
        key(&b, "launch_group"), put_int(&b, j->group);
    if (j->kind == GR_JOB_MATMUL) {
        for (int k = 0; k < GR_MM_OPERANDS; k++)
            if (j->mm[k].present)
                key(&b, gr_operand_names[k]), put_operand(&b, &j->mm[k]);
        key(&b, "alpha"), put_real(&b, j->alpha);
        key(&b, "beta"), put_real(&b, j->beta);
    }
    if (j->kind == GR_JOB_BENCH) {
        key(&b, "kind"), put(&b, "\"benchmark\"");
        key(&b, "algorithms"), put(&b, "[");
        for (int k = 0; k < j->nalgos; k++)
            put(&b, k ? "," : ""), put_str(&b, j->algos[k]);
        put(&b, j->nalgos ? "]" : "\"all\"]");
        key(&b, "repeats"), put_int(&b, j->repeats);
    }
    key(&b, "result");
    if (done)
        put_result(&b, j);
    else
        put(&b, "null");
    key(&b, "timings_ms");
    if (GR_TERMINAL(status)) {
        const char *names[] = {"queue", "h2d", "kernel", "d2h", "total", "overlap"};
        const double v[] = {t->queue, t->h2d, t->kernel, t->d2h, t->total, t->overlap};
        for (int k = 0; k < (j->kind == GR_JOB_MATMUL ? 6 : 5); k++) {
            put(&b, k ? ",\"" : "{\"");
            put(&b, names[k]);
            put(&b, "\":");
            put_ms(&b, v[k]);
        }
        put(&b, "}");
    } else {
        put(&b, "null");
    }
    /* throughput of the kernel stage alone: what the variant achieved on its input */
    key(&b, "gbps");
    if (done && t->kernel > 0 && j->kind == GR_JOB_REDUCE)
        put_real_digits(&b, (double)j->input_bytes / (t->kernel * 1e6), 6);
    else
        put(&b, "null");
    /* 2 m n k flops over the multiplies' time */
    key(&b, "gflops");
    if (done && t->kernel > 0 && j->kind == GR_JOB_MATMUL)
        put_real_digits(&b, 2.0 * (double)j->shape[0] * (double)j->shape[1] * (double)j->mm[0].cols / (t->kernel * 1e6), 6);
    else
        put(&b, "null");
    key(&b, "error");
    if (status == GR_FAILED)
        put_error(&b, j);
    else
        put(&b, "null");
    key(&b, "created_at"), put_time(&b, j->created_at);
    key(&b, "started_at"), put_time(&b, j->started_at);
    /* an end told as running (not durable yet) has no finish to show */
    key(&b, "finished_at"), put_time(&b, GR_TERMINAL(status) ? j->finished_at : 0);
    put(&b, "}");
    return finish(&b);
}

char *gr_job_render(const struct gr_job *j) { return gr_job_render_as(j, j->status); }

int gr_dataset_digest(void *sha, const void *data, size_t n) { return !EVP_DigestUpdate(sha, data, n); }

int gr_digest_hex(void *sha, char hex[GR_DIGEST_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!EVP_DigestFinal_ex(sha, md, &n) || 2 * n >= GR_DIGEST_HEX)
        return GR_EINTERNAL;
    for (unsigned k = 0; k < n; k++)
        snprintf(hex + 2 * k, 3, "%02x", md[k]);
    hex[2 * n] = 0;
    return GR_OK;
}

char *gr_dataset_render(const char *id, const char *tenant, int dtype, int ndim, const int64_t *shape, size_t bytes,
                        void *sha, const char *job)
{
    char hex[GR_DIGEST_HEX], created[40];
    if (sha && gr_digest_hex(sha, hex) != GR_OK)
        return NULL;
    gr_rfc3339(gr_now(), created, sizeof created);
    struct gr_buf b = {0};
    open_key(&b, "id"), put_str(&b, id);
    key(&b, "tenant"), put_str(&b, tenant);
    key(&b, "dtype"), put_str(&b, gr_dtype_name(dtype));
    key(&b, "shape"), put_shape(&b, ndim, shape);
    key(&b, "bytes"), put_int(&b, (int64_t)bytes);
    key(&b, "sha256");
    if (sha)
        put_str(&b, hex);
    else
        put(&b, "null");
    key(&b, "created_at"), put_str(&b, created);
    /* last_used_at: null until a job that read it ends; the store's reads fill it in */
    key(&b, "last_used_at"), put(&b, "null");
    if (job)
        key(&b, "job"), put_str(&b, job);
    put(&b, "}");
    return finish(&b);
}

static double parse_time(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec, &ms) != 7)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

/* A stored matmul job's operands (as render_operand wrote them), alpha and beta; inline operands
 * lie one after another in its input, *inline_bytes in all. -1 if the doc is not one. */
static int restore_operands(struct gr_job *j, json_t *o, size_t *inline_bytes)
{
    size_t total = 0, bytes;
    j->kind = GR_JOB_MATMUL;
    j->alpha = json_number_value(json_object_get(o, "alpha"));
    j->beta = json_number_value(json_object_get(o, "beta"));
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        struct gr_operand *x = &j->mm[k];
        json_t *v = json_object_get(o, gr_operand_names[k]), *shape = json_object_get(v, "shape");
        if (!v && k == 2)
            break;
        const char *ds = json_string_value(json_object_get(v, "dataset"));
        x->rows = json_integer_value(json_array_get(shape, 0));
        x->cols = json_integer_value(json_array_get(shape, 1));
        if (json_array_size(shape) != 2 || x->rows < 1 || x->cols < 1 || (ds && !gr_id_valid(ds, 'd')) ||
            gr_mul_size((size_t)x->rows, (size_t)x->cols, &bytes) || gr_mul_size(bytes, gr_dtype_size(j->dtype), &bytes))
            return -1;
        x->present = 1;
        x->off = total;
        if (ds)
            snprintf(x->dataset, sizeof x->dataset, "%s", ds);
        else if (__builtin_add_overflow(total, bytes, &total))
            return -1;
    }
    *inline_bytes = total;
    return j->mm[0].cols == j->mm[1].rows && j->shape[0] == j->mm[0].rows && j->shape[1] == j->mm[1].cols ? 0 : -1;
}

/* A reduction's values in bytes, as its dtype and shape say; SIZE_MAX if that overflows. */
static size_t values_bytes(const struct gr_job *j)
{
    size_t n = gr_dtype_size(j->dtype);
    for (int d = 0; d < j->ndim; d++)
        if (j->shape[d] < 1 || gr_mul_size(n, (size_t)j->shape[d], &n))
            return SIZE_MAX;
    return n;
}

/* A stored "axis" (null, an axis or a list, as put_axes writes it) as a mask of ndim's axes; 0
 * when it names none of them. */
static unsigned axes_of(const json_t *axis, int ndim)
{
    unsigned all = (1u << ndim) - 1, mask = 0;
    if (json_is_null(axis))
        return all;
    for (size_t i = 0; i < (json_is_array(axis) ? json_array_size(axis) : 1); i++) {
        const json_t *a = json_is_array(axis) ? json_array_get(axis, i) : axis;
        json_int_t d = json_integer_value(a);
        if (!json_is_integer(a) || d < 0 || d >= ndim)
            return 0;
        mask |= 1u << d;
    }
    return mask;
}

int gr_job_restore(const char *id, const char *doc, const void *input, size_t bytes, struct gr_job **out,
                   struct gr_err *e)
{
    *out = NULL;
    json_t *o = json_loads(doc, 0, NULL), *shape = NULL, *axis = NULL;
    const char *op = NULL, *dtype = NULL, *ties = NULL, *algo = NULL, *dev = NULL, *created = NULL;
    if (!o || json_unpack(o, "{s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:s}", "op", &op, "dtype", &dtype, "shape", &shape,
                          "axis", &axis, "ties", &ties, "algorithm", &algo, "device", &dev, "created_at",
                          &created) ||
        gr_op_parse(op) < 0 || gr_dtype_parse(dtype) < 0 || !json_is_array(shape) || json_array_size(shape) < 1 ||
        json_array_size(shape) > GR_MAX_DIMS || strlen(id) >= sizeof((struct gr_job *)0)->id) {
        json_decref(o);
        return gr_fail(e, GR_EINVAL, NULL, "stored job %s is unreadable", id);
    }
    struct gr_job *j = gr_job_new();
    void *copy = bytes ? malloc(bytes) : NULL;
    if (!j || (bytes && !copy)) {
        free(copy);
        gr_job_unref(j);
        json_decref(o);
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory restoring job %s", id);
    }
    snprintf(j->id, sizeof j->id, "%s", id);
    const char *tenant = json_string_value(json_object_get(o, "tenant"));
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant && gr_tenant_valid(tenant) ? tenant : "default");
    j->op = gr_op_parse(op);
    j->dtype = gr_dtype_parse(dtype);
    j->ndim = (int)json_array_size(shape);
    for (int d = 0; d < j->ndim; d++)
        j->shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
    j->axes = axes_of(axis, j->ndim);
    j->axis_null = json_is_null(axis);
    json_int_t ddof = json_integer_value(json_object_get(o, "ddof")); /* var and std only */
    j->ddof = ddof >= 0 && ddof <= INT32_MAX ? (int)ddof : 0;
    const char *acc = json_string_value(json_object_get(o, "accumulate"));
    j->acc64 = acc && !strcmp(acc, "float64");
    j->ties_last = !strcmp(ties, "last");
    j->keepdims = json_is_true(json_object_get(o, "keepdims")); /* absent before keepdims: false */
    snprintf(j->algorithm, sizeof j->algorithm, "%s", algo);
    snprintf(j->device, sizeof j->device, "%s", dev);
    j->created_at = parse_time(created);
    j->committed = GR_QUEUED;
    json_t *names = json_object_get(o, "algorithms");
    if (json_is_array(names)) { /* a benchmark */
        j->kind = GR_JOB_BENCH;
        j->repeats = (int)json_integer_value(json_object_get(o, "repeats"));
        size_t n = json_array_size(names);
        const char *first = json_string_value(json_array_get(names, 0));
        j->nalgos = first && strcmp(first, "all") ? (int)n : 0;
        j->algos = j->nalgos ? calloc(n, sizeof *j->algos) : NULL;
        for (int k = 0; j->algos && k < j->nalgos; k++)
            snprintf(j->algos[k], sizeof j->algos[k], "%s", json_string_value(json_array_get(names, (size_t)k)));
        if (j->nalgos && !j->algos) {
            free(copy);
            gr_job_unref(j);
            json_decref(o);
            return gr_fail(e, GR_ENOMEM, NULL, "out of memory restoring job %s", id);
        }
    }
    /* a job on a dataset stored no input: the dataset's file holds its values */
    const char *ds = json_string_value(json_object_get(o, "dataset"));
    if (ds && gr_id_valid(ds, 'd'))
        snprintf(j->dataset, sizeof j->dataset, "%s", ds);
    size_t want = bytes;
    if (j->kind != GR_JOB_BENCH && j->op == GR_MATMUL && (j->ndim != 2 || restore_operands(j, o, &want) || want != bytes)) {
        free(copy);
        gr_job_unref(j);
        json_decref(o);
        return gr_fail(e, GR_EINVAL, NULL, "stored matmul job %s: its operands are unreadable or not the %zu bytes "
                                           "stored", id, bytes);
    }
    if (j->kind == GR_JOB_REDUCE)
        want = values_bytes(j);
    if (j->kind == GR_JOB_REDUCE &&
        (want == SIZE_MAX || !j->axes || (ds && !j->dataset[0]) ||
         (ds ? bytes != 0 : want != bytes))) {
        free(copy);
        gr_job_unref(j);
        json_decref(o);
        return gr_fail(e, GR_EINVAL, NULL, "stored job %s: its input is %zu bytes, not what its shape needs", id,
                       bytes);
    }
    if (bytes)
        memcpy(copy, input, bytes);
    j->input = copy;
    j->input_bytes = want;
    json_decref(o);
    *out = j;
    return GR_OK;
}
