/* test_parse.c: job submission bodies into jobs: what is accepted, exactly how it is packed,
 * and that every rejection has the right code and names the member at fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/npy.h"
#include "api/numbers.h"
#include "api/parse.h"

#include <stdlib.h>
#include <string.h>

/* A stand-in for the store: d_..01 holds 3 x 4 float32 values, d_..02 one int64 (a 0-D .npy);
 * no other dataset exists. */
static int fake_dataset(void *ctx, struct gr_job *j, const char *id, struct gr_source *src, struct gr_err *e)
{
    if (!strcmp(id, "d_0000000000000001"))
        *src = (struct gr_source){GR_FLOAT32, 2, {3, 4}, 12};
    else if (!strcmp(id, "d_0000000000000002"))
        *src = (struct gr_source){GR_INT64, 0, {1, 1}, 1};
    else
        return gr_fail(e, GR_ENOTFOUND, "dataset", "no dataset %s", id);
    snprintf(j->dataset, sizeof j->dataset, "%s", id);
    return GR_OK;
}

static struct gr_job *parse_ok(const char *body)
{
    struct gr_job *j = gr_job_new();
    struct gr_err e = {0};
    int rc = gr_parse_job(body, strlen(body), fake_dataset, NULL, j, &e);
    if (rc != GR_OK)
        fail_msg("%s -> %d: %s", body, rc, e.msg);
    return j;
}

static void test_flat_float32(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1.5,-2,3e2]}");
    assert_int_equal(j->op, GR_SUM);
    assert_int_equal(j->dtype, GR_FLOAT32);
    assert_int_equal(j->ndim, 1);
    assert_int_equal(j->shape[0], 3);
    assert_int_equal(j->axes, 1u); /* its one axis: the whole array */
    assert_int_equal(j->input_bytes, 12);
    const float *f = j->input;
    assert_true(f[0] == 1.5f && f[1] == -2.0f && f[2] == 300.0f);
    assert_string_equal(j->algorithm, "auto");
    assert_string_equal(j->device, "auto");
    gr_job_unref(j);
}

static void test_nested_int32_axis(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"argmax\",\"dtype\":\"int32\",\"data\":[[1,2,3],[4,5,-2147483648]],"
                                "\"axis\":1,\"ties\":\"last\",\"algorithm\":\"cpu_seq\",\"device\":\"cpu\"}");
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 2);
    assert_int_equal(j->shape[1], 3);
    assert_int_equal(j->axes, 2u);
    assert_int_equal(j->ties_last, 1);
    const int32_t *v = j->input;
    assert_int_equal(v[3], 4);
    assert_int_equal(v[5], INT32_MIN);
    assert_string_equal(j->algorithm, "cpu_seq");
    assert_string_equal(j->device, "cpu");
    gr_job_unref(j);
}

static void test_flat_with_shape(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"min\",\"dtype\":\"int64\",\"data\":[1,2,3,4,5,6],\"shape\":[3,2],\"axis\":0}");
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 3);
    assert_int_equal(j->shape[1], 2);
    assert_int_equal(((int64_t *)j->input)[5], 6);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"min\",\"dtype\":\"int64\",\"data\":[1,2,3],\"shape\":[3]}");
    assert_int_equal(j->ndim, 1);
    gr_job_unref(j);
}

static void test_integral_real_is_an_integer(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[2.0, -9007199254740992.0]}");
    assert_int_equal(((int64_t *)j->input)[0], 2);
    assert_int_equal(((int64_t *)j->input)[1], -9007199254740992LL);
    gr_job_unref(j);
}

struct bad {
    const char *body;
    int code;
    const char *field;
};

