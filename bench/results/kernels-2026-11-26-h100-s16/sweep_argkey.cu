/* sweep_argkey.cu: scratch experiment (session 16), kept as its record. Two questions about the
 * small whole arrays where `fast` trails CUB (4-byte argmax at 2^10-2^11, 4-byte sum and max at
 * 2^12), against production `fast` and CUB in one process, timed as bench_reduce times:
 *  - argk: the block tree of a 4-byte arg op on one 64-bit key (the value mapped to an ordered
 *    u32 above, the index below, NaN on top), so that each level is one 64-bit max rather than
 *    the NaN / value / index comparisons of Arg::better;
 *  - exact: a block that reads exactly 256 threads x 4 vectors with no bounds (CUB's full tile),
 *    against thread_range's general head / vectors / tail code.
 * Build like sweep_small.cu. Usage: sweep_argkey [repeats] */
#include "../../../gpu/kernels/reduce.cu"

#include <algorithm>
#include <functional>
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

int repeats = 101, sms;
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

struct key64 {
    u64 k; /* 0: empty */
};
__device__ inline key64 shfl_down(key64 s, int off, int w)
{
    return key64{(u64)__shfl_down_sync(FULL_MASK, (long long)s.k, off, w)};
}

/* Arg with its Wire a key64: high word the value ordered so that the winner is largest (NaN
 * top), low word the index (~i: the first of equals wins; i + 1 with ties_last), never 0. */
