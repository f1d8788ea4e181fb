/* matmul.cu: every matrix-product variant, its launcher, and the host path that stages, streams and
 * times a product; stateless, runs on the streams of the worker thread that calls it.
 *
 *   naive        one thread per element of C, the k loop straight from global memory
 *   tiled16/32   the classic shared-memory kernel: TS x TS threads, TS x TS tiles of a and b,
 *                zero-padded at the edges, one element of C per thread
 *   regtile      128 x 128 block tile, 16 deep (float64: 8), double-buffered in shared memory (a transposed),
 *                each of 256 threads accumulates an 8 x 8 block of C in registers; 16-byte loads
 *                when the shapes allow, and no edge checks when they are whole tiles
 *   cublas       cublasSgemm / cublasDgemm with the default math mode: exact FP32 (no TF32)
 *   cublas_tf32  cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to 10-bit
 *                mantissas, lower precision, float32 only, opt-in
 *
 * Every kernel accumulates in its own dtype (as cuBLAS does) and reads c only when beta != 0. */
#include "gpu/kernels/matmul.h"
#include "gpu/kernels/cuda_check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

typedef long long i64;

#define B_(x) (1u << (x))
#define DT_BOTH (B_(GR_FLOAT32) | B_(GR_FLOAT64))

extern "C" const struct gr_algo gr_mm_algos[GR_MM_NVARIANTS] = {
    {"naive", "one thread per element of C, operands straight from global memory", 0, DT_BOTH, 0},
    {"tiled16", "classic shared-memory tiles, 16 x 16, zero padding at the edges", 0, DT_BOTH, 0},
    {"tiled32", "classic shared-memory tiles, 32 x 32, zero padding at the edges", 0, DT_BOTH, 0},
    {"regtile", "our best: 128 x 128 x 16 block tiles (float64: x 8) double-buffered in shared memory, an 8 x 8 block "
                "of C per thread in registers",
     0, DT_BOTH, 0},
    {"cublas", "cuBLAS sgemm/dgemm, exact FP32/FP64 (TF32 forbidden): the reference", 0, DT_BOTH, 0},
    {"cublas_tf32", "cuBLAS with TF32 tensor cores: LOWER PRECISION (inputs rounded to 10-bit mantissas, "
                    "relative error near 1e-3), float32 only, opt-in",
     0, B_(GR_FLOAT32), 0},
};

namespace {

/* ---------------------------------------------------------------- kernels */

/* c = alpha * acc + beta * c, reading c only when beta != 0. */
template <class T> __device__ inline void put(T *c, i64 at, T acc, T alpha, T beta)
{
    c[at] = beta == T(0) ? alpha * acc : alpha * acc + beta * c[at];
}

template <class T>
__global__ void k_naive(int m, int n, int k, T alpha, const T *__restrict__ a, int lda, const T *__restrict__ b,
                        int ldb, T beta, T *c, int ldc)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n)
        return;
    T acc = 0;
    for (int p = 0; p < k; p++)
        acc += a[(i64)row * lda + p] * b[(i64)p * ldb + col];
    put(c, (i64)row * ldc + col, acc, alpha, beta);
}

