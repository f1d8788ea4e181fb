/* backend.c: what every backend shares: checking that a variant covers a request (reduction or product).
 * Stateless; called from the API threads (validation) and the workers. */
#include "gpu/backend.h"

#include <string.h>

static const char *axis_name(int axis) { return axis == GR_AXIS_ALL ? "null" : axis == 0 ? "0" : "1"; }

int gr_backend_check(const struct gr_backend *b, const char *algorithm, int op, int dtype, int axis,
                     struct gr_err *e)
{
    int mm = op == GR_MATMUL;
    if (mm && !b->nmm_algos)
        return gr_fail(e, GR_EUNPROC, "op", "device %s does not run matmul", b->name);
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
