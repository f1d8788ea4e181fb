/* bench_reduce.cu: reduction kernels against CUB, no HTTP: whole arrays n = 2^10..2^30, rows of
 * 2^4..2^20 (axis 1), 9 columns (axis 0); CUDA events, L2 flushed before every run, median of
 * --repeats; table on stdout, JSON to --out. Single-threaded, one GPU.
 * Usage: bench_reduce [--out FILE] [--repeats N] [--max-log2 K] [--sections whole,axis1,axis0] */
#include "gpu/kernels/reduce.h"

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include "gpu/kernels/cuda_check.h"

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef long long i64;


static int repeats = 25, max_log2 = 30, sms;
static void *d_x, *d_out, *d_ref, *d_ref_index, *d_scratch, *d_flush; /* d_ref*: CUB's results */
static size_t scratch_bytes, flush_bytes;
static unsigned *d_tickets;
static cudaEvent_t ev0, ev1;

struct row {
    std::string section, variant, dtype, op;
    i64 rows, cols;
    double ms, gbps, vs_cub; /* vs_cub: CUB's time over this one's (>1: faster than CUB); 0 = none */
    int verified;            /* 1 yes, 0 mismatch, -1 not checked */
};
static std::vector<row> rows_out;

static void fit_scratch(size_t want)
{
    if (want <= scratch_bytes)
        return;
    GR_CUDA_DIE(cudaFree(d_scratch));
    GR_CUDA_DIE(cudaMalloc(&d_scratch, want));
    scratch_bytes = want;
}

/* Median time of fn over `repeats` runs, each after writing a buffer larger than L2. */
static double time_ms(const std::function<cudaError_t()> &fn)
{
    GR_CUDA_DIE(fn()); /* warm-up: module load, first-touch */
    GR_CUDA_DIE(cudaDeviceSynchronize());
    std::vector<float> t(repeats);
    for (int r = 0; r < repeats; r++) {
        GR_CUDA_DIE(cudaMemsetAsync(d_flush, r & 0xff, flush_bytes, 0));
        GR_CUDA_DIE(cudaEventRecord(ev0, 0));
        GR_CUDA_DIE(fn());
        GR_CUDA_DIE(cudaEventRecord(ev1, 0));
        GR_CUDA_DIE(cudaEventSynchronize(ev1));
        GR_CUDA_DIE(cudaEventElapsedTime(&t[r], ev0, ev1));
    }
    std::sort(t.begin(), t.end());
    return repeats % 2 ? t[repeats / 2] : 0.5 * (t[repeats / 2 - 1] + t[repeats / 2]);
}

template <class T> __global__ void k_fill(T *x, i64 n, unsigned long long seed)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        unsigned long long z = (unsigned long long)i * 0x9e3779b97f4a7c15ull + seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
        i64 v = (i64)((z >> 33) % 2001) - 1000;
        x[i] = std::is_floating_point<T>::value ? (T)(v / 8.0) : (T)v; /* floats: exact sums */
    }
}

