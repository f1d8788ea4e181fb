/* sweep_tiles.cu: scratch sweep (session 17, kept as the record of what it measured) of whole
 * arrays in full tiles against CUB and production `fast`, in one process. Small arrays (2^10-2^12):
 * one block of B threads reading R unguarded vectors each (full_tile<R>). Mid arrays (2^18-2^24):
 * a block per tile of B x R vectors, full_tile<R>, the block's tree and a last-block ticket as in
 * k_fast_rows, against k_fast_rows with m x (resident blocks) pieces. Timing as bench_reduce's
 * (CUDA events, L2 flushed, median). Results are checked against production `fast` (arg ops and
 * max bit for bit, sums to 1e-6). Build (from the repo root):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Igpu/kernels -Igpu -Icommon -o sweep_tiles \
 *     bench/results/kernels-2026-11-26-h100-s17/sweep_tiles.cu BUILD/libgr_backend.a BUILD/libgr_common.a
 * Usage: sweep_tiles [repeats] [clu]: clu (call J) lets tiles down to 2^13 elements and sweeps
 * 2^13-2^18, to set tiles against the 8-block cluster that then took 64-256 KiB. */
#include "../../../gpu/kernels/reduce.cu"

#include <algorithm>
#include <functional>
#include <string>
#include <string.h>
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
bool clu; /* the clu mode: tiles from 2^13, sizes 2^13-2^18 */
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


/* One block, B threads x R whole vectors each, no bounds (n == B * R * V). */
template <class Op, int B, int R>
__global__ void __launch_bounds__(B) k_blkfull(Op op, const typename Op::input *__restrict__ x,
                                               typename Op::State *__restrict__ out)
{
    typename Op::State s = narrow_block_reduce<B, true>(op, full_tile<R>(op, x, 0, threadIdx.x, B), 0);
    if (threadIdx.x == 0)
        out[0] = s;
}

/* A block per tile of B x R vectors (n a whole number of tiles), its tree as k_fast_rows's, the
 * last block by ticket folds the partials. */
template <class Op, int B, int R>
__global__ void __launch_bounds__(B) k_tiles(Op op, const typename Op::input *__restrict__ x, int tiles,
                                             typename Op::State *__restrict__ part, unsigned *__restrict__ tickets,
                                             typename Op::State *__restrict__ out)
{
    using State = typename Op::State;
    constexpr int V = 16 / sizeof(typename Op::input);
    __shared__ bool finisher;
    i64 begin = (i64)blockIdx.x * B * R * V;
    State s = full_tile<R>(op, x, begin, threadIdx.x, B);
    if constexpr (std::is_same<typename Op::Wire, State>::value)
        s = block_reduce<B>(op, s);
    else
        s = narrow_block_reduce<B, false>(op, s, begin);
    if (threadIdx.x == 0) {
        part[blockIdx.x] = s;
        __threadfence();
        finisher = atomicAdd(&tickets[0], 1u) == (unsigned)tiles - 1;
    }
    __syncthreads();
    if (finisher) {
        s = op.id();
        for (int k = threadIdx.x; k < tiles; k += B)
            s = op(s, load_cg(part + k));
        s = block_reduce<B>(op, s);
        if (threadIdx.x == 0) {
            out[0] = s;
            tickets[0] = 0;
        }
    }
}

struct variant {
    std::string name;
    std::function<cudaError_t(i64 n)> run; /* enqueue on stream 0; cudaErrorInvalidValue: shape does not fit n */
};