template <class T, int TS>
__global__ void __launch_bounds__(TS *TS) k_tiled(int m, int n, int k, T alpha, const T *__restrict__ a, int lda,
                                                  const T *__restrict__ b, int ldb, T beta, T *c, int ldc)
{
    __shared__ T as[TS][TS], bs[TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
    T acc = 0;
    for (int p0 = 0; p0 < k; p0 += TS) {
        as[ty][tx] = row < m && p0 + tx < k ? a[(i64)row * lda + p0 + tx] : T(0);
        bs[ty][tx] = p0 + ty < k && col < n ? b[(i64)(p0 + ty) * ldb + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TS; q++)
            acc += as[ty][q] * bs[q][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        put(c, (i64)row * ldc + col, acc, alpha, beta);
}

/* Register tiling. Thread t of 256 owns rows {r0 .. +3, 64 + r0 .. +3}, r0 = t/16*4, and the same
 * columns from c0 = t%16*4: its four 4-wide pieces of a and b are 16-byte shared-memory reads,
 * the 16 threads reading b share none of a bank, and a's two addresses per warp are broadcasts.
 * (Warps owning 64 x 32 blocks of c instead measured the same on an H100.) */
struct rt {
    static constexpr int BM = 128, BN = 128, THREADS = 256, APAD = 4;
    /* tile depth: 16 for float32 halves the barriers per multiply-add; float64's two buffers of
     * 16 would pass the 48 KiB of static shared memory */
    template <class T> __host__ __device__ static constexpr int bk() { return sizeof(T) == 4 ? 16 : 8; }
};

template <class T> struct alignas(16) quad {
    T e[4];
};

/* The 4 elements at p, [col, col+4) of row `row` of a rows x cols matrix, zero outside. VEC:
 * cols, ld and the base are multiples of 4 elements / 16 bytes, so a piece is all in or all out
 * and one load. WHOLE (with VEC): every tile is inside the matrices, so no piece is checked. */
template <class T, bool VEC, bool WHOLE>
__device__ inline quad<T> load4(const T *p, int row, int col, int rows, int cols)
{
    if constexpr (WHOLE) {
        return *reinterpret_cast<const quad<T> *>(p);
    } else if constexpr (VEC) {
        return row < rows && col < cols ? *reinterpret_cast<const quad<T> *>(p) : quad<T>{};
    } else {
        quad<T> v;
#pragma unroll
        for (int i = 0; i < 4; i++)
            v.e[i] = row < rows && col + i < cols ? p[i] : T(0);
        return v;
    }
}

template <class T, bool VEC, bool WHOLE>
__global__ void __launch_bounds__(rt::THREADS, sizeof(T) == 4 ? 2 : 1)
    k_regtile(int m, int n, int k, T alpha, const T *__restrict__ a, int lda, const T *__restrict__ b, int ldb,
              T beta, T *c, int ldc)
{
    constexpr int BM = rt::BM, BN = rt::BN, BK = rt::bk<T>(), NQ = BK / 8;
    /* a transposed (as[p][row]); the pad puts the two k-halves a warp stores in different banks */
    __shared__ alignas(16) T as[2][BK][BM + rt::APAD];
    __shared__ alignas(16) T bs[2][BK][BN];
    /* this thread's rows of c: r0..r0+3 and 64 more; columns c0..c0+3 and 64 more */
    int tid = threadIdx.x, r0 = tid / 16 * 4, c0 = tid % 16 * 4;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    /* loaders, NQ pieces each, the q-th 8 deeper: a, 128 rows x 8: row tid/2, 4 of k from
     * (tid%2)*4; b, 8 x 128: row tid/32, 4 columns */
    int ar = tid / 2, ap = (tid % 2) * 4, bp = tid / 32, bc = (tid % 32) * 4;
    quad<T> ra[NQ], rb[NQ];
    auto fetch = [&](int p0) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            /* a's address in pointer steps, so that the q-th piece is the first plus 32 bytes: as
             * one int sum each piece had a 64-bit address of its own, and at the 128-register cap
             * ptxas put some on the stack (float32 0.85x cuBLAS at 2048-8192 against 0.92-0.94x
             * this way, H100, one run) */
            int br = p0 + bp + 8 * q;
            ra[q] = load4<T, VEC, WHOLE>(a + (i64)(row0 + ar) * lda + p0 + ap + 8 * q, row0 + ar, p0 + ap + 8 * q, m, k);
            rb[q] = load4<T, VEC, WHOLE>(b + (i64)br * ldb + col0 + bc, br, col0 + bc, k, n);
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                as[buf][ap + 8 * q + i][ar] = ra[q].e[i];
            *reinterpret_cast<quad<T> *>(&bs[buf][bp + 8 * q][bc]) = rb[q];
        }
    };

    T acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0;

    fetch(0);
    stash(0);
    __syncthreads();
    int tiles = (k + BK - 1) / BK;
    for (int t = 0; t < tiles; t++) {
        int cur = t & 1;
        if (t + 1 < tiles)
            fetch((t + 1) * BK); /* in flight during the multiply below */
#pragma unroll
        for (int p = 0; p < BK; p++) {
            quad<T> a0 = *reinterpret_cast<const quad<T> *>(&as[cur][p][r0]);
            quad<T> a1 = *reinterpret_cast<const quad<T> *>(&as[cur][p][r0 + 64]);
            quad<T> b0 = *reinterpret_cast<const quad<T> *>(&bs[cur][p][c0]);
            quad<T> b1 = *reinterpret_cast<const quad<T> *>(&bs[cur][p][c0 + 64]);
            T fa[8] = {a0.e[0], a0.e[1], a0.e[2], a0.e[3], a1.e[0], a1.e[1], a1.e[2], a1.e[3]};
            T fb[8] = {b0.e[0], b0.e[1], b0.e[2], b0.e[3], b1.e[0], b1.e[1], b1.e[2], b1.e[3]};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] += fa[i] * fb[j];
        }
        /* the other buffer was last read before the previous barrier: free to overwrite */
        if (t + 1 < tiles)
            stash(cur ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = row0 + r0 + (i < 4 ? i : 64 + i - 4);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int col = col0 + c0 + 64 * h;
            if (row < m)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (col + j < n)
                        put(c, (i64)row * ldc + col + j, acc[i][4 * h + j], alpha, beta);
        }
    }
}

