/* test_cpu_matmul.c: the CPU matrix product, every variant x dtype x shape x alpha/beta, against a
 * plain float64 reference written here, and the request checks; one test thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu_matmul.h"

static const char *const variants[] = {"cpu_naive", "cpu_tiled", "auto"};
#define NVARIANTS 3

/* m, n, k: the tiny and odd cases, then multiples and non-multiples of every tile the CPU
 * (16 rows, 256 columns, 128 deep) and the GPU (16, 32, 64, 128) use. */
static const int64_t shapes[][3] = {
    {1, 1, 1},     {17, 33, 9},    {16, 16, 16},   {15, 17, 16},   {17, 15, 15},  {32, 32, 32},
    {31, 33, 31},  {33, 31, 65},   {64, 64, 64},   {63, 65, 129},  {65, 63, 127}, {128, 128, 128},
    {127, 257, 1}, {129, 255, 128}, {1, 300, 200}, {300, 1, 129},  {40, 256, 256}, {16, 512, 130},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* alpha, beta; the last pairs have beta = 0 with a c full of NaN, which must not be read. */
static const double coefs[][2] = {{1, 0}, {2.5, 0}, {1, 1}, {-0.5, 2}, {0, 1.5}, {1, -1}, {0.75, 0}};
#define NCOEFS (sizeof coefs / sizeof coefs[0])
#define NAN_C_FROM 6

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) as float64; stored in the test dtype. */
static void fill(void *p, int dtype, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++) {
        double v = (double)(rnd(s) >> 11) / 4503599627370496.0 - 1.0;
        if (dtype == GR_FLOAT32)
            ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
    }
}

static double get(const void *p, int dtype, int64_t i)
{
    return dtype == GR_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Within the error bound of float64 accumulation over k terms plus one rounding to the dtype?
 * bound = |alpha| * sum |a||b| + |beta| |c|. NaN never passes. */
static int close_enough(double got, double want, double bound, int64_t k, int dtype)
{
    double tol = (double)(k + 4) * DBL_EPSILON * bound + (dtype == GR_FLOAT32 ? FLT_EPSILON * fabs(want) : 0) +
                 DBL_MIN;
    return fabs(got - want) <= tol;
}

static void check_one(const char *variant, int dtype, const int64_t *shape, const double *ab, int in_place,
                      uint64_t *seed)
{
    int64_t m = shape[0], n = shape[1], k = shape[2];
    size_t es = gr_dtype_size(dtype);
    void *a = malloc((size_t)(m * k) * es), *b = malloc((size_t)(k * n) * es), *c = malloc((size_t)(m * n) * es);
    void *out = in_place ? c : malloc((size_t)(m * n) * es);
    double *want = malloc((size_t)(m * n) * sizeof *want), *bound = malloc((size_t)(m * n) * sizeof *bound);
    assert_true(a && b && c && out && want && bound);
    fill(a, dtype, m * k, seed);
    fill(b, dtype, k * n, seed);
    int nan_c = ab[1] == 0 && ab == coefs[NAN_C_FROM];
    if (nan_c)
        memset(c, 0xff, (size_t)(m * n) * es); /* all-ones bits: NaN in both dtypes */
    else
        fill(c, dtype, m * n, seed);

    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, sa = 0;
            for (int64_t p = 0; p < k; p++) {
                double x = get(a, dtype, i * k + p) * get(b, dtype, p * n + j);
                s += x;
                sa += fabs(x);
            }
            double cv = ab[1] != 0 ? get(c, dtype, i * n + j) : 0;
            want[i * n + j] = ab[0] * s + ab[1] * cv;
            bound[i * n + j] = fabs(ab[0]) * sa + fabs(ab[1] * cv);
        }
    if (!in_place)
        memset(out, 0xa5, (size_t)(m * n) * es); /* poison: about -3e-16 / -2.9e-16, never a result */

    struct gr_mm_req r = {dtype, m, n, k, ab[0], ab[1], a, b, nan_c && (m & 1) ? NULL : c, out, variant, 0};
    struct gr_err e = {0};
    char used[32] = "";
    int rc = gr_mm_cpu(&r, used, &e);
    if (rc != GR_OK)
        fail_msg("%s %s %lldx%lldx%lld: %s", variant, gr_dtype_name(dtype), (long long)m, (long long)n,
                 (long long)k, e.msg);
    if (strcmp(variant, "auto") != 0)
        assert_string_equal(used, variant);
    else
        assert_string_equal(used, m * n * k < GR_MM_CPU_AUTO_TILED ? "cpu_naive" : "cpu_tiled");
    for (int64_t i = 0; i < m * n; i++)
        if (!close_enough(get(out, dtype, i), want[i], bound[i], k, dtype))
            fail_msg("%s %s %lldx%lldx%lld alpha=%g beta=%g%s: out[%lld][%lld] = %.17g, want %.17g", variant,
                     gr_dtype_name(dtype), (long long)m, (long long)n, (long long)k, ab[0], ab[1],
                     in_place ? " in place" : "", (long long)(i / n), (long long)(i % n), get(out, dtype, i),
                     want[i]);
    free(a);
    free(b);
    free(c);
    if (!in_place)
        free(out);
    free(want);
    free(bound);
}

