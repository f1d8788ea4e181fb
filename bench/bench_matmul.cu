/* bench_matmul.cu: matmul variants against cuBLAS, no HTTP: square 512..8192 and a tall-skinny
 * m x n x k = 65536 x 64 x 1024, float32 and float64, median of --repeats event-timed launches on
 * device memory, each result checked against cuBLAS's; then end to end from pageable host memory
 * (staging, H2D, multiply, D2H) at 4096 and 8192, row-streamed and not. Table on stdout, JSON to
 * --json. Single-threaded, one GPU.
 * Usage: bench_matmul [--json FILE] [--repeats N] [--max-n N] */
#include "gpu/kernels/matmul.h"

#include "gpu/kernels/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef long long i64;


#define NSTREAMS 4 /* as a worker: one for the multiplies, three for copies */
#define STAGE_BYTES ((size_t)8 << 20)

static int repeats = 10, max_n = 8192;
static cudaStream_t streams[NSTREAMS];
static void *stage[NSTREAMS];
static cublasHandle_t blas;
static cudaMemPool_t pool;
static cudaEvent_t ev0, ev1;
static void *d_a, *d_b, *d_c, *d_ref;
static unsigned *d_err;

struct row {
    std::string variant, dtype;
    i64 m, n, k;
    double ms, gflops, vs_cublas, rel_err; /* vs_cublas: cuBLAS's time over this one's */
};
struct e2e_row {
    std::string dtype;
    i64 n;
    int streamed;
    double host_ms;       /* median wall time of gr_mm_gpu on the host */
    double kernel_vs_cublas; /* cuBLAS's own time for the product over the kernel stage's */
    struct gr_mm_timings t; /* of the median run */
};
static std::vector<row> rows;
static std::vector<e2e_row> e2e_rows;

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median event time of fn on streams[0] over `repeats` runs after a warm-up. */
static double time_ms(const std::function<void()> &fn)
{
    fn();
    GR_CUDA_DIE(cudaStreamSynchronize(streams[0]));
    std::vector<double> t(repeats);
    for (int r = 0; r < repeats; r++) {
        float ms = 0;
        GR_CUDA_DIE(cudaEventRecord(ev0, streams[0]));
        fn();
        GR_CUDA_DIE(cudaEventRecord(ev1, streams[0]));
        GR_CUDA_DIE(cudaEventSynchronize(ev1));
        GR_CUDA_DIE(cudaEventElapsedTime(&ms, ev0, ev1));
        t[r] = ms;
    }
    return median(t);
}

/* Uniform in [-1, 1) from a hash of the index: no zeros-only operands. */
template <class T> __global__ void k_fill(T *x, i64 n, unsigned long long seed)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        unsigned long long z = (unsigned long long)i * 0x9e3779b97f4a7c15ull + seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
        x[i] = (T)((double)(z >> 11) / 4503599627370496.0 - 1.0);
    }
}

/* err[0] = max |x - ref| (inf for NaN), err[1] = max |ref|, as float bits (non-negative: ordered). */
template <class T> __global__ void k_diff(const T *x, const T *ref, i64 n, unsigned *err)
{
    float d = 0, r = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        float di = (float)fabs((double)x[i] - (double)ref[i]);
        d = di <= d ? d : isnan(di) ? INFINITY : di;
        r = fmaxf(r, (float)fabs((double)ref[i]));
    }
    atomicMax(&err[0], __float_as_uint(d));
    atomicMax(&err[1], __float_as_uint(r));
}

static void launch(int variant, int dtype, i64 m, i64 n, i64 k)
{
    struct gr_mm_kjob j = {variant, dtype, (int)m, (int)n, (int)k, 1.0, 0.0, d_a, (int)k, d_b, (int)n, d_c, (int)n};
    struct gr_err e;
    if (gr_mm_launch(&j, streams[0], blas, &e) != GR_OK) {
        fprintf(stderr, "%s: %s\n", gr_mm_algos[variant].name, e.msg);
        exit(1);
    }
}

