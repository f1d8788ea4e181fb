/* test_cpu_backend.c: the CPU backend, every variant x op x dtype x axis, against a plain
 * reference written here; one test thread, the backend starts its own OpenMP teams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"

static const char *const variants[] = {"cpu_seq", "cpu_omp_reduction", "cpu_omp_chunked",
                                       "cpu_omp_strided", "auto"};
#define NVARIANTS 5

/* splitmix64: a seeded, reproducible stream */
static uint64_t rnd(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t as_int64(uint64_t u)
{
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return i;
}

enum dist {
    D_GENERAL, /* small values with many duplicates (ties, +-0.0), now and then a wide one */
    D_PROD,    /* products that neither overflow nor vanish: odd ints; +-1 with rare +-2, +-0.5 */
    D_SPECIAL, /* floats: D_GENERAL with rare NaN and +-inf */
};

static double gen_float(uint64_t *st, enum dist d)
{
    uint64_t r = rnd(st);
    if (d == D_PROD) {
        static const double rare[] = {2.0, -2.0, 0.5, -0.5};
        return r % 5 == 0 ? rare[(r >> 8) % 4] : ((r >> 8) & 1 ? 1.0 : -1.0);
    }
    if (d == D_SPECIAL && r % 3000 == 0) {
        static const double special[] = {NAN, INFINITY, -INFINITY};
        return special[(r >> 16) % 3];
    }
    if (r % 16 == 0) /* an unrounded value: sums stop being exact */
        return ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 2e3;
    int k = (int)((r >> 8) % 801) - 400;
    if (k == 0)
        return (r >> 20) & 1 ? -0.0 : 0.0;
    return k / 8.0;
}

static int64_t gen_int(uint64_t *st, enum dist d, int wide64)
{
    uint64_t r = rnd(st);
    if (d == D_PROD) {
        static const int64_t odd[] = {-3, -1, 1, 1, 3, 5, -1, 1};
        return r % 5000 == 0 ? 2 : odd[(r >> 8) % 8];
    }
    if (r % 8 == 0) /* wide: int32 sums leave int32, int64 sums wrap */
        return wide64 ? as_int64(rnd(st)) : (int64_t)(int32_t)(uint32_t)rnd(st);
    return (int64_t)((r >> 8) % 201) - 100;
}

static void *make_data(int dtype, int64_t n, enum dist d, uint64_t seed)
{
    void *p = malloc((size_t)n * gr_dtype_size(dtype));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case GR_INT32: ((int32_t *)p)[i] = (int32_t)gen_int(&seed, d, 0); break;
        case GR_INT64: ((int64_t *)p)[i] = gen_int(&seed, d, 1); break;
        case GR_FLOAT32: ((float *)p)[i] = (float)gen_float(&seed, d); break;
        case GR_FLOAT64: ((double *)p)[i] = gen_float(&seed, d); break;
        }
    }
    return p;
}

static long double elem(const void *data, int dtype, int64_t i)
{
    switch (dtype) {
    case GR_INT32: return ((const int32_t *)data)[i];
    case GR_INT64: return ((const int64_t *)data)[i];
    case GR_FLOAT32: return ((const float *)data)[i];
    default: return ((const double *)data)[i];
    }
}

static int64_t elem_int(const void *data, int dtype, int64_t i)
{
    return dtype == GR_INT32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
}

static int64_t groups_of(const struct gr_reduce_req *q) { return q->groups > 1 ? q->groups : 1; }

/* The reference: for output o of q, the k-th element of its reduced set. */
static int64_t pos_of(const struct gr_reduce_req *q, int64_t o, int64_t k)
{
    int64_t cols = q->cols;
    if (q->axis == 0) /* output o: column o % cols of group o / cols */
        return o / cols * (q->rows / groups_of(q)) * cols + k * cols + o % cols;
    if (q->axis == 1)
        return o * cols + k;
    return k;
}

struct expect {
    int64_t i, index;
    double f, tol; /* tol < 0: compare float exactly (bits for arg values) */
};

