/* bench.c: runs a backend's variants side by side on generated data, checked against the CPU
 * reference; used by benchmark jobs on the worker thread that owns the backend. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    double eps = dtype == GR_FLOAT32 ? 1.2e-7 : 2.3e-16, magnitude = op == GR_MEAN ? 1 : (double)n;
    return x == y || fabs(x - y) <= 8 * eps * log2((double)n + 2) * magnitude;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_one(struct gr_backend *b, const struct gr_reduce_req *req, const struct gr_result *want, int repeats,
                    double *times, struct gr_bench_row *row)
{
    size_t bytes = (size_t)req->cols * gr_dtype_size(req->dtype);
    for (int k = 0; k < repeats; k++) {
        struct gr_result r = {0};
        struct gr_timings t = {0};
        struct gr_err e = {0};
        char used[32];
        if (b->reduce(b, req, &r, &t, used, &e) != GR_OK) {
            snprintf(row->error, sizeof row->error, "%s", e.msg[0] ? e.msg : "failed without a message");
            return;
        }
        /* every run is checked, so a variant that is right only once in a while shows */
        row->matched = (k == 0 || row->matched) && same(&r, want, req->op, req->dtype, req->cols);
        gr_result_free(&r);
        times[k] = t.kernel;
    }
    qsort(times, (size_t)repeats, sizeof *times, cmp_double);
    row->median_ms = repeats % 2 ? times[repeats / 2] : (times[repeats / 2 - 1] + times[repeats / 2]) / 2;
    row->gbps = row->median_ms > 0 ? (double)bytes / (row->median_ms * 1e6) : 0;
}

int gr_bench_run(struct gr_backend *b, int lane, struct gr_backend *ref, int op, int dtype, int64_t n, char (*algos)[32],
                 int nalgos, int repeats, struct gr_bench_row **rows, int *nrows, struct gr_err *e)
{
    *rows = NULL;
    *nrows = 0;
    int count = 0;
    for (int k = 0; k < (nalgos ? nalgos : b->nalgos); k++) {
        const char *name = nalgos ? algos[k] : b->algos[k].name;
        struct gr_err ce;
        int rc = gr_backend_check(b, name, op, dtype, GR_AXIS_ALL, &ce);
        if (rc == GR_OK)
            count++;
        else if (nalgos) {
            *e = ce;
            return rc;
        }
    }
    size_t bytes;
    if (count == 0)
        return gr_fail(e, GR_EUNPROC, "algorithms", "no variant on %s covers %s on %s", b->name, gr_op_name(op),
                       gr_dtype_name(dtype));
    if (gr_mul_size((size_t)n, gr_dtype_size(dtype), &bytes))
        return gr_fail(e, GR_EUNPROC, "n", "n is too large");
    void *data = malloc(bytes);
    double *times = malloc((size_t)repeats * sizeof *times);
    struct gr_bench_row *out = calloc((size_t)count, sizeof *out);
    struct gr_result want = {0};
    struct gr_timings t;
    char used[32];
    int rc = GR_OK;
    if (!data || !times || !out) {
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of host memory for a benchmark of %zu bytes", bytes);
        goto out;
    }
    generate(data, dtype, n);
    struct gr_reduce_req req = {.op = op, .dtype = dtype, .axis = GR_AXIS_ALL, .rows = 1, .cols = n, .data = data,
                                .algorithm = "cpu_seq"};
    if ((rc = ref->reduce(ref, &req, &want, &t, used, e)) != GR_OK)
        goto out;
    req.lane = lane;
    int i = 0;
    for (int k = 0; k < (nalgos ? nalgos : b->nalgos); k++) {
        const char *name = nalgos ? algos[k] : b->algos[k].name;
        if (gr_backend_check(b, name, op, dtype, GR_AXIS_ALL, NULL) != GR_OK)
            continue;
        snprintf(out[i].algorithm, sizeof out[i].algorithm, "%s", name);
        req.algorithm = name;
        run_one(b, &req, &want, repeats, times, &out[i++]);
    }
    *rows = out;
    *nrows = count;
    out = NULL;
out:
    gr_result_free(&want);
    free(out);
    free(times);
    free(data);
    return rc;
}