template <class In, bool MAX> struct ArgK : Arg<In, MAX> {
    using S = typename Arg<In, MAX>::S;
    using Wire = key64;
    __device__ static unsigned ord(In v)
    {
        if constexpr (std::is_same<In, float>::value) {
            unsigned b = __float_as_uint(v);
            return (b & 0x80000000u) ? ~b : b | 0x80000000u;
        } else {
            return (unsigned)v ^ 0x80000000u;
        }
    }
    __device__ static In unord(unsigned u)
    {
        if constexpr (std::is_same<In, float>::value)
            return __uint_as_float((u & 0x80000000u) ? u & 0x7fffffffu : ~u);
        else
            return (In)(u ^ 0x80000000u);
    }
    __device__ Wire wire(S s, i64 base) const
    {
        if (s.i < 0)
            return {0};
        In v = (In)s.v;
        unsigned hi = is_nan(v) ? 0xffffffffu : MAX ? ord(v) : ~ord(v);
        unsigned i = (unsigned)(s.i - base), lo = this->last ? i + 1 : ~i;
        return {((u64)hi << 32) | lo};
    }
    __device__ Wire join(Wire a, Wire b) const { return a.k > b.k ? a : b; }
    __device__ S unwire(Wire w, i64 base) const
    {
        if (w.k == 0)
            return S{0, -1};
        unsigned hi = (unsigned)(w.k >> 32), lo = (unsigned)w.k;
        In v = unord(MAX ? hi : ~hi);
        if constexpr (std::is_same<In, float>::value)
            if (hi == 0xffffffffu)
                v = __int_as_float(0x7fffffff);
        return S{(typename Arg<In, MAX>::Acc)v, base + (i64)(this->last ? lo - 1 : ~lo)};
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

/* exactly B x U vectors, no bounds */
template <class Op, int B, int U>
__global__ void __launch_bounds__(B) k_exact(Op op, const typename Op::input *__restrict__ x,
                                             typename Op::State *__restrict__ out)
{
    using In = typename Op::input;
    constexpr int V = 16 / sizeof(In);
    const vec16<In> *xv = reinterpret_cast<const vec16<In> *>(x);
    vec16<In> r[U];
#pragma unroll
    for (int u = 0; u < U; u++)
        r[u] = xv[threadIdx.x + u * B];
    auto s = op.lid();
#pragma unroll
    for (int u = 0; u < U; u++)
        s = op.lvec(s, r[u].e, (i64)(threadIdx.x + u * B) * V);
    typename Op::State st = narrow_block_reduce<B, true>(op, op.done(s), 0);
    if (threadIdx.x == 0)
        out[0] = st;
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
    if (op == GR_MIN)
        return cub::DeviceReduce::Min(tmp, bytes, x, out, n);
    if (op == GR_ARGMIN)
        return cub::DeviceReduce::ArgMin(tmp, bytes, x, out, static_cast<i64 *>(d_idx), n);
    return cub::DeviceReduce::ArgMax(tmp, bytes, x, out, static_cast<i64 *>(d_idx), n);
}

/* One line: CUB, prod, then each (name, launcher) with its ratio; results checked against prod's. */
template <class In, class State>
void line(const char *what, int op, int last, int lg, std::vector<std::pair<const char *, std::function<cudaError_t()>>> vs)
{
    i64 n = (i64)1 << lg;
    size_t want = 0;
    DIE(cub_ref<In>(op, n, nullptr, want));
    double cub = time_us([&] {
        size_t b = scratch_bytes;
        return cub_ref<In>(op, n, d_scratch, b);
    });
    int dt = std::is_same<In, float>::value ? GR_FLOAT32 : std::is_same<In, double>::value ? GR_FLOAT64 : GR_INT32;
    gr_kjob j = {GR_K_FAST, op, dt, GR_AXIS_ALL, last, 1, n, d_x, d_ref, sms};
    double prod = time_us([&] { return gr_k_launch(&j, d_scratch, scratch_bytes, d_tickets, 0); });
    State want_state;
    DIE(cudaMemcpy(&want_state, d_ref, sizeof want_state, cudaMemcpyDeviceToHost));
    printf("%-22s 2^%-2d cub %5.2f | prod %5.2f (%.3f)", what, lg, cub, prod, cub / prod);
    for (auto &v : vs) {
        double t = time_us(v.second);
        State got;
        DIE(cudaMemcpy(&got, d_out, sizeof got, cudaMemcpyDeviceToHost));
        printf(" | %s %5.2f (%.3f)%s", v.first, t, cub / t, memcmp(&got, &want_state, sizeof got) ? " MISMATCH" : "");
    }
    printf("\n");
    fflush(stdout);
}

template <class In> void fill(i64 n, unsigned long long seed)
{
    k_fill<In><<<sms * 8, 256>>>(static_cast<In *>(d_x), n, seed);
    DIE(cudaDeviceSynchronize());
}

template <class In, bool MAX> void argk(int last)
{
    using A = Arg<In, MAX>;
    using K = ArgK<In, MAX>;
    using State = typename A::State;
    A a{{}, last};
    K k;
    k.last = last;
    const In *x = static_cast<const In *>(d_x);
    State *out = static_cast<State *>(d_out);
    char what[64];
    snprintf(what, sizeof what, "%s %s%s", std::is_same<In, float>::value ? "float32" : "int32",
             MAX ? "argmax" : "argmin", last ? " last" : "");
    for (int lg = 10; lg <= 14; lg++) {
        i64 n = (i64)1 << lg;
        fill<In>(n, 0x1234567ull + n);
        auto b256 = [=](auto op) { return [=] { k_blk<decltype(op), 256, 2><<<1, 256>>>(op, x, n, out); return cudaGetLastError(); }; };
        auto b1024 = [=](auto op) { return [=] { k_blk<decltype(op), 1024, 2><<<1, 1024>>>(op, x, n, out); return cudaGetLastError(); }; };
        line<In, State>(what, MAX ? GR_ARGMAX : GR_ARGMIN, last, lg,
                        {{"blk256 arg", b256(a)}, {"blk256 key", b256(k)}, {"blk1024 arg", b1024(a)}, {"blk1024 key", b1024(k)}});
    }
}

template <class Op> void exact(const char *what, int op)
{
    using In = typename Op::input;
    using State = typename Op::State;
    constexpr int V = 16 / sizeof(In);
    i64 n = 256 * 4 * V;
    int lg = 0;
    while (((i64)1 << lg) < n)
        lg++;
    fill<In>(n, 0x1234567ull + n);
    const In *x = static_cast<const In *>(d_x);
    State *out = static_cast<State *>(d_out);
    Op o{};
    line<In, State>(what, op, 0, lg,
                    {{"blk256x2", [=] { k_blk<Op, 256, 2><<<1, 256>>>(o, x, n, out); return cudaGetLastError(); }},
                     {"blk256x4", [=] { k_blk<Op, 256, 4><<<1, 256>>>(o, x, n, out); return cudaGetLastError(); }},
                     {"exact256x4", [=] { k_exact<Op, 256, 4><<<1, 256>>>(o, x, out); return cudaGetLastError(); }}});
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
    printf("%s, %d SMs; median of %d, L2 flushed; us, (CUB time / this time)\n", prop.name, sms, repeats);
    argk<float, true>(0);
    argk<float, true>(1);
    argk<float, false>(0);
    argk<int, true>(0);
    argk<int, false>(1);
    exact<Sum<float>>("float32 sum", GR_SUM);
    exact<Max<float>>("float32 max", GR_MAX);
    exact<Sum<int>>("int32 sum", GR_SUM);
    exact<Sum<double>>("float64 sum", GR_SUM);
    exact<Arg<float, true>>("float32 argmax", GR_ARGMAX);
    return 0;
}
