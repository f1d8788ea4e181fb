/* parse.c: validation of a job submission (a JSON body, or query arguments with a raw or .npy
 * body) into a job, by the same rules; runs on an HTTP thread.
 * Every rejection names the member at fault and says what would be accepted. */
#include "api/parse.h"

#include "api/npy.h"
#include "api/numbers.h"
#include "common/spans.h"
#include "gpu/bench.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const known[] = {"op", "dtype", "data", "dataset", "shape", "axis", "keepdims", "ddof",
                                    "accumulate", "ties", "algorithm", "device", "a", "b", "c", "alpha", "beta"};

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional string member into buf; GR_OK when absent (buf keeps its default). */
static int get_string(json_t *root, const char *key, char *buf, size_t len, struct gr_err *e)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return GR_OK;
    if (!json_is_string(v))
        return gr_fail(e, GR_EINVAL, key, "\"%s\" must be a string, not %s", key, type_name(v));
    if (json_string_length(v) >= len)
        return gr_fail(e, GR_EINVAL, key, "\"%s\" is too long (at most %zu characters)", key, len - 1);
    snprintf(buf, len, "%s", json_string_value(v));
    return GR_OK;
}

/* The element count of shape's ndim dimensions into *count: -1 if it overflows. */
static int count_of(int ndim, const int64_t *shape, int64_t *count)
{
    *count = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(*count, shape[d], count))
            return -1;
    return 0;
}

/* shape as text, "[2, 3, 4]", for messages. */
struct dims_text {
    char text[GR_MAX_DIMS * 22 + 4];
};
static const char *dims_of(struct dims_text *t, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(t->text, sizeof t->text, "[");
    for (int d = 0; d < ndim; d++)
        n += (size_t)snprintf(t->text + n, sizeof t->text - n, d ? ", %lld" : "%lld", (long long)shape[d]);
    snprintf(t->text + n, sizeof t->text - n, "]");
    return t->text;
}

/* An explicit "shape": 1 to GR_MAX_DIMS positive integers whose product is the element count;
 * with nested data (ndim > 1) it must say what the nesting does. */
static int parse_shape(json_t *v, int64_t count, int nested, const char *of, int *ndim,
                       int64_t shape[GR_MAX_DIMS], struct gr_err *e)
{
    if (!json_is_array(v))
        return gr_fail(e, GR_EINVAL, "shape", "\"shape\" must be an array like [rows, cols], not %s", type_name(v));
    size_t nd = json_array_size(v);
    if (nd < 1 || nd > GR_MAX_DIMS)
        return gr_fail(e, GR_EUNPROC, "shape", "\"shape\" has %zu dimensions; 1 to %d are supported", nd,
                       GR_MAX_DIMS);
    int64_t s[GR_MAX_DIMS], prod;
    for (size_t d = 0; d < nd; d++) {
        json_t *x = json_array_get(v, d);
        if (!json_is_integer(x))
            return gr_fail(e, GR_EINVAL, "shape", "shape[%zu] must be an integer, not %s", d, type_name(x));
        s[d] = json_integer_value(x);
        if (s[d] < 1)
            return gr_fail(e, GR_EUNPROC, "shape", "shape[%zu] is %lld; dimensions must be at least 1", d,
                           (long long)s[d]);
    }
    struct dims_text t;
    if (count_of((int)nd, s, &prod) || prod != count)
        return gr_fail(e, GR_EUNPROC, "shape", "shape %s does not hold the %lld elements of %s",
                       dims_of(&t, (int)nd, s), (long long)count, of);
    if (nested && ((int)nd != *ndim || memcmp(s, shape, nd * sizeof *s)))
        return gr_fail(e, GR_EUNPROC, "shape", "\"shape\" disagrees with the nesting of \"data\" (%s); drop one of them",
                       dims_of(&t, *ndim, shape));
    *ndim = (int)nd;
    for (int d = 0; d < GR_MAX_DIMS; d++)
        shape[d] = d < (int)nd ? s[d] : 1;
    return GR_OK;
}

/* One element into its slot of the packed input; range-checked for the dtype. */
/* Where element k of field is, for a message: "data[3]" or "data[1][2]", its indices in the
 * nesting (ndim, shape) it came in. Formatted only for a failure: a job's thousands of elements
 * would pay a printf each. */
struct place {
    char text[GR_MAX_DIMS * 22 + 40];
};
struct nest {
    const char *field;
    int ndim;
    const int64_t *shape;
};
static const char *where_in(struct place *p, const struct nest *at, size_t k, int depth)
{
    size_t idx[GR_MAX_DIMS], n = (size_t)snprintf(p->text, sizeof p->text, "%.31s", at->field);
    for (int d = at->ndim - 1; d >= 0; d--)
        idx[d] = k % (size_t)at->shape[d], k /= (size_t)at->shape[d];
    for (int d = 0; d < depth; d++)
        n += (size_t)snprintf(p->text + n, sizeof p->text - n, "[%zu]", idx[d]);
    return p->text;
}
static const char *where_of(struct place *p, const struct nest *at, size_t k) { return where_in(p, at, k, at->ndim); }

/* Number x into out[k] as dtype; on failure e names it (where_of). */
static int put(struct gr_number x, int dtype, void *out, size_t k, const struct nest *at, struct gr_err *e)
{
    const char *field = at->field;
    struct place pl;
    int is_int = x.is_int;
    long long iv = is_int ? x.iv : 0;
    double dv = is_int ? (double)iv : x.dv;
    switch (dtype) {
    case GR_INT32:
    case GR_INT64: {
        if (!is_int) {
            if (dv != floor(dv))
                return gr_fail(e, GR_EUNPROC, field, "%s is %g, not an integer as dtype %s needs",
                               where_of(&pl, at, k), dv, gr_dtype_name(dtype));
            if (!(dv >= -9223372036854775808.0 && dv < 9223372036854775808.0))
                return gr_fail(e, GR_EUNPROC, field, "%s = %g is outside the range of %s",
                               where_of(&pl, at, k), dv, gr_dtype_name(dtype));
            iv = (long long)dv;
        }
        if (dtype == GR_INT32) {
            if (iv < INT32_MIN || iv > INT32_MAX)
                return gr_fail(e, GR_EUNPROC, field, "%s = %lld is outside the range of int32",
                               where_of(&pl, at, k), (long long)iv);
            ((int32_t *)out)[k] = (int32_t)iv;
        } else {
            ((int64_t *)out)[k] = (int64_t)iv;
        }
        return GR_OK;
    }
    case GR_FLOAT32:
        if (fabs(dv) > FLT_MAX)
            return gr_fail(e, GR_EUNPROC, field, "%s = %g is outside the range of float32",
                           where_of(&pl, at, k), dv);
        ((float *)out)[k] = (float)dv;
        return GR_OK;
    default:
        ((double *)out)[k] = dv;
        return GR_OK;
    }
}

