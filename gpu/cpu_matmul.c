/* cpu_matmul.c: matrix products on the CPU (naive loop, blocked OpenMP); one worker thread calls
 * at a time, the OpenMP teams it starts live only inside that call. */
#include "gpu/cpu_matmul.h"

#include <stdio.h>
#include <string.h>

/* Both variants accumulate in float64 whatever the dtype, summing over k in order, then apply
 * alpha and beta and round once: a float32 product is then within one float32 rounding of
 * the exact one whatever the blocking or thread count, which is what the GPU tests compare
 * against. Converting to double halves the SIMD width; the CPU is the fallback, not the fast path. */

/* Output block of one task (MB x NB float64 accumulators, 32 KiB on the stack) and the depth
 * of one pass: a KB x NB block of b (128 KiB in float32) stays in L2 while MB rows use it. */
#define MB 16
#define NB 256
#define KB 128

#define DT_MASK ((1u << GR_FLOAT32) | (1u << GR_FLOAT64))

const struct gr_algo gr_mm_cpu_algos[GR_MM_CPU_NVARIANTS] = {
    [GR_MM_CPU_NAIVE] = {"cpu_naive", "triple loop on one thread, float64 accumulators (tiny sizes)",
                         0, DT_MASK, 0},
    [GR_MM_CPU_TILED] = {"cpu_tiled",
                         "blocked 16 rows x 256 columns x 128 deep, OpenMP over the output's blocks, "
                         "float64 accumulators",
                         0, DT_MASK, 0},
};

/* out[i][j] = alpha * acc + beta * c[i][j]; c is read only when beta != 0 (BLAS rule). */
#define EPILOGUE(T, r, i, j, acc)                                                                  \
    ((T *)(r)->out)[(i) * (r)->n + (j)] =                                                          \
        (T)((r)->alpha * (acc) +                                                                   \
            ((r)->beta != 0 ? (r)->beta * (double)((const T *)(r)->c)[(i) * (r)->n + (j)] : 0.0))

#define DEFINE_MM(T)                                                                               \
    static void naive_##T(const struct gr_mm_req *r)                                               \
    {                                                                                              \
        const T *a = r->a, *b = r->b;                                                              \
        for (int64_t i = 0; i < r->m; i++)                                                         \
            for (int64_t j = 0; j < r->n; j++) {                                                   \
                double acc = 0;                                                                    \
                for (int64_t p = 0; p < r->k; p++)                                                 \
                    acc += (double)a[i * r->k + p] * (double)b[p * r->n + j];                      \
                EPILOGUE(T, r, i, j, acc);                                                         \
            }                                                                                      \
    }                                                                                              \
                                                                                                   \
    static void tiled_##T(const struct gr_mm_req *r)                                               \
    {                                                                                              \
        const T *a = r->a, *b = r->b;                                                              \
        int64_t bi = (r->m + MB - 1) / MB, bj = (r->n + NB - 1) / NB;                              \
        _Pragma("omp parallel for schedule(dynamic, 1) if (bi * bj > 1)")                          \
        for (int64_t t = 0; t < bi * bj; t++) {                                                    \
            int64_t i0 = t / bj * MB, j0 = t % bj * NB;                                            \
            int64_t mi = r->m - i0 < MB ? r->m - i0 : MB, nj = r->n - j0 < NB ? r->n - j0 : NB;    \
            double acc[MB][NB];                                                                    \
            for (int64_t i = 0; i < mi; i++)                                                       \
                for (int64_t j = 0; j < nj; j++)                                                   \
                    acc[i][j] = 0;                                                                 \
            for (int64_t p0 = 0; p0 < r->k; p0 += KB) {                                            \
                int64_t kp = r->k - p0 < KB ? r->k - p0 : KB;                                      \
                for (int64_t i = 0; i < mi; i++)                                                   \
                    for (int64_t p = p0; p < p0 + kp; p++) {                                       \
                        double av = (double)a[(i0 + i) * r->k + p];                                \
                        const T *brow = b + p * r->n + j0;                                         \
                        for (int64_t j = 0; j < nj; j++)                                           \
                            acc[i][j] += av * (double)brow[j];                                     \
                    }                                                                              \
            }                                                                                      \
            for (int64_t i = 0; i < mi; i++)                                                       \
                for (int64_t j = 0; j < nj; j++)                                                   \
                    EPILOGUE(T, r, i0 + i, j0 + j, acc[i][j]);                                     \
        }                                                                                          \
    }