static struct expect ref_one(const struct gr_reduce_req *q, int64_t o, int64_t len)
{
    struct expect x = {0, -1, 0, -1};
    int fl = gr_dtype_is_float(q->dtype);
    if (q->op == GR_COUNT_NONZERO || q->op == GR_ANY || q->op == GR_ALL) {
        for (int64_t k = 0; k < len; k++)
            x.i += elem(q->data, q->dtype, pos_of(q, o, k)) != 0;
        x.i = q->op == GR_ANY ? x.i > 0 : q->op == GR_ALL ? x.i == len : x.i;
        return x;
    }
    if (q->op == GR_NANMIN || q->op == GR_NANMAX) { /* the extreme of the numbers; NaN if none */
        int seen = 0;
        long double best = NAN;
        for (int64_t k = 0; k < len; k++) {
            long double v = elem(q->data, q->dtype, pos_of(q, o, k));
            if (!isnan(v) && (!seen || (q->op == GR_NANMAX ? v > best : v < best)))
                best = v, seen = 1;
        }
        if (fl)
            x.f = (double)best;
        else
            x.i = (int64_t)best;
        return x;
    }
    int nan_skip = q->op == GR_NANVAR || q->op == GR_NANSTD || q->op == GR_NANMEAN;
    if (q->op == GR_VAR || q->op == GR_STD || nan_skip) { /* two passes in extended precision */
        long double mean = 0, m2 = 0;
        int64_t n = 0;
        for (int64_t k = 0; k < len; k++) {
            long double v = elem(q->data, q->dtype, pos_of(q, o, k));
            if (!(nan_skip && isnan(v)))
                mean += v, n++;
        }
        mean /= n;
        for (int64_t k = 0; k < len; k++) {
            long double v = elem(q->data, q->dtype, pos_of(q, o, k));
            if (!(nan_skip && isnan(v)))
                m2 += (v - mean) * (v - mean);
        }
        long double var = m2 / (n > q->ddof ? (long double)(n - q->ddof) : nan_skip && fl ? NAN : 0.0L);
        x.f = (double)(q->op == GR_NANMEAN ? mean : q->op == GR_STD || q->op == GR_NANSTD ? sqrtl(var) : var);
        if (q->op == GR_NANMEAN) { /* relative to the magnitudes added */
            long double mag = 0;
            for (int64_t k = 0; k < len; k++) {
                long double v = elem(q->data, q->dtype, pos_of(q, o, k));
                mag += isnan(v) ? 0 : fabsl(v);
            }
            x.tol = 1e-14 * (double)(mag / (n ? n : 1));
            return x;
        }
        x.tol = 1e-12 * (double)(q->op == GR_STD || q->op == GR_NANSTD ? sqrtl(var + mean * mean) : var + mean * mean);
        return x;
    }
    if (q->op == GR_PTP) { /* the largest less the smallest; NaN with a NaN; integers wrap */
        long double hi = -INFINITY, lo = INFINITY;
        int64_t ihi = INT64_MIN, ilo = INT64_MAX, nan = 0;
        for (int64_t k = 0; k < len; k++) {
            long double v = elem(q->data, q->dtype, pos_of(q, o, k));
            nan |= isnan(v);
            hi = v > hi ? v : hi, lo = v < lo ? v : lo;
            if (!fl) {
                int64_t iv = elem_int(q->data, q->dtype, pos_of(q, o, k));
                ihi = iv > ihi ? iv : ihi, ilo = iv < ilo ? iv : ilo;
            }
        }
        if (fl)
            x.f = nan ? NAN : (double)(hi - lo);
        else
            x.i = as_int64((uint64_t)ihi - (uint64_t)ilo);
        return x;
    }
    int skip = q->op == GR_NANSUM || q->op == GR_NANPROD; /* the numbers, as GR_SUM's and GR_PROD's below */
    int prod = q->op == GR_PROD || q->op == GR_NANPROD;
    if (!fl && (q->op == GR_SUM || prod || skip)) { /* two's complement wrap, by hand */
        uint64_t u = prod;
        for (int64_t k = 0; k < len; k++) {
            uint64_t v = (uint64_t)elem_int(q->data, q->dtype, pos_of(q, o, k));
            u = prod ? u * v : u + v;
        }
        x.i = as_int64(u);
        return x;
    }
    if (q->op == GR_SUM || prod || q->op == GR_MEAN || skip) { /* in extended precision */
        long double s = prod, mag = 0;
        for (int64_t k = 0; k < len; k++) {
            long double v = elem(q->data, q->dtype, pos_of(q, o, k));
            if (skip && isnan(v))
                continue;
            mag += fabsl(v);
            s = prod ? s * v : s + v;
        }
        x.f = (double)(q->op == GR_MEAN ? s / len : s);
        x.tol = 1e-14 * (double)(prod ? fabsl(s) : q->op == GR_MEAN ? mag / len : mag);
        return x;
    }
    int nan = 0;
    for (int64_t k = 0; fl && k < len; k++)
        nan |= isnan(elem(q->data, q->dtype, pos_of(q, o, k)));

    /* min/max/arg: NaN wins outright (first or last one); otherwise find the extreme value,
     * then the first or last index holding it */
    int want_max = q->op == GR_MAX || q->op == GR_ARGMAX || q->op == GR_NANARGMAX; /* nan-args: no NaN given */
    int64_t first = -1, last = -1;
    long double best = 0;
    for (int64_t k = 0; k < len; k++) {
        long double v = elem(q->data, q->dtype, pos_of(q, o, k));
        if (nan) {
            if (isnan(v) && first < 0)
                first = k;
            if (isnan(v))
                last = k;
        } else if (first < 0 || (want_max ? v > best : v < best)) {
            best = v;
            first = k;
        }
    }
    if (!nan)
        for (int64_t k = 0; k < len; k++)
            if (elem(q->data, q->dtype, pos_of(q, o, k)) == best)
                last = k;
    x.index = q->ties_last ? last : first;
    int64_t e = pos_of(q, o, x.index);
    if (fl)
        x.f = (double)elem(q->data, q->dtype, e);
    else
        x.i = elem_int(q->data, q->dtype, e);
    if (q->op == GR_MIN || q->op == GR_MAX)
        x.index = -1;
    return x;
}

