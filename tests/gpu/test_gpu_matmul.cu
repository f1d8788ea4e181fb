/* test_gpu_matmul.cu: every GPU matmul variant x dtype it claims x shape x alpha/beta, streamed and
 * not, through gr_mm_gpu on fresh random data with poisoned outputs and device memory, against the
 * CPU path in float64; then the launcher with padded leading dimensions and the rejected requests.
 * Single-threaded. Exit 77: no GPU. */
#include "gpu/kernels/matmul.h"

#include "gr_testdata.h"

#include <cuda_runtime.h>

#include <float.h>
#include <stdint.h>

#include <vector>

#define NSTREAMS 3 /* the multiplies' stream and two copy streams */

static const int64_t shapes[][3] = {
    {1, 1, 1},      {17, 33, 9},     {16, 16, 16},    {15, 17, 16},   {17, 15, 15},   {32, 32, 32},
    {31, 33, 31},   {33, 31, 65},    {64, 64, 64},    {63, 65, 129},  {65, 63, 127},  {128, 128, 128},
    {127, 257, 1},  {129, 255, 128}, {1, 300, 200},   {300, 1, 129},  {40, 256, 256}, {16, 512, 130},
    {300, 520, 260}, {1000, 132, 77}, {513, 511, 1024},
    {256, 384, 272}, /* whole regtile tiles in every direction: no edge checks */
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
/* alpha, beta; with beta = 0 the host c is NaN (or absent) and must not be read */
static const double coefs[][2] = {{1, 0}, {2.5, 0}, {1, 1}, {-0.5, 2}, {0, 1.5}, {0.75, -1}};
#define NCOEFS (sizeof coefs / sizeof coefs[0])

struct tally {
    long pass = 0, fail = 0;
};
static tally per_variant[GR_MM_NVARIANTS];
static long failures_printed;
static struct gr_rng rng;
static cudaStream_t streams[NSTREAMS];
static cublasHandle_t blas;
static cudaMemPool_t pool;
/* Two staging setups: 4100 bytes (splits a double, many chunks per operand) and 1 MiB. */
static const size_t stage_sizes[2] = {4100, (size_t)1 << 20};
static void *stage[2][NSTREAMS];

static double uniform(void) { return (double)(gr_rng_next(&rng) >> 11) / 4503599627370496.0 - 1.0; }

/* n values uniform in [-1, 1) in dtype at p, and the same values as float64 in d. */
static void fill(void *p, double *d, int dtype, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double v = uniform();
        if (dtype == GR_FLOAT32) {
            ((float *)p)[i] = (float)v;
            d[i] = (double)(float)v;
        } else {
            ((double *)p)[i] = d[i] = v;
        }
    }
}

