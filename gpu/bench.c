/* bench.c: runs a backend's variants side by side on generated data, checked against a reference;
 * used by benchmark jobs on the worker thread that owns the backend (the limits by API threads too). */
#include "gpu/bench.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Products up to this n are checked against the CPU; beyond it the CPU would take minutes. */
#define MM_CPU_REF_MAX_N 1024

/* What keeps a benchmark short: n, and a variant's work over its repeats (2^log2_work). */
static const struct {
    int64_t max_n;
    int log2_work;
    const char *what, *work;
} limits[] = {
    {1LL << 28, 31, "a benchmark", "elements read"},
    {8192, 43, "a matmul benchmark on a GPU", "multiply-adds"},
    {MM_CPU_REF_MAX_N, 31, "a matmul benchmark on the CPU", "multiply-adds"},
};

int gr_bench_fits(int on_cpu, int op, int64_t n, int64_t repeats, struct gr_err *e)
{
    int mm = op == GR_MATMUL, l = mm ? 1 + !!on_cpu : 0;
    if (n < 1 || n > limits[l].max_n)
        return gr_fail(e, GR_EUNPROC, "n", "\"n\" is %lld; %s takes n from 1 to %lld", (long long)n, limits[l].what,
                       (long long)limits[l].max_n);
    if (repeats < 1 || repeats > 100)
        return gr_fail(e, GR_EUNPROC, "repeats", "\"repeats\" is %lld; it must be from 1 to 100", (long long)repeats);
    int64_t work = (mm ? n * n * n : n) * repeats; /* below 2^46: n and repeats are bounded above */
    if (work > 1LL << limits[l].log2_work)
        return gr_fail(e, GR_EUNPROC, "repeats", "%s x repeats is %lld; %s does at most 2^%d %s per variant: lower n or "
                                                 "repeats", mm ? "n^3" : "n", (long long)work, limits[l].what,
                       limits[l].log2_work, limits[l].work);
    return GR_OK;
}

const char *gr_bench_reference(int op, int64_t n)
{
    return op != GR_MATMUL ? "cpu_seq" : n <= MM_CPU_REF_MAX_N ? "cpu_tiled" : "cublas";
}

/* Deterministic data: integers in [-1000, 1000] (sums cannot overflow), floats in [-1, 1). */
static void generate(void *data, int dtype, int64_t n)
{
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int64_t k = 0; k < n; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int64_t iv = (int64_t)(s % 2001) - 1000;
        double fv = (double)(s >> 11) / 9007199254740992.0 * 2 - 1;
        switch (dtype) {
        case GR_INT32: ((int32_t *)data)[k] = (int32_t)iv; break;
        case GR_INT64: ((int64_t *)data)[k] = iv; break;
        case GR_FLOAT32: ((float *)data)[k] = (float)fv; break;
        default: ((double *)data)[k] = fv;
        }
    }
}

/* One benchmark: its generated input, the reference's answer, and room for a variant's. */
struct bench {
    int op, dtype;
    int64_t n;
    double work;           /* per run: bytes read (reductions) or flops (products) */
    void *in;              /* n values, or the operands a then b, n x n each */
    struct gr_result want; /* a reduction's reference answer */
    void *want_mm, *got_mm; /* a product's, and a variant's: n x n each */
    size_t mm_bytes;
};

/* Sums of n values in [-1, 1) may differ by rounding in summation order: allow what a tree
 * of float32 (or float64) partial sums loses, a few ulps per level, times the magnitude. */
static int same(const struct gr_result *a, const struct gr_result *b, int op, int dtype, int64_t n)
{
    if (a->index && (!b->index || a->index[0] != b->index[0]))
        return 0;
    if (a->i)
        return b->i && a->i[0] == b->i[0];
    if (!b->f)
        return 0;
    double x = a->f[0], y = b->f[0];
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    double eps = dtype == GR_FLOAT32 ? 1.2e-7 : 2.3e-16, magnitude = op == GR_MEAN || op == GR_NANMEAN ? 1 : (double)n;
    return x == y || fabs(x - y) <= 8 * eps * log2((double)n + 2) * magnitude;
}

