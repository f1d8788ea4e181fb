/* results.c: a job's result values as .npy or raw bytes: a small one rebuilt from its stored
 * resource (the JSON keeps every value exactly: integers as integers, floats to 17 digits or as
 * the strings of the non-finite ones), a large one streamed from its dataset. Runs on the
 * request's HTTP thread. */
#include "api/results.h"

#include "api/datasets.h"
#include "api/npy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double real_of(const json_t *v)
{
    const char *s = json_string_value(v);
    if (!s)
        return json_number_value(v);
    return !strcmp(s, "Infinity") ? INFINITY : !strcmp(s, "-Infinity") ? -INFINITY : NAN;
}

/* The dataset a large result's part was kept as, or NULL: the result is inline. */
static const char *kept_dataset(const json_t *job, int indices)
{
    json_t *res = json_object_get(job, "result");
    return json_string_value(json_object_get(res, indices ? "indices_dataset" : "dataset"));
}

int gr_result_part(const json_t *job, const char *part, int *indices, struct gr_err *e)
{
    *indices = part && !strcmp(part, "indices");
    if (part && !*indices && strcmp(part, "values"))
        return gr_fail(e, GR_EINVAL, "part", "?part= is values (the default) or indices");
    if (*indices && !gr_op_is_arg(gr_op_parse(json_string_value(json_object_get(job, "op")))))
        return gr_fail(e, GR_ECONFLICT, "part", "this job's result has no indices (only argmin and argmax have)");
    /* a kept result's dataset is an ordinary one: it can have been deleted since */
    const char *ds = kept_dataset(job, *indices);
    char *doc = NULL;
    int rc = ds ? gr_store_get_dataset(gr_api_store, ds, NULL, &doc, e) : GR_OK;
    free(doc);
    if (rc == GR_ENOTFOUND)
        return gr_fail(e, rc, NULL, "this job's result was kept as dataset %s, which has been deleted: its %s are gone",
                       ds, *indices ? "indices" : "values");
    return rc;
}

void gr_respond_result_data(struct gr_req *r, json_t *job, int npy, int indices)
{
    const char *ds = kept_dataset(job, indices);
    if (ds) {
        gr_respond_dataset_data(r, ds, npy);
        return;
    }
    struct gr_err e = {0};
    int op = gr_op_parse(json_string_value(json_object_get(job, "op")));
    int dtype = gr_dtype_parse(json_string_value(json_object_get(job, "dtype")));
    json_t *res = json_object_get(job, "result");
    json_t *one = json_object_get(res, indices ? "index" : "value");
    json_t *many = json_object_get(res, indices ? "indices" : "values");
    /* the values' dtype as the result names it; a result stored before results named one: int64 or float64 */
    int rtype = indices ? GR_INT64 : gr_result_dtype_parse(json_string_value(json_object_get(res, "dtype")));
    if (rtype < 0)
        rtype = gr_result_is_int(op, dtype) ? GR_INT64 : GR_FLOAT64;
    size_t size = gr_dtype_size(rtype);
    /* values nested in the result's shape (a result stored before results had a shape is 1-D) */
    json_t *shape = json_object_get(res, "shape");
    int ndim = !many ? 0 : shape ? (int)json_array_size(shape) : 1;
    int64_t dims[GR_MAX_DIMS], n = 1;
    for (int d = 0; d < ndim && d < GR_MAX_DIMS && n <= GR_RESULT_INLINE_MAX; d++) {
        dims[d] = shape ? json_integer_value(json_array_get(shape, (size_t)d)) : (int64_t)json_array_size(many);
        n = dims[d] < 1 ? GR_RESULT_INLINE_MAX + 1 : n * dims[d];
    }
    char head[GR_NPY_HEADER_MAX];
    int readable = ndim <= GR_MAX_DIMS && n <= GR_RESULT_INLINE_MAX; /* an inline result: at most that many */
    size_t hlen = npy && readable ? gr_npy_header(rtype, ndim, dims, head, sizeof head) : 0;
    size_t bytes = hlen + (size_t)n * size;
    char *buf = (one || many) && readable && (hlen || !npy) ? malloc(bytes) : NULL;
    if (!buf) {
        gr_fail(&e, one || many ? GR_ENOMEM : GR_EIO, NULL, "%s",
                one || many ? "out of memory for the result" : "the stored result is unreadable");
        gr_respond_problem(r, &e);
        return;
    }
    memcpy(buf, head, hlen);
    for (int64_t k = 0; k < n; k++) {
        json_t *v = many ? many : one;
        for (int64_t d = 0, stride = n; d < ndim; d++) { /* k's index along each dimension */
            stride /= dims[d];
            v = json_array_get(v, (size_t)(k / stride % dims[d]));
        }
        char *at = buf + hlen + (size_t)k * size; /* little-endian hosts */
        if (rtype == GR_FLOAT64)
            *(double *)(void *)at = real_of(v);
        else if (rtype == GR_FLOAT32)
            *(float *)(void *)at = (float)real_of(v);
        else if (rtype == GR_INT64)
            *(int64_t *)(void *)at = json_integer_value(v);
        else if (rtype == GR_INT32)
            *(int32_t *)(void *)at = (int32_t)json_integer_value(v);
        else
            *at = (char)json_is_true(v);
    }
    const char *hdrs[] = {"Vary", "Accept", NULL};
    gr_respond(r, 200, npy ? "application/x-npy" : "application/octet-stream", buf, bytes, hdrs);
}