/* The arrays of data at level d of the nesting at (every one as long as nesting() read the
 * first), their numbers packed into out from *k as dtype. */
static int pack_level(json_t *data, int d, const struct nest *at, int dtype, void *out, size_t *k, struct gr_err *e)
{
    struct place pl;
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *x = json_array_get(data, i);
        if (d < at->ndim - 1) {
            if (!json_is_array(x))
                return gr_fail(e, GR_EUNPROC, at->field, "%s is %s, but the first at its level is an array of %lld",
                               where_in(&pl, at, *k, d + 1), type_name(x), (long long)at->shape[d + 1]);
            if (json_array_size(x) != (size_t)at->shape[d + 1])
                return gr_fail(e, GR_EUNPROC, at->field, "ragged: %s has %zu elements, the first at its level %lld; "
                                                         "every array at one level needs the same length",
                               where_in(&pl, at, *k, d + 1), json_array_size(x), (long long)at->shape[d + 1]);
            int rc = pack_level(x, d + 1, at, dtype, out, k, e);
            if (rc)
                return rc;
            continue;
        }
        if (json_is_array(x))
            return gr_fail(e, GR_EUNPROC, at->field, "%s is an array, deeper than the first element's %d-D nesting",
                           where_of(&pl, at, *k), at->ndim);
        if (!json_is_number(x))
            return gr_fail(e, GR_EINVAL, at->field, "%s is %s; elements must be numbers", where_of(&pl, at, *k),
                           type_name(x));
        struct gr_number n = {json_is_integer(x), json_is_integer(x) ? json_integer_value(x) : 0,
                              json_is_integer(x) ? 0 : json_real_value(x)};
        int rc = out ? put(n, dtype, out, *k, at, e) : GR_OK; /* out NULL: the nesting checked only */
        if (rc)
            return rc;
        ++*k;
    }
    return GR_OK;
}

/* The elements of data, nested as ndim and shape say, packed into out as dtype (out NULL: only
 * checked to be nested so); field names it in errors. */
static int pack(json_t *data, int ndim, const int64_t *shape, int dtype, void *out, const char *field,
                struct gr_err *e)
{
    struct nest at = {field, ndim, shape};
    size_t k = 0;
    return pack_level(data, 0, &at, dtype, out, &k, e);
}

/* The data's shape from its nesting, [..] to GR_MAX_DIMS levels deep, read along its first
 * elements, then checked whole: a ragged array's first elements may promise far more than the
 * body holds. field: the member errors are about ("data", or a matmul operand's name). */
static int nesting(json_t *data, const char *field, int *ndim, int64_t shape[GR_MAX_DIMS], struct gr_err *e)
{
    if (!json_is_array(data))
        return gr_fail(e, GR_EINVAL, field, "\"data\" must be an array of numbers or of rows, not %s",
                       type_name(data));
    int nd = 0;
    for (json_t *x = data; json_is_array(x); x = json_array_get(x, 0)) {
        if (nd == GR_MAX_DIMS)
            return gr_fail(e, GR_EUNPROC, field, "\"%s\" nests arrays deeper than %d levels; up to %d-D data is "
                                                 "supported", field, GR_MAX_DIMS, GR_MAX_DIMS);
        if (json_array_size(x) == 0)
            return gr_fail(e, GR_EUNPROC, field, nd ? "\"%s\" has empty rows: at least one element is needed"
                                                    : "\"%s\" is empty: at least one element is needed", field);
        shape[nd++] = (int64_t)json_array_size(x);
    }
    for (*ndim = nd; nd < GR_MAX_DIMS; nd++)
        shape[nd] = 1;
    return pack(data, *ndim, shape, 0, NULL, field, e);
}

/* The numbers read from the body's text (numbers.h) packed into out as dtype, as pack does. */
static int pack_read(const struct gr_numbers *x, int dtype, void *out, struct gr_err *e)
{
    struct nest at = {"data", x->ndim, x->shape};
    for (size_t k = 0; k < x->n; k++) {
        int rc = put(x->v[k], dtype, out, k, &at, e);
        if (rc)
            return rc;
    }
    return GR_OK;
}

/* j's input from data, nested as ndim and shape say (or from the numbers read from its text). */
static int fill(json_t *data, const struct gr_numbers *read, struct gr_job *j, int ndim, const int64_t *shape,
                struct gr_err *e)
{
    size_t bytes;
    if (gr_mul_size((size_t)gr_job_rows(j), (size_t)gr_job_cols(j), &bytes) ||
        gr_mul_size(bytes, gr_dtype_size(j->dtype), &bytes))
        return gr_fail(e, GR_EUNPROC, "data", "the data is too large");
    j->input = malloc(bytes);
    if (!j->input)
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory for %zu bytes of input", bytes);
    j->input_bytes = bytes;
    return read ? pack_read(read, j->dtype, j->input, e) : pack(data, ndim, shape, j->dtype, j->input, "data", e);
}

static int known_members(json_t *root, const char *const *names, size_t n, struct gr_err *e)
{
    if (!json_is_object(root))
        return gr_fail(e, GR_EINVAL, NULL, "the body must be a JSON object like {\"op\": \"sum\", \"dtype\": "
                                           "\"float32\", ...}, not %s", type_name(root));
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        size_t i = 0;
        while (i < n && strcmp(key, names[i]))
            i++;
        if (i == n)
            return gr_fail(e, GR_EINVAL, key, "unknown member \"%.64s\"", key);
    }
    return GR_OK;
}

