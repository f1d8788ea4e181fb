/* sweep_small.cu: scratch sweep (session 16, kept as the record of what chose the small-array
 * shapes) of one-launch kernel shapes for whole arrays of 2^10..2^18 elements against CUB, in one
 * process: one block of B threads, a cluster of C blocks, C blocks with a last-block ticket.
 * Same timing as bench_reduce (CUDA events, L2 flushed, median). Every result is checked bit for
 * bit against production `fast`. Build (from the repo root):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Igpu/kernels -Igpu -Icommon -o sweep_small \
 *     bench/results/kernels-2026-11-26-h100-s16/sweep_small.cu BUILD/libgr_backend.a BUILD/libgr_common.a
 * Usage: sweep_small [repeats] */
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

/* A float or int sum whose vector is added as a tree ((e0+e1)+(e2+e3)) before it meets the
 * thread's running sum: a chain of n/4 dependent adds instead of n. */
template <class In> struct SumPair : Sum<In> {
    template <class L, int V> __device__ L lvec(L s, const In (&e)[V], i64) const
    {
        acc_t<In> a[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            a[k] = (acc_t<In>)e[k];
#pragma unroll
        for (int w = 1; w < V; w *= 2)
#pragma unroll
            for (int k = 0; k + w < V; k += 2 * w)
                a[k] = add(a[k], a[k + w]);
        return add(s, a[0]);
    }
};

template <class Op, int B, int U>
__global__ void __launch_bounds__(B) k_blk(Op op, const typename Op::input *__restrict__ x, i64 n,
                                           typename Op::State *__restrict__ out)
{
    typename Op::State s = narrow_block_reduce<B, true>(op, thread_range<U>(op, x, 0, n, threadIdx.x, B), 0);
    if (threadIdx.x == 0)
        out[0] = s;
}

template <class Op, int B, int U>
__global__ void __launch_bounds__(B) k_clu(Op op, const typename Op::input *__restrict__ x, i64 n, i64 chunk_len,
                                           typename Op::State *__restrict__ out)
{
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ typename Op::State part;
    i64 begin = (i64)cluster.block_rank() * chunk_len;
    typename Op::State s = thread_range<U>(op, x, begin, min(n, begin + chunk_len), threadIdx.x, B);
    s = narrow_block_reduce<B, true>(op, s, 0);
    if (threadIdx.x == 0)
        part = s;
    cluster.sync();
    if (cluster.block_rank() == 0 && threadIdx.x < 32) {
        s = threadIdx.x < cluster.num_blocks() ? *cluster.map_shared_rank(&part, threadIdx.x) : op.id();
        s = group_reduce<32>(op, s);
        if (threadIdx.x == 0)
            out[0] = s;
    }
    cluster.sync();
}

struct variant {
    std::string name;
    std::function<cudaError_t(i64 n)> run; /* enqueue on stream 0 */
    i64 max_n;
};

template <class Op> std::vector<variant> variants(Op op)
{
    using In = typename Op::input;
    using State = typename Op::State;
    constexpr int V = 16 / sizeof(In);
    const In *x = static_cast<const In *>(d_x);
    State *out = static_cast<State *>(d_out);
    std::vector<variant> v;
    auto blk = [&](auto B_, auto U_) {
        constexpr int B = decltype(B_)::value, U = decltype(U_)::value;
        v.push_back({"blk" + std::to_string(B) + "x" + std::to_string(U), [=](i64 n) {
                         k_blk<Op, B, U><<<1, B>>>(op, x, n, out);
                         return cudaGetLastError();
                     }, (i64)1 << 16});
    };
    auto clu = [&](auto B_, auto U_, int C) {
        constexpr int B = decltype(B_)::value, U = decltype(U_)::value;
        auto k = k_clu<Op, B, U>;
        if (C > 8)
            DIE(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        v.push_back({"clu" + std::to_string(C) + "x" + std::to_string(B) + "x" + std::to_string(U), [=](i64 n) {
                         cudaLaunchConfig_t cfg = {};
                         cudaLaunchAttribute at[1];
                         at[0].id = cudaLaunchAttributeClusterDimension;
                         at[0].val.clusterDim.x = C;
                         at[0].val.clusterDim.y = 1;
                         at[0].val.clusterDim.z = 1;
                         cfg.gridDim = dim3(C);
                         cfg.blockDim = dim3(B);
                         cfg.attrs = at;
                         cfg.numAttrs = 1;
                         i64 chunk = ceil_div(ceil_div(n, C), V) * V;
                         return cudaLaunchKernelEx(&cfg, k, op, x, n, chunk, out);
                     }, (i64)1 << 20});
    };
    auto tik = [&](auto B_, auto U_, int C) {
        constexpr int B = decltype(B_)::value, U = decltype(U_)::value;
        v.push_back({"tik" + std::to_string(C) + "x" + std::to_string(B) + "x" + std::to_string(U), [=](i64 n) {
                         i64 chunk = ceil_div(ceil_div(n, C), V) * V;
                         int chunks = (int)ceil_div(n, chunk);
                         k_fast_rows<Op, B, U><<<chunks, B>>>(op, x, 1, n, chunks, chunk,
                                                              static_cast<State *>(d_scratch), d_tickets, out);
                         return cudaGetLastError();
                     }, (i64)1 << 20});
    };
    using I = std::integral_constant<int, 1>;
    using II = std::integral_constant<int, 2>;
    using IV = std::integral_constant<int, 4>;
    using VIII = std::integral_constant<int, 8>;
    using B256 = std::integral_constant<int, 256>;
    using B512 = std::integral_constant<int, 512>;
    using B1024 = std::integral_constant<int, 1024>;
    blk(B256{}, II{});
    blk(B256{}, IV{});
    blk(B512{}, I{});
    blk(B512{}, II{});
    blk(B1024{}, I{});
    blk(B1024{}, II{});
    for (int C : {2, 4, 8, 16}) {
        clu(B256{}, II{}, C);
        clu(B256{}, VIII{}, C);
        clu(B512{}, II{}, C);
        clu(B1024{}, I{}, C);
        clu(B1024{}, II{}, C);
    }
    for (int C : {2, 4, 8, 16, 32, 64}) {
        tik(B256{}, II{}, C);
        tik(B256{}, IV{}, C);
        tik(B512{}, II{}, C);
        tik(B1024{}, I{}, C);
    }
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

template <class Op> void sweep(const char *dtype, const char *opname, int op, Op o, FILE *json)
{
    using In = typename Op::input;
    using State = typename Op::State;
    auto vs = variants(o);
    for (int lg = 10; lg <= 18; lg++) {
        i64 n = (i64)1 << lg;
        k_fill<In><<<sms * 8, 256>>>(static_cast<In *>(d_x), n, 0x1234567ull + n);
        DIE(cudaDeviceSynchronize());
        size_t want = 0;
        DIE(cub_ref<In>(op, n, nullptr, want));
        double cub = time_us([&] {
            size_t b = scratch_bytes;
            return cub_ref<In>(op, n, d_scratch, b);
        });
        gr_kjob j = {GR_K_FAST, op, std::is_same<In, float>::value ? GR_FLOAT32
                                    : std::is_same<In, double>::value ? GR_FLOAT64 : GR_INT32,
                     GR_AXIS_ALL, 0, 1, n, d_x, d_ref, sms};
        double prod = time_us([&] { return gr_k_launch(&j, d_scratch, scratch_bytes, d_tickets, 0); });
        State want_state;
        DIE(cudaMemcpy(&want_state, d_ref, sizeof want_state, cudaMemcpyDeviceToHost));
        printf("%-7s %-8s 2^%-2d cub %6.2f us | prod %6.2f (%.3f) |", dtype, opname, lg, cub, prod, cub / prod);
        fprintf(json, "{\"dtype\":\"%s\",\"op\":\"%s\",\"n\":%lld,\"cub_us\":%.3f,\"prod_us\":%.3f", dtype, opname,
                (long long)n, cub, prod);
        std::vector<std::pair<double, std::string>> best;
        for (auto &v : vs) {
            if (n > v.max_n)
                continue;
            double t = time_us([&] { return v.run(n); });
            State got;
            DIE(cudaMemcpy(&got, d_out, sizeof got, cudaMemcpyDeviceToHost));
            bool same = memcmp(&got, &want_state, sizeof got) == 0;
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
    cudaDeviceProp prop;
    DIE(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    flush_bytes = (size_t)prop.l2CacheSize * 4;
    DIE(cudaMalloc(&d_x, (size_t)8 << 20));
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
    FILE *json = fopen(getenv("SWEEP_JSON") ? getenv("SWEEP_JSON") : "sweep_small.jsonl", "w");
    sweep("float32", "sum", GR_SUM, Sum<float>{}, json);
    sweep("float32", "sumpair", GR_SUM, SumPair<float>{}, json);
    sweep("float32", "max", GR_MAX, Max<float>{}, json);
    sweep("float32", "argmax", GR_ARGMAX, Arg<float, true>{{}, 0}, json);
    sweep("int32", "sum", GR_SUM, Sum<int>{}, json);
    sweep("int32", "sumpair", GR_SUM, SumPair<int>{}, json);
    sweep("int32", "argmax", GR_ARGMAX, Arg<int, true>{{}, 0}, json);
    sweep("float64", "sum", GR_SUM, Sum<double>{}, json);
    sweep("float64", "argmax", GR_ARGMAX, Arg<double, true>{{}, 0}, json);
    fclose(json);
    return 0;
}
