/* test_npy.c: the .npy preamble reader against a table of good and bad headers (every version,
 * key order, padding, each way to be wrong and the code it earns), and the writer read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A preamble of format version major.0 around header text (taken as is: no padding added). */
static size_t preamble(int major, const char *text, unsigned char *out)
{
    size_t n = strlen(text), at = major == 1 ? 10 : 12;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    for (size_t k = 0; k < at - 8; k++)
        out[8 + k] = (unsigned char)(n >> (8 * k));
    memcpy(out + at, text, n);
    return at + n;
}

struct good {
    int major;
    const char *text;
    int dtype, ndim;
    int64_t rows, cols; /* shape[0], shape[1] as the reader reports them */
    size_t count;
};

static const struct good goods[] = {
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }          \n", GR_FLOAT32, 1, 3, 1, 3},
    {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 5), }\n", GR_FLOAT64, 2, 2, 5, 10},
    {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }\n", GR_INT32, 0, 1, 1, 1},
    {1, "{'descr': '<i8', 'fortran_order': False, 'shape': (7,)}", GR_INT64, 1, 7, 1, 7},
    {2, "{'shape': (4, 1), 'fortran_order': False, 'descr': '<f4'}\n", GR_FLOAT32, 2, 4, 1, 4},
    {3, "{\"fortran_order\": False, \"descr\": \"<f8\", \"shape\": (1, 2,),}\n", GR_FLOAT64, 2, 1, 2, 2},
    {1, "{'descr':'i4','fortran_order':False,'shape':(2,)}", GR_INT32, 1, 2, 1, 2},
    {1, "{'descr': '|f8', 'fortran_order': False, 'shape': (2,)}", GR_FLOAT64, 1, 2, 1, 2},
    {1, "{'descr': '=i8', 'fortran_order': False, 'shape': (2L, 3L), }\n", GR_INT64, 2, 2, 3, 6},
    {1, "{\n 'descr': '<f4',\n 'fortran_order': False,\n 'shape': ( 0 , ),\n}\n", GR_FLOAT32, 1, 0, 1, 0},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904), }\n", GR_FLOAT32, 2, 0,
     4611686018427387904LL, 0},
};

struct bad {
    int major;
    const char *text;
    int code;
};

static const struct bad bads[] = {
    {1, "", GR_EINVAL},
    {1, "   \n", GR_EINVAL},
    {1, "['descr', '<f4']", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False}", GR_EINVAL},             /* no shape */
    {1, "{'fortran_order': False, 'shape': (3,)}", GR_EINVAL},              /* no descr */
    {1, "{'descr': '<f4', 'shape': (3,)}", GR_EINVAL},                      /* no fortran_order */
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", GR_EINVAL}, /* unclosed */
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", GR_EINVAL},
    {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': <f4, 'fortran_order': False, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,),,}", GR_EINVAL},
    {1, "{,}", GR_EINVAL},
    {1, "{descr: '<f4', 'fortran_order': False, 'shape': (3,)}", GR_EINVAL},
    {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '>i8', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '<u4', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '<c16', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '', 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}", GR_EMEDIA},
    {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2)}", GR_EUNPROC},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 1, 1, 1, 1, 1, 2)}", GR_EUNPROC}, /* 9-D */
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", GR_EUNPROC},
    {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", GR_EUNPROC},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", GR_EUNPROC},
};

static void test_good_headers(void **state)
{
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++) {
        const struct good *g = &goods[i];
        size_t n = preamble(g->major, g->text, buf);
        struct gr_npy h;
        struct gr_err e = {0};
        int rc = gr_npy_parse(buf, n, &h, &e);
        if (rc != GR_OK)
            fail_msg("v%d %s -> %d: %s", g->major, g->text, rc, e.msg);
        if (h.dtype != g->dtype || h.ndim != g->ndim || h.shape[0] != g->rows || h.shape[1] != g->cols ||
            h.count != g->count || h.bytes != g->count * gr_dtype_size(g->dtype) || h.data_at != n)
            fail_msg("v%d %s -> dtype %d ndim %d shape %lld x %lld count %zu bytes %zu at %zu", g->major, g->text,
                     h.dtype, h.ndim, (long long)h.shape[0], (long long)h.shape[1], h.count, h.bytes, h.data_at);
    }
}

static void test_bad_headers(void **state)
{
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        const struct bad *b = &bads[i];
        size_t n = preamble(b->major, b->text, buf);
        struct gr_npy h;
        struct gr_err e = {0};
        int rc = gr_npy_parse(buf, n, &h, &e);
        if (rc != b->code || !e.msg[0])
            fail_msg("%s -> code %d (%s); want %d", b->text, rc, e.msg, b->code);
        /* the message goes into a JSON problem: printable ASCII only */
        for (const char *c = e.msg; *c; c++)
            assert_true(*c >= 0x20 && *c < 0x7f);
    }
}