/* Our variant on d_x into d_out; its states come back in host (gr_k_finish'ed into r). */
static bool our_result(const gr_kjob &j, struct gr_result *r)
{
    struct gr_err e;
    size_t sb = gr_k_state_bytes(&j);
    int64_t nout = gr_k_nout(&j);
    std::vector<unsigned char> states(nout * sb);
    if (cudaMemcpy(states.data(), j.out, states.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
        gr_result_alloc(r, nout, gr_result_is_int(j.op, j.dtype), gr_op_is_arg(j.op), &e) != GR_OK)
        return false;
    int64_t count = j.axis == GR_AXIS_ALL ? j.rows * j.cols : j.axis == 0 ? j.rows : j.cols;
    gr_k_finish(&j, states.data(), nout, count, r, 0);
    return true;
}

static double run_ours(gr_kjob j)
{
    size_t want = 0;
    struct gr_err e;
    if (gr_k_scratch(&j, &want, &e) != GR_OK) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    fit_scratch(want ? want : 1);
    return time_ms([&] { return gr_k_launch(&j, d_scratch, scratch_bytes, d_tickets, 0); });
}

/* CUB's own entry points, the reference: whole array (rows = 1) or one segment per row. */
struct row_start {
    i64 cols;
    __host__ __device__ i64 operator()(i64 r) const { return r * cols; }
};
template <class T> static cudaError_t cub_call(int op, bool segmented, i64 rows, i64 cols, void *tmp, size_t &bytes)
{
    const T *x = static_cast<const T *>(d_x);
    T *out = static_cast<T *>(d_ref);
    if (!segmented) {
        i64 n = rows * cols;
        if (op == GR_SUM)
            return cub::DeviceReduce::Sum(tmp, bytes, x, out, n);
        if (op == GR_MAX)
            return cub::DeviceReduce::Max(tmp, bytes, x, out, n);
        return cub::DeviceReduce::ArgMax(tmp, bytes, x, out, static_cast<i64 *>(d_ref_index), n);
    }
    auto starts = thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), row_start{cols});
    if (op == GR_SUM)
        return cub::DeviceSegmentedReduce::Sum(tmp, bytes, x, out, rows, starts, starts + 1);
    if (op == GR_MAX)
        return cub::DeviceSegmentedReduce::Max(tmp, bytes, x, out, rows, starts, starts + 1);
    return cub::DeviceSegmentedReduce::ArgMax(tmp, bytes, x, static_cast<cub::KeyValuePair<int, T> *>(d_ref), rows,
                                              starts, starts + 1);
}

template <class T> static double run_cub(int op, bool segmented, i64 rows, i64 cols)
{
    size_t want = 0;
    GR_CUDA_DIE(cub_call<T>(op, segmented, rows, cols, nullptr, want));
    fit_scratch(want);
    return time_ms([&] {
        size_t b = scratch_bytes;
        return cub_call<T>(op, segmented, rows, cols, d_scratch, b);
    });
}

/* Does our result r match what cub_call<T> left in d_ref / d_ref_index? Exact for max/argmax, int
 * sums modulo 2^32 (CUB sums int32 in int32), float64 sums (exact on our data); -1 for float32
 * sums, which CUB accumulates in float32. */
