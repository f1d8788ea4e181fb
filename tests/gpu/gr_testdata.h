/* gr_testdata.h: random test inputs and result comparison shared by the GPU tests (C and CUDA);
 * everything here is single-threaded and owned by the calling test. */
#ifndef GR_TESTDATA_H
#define GR_TESTDATA_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/backend.h"
#ifdef __cplusplus
}
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Checks counted (atomically: a test may check from several threads); a failure prints its line
 * and message and the test goes on. main() prints the counts and fails if gr_fails. */
static int gr_checks __attribute__((unused)), gr_fails __attribute__((unused)); /* a test may not CHECK */
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        __atomic_add_fetch(&gr_checks, 1, __ATOMIC_RELAXED);                                                           \
        if (!(cond)) {                                                                                                 \
            __atomic_add_fetch(&gr_fails, 1, __ATOMIC_RELAXED);                                                        \
            fprintf(stderr, "FAIL line %d: ", __LINE__);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

struct gr_rng {
    uint64_t s;
};

/* splitmix64: fast, and every seed gives a full-period stream. */
static inline uint64_t gr_rng_next(struct gr_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline int64_t gr_rng_range(struct gr_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(gr_rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* Seed from GR_TEST_SEED, else the clock: fresh data every run, reproducible on demand. */
static inline uint64_t gr_test_seed(void)
{
    const char *s = getenv("GR_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
}

/* EXACT data keeps every float sum exact in float64 (multiples of 1/8, small), so any order
 * must give the reference's bits; REAL data needs a tolerance for float sums. */
enum { GR_FILL_EXACT, GR_FILL_REAL };
/* Float specials planted at random positions; ZEROS makes three in four elements +0.0 or -0.0,
 * which tie (an arg op's winner is the tie rule's, its value's sign that element's). */
enum { GR_SPECIAL_NONE, GR_SPECIAL_INF, GR_SPECIAL_NAN, GR_SPECIAL_ZEROS, GR_NSPECIALS };

static inline double gr_fill_value(int op, int dtype, int mode, struct gr_rng *r)
{
    int fl = gr_dtype_is_float(dtype);
    if (gr_op_is_arg(op)) /* few distinct values: ties everywhere */
        return fl ? gr_rng_range(r, -40, 40) / 4.0 : (double)gr_rng_range(r, -20, 20);
    if (op == GR_PROD || op == GR_NANPROD) {
        if (!fl) /* odd factors: the wrapped int64 product never collapses to 0 */
            return (double)(gr_rng_range(r, -50, 49) * 2 + 1);
        /* powers of two near 1: products stay exact, and gr_fill keeps them in range */
        uint64_t u = gr_rng_next(r);
        double m = (u & 255) == 0 ? 2.0 : (u & 255) == 1 ? 0.5 : 1.0;
        return (u & 256) ? -m : m;
    }
    if (mode == GR_FILL_EXACT)
        return fl ? gr_rng_range(r, -8000, 8000) / 8.0 : (double)gr_rng_range(r, -1000, 1000);
    if (fl)
        return (double)(gr_rng_next(r) >> 11) * 0x1p-53 * 200.0 - 100.0;
    return 0; /* REAL integers are drawn as raw bits by gr_fill */
}

/* Fill n elements of dtype for op. REAL integers span the whole type (int32 sums must not
 * wrap, int64 sums wrap identically everywhere), except int64 means (float64 sums of values
 * up to 2^40). */
static inline void gr_fill(void *data, int dtype, int op, int64_t n, int mode, int special, struct gr_rng *r)
{
    /* A float product's exponent so far: kept within +-64 (a 2 or 0.5 that would leave it becomes
     * 1), so that a piece's product is within 2^128 and none overflows. Unbounded, the CPU's
     * product of 2^24 - 1 factors passed 2^1024 on the way to 2^1013, which the GPU's order did not
     * (one case of 7,989, H100, 2026-11-27). */
    int walk = 0;
    for (int64_t k = 0; k < n; k++) {
        double v = gr_fill_value(op, dtype, mode, r);
        if ((op == GR_PROD || op == GR_NANPROD) && gr_dtype_is_float(dtype)) {
            int step = fabs(v) == 2.0 ? 1 : fabs(v) == 0.5 ? -1 : 0;
            if (abs(walk + step) > 64)
                v = v < 0 ? -1.0 : 1.0;
            else
                walk += step;
        }
        int raw = mode == GR_FILL_REAL && !gr_op_is_arg(op) && op != GR_PROD && op != GR_NANPROD;
        switch (dtype) {
        case GR_INT32: {
            int32_t x = raw ? (int32_t)(uint32_t)gr_rng_next(r) : (int32_t)v;
            memcpy((char *)data + k * 4, &x, 4);
            break;
        }
        case GR_INT64: {
            int64_t x = (int64_t)v;
            if (raw)
                x = op == GR_MEAN ? gr_rng_range(r, -(1ll << 40), 1ll << 40) : (int64_t)gr_rng_next(r);
            memcpy((char *)data + k * 8, &x, 8);
            break;
        }
        case GR_FLOAT32: {
            float x = (float)v;
            memcpy((char *)data + k * 4, &x, 4);
            break;
        }
        case GR_FLOAT64:
            memcpy((char *)data + k * 8, &v, 8);
            break;
        }
    }
    if (!gr_dtype_is_float(dtype) || special == GR_SPECIAL_NONE)
        return;
    for (int64_t k = 0; special == GR_SPECIAL_ZEROS && k < n; k++) {
        uint64_t u = gr_rng_next(r);
        if ((u & 3) == 0)
            continue;
        double z = (u & 4) ? -0.0 : 0.0;
        float zf = (float)z;
        if (dtype == GR_FLOAT32)
            memcpy((char *)data + k * 4, &zf, 4);
        else
            memcpy((char *)data + k * 8, &z, 8);
    }
    if (special == GR_SPECIAL_ZEROS)
        return;
    int count = 1 + (int)(gr_rng_next(r) % 3);
    for (int c = 0; c < count; c++) {
        int64_t k = (int64_t)(gr_rng_next(r) % (uint64_t)n);
        double v = special == GR_SPECIAL_NAN ? NAN : (c & 1) ? -INFINITY : INFINITY;
        if (dtype == GR_FLOAT32) {
            float x = (float)v;
            memcpy((char *)data + k * 4, &x, 4);
        } else {
            memcpy((char *)data + k * 8, &v, 8);
        }
    }
}

/* Does this case need a tolerance (float64 sums whose rounding depends on the order; var, std and
 * nanmean, whose divisions round whatever the data)? */
static inline int gr_needs_tol(int op, int dtype, int mode)
{
    return gr_op_takes_ddof(op) || op == GR_NANMEAN ||
           (mode == GR_FILL_REAL && (op == GR_MEAN || ((op == GR_SUM || op == GR_NANSUM) && gr_dtype_is_float(dtype))));
}

/* tol[o] = rel * sum of |x| over output o's elements (divided by the count for means), computed
 * by the reference backend; NULL when the case is exact. var: rel * the mean of x^2 (what the
 * squared deviations are rounded against), std its root. The nan-ops' leave NaNs out, as they do
 * (a NaN tolerance would pass anything). Caller frees. */
static inline double *gr_tolerances(struct gr_backend *ref, const struct gr_reduce_req *q, double rel)
{
    int64_t n = q->rows * q->cols;
    size_t es = gr_dtype_size(q->dtype);
    int spread = gr_op_takes_ddof(q->op);
    int skip = q->op == GR_NANSUM || q->op == GR_NANMEAN || q->op == GR_NANVAR || q->op == GR_NANSTD;
    double *abs_x = (double *)malloc((size_t)n * sizeof *abs_x);
    if (!abs_x)
        return NULL;
    for (int64_t k = 0; k < n; k++) {
        double v = 0;
        if (q->dtype == GR_INT32) {
            int32_t x;
            memcpy(&x, (const char *)q->data + k * es, 4);
            v = x;
        } else if (q->dtype == GR_INT64) {
            int64_t x;
            memcpy(&x, (const char *)q->data + k * es, 8);
            v = (double)x;
        } else if (q->dtype == GR_FLOAT32) {
            float x;
            memcpy(&x, (const char *)q->data + k * es, 4);
            v = x;
        } else {
            memcpy(&v, (const char *)q->data + k * es, 8);
        }
        abs_x[k] = spread ? v * v : fabs(v);
    }
    struct gr_reduce_req a = *q;
    a.op = q->op == GR_MEAN || q->op == GR_NANMEAN || spread ? (skip ? GR_NANMEAN : GR_MEAN) : skip ? GR_NANSUM : GR_SUM;
    a.dtype = GR_FLOAT64;
    a.data = abs_x;
    a.algorithm = "cpu_seq";
    struct gr_result r;
    struct gr_timings t;
    struct gr_err e;
    char used[32];
    double *tol = NULL;
    if (ref->reduce(ref, &a, &r, &t, used, &e) == GR_OK) {
        tol = (double *)malloc((size_t)r.n * sizeof *tol);
        /* the reference's sequential Welford updates over 2^24 values drift by 3e-11 of the mean of
         * x^2 (H200, against the GPU's tree of merges); a wrong formula is off by whole units */
        double r_used = spread ? rel * 1e3 : rel;
        for (int64_t o = 0; tol && o < r.n; o++)
            tol[o] = q->op == GR_STD || q->op == GR_NANSTD ? sqrt(r_used * r.f[o]) : r_used * r.f[o];
        gr_result_free(&r);
    }
    free(abs_x);
    return tol;
}

/* First output where got differs from want (beyond tol[o] when tol is set), or -1. NaN matches
 * NaN; infinities and arg indices must match exactly. */
static inline int64_t gr_result_diff(const struct gr_result *got, const struct gr_result *want, const double *tol)
{
    if (got->n != want->n)
        return 0;
    for (int64_t o = 0; o < want->n; o++) {
        if (want->index && (!got->index || got->index[o] != want->index[o]))
            return o;
        if (want->i) {
            if (!got->i || got->i[o] != want->i[o])
                return o;
            continue;
        }
        if (!got->f)
            return o;
        double a = got->f[o], b = want->f[o];
        if (isnan(a) || isnan(b)) {
            if (isnan(a) != isnan(b))
                return o;
        } else if (want->index && signbit(a) != signbit(b)) { /* the element at the index, as it was */
            return o;
        } else if (a != b && (!tol || isinf(b) || fabs(a - b) > tol[o])) {
            return o;
        }
    }
    return -1;
}

/* Print output o of a result: value and index. */
static inline void gr_result_print(FILE *f, const char *label, const struct gr_result *r, int64_t o)
{
    if (o < 0 || o >= r->n)
        return;
    if (r->i)
        fprintf(f, "%s[%lld] = %lld", label, (long long)o, (long long)r->i[o]);
    else if (r->f)
        fprintf(f, "%s[%lld] = %.17g", label, (long long)o, r->f[o]);
    if (r->index)
        fprintf(f, " at %lld", (long long)r->index[o]);
    fprintf(f, "\n");
}

#endif