/* ---------------------------------------------------------------- policy */

/* Launch geometry of our kernels: threads per block, rows and columns of C per block. */
struct geometry {
    dim3 block;
    int rows, cols;
};

geometry shape_of(int variant)
{
    switch (variant) {
    case GR_MM_TILED16:
        return {dim3(16, 16), 16, 16};
    case GR_MM_TILED32:
        return {dim3(32, 32), 32, 32};
    case GR_MM_REGTILE:
        return {dim3(rt::THREADS), rt::BM, rt::BN};
    default: /* naive: a warp along a row of C, so b and c are read and written coalesced */
        return {dim3(32, 8), 8, 32};
    }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* One launch of our kernel for rows [0, m) of j (m small enough for gridDim.y). */
template <class T>
cudaError_t launch_own(const gr_mm_kjob *j, int m, const T *a, T *c, cudaStream_t st)
{
    geometry g = shape_of(j->variant);
    dim3 grid((unsigned)((j->n + g.cols - 1) / g.cols), (unsigned)((m + g.rows - 1) / g.rows));
    T alpha = (T)j->alpha, beta = (T)j->beta;
    const T *b = static_cast<const T *>(j->b);
    switch (j->variant) {
    case GR_MM_NAIVE:
        k_naive<T><<<grid, g.block, 0, st>>>(m, j->n, j->k, alpha, a, j->lda, b, j->ldb, beta, c, j->ldc);
        break;
    case GR_MM_TILED16:
        k_tiled<T, 16><<<grid, g.block, 0, st>>>(m, j->n, j->k, alpha, a, j->lda, b, j->ldb, beta, c, j->ldc);
        break;
    case GR_MM_TILED32:
        k_tiled<T, 32><<<grid, g.block, 0, st>>>(m, j->n, j->k, alpha, a, j->lda, b, j->ldb, beta, c, j->ldc);
        break;
    default: {
        bool vec = j->k % 4 == 0 && j->n % 4 == 0 && j->lda % 4 == 0 && j->ldb % 4 == 0 && aligned16(a) &&
                   aligned16(b);
        /* Checking each piece of a tile against the edges costs 11-13% at 2048-8192 on an H100
         * (0.82-0.84x cuBLAS against 0.92-0.94x unchecked, one run): whole tiles skip it. */
        bool whole = vec && m % rt::BM == 0 && j->n % rt::BN == 0 && j->k % rt::bk<T>() == 0;
        auto go = [&](auto kernel) {
            kernel<<<grid, g.block, 0, st>>>(m, j->n, j->k, alpha, a, j->lda, b, j->ldb, beta, c, j->ldc);
        };
        if (whole)
            go(k_regtile<T, true, true>);
        else if (vec)
            go(k_regtile<T, true, false>);
        else
            go(k_regtile<T, false, false>);
    }
    }
    return cudaGetLastError();
}

/* gridDim.y is at most 65535: taller products go in slices of rows. */
template <class T> cudaError_t run_own(const gr_mm_kjob *j, cudaStream_t st)
{
    int slice = 65535 * shape_of(j->variant).rows;
    const T *a = static_cast<const T *>(j->a);
    T *c = static_cast<T *>(j->c);
    for (int r0 = 0; r0 < j->m; r0 += slice) {
        int m = j->m - r0 < slice ? j->m - r0 : slice;
        cudaError_t err = launch_own<T>(j, m, a + (i64)r0 * j->lda, c + (i64)r0 * j->ldc, st);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

int blas_fail(struct gr_err *e, cublasStatus_t s, const char *what)
{
    return gr_fail(e, s == CUBLAS_STATUS_ALLOC_FAILED ? GR_ENOMEM : GR_ECUDA, NULL, "cuBLAS error while %s: %s (%s)",
                   what, cublasGetStatusString(s), cublasGetStatusName(s));
}

/* Row-major C = A B is column-major C^T = B^T A^T: the same buffers, operands swapped. */
int run_blas(const gr_mm_kjob *j, cudaStream_t st, cublasHandle_t h, struct gr_err *e)
{
    if (!h)
        return gr_fail(e, GR_EINTERNAL, "algorithm", "variant '%s' needs a cuBLAS handle", gr_mm_algos[j->variant].name);
    cublasStatus_t s = cublasSetStream(h, st);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    /* the handle is the worker's: set the mode on every call so that no earlier user's TF32 (or
     * emulation) mode leaks into an exact product; the TF32 variant asks by compute type instead */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS)
        return blas_fail(e, s, "preparing the handle");
    const cublasOperation_t N = CUBLAS_OP_N;
    if (j->dtype == GR_FLOAT64) {
        s = cublasDgemm(h, N, N, j->n, j->m, j->k, &j->alpha, static_cast<const double *>(j->b), j->ldb,
                        static_cast<const double *>(j->a), j->lda, &j->beta, static_cast<double *>(j->c), j->ldc);
    } else {
        float alpha = (float)j->alpha, beta = (float)j->beta;
        if (j->variant == GR_MM_CUBLAS_TF32)
            s = cublasGemmEx(h, N, N, j->n, j->m, j->k, &alpha, j->b, CUDA_R_32F, j->ldb, j->a, CUDA_R_32F, j->lda,
                             &beta, j->c, CUDA_R_32F, j->ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
        else
            s = cublasSgemm(h, N, N, j->n, j->m, j->k, &alpha, static_cast<const float *>(j->b), j->ldb,
                            static_cast<const float *>(j->a), j->lda, &beta, static_cast<float *>(j->c), j->ldc);
    }
    return s == CUBLAS_STATUS_SUCCESS ? GR_OK : blas_fail(e, s, "multiplying");
}


} // namespace

extern "C" int gr_mm_variant(const char *name)
{
    if (!name || strcmp(name, "auto") == 0)
        return GR_MM_CUBLAS;
    for (int v = 0; v < GR_MM_NVARIANTS; v++)
        if (strcmp(gr_mm_algos[v].name, name) == 0)
            return v;
    return -1;
}

extern "C" int gr_mm_launch(const struct gr_mm_kjob *j, cudaStream_t st, cublasHandle_t blas, struct gr_err *e)
{
    if (j->variant < 0 || j->variant >= GR_MM_NVARIANTS || (j->dtype != GR_FLOAT32 && j->dtype != GR_FLOAT64) ||
        !(gr_mm_algos[j->variant].dtypes & B_(j->dtype)))
        return gr_fail(e, GR_EUNPROC, "algorithm", "matmul variant '%s' does not cover %s",
                       j->variant >= 0 && j->variant < GR_MM_NVARIANTS ? gr_mm_algos[j->variant].name : "?",
                       gr_dtype_name(j->dtype));
    if (j->m < 1 || j->n < 1 || j->k < 1)
        return gr_fail(e, GR_EUNPROC, "shape", "matmul needs m, n, k >= 1, not %d, %d, %d", j->m, j->n, j->k);
    if (j->variant == GR_MM_CUBLAS || j->variant == GR_MM_CUBLAS_TF32)
        return run_blas(j, st, blas, e);
    GR_CUDA_TRY(j->dtype == GR_FLOAT32 ? run_own<float>(j, st) : run_own<double>(j, st), "launching the kernel");
    return GR_OK;
}

/* ---------------------------------------------------------------- the host path */

namespace {

/* Rows of a block when streaming: two blocks per copy stream, whole 128-row tiles, at least one. */
i64 block_rows(i64 m, int copy_streams)
{
    i64 want = (m + 2 * copy_streams - 1) / (2 * copy_streams);
    want = (want + 127) / 128 * 128;
    return want < m ? want : m;
}

enum { EV_H0, EV_H1, EV_K0, EV_K1, EV_D0, EV_D1, EV_PER_BLOCK };

/* One call's state: the pinned buffers used in turn (each with the event of its last copy), the
 * timing events, the device operands. */
struct run {
    const gr_mm_env *env;
    int next = 0;
    std::vector<cudaEvent_t> stage_ev, ev; /* ev: start, end, b0, b1, then EV_PER_BLOCK per block */
    std::vector<bool> stage_busy;
    void *da = nullptr, *db = nullptr, *dc = nullptr;

    cudaEvent_t at(int block, int which) { return ev[4 + block * EV_PER_BLOCK + which]; }

    /* The next pinned buffer, once the copy that last used it has finished. */
    int take(struct gr_err *e, int *q)
    {
        *q = next;
        next = (next + 1) % env->nstage;
        if (stage_busy[*q])
            GR_CUDA_TRY(cudaEventSynchronize(stage_ev[*q]), "waiting for a staging buffer");
        stage_busy[*q] = false;
        return GR_OK;
    }

    /* Host (pageable) -> pinned buffer -> device on st, a buffer at a time. The last few buffers
     * are filled before any of them is queued: their copies then run back to back while the host
     * queues the multiply behind them, so the multiply starts as they end, not when the host's
     * launch (cuBLAS's set-up included) reaches an idle stream. That wait was in the kernel stage:
     * a 2048 float32 job's was 0.84x cuBLAS's own time on the H100; 4 buffers held made it 0.94x,
     * 8 made it 1.00x. */
    int upload(void *dst, const void *src, size_t bytes, cudaStream_t st, struct gr_err *e)
    {
        enum { TAIL = 8 }; /* 16 MiB, ~0.3 ms of copying at 50 GB/s */
        size_t sb = env->stage_bytes, chunks = (bytes + sb - 1) / sb;
        size_t tail = std::min({chunks, (size_t)TAIL, (size_t)env->nstage});
        auto queue = [&](int q, size_t c) {
            size_t off = c * sb, len = bytes - off < sb ? bytes - off : sb;
            cudaError_t err = cudaMemcpyAsync((char *)dst + off, env->stage[q], len, cudaMemcpyHostToDevice, st);
            stage_busy[q] = err == cudaSuccess;
            return err == cudaSuccess ? cudaEventRecord(stage_ev[q], st) : err;
        };
        int held[TAIL];
        for (size_t c = 0; c < chunks; c++) {
            size_t off = c * sb, len = bytes - off < sb ? bytes - off : sb;
            int q, rc = take(e, &q);
            if (rc != GR_OK)
                return rc;
            memcpy(env->stage[q], (const char *)src + off, len);
            if (c + tail >= chunks)
                held[c + tail - chunks] = q;
            else
                GR_CUDA_TRY(queue(q, c), "copying an operand to the GPU");
        }
        for (size_t t = 0; t < tail; t++)
            GR_CUDA_TRY(queue(held[t], chunks - tail + t), "copying an operand to the GPU");
        return GR_OK;
    }

    /* Device -> pinned buffers -> host on st: up to nstage - 1 copies in flight ahead of the
     * host's memcpy out of the oldest. */
    int download(void *dst, const void *src, size_t bytes, cudaStream_t st, struct gr_err *e)
    {
        size_t sb = env->stage_bytes, chunks = (bytes + sb - 1) / sb, lag = (size_t)env->nstage - 1;
        std::vector<int> slot(chunks);
        for (size_t j = 0; j < chunks + lag; j++) {
            if (j < chunks) {
                size_t len = bytes - j * sb < sb ? bytes - j * sb : sb;
                int rc = take(e, &slot[j]);
                if (rc != GR_OK)
                    return rc;
                GR_CUDA_TRY(cudaMemcpyAsync(env->stage[slot[j]], (const char *)src + j * sb, len, cudaMemcpyDeviceToHost,
                                         st),
                         "copying the product from the GPU");
                GR_CUDA_TRY(cudaEventRecord(stage_ev[slot[j]], st), "recording a copy");
                stage_busy[slot[j]] = true;
            }
            if (j >= lag) {
                size_t d = j - lag, len = bytes - d * sb < sb ? bytes - d * sb : sb;
                GR_CUDA_TRY(cudaEventSynchronize(stage_ev[slot[d]]), "multiplying and copying the product back");
                memcpy((char *)dst + d * sb, env->stage[slot[d]], len);
                stage_busy[slot[d]] = false;
            }
        }
        return GR_OK;
    }

    double ms(cudaEvent_t a, cudaEvent_t b)
    {
        float t = 0;
        return cudaEventElapsedTime(&t, a, b) == cudaSuccess ? t : 0;
    }
};

int alloc(run *R, void **p, size_t bytes, const char *what, struct gr_err *e)
{
    cudaStream_t st = R->env->streams[0];
    cudaError_t err = R->env->pool ? cudaMallocFromPoolAsync(p, bytes, R->env->pool, st) : cudaMallocAsync(p, bytes, st);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total = 0;
        cudaGetLastError();
        *p = nullptr;
        cudaMemGetInfo(&free_b, &total);
        return gr_fail(e, GR_ENOMEM, NULL, "out of GPU memory: the product's %s needs %zu MiB, %zu MiB of %zu are free",
                       what, bytes >> 20, free_b >> 20, total >> 20);
    }
    if (err != cudaSuccess)
        *p = nullptr;
    GR_CUDA_TRY(err, "allocating device memory");
    return GR_OK;
}

/* The stream that copies block i: streams[1..] in turn when streaming, else streams[0]. */
cudaStream_t copy_stream(const gr_mm_env *env, const gr_mm_req *r, int i)
{
    return r->streamed && env->nstreams > 1 ? env->streams[1 + i % (env->nstreams - 1)] : env->streams[0];
}

/* Block i's rows of the product back to r->out, on the stream that copied its inputs. */
int drain(run *R, const gr_mm_req *r, int i, i64 rb, size_t c_row, struct gr_err *e)
{
    cudaStream_t cs = copy_stream(R->env, r, i);
    i64 r0 = (i64)i * rb, rows = r->m - r0 < rb ? r->m - r0 : rb;
    GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_D0), cs), "timing the copy back");
    int rc = R->download((char *)r->out + r0 * c_row, (const char *)R->dc + r0 * c_row, rows * c_row, cs, e);
    if (rc != GR_OK)
        return rc;
    GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_D1), cs), "timing the copy back");
    return GR_OK;
}