static const struct bad bad_bodies[] = {
    {"{", GR_EINVAL, ""},
    {"{\"op\":\"sum\"} x", GR_EINVAL, ""},
    {"[1,2]", GR_EINVAL, ""},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"op\":\"max\"}", GR_EINVAL, ""},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"bogus\":1}", GR_EINVAL, "bogus"},
    {"{\"dtype\":\"float32\",\"data\":[1]}", GR_EINVAL, "op"},
    {"{\"op\":\"median\",\"dtype\":\"float32\",\"data\":[1]}", GR_EINVAL, "op"},
    {"{\"op\":7,\"dtype\":\"float32\",\"data\":[1]}", GR_EINVAL, "op"},
    {"{\"op\":\"sum\",\"data\":[1]}", GR_EINVAL, "dtype"},
    {"{\"op\":\"sum\",\"dtype\":\"float16\",\"data\":[1]}", GR_EINVAL, "dtype"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\"}", GR_EINVAL, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":\"1,2\"}", GR_EINVAL, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,\"2\"]}", GR_EINVAL, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,null]}", GR_EINVAL, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[true]}", GR_EINVAL, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1,2],[3]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1],2]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,[2]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[[[[[[[[1]]]]]]]]]}", GR_EUNPROC, "data"}, /* 9-D */
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[[1,2],[3,4]],[[5,6]]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[[1],[2]],[3,4]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[[1],[2]],[[3],[[4]]]]}", GR_EUNPROC, "data"},
    {"{\"op\":\"argmax\",\"dtype\":\"float32\",\"data\":[[[1],[2]],[[3],[4]]],\"axis\":[0,2]}", GR_EUNPROC,
     "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[3000000000]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1.5]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[1e19]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1e39]}", GR_EUNPROC, "data"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[NaN]}", GR_EINVAL, ""},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,2,3],\"shape\":[2,2]}", GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,2,3],\"shape\":[-1,-3]}", GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"shape\":[4611686018427387904,4611686018427387904]}",
     GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"shape\":[1,1,1,1,1,1,1,1,1]}", GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"shape\":[\"1\"]}", GR_EINVAL, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1,2],[3,4]],\"shape\":[4]}", GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"ddof\":1}", GR_EUNPROC, "ddof"},
    {"{\"op\":\"var\",\"dtype\":\"float32\",\"data\":[1],\"ddof\":-1}", GR_EUNPROC, "ddof"},
    {"{\"op\":\"std\",\"dtype\":\"float32\",\"data\":[1],\"ddof\":\"1\"}", GR_EINVAL, "ddof"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"accumulate\":\"float32\"}", GR_EINVAL, "accumulate"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"accumulate\":64}", GR_EINVAL, "accumulate"},
    {"{\"op\":\"max\",\"dtype\":\"float32\",\"data\":[1],\"accumulate\":\"float64\"}", GR_EUNPROC, "accumulate"},
    {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1],\"accumulate\":\"float64\"}", GR_EUNPROC, "accumulate"},
    {"{\"op\":\"matmul\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]},\"accumulate\":\"float64\"}", GR_EUNPROC,
     "accumulate"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"axis\":2}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"axis\":1}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1]],\"axis\":-3}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1]],\"axis\":[1,-1]}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1]],\"axis\":[]}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"keepdims\":1}", GR_EINVAL, "keepdims"},
    {"{\"op\":\"matmul\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]},\"keepdims\":false}", GR_EUNPROC, "keepdims"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[[1]],\"axis\":[0.5]}", GR_EINVAL, "axis"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"axis\":\"0\"}", GR_EINVAL, "axis"},
    {"{\"op\":\"argmax\",\"dtype\":\"float32\",\"data\":[1],\"ties\":\"middle\"}", GR_EINVAL, "ties"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"dataset\":\"d_1\"}", GR_EINVAL, "dataset"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000009\"}", GR_ENOTFOUND, "dataset"},
    {"{\"op\":\"sum\",\"dataset\":7}", GR_EINVAL, "dataset"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\",\"dtype\":\"float64\"}", GR_EUNPROC, "dtype"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\",\"dtype\":\"half\"}", GR_EINVAL, "dtype"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\",\"shape\":[5,5]}", GR_EUNPROC, "shape"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\",\"shape\":[12],\"axis\":1}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\",\"dataset\":\"d_0000000000000002\",\"axis\":1}", GR_EUNPROC, "axis"},
    {"{\"op\":\"sum\"}", GR_EINVAL, "dtype"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"alpha\":2}", GR_EUNPROC, "alpha"},
    {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1],\"algorithm\":\"a-very-long-name-that-cannot-fit-here\"}",
     GR_EINVAL, "algorithm"},
    /* matmul */
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1,2]]},\"b\":{\"data\":[[1,2]]}}", GR_EUNPROC, "b"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1,2]]},\"c\":{\"data\":[[1]]}}",
     GR_EUNPROC, "c"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]},\"beta\":1}", GR_EUNPROC,
     "beta"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[1]},\"b\":{\"data\":[[1]]}}", GR_EUNPROC, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"int32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]}}", GR_EUNPROC, "dtype"},
    {"{\"op\":\"matmul\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]}}", GR_EINVAL, "dtype"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]}}", GR_EINVAL, "b"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":[[1]],\"b\":{\"data\":[[1]]}}", GR_EINVAL, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{},\"b\":{\"data\":[[1]]}}", GR_EINVAL, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]],\"x\":1},\"b\":{\"data\":[[1]]}}", GR_EINVAL, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[\"1\"]]},\"b\":{\"data\":[[1]]}}", GR_EINVAL, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1e39]]}}", GR_EUNPROC, "b"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]},\"alpha\":\"2\"}", GR_EINVAL,
     "alpha"},
    {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1]]},\"b\":{\"data\":[[1]]},\"axis\":0}", GR_EUNPROC,
     "axis"},
    {"{\"op\":\"matmul\",\"a\":{\"dataset\":\"d_0000000000000009\"},\"b\":{\"data\":[[1]]}}", GR_ENOTFOUND, "a"},
    {"{\"op\":\"matmul\",\"a\":{\"dataset\":\"d_0000000000000002\"},\"b\":{\"data\":[[1]]}}", GR_EUNPROC, "a"},
    {"{\"op\":\"matmul\",\"dtype\":\"float64\",\"a\":{\"data\":[[1,1,1]]},\"b\":{\"dataset\":\"d_0000000000000001\"}}",
     GR_EUNPROC, "b"},
};