static long cases;

static void test_products(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    for (int v = 0; v < NVARIANTS; v++)
        for (int dt = GR_FLOAT32; dt <= GR_FLOAT64; dt++)
            for (size_t s = 0; s < NSHAPES; s++)
                for (size_t ab = 0; ab < NCOEFS; ab++, cases++)
                    check_one(variants[v], dt, shapes[s], coefs[ab], (int)((s + ab) % 5 == 0), &seed);
    print_message("%ld products checked\n", cases);
}

/* The comparison must be able to fail: a result one k-th of a term off, a NaN. */
static void test_tolerance_bites(void **state)
{
    (void)state;
    assert_true(close_enough(1.0, 1.0, 1.0, 1, GR_FLOAT64));
    assert_false(close_enough(1.0 + 1e-12, 1.0, 1.0, 100, GR_FLOAT64));
    assert_false(close_enough(1.0 + 1e-6, 1.0, 1.0, 100, GR_FLOAT32));
    assert_false(close_enough(NAN, 1.0, 1.0, 1, GR_FLOAT32));
}

/* The variants agree with each other too, on a size where tiled runs several blocks and threads. */
static void test_variants_agree(void **state)
{
    (void)state;
    const int64_t m = 77, n = 600, k = 300;
    uint64_t seed = 99;
    double *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b), *c = malloc(m * n * sizeof *c);
    double *o1 = malloc(m * n * sizeof *o1), *o2 = malloc(m * n * sizeof *o2);
    assert_true(a && b && c && o1 && o2);
    fill(a, GR_FLOAT64, m * k, &seed);
    fill(b, GR_FLOAT64, k * n, &seed);
    fill(c, GR_FLOAT64, m * n, &seed);
    struct gr_mm_req r = {GR_FLOAT64, m, n, k, 1.5, -0.25, a, b, c, o1, "cpu_naive", 0};
    struct gr_err e;
    assert_int_equal(gr_mm_cpu(&r, NULL, &e), GR_OK);
    r.out = o2;
    r.algorithm = "cpu_tiled";
    assert_int_equal(gr_mm_cpu(&r, NULL, &e), GR_OK);
    for (int64_t i = 0; i < m * n; i++)
        assert_true(fabs(o1[i] - o2[i]) <= 4 * DBL_EPSILON * (fabs(o1[i]) + 1));
    free(a);
    free(b);
    free(c);
    free(o1);
    free(o2);
}

static void expect_error(const struct gr_mm_req *r, int code, const char *field, const char *needle)
{
    struct gr_err e = {0};
    assert_int_equal(gr_mm_cpu(r, NULL, &e), code);
    if (field)
        assert_string_equal(e.field, field);
    if (!strstr(e.msg, needle))
        fail_msg("message '%s' does not name '%s'", e.msg, needle);
}

static void test_rejected(void **state)
{
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, out[4];
    struct gr_mm_req ok = {GR_FLOAT32, 2, 2, 2, 1, 0, a, b, NULL, out, "auto", 0};
    struct gr_mm_req r = ok;
    r.beta = 0.5;
    expect_error(&r, GR_EUNPROC, "c", "beta");
    r = ok;
    r.dtype = GR_INT32;
    expect_error(&r, GR_EUNPROC, "dtype", "int32");
    r = ok;
    r.k = 0;
    expect_error(&r, GR_EUNPROC, "shape", "2 x 0");
    r = ok;
    r.m = r.k = (int64_t)1 << 40; /* m*k fits in size_t, times 4 bytes does not */
    expect_error(&r, GR_EUNPROC, "shape", "too large");
    r = ok;
    r.n = INT64_MAX / 2;
    r.m = 3;
    expect_error(&r, GR_EUNPROC, "shape", "too large");
    r = ok;
    r.algorithm = "cublas";
    expect_error(&r, GR_EINVAL, "algorithm", "cpu_tiled");
    r = ok;
    r.b = NULL;
    expect_error(&r, GR_EINVAL, NULL, "without");
    /* and the valid request does run: [[1,2],[3,4]] @ I */
    struct gr_err e;
    assert_int_equal(gr_mm_cpu(&ok, NULL, &e), GR_OK);
    for (int i = 0; i < 4; i++)
        assert_true(out[i] == a[i]);
}

static void test_algo_table(void **state)
{
    (void)state;
    for (int v = 0; v < GR_MM_CPU_NVARIANTS; v++) {
        assert_non_null(gr_mm_cpu_algos[v].name);
        assert_true(strlen(gr_mm_cpu_algos[v].description) > 10);
        assert_int_equal(gr_mm_cpu_algos[v].dtypes, (1u << GR_FLOAT32) | (1u << GR_FLOAT64));
    }
    assert_string_equal(gr_mm_cpu_algos[GR_MM_CPU_NAIVE].name, "cpu_naive");
    assert_string_equal(gr_mm_cpu_algos[GR_MM_CPU_TILED].name, "cpu_tiled");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tolerance_bites), cmocka_unit_test(test_products),
        cmocka_unit_test(test_variants_agree),  cmocka_unit_test(test_rejected),
        cmocka_unit_test(test_algo_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
