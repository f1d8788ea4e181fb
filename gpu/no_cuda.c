/* no_cuda.c: GPU discovery when gpured is built without CUDA: there are no GPUs. */
#include "gpu/backend.h"

int gr_gpu_discover(struct gr_backend **out, int max, int streams, int64_t cache_bytes, int64_t pin_bytes,
                    struct gr_err *e)
{
    gr_fail(e, GR_OK, NULL, "gpured was built without CUDA support");
    return 0;
}