/* "op", "dtype" and "device" (default auto), shared by jobs and benchmarks. dtype is required
 * unless the values bring theirs (a dataset, a .npy): then it is -1 when absent. */
static int op_dtype_device(json_t *root, int dtype_required, struct gr_job *j, struct gr_err *e)
{
    char op[16] = "", dtype[16] = "";
    int rc;
    if ((rc = get_string(root, "op", op, sizeof op, e)) || (rc = get_string(root, "dtype", dtype, sizeof dtype, e)) ||
        (rc = get_string(root, "device", j->device, sizeof j->device, e)))
        return rc;
    if (!op[0])
        return gr_fail(e, GR_EINVAL, "op", "\"op\" is required: sum, prod, min, max, mean, argmin, argmax or matmul");
    if ((j->op = gr_op_parse(op)) < 0)
        return gr_fail(e, GR_EINVAL, "op", "unknown op \"%s\": use sum, prod, min, max, mean, argmin, argmax or matmul",
                       op);
    j->dtype = -1;
    if (!dtype[0] && !dtype_required)
        return GR_OK;
    if (!dtype[0])
        return gr_fail(e, GR_EINVAL, "dtype", "\"dtype\" is required: int32, int64, float32 or float64");
    if ((j->dtype = gr_dtype_parse(dtype)) < 0)
        return gr_fail(e, GR_EINVAL, "dtype", "unknown dtype \"%s\": use int32, int64, float32 or float64", dtype);
    return GR_OK;
}

/* Where the values are when they are not inline: a binary body, or a dataset to look up. */
struct apart {
    const struct gr_source *body;
    gr_dataset_fn dataset;
    void *ctx;
    const struct gr_numbers *data; /* the body's "data" read from its text, or NULL */
};

/* The job takes the dtype and dimensions of values that come apart from the JSON; what names
 * them in messages. */
static int take_source(const struct gr_source *s, const char *what, struct gr_job *j, struct gr_err *e)
{
    if (j->dtype >= 0 && j->dtype != s->dtype)
        return gr_fail(e, GR_EUNPROC, "dtype", "\"dtype\" is %s but %s holds %s values: drop \"dtype\" or make it match",
                       gr_dtype_name(j->dtype), what, gr_dtype_name(s->dtype));
    j->dtype = s->dtype;
    j->ndim = s->ndim > 1 ? s->ndim : 1; /* a single value: 1-D */
    for (int d = 0; d < GR_MAX_DIMS; d++)
        j->shape[d] = s->ndim > 1 ? (d < s->ndim ? s->shape[d] : 1) : d ? 1 : s->count;
    if (gr_mul_size((size_t)s->count, gr_dtype_size(s->dtype), &j->input_bytes))
        return gr_fail(e, GR_EUNPROC, NULL, "%s is too large", what);
    return GR_OK;
}

static int is_matmul(json_t *root)
{
    const char *op = json_string_value(json_object_get(root, "op"));
    return op && !strcmp(op, "matmul");
}

/* One operand's member: {"data": [[..]]} (nesting into o->rows/cols, packed later) or
 * {"dataset": "d_..."} (looked up and pinned now; its dtype into *ds_dtype). */
static int operand(json_t *x, int k, struct gr_job *j, const struct apart *v, int *ds_dtype, struct gr_err *e)
{
    const char *name = gr_operand_names[k];
    struct gr_operand *o = &j->mm[k];
    if (!json_is_object(x))
        return gr_fail(e, GR_EINVAL, name, "\"%s\" must be an object: {\"data\": [[...], ...]} or {\"dataset\": \"d_...\"}, "
                                           "not %s", name, type_name(x));
    json_t *data = json_object_get(x, "data"), *ds = json_object_get(x, "dataset");
    const char *key;
    json_t *m;
    json_object_foreach(x, key, m)
    {
        if (strcmp(key, "data") && strcmp(key, "dataset"))
            return gr_fail(e, GR_EINVAL, name, "unknown member \"%.64s\" in \"%s\": it takes \"data\" or \"dataset\"",
                           key, name);
    }
    if (!data == !ds)
        return gr_fail(e, GR_EINVAL, name, "\"%s\" needs one of \"data\" (inline rows) or \"dataset\" (an id)%s", name,
                       data ? ", not both" : "");
    o->present = 1;
    if (data) {
        int ndim;
        int64_t shape[GR_MAX_DIMS];
        int rc = nesting(data, name, &ndim, shape, e);
        if (rc)
            return rc;
        if (ndim != 2)
            return gr_fail(e, GR_EUNPROC, name, "\"%s\" is %d-D (its first array holds %lld); matmul operands are "
                                                "2-D: [[...], ...]", name, ndim, (long long)shape[0]);
        o->rows = shape[0];
        o->cols = shape[1];
        return GR_OK;
    }
    if (!json_is_string(ds))
        return gr_fail(e, GR_EINVAL, name, "\"%s\".dataset must be a dataset's id like \"d_0123456789abcdef\", not %s",
                       name, type_name(ds));
    if (!v->dataset)
        return gr_fail(e, GR_EUNPROC, name, "stored datasets are not available here; send \"%s\" inline", name);
    struct gr_source src;
    int rc = v->dataset(v->ctx, j, json_string_value(ds), &src, e);
    /* the lookup holds the dataset in the job's reduction slot: the hold moves to the operand */
    snprintf(o->dataset, sizeof o->dataset, "%s", j->dataset);
    o->pinned = j->dataset_pinned;
    j->dataset[0] = 0;
    j->dataset_pinned = 0;
    if (rc) {
        gr_err_field(e, name);
        return rc;
    }
    if (src.ndim != 2)
        return gr_fail(e, GR_EUNPROC, name, "dataset %s is %d-D (%lld values); matmul operands are 2-D (upload with "
                                            "shape=R,C or a 2-D .npy)",
                       o->dataset, src.ndim, (long long)src.count);
    o->rows = src.shape[0];
    o->cols = src.shape[1];
    *ds_dtype = src.dtype;
    return GR_OK;
}