/* gr_npy_need on every prefix: 0 until the length is known, then the same answer. */
static void test_need_prefixes(void **state)
{
    unsigned char buf[512];
    for (int major = 1; major <= 3; major++) {
        size_t n = preamble(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", buf);
        size_t at = major == 1 ? 10 : 12;
        for (size_t k = 0; k <= n; k++) {
            size_t need = 99;
            struct gr_err e = {0};
            assert_int_equal(gr_npy_need(buf, k, &need, &e), GR_OK);
            assert_int_equal(need, k < at ? 0 : n);
            if (k < n) /* a truncated header is an error, not a crash */
                assert_int_equal(gr_npy_parse(buf, k, &(struct gr_npy){0}, &e), GR_EINVAL);
        }
    }
}

static void test_bad_preambles(void **state)
{
    unsigned char buf[512];
    size_t need;
    struct gr_err e = {0};
    size_t n = preamble(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", buf);
    memcpy(buf, "\x93NUMPZ", 6);
    assert_int_equal(gr_npy_need(buf, n, &need, &e), GR_EINVAL);
    assert_int_equal(gr_npy_need("P", 1, &need, &e), GR_EINVAL); /* wrong from the first byte */
    assert_int_equal(gr_npy_need("PK\x03\x04", 4, &need, &e), GR_EINVAL);
    n = preamble(4, "{}", buf);
    assert_int_equal(gr_npy_need(buf, n, &need, &e), GR_EINVAL);
    n = preamble(1, "{}", buf);
    buf[7] = 1; /* version 1.1 */
    assert_int_equal(gr_npy_need(buf, n, &need, &e), GR_EINVAL);
    n = preamble(2, "{}", buf);
    buf[10] = 1; /* header length 65536 + 2 */
    assert_int_equal(gr_npy_need(buf, n, &need, &e), GR_EINVAL);
    n = preamble(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", buf);
    buf[n - 1] = 0; /* a NUL inside the header */
    assert_int_equal(gr_npy_parse(buf, n, &(struct gr_npy){0}, &e), GR_EINVAL);
}

/* What the writer makes, the reader reads back, aligned for the values. */
static void test_writer_round_trip(void **state)
{
    const int64_t shapes[][GR_MAX_DIMS] = {{1, 1, 1, 1, 1, 1, 1, 1},
                                           {5, 1, 2, 1, 3, 1, 1, 2},
                                           {3, 7, 2, 5, 4, 3, 2, 9},
                                           {INT64_MAX, 1, 1, 1, 1, 1, 1, 1},
                                           {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                                            INT64_MAX}};
    for (int dt = 0; dt < GR_NDTYPES; dt++)
        for (int ndim = 0; ndim <= GR_MAX_DIMS; ndim++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                char buf[GR_NPY_HEADER_MAX];
                size_t n = gr_npy_header(dt, ndim, shapes[s], buf, sizeof buf);
                assert_true(n > 0 && n % 64 == 0 && buf[n - 1] == '\n');
                struct gr_npy h;
                struct gr_err e = {0};
                int rc = gr_npy_parse(buf, n, &h, &e);
                if (shapes[s][0] == INT64_MAX && ndim > 0) { /* too big to address: refused, not wrapped */
                    assert_int_equal(rc, GR_EUNPROC);
                    continue;
                }
                if (rc)
                    fail_msg("%.*s -> %s", (int)n, buf, e.msg);
                assert_int_equal(h.dtype, dt);
                assert_int_equal(h.ndim, ndim);
                assert_int_equal(h.data_at, n);
                for (int d = 0; d < GR_MAX_DIMS; d++)
                    assert_int_equal(h.shape[d], d < ndim ? shapes[s][d] : 1);
            }
    char small[GR_NPY_HEADER_MAX - 1];
    assert_int_equal(gr_npy_header(GR_FLOAT32, 1, shapes[0], small, sizeof small), 0);
    char buf[GR_NPY_HEADER_MAX];
    /* a bool result is written, never read: no job takes bools */
    size_t n = gr_npy_header(GR_BOOL, 2, shapes[1], buf, sizeof buf);
    const char *dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (5, 1), }";
    assert_true(n > 10 && !memcmp(buf + 10, dict, strlen(dict)));
    struct gr_npy h;
    struct gr_err e = {0};
    assert_int_equal(gr_npy_parse(buf, n, &h, &e), GR_EMEDIA);
    assert_int_equal(gr_npy_header(GR_BOOL + 1, 1, shapes[0], buf, sizeof buf), 0);
    assert_int_equal(gr_npy_header(GR_FLOAT32, GR_MAX_DIMS + 1, shapes[0], buf, sizeof buf), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_headers),     cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_need_prefixes),    cmocka_unit_test(test_bad_preambles),
        cmocka_unit_test(test_writer_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