static void test_rejections(void **state)
{
    for (size_t i = 0; i < sizeof bad_bodies / sizeof bad_bodies[0]; i++) {
        const struct bad *b = &bad_bodies[i];
        struct gr_job *j = gr_job_new();
        struct gr_err e = {0};
        int rc = gr_parse_job(b->body, strlen(b->body), fake_dataset, NULL, j, &e);
        if (rc != b->code || strcmp(e.field, b->field) || !e.msg[0])
            fail_msg("%s -> code %d field '%s' msg '%s'; want code %d field '%s'", b->body, rc, e.field, e.msg,
                     b->code, b->field);
        gr_job_unref(j);
    }
}

/* A job on a dataset takes the dataset's dtype and shape (or a view of it) and packs nothing. */
static void test_dataset_jobs(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"max\",\"dataset\":\"d_0000000000000001\",\"axis\":1}");
    assert_string_equal(j->dataset, "d_0000000000000001");
    assert_int_equal(j->dtype, GR_FLOAT32);
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 3);
    assert_int_equal(j->shape[1], 4);
    assert_int_equal(j->axes, 2u);
    assert_null(j->input);
    assert_int_equal(j->input_bytes, 48);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"sum\",\"dtype\":\"float32\",\"dataset\":\"d_0000000000000001\",\"shape\":[2,6],"
                 "\"axis\":0}");
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 2);
    assert_int_equal(j->shape[1], 6);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\",\"shape\":[12]}");
    assert_int_equal(j->ndim, 1);
    assert_int_equal(j->shape[0], 12);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"argmin\",\"dataset\":\"d_0000000000000002\"}");
    assert_int_equal(j->dtype, GR_INT64);
    assert_int_equal(j->ndim, 1);
    assert_int_equal(j->shape[0], 1);
    assert_int_equal(j->input_bytes, 8);
    gr_job_unref(j);
    /* without a way to look datasets up, a dataset job is refused, not crashed */
    j = gr_job_new();
    struct gr_err e = {0};
    const char *body = "{\"op\":\"sum\",\"dataset\":\"d_0000000000000001\"}";
    assert_int_equal(gr_parse_job(body, strlen(body), NULL, NULL, j, &e), GR_EUNPROC);
    gr_job_unref(j);
}

/* matmul: inline operands packed one after another (a, b, c), datasets named and not packed,
 * the product's shape as the job's. */
static void test_matmul_jobs(void **state)
{
    struct gr_job *j = parse_ok("{\"op\":\"matmul\",\"dtype\":\"float32\",\"a\":{\"data\":[[1,2,3],[4,5,6]]},"
                                "\"b\":{\"data\":[[7,8],[9,10],[11,12]]},\"c\":{\"data\":[[-1,-2],[-3,-4]]},"
                                "\"alpha\":2.5,\"beta\":-1}");
    assert_int_equal(j->kind, GR_JOB_MATMUL);
    assert_int_equal(j->op, GR_MATMUL);
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 2);
    assert_int_equal(j->shape[1], 2);
    assert_true(j->alpha == 2.5 && j->beta == -1);
    assert_int_equal(j->input_bytes, (6 + 6 + 4) * 4);
    const int64_t dims[3][2] = {{2, 3}, {3, 2}, {2, 2}};
    const size_t offs[3] = {0, 24, 48};
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        assert_true(j->mm[k].present && !j->mm[k].dataset[0]);
        assert_int_equal(j->mm[k].rows, dims[k][0]);
        assert_int_equal(j->mm[k].cols, dims[k][1]);
        assert_int_equal(j->mm[k].off, offs[k]);
    }
    const float want[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1, -2, -3, -4};
    assert_memory_equal(j->input, want, sizeof want);
    gr_job_unref(j);

    /* a from a 3 x 4 float32 dataset gives the dtype; only b is packed */
    j = parse_ok("{\"op\":\"matmul\",\"a\":{\"dataset\":\"d_0000000000000001\"},\"b\":{\"data\":[[1],[2],[3],[4]]}}");
    assert_int_equal(j->dtype, GR_FLOAT32);
    assert_string_equal(j->mm[0].dataset, "d_0000000000000001");
    assert_string_equal(j->dataset, "");
    assert_false(j->mm[2].present);
    assert_true(j->alpha == 1 && j->beta == 0);
    assert_int_equal(j->shape[0], 3);
    assert_int_equal(j->shape[1], 1);
    assert_int_equal(j->input_bytes, 16);
    assert_int_equal(j->mm[1].off, 0);
    const float wb[4] = {1, 2, 3, 4};
    assert_memory_equal(j->input, wb, sizeof wb);
    gr_job_unref(j);
}

/* Benchmarks: the limits depend on the op and, for products, on the device (the CPU's are lower);
 * every refusal names the member at fault. */