/* Operand k's size in bytes as the job's dtype (0 when absent); GR_EUNPROC if it overflows. */
static int operand_bytes(const struct gr_job *j, int k, size_t *bytes, struct gr_err *e)
{
    const struct gr_operand *o = &j->mm[k];
    *bytes = 0;
    if (o->present && (gr_mul_size((size_t)o->rows, (size_t)o->cols, bytes) ||
                       gr_mul_size(*bytes, gr_dtype_size(j->dtype), bytes)))
        return gr_fail(e, GR_EUNPROC, gr_operand_names[k], "\"%s\" (%lld x %lld) is too large", gr_operand_names[k],
                       (long long)o->rows, (long long)o->cols);
    return GR_OK;
}

/* A number member, def when absent. */
static int get_number(json_t *root, const char *key, double def, double *out, struct gr_err *e)
{
    json_t *v = json_object_get(root, key);
    *out = def;
    if (!v)
        return GR_OK;
    if (!json_is_number(v))
        return gr_fail(e, GR_EINVAL, key, "\"%s\" must be a number, not %s", key, type_name(v));
    *out = json_number_value(v);
    return GR_OK;
}

/* "axis" as NumPy takes it, for ndim-D data of this shape: null, an int or a list of ints, each
 * from -ndim to ndim - 1 (negative: from the end), none twice; an arg op's one axis or null.
 * Into *mask: bit d for each axis d reduced (null: every axis, and *null set). */
static int parse_axis(const json_t *axis, int op, int ndim, const int64_t *shape, unsigned *mask, int *null,
                      struct gr_err *e)
{
    struct dims_text dims;
    dims_of(&dims, ndim, shape);
    *mask = (1u << ndim) - 1;
    *null = !axis || json_is_null(axis);
    if (*null)
        return GR_OK;
    if (!json_is_integer(axis) && !json_is_array(axis))
        return gr_fail(e, GR_EINVAL, "axis", "\"axis\" must be null, an integer or a list of integers, not %s",
                       type_name(axis));
    int n = json_is_array(axis) ? (int)json_array_size(axis) : 1;
    unsigned seen = 0;
    if (n == 0)
        return gr_fail(e, GR_EUNPROC, "axis", "\"axis\": [] reduces no axis; give null for the whole array");
    for (int i = 0; i < n; i++) {
        const json_t *a = json_is_array(axis) ? json_array_get(axis, (size_t)i) : axis;
        if (!json_is_integer(a))
            return gr_fail(e, GR_EINVAL, "axis", "\"axis\" lists integers, not %s", type_name(a));
        json_int_t k = json_integer_value(a);
        if (k < -ndim || k >= ndim)
            return gr_fail(e, GR_EUNPROC, "axis", "axis %lld is out of range for %d-D data of shape %s (use %d to %d)",
                           (long long)k, ndim, dims.text, -ndim, ndim - 1);
        int at = (int)(k < 0 ? k + ndim : k);
        if (seen & (1u << at))
            return gr_fail(e, GR_EUNPROC, "axis", "\"axis\" names axis %d twice (data of shape %s)", at, dims.text);
        seen |= 1u << at;
    }
    if (gr_op_is_arg(op) && n > 1 && seen != *mask)
        return gr_fail(e, GR_EUNPROC, "axis", "%s takes one axis or null (the flat index), not %d axes of data of "
                                              "shape %s", gr_op_name(op), n, dims.text);
    *mask = seen;
    return GR_OK;
}

/* A whole number member in [lo, hi], def when absent. */
static int get_int(json_t *root, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out, struct gr_err *e)
{
    json_t *v = json_object_get(root, key);
    *out = def;
    if (!v)
        return GR_OK;
    if (!json_is_integer(v))
        return gr_fail(e, GR_EINVAL, key, "\"%s\" must be an integer, not %s", key, type_name(v));
    *out = json_integer_value(v);
    if (*out < lo || *out > hi)
        return gr_fail(e, GR_EUNPROC, key, "\"%s\" is %lld; it must be from %lld to %lld", key, (long long)*out,
                       (long long)lo, (long long)hi);
    return GR_OK;
}

/* op "matmul": c = alpha * a @ b + beta * c, operands inline (packed one after another into the
 * job's input, in the order a, b, c) or datasets; j->shape is the product's [m, n]. */
