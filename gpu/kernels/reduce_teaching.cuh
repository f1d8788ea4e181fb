/* reduce_teaching.cuh: the teaching variants, selectable and tested beside the production path:
 * Harris's seven kernels, warp shuffles, __reduce_*_sync (redux) and CUB, the reference. Included
 * by reduce.cu alone; each launcher runs on the caller's stream, no state. */

namespace {

/* ---------------------------------------------------------------- harris1 .. harris7 */

constexpr int HARRIS_BLOCK = 256;

template <class Acc> __device__ Acc *harris_smem()
{
    extern __shared__ unsigned char smem_raw[];
    return reinterpret_cast<Acc *>(smem_raw);
}

template <class In, class Acc> __global__ void k_harris1(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    i64 i = (i64)blockIdx.x * blockDim.x + t;
    s[t] = i < n ? (Acc)x[i] : 0;
    __syncthreads();
    for (unsigned k = 1; k < blockDim.x; k *= 2) {
        if (t % (2 * k) == 0)
            s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <class In, class Acc> __global__ void k_harris2(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    i64 i = (i64)blockIdx.x * blockDim.x + t;
    s[t] = i < n ? (Acc)x[i] : 0;
    __syncthreads();
    for (unsigned k = 1; k < blockDim.x; k *= 2) {
        unsigned j = 2 * k * t;
        if (j < blockDim.x)
            s[j] += s[j + k];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <class In, class Acc> __global__ void k_harris3(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    i64 i = (i64)blockIdx.x * blockDim.x + t;
    s[t] = i < n ? (Acc)x[i] : 0;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k)
            s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <class In, class Acc> __device__ Acc load_pair(const In *x, i64 n, i64 i, unsigned b)
{
    Acc v = i < n ? (Acc)x[i] : 0;
    return i + b < n ? v + (Acc)x[i + b] : v;
}

template <class In, class Acc> __global__ void k_harris4(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    s[t] = load_pair<In, Acc>(x, n, (i64)blockIdx.x * blockDim.x * 2 + t, blockDim.x);
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k)
            s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

/* Harris's version relied on implicit warp lockstep, which Volta's independent thread
 * scheduling broke: each read and write is separated by __syncwarp. */
template <class Acc> __device__ void last_warp(Acc *s, unsigned t)
{
#pragma unroll
    for (unsigned k = 32; k > 0; k >>= 1) {
        Acc v = s[t] + s[t + k];
        __syncwarp();
        s[t] = v;
        __syncwarp();
    }
}

template <class In, class Acc> __global__ void k_harris5(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    s[t] = load_pair<In, Acc>(x, n, (i64)blockIdx.x * blockDim.x * 2 + t, blockDim.x);
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 32; k >>= 1) {
        if (t < k)
            s[t] += s[t + k];
        __syncthreads();
    }
    if (t < 32)
        last_warp(s, t);
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <int BS, class Acc> __device__ void unrolled_tree(Acc *s, unsigned t)
{
    if constexpr (BS >= 1024) {
        if (t < 512)
            s[t] += s[t + 512];
        __syncthreads();
    }
    if constexpr (BS >= 512) {
        if (t < 256)
            s[t] += s[t + 256];
        __syncthreads();
    }
    if constexpr (BS >= 256) {
        if (t < 128)
            s[t] += s[t + 128];
        __syncthreads();
    }
    if constexpr (BS >= 128) {
        if (t < 64)
            s[t] += s[t + 64];
        __syncthreads();
    }
    if (t < 32)
        last_warp(s, t);
}

template <int BS, class In, class Acc> __global__ void __launch_bounds__(BS) k_harris6(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    s[t] = load_pair<In, Acc>(x, n, (i64)blockIdx.x * BS * 2 + t, BS);
    __syncthreads();
    unrolled_tree<BS>(s, t);
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <int BS, class In, class Acc> __global__ void __launch_bounds__(BS) k_harris7(const In *x, i64 n, Acc *out)
{
    Acc *s = harris_smem<Acc>();
    unsigned t = threadIdx.x;
    Acc sum = 0;
    for (i64 i = (i64)blockIdx.x * BS * 2 + t; i < n; i += (i64)BS * 2 * gridDim.x)
        sum += load_pair<In, Acc>(x, n, i, BS);
    s[t] = sum;
    __syncthreads();
    unrolled_tree<BS>(s, t);
    if (t == 0)
        out[blockIdx.x] = s[0];
}

template <class In, class Acc> using harris_kernel = void (*)(const In *, i64, Acc *);
template <class In, class Acc> struct harris_pair {
    harris_kernel<In, Acc> first;
    harris_kernel<Acc, Acc> rest;
    int per_thread;
};
template <class In, class Acc> harris_pair<In, Acc> harris_kernels(int variant)
{
    switch (variant) {
    case GR_K_HARRIS1: return {k_harris1<In, Acc>, k_harris1<Acc, Acc>, 1};
    case GR_K_HARRIS2: return {k_harris2<In, Acc>, k_harris2<Acc, Acc>, 1};
    case GR_K_HARRIS3: return {k_harris3<In, Acc>, k_harris3<Acc, Acc>, 1};
    case GR_K_HARRIS4: return {k_harris4<In, Acc>, k_harris4<Acc, Acc>, 2};
    case GR_K_HARRIS5: return {k_harris5<In, Acc>, k_harris5<Acc, Acc>, 2};
    default: return {k_harris6<HARRIS_BLOCK, In, Acc>, k_harris6<HARRIS_BLOCK, Acc, Acc>, 2};
    }
}

/* harris1..6: Harris's recursion: each launch leaves one partial per block, until one is left.
 * Partials ping-pong between two scratch areas; the last level writes out. */
template <class In, class Acc>
cudaError_t harris_levels(int variant, const In *x, i64 n, Acc *out, void *scratch, size_t *bytes,
                          cudaStream_t st)
{
    harris_pair<In, Acc> k = harris_kernels<In, Acc>(variant);
    i64 per_block = (i64)HARRIS_BLOCK * k.per_thread;
    i64 b1 = ceil_div(n, per_block), b2 = ceil_div(b1, per_block);
    cudaError_t err = need(scratch, bytes, (size_t)(b1 + b2) * sizeof(Acc));
    if (!scratch || err != cudaSuccess)
        return err;
    size_t smem = HARRIS_BLOCK * sizeof(Acc);
    Acc *buf[2] = {static_cast<Acc *>(scratch), static_cast<Acc *>(scratch) + b1};
    k.first<<<(unsigned)b1, HARRIS_BLOCK, smem, st>>>(x, n, b1 == 1 ? out : buf[0]);
    for (int lvl = 0; b1 > 1; lvl ^= 1) {
        i64 nb = ceil_div(b1, per_block);
        k.rest<<<(unsigned)nb, HARRIS_BLOCK, smem, st>>>(buf[lvl], b1, nb == 1 ? out : buf[lvl ^ 1]);
        b1 = nb;
    }
    return cudaGetLastError();
}

/* harris7: a machine-sized grid of grid-stride blocks, then one block over their partials. */
template <class In, class Acc>
cudaError_t harris7(const In *x, i64 n, Acc *out, int sms, void *scratch, size_t *bytes, cudaStream_t st)
{
    constexpr auto k1 = k_harris7<HARRIS_BLOCK, In, Acc>;
    i64 grid = min(ceil_div(n, 2 * HARRIS_BLOCK), (i64)sms * occupancy<k1>(HARRIS_BLOCK));
    cudaError_t err = need(scratch, bytes, (size_t)grid * sizeof(Acc));
    if (!scratch || err != cudaSuccess)
        return err;
    size_t smem = HARRIS_BLOCK * sizeof(Acc);
    Acc *part = static_cast<Acc *>(scratch);
    k1<<<(unsigned)grid, HARRIS_BLOCK, smem, st>>>(x, n, grid == 1 ? out : part);
    if (grid > 1)
        k_harris7<HARRIS_BLOCK, Acc, Acc><<<1, HARRIS_BLOCK, smem, st>>>(part, grid, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- shfl */

constexpr int SHFL_BLOCK = 256;

template <class Op, class Src>
__global__ void __launch_bounds__(SHFL_BLOCK) k_shfl(Op op, const Src *x, i64 n, typename Op::State *out)
{
    typename Op::State s = op.id();
    for (i64 i = (i64)blockIdx.x * SHFL_BLOCK + threadIdx.x; i < n; i += (i64)SHFL_BLOCK * gridDim.x) {
        if constexpr (std::is_same<Src, typename Op::State>::value)
            s = op(s, x[i]);
        else
            s = op(s, op.from(x[i], i));
    }
    s = block_reduce<SHFL_BLOCK>(op, s);
    if (threadIdx.x == 0)
        out[blockIdx.x] = s;
}

template <class Op>
cudaError_t shfl(const Op &op, const gr_kjob *j, int sms, void *scratch, size_t *bytes, cudaStream_t st)
{
    using In = typename Op::input;
    using State = typename Op::State;
    constexpr auto k1 = k_shfl<Op, In>;
    i64 n = j->rows * j->cols;
    i64 grid = min(ceil_div(n, SHFL_BLOCK), (i64)sms * occupancy<k1>(SHFL_BLOCK));
    cudaError_t err = need(scratch, bytes, (size_t)grid * sizeof(State));
    if (!scratch || err != cudaSuccess)
        return err;
    State *out = static_cast<State *>(j->out), *part = static_cast<State *>(scratch);
    k1<<<(unsigned)grid, SHFL_BLOCK, 0, st>>>(op, static_cast<const In *>(j->x), n, grid == 1 ? out : part);
    if (grid > 1)
        k_shfl<Op, State><<<1, SHFL_BLOCK, 0, st>>>(op, part, grid, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- redux */

constexpr int REDUX_BLOCK = 256;

/* An exact (mod 2^64) warp sum of int64 through the 32-bit __reduce_add_sync: 24 + 24 + 16-bit
 * pieces, whose sums over 32 lanes cannot overflow 32 bits. */
__device__ inline i64 redux_sum(i64 v)
{
    unsigned lo = __reduce_add_sync(FULL_MASK, (unsigned)(v & 0xffffff));
    unsigned mid = __reduce_add_sync(FULL_MASK, (unsigned)((v >> 24) & 0xffffff));
    int hi = __reduce_add_sync(FULL_MASK, (int)(v >> 48));
    return (i64)((u64)lo + ((u64)mid << 24) + ((u64)(i64)hi << 48));
}

/* OP is GR_SUM, GR_MIN or GR_MAX; Src is int (data) or i64 (partials, in int32 range for min/max). */
template <int OP, class Src>
__global__ void __launch_bounds__(REDUX_BLOCK) k_redux(const Src *x, i64 n, i64 *out)
{
    __shared__ i64 warp_part[REDUX_BLOCK / 32];
    using T = typename std::conditional<OP == GR_SUM, i64, int>::type;
    const T id = OP == GR_SUM ? 0 : OP == GR_MIN ? INT_MAX : INT_MIN;
    T s = id;
    for (i64 i = (i64)blockIdx.x * REDUX_BLOCK + threadIdx.x; i < n; i += (i64)REDUX_BLOCK * gridDim.x) {
        T v = (T)x[i];
        s = OP == GR_SUM ? s + v : OP == GR_MIN ? min(s, v) : max(s, v);
    }
    auto warp = [](T v) -> T {
        if constexpr (OP == GR_SUM)
            return redux_sum(v);
        else if constexpr (OP == GR_MIN)
            return __reduce_min_sync(FULL_MASK, v);
        else
            return __reduce_max_sync(FULL_MASK, v);
    };
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    s = warp(s);
    if (lane == 0)
        warp_part[w] = s;
    __syncthreads();
    if (w == 0) {
        s = warp(lane < REDUX_BLOCK / 32 ? (T)warp_part[lane] : id);
        if (lane == 0)
            out[blockIdx.x] = s;
    }
}

template <int OP>
cudaError_t redux_run(const gr_kjob *j, int sms, void *scratch, size_t *bytes, cudaStream_t st)
{
    constexpr auto k1 = k_redux<OP, int>;
    i64 n = j->rows * j->cols;
    i64 grid = min(ceil_div(n, REDUX_BLOCK), (i64)sms * occupancy<k1>(REDUX_BLOCK));
    cudaError_t err = need(scratch, bytes, (size_t)grid * sizeof(i64));
    if (!scratch || err != cudaSuccess)
        return err;
    i64 *out = static_cast<i64 *>(j->out), *part = static_cast<i64 *>(scratch);
    k1<<<(unsigned)grid, REDUX_BLOCK, 0, st>>>(static_cast<const int *>(j->x), n, grid == 1 ? out : part);
    if (grid > 1)
        k_redux<OP, i64><<<1, REDUX_BLOCK, 0, st>>>(part, grid, out);
    return cudaGetLastError();
}

cudaError_t redux(const gr_kjob *j, int sms, void *scratch, size_t *bytes, cudaStream_t st)
{
    switch (j->op) {
    case GR_SUM: return redux_run<GR_SUM>(j, sms, scratch, bytes, st);
    case GR_MIN: return redux_run<GR_MIN>(j, sms, scratch, bytes, st);
    case GR_MAX: return redux_run<GR_MAX>(j, sms, scratch, bytes, st);
    }
    return cudaErrorNotSupported;
}

/* ---------------------------------------------------------------- cub */

/* Element i as a state; arg indices count from the start of their row (i % row_len). */
template <class Op> struct indexed {
    Op op;
    const typename Op::input *x;
    i64 row_len;
    __device__ typename Op::State operator()(i64 i) const { return op.from(x[i], i % row_len); }
};
struct row_start {
    i64 cols;
    __host__ __device__ i64 operator()(i64 r) const { return r * cols; }
};

template <class Op> cudaError_t cub_run(const Op &op, const gr_kjob *j, void *scratch, size_t *bytes, cudaStream_t st)
{
    using State = typename Op::State;
    const auto *x = static_cast<const typename Op::input *>(j->x);
    State *out = static_cast<State *>(j->out);
    thrust::counting_iterator<i64> count(0);
    if (j->axis == GR_AXIS_ALL) {
        i64 n = j->rows * j->cols;
        auto in = thrust::make_transform_iterator(count, indexed<Op>{op, x, n});
        return cub::DeviceReduce::Reduce(scratch, *bytes, in, out, n, op, op.id(), st);
    }
    auto in = thrust::make_transform_iterator(count, indexed<Op>{op, x, j->cols});
    auto starts = thrust::make_transform_iterator(count, row_start{j->cols});
    return cub::DeviceSegmentedReduce::Reduce(scratch, *bytes, in, out, j->rows, starts, starts + 1, op,
                                              op.id(), st);
}

} // namespace
