/* sweep_big.cu: scratch sweep (session 17, kept as the record) of k_fast_rows' piece count for
 * whole arrays of 2^28-2^30 elements (float64 to 8 GiB) against CUB and production `fast`, in
 * one process: rounds x (resident blocks) pieces. Timing as bench_reduce's (CUDA events, L2
 * flushed, median). Results are checked against production `fast` (arg ops bit for bit, sums to
 * 1e-6). Build (from the repo root):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Igpu/kernels -Igpu -Icommon -o sweep_big \
 *     bench/results/kernels-2026-11-26-h100-s17/sweep_big.cu BUILD/libgr_backend.a BUILD/libgr_common.a
 * Usage: sweep_big [repeats] */
#include "../../../gpu/kernels/reduce.cu"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <stdio.h>
#include <stdlib.h>

#define DIE(x)                                                                                     \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

namespace {

int repeats = 41, sms;
void *d_x, *d_out, *d_ref, *d_idx, *d_flush, *d_scratch;
unsigned *d_tickets;
size_t flush_bytes, scratch_bytes = 64 << 20;
cudaEvent_t ev0, ev1;

double time_us(const std::function<cudaError_t()> &fn)
{
    DIE(fn());
    DIE(cudaDeviceSynchronize());
    std::vector<float> t(repeats);
    for (int r = 0; r < repeats; r++) {
        DIE(cudaMemsetAsync(d_flush, r & 0xff, flush_bytes, 0));
        DIE(cudaEventRecord(ev0, 0));
        DIE(fn());
        DIE(cudaEventRecord(ev1, 0));
        DIE(cudaEventSynchronize(ev1));
        DIE(cudaEventElapsedTime(&t[r], ev0, ev1));
    }
    std::sort(t.begin(), t.end());
    return 1000.0 * t[repeats / 2];
}


template <class T> __global__ void k_fill(T *x, i64 n, unsigned long long seed)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        unsigned long long z = (unsigned long long)i * 0x9e3779b97f4a7c15ull + seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
        i64 v = (i64)((z >> 33) % 2001) - 1000;
        x[i] = std::is_floating_point<T>::value ? (T)(v / 8.0) : (T)v;
    }
}

template <class T> cudaError_t cub_ref(int op, i64 n, void *tmp, size_t &bytes)
{
    const T *x = static_cast<const T *>(d_x);
    T *out = static_cast<T *>(d_ref);
    if (op == GR_SUM)
        return cub::DeviceReduce::Sum(tmp, bytes, x, out, n);
    if (op == GR_MAX)
        return cub::DeviceReduce::Max(tmp, bytes, x, out, n);
    return cub::DeviceReduce::ArgMax(tmp, bytes, x, out, static_cast<i64 *>(d_idx), n);
}

/* sums: the same to 1e-6 (a different order of adds); the rest bit for bit */
template <class S> bool same_result(int op, const S &a, const S &b)
{
    if constexpr (std::is_arithmetic<S>::value) {
        if (op == GR_SUM)
            return fabs((double)a - (double)b) <= 1e-6 * fmax(1.0, fabs((double)b));
    }
    return memcmp(&a, &b, sizeof a) == 0;
}

template <class Op> void sweep(const char *dtype, const char *opname, int op, Op o, FILE *json)
{
    using In = typename Op::input;
    using State = typename Op::State;
    constexpr int V = 16 / sizeof(In);
    constexpr auto k = k_fast_rows<Op, 256, 4>;
    i64 slots = (i64)sms * occupancy<k>(256);
    for (int lg : {28, 29, 30}) {
        i64 n = (i64)1 << lg;
        if (n * (i64)sizeof(In) > ((i64)8 << 30))
            continue;
        k_fill<In><<<sms * 8, 256>>>(static_cast<In *>(d_x), n, 0x1234567ull + n);
        DIE(cudaDeviceSynchronize());
        double cub = time_us([&] {
            size_t b = scratch_bytes;
            return cub_ref<In>(op, n, d_scratch, b);
        });
        gr_kjob j = {GR_K_FAST, op, std::is_same<In, float>::value ? GR_FLOAT32
                                    : std::is_same<In, double>::value ? GR_FLOAT64 : GR_INT32,
                     GR_AXIS_ALL, 0, 1, n, d_x, d_ref, sms};
        double prod = time_us([&] { return gr_k_launch(&j, d_scratch, scratch_bytes, d_tickets, 0); });
        State want;
        DIE(cudaMemcpy(&want, d_ref, sizeof want, cudaMemcpyDeviceToHost));
        printf("%-7s %-6s 2^%-2d cub %8.2f us | prod %8.2f (%.3f) |", dtype, opname, lg, cub, prod, cub / prod);
        fprintf(json, "{\"dtype\":\"%s\",\"op\":\"%s\",\"n\":%lld,\"cub_us\":%.3f,\"prod_us\":%.3f", dtype, opname,
                (long long)n, cub, prod);
        for (int rounds : {16, 24, 32, 48, 64, 96, 128, 192}) {
            i64 chunks = rounds * slots;
            i64 chunk = ceil_div(ceil_div(n, chunks), V) * V;
            chunks = ceil_div(n, chunk);
            State *part = static_cast<State *>(d_scratch);
            double t = time_us([&] {
                k<<<(unsigned)chunks, 256>>>(o, static_cast<const In *>(d_x), 1, n, (int)chunks, chunk, part, d_tickets,
                                             static_cast<State *>(d_out));
                return cudaGetLastError();
            });
            State got;
            DIE(cudaMemcpy(&got, d_out, sizeof got, cudaMemcpyDeviceToHost));
            bool same = same_result(op, got, want);
            printf(" r%d %.1f (%.3f)%s", rounds, t, cub / t, same ? "" : "!MISMATCH");
            fprintf(json, ",\"r%d\":%.3f%s", rounds, t, same ? "" : ",\"mismatch\":1");
        }
        fprintf(json, "}\n");
        printf("\n");
        fflush(stdout);
    }
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1)
        repeats = atoi(argv[1]) | 1;
    cudaDeviceProp prop;
    DIE(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    flush_bytes = (size_t)prop.l2CacheSize * 4;
    DIE(cudaMalloc(&d_x, (size_t)8 << 30));
    DIE(cudaMalloc(&d_out, 4096));
    DIE(cudaMalloc(&d_ref, 4096));
    DIE(cudaMalloc(&d_idx, 4096));
    DIE(cudaMalloc(&d_flush, flush_bytes));
    DIE(cudaMalloc(&d_scratch, scratch_bytes));
    DIE(cudaMalloc((void **)&d_tickets, GR_K_COUNTERS * sizeof(unsigned)));
    DIE(cudaMemset(d_tickets, 0, GR_K_COUNTERS * sizeof(unsigned)));
    DIE(cudaEventCreate(&ev0));
    DIE(cudaEventCreate(&ev1));
    printf("%s, %d SMs; median of %d, L2 flushed; (ratio) = CUB time / this time; rN: N rounds of resident blocks\n",
           prop.name, sms, repeats);
    FILE *json = fopen(getenv("SWEEP_JSON") ? getenv("SWEEP_JSON") : "sweep_big.jsonl", "w");
    sweep("float64", "sum", GR_SUM, Sum<double>{}, json);
    sweep("float64", "max", GR_MAX, Max<double>{}, json);
    sweep("float64", "argmax", GR_ARGMAX, Arg<double, true>{{}, 0}, json);
    sweep("float32", "sum", GR_SUM, Sum<float>{}, json);
    sweep("float32", "argmax", GR_ARGMAX, Arg<float, true>{{}, 0}, json);
    fclose(json);
    return 0;
}
