/* backend.c: what every backend shares: checking that a variant covers a request (reduction or
 * product), and a reduction's passes. Stateless; called from the API threads (validation) and
 * the workers. */
#include "gpu/backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *axis_name(int axis) { return axis == GR_AXIS_ALL ? "null" : axis == 0 ? "0" : "1"; }

int gr_backend_check(const struct gr_backend *b, const char *algorithm, int op, int dtype, int axis,
                     struct gr_err *e)
{
    int mm = op == GR_MATMUL;
    if (mm && !b->nmm_algos)
        return gr_fail(e, GR_EUNPROC, "op", "device %s does not run matmul", b->name);
    if (!mm && !(gr_backend_ops(b) & (1u << op)))
        return gr_fail(e, GR_EUNPROC, "device", "device %s does not run %s yet: use \"device\": \"cpu\" or \"auto\"",
                       b->name, gr_op_name(op));
    if (!algorithm || strcmp(algorithm, "auto") == 0)
        return GR_OK;
    for (int i = 0; i < (mm ? b->nmm_algos : b->nalgos); i++) {
        const struct gr_algo *a = mm ? &b->mm_algos[i] : &b->algos[i];
        if (strcmp(a->name, algorithm) != 0)
            continue;
        if (mm && !(a->dtypes & (1u << dtype)))
            return gr_fail(e, GR_EUNPROC, "algorithm", "matmul variant '%s' on %s does not cover dtype %s", algorithm,
                           b->name, gr_dtype_name(dtype));
        if (!mm && (!(a->ops & (1u << op)) || !(a->dtypes & (1u << dtype)) || !(a->axes & GR_AXIS_BIT(axis))))
            return gr_fail(e, GR_EUNPROC, "algorithm",
                           "algorithm '%s' on %s does not cover op %s, dtype %s, axis %s; "
                           "GET /v1/algorithms lists what each variant covers",
                           algorithm, b->name, gr_op_name(op), gr_dtype_name(dtype), axis_name(axis));
        return GR_OK;
    }
    return gr_fail(e, GR_EINVAL, "algorithm",
                   "unknown %salgorithm '%s' for device %s; GET /v1/algorithms lists them", mm ? "matmul " : "",
                   algorithm, b->name);
}

int gr_backend_nanarg_check(int op, struct gr_result *r, struct gr_err *e)
{
    for (int64_t o = 0; (op == GR_NANARGMIN || op == GR_NANARGMAX) && o < r->n; o++)
        if (r->index[o] < 0) {
            gr_result_free(r);
            return gr_fail(e, GR_EUNPROC, "data", "%s of an all-NaN slice (output %lld of %lld): it has no answer",
                           gr_op_name(op), (long long)o, (long long)r->n);
        }
    return GR_OK;
}

unsigned gr_backend_ops(const struct gr_backend *b)
{
    unsigned ops = 0;
    for (int i = 0; i < b->nalgos; i++)
        ops |= b->algos[i].ops;
    return ops;
}

/* The op whose passes b runs op in: an op by moments as a sum on a backend that merges their
 * states on the device (chains), rather than one pass over a gathered copy. */
static int plan_op(const struct gr_backend *b, int op)
{
    return b->chains && gr_op_by_moments(op) ? GR_SUM : op;
}

/* The dtype of a pass's outputs, as the next pass reads them. */
static int outputs_dtype(int op, int dtype) { return gr_result_is_int(op, dtype) ? GR_INT64 : GR_FLOAT64; }

int gr_backend_check_axes(const struct gr_backend *b, const char *algorithm, int op, int dtype, int ndim,
                          const int64_t *shape, unsigned mask, struct gr_err *e)
{
    struct gr_pass p[GR_MAX_DIMS];
    int gather, np = gr_axes_plan(ndim, shape, mask, plan_op(b, op), p, &gather);
    for (int k = 0; k < np; k++) {
        int rc = gr_backend_check(b, algorithm, op, dtype, p[k].axis, e);
        if (rc != GR_OK)
            return rc;
        dtype = outputs_dtype(op, dtype);
        op = gr_axes_next_op(op);
    }
    return GR_OK;
}

int gr_backend_reduce_axes(struct gr_backend *b, const struct gr_reduce_req *req, int ndim, const int64_t *shape,
                           unsigned mask, struct gr_result *r, struct gr_timings *t, char algo_used[32],
                           struct gr_err *e)
{
    struct gr_pass p[GR_MAX_DIMS];
    int gather, np = gr_axes_plan(ndim, shape, mask, plan_op(b, req->op), p, &gather);
    struct gr_reduce_req q = *req;
    struct gr_result before = {0};
    struct gr_timings sum = {0};
    void *gathered = NULL;
    if (gather) { /* p[0]: every value once, kept x reduced; the job's size was checked */
        size_t bytes = (size_t)(p[0].rows * p[0].cols) * gr_dtype_size(req->dtype);
        void *map = NULL; /* a dataset's file, which a backend that takes_fd was handed */
        if (!req->data && (map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, req->fd, 0)) == MAP_FAILED)
            return gr_fail(e, GR_EIO, NULL, "mapping the dataset's %zu bytes of values: %s", bytes, strerror(errno));
        if (!(gathered = malloc(bytes))) {
            if (map)
                munmap(map, bytes);
            return gr_fail(e, GR_ENOMEM, NULL, "out of host memory for a copy of the %zu bytes of values", bytes);
        }
        gr_axes_gather(ndim, shape, mask, gr_dtype_size(req->dtype), map ? map : req->data, gathered);
        if (map)
            munmap(map, bytes);
        q.data = gathered;
        q.fd = 0;
        q.dataset = NULL; /* a cached copy holds the values as they were, not gathered */
    }
    if (b->chains && np > 1) /* the device runs the passes after the first on its own outputs */
        q.then = p + 1, q.nthen = np - 1, np = 1;
    int rc = GR_OK;
    for (int k = 0; k < np && rc == GR_OK; k++) {
        if (k) { /* the outputs before, in host memory */
            q.dtype = outputs_dtype(q.op, q.dtype);
            q.op = gr_axes_next_op(q.op);
            q.data = before.i ? (const void *)before.i : before.f;
            q.fd = 0;
            q.dataset = NULL;
        }
        q.axis = p[k].axis, q.groups = p[k].groups, q.rows = p[k].rows, q.cols = p[k].cols;
        char used[32];
        rc = b->reduce(b, &q, r, t, used, e);
        if (rc == GR_OK && !k)
            memcpy(algo_used, used, 32), sum.cache = t->cache;
        sum.h2d += t->h2d, sum.kernel += t->kernel, sum.d2h += t->d2h;
        gr_result_free(&before);
        if (rc == GR_OK && k < np - 1)
            before = *r, memset(r, 0, sizeof *r);
    }
    gr_result_free(&before);
    free(gathered);
    *t = sum;
    return rc;
}