template <class T> static int cub_agrees(int op, bool segmented, const struct gr_result *r)
{
    if (op == GR_SUM && std::is_same<T, float>::value)
        return -1;
    size_t vb = segmented && op == GR_ARGMAX ? sizeof(cub::KeyValuePair<int, T>) : sizeof(T);
    std::vector<unsigned char> v(r->n * vb);
    std::vector<i64> idx(op == GR_ARGMAX && !segmented ? r->n : 0);
    if (cudaMemcpy(v.data(), d_ref, v.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
        (idx.size() && cudaMemcpy(idx.data(), d_ref_index, sizeof(i64), cudaMemcpyDeviceToHost) != cudaSuccess))
        return 0;
    for (int64_t o = 0; o < r->n; o++) {
        T val;
        i64 at = -1;
        if (segmented && op == GR_ARGMAX) {
            cub::KeyValuePair<int, T> kv;
            memcpy(&kv, &v[o * vb], sizeof kv);
            val = kv.value;
            at = kv.key;
        } else {
            memcpy(&val, &v[o * vb], sizeof val);
            if (op == GR_ARGMAX)
                at = idx[o];
        }
        bool same = r->i ? (op == GR_SUM ? (int32_t)r->i[o] == (int32_t)(i64)val : r->i[o] == (i64)val)
                         : r->f[o] == (double)val;
        if (!same || (r->index && r->index[o] != at))
            return 0;
    }
    return 1;
}

static const char *dtypes_shown[] = {"float32", "float64", "int32"};
static const int dtype_ids[] = {GR_FLOAT32, GR_FLOAT64, GR_INT32};
static const int ops[] = {GR_SUM, GR_MAX, GR_ARGMAX};

template <class F> static auto by_dtype(int dt, F &&f)
{
    if (dt == GR_FLOAT32)
        return f(float{});
    if (dt == GR_FLOAT64)
        return f(double{});
    return f(int{});
}

static void fill(int dt, i64 n)
{
    by_dtype(dt, [&](auto t) {
        using T = decltype(t);
        k_fill<T><<<sms * 8, 256>>>(static_cast<T *>(d_x), n, 0x1234567ull + n);
        return 0;
    });
    GR_CUDA_DIE(cudaDeviceSynchronize());
}

static void add(const char *section, const char *variant, int dt, int op, i64 rows, i64 cols, double ms,
                double cub_ms, int verified)
{
    double bytes = (double)rows * cols * gr_dtype_size(dt);
    rows_out.push_back({section, variant, gr_dtype_name(dt), gr_op_name(op), rows, cols, ms, bytes / ms / 1e6,
                        cub_ms > 0 ? cub_ms / ms : 0, verified});
    const row &w = rows_out.back();
    printf("%-6s %-8s %-7s %-6s %9lld x %-9lld %9.4f ms %8.1f GB/s", section, variant, w.dtype.c_str(), w.op.c_str(),
           (long long)rows, (long long)cols, ms, w.gbps);
    if (w.vs_cub > 0)
        printf("  %5.2fx CUB", w.vs_cub);
    printf("%s\n", verified == 0 ? "  MISMATCH" : "");
}

/* One (variant, op, dtype, shape) measured, and checked against a reference result. */
static double measure(const char *section, int variant, int dt, int op, int axis, i64 rows, i64 cols, double cub_ms,
                      const struct gr_result *ref, int cub_check)
{
    gr_kjob j = {variant, op, dt, axis, 0, rows, cols, d_x, d_out, sms};
    double ms = run_ours(j);
    struct gr_result r;
    int ok = -1;
    if (our_result(j, &r)) {
        if (ref)
            ok = r.n == ref->n && (r.i ? memcmp(r.i, ref->i, r.n * 8) == 0 : memcmp(r.f, ref->f, r.n * 8) == 0);
        else if (cub_check)
            ok = by_dtype(dt, [&](auto t) { return cub_agrees<decltype(t)>(op, axis == 1, &r); });
        gr_result_free(&r);
    } else {
        ok = 0;
    }
    add(section, gr_k_algos[variant].name, dt, op, rows, cols, ms, cub_ms, ok);
    return ms;
}

static double hbm_ceiling;

/* The ceiling every GB/s is judged by: CUB's float32 sum over 1 GiB (or the largest size allowed). */
static void measure_ceiling()
{
    i64 n = (i64)1 << (max_log2 < 28 ? max_log2 : 28);
    fill(GR_FLOAT32, n);
    hbm_ceiling = (double)n * 4 / run_cub<float>(GR_SUM, false, 1, n) / 1e6;
    printf("ceiling: CUB float32 sum over %lld elements, %.1f GB/s\n", (long long)n, hbm_ceiling);
}

/* The least one launch takes here: a block that writes one word, timed as every variant is. CUB's
 * single-tile path (whole arrays to about 2^12) is one launch too, so a one-launch `fast` can
 * beat it by no more than its time over this. */
static double launch_floor_ms;
__global__ void k_one_word(int *out)
{
    if (threadIdx.x == 0)
        *out = 1;
}
static void measure_launch_floor()
{
    launch_floor_ms = time_ms([] {
        k_one_word<<<1, 32>>>(static_cast<int *>(d_out));
        return cudaGetLastError();
    });
    printf("launch floor: one block writing one word, %.2f us\n", launch_floor_ms * 1e3);
}

static void whole_arrays()
{
    for (int d = 0; d < 3; d++) {
        int dt = dtype_ids[d];
        for (int lg = 10; lg <= max_log2; lg++) {
            i64 n = (i64)1 << lg;
            fill(dt, n);
            for (int op : ops) {
                double cub_ms = by_dtype(dt, [&](auto t) { return run_cub<decltype(t)>(op, false, 1, n); });
                add("whole", "CUB", dt, op, 1, n, cub_ms, 0, -1);
                measure("whole", GR_K_FAST, dt, op, GR_AXIS_ALL, 1, n, cub_ms, nullptr, 1);
                measure("whole", GR_K_CUB, dt, op, GR_AXIS_ALL, 1, n, cub_ms, nullptr, 1);
                if (op != GR_SUM || dt == GR_FLOAT64)
                    continue;
                /* the teaching variants, checked bit for bit against fast (exact sums on this data) */
                gr_kjob fj = {GR_K_FAST, op, dt, GR_AXIS_ALL, 0, 1, n, d_x, d_out, sms};
                struct gr_result ref;
                GR_CUDA_DIE(gr_k_launch(&fj, d_scratch, scratch_bytes, d_tickets, 0));
                if (!our_result(fj, &ref))
                    exit(1);
                for (int v = GR_K_HARRIS1; v <= GR_K_REDUX; v++)
                    if (gr_k_algos[v].dtypes & (1u << dt))
                        measure("whole", v, dt, op, GR_AXIS_ALL, 1, n, cub_ms, &ref, 0);
                gr_result_free(&ref);
            }
        }
    }
}

static void rows_and_columns(bool axis1, bool axis0)
{
    i64 total = (i64)1 << (max_log2 < 28 ? max_log2 : 28);
    for (int d = 0; d < 3; d++) {
        int dt = dtype_ids[d];
        fill(dt, (i64)1 << max_log2);
        for (int op : ops) {
            for (int lg = 4; axis1 && lg <= 20; lg++) {
                i64 cols = (i64)1 << lg, rows = total / cols;
                double cub_ms = by_dtype(dt, [&](auto t) { return run_cub<decltype(t)>(op, true, rows, cols); });
                add("axis1", "CUB", dt, op, rows, cols, cub_ms, 0, -1);
                measure("axis1", GR_K_FAST, dt, op, 1, rows, cols, cub_ms, nullptr, 1);
            }
            for (int lg = 20; axis0 && lg <= max_log2; lg += 2) {
                i64 rows = ((i64)1 << lg) / 9;
                measure("axis0", GR_K_FAST, dt, op, 0, rows, 9, 0, nullptr, 0);
            }
        }
    }
}

static void write_json(const char *path, const char *device, const char *date)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return;
    }
    fprintf(f, "{\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n  \"sms\": %d,\n  \"repeats\": %d,\n", device, date, sms,
            repeats);
    fprintf(f, "  \"timing\": \"median of CUDA-event times, L2 flushed before each run\",\n");
    fprintf(f, "  \"hbm_ceiling_gbps\": %.1f,\n  \"launch_floor_ms\": %.5f,\n  \"results\": [\n", hbm_ceiling,
            launch_floor_ms);
    for (size_t k = 0; k < rows_out.size(); k++) {
        const row &w = rows_out[k];
        fprintf(f,
                "    {\"section\": \"%s\", \"variant\": \"%s\", \"dtype\": \"%s\", \"op\": \"%s\", \"rows\": %lld, "
                "\"cols\": %lld, \"ms\": %.5f, \"gbps\": %.1f, \"vs_cub\": ",
                w.section.c_str(), w.variant.c_str(), w.dtype.c_str(), w.op.c_str(), (long long)w.rows,
                (long long)w.cols, w.ms, w.gbps);
        if (w.vs_cub > 0)
            fprintf(f, "%.3f", w.vs_cub);
        else
            fprintf(f, "null");
        fprintf(f, ", \"verified\": %s}%s\n", w.verified < 0 ? "null" : w.verified ? "true" : "false",
                k + 1 < rows_out.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

static const row *find(const char *section, const char *variant, const char *dtype, const char *op, i64 cols)
{
    for (const row &w : rows_out)
        if (w.section == section && w.variant == variant && w.dtype == dtype && w.op == op && w.cols == cols)
            return &w;
    return nullptr;
}

/* The short table the targets are judged by. */
static void summary()
{
    printf("\n== fast vs CUB, whole array (CUB time / fast time; >= 1.00 means at least as fast)\n");
    printf("%-8s %-7s", "dtype", "op");
    const int shown[] = {10, 12, 14, 16, 20, 24, 26, 28, 30};
    for (int lg : shown)
        if (lg <= max_log2)
            printf("  2^%-4d", lg);
    printf("\n");
    for (const char *dt : dtypes_shown)
        for (int op : ops) {
            printf("%-8s %-7s", dt, gr_op_name(op));
            for (int lg : shown)
                if (lg <= max_log2) {
                    const row *w = find("whole", "fast", dt, gr_op_name(op), (i64)1 << lg);
                    printf("  %5.2fx", w ? w->vs_cub : 0);
                }
            printf("\n");
        }
    int lg = max_log2 < 26 ? max_log2 : 26;
    printf("\n== teaching variants, sum, n = 2^%d (GB/s)\n", lg);
    for (const char *dt : {"float32", "int32"}) {
        printf("%-8s", dt);
        for (int v = GR_K_HARRIS1; v <= GR_K_REDUX; v++) {
            const row *w = find("whole", gr_k_algos[v].name, dt, "sum", (i64)1 << lg);
            if (w)
                printf(" %s %.0f", gr_k_algos[v].name, w->gbps);
        }
        printf("\n");
    }
    printf("\n== axis 1, fast GB/s (%% of the %.0f GB/s ceiling = CUB sum, 1 GiB float32)\n", hbm_ceiling);
    for (const char *dt : dtypes_shown)
        for (int op : ops) {
            printf("%-8s %-7s", dt, gr_op_name(op));
            for (int c = 4; c <= 20; c += 2) {
                const row *w = find("axis1", "fast", dt, gr_op_name(op), (i64)1 << c);
                printf(" 2^%d:%3.0f%%", c, w && hbm_ceiling > 0 ? 100 * w->gbps / hbm_ceiling : 0);
            }
            printf("\n");
        }
    printf("\n== axis 0, 9 columns, fast (%% of ceiling)\n");
    for (const row &w : rows_out)
        if (w.section == "axis0" && w.rows * 9 >= ((i64)1 << 26))
            printf("%-8s %-7s rows %-10lld %7.1f GB/s %4.0f%%\n", w.dtype.c_str(), w.op.c_str(), (long long)w.rows,
                   w.gbps, hbm_ceiling > 0 ? 100 * w.gbps / hbm_ceiling : 0);
    long bad = 0;
    for (const row &w : rows_out)
        bad += w.verified == 0;
    printf("\n%zu measurements, %ld mismatches\n", rows_out.size(), bad);
}

int main(int argc, char **argv)
{
    const char *out_path = "bench_reduce.json", *sections = "whole,axis1,axis0";
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--out") == 0)
            out_path = argv[k + 1];
        else if (strcmp(argv[k], "--repeats") == 0)
            repeats = atoi(argv[k + 1]) > 0 ? atoi(argv[k + 1]) : repeats;
        else if (strcmp(argv[k], "--sections") == 0)
            sections = argv[k + 1];
        else if (strcmp(argv[k], "--max-log2") == 0)
            max_log2 = atoi(argv[k + 1]) >= 10 && atoi(argv[k + 1]) <= 30 ? atoi(argv[k + 1]) : max_log2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("no GPU: nothing to measure\n");
        return 77;
    }
    cudaDeviceProp prop;
    GR_CUDA_DIE(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    flush_bytes = (size_t)prop.l2CacheSize * 4;
    GR_CUDA_DIE(cudaMalloc(&d_x, ((size_t)8) << max_log2));
    GR_CUDA_DIE(cudaMalloc(&d_out, (size_t)16 << 24)); /* up to 2^24 rows of 16-byte states */
    GR_CUDA_DIE(cudaMalloc(&d_ref, (size_t)16 << 24));
    GR_CUDA_DIE(cudaMalloc(&d_ref_index, 4096));
    GR_CUDA_DIE(cudaMalloc(&d_flush, flush_bytes));
    GR_CUDA_DIE(cudaMalloc((void **)&d_tickets, GR_K_COUNTERS * sizeof(unsigned)));
    GR_CUDA_DIE(cudaMemset(d_tickets, 0, GR_K_COUNTERS * sizeof(unsigned)));
    GR_CUDA_DIE(cudaEventCreate(&ev0));
    GR_CUDA_DIE(cudaEventCreate(&ev1));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    printf("%s, %d SMs, L2 %d MiB, %s; median of %d runs, L2 flushed (%zu MiB written) before each\n", prop.name, sms,
           prop.l2CacheSize >> 20, date, repeats, flush_bytes >> 20);

    measure_ceiling();
    measure_launch_floor();
    if (strstr(sections, "whole"))
        whole_arrays();
    rows_and_columns(strstr(sections, "axis1") != nullptr, strstr(sections, "axis0") != nullptr);
    write_json(out_path, prop.name, date);
    summary();
    return 0;
}