static int parse_matmul(json_t *root, struct gr_job *j, const struct apart *v, struct gr_err *e)
{
    if (v->body)
        return gr_fail(e, GR_EUNPROC, "op", "matmul takes a JSON body with \"a\" and \"b\" (inline or datasets), "
                                            "not a binary one");
    for (const char *const *m = (const char *const[]){"data", "dataset", "shape", "axis", "keepdims", "ddof", "accumulate", "ties", NULL}; *m; m++)
        if (json_object_get(root, *m))
            return gr_fail(e, GR_EUNPROC, *m, "\"%s\" is for reductions; matmul takes \"a\", \"b\" and an optional "
                                              "\"c\"",
                           *m);
    int rc = get_string(root, "algorithm", j->algorithm, sizeof j->algorithm, e);
    if (rc || (rc = get_number(root, "alpha", 1, &j->alpha, e)) || (rc = get_number(root, "beta", 0, &j->beta, e)))
        return rc;
    j->kind = GR_JOB_MATMUL;
    int ds_dtype = -1;
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        json_t *x = json_object_get(root, gr_operand_names[k]);
        if (!x && k < 2)
            return gr_fail(e, GR_EINVAL, gr_operand_names[k], "\"%s\" is required for matmul: {\"data\": [[...]]} or "
                                                           "{\"dataset\": \"d_...\"}",
                           gr_operand_names[k]);
        int dt = -1;
        if (x && (rc = operand(x, k, j, v, &dt, e)))
            return rc;
        if (dt >= 0 && (j->dtype >= 0 || ds_dtype >= 0) && dt != (j->dtype >= 0 ? j->dtype : ds_dtype))
            return gr_fail(e, GR_EUNPROC, gr_operand_names[k], "dataset %s holds %s values but the product is %s: "
                                                            "every operand needs the same dtype",
                           j->mm[k].dataset, gr_dtype_name(dt), gr_dtype_name(j->dtype >= 0 ? j->dtype : ds_dtype));
        if (dt >= 0)
            ds_dtype = dt;
    }
    if (j->dtype < 0 && ds_dtype < 0)
        return gr_fail(e, GR_EINVAL, "dtype", "\"dtype\" is required with inline operands: float32 or float64");
    if (j->dtype < 0)
        j->dtype = ds_dtype;
    if (j->dtype != GR_FLOAT32 && j->dtype != GR_FLOAT64)
        return gr_fail(e, GR_EUNPROC, "dtype", "matmul takes float32 or float64, not %s", gr_dtype_name(j->dtype));

    const struct gr_operand *a = &j->mm[0], *b = &j->mm[1], *c = &j->mm[2];
    if (a->cols != b->rows)
        return gr_fail(e, GR_EUNPROC, "b", "a is %lld x %lld and b is %lld x %lld: a's columns must equal b's rows",
                       (long long)a->rows, (long long)a->cols, (long long)b->rows, (long long)b->cols);
    if (c->present && (c->rows != a->rows || c->cols != b->cols))
        return gr_fail(e, GR_EUNPROC, "c", "c is %lld x %lld but a (%lld x %lld) @ b (%lld x %lld) is %lld x %lld",
                       (long long)c->rows, (long long)c->cols, (long long)a->rows, (long long)a->cols,
                       (long long)b->rows, (long long)b->cols, (long long)a->rows, (long long)b->cols);
    if (j->beta != 0 && !c->present)
        return gr_fail(e, GR_EUNPROC, "beta", "beta is %g but no \"c\" was given: beta != 0 needs c (%lld x %lld)",
                       j->beta, (long long)a->rows, (long long)b->cols);
    size_t out;
    if (gr_mul_size((size_t)a->rows, (size_t)b->cols, &out) || gr_mul_size(out, gr_dtype_size(j->dtype), &out))
        return gr_fail(e, GR_EUNPROC, "b", "the product of a (%lld x %lld) and b (%lld x %lld) is too large",
                       (long long)a->rows, (long long)a->cols, (long long)b->rows, (long long)b->cols);
    j->ndim = 2;
    j->shape[0] = a->rows;
    j->shape[1] = b->cols;

    /* inline operands: one allocation, in order */
    size_t total = 0, bytes;
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        if ((rc = operand_bytes(j, k, &bytes, e)))
            return rc;
        j->mm[k].off = total;
        if (j->mm[k].present && !j->mm[k].dataset[0] && __builtin_add_overflow(total, bytes, &total))
            return gr_fail(e, GR_EUNPROC, gr_operand_names[k], "the operands are too large");
    }
    if (total && !(j->input = malloc(total)))
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory for %zu bytes of operands", total);
    j->input_bytes = total;
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        if (j->mm[k].present && !j->mm[k].dataset[0] &&
            (rc = pack(json_object_get(json_object_get(root, gr_operand_names[k]), "data"), 2,
                       (const int64_t[]){j->mm[k].rows, j->mm[k].cols}, j->dtype, (char *)j->input + j->mm[k].off,
                       gr_operand_names[k], e)))
            return rc;
    return GR_OK;
}

static int parse(json_t *root, struct gr_job *j, const struct apart *v, struct gr_err *e)
{
    json_t *data = json_object_get(root, "data"), *ds = json_object_get(root, "dataset");
    int rc = known_members(root, known, sizeof known / sizeof known[0], e);
    char ties[16] = "first";
    if (rc || (rc = op_dtype_device(root, !v->body && !ds && !is_matmul(root), j, e)))
        return rc;
    if (j->op == GR_MATMUL)
        return parse_matmul(root, j, v, e);
    if ((rc = get_string(root, "ties", ties, sizeof ties, e)) ||
        (rc = get_string(root, "algorithm", j->algorithm, sizeof j->algorithm, e)))
        return rc;
    if (strcmp(ties, "first") && strcmp(ties, "last"))
        return gr_fail(e, GR_EINVAL, "ties", "unknown ties \"%s\": use first or last", ties);
    j->ties_last = !strcmp(ties, "last");
    int64_t ddof;
    if ((rc = get_int(root, "ddof", 0, INT32_MAX, 0, &ddof, e)))
        return rc;
    if (json_object_get(root, "ddof") && !gr_op_takes_ddof(j->op))
        return gr_fail(e, GR_EUNPROC, "ddof", "\"ddof\" is for var, std, nanvar and nanstd, not %s", gr_op_name(j->op));
    j->ddof = (int)ddof;
    char acc[16] = "";
    if ((rc = get_string(root, "accumulate", acc, sizeof acc, e)))
        return rc;
    if (json_object_get(root, "accumulate") && strcmp(acc, "float64"))
        return gr_fail(e, GR_EINVAL, "accumulate", "\"accumulate\" is \"float64\" (a float32 result kept float64), "
                                                   "not \"%s\"", acc);
    if (acc[0] && !gr_op_takes_accumulate(j->op))
        return gr_fail(e, GR_EUNPROC, "accumulate", "\"accumulate\" is for sums, products, means and spreads "
                                                    "(NumPy's dtype=), not %s", gr_op_name(j->op));
    j->acc64 = acc[0] != 0;
    json_t *keepdims = json_object_get(root, "keepdims");
    if (keepdims && !json_is_boolean(keepdims))
        return gr_fail(e, GR_EINVAL, "keepdims", "\"keepdims\" must be true or false, not %s", type_name(keepdims));
    j->keepdims = json_is_true(keepdims);
    for (const char *const *m = (const char *const[]){"a", "b", "c", "alpha", "beta", NULL}; *m; m++)
        if (json_object_get(root, *m))
            return gr_fail(e, GR_EUNPROC, *m, "\"%s\" is for op matmul only", *m);

    struct gr_source found;
    const struct gr_source *from = v->body;
    const char *of = v->body ? "the body" : ds ? "the dataset" : "\"data\"";
    if (v->body && (data || ds))
        return gr_fail(e, GR_EINVAL, data ? "data" : "dataset", "the values come in the body: drop \"%s\"",
                       data ? "data" : "dataset");
    if (ds && data)
        return gr_fail(e, GR_EINVAL, "dataset", "send either \"data\" or \"dataset\", not both");
    if (ds && !json_is_string(ds))
        return gr_fail(e, GR_EINVAL, "dataset", "\"dataset\" must be a dataset's id like \"d_0123456789abcdef\", not %s",
                       type_name(ds));
    if (ds && !v->dataset)
        return gr_fail(e, GR_EUNPROC, "dataset", "stored datasets are not available here; send \"data\" inline");
    if (ds && (rc = v->dataset(v->ctx, j, json_string_value(ds), &found, e)))
        return rc;
    if (ds)
        from = &found;
    if (!from && !data)
        return gr_fail(e, GR_EINVAL, "data", "\"data\" is required: the values, e.g. [1, 2, 3] or [[1, 2], [3, 4]]");
    if (!from && v->data) {
        j->ndim = v->data->ndim;
        j->shape[0] = v->data->shape[0];
        j->shape[1] = v->data->shape[1];
    } else if ((rc = from ? take_source(from, of, j, e) : nesting(data, "data", &j->ndim, j->shape, e))) {
        return rc;
    }
    int nd = j->ndim; /* inline data's nesting, for fill() */
    int64_t nests[GR_MAX_DIMS], count;
    memcpy(nests, j->shape, sizeof nests);
    if (count_of(j->ndim, j->shape, &count))
        return gr_fail(e, GR_EUNPROC, "data", "the data is too large");
    json_t *shape = json_object_get(root, "shape");
    if (shape && (rc = parse_shape(shape, count, !from && nd > 1, of, &j->ndim, j->shape, e)))
        return rc;
    if ((rc = parse_axis(json_object_get(root, "axis"), j->op, j->ndim, j->shape, &j->axes, &j->axis_null, e)))
        return rc;
    if (j->acc64 && !gr_dtype_is_float(j->dtype) && gr_result_is_int(j->op, j->dtype))
        return gr_fail(e, GR_EUNPROC, "accumulate", "%s of %s accumulates in int64, exactly: \"accumulate\": "
                                                    "\"float64\" is for float data, means and spreads",
                       gr_op_name(j->op), gr_dtype_name(j->dtype));
    return from ? GR_OK : fill(data, v->data, j, nd, nests, e);
}