/* max |ours - cuBLAS| / max |cuBLAS| over the product in d_c. */
static double rel_err(int dtype, i64 count)
{
    unsigned h[2];
    GR_CUDA_DIE(cudaMemsetAsync(d_err, 0, 2 * sizeof(unsigned), streams[0]));
    if (dtype == GR_FLOAT32)
        k_diff<float><<<1024, 256, 0, streams[0]>>>((const float *)d_c, (const float *)d_ref, count, d_err);
    else
        k_diff<double><<<1024, 256, 0, streams[0]>>>((const double *)d_c, (const double *)d_ref, count, d_err);
    GR_CUDA_DIE(cudaGetLastError());
    GR_CUDA_DIE(cudaMemcpyAsync(h, d_err, sizeof h, cudaMemcpyDeviceToHost, streams[0]));
    GR_CUDA_DIE(cudaStreamSynchronize(streams[0]));
    float d, r;
    memcpy(&d, &h[0], sizeof d);
    memcpy(&r, &h[1], sizeof r);
    return r > 0 ? d / r : d;
}

static void kernels(int dtype, i64 m, i64 n, i64 k)
{
    size_t es = gr_dtype_size(dtype);
    unsigned long long seed = (unsigned long long)(m * 31 + n * 7 + k);
    if (dtype == GR_FLOAT32) {
        k_fill<float><<<2048, 256, 0, streams[0]>>>((float *)d_a, m * k, seed);
        k_fill<float><<<2048, 256, 0, streams[0]>>>((float *)d_b, k * n, seed + 1);
    } else {
        k_fill<double><<<2048, 256, 0, streams[0]>>>((double *)d_a, m * k, seed);
        k_fill<double><<<2048, 256, 0, streams[0]>>>((double *)d_b, k * n, seed + 1);
    }
    GR_CUDA_DIE(cudaGetLastError());
    double flop = 2.0 * (double)m * (double)n * (double)k, ref_ms = 0;
    const int order[] = {GR_MM_CUBLAS, GR_MM_NAIVE, GR_MM_TILED16, GR_MM_TILED32, GR_MM_REGTILE, GR_MM_CUBLAS_TF32};
    for (int v : order) {
        if (!(gr_mm_algos[v].dtypes & (1u << dtype)))
            continue;
        double ms = time_ms([&] { launch(v, dtype, m, n, k); });
        double err = 0;
        if (v == GR_MM_CUBLAS) {
            ref_ms = ms;
            GR_CUDA_DIE(cudaMemcpyAsync(d_ref, d_c, (size_t)(m * n) * es, cudaMemcpyDeviceToDevice, streams[0]));
        } else {
            err = rel_err(dtype, m * n);
        }
        row r = {gr_mm_algos[v].name, gr_dtype_name(dtype), m, n, k, ms, flop / (ms * 1e6), ref_ms / ms, err};
        rows.push_back(r);
        printf("%-12s %-7s %6lld x %5lld x %5lld  %10.3f ms  %9.1f GFLOP/s  %5.2f x cuBLAS  err %.1e\n",
               r.variant.c_str(), r.dtype.c_str(), m, n, k, ms, r.gflops, r.vs_cublas, err);
        fflush(stdout);
    }
}

/* cuBLAS's time for an n x n x n product of dtype in this run (0: not measured). */
static double cublas_ms(int dtype, i64 n)
{
    for (const row &r : rows)
        if (r.variant == "cublas" && r.dtype == gr_dtype_name(dtype) && r.m == n && r.n == n && r.k == n)
            return r.ms;
    return 0;
}