DEFINE_MM(float)
DEFINE_MM(double)

int gr_mm_check(const struct gr_mm_req *r, struct gr_mm_bytes *sz, struct gr_err *e)
{
    if (r->dtype != GR_FLOAT32 && r->dtype != GR_FLOAT64)
        return gr_fail(e, GR_EUNPROC, "dtype", "matmul takes float32 or float64, not %s",
                       gr_dtype_name(r->dtype));
    if (r->m < 1 || r->n < 1 || r->k < 1)
        return gr_fail(e, GR_EUNPROC, "shape",
                       "matmul needs m, n, k >= 1: a is %lld x %lld, b is %lld x %lld",
                       (long long)r->m, (long long)r->k, (long long)r->k, (long long)r->n);
    if (r->beta != 0 && !r->c)
        return gr_fail(e, GR_EUNPROC, "c", "beta is %g but no c was given: beta != 0 needs c (%lld x %lld)",
                       r->beta, (long long)r->m, (long long)r->n);
    size_t es = gr_dtype_size(r->dtype), ab, bb, cb;
    if (gr_mul_size((size_t)r->m, (size_t)r->k, &ab) || gr_mul_size(ab, es, &ab) ||
        gr_mul_size((size_t)r->k, (size_t)r->n, &bb) || gr_mul_size(bb, es, &bb) ||
        gr_mul_size((size_t)r->m, (size_t)r->n, &cb) || gr_mul_size(cb, es, &cb))
        return gr_fail(e, GR_EUNPROC, "shape", "matmul of %lld x %lld by %lld x %lld %s is too large",
                       (long long)r->m, (long long)r->k, (long long)r->k, (long long)r->n,
                       gr_dtype_name(r->dtype));
    if (!r->a || !r->b || !r->out)
        return gr_fail(e, GR_EINVAL, NULL, "matmul without a, b or out buffer");
    if (sz) {
        sz->a = ab;
        sz->b = bb;
        sz->c = cb;
    }
    return GR_OK;
}

int gr_mm_cpu(const struct gr_mm_req *r, char algo_used[32], struct gr_err *e)
{
    int rc = gr_mm_check(r, NULL, e);
    if (rc != GR_OK)
        return rc;
    int v;
    if (!r->algorithm || strcmp(r->algorithm, "auto") == 0)
        v = (double)r->m * (double)r->n * (double)r->k < GR_MM_CPU_AUTO_TILED ? GR_MM_CPU_NAIVE
                                                                                : GR_MM_CPU_TILED;
    else if (strcmp(r->algorithm, gr_mm_cpu_algos[GR_MM_CPU_NAIVE].name) == 0)
        v = GR_MM_CPU_NAIVE;
    else if (strcmp(r->algorithm, gr_mm_cpu_algos[GR_MM_CPU_TILED].name) == 0)
        v = GR_MM_CPU_TILED;
    else
        return gr_fail(e, GR_EINVAL, "algorithm", "unknown matmul variant '%s' on the CPU: auto, %s, %s",
                       r->algorithm, gr_mm_cpu_algos[GR_MM_CPU_NAIVE].name,
                       gr_mm_cpu_algos[GR_MM_CPU_TILED].name);
    if (v == GR_MM_CPU_NAIVE && r->dtype == GR_FLOAT32)
        naive_float(r);
    else if (v == GR_MM_CPU_NAIVE)
        naive_double(r);
    else if (r->dtype == GR_FLOAT32)
        tiled_float(r);
    else
        tiled_double(r);
    if (algo_used)
        snprintf(algo_used, 32, "%s", gr_mm_cpu_algos[v].name);
    return GR_OK;
}