/* Each element of a product of n x n values in [-1, 1) is a sum of n terms whose partial sums
 * stay near sqrt(n)/3: summed in precision eps, their rounding errors add up like a random walk
 * to about 0.07 n eps. 2 n eps leaves room for that and the reference's own error, and is far
 * below what one wrong term costs (1/4 on average). A variant that rounds its inputs (TF32,
 * 10-bit mantissas, named *_tf32) adds an independent error per term, about 0.3 sqrt(n) eps_in
 * in all: 8 sqrt(n) eps_in. */
static double mm_tolerance(const char *name, int dtype, int64_t n)
{
    double eps = dtype == GR_FLOAT32 ? FLT_EPSILON : DBL_EPSILON, eps_in = eps;
    size_t len = strlen(name);
    if (len >= 5 && !strcmp(name + len - 5, "_tf32"))
        eps_in = 0x1p-10;
    return 2 * (double)n * eps + 8 * sqrt((double)n) * eps_in;
}

static double element(const void *p, int dtype, int64_t i)
{
    return dtype == GR_FLOAT32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static int same_product(const struct bench *x, const char *name)
{
    double tol = mm_tolerance(name, x->dtype, x->n);
    for (int64_t i = 0; i < x->n * x->n; i++)
        if (!(fabs(element(x->got_mm, x->dtype, i) - element(x->want_mm, x->dtype, i)) <= tol)) /* NaN fails */
            return 0;
    return 1;
}

static struct gr_reduce_req reduce_req(const struct bench *x, const char *name, int lane)
{
    return (struct gr_reduce_req){.op = x->op, .dtype = x->dtype, .axis = GR_AXIS_ALL, .rows = 1, .cols = x->n,
                                  .data = x->in, .algorithm = name, .lane = lane};
}

static struct gr_mm_req mm_req(const struct bench *x, const char *name, void *out)
{
    return (struct gr_mm_req){.dtype = x->dtype, .m = x->n, .n = x->n, .k = x->n, .alpha = 1, .beta = 0,
                              .a = x->in, .b = (const char *)x->in + x->mm_bytes, .out = out, .algorithm = name};
}

/* The reference answer (gr_bench_reference's variant): on the CPU backend ref, or for large
 * products cuBLAS on b. */
static int reference(struct bench *x, struct gr_backend *b, int lane, struct gr_backend *ref, struct gr_err *e)
{
    const char *name = gr_bench_reference(x->op, x->n);
    struct gr_timings t = {0};
    char used[32];
    if (x->op != GR_MATMUL) {
        struct gr_reduce_req req = reduce_req(x, name, 0);
        return ref->reduce(ref, &req, &x->want, &t, used, e);
    }
    struct gr_mm_req req = mm_req(x, name, x->want_mm);
    return x->n <= MM_CPU_REF_MAX_N ? ref->matmul(ref, 0, &req, &t, used, e) : b->matmul(b, lane, &req, &t, used, e);
}

/* Run variant name once on b's lane: its kernel time, and whether its answer matched. */
static int run_once(struct bench *x, struct gr_backend *b, int lane, const char *name, double *ms, int *matched,
                    struct gr_err *e)
{
    struct gr_timings t = {0};
    char used[32];
    int rc;
    if (x->op == GR_MATMUL) {
        memset(x->got_mm, 0xff, x->mm_bytes); /* NaN in either dtype: an element left unwritten cannot match */
        struct gr_mm_req req = mm_req(x, name, x->got_mm);
        rc = b->matmul(b, lane, &req, &t, used, e);
        *matched = rc == GR_OK && same_product(x, name);
    } else {
        struct gr_result r = {0};
        struct gr_reduce_req req = reduce_req(x, name, lane);
        rc = b->reduce(b, &req, &r, &t, used, e);
        *matched = rc == GR_OK && same(&r, &x->want, x->op, x->dtype, x->n);
        gr_result_free(&r);
    }
    *ms = t.kernel;
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_variant(struct bench *x, struct gr_backend *b, int lane, const char *name, int repeats, double *times,
                        struct gr_bench_row *row)
{
    snprintf(row->algorithm, sizeof row->algorithm, "%s", name);
    for (int k = 0; k < repeats; k++) {
        struct gr_err e = {0};
        int matched;
        if (run_once(x, b, lane, name, &times[k], &matched, &e) != GR_OK) {
            snprintf(row->error, sizeof row->error, "%s", e.msg[0] ? e.msg : "failed without a message");
            return;
        }
        /* every run is checked, so a variant that is right only once in a while shows */
        row->matched = (k == 0 || row->matched) && matched;
    }
    qsort(times, (size_t)repeats, sizeof *times, cmp_double);
    row->median_ms = repeats % 2 ? times[repeats / 2] : (times[repeats / 2 - 1] + times[repeats / 2]) / 2;
    row->rate = row->median_ms > 0 ? x->work / (row->median_ms * 1e6) : 0;
}

/* The k-th variant to run: the k-th named, or the k-th of b's table for op. */
static const char *variant(const struct gr_backend *b, int op, char (*algos)[32], int nalgos, int k)
{
    return nalgos ? algos[k] : op == GR_MATMUL ? b->mm_algos[k].name : b->algos[k].name;
}

int gr_bench_run(struct gr_backend *b, int lane, struct gr_backend *ref, int op, int dtype, int64_t n, char (*algos)[32],
                 int nalgos, int repeats, struct gr_bench_row **rows, int *nrows, struct gr_err *e)
{
    *rows = NULL;
    *nrows = 0;
    int mm = op == GR_MATMUL, rc = gr_bench_fits(!strcmp(b->name, "cpu"), op, n, repeats, e);
    if (rc != GR_OK)
        return rc;
    int total = nalgos ? nalgos : mm ? b->nmm_algos : b->nalgos, count = 0;
    for (int k = 0; k < total; k++) {
        struct gr_err ce;
        rc = gr_backend_check(b, variant(b, op, algos, nalgos, k), op, dtype, GR_AXIS_ALL, &ce);
        if (rc == GR_OK)
            count++;
        else if (nalgos) {
            *e = ce;
            return rc;
        }
    }
    if (count == 0)
        return gr_fail(e, GR_EUNPROC, "algorithms", "no variant on %s covers %s on %s", b->name, gr_op_name(op),
                       gr_dtype_name(dtype));
    struct bench x = {.op = op, .dtype = dtype, .n = n};
    size_t values = (size_t)n, bytes;
    if ((mm && (gr_mul_size((size_t)n, (size_t)n, &values) ||
                gr_mul_size(values, gr_dtype_size(dtype), &x.mm_bytes) || gr_mul_size(values, 2, &values))) ||
        gr_mul_size(values, gr_dtype_size(dtype), &bytes))
        return gr_fail(e, GR_EUNPROC, "n", "n is too large");
    x.work = mm ? 2.0 * (double)n * (double)n * (double)n : (double)bytes;
    x.in = malloc(bytes);
    if (mm) {
        x.want_mm = malloc(x.mm_bytes);
        x.got_mm = malloc(x.mm_bytes);
    }
    double *times = malloc((size_t)repeats * sizeof *times);
    struct gr_bench_row *out = calloc((size_t)count, sizeof *out);
    if (!x.in || (mm && (!x.want_mm || !x.got_mm)) || !times || !out) {
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of host memory for a benchmark of %zu bytes", bytes + 2 * x.mm_bytes);
        goto out;
    }
    generate(x.in, dtype, (int64_t)values);
    if ((rc = reference(&x, b, lane, ref, e)) != GR_OK)
        goto out;
    int i = 0;
    for (int k = 0; k < total; k++) {
        const char *name = variant(b, op, algos, nalgos, k);
        if (gr_backend_check(b, name, op, dtype, GR_AXIS_ALL, NULL) == GR_OK)
            run_variant(&x, b, lane, name, repeats, times, &out[i++]);
    }
    *rows = out;
    *nrows = count;
    out = NULL;
out:
    gr_result_free(&x.want);
    free(out);
    free(times);
    free(x.got_mm);
    free(x.want_mm);
    free(x.in);
    return rc;
}