static void test_benchmarks(void **state)
{
    static const struct {
        const char *body;
        int64_t n;
        int repeats, nalgos;
    } good[] = {
        {"{\"op\":\"sum\",\"dtype\":\"float32\",\"n\":1000}", 1000, 20, 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"n\":268435456,\"repeats\":8}", 1 << 28, 8, 0},
        {"{\"op\":\"matmul\",\"dtype\":\"float64\",\"n\":8192,\"repeats\":16,\"algorithms\":[\"cublas\",\"regtile\"]}",
         8192, 16, 2},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":1000,\"device\":\"gpu\",\"algorithms\":[\"all\"]}", 1000, 20, 0},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":1024,\"repeats\":2,\"device\":\"cpu\"}", 1024, 2, 0},
    };
    static const struct bad bad[] = {
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"n\":268435456,\"repeats\":9}", GR_EUNPROC, "repeats"},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"n\":268435457,\"repeats\":1}", GR_EUNPROC, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":8192,\"repeats\":17}", GR_EUNPROC, "repeats"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":8193,\"repeats\":1}", GR_EUNPROC, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":1025,\"repeats\":1,\"device\":\"cpu\"}", GR_EUNPROC, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":1024,\"repeats\":3,\"device\":\"cpu\"}", GR_EUNPROC, "repeats"},
        {"{\"op\":\"matmul\",\"dtype\":\"int32\",\"n\":64}", GR_EUNPROC, "dtype"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":0}", GR_EUNPROC, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":-5}", GR_EUNPROC, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\"}", GR_EINVAL, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":64.5}", GR_EINVAL, "n"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":64,\"repeats\":0}", GR_EUNPROC, "repeats"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":64,\"repeats\":101}", GR_EUNPROC, "repeats"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":64,\"algorithms\":[]}", GR_EINVAL, "algorithms"},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"n\":64,\"a\":{\"data\":[[1]]}}", GR_EINVAL, "a"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct gr_job *j = gr_job_new();
        struct gr_err e = {0};
        if (gr_parse_benchmark(good[i].body, strlen(good[i].body), j, &e) != GR_OK)
            fail_msg("%s -> %s", good[i].body, e.msg);
        assert_int_equal(j->kind, GR_JOB_BENCH);
        assert_int_equal(j->shape[0], good[i].n);
        assert_int_equal(j->repeats, good[i].repeats);
        assert_int_equal(j->nalgos, good[i].nalgos);
        gr_job_unref(j);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gr_job *j = gr_job_new();
        struct gr_err e = {0};
        int rc = gr_parse_benchmark(bad[i].body, strlen(bad[i].body), j, &e);
        if (rc != bad[i].code || strcmp(e.field, bad[i].field) || !e.msg[0])
            fail_msg("%s -> code %d field '%s' msg '%s'; want code %d field '%s'", bad[i].body, rc, e.field, e.msg,
                     bad[i].code, bad[i].field);
        gr_job_unref(j);
    }
}

/* One-shot jobs: query arguments as members, the body's values kept as the input. */
/* "axis" as NumPy takes it: negative from the end, a list of axes, both axes the whole array
 * (masks: bit d for axis d). */
static void test_axes(void **state)
{
    (void)state;
    const struct {
        const char *axis;
        unsigned want;
    } ok[] = {{"-1", 2}, {"-2", 1}, {"[0]", 1}, {"[-1]", 2}, {"[0,1]", 3}, {"[-1,0]", 3}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[1,2],[3,4]],\"axis\":%s}", ok[i].axis);
        struct gr_job *j = parse_ok(body);
        assert_int_equal(j->axes, ok[i].want);
        gr_job_unref(j);
    }
    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    char *body = calloc(1, 16);
    json_t *q = json_pack("{s:s, s:s, s:s, s:s}", "op", "sum", "dtype", "int32", "shape", "2,2", "axis", "0,-1");
    assert_int_equal(gr_parse_binary_job(q, 0, &body, 16, j, &e), GR_OK);
    assert_int_equal(j->axes, 3u); /* ?axis=0,-1: both */
    assert_false(j->keepdims);
    json_decref(q);
    gr_job_unref(j);
}

static void test_keepdims(void **state)
{
    (void)state;
    struct gr_job *j = parse_ok("{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[1,2],[3,4]],\"axis\":0,\"keepdims\":true}");
    assert_true(j->keepdims);
    gr_job_unref(j);
    struct gr_err e = {0};
    for (int bad = 0; bad < 2; bad++) {
        j = gr_job_new();
        char *body = calloc(1, 16);
        json_t *q = json_pack("{s:s, s:s, s:s, s:s}", "op", "sum", "dtype", "int32", "shape", "2,2", "keepdims",
                              bad ? "1" : "true");
        assert_int_equal(gr_parse_binary_job(q, 0, &body, 16, j, &e), bad ? GR_EINVAL : GR_OK);
        assert_int_equal(j->keepdims, !bad);
        free(body);
        json_decref(q);
        gr_job_unref(j);
    }
}

/* "accumulate": "float64" for sums, products, means and spreads (of integers: means and spreads
 * alone), in the body or as ?accumulate=. */
