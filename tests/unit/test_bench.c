/* test_bench.c: gr_bench_run on matrix products: a stand-in backend whose variants are right,
 * off in one element, leave one element unwritten, or fail, checked against the CPU reference;
 * rows, rates and the limits. Single-threaded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpu/bench.h"
#include "gpu/cpu_matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RIGHT, OFF, UNWRITTEN, FAILS, NFAKE };
static const struct gr_algo fake_algos[NFAKE] = {
    {"right", "the CPU's naive product", 0, (1u << GR_FLOAT32) | (1u << GR_FLOAT64), 0},
    {"off", "one element 1e-3 away", 0, (1u << GR_FLOAT32) | (1u << GR_FLOAT64), 0},
    {"unwritten", "the last element never written", 0, (1u << GR_FLOAT32) | (1u << GR_FLOAT64), 0},
    {"fails", "fails every time", 0, (1u << GR_FLOAT32) | (1u << GR_FLOAT64), 0},
};

static int calls;

static int fake_matmul(struct gr_backend *b, int lane, const struct gr_mm_req *req, struct gr_timings *t,
                       char algo_used[32], struct gr_err *e)
{
    assert_int_equal(lane, 3);
    assert_true(req->alpha == 1 && req->beta == 0 && req->m == req->n && req->n == req->k);
    calls++;
    if (!strcmp(req->algorithm, "fails"))
        return gr_fail(e, GR_ECUDA, NULL, "the stand-in failed");
    struct gr_mm_req r = *req;
    int64_t last = r.m * r.n - 1;
    double keep = r.dtype == GR_FLOAT32 ? ((float *)r.out)[last] : ((double *)r.out)[last];
    r.algorithm = "cpu_naive";
    int rc = gr_mm_cpu(&r, algo_used, e);
    if (!strcmp(req->algorithm, "off")) {
        if (r.dtype == GR_FLOAT32)
            ((float *)r.out)[r.m / 2] += 1e-3f;
        else
            ((double *)r.out)[r.m / 2] += 1e-3;
    } else if (!strcmp(req->algorithm, "unwritten")) {
        if (r.dtype == GR_FLOAT32)
            ((float *)r.out)[last] = (float)keep;
        else
            ((double *)r.out)[last] = keep;
    }
    t->kernel = 1.0 + calls; /* distinct times: the median is known */
    return rc;
}

static struct gr_backend fake = {.name = "fake", .mm_algos = fake_algos, .nmm_algos = NFAKE, .matmul = fake_matmul};

static void test_products(void **state)
{
    struct gr_backend *cpu = gr_cpu_backend_new();
    assert_non_null(cpu);
    for (int dtype = GR_FLOAT32; dtype <= GR_FLOAT64; dtype++) {
        for (int64_t n = 1; n <= 65; n += 32) {
            struct gr_bench_row *rows;
            int nrows;
            struct gr_err e = {0};
            calls = 0;
            assert_int_equal(gr_bench_run(&fake, 3, cpu, GR_MATMUL, dtype, n, NULL, 0, 3, &rows, &nrows, &e), GR_OK);
            assert_int_equal(nrows, NFAKE);
            for (int k = 0; k < NFAKE; k++)
                assert_string_equal(rows[k].algorithm, fake_algos[k].name);
            /* repeats 3 run first at calls 1..3: kernel ms 2, 3, 4, median 3 */
            assert_true(rows[RIGHT].matched && !rows[RIGHT].error[0]);
            assert_true(rows[RIGHT].median_ms == 3);
            assert_true(fabs(rows[RIGHT].rate - 2.0 * (double)(n * n * n) / 3e6) <= 1e-12 * rows[RIGHT].rate);
            assert_false(rows[OFF].matched);
            assert_false(rows[UNWRITTEN].matched);
            assert_string_equal(rows[FAILS].error, "the stand-in failed");
            assert_int_equal(calls, 3 * 3 + 1);
            free(rows);
        }
    }
    /* named variants run in the order given; an unknown one refuses the whole benchmark */
    char names[2][32] = {"off", "right"};
    struct gr_bench_row *rows;
    int nrows;
    struct gr_err e = {0};
    assert_int_equal(gr_bench_run(&fake, 3, cpu, GR_MATMUL, GR_FLOAT32, 8, names, 2, 1, &rows, &nrows, &e), GR_OK);
    assert_int_equal(nrows, 2);
    assert_string_equal(rows[0].algorithm, "off");
    assert_true(!rows[0].matched && rows[1].matched);
    free(rows);
    char unknown[1][32] = {"nope"};
    assert_int_equal(gr_bench_run(&fake, 3, cpu, GR_MATMUL, GR_FLOAT32, 8, unknown, 1, 1, &rows, &nrows, &e),
                     GR_EINVAL);
    assert_null(rows);
    assert_int_equal(gr_bench_run(&fake, 3, cpu, GR_MATMUL, GR_INT32, 8, NULL, 0, 1, &rows, &nrows, &e), GR_EUNPROC);
    /* the worker refuses what the parser would: over the GPU's limits, and the CPU's own lower ones */
    assert_int_equal(gr_bench_run(&fake, 3, cpu, GR_MATMUL, GR_FLOAT32, 8193, NULL, 0, 1, &rows, &nrows, &e),
                     GR_EUNPROC);
    assert_string_equal(e.field, "n");
    assert_int_equal(gr_bench_run(cpu, 0, cpu, GR_MATMUL, GR_FLOAT32, 1025, NULL, 0, 1, &rows, &nrows, &e),
                     GR_EUNPROC);
    assert_string_equal(e.field, "n");
    assert_int_equal(gr_bench_run(cpu, 0, cpu, GR_MATMUL, GR_FLOAT32, 1024, NULL, 0, 3, &rows, &nrows, &e),
                     GR_EUNPROC);
    assert_string_equal(e.field, "repeats");
    cpu->destroy(cpu);
}

/* The CPU benchmarked against itself: both variants match, rates are positive. */
static void test_cpu_products(void **state)
{
    struct gr_backend *cpu = gr_cpu_backend_new();
    struct gr_bench_row *rows;
    int nrows;
    struct gr_err e = {0};
    assert_int_equal(gr_bench_run(cpu, 0, cpu, GR_MATMUL, GR_FLOAT32, 100, NULL, 0, 2, &rows, &nrows, &e), GR_OK);
    assert_int_equal(nrows, cpu->nmm_algos);
    for (int k = 0; k < nrows; k++)
        assert_true(rows[k].matched && !rows[k].error[0] && rows[k].rate > 0);
    free(rows);
    assert_string_equal(gr_bench_reference(GR_MATMUL, 1024), "cpu_tiled");
    assert_string_equal(gr_bench_reference(GR_MATMUL, 1025), "cublas");
    assert_string_equal(gr_bench_reference(GR_SUM, 1 << 20), "cpu_seq");
    cpu->destroy(cpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_cpu_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