/* Everything after the allocations; on an error the caller still joins the streams and frees. */
int stream_product(run *R, const gr_mm_req *r, int variant, const gr_mm_bytes *sz, struct gr_mm_timings *t,
                   struct gr_err *e)
{
    const gr_mm_env *env = R->env;
    cudaStream_t st0 = env->streams[0];
    int ncopy = env->nstreams > 1 ? env->nstreams - 1 : 1;
    i64 rb = r->streamed ? block_rows(r->m, ncopy) : r->m;
    int nb = (int)((r->m + rb - 1) / rb);
    size_t es = gr_dtype_size(r->dtype), a_row = (size_t)r->k * es, c_row = (size_t)r->n * es;
    R->ev.resize(4 + (size_t)nb * EV_PER_BLOCK);
    for (auto &v : R->ev)
        GR_CUDA_TRY(cudaEventCreate(&v), "creating an event");
    t->blocks = nb;

    GR_CUDA_TRY(cudaEventRecord(R->ev[0], st0), "timing the product");
    GR_CUDA_TRY(cudaEventRecord(R->ev[2], st0), "timing the product");
    int rc = R->upload(R->db, r->b, sz->b, st0, e);
    if (rc != GR_OK)
        return rc;
    GR_CUDA_TRY(cudaEventRecord(R->ev[3], st0), "timing the product");