/* End to end through gr_mm_gpu from pageable host buffers (malloc, written once). */
static void end_to_end(int dtype, i64 n)
{
    size_t es = gr_dtype_size(dtype), bytes = (size_t)(n * n) * es;
    unsigned char *a = (unsigned char *)malloc(bytes), *b = (unsigned char *)malloc(bytes),
                  *out = (unsigned char *)malloc(bytes);
    if (!a || !b || !out) {
        fprintf(stderr, "out of host memory for %lld x %lld\n", n, n);
        exit(1);
    }
    /* written here: no first-touch page faults inside the timing */
    for (i64 i = 0; i < n * n; i++) {
        double v = (double)((i * 2654435761ll) % 2001 - 1000) / 1000.0;
        if (dtype == GR_FLOAT32)
            ((float *)a)[i] = ((float *)b)[i] = (float)v;
        else
            ((double *)a)[i] = ((double *)b)[i] = v;
    }
    memset(out, 0, bytes);
    struct gr_mm_env env = {streams, NSTREAMS, blas, stage, NSTREAMS, STAGE_BYTES, pool};
    for (int streamed = 0; streamed <= 1; streamed++) {
        struct gr_mm_req r = {dtype, n, n, n, 1.0, 0.0, a, b, NULL, out, "auto", streamed};
        std::vector<double> host(repeats);
        std::vector<gr_mm_timings> ts(repeats + 1);
        for (int k = -1; k < repeats; k++) { /* -1: warm-up */
            struct gr_err e;
            auto t0 = std::chrono::steady_clock::now();
            if (gr_mm_gpu(&r, &env, &ts[k + 1], NULL, &e) != GR_OK) {
                fprintf(stderr, "end to end %lld: %s\n", n, e.msg);
                exit(1);
            }
            if (k >= 0)
                host[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        double med = median(host);
        int at = (int)(std::min_element(host.begin(), host.end(),
                                        [&](double x, double y) { return fabs(x - med) < fabs(y - med); }) -
                       host.begin());
        e2e_row er = {gr_dtype_name(dtype), n, streamed, med, 0, ts[at + 1]};
        er.kernel_vs_cublas = er.t.kernel > 0 ? cublas_ms(dtype, n) / er.t.kernel : 0;
        e2e_rows.push_back(er);
        printf("e2e %-7s %5lld %-8s host %8.2f ms | gpu wall %8.2f  h2d %8.2f  kernel %7.2f  d2h %8.2f  overlap %7.2f  "
               "blocks %d  kernel %.2fx cuBLAS\n",
               er.dtype.c_str(), n, streamed ? "streamed" : "whole", med, er.t.wall, er.t.h2d, er.t.kernel, er.t.d2h,
               er.t.overlap, er.t.blocks, er.kernel_vs_cublas);
        fflush(stdout);
    }
    free(a);
    free(b);
    free(out);
}

static void write_json(const char *path, const char *device, const char *date)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"repeats\": %d,\n  \"streams\": %d,\n"
               "  \"stage_bytes\": %zu,\n  \"kernels\": [\n",
            device, date, repeats, NSTREAMS, STAGE_BYTES);
    for (size_t i = 0; i < rows.size(); i++) {
        const row &r = rows[i];
        fprintf(f, "    {\"variant\": \"%s\", \"dtype\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"ms\": %.4f, "
                   "\"gflops\": %.1f, \"vs_cublas\": %.3f, \"rel_err_vs_cublas\": %.3e}%s\n",
                r.variant.c_str(), r.dtype.c_str(), r.m, r.n, r.k, r.ms, r.gflops, r.vs_cublas, r.rel_err,
                i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "  ],\n  \"end_to_end\": [\n");
    for (size_t i = 0; i < e2e_rows.size(); i++) {
        const e2e_row &r = e2e_rows[i];
        fprintf(f, "    {\"dtype\": \"%s\", \"n\": %lld, \"streamed\": %s, \"host_ms\": %.3f, \"gpu_wall_ms\": %.3f, "
                   "\"h2d_ms\": %.3f, \"kernel_ms\": %.3f, \"d2h_ms\": %.3f, \"overlap_ms\": %.3f, \"blocks\": %d, "
                   "\"kernel_vs_cublas\": %.3f}%s\n",
                r.dtype.c_str(), r.n, r.streamed ? "true" : "false", r.host_ms, r.t.wall, r.t.h2d, r.t.kernel,
                r.t.d2h, r.t.overlap, r.t.blocks, r.kernel_vs_cublas, i + 1 < e2e_rows.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *json = "bench_matmul.json";
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--json") == 0)
            json = argv[k + 1];
        else if (strcmp(argv[k], "--repeats") == 0)
            repeats = atoi(argv[k + 1]) > 0 ? atoi(argv[k + 1]) : repeats;
        else if (strcmp(argv[k], "--max-n") == 0)
            max_n = atoi(argv[k + 1]) >= 512 ? atoi(argv[k + 1]) : max_n;
    }
    struct cudaDeviceProp prop;
    GR_CUDA_DIE(cudaSetDevice(0));
    GR_CUDA_DIE(cudaGetDeviceProperties(&prop, 0));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    printf("bench_matmul on %s (%d SMs), %s, median of %d\n", prop.name, prop.multiProcessorCount, date, repeats);

    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    uint64_t keep = UINT64_MAX;
    GR_CUDA_DIE(cudaMemPoolCreate(&pool, &props));
    GR_CUDA_DIE(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    for (int s = 0; s < NSTREAMS; s++) {
        GR_CUDA_DIE(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
        GR_CUDA_DIE(cudaMallocHost(&stage[s], STAGE_BYTES));
    }
    GR_CUDA_DIE(cudaEventCreate(&ev0));
    GR_CUDA_DIE(cudaEventCreate(&ev1));

    /* big enough for the largest square and the tall-skinny shape in float64 */
    const i64 ts_m = 65536, ts_n = 64, ts_k = 1024;
    size_t most = std::max((size_t)max_n * max_n, (size_t)(ts_m * ts_k)) * sizeof(double);
    GR_CUDA_DIE(cudaMalloc(&d_a, most));
    GR_CUDA_DIE(cudaMalloc(&d_b, most));
    GR_CUDA_DIE(cudaMalloc(&d_c, most));
    GR_CUDA_DIE(cudaMalloc(&d_ref, most));
    GR_CUDA_DIE(cudaMalloc((void **)&d_err, 2 * sizeof(unsigned)));

    for (int dt = GR_FLOAT32; dt <= GR_FLOAT64; dt++) {
        for (i64 n = 512; n <= max_n; n *= 2)
            kernels(dt, n, n, n);
        kernels(dt, ts_m, ts_n, ts_k);
    }
    GR_CUDA_DIE(cudaFree(d_a));
    GR_CUDA_DIE(cudaFree(d_b));
    GR_CUDA_DIE(cudaFree(d_c));
    GR_CUDA_DIE(cudaFree(d_ref));
    for (int dt = GR_FLOAT32; dt <= GR_FLOAT64; dt++)
        for (i64 n = 2048; n <= max_n; n *= 2)
            end_to_end(dt, n);

    /* summary: the table the issue's targets read from */
    printf("\nsummary (GFLOP/s, x cuBLAS in the same run)\n");
    for (const row &r : rows)
        if (r.m == r.n && r.n == r.k && r.n >= 2048 && (r.variant == "regtile" || r.variant == "cublas"))
            printf("  %-8s %-7s %5lld  %9.1f  %5.2f\n", r.variant.c_str(), r.dtype.c_str(), r.n, r.gflops, r.vs_cublas);
    for (size_t i = 0; i + 1 < e2e_rows.size(); i += 2)
        printf("  e2e %-7s %5lld  whole %8.2f ms  streamed %8.2f ms  (%.2fx)\n", e2e_rows[i].dtype.c_str(),
               e2e_rows[i].n, e2e_rows[i].host_ms, e2e_rows[i + 1].host_ms,
               e2e_rows[i].host_ms / e2e_rows[i + 1].host_ms);
    write_json(json, prop.name, date);
    printf("wrote %s\n", json);
    return 0;
}