static void test_accumulate(void **state)
{
    (void)state;
    struct gr_job *j = parse_ok("{\"op\":\"nanprod\",\"dtype\":\"float32\",\"data\":[1,2],\"accumulate\":\"float64\"}");
    assert_int_equal(j->acc64, 1);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"var\",\"dtype\":\"int64\",\"data\":[1,2],\"accumulate\":\"float64\"}");
    assert_int_equal(j->acc64, 1);
    gr_job_unref(j);
    j = parse_ok("{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,2]}");
    assert_int_equal(j->acc64, 0);
    gr_job_unref(j);
    struct gr_err e = {0};
    j = gr_job_new();
    char *body = calloc(1, 16);
    json_t *q = json_pack("{s:s, s:s, s:s, s:s}", "op", "mean", "dtype", "float32", "shape", "2,2", "accumulate",
                          "float64");
    assert_int_equal(gr_parse_binary_job(q, 0, &body, 16, j, &e), GR_OK);
    assert_int_equal(j->acc64, 1);
    free(body);
    json_decref(q);
    gr_job_unref(j);
}

/* "ddof" (var and std): a whole number from 0, in the body or as ?ddof=. */
static void test_ddof(void **state)
{
    (void)state;
    struct gr_job *j = parse_ok("{\"op\":\"std\",\"dtype\":\"int32\",\"data\":[[1,2],[3,4]],\"ddof\":1}");
    assert_int_equal(j->op, GR_STD);
    assert_int_equal(j->ddof, 1);
    gr_job_unref(j);
    struct gr_err e = {0};
    const char *const given[] = {"2", "x", "-1", "2.5"};
    for (int k = 0; k < 4; k++) {
        j = gr_job_new();
        char *body = calloc(1, 16);
        json_t *q = json_pack("{s:s, s:s, s:s, s:s}", "op", "var", "dtype", "int32", "shape", "2,2", "ddof", given[k]);
        assert_int_equal(gr_parse_binary_job(q, 0, &body, 16, j, &e), k ? GR_EINVAL : GR_OK);
        assert_int_equal(j->ddof, k ? 0 : 2);
        if (k)
            assert_string_equal(e.field, "ddof");
        free(body);
        json_decref(q);
        gr_job_unref(j);
    }
}