    /* st0 waits for each block's inputs, the block's copy stream for its product. */
    for (int i = 0; i < nb; i++) {
        cudaStream_t cs = copy_stream(env, r, i);
        i64 r0 = (i64)i * rb, rows = r->m - r0 < rb ? r->m - r0 : rb;
        GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_H0), cs), "timing the copies");
        if ((rc = R->upload((char *)R->da + r0 * a_row, (const char *)r->a + r0 * a_row, rows * a_row, cs, e)) != GR_OK)
            return rc;
        if (r->beta != 0 &&
            (rc = R->upload((char *)R->dc + r0 * c_row, (const char *)r->c + r0 * c_row, rows * c_row, cs, e)) != GR_OK)
            return rc;
        GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_H1), cs), "timing the copies");
        GR_CUDA_TRY(cudaStreamWaitEvent(st0, R->at(i, EV_H1), 0), "ordering the multiply");

        GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_K0), st0), "timing the multiply");
        gr_mm_kjob j = {variant, r->dtype, (int)rows, (int)r->n, (int)r->k, r->alpha, r->beta,
                        (const char *)R->da + r0 * a_row, (int)r->k, R->db, (int)r->n,
                        (char *)R->dc + r0 * c_row, (int)r->n};
        if ((rc = gr_mm_launch(&j, st0, env->blas, e)) != GR_OK)
            return rc;
        GR_CUDA_TRY(cudaEventRecord(R->at(i, EV_K1), st0), "timing the multiply");
        GR_CUDA_TRY(cudaStreamWaitEvent(cs, R->at(i, EV_K1), 0), "ordering the copy back");
        /* the product of the previous block comes back while this one multiplies */
        if (i > 0 && (rc = drain(R, r, i - 1, rb, c_row, e)) != GR_OK)
            return rc;
    }
    if ((rc = drain(R, r, nb - 1, rb, c_row, e)) != GR_OK)
        return rc;
    /* only now: st0 waiting for a copy back inside the loop would hold the next multiply */
    for (int i = 0; i < nb; i++)
        GR_CUDA_TRY(cudaStreamWaitEvent(st0, R->at(i, EV_D1), 0), "ordering the copies back");
    GR_CUDA_TRY(cudaEventRecord(R->ev[1], st0), "timing the product");
    GR_CUDA_TRY(cudaEventSynchronize(R->ev[1]), "finishing the product");

    t->h2d = R->ms(R->ev[2], R->ev[3]);
    for (int i = 0; i < nb; i++) {
        t->h2d += R->ms(R->at(i, EV_H0), R->at(i, EV_H1));
        t->kernel += R->ms(R->at(i, EV_K0), R->at(i, EV_K1));
        t->d2h += R->ms(R->at(i, EV_D0), R->at(i, EV_D1));
    }
    t->wall = R->ms(R->ev[0], R->ev[1]);
    t->overlap = t->h2d + t->kernel + t->d2h - t->wall;
    return GR_OK;
}

} // namespace