static double get(const void *p, int dtype, int64_t i)
{
    return dtype == GR_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Error bound relative to sum |alpha a b| + |beta c|: k-term accumulation in the dtype; TF32's
 * inputs keep 10 mantissa bits (2^-10 each if truncated), so a product is off by up to 2^-9. */
static double tol_factor(int variant, int dtype, int64_t k)
{
    double eps = dtype == GR_FLOAT32 ? FLT_EPSILON : DBL_EPSILON;
    return (double)(k + 4) * eps + (variant == GR_MM_CUBLAS_TF32 ? 1.0 / 256 : 0);
}

static bool within(double got, double want, double bound, double factor)
{
    return fabs(got - want) <= factor * bound + DBL_MIN; /* NaN never passes */
}

/* Leave exactly one poisoned (all-ones: NaN) block of `bytes` in the pool, so that the product's
 * allocations come out of it and anything a kernel forgets to write, or reads unasked, is NaN. */
static bool poison_pool(size_t bytes)
{
    void *p = nullptr;
    return cudaStreamSynchronize(streams[0]) == cudaSuccess && cudaMemPoolTrimTo(pool, 0) == cudaSuccess &&
           cudaMallocFromPoolAsync(&p, bytes, pool, streams[0]) == cudaSuccess &&
           cudaMemsetAsync(p, 0xff, bytes, streams[0]) == cudaSuccess &&
           cudaFreeAsync(p, streams[0]) == cudaSuccess && cudaStreamSynchronize(streams[0]) == cudaSuccess;
}

static void report(const char *what, int variant, int dtype, const int64_t *s, const double *ab, int streamed,
                   const char *detail)
{
    if (failures_printed++ < 40)
        fprintf(stderr, "FAIL %s %s %s %lldx%lldx%lld alpha=%g beta=%g %s: %s\n", what, gr_mm_algos[variant].name,
                gr_dtype_name(dtype), (long long)s[0], (long long)s[1], (long long)s[2], ab[0], ab[1],
                streamed ? "streamed" : "whole", detail);
}

/* The CPU's float64 product and its bound, computed once per operand set. */
struct reference {
    std::vector<double> want, bound;
};

static bool cpu_reference(const int64_t *s, const double *ab, const std::vector<double> &a,
                          const std::vector<double> &b, const std::vector<double> &c, reference *ref)
{
    int64_t m = s[0], n = s[1], k = s[2];
    std::vector<double> aa(a.size()), ba(b.size()), ca(c.size());
    for (size_t i = 0; i < a.size(); i++)
        aa[i] = fabs(a[i]);
    for (size_t i = 0; i < b.size(); i++)
        ba[i] = fabs(b[i]);
    for (size_t i = 0; i < c.size(); i++)
        ca[i] = fabs(c[i]);
    ref->want.assign(m * n, 0);
    ref->bound.assign(m * n, 0);
    struct gr_err e;
    struct gr_mm_req w = {GR_FLOAT64, m, n, k, ab[0], ab[1], a.data(), b.data(), c.data(), ref->want.data(),
                          "auto", 0};
    struct gr_mm_req bd = {GR_FLOAT64, m, n, k, fabs(ab[0]), fabs(ab[1]), aa.data(), ba.data(), ca.data(),
                           ref->bound.data(), "auto", 0};
    if (gr_mm_cpu(&w, NULL, &e) != GR_OK || gr_mm_cpu(&bd, NULL, &e) != GR_OK) {
        fprintf(stderr, "CPU reference failed: %s\n", e.msg);
        return false;
    }
    return true;
}

static int case_no;

static void run_shape(const int64_t *s, const double *ab, int dtype)
{
    int64_t m = s[0], n = s[1], k = s[2];
    size_t es = gr_dtype_size(dtype);
    std::vector<unsigned char> a(m * k * es), b(k * n * es), c(m * n * es), out(m * n * es);
    std::vector<double> ad(m * k), bd(k * n), cd(m * n, 0);
    fill(a.data(), ad.data(), dtype, m * k);
    fill(b.data(), bd.data(), dtype, k * n);
    if (ab[1] != 0)
        fill(c.data(), cd.data(), dtype, m * n);
    else
        memset(c.data(), 0xff, c.size());
    reference ref;
    if (!cpu_reference(s, ab, ad, bd, cd, &ref)) {
        per_variant[0].fail++;
        return;
    }
    for (int v = 0; v < GR_MM_NVARIANTS; v++) {
        if (!(gr_mm_algos[v].dtypes & (1u << dtype)))
            continue;
        for (int streamed = 0; streamed <= 1; streamed++) {
            case_no++;
            int sz = case_no % 2;
            struct gr_mm_env env = {streams, NSTREAMS, blas, stage[sz], NSTREAMS, stage_sizes[sz], pool};
            /* beta = 0: c absent on odd cases, NaN-filled on even ones */
            const void *cp = ab[1] == 0 && case_no % 4 < 2 ? nullptr : c.data();
            struct gr_mm_req r = {dtype, m, n, k, ab[0], ab[1], a.data(), b.data(), cp, out.data(),
                                  gr_mm_algos[v].name, streamed};
            memset(out.data(), 0xff, out.size());
            struct gr_err e = {};
            struct gr_mm_timings t;
            char used[32] = "";
            tally &ty = per_variant[v];
            if (!poison_pool(a.size() + b.size() + c.size() + ((size_t)4 << 20))) {
                report("poisoning the pool", v, dtype, s, ab, streamed, cudaGetErrorString(cudaGetLastError()));
                ty.fail++;
                continue;
            }
            int rc = gr_mm_gpu(&r, &env, &t, used, &e);
            bool ok = rc == GR_OK && strcmp(used, gr_mm_algos[v].name) == 0;
            if (!ok) {
                report("run", v, dtype, s, ab, streamed, rc == GR_OK ? "wrong algo_used" : e.msg);
                ty.fail++;
                continue;
            }
            /* streaming splits anything of two 128-row tiles or more */
            bool blocks_ok = streamed ? t.blocks >= (m >= 256 ? 2 : 1) : t.blocks == 1;
            if (!blocks_ok || !(t.kernel > 0) || !(t.wall > 0)) {
                report("timings", v, dtype, s, ab, streamed, "row blocks or times missing");
                ok = false;
            }
            double f = tol_factor(v, dtype, k);
            for (int64_t i = 0; ok && i < m * n; i++)
                if (!within(get(out.data(), dtype, i), ref.want[i], ref.bound[i], f)) {
                    char what[160];
                    snprintf(what, sizeof what, "out[%lld][%lld] = %.10g, want %.10g (bound %.3g)",
                             (long long)(i / n), (long long)(i % n), get(out.data(), dtype, i), ref.want[i],
                             ref.bound[i]);
                    report("value", v, dtype, s, ab, streamed, what);
                    ok = false;
                }
            (ok ? ty.pass : ty.fail)++;
        }
    }
}

/* The launcher itself: leading dimensions wider than the rows, c NaN under beta = 0, every
 * variant; a, b, c padded with NaN that no variant may read. */
static void run_launcher(int dtype)
{
    const int m = 70, n = 45, k = 37, lda = k + 3, ldb = n + 5, ldc = n + 2;
    size_t es = gr_dtype_size(dtype);
    std::vector<unsigned char> a((size_t)m * lda * es, 0xff), b((size_t)k * ldb * es, 0xff), c((size_t)m * ldc * es, 0xff),
        got(c.size());
    std::vector<double> ad((size_t)m * k), bd((size_t)k * n), cd((size_t)m * n);
    for (int i = 0; i < m; i++)
        fill(&a[(size_t)i * lda * es], &ad[(size_t)i * k], dtype, k);
    for (int p = 0; p < k; p++)
        fill(&b[(size_t)p * ldb * es], &bd[(size_t)p * n], dtype, n);
    for (int i = 0; i < m; i++)
        fill(&c[(size_t)i * ldc * es], &cd[(size_t)i * n], dtype, n);
    void *da, *db, *dc;
    if (cudaMalloc(&da, a.size()) != cudaSuccess || cudaMalloc(&db, b.size()) != cudaSuccess ||
        cudaMalloc(&dc, c.size()) != cudaSuccess) {
        fprintf(stderr, "FAIL launcher: cudaMalloc\n");
        per_variant[0].fail++;
        return;
    }
    /* streams[0] does not block with the legacy stream: every copy goes on it */
    cudaStream_t st = streams[0];
    cudaMemcpyAsync(da, a.data(), a.size(), cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(db, b.data(), b.size(), cudaMemcpyHostToDevice, st);
    int64_t s[3] = {m, n, k};
    for (int beta_on = 0; beta_on <= 1; beta_on++) {
        double ab[2] = {1.25, beta_on ? -0.5 : 0.0};
        reference ref;
        if (!cpu_reference(s, ab, ad, bd, cd, &ref))
            continue;
        for (int v = 0; v < GR_MM_NVARIANTS; v++) {
            if (!(gr_mm_algos[v].dtypes & (1u << dtype)))
                continue;
            if (beta_on) /* the real c in its padded rows; else all NaN */
                cudaMemcpyAsync(dc, c.data(), c.size(), cudaMemcpyHostToDevice, st);
            else
                cudaMemsetAsync(dc, 0xff, c.size(), st);
            struct gr_mm_kjob j = {v, dtype, m, n, k, ab[0], ab[1], da, lda, db, ldb, dc, ldc};
            struct gr_err e = {};
            bool ok = gr_mm_launch(&j, st, blas, &e) == GR_OK &&
                      cudaMemcpyAsync(got.data(), dc, got.size(), cudaMemcpyDeviceToHost, st) == cudaSuccess &&
                      cudaStreamSynchronize(st) == cudaSuccess;
            if (!ok)
                report("launcher", v, dtype, s, ab, 0, e.msg[0] ? e.msg : cudaGetErrorString(cudaGetLastError()));
            double f = tol_factor(v, dtype, k);
            for (int i = 0; ok && i < m; i++)
                for (int jj = 0; ok && jj < ldc; jj++) {
                    double g = get(got.data(), dtype, (int64_t)i * ldc + jj);
                    /* the padding between rows must stay as it was: NaN, or c's own NaN pad */
                    ok = jj < n ? within(g, ref.want[(size_t)i * n + jj], ref.bound[(size_t)i * n + jj], f) : isnan(g);
                    if (!ok)
                        report("launcher value", v, dtype, s, ab, 0, jj < n ? "differs" : "wrote into the padding");
                }
            (ok ? per_variant[v].pass : per_variant[v].fail)++;
        }
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

/* Requests refused before any copy, with the code the API maps to its status. */
static long rejected_pass, rejected_fail;
static void expect(const char *what, struct gr_mm_req r, int code)
{
    struct gr_mm_env env = {streams, NSTREAMS, blas, stage[1], NSTREAMS, stage_sizes[1], pool};
    struct gr_err e = {};
    int rc = gr_mm_gpu(&r, &env, NULL, NULL, &e);
    if (rc == code && e.msg[0]) {
        rejected_pass++;
    } else {
        rejected_fail++;
        fprintf(stderr, "FAIL rejected %s: code %d, want %d (%s)\n", what, rc, code, e.msg);
    }
}

static void run_rejected(void)
{
    float x[4] = {1, 2, 3, 4}, out[4];
    struct gr_mm_req ok = {GR_FLOAT32, 2, 2, 2, 1, 0, x, x, NULL, out, "auto", 1};
    struct gr_mm_req r = ok;
    r.algorithm = "strassen";
    expect("unknown variant", r, GR_EINVAL);
    r = ok;
    r.dtype = GR_FLOAT64;
    r.algorithm = "cublas_tf32";
    expect("tf32 on float64", r, GR_EUNPROC);
    r = ok;
    r.beta = 1;
    expect("beta without c", r, GR_EUNPROC);
    r = ok;
    r.m = (int64_t)1 << 31; /* 8 GiB of a: within size_t, over cuBLAS's int */
    expect("m over INT_MAX", r, GR_EUNPROC);
    r = ok;
    r.m = r.n = r.k = 1 << 20; /* 4 TiB per operand: no device has it */
    expect("out of device memory", r, GR_ENOMEM);
    /* and the device still works afterwards */
    r = ok;
    struct gr_mm_env env = {streams, NSTREAMS, blas, stage[1], NSTREAMS, stage_sizes[1], pool};
    struct gr_err e;
    bool fine = gr_mm_gpu(&r, &env, NULL, NULL, &e) == GR_OK && out[0] == 7 && out[1] == 10 && out[2] == 15 &&
                out[3] == 22;
    (fine ? rejected_pass : rejected_fail)++;
    if (!fine)
        fprintf(stderr, "FAIL a product after the refusals: %s\n", e.msg);
}

/* The comparison must be able to fail. */
static bool comparison_bites(void)
{
    return within(1.0, 1.0, 1.0, 1e-7) && !within(1.0 + 1e-5, 1.0, 1.0, 1e-7) && !within(NAN, 1.0, 1.0, 1) &&
           tol_factor(GR_MM_CUBLAS, GR_FLOAT32, 9) < 1e-5;
}

int main(void)
{
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev < 1) {
        printf("test_gpu_matmul: SKIPPED, no GPU (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "the CUDA driver reports no device");
        return 77;
    }
    uint64_t seed = gr_test_seed();
    rng.s = seed;
    printf("test_gpu_matmul: seed %llu (GR_TEST_SEED to repeat)\n", (unsigned long long)seed);
    if (!comparison_bites()) {
        fprintf(stderr, "FAIL the comparison does not reject a wrong value\n");
        return 1;
    }
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    uint64_t keep = UINT64_MAX;
    if (cudaSetDevice(0) != cudaSuccess || cudaMemPoolCreate(&pool, &props) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess ||
        cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "FAIL setting up the device: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    for (int s = 0; s < NSTREAMS; s++) {
        bool ok = cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking) == cudaSuccess;
        for (int z = 0; z < 2; z++)
            ok = ok && cudaMallocHost(&stage[z][s], stage_sizes[z]) == cudaSuccess;
        if (!ok) {
            fprintf(stderr, "FAIL creating streams and staging\n");
            return 1;
        }
    }

    for (int dt = GR_FLOAT32; dt <= GR_FLOAT64; dt++) {
        for (size_t s = 0; s < NSHAPES; s++)
            for (size_t ab = 0; ab < NCOEFS; ab++)
                run_shape(shapes[s], coefs[ab], dt);
        run_launcher(dt);
    }
    run_rejected();

    long pass = rejected_pass, fail = rejected_fail;
    for (int v = 0; v < GR_MM_NVARIANTS; v++) {
        printf("  %-12s %5ld passed %5ld failed\n", gr_mm_algos[v].name, per_variant[v].pass, per_variant[v].fail);
        pass += per_variant[v].pass;
        fail += per_variant[v].fail;
    }
    printf("  %-12s %5ld passed %5ld failed\n", "rejected", rejected_pass, rejected_fail);
    printf("test_gpu_matmul: %ld passed, %ld failed\n", pass, fail);
    for (int s = 0; s < NSTREAMS; s++) {
        cudaStreamDestroy(streams[s]);
        for (int z = 0; z < 2; z++)
            cudaFreeHost(stage[z][s]);
    }
    cublasDestroy(blas);
    cudaMemPoolDestroy(pool);
    return fail == 0 && pass > 0 ? 0 : 1;
}
