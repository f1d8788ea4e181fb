/* cpu_matmul.h: the matrix-product request's checks (struct gr_mm_req is in gr.h), and the CPU
 * variants (OpenMP); one worker thread calls at a time and owns the request's buffers meanwhile. */
#ifndef GR_CPU_MATMUL_H
#define GR_CPU_MATMUL_H

#include "gpu/backend.h"

#ifdef __cplusplus
extern "C" { /* the CUDA path includes this too */
#endif

/* Bytes of each operand, filled by gr_mm_check. */
struct gr_mm_bytes {
    size_t a, b, c; /* c: also out's */
};

/* Validate r before anything is allocated: dtype, shape (each of m, n, k >= 1), beta != 0
 * without c, operand sizes that overflow size_t (GR_EUNPROC, field named), NULL a/b/out
 * (GR_EINVAL). Fills sz when not NULL. */
int gr_mm_check(const struct gr_mm_req *r, struct gr_mm_bytes *sz, struct gr_err *e);

/* Multiply-adds (m*n*k) below which "auto" runs cpu_naive rather than starting a team. */
#define GR_MM_CPU_AUTO_TILED (1 << 15)

enum gr_mm_cpu_variant { GR_MM_CPU_NAIVE, GR_MM_CPU_TILED, GR_MM_CPU_NVARIANTS };

/* Name and description of each CPU variant (/v1/algorithms); dtypes: float32 | float64.
 * ops and axes are 0: the reduction masks do not apply to a product. */
extern const struct gr_algo gr_mm_cpu_algos[GR_MM_CPU_NVARIANTS];

/* Run r on the CPU (r->algorithm: "auto", "cpu_naive" or "cpu_tiled"); algo_used (may be NULL)
 * gets the variant that ran. GR_EINVAL for an unknown variant, else gr_mm_check's codes. */
int gr_mm_cpu(const struct gr_mm_req *r, char algo_used[32], struct gr_err *e);

#ifdef __cplusplus
}
#endif

#endif