extern "C" int gr_mm_gpu(const struct gr_mm_req *r, const struct gr_mm_env *env, struct gr_mm_timings *t,
                         char algo_used[32], struct gr_err *e)
{
    struct gr_mm_timings scratch_t;
    if (!t)
        t = &scratch_t;
    memset(t, 0, sizeof *t);
    struct gr_mm_bytes sz;
    int rc = gr_mm_check(r, &sz, e);
    if (rc != GR_OK)
        return rc;
    int v = gr_mm_variant(r->algorithm);
    if (v < 0)
        return gr_fail(e, GR_EINVAL, "algorithm", "unknown matmul variant '%s': auto, naive, tiled16, tiled32, "
                                                  "regtile, cublas, cublas_tf32",
                       r->algorithm);
    if (!(gr_mm_algos[v].dtypes & B_(r->dtype)))
        return gr_fail(e, GR_EUNPROC, "algorithm", "matmul variant '%s' covers float32 only, not %s",
                       gr_mm_algos[v].name, gr_dtype_name(r->dtype));
    if (r->m > INT_MAX || r->n > INT_MAX || r->k > INT_MAX)
        return gr_fail(e, GR_EUNPROC, "shape", "matmul dimensions on the GPU are at most %d: a is %lld x %lld, b %lld x %lld",
                       INT_MAX, (long long)r->m, (long long)r->k, (long long)r->k, (long long)r->n);
    if (!env || env->nstreams < 1 || !env->streams || env->nstage < 1 || !env->stage || env->stage_bytes < 1)
        return gr_fail(e, GR_EINTERNAL, NULL, "matmul without streams or staging buffers");

    run R;
    R.env = env;
    R.stage_ev.assign(env->nstage, nullptr);
    R.stage_busy.assign(env->nstage, false);
    for (auto &ev : R.stage_ev) {
        cudaError_t err = rc == GR_OK ? cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) : cudaSuccess;
        if (err != cudaSuccess)
            rc = gr_cuda_fail(e, err, "creating an event");
    }
    if (rc == GR_OK)
        rc = alloc(&R, &R.da, sz.a, "a", e);
    if (rc == GR_OK)
        rc = alloc(&R, &R.db, sz.b, "b", e);
    if (rc == GR_OK)
        rc = alloc(&R, &R.dc, sz.c, "c", e);
    /* copies run on the other streams too: they must see the allocations */
    cudaEvent_t allocated = nullptr;
    cudaError_t err = rc == GR_OK ? cudaEventCreateWithFlags(&allocated, cudaEventDisableTiming) : cudaSuccess;
    if (err == cudaSuccess && rc == GR_OK)
        err = cudaEventRecord(allocated, env->streams[0]);
    for (int s = 1; err == cudaSuccess && rc == GR_OK && s < env->nstreams; s++)
        err = cudaStreamWaitEvent(env->streams[s], allocated, 0);
    if (err != cudaSuccess)
        rc = gr_cuda_fail(e, err, "ordering the allocations");
    if (rc == GR_OK)
        rc = stream_product(&R, r, v, &sz, t, e);

    /* On any path: every stream done before the memory goes back to the pool. */
    for (int s = 0; s < env->nstreams; s++)
        cudaStreamSynchronize(env->streams[s]);
    for (void *p : {R.da, R.db, R.dc})
        if (p)
            cudaFreeAsync(p, env->streams[0]);
    for (auto ev : R.stage_ev)
        if (ev)
            cudaEventDestroy(ev);
    for (auto ev : R.ev)
        if (ev)
            cudaEventDestroy(ev);
    if (allocated)
        cudaEventDestroy(allocated);
    err = cudaGetLastError();
    if (rc == GR_OK && err != cudaSuccess)
        rc = gr_cuda_fail(e, err, "finishing the product");
    if (rc == GR_OK && algo_used)
        snprintf(algo_used, 32, "%s", gr_mm_algos[v].name);
    return rc;
}