static int64_t ref_len(const struct gr_reduce_req *q, int64_t *nout)
{
    *nout = q->axis == 0 ? groups_of(q) * q->cols : q->axis == 1 ? q->rows : 1;
    return q->axis == 0 ? q->rows / groups_of(q) : q->axis == 1 ? q->cols : q->rows * q->cols;
}

static int same_float(double got, struct expect x)
{
    if (isnan(x.f) || isnan(got))
        return isnan(x.f) && isnan(got);
    if (isinf(x.f))
        return got == x.f;
    if (x.tol < 0)
        return got == x.f;
    return fabs(got - x.f) <= x.tol;
}

/* r's nout outputs (each over len elements) against the reference; what names the case. */
static void check_outputs(const char *what, const struct gr_result *r, const struct expect *ref, int64_t nout,
                          int64_t len)
{
    int is_int = r->i != NULL, arg = r->index != NULL;
    for (int64_t o = 0; o < nout; o++) {
        const struct expect *x = &ref[o];
        int ok = is_int ? r->i[o] == x->i : same_float(r->f[o], *x);
        if (ok && arg && !is_int && !isnan(x->f)) /* the value is the element itself: same bits */
            ok = memcmp(&r->f[o], &x->f, sizeof x->f) == 0;
        if (ok && arg)
            ok = r->index[o] == x->index;
        if (!ok)
            fail_msg("%s: output %lld of %lld (reduced over %lld): got %lld / %.17g idx %lld, "
                     "want %lld / %.17g idx %lld (tol %g)",
                     what, (long long)o, (long long)nout, (long long)len,
                     (long long)(is_int ? r->i[o] : 0), is_int ? 0.0 : r->f[o],
                     (long long)(arg ? r->index[o] : -1), (long long)x->i, x->f, (long long)x->index,
                     x->tol);
    }
}

/* Run q on b and compare every output with the reference; names the case on a mismatch. */
static void check_req(struct gr_backend *b, const struct gr_reduce_req *q, const struct expect *ref)
{
    int64_t nout, len = ref_len(q, &nout);
    int is_int = gr_result_is_int(q->op, q->dtype), arg = gr_op_is_arg(q->op);
    struct gr_result r = {0};
    struct gr_timings t = {.queue = -7, .total = -7, .h2d = -1, .d2h = -1, .kernel = -1};
    struct gr_err e = {0};
    char used[32] = "";
    char what[160];
    snprintf(what, sizeof what, "%s %s axis %d ties %s %lldx%lld (%lld groups) on %s (%d threads)",
             gr_op_name(q->op), gr_dtype_name(q->dtype), q->axis, q->ties_last ? "last" : "first",
             (long long)q->rows, (long long)q->cols, (long long)groups_of(q), q->algorithm, omp_get_max_threads());

    int rc = b->reduce(b, q, &r, &t, used, &e);
    if (rc != GR_OK)
        fail_msg("%s: rc %d (%s)", what, rc, e.msg);
    assert_int_equal(r.n, nout);
    assert_true(is_int ? r.i && !r.f : r.f && !r.i);
    assert_true(arg ? r.index != NULL : r.index == NULL);
    assert_true(t.kernel >= 0 && t.h2d == 0 && t.d2h == 0 && t.queue == -7 && t.total == -7);
    if (strcmp(q->algorithm, "auto") != 0)
        assert_string_equal(used, q->algorithm);
    else if (q->rows * q->cols <= 1000)
        assert_string_equal(used, "cpu_seq");
    else if (q->rows * q->cols >= (1 << 18)) /* AUTO_PARALLEL_MIN */
        assert_string_equal(used, "cpu_omp_chunked");

    check_outputs(what, &r, ref, nout, len);
    gr_result_free(&r);
}

/* Reference once, then every variant. */
static void check_all_variants(struct gr_backend *b, struct gr_reduce_req q)
{
    int64_t nout;
    int64_t len = ref_len(&q, &nout);
    struct expect *ref = malloc((size_t)nout * sizeof *ref);
    assert_non_null(ref);
    for (int64_t o = 0; o < nout; o++)
        ref[o] = ref_one(&q, o, len);
    for (int v = 0; v < NVARIANTS; v++) {
        q.algorithm = variants[v];
        check_req(b, &q, ref);
    }
    free(ref);
}