#define DIMS_USAGE "?shape= must be whole numbers separated by commas, e.g. shape=1000, shape=10,100 or shape=4,8,16"

int gr_parse_dims(const char *text, int *ndim, int64_t shape[GR_MAX_DIMS], struct gr_err *e)
{
    int nd = 0;
    int64_t s[GR_MAX_DIMS];
    for (const char *p = text;; p++) {
        if (*p < '0' || *p > '9')
            return gr_fail(e, GR_EINVAL, "shape", DIMS_USAGE);
        errno = 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (nd == GR_MAX_DIMS)
            return gr_fail(e, GR_EUNPROC, "shape", "?shape= has more than %d dimensions; 1 to %d are supported",
                           GR_MAX_DIMS, GR_MAX_DIMS);
        if (errno || v < 1)
            return gr_fail(e, GR_EUNPROC, "shape", "?shape=: each dimension must be from 1 to %lld", (long long)INT64_MAX);
        s[nd++] = v;
        p = end;
        if (!*p)
            break;
        if (*p != ',')
            return gr_fail(e, GR_EINVAL, "shape", DIMS_USAGE);
    }
    *ndim = nd;
    for (int d = 0; d < GR_MAX_DIMS; d++)
        shape[d] = d < nd ? s[d] : 1;
    return GR_OK;
}

static const char *const bench_known[] = {"op", "dtype", "n", "algorithms", "repeats", "device"};

static int parse_bench(json_t *root, struct gr_job *j, const struct apart *v, struct gr_err *e)
{
    int64_t n, repeats;
    int rc = known_members(root, bench_known, sizeof bench_known / sizeof bench_known[0], e);
    if (rc || (rc = op_dtype_device(root, 1, j, e)))
        return rc;
    if (j->op == GR_MATMUL && !gr_dtype_is_float(j->dtype))
        return gr_fail(e, GR_EUNPROC, "dtype", "a matmul benchmark takes float32 or float64, not %s",
                       gr_dtype_name(j->dtype));
    if (!json_object_get(root, "n"))
        return gr_fail(e, GR_EINVAL, "n", "\"n\" is required: %s", j->op == GR_MATMUL ? "the size of the n x n operands"
                                                                                 : "the number of elements to reduce");
    /* the ranges are the worker's (gr_bench_fits); on "auto" a GPU's, rechecked where the job runs */
    if ((rc = get_int(root, "n", INT64_MIN, INT64_MAX, 0, &n, e)) ||
        (rc = get_int(root, "repeats", INT64_MIN, INT64_MAX, 20, &repeats, e)) ||
        (rc = gr_bench_fits(!strcmp(j->device, "cpu"), j->op, n, repeats, e)))
        return rc;
    j->kind = GR_JOB_BENCH;
    j->shape[0] = n;
    j->repeats = (int)repeats;
    snprintf(j->algorithm, sizeof j->algorithm, "benchmark");
    json_t *names = json_object_get(root, "algorithms");
    if (!names)
        return GR_OK;
    size_t count = json_array_size(names);
    if (!json_is_array(names) || count == 0 || count > 64)
        return gr_fail(e, GR_EINVAL, "algorithms", "\"algorithms\" must be [\"all\"] or a list of 1 to 64 names");
    for (size_t k = 0; k < count; k++) {
        json_t *x = json_array_get(names, k);
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) >= sizeof *j->algos)
            return gr_fail(e, GR_EINVAL, "algorithms", "algorithms[%zu] must be a variant name (GET /v1/algorithms)", k);
    }
    if (count == 1 && !strcmp(json_string_value(json_array_get(names, 0)), "all"))
        return GR_OK;
    if (!(j->algos = calloc(count, sizeof *j->algos)))
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < count; k++)
        snprintf(j->algos[k], sizeof j->algos[k], "%s", json_string_value(json_array_get(names, k)));
    j->nalgos = (int)count;
    return GR_OK;
}

