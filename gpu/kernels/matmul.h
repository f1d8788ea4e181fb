/* matmul.h: the GPU matrix-product variants (listed in matmul.cu's header), their table, the
 * launcher on device memory, and the host entry the GPU backend's worker thread calls. */
#ifndef GR_MATMUL_H
#define GR_MATMUL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "gpu/cpu_matmul.h" /* struct gr_mm_req, gr_mm_check; brings backend.h */

enum gr_mm_variant {
    GR_MM_NAIVE, GR_MM_TILED16, GR_MM_TILED32, GR_MM_REGTILE, GR_MM_CUBLAS, GR_MM_CUBLAS_TF32,
    GR_MM_NVARIANTS
};

/* Name, description and dtypes of each variant, indexed by enum gr_mm_variant (ops, axes: 0). */
extern const struct gr_algo gr_mm_algos[GR_MM_NVARIANTS];

/* Variant for an algorithm name; "auto" or NULL -> GR_MM_CUBLAS; -1 if unknown. */
int gr_mm_variant(const char *name);

/* One product on device memory, row-major with leading dimensions (elements):
 * c = alpha * a @ b + beta * c, a m x k, b k x n, c m x n; c is read only when beta != 0. */
struct gr_mm_kjob {
    int variant, dtype;
    int m, n, k;
    double alpha, beta;
    const void *a;
    int lda;
    const void *b;
    int ldb;
    void *c;
    int ldc;
};

/* Enqueue j on st; the cuBLAS variants run on blas (its stream and math mode are set here; it may
 * be NULL for the others). Returns GR_OK, GR_EUNPROC (variant does not cover the dtype, or a
 * dimension < 1), GR_ENOMEM, or GR_ECUDA with e filled. */
int gr_mm_launch(const struct gr_mm_kjob *j, cudaStream_t st, cublasHandle_t blas, struct gr_err *e);

/* What gr_mm_gpu needs from the worker that owns the device. streams[0] runs the multiplies,
 * the others (if any) the row blocks' copies; stage[] are pinned host buffers of stage_bytes
 * each, used in turn, so that pageable inputs and outputs move truly asynchronously. Device
 * memory comes from pool by cudaMallocFromPoolAsync on streams[0] (NULL: the device's default
 * pool): give the pool a release threshold so that it keeps memory between jobs. */
struct gr_mm_env {
    cudaStream_t *streams;
    int nstreams;
    cublasHandle_t blas;
    void *const *stage;
    int nstage;
    size_t stage_bytes;
    cudaMemPool_t pool;
};

/* Stage times in milliseconds from CUDA events. h2d: b, then a and c, host staging included;
 * kernel: the multiplies; d2h: out back into staging; wall: first copy to last; overlap:
 * h2d + kernel + d2h - wall (what ran at the same time; about 0 without streaming). */
struct gr_mm_timings {
    double h2d, kernel, d2h, wall, overlap;
    int blocks; /* row blocks the product ran in */
};

/* Run r (host buffers, possibly pageable) on the device of env's streams: b copied once, then
 * with r->streamed a and c in row blocks, the copies of block i+1 (on streams[1..]) overlapping
 * the multiply of block i, each block's rows of out copied back as soon as they are done;
 * without, everything copied, multiplied, copied back. Fills t and algo_used (both may be NULL).
 * Returns GR_OK, gr_mm_check's codes, GR_EINVAL (unknown variant), GR_EUNPROC (variant not for
 * the dtype, a dimension over 2^31 - 1), GR_ENOMEM (device memory) or GR_ECUDA, e filled. */
int gr_mm_gpu(const struct gr_mm_req *r, const struct gr_mm_env *env, struct gr_mm_timings *t,
              char algo_used[32], struct gr_err *e);

#ifdef __cplusplus
}
#endif

#endif