static const int64_t shapes[][2] = {
    {1, 1}, {1, 2}, {1, 33}, {1, 1000}, {1, 100003}, {7, 3}, {3, 7}, {1000, 9}, {9, 1000},
    {100003, 3}, {40, 2500}, {2, 1}, {21, 1}, {63, 40},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Products take data that neither overflows nor vanishes (D_PROD). */
static int is_prod(int op) { return op == GR_PROD || op == GR_NANPROD; }

/* The ops checked on NaN and infinities too: sums and means of them are test_nan's and test_inf's;
 * the nan-args' lanes of NaNs alone are test_nan_ops'. */
static int takes_specials(int op)
{
    return op == GR_MIN || op == GR_MAX || op == GR_ARGMIN || op == GR_ARGMAX || op == GR_NANMIN || op == GR_NANMAX ||
           op == GR_COUNT_NONZERO || op == GR_NANSUM || op == GR_NANMEAN || op == GR_NANVAR || op == GR_NANSTD ||
           op == GR_PTP || op == GR_ANY || op == GR_ALL;
}

/* nthreads 0: the default team size; shapes above max_n elements are skipped */
static void matrix(int dtype, int nthreads, int64_t max_n)
{
    struct gr_backend *b = gr_cpu_backend_new();
    assert_non_null(b);
    int before = omp_get_max_threads();
    if (nthreads)
        omp_set_num_threads(nthreads);
    enum dist dists[] = {D_GENERAL, D_PROD, D_SPECIAL};
    for (size_t s = 0; s < NSHAPES; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        if (rows * cols > max_n)
            continue;
        for (int d = 0; d < 3; d++) {
            if (dists[d] == D_SPECIAL && !gr_dtype_is_float(dtype))
                continue;
            void *data = make_data(dtype, rows * cols, dists[d], 1000 * s + (uint64_t)d + 7 * (uint64_t)dtype);
            for (int op = 0; op < GR_NOPS; op++) {
                /* products of D_GENERAL data overflow and vanish in an order-dependent way;
                 * NaN and inf in sums are test_nan's and test_inf's */
                if (is_prod(op) != (dists[d] == D_PROD) || (dists[d] == D_SPECIAL && !takes_specials(op)))
                    continue;
                for (int axis = GR_AXIS_ALL; axis <= 1; axis++)
                    for (int ties = 0; ties <= gr_op_is_arg(op); ties++) {
                        struct gr_reduce_req q = {op, dtype, axis, ties, rows, cols, data, NULL, 0, NULL, 0, 0, 0, NULL, 0};
                        check_all_variants(b, q);
                        /* axis 0 in groups: the rows split in 3 or 7 (an N-D array's middle axes) */
                        for (int64_t g = 3; axis == 0 && g <= 7; g += 4)
                            if (rows % g == 0)
                                q.groups = g, check_all_variants(b, q);
                    }
            }
            free(data);
        }
    }
    omp_set_num_threads(before);
    b->destroy(b);
}

/* Any axes of arrays up to GR_MAX_DIMS-D, random shapes and axis sets, every op, dtype and
 * variant: the passes (common/axes.h) against the reference over a copy with the reduced axes
 * last (gr_axes_gather; test_axes.py checks its results against NumPy). Half the gathered ones
 * read their values from a file, as a GPU is handed a dataset's. */
static void test_any_axes(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    assert_non_null(b);
    uint64_t st = 2026;
    for (int it = 0; it < 3000; it++) {
        int ndim = 1 + (int)(rnd(&st) % GR_MAX_DIMS), op = (int)(rnd(&st) % GR_NOPS);
        int dtype = (int)(rnd(&st) % GR_NDTYPES), ties = gr_op_is_arg(op) && rnd(&st) % 2;
        int64_t shape[GR_MAX_DIMS], n = 1;
        for (int d = 0; d < ndim; d++)
            shape[d] = 1 + (int64_t)(rnd(&st) % (ndim > 4 ? 3 : 7)), n *= shape[d];
        unsigned all = (1u << ndim) - 1, mask = (unsigned)(rnd(&st) % (all + 1));
        if (!mask || (gr_op_is_arg(op) && __builtin_popcount(mask) > 1 && mask != all))
            mask = rnd(&st) % 2 ? all : 1u << (rnd(&st) % (uint64_t)ndim); /* arg ops: one axis or all */
        enum dist dist = is_prod(op)                                                 ? D_PROD
                         : gr_dtype_is_float(dtype) && takes_specials(op) && rnd(&st) % 2 ? D_SPECIAL
                                                                                        : D_GENERAL;
        void *data = make_data(dtype, n, dist, (uint64_t)it);
        int64_t kept = 1, reduced = 1;
        for (int d = 0; d < ndim; d++)
            *(mask >> d & 1u ? &reduced : &kept) *= shape[d];
        void *flat = malloc((size_t)n * gr_dtype_size(dtype));
        assert_non_null(flat);
        gr_axes_gather(ndim, shape, mask, gr_dtype_size(dtype), data, flat);
        int ddof = op == GR_VAR || op == GR_STD ? (int)(rnd(&st) % 3) : 0;
        struct gr_reduce_req rq = {op, dtype, 1, ties, kept, reduced, flat, "cpu_seq", 0, NULL, 0, 0, ddof, NULL, 0};
        struct expect *ref = malloc((size_t)kept * sizeof *ref);
        assert_non_null(ref);
        for (int64_t o = 0; o < kept; o++)
            ref[o] = ref_one(&rq, o, reduced);

        struct gr_pass p[GR_MAX_DIMS];
        int gather, np = gr_axes_plan(ndim, shape, mask, op, p, &gather);
        struct gr_reduce_req q = {op, dtype, 0, ties, 0, 0, data, variants[it % NVARIANTS], 0, NULL, 0, 0, ddof, NULL, 0};
        FILE *file = NULL;
        if (gather && it % 2) {
            assert_non_null(file = tmpfile());
            assert_int_equal(fwrite(data, gr_dtype_size(dtype), (size_t)n, file), (size_t)n);
            assert_int_equal(fflush(file), 0);
            q.data = NULL;
            q.fd = fileno(file);
        }
        struct gr_result r = {0};
        struct gr_timings t = {0};
        struct gr_err e = {0};
        char used[32], what[200];
        int at = snprintf(what, sizeof what, "%s %s over axes 0x%x of [", gr_op_name(op), gr_dtype_name(dtype), mask);
        for (int d = 0; d < ndim; d++)
            at += snprintf(what + at, sizeof what - (size_t)at, d ? ",%lld" : "%lld", (long long)shape[d]);
        snprintf(what + at, sizeof what - (size_t)at, "] in %d passes on %s", np, q.algorithm);
        int rc = gr_backend_reduce_axes(b, &q, ndim, shape, mask, &r, &t, used, &e);
        if (rc != GR_OK)
            fail_msg("%s: rc %d (%s)", what, rc, e.msg);
        assert_int_equal(r.n, kept);
        if (strcmp(q.algorithm, "auto"))
            assert_string_equal(used, q.algorithm);
        assert_true(gr_op_is_arg(op) ? np == 1 && r.index != NULL : r.index == NULL);
        check_outputs(what, &r, ref, kept, reduced);
        gr_result_free(&r);
        if (file)
            fclose(file);
        free(ref);
        free(flat);
        free(data);
    }
    b->destroy(b);
}

static void test_matrix_int32(void **state) { matrix(GR_INT32, 0, INT64_MAX); }
static void test_matrix_int64(void **state) { matrix(GR_INT64, 0, INT64_MAX); }
static void test_matrix_float32(void **state) { matrix(GR_FLOAT32, 0, INT64_MAX); }
static void test_matrix_float64(void **state) { matrix(GR_FLOAT64, 0, INT64_MAX); }
/* Other team sizes move the split points (outputs vs. inside the reduced set) and chunk edges. */
static void test_matrix_3_threads(void **state)
{
    matrix(GR_INT64, 3, 100000);
    matrix(GR_FLOAT32, 3, 100000);
}
static void test_matrix_5_threads(void **state)
{
    matrix(GR_INT32, 5, 100000);
    matrix(GR_FLOAT64, 5, 100000);
}

/* Run one request on every explicit variant and return the results (caller frees). */
static void run_each(struct gr_backend *b, struct gr_reduce_req q, struct gr_result out[NVARIANTS])
{
    for (int v = 0; v < NVARIANTS; v++) {
        struct gr_timings t = {0};
        struct gr_err e = {0};
        char used[32];
        q.algorithm = variants[v];
        int rc = b->reduce(b, &q, &out[v], &t, used, &e);
        if (rc != GR_OK)
            fail_msg("%s %s on %s: rc %d (%s)", gr_op_name(q.op), gr_dtype_name(q.dtype), variants[v],
                     rc, e.msg);
    }
}

static void free_each(struct gr_result out[NVARIANTS])
{
    for (int v = 0; v < NVARIANTS; v++)
        gr_result_free(&out[v]);
}

static void test_ties(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    const int32_t small[] = {3, 1, 1, 5, 1, 5};
    const int64_t want[2][2] = {{1, 4}, {3, 5}}; /* [argmax][ties_last] */
    for (int op = GR_ARGMIN; op <= GR_ARGMAX; op++)
        for (int last = 0; last <= 1; last++) {
            run_each(b, (struct gr_reduce_req){op, GR_INT32, GR_AXIS_ALL, last, 1, 6, small, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
            for (int v = 0; v < NVARIANTS; v++) {
                assert_int_equal(r[v].index[0], want[op == GR_ARGMAX][last]);
                assert_int_equal(r[v].i[0], small[want[op == GR_ARGMAX][last]]);
            }
            free_each(r);
        }

    /* -0.0 and +0.0 tie; the value reported is the element at the winning index */
    const double zeros[] = {0.0, -0.0, 2.0, -0.0};
    for (int last = 0; last <= 1; last++) {
        run_each(b, (struct gr_reduce_req){GR_ARGMIN, GR_FLOAT64, GR_AXIS_ALL, last, 1, 4, zeros, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
        for (int v = 0; v < NVARIANTS; v++) {
            assert_int_equal(r[v].index[0], last ? 3 : 0);
            assert_true(r[v].f[0] == 0.0 && !!signbit(r[v].f[0]) == last);
        }
        free_each(r);
    }

    /* all equal and long: the winner sits at the very ends, across every thread's chunk */
    int64_t n = 100003;
    float *same = malloc((size_t)n * sizeof *same);
    int64_t *ones = malloc((size_t)n * sizeof *ones);
    assert_true(same && ones);
    for (int64_t i = 0; i < n; i++)
        same[i] = 7.0f, ones[i] = -1;
    for (int op = GR_ARGMIN; op <= GR_ARGMAX; op++)
        for (int last = 0; last <= 1; last++) {
            run_each(b, (struct gr_reduce_req){op, GR_FLOAT32, GR_AXIS_ALL, last, 1, n, same, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
            for (int v = 0; v < NVARIANTS; v++)
                assert_true(r[v].index[0] == (last ? n - 1 : 0) && r[v].f[0] == 7.0);
            free_each(r);
            run_each(b, (struct gr_reduce_req){op, GR_INT64, 1, last, 3, n / 3, ones, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
            for (int v = 0; v < NVARIANTS; v++)
                for (int o = 0; o < 3; o++)
                    assert_true(r[v].index[o] == (last ? n / 3 - 1 : 0) && r[v].i[o] == -1);
            free_each(r);
        }
    free(same);
    free(ones);
    b->destroy(b);
}

static void test_nan(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    int64_t n = 100003, p1 = 12345, p2 = 77777;
    double *d = malloc((size_t)n * sizeof *d);
    float *f = malloc((size_t)n * sizeof *f);
    assert_true(d && f);
    uint64_t seed = 42;
    for (int64_t i = 0; i < n; i++)
        d[i] = gen_float(&seed, D_GENERAL), f[i] = (float)d[i];
    d[p1] = d[p2] = NAN;
    f[p1] = f[p2] = NAN;
    for (int dt = GR_FLOAT32; dt <= GR_FLOAT64; dt++) {
        const void *data = dt == GR_FLOAT32 ? (const void *)f : (const void *)d;
        for (int op = 0; op <= GR_ARGMAX; op++) /* the ops NaN propagates through */
            for (int last = 0; last <= gr_op_is_arg(op); last++) {
                run_each(b, (struct gr_reduce_req){op, dt, GR_AXIS_ALL, last, 1, n, data, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
                for (int v = 0; v < NVARIANTS; v++) {
                    assert_true(isnan(r[v].f[0]));
                    if (gr_op_is_arg(op))
                        assert_int_equal(r[v].index[0], last ? p2 : p1);
                }
                free_each(r);
            }
        /* as 1000 x 100: the NaNs are at (row 123, column 45) and (777, 77) */
        for (int op = GR_MIN; op <= GR_ARGMAX; op++) {
            if (op == GR_MEAN)
                continue;
            for (int axis = 0; axis <= 1; axis++)
                for (int last = 0; last <= gr_op_is_arg(op); last++) {
                    run_each(b, (struct gr_reduce_req){op, dt, axis, last, 1000, 100, data, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
                    for (int v = 0; v < NVARIANTS; v++)
                        for (int64_t o = 0; o < r[v].n; o++) {
                            int64_t hit1 = axis ? p1 / 100 : p1 % 100, hit2 = axis ? p2 / 100 : p2 % 100;
                            assert_int_equal(!!isnan(r[v].f[o]), o == hit1 || o == hit2);
                            if (gr_op_is_arg(op) && o == hit1)
                                assert_int_equal(r[v].index[o], axis ? p1 % 100 : p1 / 100);
                        }
                    free_each(r);
                }
        }
    }
    free(d);
    free(f);
    b->destroy(b);
}

/* The nan-ops skip NaN (a lane of NaNs alone: nanmin and nanmax give NaN, nansum 0);
 * count_nonzero counts a NaN and not a zero. As 2 x 3: [[NaN, 1, NaN], [-2, 0, NaN]]. */
static void test_nan_ops(void **state)
{
    (void)state;
    struct gr_backend *b = gr_cpu_backend_new();
    const double x[6] = {NAN, 1, NAN, -2, 0, NAN};
    struct gr_result r[NVARIANTS];
    const struct {
        int op, axis;
        double want[3];
    } cases[] = {
        {GR_NANSUM, GR_AXIS_ALL, {-1}},        {GR_NANSUM, 0, {-2, 1, 0}},       {GR_NANMIN, 0, {-2, 0, NAN}},
        {GR_NANMAX, 1, {1, 0}},                {GR_NANMIN, GR_AXIS_ALL, {-2}},    {GR_NANMAX, GR_AXIS_ALL, {1}},
        {GR_COUNT_NONZERO, GR_AXIS_ALL, {5}}, {GR_COUNT_NONZERO, 0, {2, 1, 2}},
        {GR_NANMEAN, GR_AXIS_ALL, {-1.0 / 3}}, {GR_NANMEAN, 0, {-2, 0.5, NAN}},   {GR_NANMEAN, 1, {1, -1}},
        {GR_NANPROD, GR_AXIS_ALL, {0}},        {GR_NANPROD, 0, {-2, 0, 1}},       {GR_NANVAR, 1, {0, 1}},
        {GR_NANSTD, 0, {0, 0.5, NAN}},         {GR_NANARGMAX, 1, {1, 0}},         {GR_NANARGMIN, GR_AXIS_ALL, {-2}},
        {GR_PTP, 1, {NAN, NAN}},               {GR_PTP, 0, {NAN, 1, NAN}},        {GR_ANY, 0, {1, 1, 1}},
        {GR_ALL, 0, {1, 0, 1}},                {GR_ALL, 1, {1, 0}},               {GR_ANY, GR_AXIS_ALL, {1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run_each(b, (struct gr_reduce_req){cases[c].op, GR_FLOAT64, cases[c].axis, 0, 2, 3, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
        for (int v = 0; v < NVARIANTS; v++)
            for (int64_t o = 0; o < r[v].n; o++) {
                double got = r[v].i ? (double)r[v].i[o] : r[v].f[o], want = cases[c].want[o];
                assert_int_equal(!!r[v].i, cases[c].op == GR_COUNT_NONZERO || cases[c].op == GR_ANY ||
                                               cases[c].op == GR_ALL);
                assert_int_equal(!!r[v].index, gr_op_is_arg(cases[c].op));
                if (!(isnan(want) ? isnan(got) : got == want))
                    fail_msg("%s axis %d output %lld, variant %d: %g, want %g", gr_op_name(cases[c].op), cases[c].axis,
                             (long long)o, v, got, want);
            }
        free_each(r);
    }
    /* a nan-arg op over a lane of NaNs alone has no answer: NumPy raises, the job fails */
    for (int v = 0; v < NVARIANTS; v++) {
        struct gr_reduce_req q = {GR_NANARGMAX, GR_FLOAT64, 0, 0, 2, 3, x, variants[v], 0, NULL, 0, 0, 0, NULL, 0};
        struct gr_result got;
        struct gr_timings t = {0};
        struct gr_err e = {0};
        char used[32];
        assert_int_equal(b->reduce(b, &q, &got, &t, used, &e), GR_EUNPROC);
        assert_true(got.n == 0 && !got.f && !got.index && strstr(e.msg, "all-NaN") && strstr(e.msg, "output 2"));
    }
    b->destroy(b);
}

static void test_inf(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    const double cases[][3] = {{1, INFINITY, 2}, {INFINITY, -INFINITY, 1}, {1e308, 1e308, 1},
                               {-1e308, 5, -1e308}};
    for (int c = 0; c < 4; c++) {
        double want = 0;
        for (int k = 0; k < 3; k++) /* a plain sum gets these right: no finite rounding here */
            want += cases[c][k];
        run_each(b, (struct gr_reduce_req){GR_SUM, GR_FLOAT64, GR_AXIS_ALL, 0, 1, 3, cases[c], NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
        for (int v = 0; v < NVARIANTS; v++)
            assert_true(isnan(want) ? isnan(r[v].f[0]) : r[v].f[0] == want);
        free_each(r);
    }
    b->destroy(b);
}

static void test_int32_sum_does_not_wrap(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    int64_t n = 100003;
    int32_t *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int extreme = 0; extreme <= 1; extreme++) {
        int32_t v = extreme ? INT32_MIN : INT32_MAX;
        for (int64_t i = 0; i < n; i++)
            x[i] = v;
        run_each(b, (struct gr_reduce_req){GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, n, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
        for (int vi = 0; vi < NVARIANTS; vi++)
            assert_int_equal(r[vi].i[0], n * (int64_t)v);
        free_each(r);
        run_each(b, (struct gr_reduce_req){GR_MEAN, GR_INT32, GR_AXIS_ALL, 0, 1, n, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
        for (int vi = 0; vi < NVARIANTS; vi++)
            assert_true(r[vi].f[0] == (double)v);
        free_each(r);
    }
    free(x);
    b->destroy(b);
}

static void test_int64_wraps(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    int64_t n = 100003;
    int64_t *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = INT64_MAX;
    run_each(b, (struct gr_reduce_req){GR_SUM, GR_INT64, GR_AXIS_ALL, 0, 1, n, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_int_equal(r[v].i[0], as_int64((uint64_t)n * (uint64_t)INT64_MAX));
    free_each(r);

    x[0] = INT64_MAX, x[1] = 1;
    run_each(b, (struct gr_reduce_req){GR_SUM, GR_INT64, GR_AXIS_ALL, 0, 1, 2, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_true(r[v].i[0] == INT64_MIN);
    free_each(r);

    x[0] = INT64_MAX, x[1] = 3;
    run_each(b, (struct gr_reduce_req){GR_PROD, GR_INT64, GR_AXIS_ALL, 0, 1, 2, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_int_equal(r[v].i[0], as_int64((uint64_t)INT64_MAX * 3u));
    free_each(r);

    x[0] = x[1] = (int64_t)1 << 32;
    run_each(b, (struct gr_reduce_req){GR_PROD, GR_INT64, GR_AXIS_ALL, 0, 1, 2, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_int_equal(r[v].i[0], 0);
    free_each(r);
    free(x);
    b->destroy(b);
}

/* 1e16 + 1 rounds back to 1e16: a plain float64 sum of these is 0 or thereabouts. */
static void test_compensated_sum(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    struct gr_result r[NVARIANTS];
    int64_t n = 100003;
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    x[0] = 1e16;
    for (int64_t i = 1; i < n - 1; i++)
        x[i] = 1.0;
    x[n - 1] = -1e16;
    run_each(b, (struct gr_reduce_req){GR_SUM, GR_FLOAT64, GR_AXIS_ALL, 0, 1, n, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_true(r[v].f[0] == (double)(n - 2));
    free_each(r);
    run_each(b, (struct gr_reduce_req){GR_MEAN, GR_FLOAT64, GR_AXIS_ALL, 0, 1, n, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, r);
    for (int v = 0; v < NVARIANTS; v++)
        assert_true(fabs(r[v].f[0] - (double)(n - 2) / (double)n) <= 4 * DBL_EPSILON);
    free_each(r);
    free(x);
    b->destroy(b);
}

static void expect_failure(struct gr_backend *b, struct gr_reduce_req q, int code)
{
    struct gr_result r;
    struct gr_timings t = {0};
    struct gr_err e = {0};
    char used[32];
    memset(&r, 0x5a, sizeof r); /* poisoned: must come back empty */
    assert_int_equal(b->reduce(b, &q, &r, &t, used, &e), code);
    assert_int_equal(e.code, code);
    assert_true(e.msg[0] != '\0');
    assert_true(r.n == 0 && !r.i && !r.f && !r.index);
}

static void test_errors(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    const int32_t x[4] = {1, 2, 3, 4};
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, 4, x, "cpu_turbo", 0, NULL, 0, 0, 0, NULL, 0},
                   GR_EINVAL);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, 4, x, "cpu_seq ", 0, NULL, 0, 0, 0, NULL, 0},
                   GR_EINVAL);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 0, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EUNPROC);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, 0, 0, 1, 0, x, "cpu_seq", 0, NULL, 0, 0, 0, NULL, 0}, GR_EUNPROC);
    expect_failure(b, (struct gr_reduce_req){GR_MAX, GR_INT32, 1, 0, -1, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EUNPROC);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, 1, 0, INT64_MAX, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EUNPROC);
    expect_failure(b, (struct gr_reduce_req){GR_NOPS, GR_INT32, 1, 0, 1, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EINVAL);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_NDTYPES, 1, 0, 1, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EINVAL);
    expect_failure(b, (struct gr_reduce_req){GR_SUM, GR_INT32, 2, 0, 1, 4, x, NULL, 0, NULL, 0, 0, 0, NULL, 0}, GR_EINVAL);
    b->destroy(b);
}

static void test_info(void **state)
{
    struct gr_backend *b = gr_cpu_backend_new();
    assert_non_null(b);
    assert_string_equal(b->name, "cpu");
    assert_int_equal(b->nalgos, 4);
    for (int v = 0; v < 4; v++) {
        assert_string_equal(b->algos[v].name, variants[v]);
        assert_true(b->algos[v].ops == GR_ALL_OPS && b->algos[v].dtypes == GR_ALL_DTYPES &&
                    b->algos[v].axes == GR_ALL_AXES && b->algos[v].description[0]);
    }
    assert_true(b->info.name[0] != '\0');
    assert_int_equal(b->info.sms, omp_get_max_threads());
    assert_int_equal(b->info.streams, 0);
    assert_true(b->info.memory_bytes > 0);
    b->destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_nan_ops),
        cmocka_unit_test(test_inf),
        cmocka_unit_test(test_int32_sum_does_not_wrap),
        cmocka_unit_test(test_int64_wraps),
        cmocka_unit_test(test_compensated_sum),
        cmocka_unit_test(test_any_axes),
        cmocka_unit_test(test_matrix_int32),
        cmocka_unit_test(test_matrix_int64),
        cmocka_unit_test(test_matrix_float32),
        cmocka_unit_test(test_matrix_float64),
        cmocka_unit_test(test_matrix_3_threads),
        cmocka_unit_test(test_matrix_5_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
