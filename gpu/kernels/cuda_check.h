/* cuda_check.h: CUDA errors into struct gr_err (the service), or onto stderr and exit (benchmarks,
 * tests); one definition for every CUDA source. Stateless. */
#ifndef GR_CUDA_CHECK_H
#define GR_CUDA_CHECK_H

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

#include "common/gr.h"

/* Fill e from a CUDA error (out of memory is GR_ENOMEM, anything else GR_ECUDA) and clear a
 * non-sticky error so the next job starts clean. */
static inline int gr_cuda_fail(struct gr_err *e, cudaError_t err, const char *what)
{
    cudaGetLastError();
    return gr_fail(e, err == cudaErrorMemoryAllocation ? GR_ENOMEM : GR_ECUDA, NULL, "CUDA error while %s: %s (%s)",
                   what, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* In a function with `struct gr_err *e` in scope that returns a GR_ code. */
#define GR_CUDA_TRY(call, what)                                                                                        \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess)                                                                                       \
            return gr_cuda_fail(e, err_, what);                                                                        \
    } while (0)

/* Programs that measure or test: a CUDA failure ends them, saying where. */
#define GR_CUDA_DIE(call)                                                                                              \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#endif