static int decode(const char *body, size_t len, struct gr_job *j,
                  int (*fn)(json_t *, struct gr_job *, const struct apart *, struct gr_err *), const struct apart *v,
                  struct gr_err *e)
{
    json_error_t je;
    /* jansson caps nesting depth, so "[[[[..." 100k deep is a parse error, not a stack overflow */
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return gr_fail(e, GR_EINVAL, NULL, "malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
    int rc = fn(root, j, v, e);
    json_decref(root);
    return rc;
}

int gr_parse_job(const char *body, size_t len, gr_dataset_fn dataset, void *ctx, struct gr_job *j, struct gr_err *e)
{
    struct gr_numbers data;
    size_t rest_len = 0;
    char *rest = gr_numbers_take(body, len, &data, &rest_len);
    /* malformed past the numbers: jansson reads the body as sent, so its message points into it */
    json_t *root = rest ? json_loadb(rest, rest_len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    free(rest);
    int rc = root ? parse(root, j, &(struct apart){.dataset = dataset, .ctx = ctx, .data = &data}, e)
                  : decode(body, len, j, parse, &(struct apart){.dataset = dataset, .ctx = ctx}, e);
    json_decref(root);
    gr_numbers_free(&data);
    return rc;
}

/* The whole body as one jansson tree, item by item: the reading that says exactly what is wrong
 * (which item, or where the JSON breaks), used when the fast reading below found anything amiss. */
static int batch_tree(const char *body, size_t len, int max, const struct apart *v, struct gr_job ***out, int *n,
                      struct gr_err *e)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return gr_fail(e, GR_EINVAL, NULL, "malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
    size_t count = json_array_size(root);
    struct gr_job **js = NULL;
    int rc = !json_is_array(root) || !count
                 ? gr_fail(e, GR_EUNPROC, NULL, "a batch is a JSON array of 1 to %d job objects", max)
             : count > (size_t)max
                 ? gr_fail(e, GR_EUNPROC, NULL, "a batch of %zu jobs is over the limit of %d (--queue-capacity): send "
                                                "it in parts",
                           count, max)
             : !(js = calloc(count, sizeof *js)) ? gr_fail(e, GR_ENOMEM, NULL, "out of memory")
                                                : GR_OK;
    for (size_t k = 0; rc == GR_OK && k < count; k++) {
        json_t *item = json_array_get(root, k);
        if (!(js[k] = gr_job_new()))
            rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
        else if (!json_is_object(item))
            rc = gr_fail(e, GR_EINVAL, NULL, "a job is a JSON object, not %s", type_name(item));
        else
            rc = parse(item, js[k], v, e);
        if (rc)
            gr_err_at(e, (int)k);
    }
    json_decref(root);
    if (rc) {
        for (size_t k = 0; js && k < count; k++)
            gr_job_unref(js[k]);
        free(js);
        return rc;
    }
    *out = js;
    *n = (int)count;
    return GR_OK;
}

/* Where each item of a top-level JSON array starts and ends: *n items (at most max + 1, so that
 * one too many is seen), 0 if the text is no plain array of objects (left to batch_tree). Only
 * brackets and strings are followed; the items' own JSON is checked when each is read. */
static size_t skip_ws(const char *b, size_t len, size_t i)
{
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    return i;
}

static int split_items(const char *b, size_t len, int max, size_t *at, size_t *end, int *n)
{
    size_t i = skip_ws(b, len, 0);
    *n = 0;
    if (i == len || b[i++] != '[')
        return 0;
    i = skip_ws(b, len, i);
    if (i < len && b[i] == ']')
        return 0; /* empty: batch_tree says so */
    for (;;) {
        if (i == len || b[i] != '{' || *n > max)
            return 0;
        at[*n] = i;
        int depth = 0;
        for (; i < len; i++) {
            char c = b[i];
            if (c == '"') {
                for (i++; i < len && b[i] != '"'; i++)
                    i += b[i] == '\\';
            } else if (c == '{' || c == '[') {
                depth++;
            } else if ((c == '}' || c == ']') && --depth == 0) {
                break;
            }
        }
        if (i >= len)
            return 0;
        end[(*n)++] = ++i;
        i = skip_ws(b, len, i);
        if (i < len && b[i] == ',') {
            i = skip_ws(b, len, i + 1);
            continue;
        }
        if (i == len || b[i] != ']')
            return 0;
        return skip_ws(b, len, i + 1) == len;
    }
}

struct batch_read {
    const char *body;
    const size_t *at, *end;
    struct gr_job **js;
    gr_dataset_fn dataset;
    void *ctx;
    int failed; /* atomic: an item did not read; the whole body is then read by batch_tree */
};

static void read_items(void *arg, int from, int to)
{
    struct batch_read *b = arg;
    for (int k = from; k < to && !__atomic_load_n(&b->failed, __ATOMIC_RELAXED); k++) {
        struct gr_err e = {0};
        if (!(b->js[k] = gr_job_new()) ||
            gr_parse_job(b->body + b->at[k], b->end[k] - b->at[k], b->dataset, b->ctx, b->js[k], &e) != GR_OK)
            __atomic_store_n(&b->failed, 1, __ATOMIC_RELAXED);
    }
}

int gr_parse_batch(const char *body, size_t len, int max, gr_dataset_fn dataset, void *ctx, struct gr_job ***out,
                   int *n, struct gr_err *e)
{
    *out = NULL;
    *n = 0;
    /* Each item read as a body of its own (its "data" straight from the text), big batches in
     * spans on several threads: jansson's one tree of a 100k-job batch took 0.8 s of its 202 on
     * the H100 host. Anything amiss, and the whole body is read again as one tree, whose
     * messages name the item and the place. */
    size_t cap = len / 2 + 1 < (size_t)max + 1 ? len / 2 + 1 : (size_t)max + 1; /* an item is at least "{}" */
    size_t *at = malloc(cap * sizeof *at), *end = malloc(cap * sizeof *end);
    int count = 0;
    struct gr_job **js = NULL;
    if (at && end && split_items(body, len, (int)cap - 1, at, end, &count) && count <= max &&
        (js = calloc((size_t)count, sizeof *js))) {
        struct batch_read b = {body, at, end, js, dataset, ctx, 0};
        gr_spans(count, 2048, read_items, &b);
        if (b.failed) {
            for (int k = 0; k < count; k++)
                gr_job_unref(js[k]); /* a dataset one took is let go */
            free(js);
            js = NULL;
        }
    }
    free(at);
    free(end);
    if (js) {
        *out = js;
        *n = count;
        return GR_OK;
    }
    return batch_tree(body, len, max, &(struct apart){.dataset = dataset, .ctx = ctx}, out, n, e);
}

void gr_err_at(struct gr_err *e, int k)
{
    char field[sizeof e->field + 16], msg[sizeof e->msg + 40]; /* then cut to fit */
    snprintf(field, sizeof field, "[%d]%s%s", k, e->field[0] ? "." : "", e->field);
    snprintf(msg, sizeof msg, "job [%d] of the batch: %s", k, e->msg);
    gr_err_field(e, field);
    memcpy(e->msg, msg, sizeof e->msg - 1); /* a cut character: http.c's text() makes it '?' */
    e->msg[sizeof e->msg - 1] = '\0';
}

/* ?shape=, ?axis= and ?keepdims= as the JSON members they stand for; the other arguments stay
 * strings. */
static int query_members(json_t *query, struct gr_err *e)
{
    const char *shape = json_string_value(json_object_get(query, "shape"));
    const char *axis = json_string_value(json_object_get(query, "axis"));
    const char *keepdims = json_string_value(json_object_get(query, "keepdims"));
    if (keepdims && strcmp(keepdims, "true") && strcmp(keepdims, "false"))
        return gr_fail(e, GR_EINVAL, "keepdims", "?keepdims= is true or false, not '%s'", keepdims);
    if (keepdims)
        json_object_set_new(query, "keepdims", json_boolean(!strcmp(keepdims, "true")));
    const char *ddof = json_string_value(json_object_get(query, "ddof"));
    char *past = NULL;
    long long dd = ddof ? strtoll(ddof, &past, 10) : 0;
    if (ddof && (past == ddof || *past || dd < 0 || dd > INT32_MAX))
        return gr_fail(e, GR_EINVAL, "ddof", "?ddof= is a whole number from 0 (var, std, nanvar, nanstd), not '%s'", ddof);
    if (ddof)
        json_object_set_new(query, "ddof", json_integer(dd));
    if (shape) {
        int ndim, rc;
        int64_t dims[GR_MAX_DIMS];
        if ((rc = gr_parse_dims(shape, &ndim, dims, e)))
            return rc;
        json_t *list = json_array();
        for (int d = 0; d < ndim; d++)
            json_array_append_new(list, json_integer(dims[d]));
        json_object_set_new(query, "shape", list);
    }
    if (axis && (!*axis || !strcmp(axis, "null"))) {
        json_object_set_new(query, "axis", json_null());
    } else if (axis) { /* N, or N,M,...: as the JSON integer or list */
        json_t *list = json_array();
        for (const char *p = axis; list;) {
            char *end;
            long long k = strtoll(p, &end, 10);
            if (end == p || (*end && *end != ',') || k < -64 || k > 64) {
                json_decref(list);
                return gr_fail(e, GR_EINVAL, "axis", "?axis= must be null, an integer or integers separated by "
                                                     "commas (e.g. axis=1, axis=-1, axis=0,1), not '%s'", axis);
            }
            json_array_append_new(list, json_integer(k));
            if (!*end)
                break;
            p = end + 1;
        }
        if (!list)
            return gr_fail(e, GR_ENOMEM, NULL, "out of memory");
        json_object_set_new(query, "axis", json_array_size(list) == 1 && !strchr(axis, ',')
                                               ? json_incref(json_array_get(list, 0)) : json_incref(list));
        json_decref(list);
    }
    return GR_OK;
}

/* The values of a binary body: a .npy's header, or ?dtype= and the body's length. */
static int body_source(json_t *query, int npy, const char *body, size_t len, struct gr_source *src, size_t *at,
                       struct gr_err *e)
{
    *at = 0;
    if (npy) {
        struct gr_npy h;
        int rc = gr_npy_parse(body, len, &h, e);
        if (rc)
            return rc;
        if (len - h.data_at != h.bytes)
            return gr_fail(e, GR_EINVAL, NULL, "the .npy holds %zu bytes of values but its header gives %zu",
                           len - h.data_at, h.bytes);
        *src = (struct gr_source){.dtype = h.dtype, .ndim = h.ndim, .count = (int64_t)h.count};
        memcpy(src->shape, h.shape, sizeof src->shape);
        *at = h.data_at;
    } else {
        const char *dtype = json_string_value(json_object_get(query, "dtype"));
        if (!dtype)
            return gr_fail(e, GR_EINVAL, "dtype", "?dtype= is required with a raw body: int32, int64, float32 or float64");
        int dt = gr_dtype_parse(dtype);
        if (dt < 0)
            return gr_fail(e, GR_EINVAL, "dtype", "unknown ?dtype=: use int32, int64, float32 or float64");
        if (len % gr_dtype_size(dt))
            return gr_fail(e, GR_EUNPROC, NULL, "the body is %zu bytes, not a whole number of %s values", len,
                           gr_dtype_name(dt));
        *src = (struct gr_source){dt, 1, {(int64_t)(len / gr_dtype_size(dt)), 1}, (int64_t)(len / gr_dtype_size(dt))};
    }
    if (src->count == 0)
        return gr_fail(e, GR_EUNPROC, NULL, "the body holds no values: a reduction needs at least one element");
    return GR_OK;
}

int gr_parse_binary_job(json_t *query, int npy, char **body, size_t len, struct gr_job *j, struct gr_err *e)
{
    struct gr_source src;
    size_t at;
    int rc = body_source(query, npy, *body ? *body : "", len, &src, &at, e);
    if (rc || (rc = query_members(query, e)) || (rc = parse(query, j, &(struct apart){.body = &src}, e)))
        return rc;
    memmove(*body, *body + at, j->input_bytes); /* the values to the front of the buffer the job keeps */
    j->input = *body;
    *body = NULL;
    return GR_OK;
}

int gr_parse_benchmark(const char *body, size_t len, struct gr_job *j, struct gr_err *e)
{
    return decode(body, len, j, parse_bench, &(struct apart){0}, e);
}