static void test_binary_jobs(void **state)
{
    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    char *body = malloc(6 * sizeof(int64_t));
    for (int k = 0; k < 6; k++)
        ((int64_t *)body)[k] = 10 * k - 7;
    json_t *q = json_pack("{s:s, s:s, s:s, s:s}", "op", "min", "dtype", "int64", "shape", "2,3", "axis", "1");
    assert_int_equal(gr_parse_binary_job(q, 0, &body, 48, j, &e), GR_OK);
    assert_null(body); /* the job keeps it */
    assert_int_equal(j->ndim, 2);
    assert_int_equal(j->shape[0], 2);
    assert_int_equal(j->shape[1], 3);
    assert_int_equal(j->axes, 2u);
    assert_int_equal(j->input_bytes, 48);
    assert_int_equal(((int64_t *)j->input)[5], 43);
    json_decref(q);
    gr_job_unref(j);

    /* a .npy: the values move to the front of the buffer, dtype and shape from its header */
    char head[GR_NPY_HEADER_MAX];
    int64_t shape[2] = {3, 1};
    size_t n = gr_npy_header(GR_FLOAT32, 1, shape, head, sizeof head);
    body = malloc(n + 12);
    memcpy(body, head, n);
    memcpy(body + n, (float[]){1.5f, -2.0f, 4.0f}, 12);
    j = gr_job_new();
    q = json_pack("{s:s}", "op", "argmax");
    assert_int_equal(gr_parse_binary_job(q, 1, &body, n + 12, j, &e), GR_OK);
    assert_int_equal(j->dtype, GR_FLOAT32);
    assert_int_equal(j->shape[0], 3);
    assert_true(((float *)j->input)[0] == 1.5f && ((float *)j->input)[2] == 4.0f);
    json_decref(q);
    gr_job_unref(j);

    const struct {
        const char *dtype, *shape, *axis;
        size_t len;
        int code;
        const char *field;
    } bad[] = {
        {NULL, NULL, NULL, 16, GR_EINVAL, "dtype"},     {"int32", NULL, NULL, 15, GR_EUNPROC, ""},
        {"int32", NULL, NULL, 0, GR_EUNPROC, ""},       {"int32", "3", NULL, 16, GR_EUNPROC, "shape"},
        {"int32", "2,x", NULL, 16, GR_EINVAL, "shape"}, {"int32", "2,2", "2", 16, GR_EUNPROC, "axis"},
        {"int32", "2,2", "1;0", 16, GR_EINVAL, "axis"},
        {"int32", NULL, "1", 16, GR_EUNPROC, "axis"},   {"int8", NULL, NULL, 16, GR_EINVAL, "dtype"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *b = calloc(1, 16);
        j = gr_job_new();
        q = json_pack("{s:s}", "op", "sum");
        if (bad[i].dtype)
            json_object_set_new(q, "dtype", json_string(bad[i].dtype));
        if (bad[i].shape)
            json_object_set_new(q, "shape", json_string(bad[i].shape));
        if (bad[i].axis)
            json_object_set_new(q, "axis", json_string(bad[i].axis));
        e = (struct gr_err){0};
        int rc = gr_parse_binary_job(q, 0, &b, bad[i].len, j, &e);
        if (rc != bad[i].code || strcmp(e.field, bad[i].field))
            fail_msg("case %zu -> %d '%s' (%s)", i, rc, e.field, e.msg);
        assert_non_null(b); /* refused: the caller keeps its buffer */
        free(b);
        json_decref(q);
        gr_job_unref(j);
    }
}

/* body with 5 spaces before its first key "data" (spaced 1), or with that key spelled "d\u0061ta"
 * (spaced 0): the same JSON either way and the same length, every later byte where it was, but
 * numbers.c leaves a key with an escape to jansson, so the two parse by the two paths. */
static char *respelled(const char *body, int spaced)
{
    const char *at = strstr(body, "\"data\"");
    char *out = malloc(strlen(body) + 8);
    assert_non_null(at);
    assert_non_null(out);
    sprintf(out, "%.*s%s%s", (int)(at - body), body, spaced ? "     \"data\"" : "\"d\\u0061ta\"", at + 6);
    return out;
}

/* The numbers read from the text and the numbers jansson reads give the same job, or the same
 * refusal word for word, for bodies at every edge of JSON's number grammar, jansson's limits and
 * the dtypes' ranges. taken: whether numbers.c reads body's data itself (else it is jansson's). */
static void same_both_ways(const char *text, int taken)
{
    struct gr_numbers read;
    char *body = respelled(text, 1), *other = respelled(text, 0);
    size_t rest_len;
    char *rest = gr_numbers_take(body, strlen(body), &read, &rest_len);
    if (!rest != !taken)
        fail_msg("%s: numbers.c %s it", body, rest ? "took" : "left");
    free(rest);
    gr_numbers_free(&read);
    struct gr_job *a = gr_job_new(), *b = gr_job_new();
    struct gr_err ea = {0}, eb = {0};
    int ra = gr_parse_job(body, strlen(body), fake_dataset, NULL, a, &ea);
    int rb = gr_parse_job(other, strlen(other), fake_dataset, NULL, b, &eb);
    if (ra != rb || strcmp(ea.msg, eb.msg) || strcmp(ea.field, eb.field))
        fail_msg("%s: %d %s [%s] against jansson's %d %s [%s]", body, ra, ea.msg, ea.field, rb, eb.msg, eb.field);
    if (ra == GR_OK) {
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->dtype, b->dtype);
        assert_int_equal(a->ndim, b->ndim);
        assert_int_equal(a->shape[0], b->shape[0]);
        assert_int_equal(a->shape[1], b->shape[1]);
        assert_int_equal(a->axes, b->axes);
        assert_int_equal(a->input_bytes, b->input_bytes);
        assert_memory_equal(a->input, b->input, a->input_bytes);
    }
    gr_job_unref(a);
    gr_job_unref(b);
    free(body);
    free(other);
}