template <class Op> std::vector<variant> variants(Op op)
{
    using In = typename Op::input;
    using State = typename Op::State;
    constexpr int V = 16 / sizeof(In);
    const In *x = static_cast<const In *>(d_x);
    State *out = static_cast<State *>(d_out), *part = static_cast<State *>(d_scratch);
    std::vector<variant> v;
    auto blk = [&](auto B_, auto R_) {
        constexpr int B = decltype(B_)::value, R = decltype(R_)::value;
        v.push_back({"blk" + std::to_string(B) + "x" + std::to_string(R), [=](i64 n) {
                         if (n != (i64)B * R * V)
                             return cudaErrorInvalidValue;
                         k_blkfull<Op, B, R><<<1, B>>>(op, x, out);
                         return cudaGetLastError();
                     }});
    };
    auto tiles = [&](auto B_, auto R_) {
        constexpr int B = decltype(B_)::value, R = decltype(R_)::value;
        v.push_back({"tile" + std::to_string(B) + "x" + std::to_string(R), [=](i64 n) {
                         i64 t = n / ((i64)B * R * V);
                         if (n < ((i64)1 << (clu ? 13 : 17)) || t < 2 || t * B * R * V != n || t > (1 << 20))
                             return cudaErrorInvalidValue;
                         k_tiles<Op, B, R><<<(unsigned)t, B>>>(op, x, (int)t, part, d_tickets, out);
                         return cudaGetLastError();
                     }});
    };
    auto tik = [&](auto U_, int m) {
        constexpr int U = decltype(U_)::value;
        v.push_back({"rows" + std::to_string(m) + "x" + std::to_string(U), [=](i64 n) {
                         constexpr auto k = k_fast_rows<Op, 256, U>;
                         if (n < ((i64)1 << 17))
                             return cudaErrorInvalidValue;
                         i64 chunks = (i64)sms * occupancy<k>(256) * m;
                         i64 chunk = ceil_div(ceil_div(n, chunks), V) * V;
                         chunks = ceil_div(n, chunk);
                         k<<<(unsigned)chunks, 256>>>(op, x, 1, n, (int)chunks, chunk, part, d_tickets, out);
                         return cudaGetLastError();
                     }});
    };
    using I = std::integral_constant<int, 1>;
    using II = std::integral_constant<int, 2>;
    using IV = std::integral_constant<int, 4>;
    using VIII = std::integral_constant<int, 8>;
    using B64 = std::integral_constant<int, 64>;
    using B128 = std::integral_constant<int, 128>;
    using B256 = std::integral_constant<int, 256>;
    using B512 = std::integral_constant<int, 512>;
    blk(B64{}, IV{});
    blk(B128{}, I{});
    blk(B128{}, II{});
    blk(B128{}, IV{});
    blk(B256{}, I{});
    blk(B256{}, II{});
    blk(B256{}, IV{});
    tiles(B256{}, II{});
    tiles(B256{}, IV{});
    tiles(B256{}, VIII{});
    tiles(B128{}, IV{});
    tiles(B128{}, VIII{});
    tiles(B512{}, IV{});
    tik(IV{}, 1);
    tik(IV{}, 2);
    tik(II{}, 2);
    tik(II{}, 4);
    return v;
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
    auto vs = variants(o);
    for (int lg : clu ? std::vector<int>{13, 14, 15, 16, 17, 18} : std::vector<int>{10, 11, 12, 18, 19, 20, 21, 22, 23, 24}) {
        i64 n = (i64)1 << lg;
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
        printf("%-7s %-6s 2^%-2d cub %6.2f us | prod %6.2f (%.3f) |", dtype, opname, lg, cub, prod, cub / prod);
        fprintf(json, "{\"dtype\":\"%s\",\"op\":\"%s\",\"n\":%lld,\"cub_us\":%.3f,\"prod_us\":%.3f", dtype, opname,
                (long long)n, cub, prod);
        std::vector<std::pair<double, std::string>> best;
        for (auto &v : vs) {
            cudaError_t e = v.run(n);
            if (e == cudaErrorInvalidValue)
                continue;
            DIE(e);
            double t = time_us([&] { return v.run(n); });
            State got;
            DIE(cudaMemcpy(&got, d_out, sizeof got, cudaMemcpyDeviceToHost));
            bool same = same_result(op, got, want);
            best.push_back({t, v.name + (same ? "" : "!MISMATCH")});
            fprintf(json, ",\"%s\":%.3f%s", v.name.c_str(), t, same ? "" : ",\"mismatch\":1");
        }
        fprintf(json, "}\n");
        std::sort(best.begin(), best.end());
        for (size_t k = 0; k < best.size() && k < 6; k++)
            printf(" %s %.2f (%.3f)", best[k].second.c_str(), best[k].first, cub / best[k].first);
        printf("\n");
        fflush(stdout);
    }
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1)
        repeats = atoi(argv[1]) | 1;
    clu = argc > 2 && strcmp(argv[2], "clu") == 0;
    cudaDeviceProp prop;
    DIE(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    flush_bytes = (size_t)prop.l2CacheSize * 4;
    DIE(cudaMalloc(&d_x, (size_t)8 << 24));
    DIE(cudaMalloc(&d_out, 4096));
    DIE(cudaMalloc(&d_ref, 4096));
    DIE(cudaMalloc(&d_idx, 4096));
    DIE(cudaMalloc(&d_flush, flush_bytes));
    DIE(cudaMalloc(&d_scratch, scratch_bytes));
    DIE(cudaMalloc((void **)&d_tickets, GR_K_COUNTERS * sizeof(unsigned)));
    DIE(cudaMemset(d_tickets, 0, GR_K_COUNTERS * sizeof(unsigned)));
    DIE(cudaEventCreate(&ev0));
    DIE(cudaEventCreate(&ev1));
    printf("%s, %d SMs; median of %d, L2 flushed; (ratio) = CUB time / this time; best 6 shapes shown\n", prop.name,
           sms, repeats);
    FILE *json = fopen(getenv("SWEEP_JSON") ? getenv("SWEEP_JSON") : "sweep_tiles.jsonl", "w");
    sweep("float32", "sum", GR_SUM, Sum<float>{}, json);
    sweep("float32", "max", GR_MAX, Max<float>{}, json);
    sweep("float32", "argmax", GR_ARGMAX, Arg<float, true>{{}, 0}, json);
    sweep("int32", "sum", GR_SUM, Sum<int>{}, json);
    sweep("int32", "argmax", GR_ARGMAX, Arg<int, true>{{}, 0}, json);
    sweep("float64", "sum", GR_SUM, Sum<double>{}, json);
    sweep("float64", "argmax", GR_ARGMAX, Arg<double, true>{{}, 0}, json);
    fclose(json);
    return 0;
}