static void test_numbers_read_from_the_text(void **state)
{
    static const struct {
        const char *body;
        int taken;
    } cases[] = {
        {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1.5,-2,3e2,0.1,-0,1E-3,2.5e+3,16777217]}", 1},
        {"{\"data\" : [ 1 , 2 ,\n 3 ]\n, \"op\":\"max\", \"dtype\":\"int64\"}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"float64\",\"data\":[1e-320,4.9e-324,1.7976931348623157e308,-0.0]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[3.5e38]}", 1},          /* over float32: 422 */
        {"{\"op\":\"sum\",\"dtype\":\"float64\",\"data\":[1e309]}", 0},           /* jansson: overflow */
        {"{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[9223372036854775807,-9223372036854775808]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[9223372036854775808]}", 0}, /* too big integer */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[2147483647,-2147483648,2.0,-4e3]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[2147483648]}", 1},      /* over int32: 422 */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[2.5]}", 1},             /* not an integer: 422 */
        {"{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[1e19]}", 1},            /* outside int64: 422 */
        {"{\"op\":\"argmax\",\"dtype\":\"int32\",\"data\":[[1,2,3],[4,5,6]],\"axis\":1}", 1},
        {"{\"op\":\"argmax\",\"dtype\":\"int32\",\"data\":[[1,2,3],[4,5,2147483648]]}", 1},
        {"{\"op\":\"min\",\"dtype\":\"int64\",\"data\":[1,2,3,4,5,6],\"shape\":[3,2],\"axis\":0}", 1},
        {"{\"op\":\"min\",\"dtype\":\"int64\",\"data\":[1,2,3,4,5,6],\"shape\":[4,2]}", 1},
        {"{\"op\":\"min\",\"dtype\":\"int64\",\"data\":[[1,2],[3,4]],\"shape\":[4]}", 1},
        {"{\"op\":\"sum\",\"data\":[1,2]}", 1},                                 /* no dtype */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2],\"dataset\":\"d_0000000000000001\"}", 1},
        {"{\"op\":\"matmul\",\"dtype\":\"float32\",\"data\":[1,2]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2],\"data\":[3]}", 1}, /* a duplicate */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2],\n\"axis\":}", 1},   /* malformed after */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2] \"axis\":0}", 1},    /* no comma after */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,\n2,\n3], \"axis\":}", 1}, /* malformed past it, lines on */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2],\"axis\":2}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2],\"nope\":1}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[01]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1.]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[.5]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[+1]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[-]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1e]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[]]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[1,2],[3]]}", 0},       /* ragged */
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[1,2],3]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,[2]]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[[[1]]]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,\"2\"]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,null]}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":\"12\"}", 0},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1,2]", 1},              /* truncated after */
        {"{\"x\":{\"data\":[1]},\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[5]}", 1}, /* nested "data" skipped */
        {"{\"x\":\"a \\\"data\\\": [\",\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[5]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int32\",\"data\":[1000000000000000000000000000000000000000000000000000000000000000000]}",
         0}, /* a token past 64 characters is jansson's */
        {"[{\"op\":\"sum\",\"data\":[1]}]", 0},
        /* at the edges of numbers.c's one-pass reals (fast_real) and integers: 2^53 digits and
         * one more, 10^22 and 10^23, 19 and 20 digits, 18 and 19 digit integers */
        {"{\"op\":\"sum\",\"dtype\":\"float64\",\"data\":[9007199254740992.0,9007199254740993.0,"
         "9007199254740993e-5,1e22,1e23,4.5e-22,4.5e-23,0.1,0.3,123.456,-0.000,5e-324]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"float64\",\"data\":[1234567890123456789.5,0.1234567890123456789,"
         "12345678901234567890e-3,0.00000000000000000000001,1.7976931348623157e308]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"float64\",\"data\":[0.14285714285714285,1.7142857142857142,"
         "2.2250738585072014e-8,9007199254740993e-3,18014398509481985e10,1234567890123456789e-27,"
         "9999999999999999999e27,9999999999999999999e28,1e-27,1e-28]}", 1},
        {"{\"op\":\"sum\",\"dtype\":\"int64\",\"data\":[999999999999999999,1000000000000000000,"
         "-999999999999999999,-1000000000000000000,0,-0]}", 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        same_both_ways(cases[k].body, cases[k].taken);
    /* many numbers of every form, drawn at random, one body per dtype */
    srand(7);
    for (int dt = 0; dt < GR_NDTYPES; dt++) {
        char *b = malloc(1 << 16);
        assert_non_null(b);
        int n = sprintf(b, "{\"op\":\"sum\",\"dtype\":\"%s\",\"data\":[", gr_dtype_name(dt));
        for (int i = 0; i < 2000; i++) {
            const char *sep = i ? "," : "";
            switch (rand() % 4) {
            case 0: n += sprintf(b + n, "%s%d", sep, rand() % 2000001 - 1000000); break;
            case 1: n += sprintf(b + n, "%s%.17g", sep, (rand() / (double)RAND_MAX - 0.5) * 1e6); break;
            case 2: n += sprintf(b + n, "%s%de%d", sep, rand() % 100, rand() % 10); break;
            default: n += sprintf(b + n, "%s%.9gE-%d", sep, rand() / (double)RAND_MAX, rand() % 40); break;
            }
        }
        sprintf(b + n, "]}");
        same_both_ways(b, 1);
        free(b);
    }
}

/* A batch body of n items, item k summing [k, 1, 2] as float32 (item bad, if >= 0, replaced by
 * what); malloc'd. */
static char *batch_body(int n, int bad, const char *what)
{
    size_t cap = (size_t)n * 96 + 64, len = 0;
    char *b = malloc(cap);
    len += (size_t)snprintf(b + len, cap - len, " [\n");
    for (int k = 0; k < n; k++)
        len += k == bad ? (size_t)snprintf(b + len, cap - len, "%s%s", k ? ", " : "", what)
                        : (size_t)snprintf(b + len, cap - len, "%s{\"op\": \"sum\", \"dtype\": \"float32\", "
                                                                "\"data\": [%d, 1, \"2\" ] }",
                                           k ? ",\n" : "", k);
    snprintf(b + len, cap - len, "\n] ");
    return b;
}

static int parse_batch(const char *body, int max, struct gr_job ***js, int *n, struct gr_err *e)
{
    memset(e, 0, sizeof *e);
    return gr_parse_batch(body, strlen(body), max, fake_dataset, NULL, js, n, e);
}

/* Big batches are read in spans on several threads: every item lands in its place, and an
 * item at fault anywhere is named as the whole body read as one tree names it. */
static void test_batch_in_spans(void **state)
{
    struct gr_job **js;
    struct gr_err e;
    int n;
    for (int count = 1; count <= 20000; count *= 9) {
        char *b = batch_body(count, -1, NULL);
        /* "2" in quotes is no number: these bodies are read as they were before */
        assert_int_equal(parse_batch(b, 100000, &js, &n, &e), GR_EINVAL);
        assert_string_equal(e.field, "[0].data");
        free(b);
    }
    for (int count = 1; count <= 20000; count = count * 9 + 1) {
        char *b = batch_body(count, -1, NULL);
        for (char *q = strstr(b, "\"2\""); q; q = strstr(q, "\"2\""))
            q[0] = q[2] = ' '; /* numbers now */
        assert_int_equal(parse_batch(b, 100000, &js, &n, &e), GR_OK);
        assert_int_equal(n, count);
        for (int k = 0; k < n; k++) {
            const float *f = js[k]->input;
            assert_int_equal(js[k]->op, GR_SUM);
            assert_int_equal(js[k]->shape[0], 3);
            assert_true(f[0] == (float)k && f[1] == 1.0f && f[2] == 2.0f);
            gr_job_unref(js[k]);
        }
        free(js);
        free(b);
    }
    static const struct {
        const char *item, *member, *msg; /* member: of item k at fault; NULL: the body's JSON */
        int rc;
    } bad[] = {
        {"{\"op\": \"sum\", \"dtype\": \"float32\", \"data\": [1], \"colour\": 1}", "colour", NULL, GR_EINVAL},
        {"{\"op\": \"sum\", \"dataset\": \"d_0000000000000009\"}", "dataset", NULL, GR_ENOTFOUND},
        {"42", "", "a job is a JSON object", GR_EINVAL},
        {"{\"op\": \"sum\", \"data\": [1,}", NULL, "malformed JSON at line", GR_EINVAL},
        {"{\"op\": \"sum\" \"data\": [1]}", NULL, "malformed JSON at line", GR_EINVAL},
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++)
        for (int at = 0; at < 12000; at += 5999) {
            char *b = batch_body(12000, at, bad[c].item), field[32];
            for (char *q = strstr(b, "\"2\""); q; q = strstr(q, "\"2\""))
                q[0] = q[2] = ' ';
            snprintf(field, sizeof field, "[%d]%s%s", at, bad[c].member && bad[c].member[0] ? "." : "",
                     bad[c].member ? bad[c].member : "");
            if (!bad[c].member)
                field[0] = '\0';
            assert_int_equal(parse_batch(b, 100000, &js, &n, &e), bad[c].rc);
            assert_string_equal(e.field, field);
            if (bad[c].msg)
                assert_non_null(strstr(e.msg, bad[c].msg));
            free(b);
        }
    /* over the limit, empty, and no array */
    char *b = batch_body(5000, -1, NULL);
    for (char *q = strstr(b, "\"2\""); q; q = strstr(q, "\"2\""))
        q[0] = q[2] = ' ';
    assert_int_equal(parse_batch(b, 4999, &js, &n, &e), GR_EUNPROC);
    assert_non_null(strstr(e.msg, "over the limit of 4999"));
    assert_int_equal(parse_batch(b, 5000, &js, &n, &e), GR_OK);
    for (int k = 0; k < n; k++)
        gr_job_unref(js[k]);
    free(js);
    free(b);
    /* the item's "[1]." before a long member name cuts it on a character boundary: the field
     * stays UTF-8 (15 bytes of "é"s and "x" past "[1]." would end in half an "é") */
    assert_int_equal(parse_batch("[{\"op\": \"sum\", \"dtype\": \"int32\", \"data\": [1]}, {\"op\": \"sum\", \"dtype\": \"int32\", \"data\": [1], "
                                 "\"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9x\": 1}]",
                                 10, &js, &n, &e),
                     GR_EINVAL);
    assert_string_equal(e.field, "[1].\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9");
    assert_int_equal(parse_batch(" [ ] ", 10, &js, &n, &e), GR_EUNPROC);
    assert_int_equal(parse_batch("{\"op\": \"sum\"}", 10, &js, &n, &e), GR_EUNPROC);
}

static void test_deep_nesting_is_an_error_not_a_crash(void **state)
{
    size_t n = 100000;
    char *body = malloc(n + 64);
    int k = snprintf(body, 64, "{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":");
    memset(body + k, '[', n);
    body[k + n] = 0;
    struct gr_job *j = gr_job_new();
    struct gr_err e = {0};
    assert_int_equal(gr_parse_job(body, strlen(body), fake_dataset, NULL, j, &e), GR_EINVAL);
    gr_job_unref(j);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_float32),
        cmocka_unit_test(test_nested_int32_axis),
        cmocka_unit_test(test_flat_with_shape),
        cmocka_unit_test(test_integral_real_is_an_integer),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_dataset_jobs),
        cmocka_unit_test(test_matmul_jobs),
        cmocka_unit_test(test_benchmarks),
        cmocka_unit_test(test_axes),
        cmocka_unit_test(test_keepdims),
        cmocka_unit_test(test_ddof),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_binary_jobs),
        cmocka_unit_test(test_deep_nesting_is_an_error_not_a_crash),
        cmocka_unit_test(test_batch_in_spans),
        cmocka_unit_test(test_numbers_read_from_the_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
