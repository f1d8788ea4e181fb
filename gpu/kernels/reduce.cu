/* reduce.cu: every reduction kernel variant, one launcher each, one selector; stateless, runs on
 * the stream of the worker thread that calls it.
 *
 *   harris1  interleaved addressing, divergent branch (tid % 2s); 1 element/thread, a launch per level
 *   harris2  interleaved addressing, strided index: no divergence, shared-memory bank conflicts
 *   harris3  sequential addressing: conflict-free, half the threads idle from the first step
 *   harris4  first add during the global load: 2 elements/thread, half the blocks
 *   harris5  last warp unrolled (warp-synchronous; __syncwarp between steps since Volta)
 *   harris6  completely unrolled: block size is a template parameter
 *   harris7  many elements per thread: grid-stride loop, grid sized to the machine, 2 launches
 *   shfl     grid-stride loads, __shfl_down_sync warp reduction, 2 launches
 *   redux    __reduce_{add,min,max}_sync (int32); sums split in 24/24/16-bit pieces so none wraps
 *   cub      cub::DeviceReduce / DeviceSegmentedReduce::Reduce with our operators (the reference)
 *   fast     production: 16-byte vector loads, grid sized to the machine, warp shuffles, one launch
 *            (tiny arrays: one block; to 64 MiB: a block per full tile, partials met by a
 *            last-block-done ticket; larger: rounds of pieces, the same ticket; short rows: tiles
 *            of rows per warp),
 *            deterministic; every op, dtype and axis
 *
 * Semantics (same as the CPU backend): integer sum/prod/min/max accumulate in int64 (int64
 * overflow wraps); float ops and means in float64; min/max propagate NaN; argmin/argmax keep
 * the first (or, ties_last, the last) index of the extreme, NaN counting as the extreme.
 * Kernels leave raw states (float64 sums for mean); gr_k_finish divides on the host. */
#include "reduce.h"

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/std/limits>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <limits.h>
#include <string.h>

#include <type_traits>

typedef long long i64;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
#define B_(x) (1u << (x))
#define OPS_SUM (B_(GR_SUM) | B_(GR_MEAN))
#define OPS_MINMAX (B_(GR_MIN) | B_(GR_MAX))
#define DT_32 (B_(GR_INT32) | B_(GR_FLOAT32))
#define AX_WHOLE GR_AXIS_BIT(GR_AXIS_ALL)

/* What each variant claims; with_op() instantiates exactly these, so table and code agree. */
#define HARRIS_OPS OPS_SUM
#define HARRIS_DT DT_32
#define SHFL_OPS (OPS_SUM | OPS_MINMAX)
#define SHFL_DT DT_32
#define REDUX_OPS (B_(GR_SUM) | OPS_MINMAX)
#define REDUX_DT B_(GR_INT32)
#define CUB_AXES (AX_WHOLE | GR_AXIS_BIT(1))

extern "C" const struct gr_algo gr_k_algos[GR_K_NVARIANTS] = {
    {"harris1", "Harris 1: interleaved addressing, divergent branches; a launch per level",
     HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris2", "Harris 2: interleaved addressing with strided index; shared-memory bank conflicts",
     HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris3", "Harris 3: sequential addressing", HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris4", "Harris 4: first add during the global load", HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris5", "Harris 5: last warp unrolled", HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris6", "Harris 6: completely unrolled, templated block size", HARRIS_OPS, HARRIS_DT, AX_WHOLE},
    {"harris7", "Harris 7: many elements per thread, grid sized to the GPU; 2 launches", HARRIS_OPS,
     HARRIS_DT, AX_WHOLE},
    {"shfl", "grid-stride loads and __shfl_down_sync warp reduction; 2 launches", SHFL_OPS, SHFL_DT,
     AX_WHOLE},
    {"redux", "__reduce_add/min/max_sync warp reduction (int32, sums without wrap); 2 launches",
     REDUX_OPS, REDUX_DT, AX_WHOLE},
    {"cub", "cub::DeviceReduce / DeviceSegmentedReduce with the service's operators (reference)",
     GR_ALL_OPS, GR_ALL_DTYPES, CUB_AXES},
    {"fast", "production kernel: 16-byte loads, machine-sized grid, warp shuffles, one launch, "
             "deterministic; every op, dtype and axis",
     GR_ALL_OPS, GR_ALL_DTYPES, GR_ALL_AXES},
};

namespace {

/* ---------------------------------------------------------------- element types and operators */

template <class T> struct elem;
template <> struct elem<int> { using acc = i64; };
template <> struct elem<i64> { using acc = i64; };
template <> struct elem<float> { using acc = double; };
template <> struct elem<double> { using acc = double; };

/* 16 bytes of T: one LDG.128 when aligned. */
template <class T> struct alignas(16) vec16 {
    T e[16 / sizeof(T)];
};

__host__ __device__ inline bool is_nan(double v) { return v != v; }
__host__ __device__ inline bool is_nan(float v) { return v != v; }
__host__ __device__ inline bool is_nan(i64) { return false; }
__host__ __device__ inline bool is_nan(int) { return false; }
/* Integer overflow wraps (two's complement), so do it in unsigned arithmetic. */
__host__ __device__ inline i64 add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__host__ __device__ inline double add(double a, double b) { return a + b; }
__host__ __device__ inline i64 mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__host__ __device__ inline double mul(double a, double b) { return a * b; }
template <class A> __host__ __device__ A top()
{
    return ::cuda::std::numeric_limits<A>::has_infinity ? ::cuda::std::numeric_limits<A>::infinity()
                                                         : ::cuda::std::numeric_limits<A>::max();
}
template <class A> __host__ __device__ A bottom()
{
    return ::cuda::std::numeric_limits<A>::has_infinity ? -::cuda::std::numeric_limits<A>::infinity()
                                                         : ::cuda::std::numeric_limits<A>::lowest();
}

template <class In> using acc_t = typename elem<In>::acc;

/* An operator: State (what partials hold), id(), from(element, index), and operator()
 * combining two states (associative, commutative). A thread's own scan, whose indices only grow,
 * runs on a Local accumulator (by default the State): lid(), lacc(local, element, index),
 * lvec(local, 16-byte vector, index of its first element) and done(local) -> State. Min, max
 * and the arg ops keep it in the input type, which saves a conversion per element. */
template <class In, class Self, class A, class St = A> struct op_base {
    using input = In;
    using Acc = A;
    using State = St;
    using Local = St;
    __device__ const Self &self() const { return *static_cast<const Self *>(this); }
    __device__ State lid() const { return self().id(); }
    __device__ State lacc(State s, In x, i64 i) const { return self()(s, self().from(x, i)); }
    template <class L, int V> __device__ L lvec(L s, const In (&e)[V], i64 first) const
    {
#pragma unroll
        for (int k = 0; k < V; k++)
            s = self().lacc(s, e[k], first + k);
        return s;
    }
    __device__ State done(State s) const { return s; }
    /* What a block's tree over fewer than 2^31 - 1 elements from `base` passes between lanes (Wire),
     * made from and back into a State exactly: the State itself unless an op narrows it. */
    using Wire = St;
    __device__ Wire wire(State s, i64) const { return s; }
    __device__ Wire join(Wire a, Wire b) const { return self()(a, b); }
    __device__ State unwire(Wire w, i64) const { return w; }
    /* A short row's result as written where it is narrow (narrow_out): made from the Wire. */
    using Out = St;
    __device__ Out out(Wire w) const { return w; }
};

template <class In> struct Sum : op_base<In, Sum<In>, acc_t<In>> {
    __host__ __device__ acc_t<In> id() const { return 0; }
    __host__ __device__ acc_t<In> from(In x, i64) const { return (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return add(a, b); }
};
/* Means of integers too are float64 sums (an int64 sum could wrap); the host divides. */
template <class In> struct Mean : op_base<In, Mean<In>, double> {
    __host__ __device__ double id() const { return 0; }
    __host__ __device__ double from(In x, i64) const { return (double)x; }
    __host__ __device__ double operator()(double a, double b) const { return a + b; }
};
template <class In> struct Prod : op_base<In, Prod<In>, acc_t<In>> {
    __host__ __device__ acc_t<In> id() const { return 1; }
    __host__ __device__ acc_t<In> from(In x, i64) const { return (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return mul(a, b); }
};
/* NaN propagates: a NaN operand wins. */
template <class In, bool MAX> struct Extreme : op_base<In, Extreme<In, MAX>, acc_t<In>> {
    using Local = In;
    template <class T> __host__ __device__ static T pick(T a, T b) { return ((MAX ? a > b : a < b) | is_nan(a)) ? a : b; }
    __host__ __device__ acc_t<In> id() const { return MAX ? bottom<acc_t<In>>() : top<acc_t<In>>(); }
    __host__ __device__ acc_t<In> from(In x, i64) const { return (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return pick(a, b); }
    __device__ In lid() const { return MAX ? bottom<In>() : top<In>(); }
    __device__ In lacc(In s, In x, i64) const { return pick(x, s); }
    __device__ acc_t<In> done(In s) const { return (acc_t<In>)s; }
    /* Every state holds an element: the tree runs in the input type (one shuffle for 4 bytes). */
    using Wire = In;
    __device__ In wire(acc_t<In> s, i64) const { return (In)s; }
    __device__ In join(In a, In b) const { return pick(a, b); }
    __device__ acc_t<In> unwire(In w, i64) const { return (acc_t<In>)w; }
    using Out = In;
    __device__ In out(In w) const { return w; }
};
template <class In> using Min = Extreme<In, false>;
template <class In> using Max = Extreme<In, true>;

/* i < 0 marks the empty state, so no data value can lose a tie against the identity. */
template <class A> struct arg_state {
    A v;
    i64 i;
};
/* An arg result narrow: the element as read and a 32-bit index from a base, ~0u empty. What a
 * tree's key is made from and read back to (Arg::key, unkey), and how a short row of a 4-byte
 * type writes its result (row_out). */
template <class In> struct arg_wire {
    In v;
    unsigned i;
};
/* An arg op's tree state: a key that the larger wins, so a tree level is a compare of keys,
 * not the NaN, value and index tests of Arg::better (measured on an H100: float32 argmax at
 * 2^10-2^14 5-8% faster). Its high part: the element mapped to an unsigned of its width that
 * orders as the op ranks (NaN on top, -0.0 as +0.0 so that zeros tie). Its low word: the index
 * from the base (below 2^31 - 1), ordered so that the tie rule's choice is larger, shifted left
 * one bit for the sign of a zero. A low word of 0: empty (no element's is 0). 4-byte elements
 * join both in one 64-bit word (a level is one 64-bit max); 8-byte ones keep them apart (a
 * 64-bit and a 32-bit compare, three shuffles a level). */
struct arg_key {
    u64 k;
};
struct arg_key8 {
    u64 hi;
    unsigned lo;
};
__device__ inline arg_key make_key(unsigned hi, unsigned lo) { return arg_key{(u64)hi << 32 | lo}; }
__device__ inline arg_key8 make_key(u64 hi, unsigned lo) { return arg_key8{hi, lo}; }
__device__ inline unsigned key_hi(arg_key k) { return (unsigned)(k.k >> 32); }
__device__ inline u64 key_hi(arg_key8 k) { return k.hi; }
__device__ inline unsigned key_lo(arg_key k) { return (unsigned)k.k; }
__device__ inline unsigned key_lo(arg_key8 k) { return k.lo; }
__device__ inline arg_key key_max(arg_key a, arg_key b) { return a.k > b.k ? a : b; }
__device__ inline arg_key8 key_max(arg_key8 a, arg_key8 b)
{
    return (a.hi > b.hi) | ((a.hi == b.hi) & (a.lo > b.lo)) ? a : b;
}
/* A float's bits as the unsigned of its width, and back. */
__device__ inline unsigned to_bits(float v) { return __float_as_uint(v); }
__device__ inline u64 to_bits(double v) { return (u64)__double_as_longlong(v); }
__device__ inline float from_bits(unsigned b) { return __uint_as_float(b); }
__device__ inline double from_bits(u64 b) { return __longlong_as_double((long long)b); }
template <class In, bool MAX> struct Arg : op_base<In, Arg<In, MAX>, acc_t<In>, arg_state<acc_t<In>>> {
    using Acc = acc_t<In>;
    using S = arg_state<Acc>;
    using Local = arg_state<In>;
    int last;
    template <class T> __host__ __device__ static bool beats(T a, T b) { return MAX ? a > b : a < b; }
    __host__ __device__ S id() const { return S{0, -1}; }
    __host__ __device__ S from(In x, i64 i) const { return S{(Acc)x, i}; }
    /* Of two states that both hold an element: a NaN wins, then the extreme, then the tie rule. */
    __host__ __device__ S better(S a, S b) const
    {
        bool an = is_nan(a.v), bn = is_nan(b.v);
        if (an != bn)
            return an ? a : b;
        if (!an && a.v != b.v)
            return beats(a.v, b.v) ? a : b;
        return (last ? a.i > b.i : a.i < b.i) ? a : b;
    }
    __host__ __device__ S operator()(S a, S b) const { return a.i < 0 ? b : b.i < 0 ? a : better(a, b); }
    /* Does x, at a later index, replace the extreme b: strictly better, or equal with ties last;
     * a NaN beats any number. Bitwise on bools: predicates, no branches in the scan. NUM: neither
     * is a NaN, so two compares, not four. */
    template <bool NUM = false> __device__ bool takes(In x, In b) const
    {
        bool gt = beats(x, b) | ((last != 0) & (x == b));
        if constexpr (NUM)
            return gt;
        bool xn = is_nan(x), bn = is_nan(b);
        return (xn & ((last != 0) | !bn)) | (!xn & !bn & gt);
    }
    __device__ Local lid() const { return Local{0, -1}; }
    template <bool NUM = false> __device__ Local lacc(Local s, In x, i64 i) const
    {
        return ((s.i < 0) | takes<NUM>(x, s.v)) ? Local{x, i} : s;
    }
    /* The vector's own extreme first, with a small index: one 64-bit select per vector. A vector
     * of 4 floats without NaNs, folded into a state that is not one (nearly every vector),
     * takes the compares without NaN tests: float32 argmax on an H200 was bound by the SMs'
     * work (session 19), and this took its rows up 1-12 points of the ceiling there (session
     * 20, call L). A float64 vector is 2 elements: there the branch cost more than the tests
     * it saves (-3 points at rows of 32-64, call K). */
    template <int V> __device__ Local lvec(Local s, const In (&e)[V], i64 first) const
    {
        if constexpr (V < 4)
            return lscan<false>(s, e, first);
        bool nan = is_nan(s.v);
#pragma unroll
        for (int k = 0; k < V; k++)
            nan |= is_nan(e[k]);
        return nan ? lscan<false>(s, e, first) : lscan<true>(s, e, first);
    }
    template <bool NUM, int V> __device__ Local lscan(Local s, const In (&e)[V], i64 first) const
    {
        In b = e[0];
        int bk = 0;
#pragma unroll
        for (int k = 1; k < V; k++)
            if (takes<NUM>(e[k], b)) {
                b = e[k];
                bk = k;
            }
        return lacc<NUM>(s, b, first + bk);
    }
    __device__ S done(Local s) const { return S{(Acc)s.v, s.i}; }
    using Wire = std::conditional_t<sizeof(In) == 4, arg_key, arg_key8>;
    using Out = arg_wire<In>;
    __device__ Wire wire(S s, i64 base) const
    {
        return s.i < 0 ? Wire{} : key(Out{(In)s.v, (unsigned)(s.i - base)});
    }
    __device__ Wire join(Wire a, Wire b) const { return key_max(a, b); }
    __device__ S unwire(Wire w, i64 base) const
    {
        Out o = out(w);
        return S{(Acc)o.v, o.i == ~0u ? -1 : base + (i64)o.i};
    }
    __device__ Out out(Wire w) const { return key_lo(w) ? unkey(w) : Out{0, ~0u}; }
    /* arg_key's mapping and its inverse (w.i < 2^31 - 1) */
    using U = std::conditional_t<sizeof(In) == 4, unsigned, u64>;
    static constexpr U SIGN = (U)1 << (8 * sizeof(U) - 1);
    __device__ Wire key(Out w) const
    {
        U b;
        unsigned z = 0;
        if constexpr (std::is_floating_point<In>::value) {
            z = w.v == 0 && signbit(w.v);
            b = is_nan(w.v) ? ~(U)0 : to_bits(w.v == 0 ? (In)0 : w.v);
            b = b == ~(U)0 ? b : (b & SIGN) ? ~b : b | SIGN;
            b = MAX || b == ~(U)0 ? b : ~b;
        } else {
            b = (U)w.v ^ SIGN;
            b = MAX ? b : ~b;
        }
        return make_key(b, ((last ? w.i + 1 : 0x7fffffffu - w.i) << 1) | z);
    }
    __device__ Out unkey(Wire k) const
    {
        U b = key_hi(k);
        unsigned lo = key_lo(k), q = lo >> 1;
        Out o;
        o.i = last ? q - 1 : 0x7fffffffu - q;
        if constexpr (std::is_floating_point<In>::value) {
            b = MAX || b == ~(U)0 ? b : ~b;
            o.v = b == ~(U)0 ? (In)NAN : (lo & 1) ? (In)-0.0 : from_bits((b & SIGN) ? b & ~SIGN : ~b);
        } else {
            o.v = (In)((MAX ? b : ~b) ^ SIGN);
        }
        return o;
    }
};

/* Dispatch a run-time (op, dtype) to f(Op{}), instantiating only the pairs in OPS x DTS. */
template <unsigned OPS, class In, class F> cudaError_t with_op_t(int op, int last, F &&f)
{
    if constexpr ((OPS & B_(GR_SUM)) != 0) {
        if (op == GR_SUM)
            return f(Sum<In>{});
    }
    if constexpr ((OPS & B_(GR_MEAN)) != 0) {
        if (op == GR_MEAN)
            return f(Mean<In>{});
    }
    if constexpr ((OPS & B_(GR_PROD)) != 0) {
        if (op == GR_PROD)
            return f(Prod<In>{});
    }
    if constexpr ((OPS & B_(GR_MIN)) != 0) {
        if (op == GR_MIN)
            return f(Min<In>{});
    }
    if constexpr ((OPS & B_(GR_MAX)) != 0) {
        if (op == GR_MAX)
            return f(Max<In>{});
    }
    if constexpr ((OPS & B_(GR_ARGMIN)) != 0) {
        if (op == GR_ARGMIN)
            return f(Arg<In, false>{{}, last});
    }
    if constexpr ((OPS & B_(GR_ARGMAX)) != 0) {
        if (op == GR_ARGMAX)
            return f(Arg<In, true>{{}, last});
    }
    return cudaErrorNotSupported;
}
template <unsigned OPS, unsigned DTS, class F> cudaError_t with_op(int op, int dtype, int last, F &&f)
{
    if constexpr ((DTS & B_(GR_INT32)) != 0) {
        if (dtype == GR_INT32)
            return with_op_t<OPS, int>(op, last, f);
    }
    if constexpr ((DTS & B_(GR_INT64)) != 0) {
        if (dtype == GR_INT64)
            return with_op_t<OPS, i64>(op, last, f);
    }
    if constexpr ((DTS & B_(GR_FLOAT32)) != 0) {
        if (dtype == GR_FLOAT32)
            return with_op_t<OPS, float>(op, last, f);
    }
    if constexpr ((DTS & B_(GR_FLOAT64)) != 0) {
        if (dtype == GR_FLOAT64)
            return with_op_t<OPS, double>(op, last, f);
    }
    return cudaErrorNotSupported;
}

/* ---------------------------------------------------------------- warp, block and memory helpers */

__device__ inline i64 shfl_down(i64 v, int off, int w) { return __shfl_down_sync(FULL_MASK, v, off, w); }
__device__ inline double shfl_down(double v, int off, int w) { return __shfl_down_sync(FULL_MASK, v, off, w); }
__device__ inline int shfl_down(int v, int off, int w) { return __shfl_down_sync(FULL_MASK, v, off, w); }
__device__ inline float shfl_down(float v, int off, int w) { return __shfl_down_sync(FULL_MASK, v, off, w); }
__device__ inline arg_key shfl_down(arg_key s, int off, int w) { return arg_key{__shfl_down_sync(FULL_MASK, s.k, off, w)}; }
__device__ inline arg_key8 shfl_down(arg_key8 s, int off, int w)
{
    return arg_key8{__shfl_down_sync(FULL_MASK, s.hi, off, w), __shfl_down_sync(FULL_MASK, s.lo, off, w)};
}
template <class A> __device__ arg_state<A> shfl_down(arg_state<A> s, int off, int w)
{
    return arg_state<A>{shfl_down(s.v, off, w), shfl_down(s.i, off, w)};
}
/* Partials written by other blocks: read through L2, never a stale L1 line. */
__device__ inline i64 load_cg(const i64 *p) { return __ldcg(p); }
__device__ inline double load_cg(const double *p) { return __ldcg(p); }
template <class A> __device__ arg_state<A> load_cg(const arg_state<A> *p)
{
    return arg_state<A>{load_cg(&p->v), load_cg(&p->i)};
}
/* Arg indices become relative to their row. */
template <class A> __device__ A rebase(A s, i64) { return s; }
template <class A> __device__ arg_state<A> rebase(arg_state<A> s, i64 base)
{
    s.i -= base;
    return s;
}

/* Tree over G consecutive lanes (G a power of two <= 32) joining with join(a, b); the result is
 * in the group's lane 0. */
template <int G, class T, class J> __device__ T lane_tree(T s, const J &join)
{
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2)
        s = join(s, shfl_down(s, off, G));
    return s;
}
template <int G, class Op> __device__ typename Op::State group_reduce(const Op &op, typename Op::State s)
{
    return lane_tree<G>(s, op);
}

/* Whole-block reduction; the result is in thread 0. Every thread must call it. */
template <int B, class Op> __device__ typename Op::State block_reduce(const Op &op, typename Op::State s)
{
    __shared__ typename Op::State warp_part[B / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    s = group_reduce<32>(op, s);
    __syncthreads(); /* warp_part may still be read by a previous call */
    if (lane == 0)
        warp_part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < B / 32 ? warp_part[lane] : op.id();
        s = group_reduce<B / 32>(op, s); /* B / 32 partials: log2 of that many levels, not 5 */
    }
    return s;
}

/* block_reduce over fewer than 2^31 - 1 elements from base (arg_key's index bound), in
 * Op's Wire, every lane of warp 0 reading a partial; ONCE: the block calls it once, so no
 * barrier is needed before the partials are stored (nothing read them before). 3-4% faster
 * than block_reduce at 2^12 elements on an H100, and argmax 8-15%. */
template <int B, bool ONCE, class Op>
__device__ typename Op::State narrow_block_reduce(const Op &op, typename Op::State st, i64 base)
{
    using W = typename Op::Wire;
    __shared__ W warp_part[B / 32];
    auto join = [&](W a, W b) { return op.join(a, b); };
    W s = lane_tree<32>(op.wire(st, base), join);
    if (B > 32) {
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (!ONCE)
            __syncthreads(); /* warp_part may still be read by the previous call */
        if (lane == 0)
            warp_part[warp] = s;
        __syncthreads();
        if (warp == 0)
            s = lane_tree<B / 32>(warp_part[lane % (B / 32)], join);
    }
    return op.unwire(s, base);
}

/* This thread's share of elements [begin, end) of x among G threads (lane 0..G-1): scalar head
 * up to a 16-byte boundary, 16-byte loads U at a time, scalar tail. The next U loads are issued
 * before the current ones are folded in (issue is in order: a warp waiting on its arithmetic
 * would otherwise have nothing in flight). Indices are visited in increasing order, as Op's
 * Local accumulator requires. */
template <int U, class Op>
__device__ typename Op::State thread_range(const Op &op, const typename Op::input *__restrict__ x, i64 begin,
                                           i64 end, int lane, int G)
{
    using In = typename Op::input;
    constexpr int V = 16 / sizeof(In);
    auto s = op.lid();
    begin = min(begin, end);
    i64 a = min(end, (begin + V - 1) / V * V);
    i64 b = max(a, end / V * V);
    for (i64 i = begin + lane; i < a; i += G)
        s = op.lacc(s, x[i], i);
    const vec16<In> *__restrict__ xv = reinterpret_cast<const vec16<In> *>(x);
    i64 v = a / V + lane, ve = b / V;
    if (v + (i64)(U - 1) * G < ve) {
        vec16<In> cur[U], nxt[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            cur[u] = xv[v + (i64)u * G];
        for (;;) {
            i64 vn = v + (i64)U * G;
            bool more = vn + (i64)(U - 1) * G < ve;
            if (more) {
#pragma unroll
                for (int u = 0; u < U; u++)
                    nxt[u] = xv[vn + (i64)u * G];
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                s = op.lvec(s, cur[u].e, (v + (i64)u * G) * V);
            v = vn;
            if (!more)
                break;
#pragma unroll
            for (int u = 0; u < U; u++)
                cur[u] = nxt[u];
        }
    }
    for (; v < ve; v += G) {
        vec16<In> r = xv[v];
        s = op.lvec(s, r.e, v * V);
    }
    for (i64 i = b + lane; i < end; i += G)
        s = op.lacc(s, x[i], i);
    return op.done(s);
}

/* Blocks of one kernel resident per multiprocessor (computed once per kernel). */
template <auto K> int occupancy(int block)
{
    static const int n = [block] {
        int k = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k, K, block, 0) != cudaSuccess || k < 1)
            k = 1;
        return k;
    }();
    return n;
}

i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

/* Launchers share CUB's convention: with scratch == NULL only *bytes is set; otherwise *bytes
 * is what the caller has, and too little is an error. */
cudaError_t need(void *scratch, size_t *bytes, size_t want)
{
    if (!scratch) {
        *bytes = want;
        return cudaSuccess;
    }
    return *bytes >= want ? cudaSuccess : cudaErrorInvalidValue;
}

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

/* ---------------------------------------------------------------- fast */

/* Rows of at most this many bytes, more than one of them, are short rows: lane groups or tiles
 * (fast_group, fast_tile). An arg op's to 32 KiB, a warp a row: a block a row there (k_fast_rows,
 * two passes of 256 threads, then a tree of arg states) ran float64 argmax at rows of 4096 at
 * 87% of the ceiling on an H200, a warp a row at 102%; float32 argmax at 8192 95 -> 99%, int32
 * 97.6 -> 99.6% (on an H100 these lost 0.4-1.0, to 99-101%). Sums, min and max gained nothing
 * there (float64 sum at 4096 103.6 -> 102.8%). Session 21, calls A-C (bench/results/s21-tickets). */
static i64 short_row_max_bytes(const gr_kjob *j)
{
    return gr_op_is_arg(j->op) ? 32 << 10 : 16 << 10;
}

static bool short_rows(const gr_kjob *j)
{
    return j->variant == GR_K_FAST && j->axis == 1 && j->rows > 1 &&
           j->cols * (i64)gr_dtype_size(j->dtype) <= short_row_max_bytes(j);
}

/* A short row's result is written as the op's Wire where that is narrower than its State: 4-byte
 * min and max as the element (4 bytes, not 8), 4-byte arg ops as the element and a u32 index in
 * the row (8, not 16). At rows of 16 elements the results are a fifth of the bytes moved. Where
 * the Wire is as wide (8-byte types) the State stays: float64 argmax as Wire lost 2-7 points of
 * the ceiling at rows of 2^4-2^6 on an H100. narrow_rows() is the host's side of the same rule. */
template <class Op> constexpr bool narrow_out = sizeof(typename Op::Wire) < sizeof(typename Op::State);
template <class S> constexpr bool is_arg_state = false;
template <class A> constexpr bool is_arg_state<arg_state<A>> = true;
template <class Op> constexpr bool arg_op = is_arg_state<typename Op::State>; /* argmin, argmax */
template <class Op>
using row_out = std::conditional_t<narrow_out<Op>, typename Op::Out, typename Op::State>;
/* The G lanes (a power of two) that share a row fold their states into the first one's: the
 * row's result as written. A narrow result is folded as the Wire too (a float32 argmax level is
 * two shuffles, not four). */
template <class Op> __device__ row_out<Op> row_fold(const Op &op, typename Op::State s, i64 base, int G)
{
    if constexpr (narrow_out<Op>) {
        typename Op::Wire w = op.wire(s, base);
        for (int off = G / 2; off > 0; off /= 2)
            w = op.join(w, shfl_down(w, off, G));
        return op.out(w);
    } else {
        for (int off = G / 2; off > 0; off /= 2)
            s = op(s, shfl_down(s, off, G));
        return rebase(s, base);
    }
}

/* Tuning lives here, apart from the kernel bodies (CUB's dispatch policies): threads per block,
 * 16-byte vectors in flight per thread, and the row lengths where the kernel shape changes. */
template <class In> struct fast_policy {
    static constexpr int block = 256;
    /* Short rows of whole vectors in tiles (k_fast_tile), measured on an H200 and an H100 in
     * session 20 (bench/results/s20-tiles). Sums, min and max to tile_ahead_max vectors a row: 4
     * loads a lane, the next tile's issued ahead (+3 to +10 points of the ceiling on the H200,
     * +1 to +8 on the H100). Arg ops only at tile_arg_ahead vectors, with 2 lanes a row (one row
     * a lane a tile, one shuffle level: float64 argmax at rows of 16 on the H200, 71 -> 81%);
     * elsewhere ahead lost them 3-11 points on the H200. The rest to tile_max: 8 loads a lane,
     * not ahead (4 loads would take 16-32 lanes a row at 64-128 vectors, a shuffle level more).
     * Longer rows a warp each (k_fast_group: +1 to +5 points at 256 vectors). */
    static constexpr int tile_ahead_unroll = 4, tile_unroll = 8;
    static constexpr int tile_ahead_max = 32, tile_arg_ahead = 8, tile_max = 128;
    static constexpr int unroll = 4;                                 /* 64 bytes in flight per thread */
    static constexpr int vec = 16 / sizeof(In);                      /* elements per 16-byte load */
    /* A split row's pieces are whole multiples of 512 bytes, a warp's 32 loads, so that every
     * piece starts where a warp's span does (relative to the row): float64 sum at 8 GiB in
     * 16368 pieces of 524,816 bytes ran at 0.976 of CUB, in 16896 of 508,416 at 1.011
     * (sweep_big, H100, session 17) */
    static constexpr int align = 512 / sizeof(In);
    static constexpr i64 min_chunk = (i64)block * unroll * vec;      /* elements a block takes at least */
    static constexpr i64 group4_max = 4 * unroll * vec;              /* rows up to this: 4 lanes each */
    /* Long rows are cut into pieces of about this many elements (512 KiB), in whole rounds of the
     * resident blocks: on an H200, 2 MiB pieces leave a tail behind the slowest blocks (-4% at
     * 4 GiB) and 256 KiB pieces pay each block's start-up and finish too often (-2%). */
    static constexpr i64 piece = (512 << 10) / sizeof(In);
    /* An arg op's pieces are twice as long: each piece ends in a tree of 16-byte states and a
     * ticket. At 1 MiB argmax of every dtype at 2^26-2^30 rose 0.6-1.6% on an H200 (float64
     * 0.983-0.994 -> 0.996-1.004 of CUB; sums and max lost up to 1.7% at 2^27 there) and held on
     * an H100, whose arg rows of 2^18-2^20 lost 0.5-1.2 points, to 98.9-102.3% of the ceiling
     * (session 21, calls E and F). */
    static constexpr i64 arg_piece = 2 * piece;
    static constexpr int max_rounds = 64;      /* bounds the partials the finishing block reads */
    static constexpr int waves = 4;            /* many whole rows: block items per resident block */
    static constexpr int cols_unroll = 8;      /* axis 0: scalar loads in flight per thread */
    /* Whole arrays of at most 64 KiB are one block's: 256 threads to 16 KiB, 512 to 32 KiB, 1024
     * to 64 KiB, 4 vectors a thread at most (k_fast_block; one block beat an 8-block cluster by
     * 13-22% at 32 and 64 KiB, bench/results/kernels-2026-11-26-h100-s16/). */
    static constexpr i64 block_small = (16 << 10) / sizeof(In), block_mid = (32 << 10) / sizeof(In);
    static constexpr i64 block_max = (64 << 10) / sizeof(In);
    /* Above, to 64 MiB, a block per tile of 4 vectors a thread (k_fast_tiles): 128 threads to
     * 1 MiB, 512 above. On an H100 (sweep_tiles, both its modes, bench/results/kernels-2026-11-26-
     * h100-s17/) tiles beat k_fast_rows at every size from 2^17 elements to 64 MiB and lost to it
     * for float64 argmax at 128 MiB, whose 4096 partials the finishing block reads one by one;
     * 128-thread tiles beat the 8-block cluster that had taken 64-256 KiB by 5-8% for sums and
     * max (argmax -3% to +5%), and 512-thread tiles by 5-10% at 512 KiB-1 MiB; 512 threads were
     * the faster from 2 MiB, by up to 9% at 32-64 MiB. Not further: from 2^25 to 2^30 elements,
     * sums and max in tiles ran at 1.01-1.05 of CUB on an H100 (k_fast_rows 0.99-1.02) but on an
     * H200 fell below 1.00 from 2^26, to 0.85, and arg ops at 0.95-0.99 on both (session 18,
     * calls D and F). */
    static constexpr i64 tiles_small_max = (1 << 20) / sizeof(In);
    static constexpr i64 tiles_max = (64 << 20) / sizeof(In);
};

/* A piece's block tree, for pieces whose partials meet again: in the Wire where NARROW (arg ops
 * and 4-byte min/max: argmax at 2^18-2^22 +4-8% on an H100), else in the State (a sum's Wire is
 * its State, and the narrow tree here measured 1-2% slower for float32 sums at 2^25-2^30). */
template <int B, bool NARROW, class Op>
__device__ typename Op::State piece_tree(const Op &op, typename Op::State s, i64 begin)
{
    if constexpr (NARROW)
        return narrow_block_reduce<B, false>(op, s, begin); /* a piece < 2^31 - 1: fast() checks */
    else
        return block_reduce<B>(op, s);
}

/* Stores piece `piece` of a row's `pieces` partials (s, in thread 0); the block that takes the
 * row's last ticket folds them in a fixed order (deterministic), writes *out and zeroes the ticket.
 * Its tree is piece_tree's, NARROW where the caller knows the row's indices from rb fit in 31 bits
 * (a whole array in tiles: an arg op's last tree as keys, not arg_state's four shuffles a level;
 * H100: int32 argmax at 2^15 6.08 -> 5.54 us, float64 argmax at 2^16 6.56 -> 6.11). */
template <int B, bool NARROW, class Op>
__device__ void ticket_finish(const Op &op, typename Op::State s, typename Op::State *__restrict__ part, int piece,
                              int pieces, unsigned *__restrict__ ticket, typename Op::State *__restrict__ out, i64 rb)
{
    __shared__ bool finisher;
    if (threadIdx.x == 0) {
        part[piece] = s;
        __threadfence();
        finisher = atomicAdd(ticket, 1u) == (unsigned)pieces - 1;
    }
    __syncthreads();
    if (finisher) {
        s = op.id();
        for (int k = threadIdx.x; k < pieces; k += B)
            s = op(s, load_cg(part + k));
        s = piece_tree<B, NARROW>(op, s, rb);
        if (threadIdx.x == 0) {
            *out = rebase(s, rb);
            *ticket = 0;
        }
    }
}

/* One row (or whole-array chunk) per block item; a row of several chunks is finished by the
 * block that takes its last ticket. */
template <class Op, int B, int U>
__global__ void __launch_bounds__(B, 1024 / B) /* 1024 threads an SM, 64 registers (int32 sums took 72) */
    k_fast_rows(Op op, const typename Op::input *__restrict__ x, i64 rows, i64 cols, int chunks, i64 chunk_len,
                typename Op::State *__restrict__ part, unsigned *__restrict__ tickets,
                typename Op::State *__restrict__ out)
{
    using State = typename Op::State;
    for (i64 item = blockIdx.x; item < rows * chunks; item += gridDim.x) {
        i64 row = item / chunks, c = item - row * chunks;
        i64 rb = row * cols, begin = rb + c * chunk_len, end = min(begin + chunk_len, rb + cols);
        /* narrow only where the Wire is smaller: an 8-byte arg op's key (arg_key8) needed one
         * register more than the 64 this kernel has, and its spill cost float64 argmax 3-4% at
         * 2^27-2^30 (H100, session 17) */
        State s = piece_tree<B, narrow_out<Op>>(op, thread_range<U>(op, x, begin, end, threadIdx.x, B), begin);
        if (chunks == 1) {
            if (threadIdx.x == 0)
                out[row] = rebase(s, rb);
            continue;
        }
        ticket_finish<B, false>(op, s, part + row * chunks, (int)c, chunks, tickets + row, out + row, rb);
    }
}

/* Short rows: G lanes per row, warps striding over rows (loop bounds are warp-uniform). */
template <class Op, int G, int U>
__global__ void __launch_bounds__(256)
    k_fast_group(Op op, const typename Op::input *__restrict__ x, i64 rows, i64 cols,
                 row_out<Op> *__restrict__ out)
{
    constexpr int per_warp = 32 / G;
    int lane = threadIdx.x & 31;
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 base = warp * per_warp; base < rows; base += nwarps * per_warp) {
        i64 row = base + lane / G;
        typename Op::State s = op.id();
        if (row < rows)
            s = thread_range<U>(op, x, row * cols, row * cols + cols, lane % G, G);
        row_out<Op> w = row_fold(op, s, row * cols, G);
        if (lane % G == 0 && row < rows)
            out[row] = w;
    }
}

/* Short rows of R whole 16-byte vectors, R a power of two up to 32 * U: a warp takes a tile of
 * 32 * U / R consecutive rows, U loads per lane all in flight. G lanes share a row (G a power of
 * two, G <= 32, K = R / G <= U vectors each): lane holds vectors lane % G + G * k of row
 * lane / G of each pass, so a load covers G * 16 contiguous bytes of 32 / G rows. The lane folds
 * its K vectors, then the G lanes combine by shuffles. Few lanes per row means few shuffle
 * levels per byte, which is what limited short rows (they were instruction-bound, the arg ops
 * most of all, with their 16-byte states); G >= 4 keeps every load 64-byte contiguous.
 * AHEAD: a warp issues its next tile's loads before it folds this one, in a second buffer, so
 * its loads stay in flight while it computes; without, they are issued just before their fold
 * (two buffers of U vectors are what fit a third block's 85 registers for U = 4, not U = 8). */
template <class Op, int U, bool AHEAD>
__global__ void __launch_bounds__(256, 3)
    k_fast_tile(Op op, const typename Op::input *__restrict__ x, i64 rows, int R, int G,
                row_out<Op> *__restrict__ out)
{
    using In = typename Op::input;
    constexpr int V = 16 / sizeof(In);
    const vec16<In> *__restrict__ xv = reinterpret_cast<const vec16<In> *>(x);
    int lane = threadIdx.x & 31, K = R / G, gb = __ffs(G) - 1, kb = __ffs(K) - 1;
    i64 cols = (i64)R * V, tile_rows = (32 * U) >> (gb + kb);
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    i64 step = (((i64)gridDim.x * blockDim.x) >> 5) * tile_rows;
    /* a vector's row and offset within the tile: 32-bit arithmetic, one 64-bit base per tile */
    auto row_of = [&](int u) { return ((u >> kb) << (5 - gb)) + (lane >> gb); };
    auto at = [&](int u) { return row_of(u) * R + (lane & (G - 1)) + ((u & (K - 1)) << gb); };
    auto load = [&](i64 t, vec16<In>(&r)[U]) {
        const vec16<In> *__restrict__ p = xv + t * R;
        int left = (int)min(rows - t, tile_rows);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (row_of(u) < left)
                r[u] = p[at(u)];
    };
    auto fold = [&](i64 t, const vec16<In>(&r)[U]) {
        int left = (int)min(rows - t, tile_rows);
        auto l = op.lid();
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (row_of(u) < left)
                l = op.lvec(l, r[u].e, t * cols + (i64)at(u) * V);
            if (((u + 1) & (K - 1)) == 0) { /* the lane's last vector of this row */
                row_out<Op> w = row_fold(op, op.done(l), (t + row_of(u)) * cols, G);
                if ((lane & (G - 1)) == 0 && row_of(u) < left)
                    out[t + row_of(u)] = w;
                l = op.lid();
            }
        }
    };
    vec16<In> a[U];
    i64 t = warp * tile_rows;
    if constexpr (!AHEAD) {
        for (; t < rows; t += step) {
            load(t, a);
            fold(t, a);
        }
    } else { /* two tiles a round, a and b by turns (a buffer chosen at run time would live in memory) */
        vec16<In> b[U];
        if (t < rows)
            load(t, a);
        for (; t < rows; t += 2 * step) {
            if (t + step < rows)
                load(t + step, b);
            fold(t, a);
            if (t + step >= rows)
                break;
            if (t + 2 * step < rows)
                load(t + 2 * step, a);
            fold(t + step, b);
        }
    }
}

/* Reduce sm[r * w + c] over r < R into r = 0, for every column c of the tile. */
template <class Op>
__device__ typename Op::State tile_reduce(const Op &op, typename Op::State *sm, typename Op::State s, int r0,
                                          int w, int R)
{
    __syncthreads();
    sm[threadIdx.x] = s;
    __syncthreads();
    int h = 1;
    while (h < R)
        h *= 2;
    for (h /= 2; h > 0; h /= 2) {
        if (r0 < h && r0 + h < R)
            sm[threadIdx.x] = op(sm[threadIdx.x], sm[threadIdx.x + h * w]);
        __syncthreads();
    }
    return sm[threadIdx.x];
}

/* Axis 0: a block covers a tile of w columns (R row-lanes of it when the matrix is narrow) over a
 * chunk of rows; consecutive threads read consecutive addresses. Chunks of one tile are finished
 * by the block that takes its last ticket. */
template <class Op, int B, int U>
__global__ void __launch_bounds__(B)
    k_fast_cols(Op op, const typename Op::input *__restrict__ x, i64 rows, i64 cols, int w, int R, i64 tiles,
                int chunks, i64 chunk_rows, typename Op::State *__restrict__ part, unsigned *__restrict__ tickets,
                typename Op::State *__restrict__ out)
{
    using In = typename Op::input;
    using State = typename Op::State;
    __shared__ State sm[B];
    __shared__ bool finisher;
    int r0 = threadIdx.x / w, c = threadIdx.x - r0 * w;
    for (i64 item = blockIdx.x; item < tiles * chunks; item += gridDim.x) {
        i64 tile = item / chunks, ch = item - tile * chunks;
        i64 col = tile * w + c;
        bool on = r0 < R && col < cols;
        i64 rend = min(rows, (ch + 1) * chunk_rows);
        auto l = op.lid();
        if (on) {
            i64 r = ch * chunk_rows + r0;
            for (; r + (i64)(U - 1) * R < rend; r += (i64)U * R) {
                In v[U];
#pragma unroll
                for (int u = 0; u < U; u++)
                    v[u] = x[(r + (i64)u * R) * cols + col];
#pragma unroll
                for (int u = 0; u < U; u++)
                    l = op.lacc(l, v[u], r + (i64)u * R);
            }
            for (; r < rend; r += R)
                l = op.lacc(l, x[r * cols + col], r);
        }
        State s = tile_reduce(op, sm, op.done(l), r0, w, R);
        if (chunks == 1) {
            if (r0 == 0 && on)
                out[col] = s;
            continue;
        }
        if (r0 == 0 && on) {
            part[ch * cols + col] = s;
            __threadfence();
        }
        __syncthreads();
        if (threadIdx.x == 0)
            finisher = atomicAdd(&tickets[tile], 1u) == (unsigned)chunks - 1;
        __syncthreads();
        if (finisher) {
            s = op.id();
            for (int k = r0; on && k < chunks; k += R)
                s = op(s, load_cg(part + (i64)k * cols + col));
            s = tile_reduce(op, sm, s, r0, w, R);
            if (r0 == 0 && on)
                out[col] = s;
            if (threadIdx.x == 0)
                tickets[tile] = 0;
        }
    }
}

template <class Op, int G, int U>
cudaError_t fast_group(const Op &op, const typename Op::input *x, i64 rows, i64 cols, row_out<Op> *out, int sms,
                       cudaStream_t st)
{
    constexpr auto k = k_fast_group<Op, G, U>;
    i64 warps = min(ceil_div(rows, 32 / G), (i64)sms * occupancy<k>(256) * 8);
    k<<<(unsigned)ceil_div(warps, 8), 256, 0, st>>>(op, x, rows, cols, out);
    return cudaGetLastError();
}

/* Elements [0, B x R x vec) of x, a thread's R vectors strided by B (CUB's full tile): R
 * unguarded 16-byte loads, all issued before the first is folded in, and no loop. On an H100
 * at 2^12 4-byte elements this ran at CUB's speed, 0.3-0.4 us (7-9%) under thread_range's head,
 * loops and tail (sweep_argkey, bench/results/kernels-2026-11-26-h100-s16). */
template <int R, class Op>
__device__ typename Op::State full_tile(const Op &op, const typename Op::input *__restrict__ x, i64 begin, int lane,
                                        int B)
{
    using In = typename Op::input;
    constexpr int V = 16 / sizeof(In);
    const vec16<In> *__restrict__ xv = reinterpret_cast<const vec16<In> *>(x + begin);
    vec16<In> r[R];
#pragma unroll
    for (int k = 0; k < R; k++)
        r[k] = xv[lane + k * B];
    auto s = op.lid();
#pragma unroll
    for (int k = 0; k < R; k++)
        s = op.lvec(s, r[k].e, begin + (i64)(lane + k * B) * V);
    return op.done(s);
}

/* A block's B threads over elements [begin, begin + n): a full tile when n is exactly 4 vectors
 * a thread, else thread_range with batches of two vectors, so up to four are in flight before
 * the first is folded in. */
template <int B, class Op>
__device__ typename Op::State block_tile(const Op &op, const typename Op::input *__restrict__ x, i64 begin, i64 n)
{
    constexpr i64 W = (i64)B * (16 / sizeof(typename Op::input)); /* elements of one vector a thread */
    return n == 4 * W ? full_tile<4>(op, x, begin, threadIdx.x, B)
                      : thread_range<2>(op, x, begin, begin + n, threadIdx.x, B);
}

/* A small array (fast_policy::block_max): one block of B threads, no tickets, partials or item
 * loop, at most 4 vectors a thread (batches of four left float64 at 2^10, two vectors per
 * thread, one memory latency per vector): exactly R vectors a thread as a full tile, or with R
 * = 0 thread_range's batches of two. R is the launcher's choice, not a branch here: these
 * kernels run once an L2 flush has evicted their code, and each path compiled in cost time.
 * Its tree is narrow_block_reduce's. On an H100, 256 threads beat 128 with 4 or 8 vectors each
 * at 2^9-2^12 (2026-11-25); 1024 threads beat 256 and 512 at 64 KiB (2026-11-26); a full tile
 * of one or two vectors a thread beat thread_range by 5-10% at 2^10-2^11 (sweep_tiles,
 * 2026-11-26, session 17). */
template <class Op, int B, int R>
__global__ void __launch_bounds__(B)
    k_fast_block(Op op, const typename Op::input *__restrict__ x, i64 n, typename Op::State *__restrict__ out)
{
    typename Op::State s;
    if constexpr (R > 0)
        s = full_tile<R>(op, x, 0, threadIdx.x, B);
    else
        s = thread_range<2>(op, x, 0, n, threadIdx.x, B);
    s = narrow_block_reduce<B, true>(op, s, 0);
    if (threadIdx.x == 0)
        out[0] = s;
}

/* k_fast_block for n elements: a full tile of 4 vectors a thread, or for 256 threads of 2 or 1
 * (the sizes its policy gives 512 and 1024 threads are never 1 or 2 whole vectors a thread) */
template <class Op, int B>
cudaError_t fast_block(const Op &op, const typename Op::input *x, i64 n, typename Op::State *out, cudaStream_t st)
{
    constexpr i64 W = (i64)B * (16 / sizeof(typename Op::input));
    if (n == 4 * W)
        k_fast_block<Op, B, 4><<<1, B, 0, st>>>(op, x, n, out);
    else if (B == 256 && n == 2 * W)
        k_fast_block<Op, 256, 2><<<1, 256, 0, st>>>(op, x, n, out);
    else if (B == 256 && n == W)
        k_fast_block<Op, 256, 1><<<1, 256, 0, st>>>(op, x, n, out);
    else
        k_fast_block<Op, B, 0><<<1, B, 0, st>>>(op, x, n, out);
    return cudaGetLastError();
}

/* A mid-size array (fast_policy::tiles_max): a block per tile of B threads x 4 vectors, all but
 * the last full tiles, the partials met by ticket. It keeps more loads in flight than
 * k_fast_rows's one round of resident-block pieces: each thread's 4 loads are issued at once, and
 * an SM holds twice the threads. On an H100, 4-byte sums and max 4-13% faster at 2^17-2^24
 * elements, argmax 1-11%, float64 argmax at 2^21 0.94 -> 1.03 of CUB
 * (bench/results/kernels-2026-11-26-h100-s17/, sweep_tiles and call D). */
template <class Op, int B>
__global__ void __launch_bounds__(B, 2048 / B) /* 2048 threads an SM, 32 registers: unbounded, int32
                                                  sums took 40 and 2^22 elements ran in two waves */
    k_fast_tiles(Op op, const typename Op::input *__restrict__ x, i64 n, typename Op::State *__restrict__ part,
                 unsigned *__restrict__ tickets, typename Op::State *__restrict__ out)
{
    constexpr i64 T = (i64)B * 4 * (16 / sizeof(typename Op::input));
    i64 begin = (i64)blockIdx.x * T;
    constexpr bool narrow = !std::is_same<typename Op::Wire, typename Op::State>::value;
    typename Op::State s = piece_tree<B, narrow>(op, block_tile<B>(op, x, begin, min(T, n - begin)), begin);
    ticket_finish<B, narrow>(op, s, part, (int)blockIdx.x, (int)gridDim.x, tickets, out, 0);
}

/* k_fast_tiles over n elements: a tile a block, a partial a tile in scratch (need()'s contract) */
template <class Op, int B>
cudaError_t fast_tiles(const Op &op, const typename Op::input *x, i64 n, void *scratch, size_t *bytes,
                       unsigned *tickets, typename Op::State *out, cudaStream_t st)
{
    using State = typename Op::State;
    i64 tiles = ceil_div(n, (i64)B * 4 * (16 / sizeof(typename Op::input)));
    cudaError_t err = need(scratch, bytes, (size_t)tiles * sizeof(State));
    if (err != cudaSuccess || !scratch)
        return err;
    k_fast_tiles<Op, B><<<(unsigned)tiles, B, 0, st>>>(op, x, n, static_cast<State *>(scratch), tickets, out);
    return cudaGetLastError();
}

/* Rows of R = 2^k whole vectors, R <= tile_max: k_fast_tile's shape; 0 when not. */
template <class In> int tile_vectors(i64 cols)
{
    using P = fast_policy<In>;
    i64 R = cols / P::vec;
    return cols % P::vec == 0 && R <= P::tile_max && (R & (R - 1)) == 0 ? (int)R : 0;
}

template <class Op, int U, bool AHEAD>
cudaError_t fast_tile(const Op &op, const typename Op::input *x, i64 rows, int R, row_out<Op> *out, int sms,
                      cudaStream_t st)
{
    constexpr auto k = k_fast_tile<Op, U, AHEAD>;
    using P = fast_policy<typename Op::input>;
    static_assert(32 * U >= (AHEAD ? P::tile_ahead_max : P::tile_max) && (!AHEAD || P::tile_arg_ahead == 2 * U),
                  "a row's lanes fit in a warp; an arg row ahead is 2 lanes of U vectors");
    /* lanes per row: as few as keep loads 64-byte contiguous and a row within one pass. A row of
     * at most 4 vectors is one lane's: its loads are not contiguous within one instruction, but
     * the warp's next ones read the rest of each sector from L1, and the row needs no shuffles
     * (H100, rows of 16: float32 argmax 74 -> 86% of the ceiling, the other ops within +-1;
     * one lane per row at 8 vectors took float32 argmax from 85 to 64%). An arg op's rows with
     * loads ahead take 2 lanes (fast_policy::tile_arg_ahead). */
    int G = R <= 4 ? 1 : arg_op<Op> && AHEAD ? 2 : max(4, R / U);
    i64 warps = min(ceil_div(rows * R, 32 * U), (i64)sms * occupancy<k>(256) * 8);
    k<<<(unsigned)ceil_div(warps, 8), 256, 0, st>>>(op, x, rows, R, G, out);
    return cudaGetLastError();
}

/* Pieces per unit (each unit len elements) for `slots` resident blocks: items in whole rounds
 * of blocks, as many rounds (1 to max_rounds) as give pieces nearest `big` elements; pieces of
 * at least `small` elements. */
i64 split(i64 units, i64 len, i64 slots, i64 small, i64 big, int max_rounds)
{
    i64 rounds = max((i64)1, min((i64)max_rounds, (units * len + slots * big / 2) / (slots * big)));
    i64 k = units >= rounds * slots ? 1 : rounds * slots / units;
    return max((i64)1, min(k, ceil_div(len, small)));
}

template <class Op>
cudaError_t fast(const Op &op, const gr_kjob *j, int sms, void *scratch, size_t *bytes, unsigned *tickets,
                 cudaStream_t st)
{
    using In = typename Op::input;
    using State = typename Op::State;
    using P = fast_policy<In>;
    const In *x = static_cast<const In *>(j->x);
    State *out = static_cast<State *>(j->out), *part = static_cast<State *>(scratch);
    i64 rows = j->axis == GR_AXIS_ALL ? 1 : j->rows, cols = j->axis == GR_AXIS_ALL ? j->rows * j->cols : j->cols;
    cudaError_t err;

    if (j->axis == 0) {
        constexpr auto k = k_fast_cols<Op, P::block, P::cols_unroll>;
        int w = (int)min(cols, (i64)P::block), R = P::block / w;
        i64 tiles = ceil_div(cols, w), slots = (i64)sms * occupancy<k>(P::block);
        int chunks = tiles > GR_K_COUNTERS ? 1 : (int)split(tiles, rows, slots, (i64)R * P::cols_unroll, 1, 1);
        i64 chunk_rows = ceil_div(ceil_div(rows, chunks), R) * R;
        chunks = (int)ceil_div(rows, chunk_rows);
        if ((err = need(scratch, bytes, chunks > 1 ? (size_t)chunks * cols * sizeof(State) : 0)) != cudaSuccess ||
            !scratch)
            return err;
        k<<<(unsigned)min(tiles * chunks, slots * P::waves), P::block, 0, st>>>(op, x, rows, cols, w, R, tiles, chunks,
                                                                           chunk_rows, part, tickets, out);
        return cudaGetLastError();
    }
    if (short_rows(j)) {
        if ((err = need(scratch, bytes, 0)) != cudaSuccess || !scratch)
            return err;
        auto *wout = static_cast<row_out<Op> *>(j->out);
        if (int R = tile_vectors<In>(cols))
            return (arg_op<Op> ? R == P::tile_arg_ahead : R <= P::tile_ahead_max)
                       ? fast_tile<Op, P::tile_ahead_unroll, true>(op, x, rows, R, wout, sms, st)
                       : fast_tile<Op, P::tile_unroll, false>(op, x, rows, R, wout, sms, st);
        if (cols <= 2)
            return fast_group<Op, 1, 2>(op, x, rows, cols, wout, sms, st);
        if (cols <= P::group4_max)
            return fast_group<Op, 4, 2>(op, x, rows, cols, wout, sms, st);
        return fast_group<Op, 32, P::unroll>(op, x, rows, cols, wout, sms, st);
    }
    if (rows == 1 && cols <= P::block_max) {
        if ((err = need(scratch, bytes, 0)) != cudaSuccess || !scratch)
            return err;
        return cols <= P::block_small ? fast_block<Op, 256>(op, x, cols, out, st)
               : cols <= P::block_mid ? fast_block<Op, 512>(op, x, cols, out, st)
                                      : fast_block<Op, 1024>(op, x, cols, out, st);
    }
    if (rows == 1 && cols <= P::tiles_max)
        return cols <= P::tiles_small_max ? fast_tiles<Op, 128>(op, x, cols, scratch, bytes, tickets, out, st)
                                          : fast_tiles<Op, 512>(op, x, cols, scratch, bytes, tickets, out, st);
    constexpr auto k = k_fast_rows<Op, P::block, P::unroll>;
    i64 slots = (i64)sms * occupancy<k>(P::block);
    i64 piece = arg_op<Op> ? P::arg_piece : P::piece;
    int chunks = rows > GR_K_COUNTERS ? 1 : (int)split(rows, cols, slots, P::min_chunk, piece, P::max_rounds);
    i64 chunk_len = ceil_div(ceil_div(cols, chunks), P::align) * P::align;
    chunks = (int)ceil_div(cols, chunk_len);
    /* a block's tree indexes its piece in 31 bits (arg_key): a piece that long would need whole
     * rows of 2^31 elements among more rows than there are counters, more than any GPU holds */
    if (chunk_len >= ((i64)1 << 31) - 1)
        return cudaErrorNotSupported;
    if ((err = need(scratch, bytes, chunks > 1 ? (size_t)(rows * chunks) * sizeof(State) : 0)) != cudaSuccess ||
        !scratch)
        return err;
    /* Pieces of split rows get a block each, handed out by the hardware as blocks finish (the
     * tail is one piece); many whole rows share `waves` rounds of blocks. */
    i64 grid = chunks > 1 ? rows * chunks : min(rows, slots * P::waves);
    k<<<(unsigned)grid, P::block, 0, st>>>(op, x, rows, cols, chunks, chunk_len, part, tickets, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- the selector */

cudaError_t run(const gr_kjob *j, void *scratch, size_t *bytes, unsigned *tickets, cudaStream_t st)
{
    int sms = j->sms > 0 ? j->sms : 1;
    int last = j->ties_last;
    switch (j->variant) {
    case GR_K_HARRIS1:
    case GR_K_HARRIS2:
    case GR_K_HARRIS3:
    case GR_K_HARRIS4:
    case GR_K_HARRIS5:
    case GR_K_HARRIS6:
    case GR_K_HARRIS7:
        return with_op<HARRIS_OPS, HARRIS_DT>(j->op, j->dtype, last, [&](auto op) {
            using In = typename decltype(op)::input;
            using Acc = typename decltype(op)::Acc;
            const In *x = static_cast<const In *>(j->x);
            Acc *out = static_cast<Acc *>(j->out);
            i64 n = j->rows * j->cols;
            return j->variant == GR_K_HARRIS7 ? harris7<In, Acc>(x, n, out, sms, scratch, bytes, st)
                                              : harris_levels<In, Acc>(j->variant, x, n, out, scratch, bytes, st);
        });
    case GR_K_SHFL:
        return with_op<SHFL_OPS, SHFL_DT>(j->op, j->dtype, last,
                                          [&](auto op) { return shfl(op, j, sms, scratch, bytes, st); });
    case GR_K_REDUX:
        return redux(j, sms, scratch, bytes, st);
    case GR_K_CUB:
        return with_op<GR_ALL_OPS, GR_ALL_DTYPES>(j->op, j->dtype, last,
                                                  [&](auto op) { return cub_run(op, j, scratch, bytes, st); });
    case GR_K_FAST:
        return with_op<GR_ALL_OPS, GR_ALL_DTYPES>(
            j->op, j->dtype, last, [&](auto op) { return fast(op, j, sms, scratch, bytes, tickets, st); });
    }
    return cudaErrorNotSupported;
}

int covers(const gr_kjob *j)
{
    if (j->variant < 0 || j->variant >= GR_K_NVARIANTS || j->op < 0 || j->op >= GR_NOPS || j->dtype < 0 ||
        j->dtype >= GR_NDTYPES || j->axis < GR_AXIS_ALL || j->axis > 1)
        return 0;
    const gr_algo *a = &gr_k_algos[j->variant];
    return (a->ops & B_(j->op)) && (a->dtypes & B_(j->dtype)) && (a->axes & GR_AXIS_BIT(j->axis));
}

} // namespace

extern "C" int gr_k_variant(const char *name)
{
    if (!name || strcmp(name, "auto") == 0)
        return GR_K_FAST;
    for (int v = 0; v < GR_K_NVARIANTS; v++)
        if (strcmp(gr_k_algos[v].name, name) == 0)
            return v;
    return -1;
}

extern "C" int64_t gr_k_nout(const struct gr_kjob *j)
{
    return j->axis == GR_AXIS_ALL ? 1 : j->axis == 0 ? j->cols : j->rows;
}

/* Does `fast` write j's results narrow (row_out): short rows of 4-byte min, max or arg ops. The
 * kernels' rule (narrow_out) must say the same of every op and dtype: */
static_assert(narrow_out<Min<int>> && narrow_out<Max<float>> && narrow_out<Arg<int, false>> &&
              narrow_out<Arg<float, true>>);
static_assert(!narrow_out<Max<i64>> && !narrow_out<Min<double>> && !narrow_out<Arg<i64, true>> &&
              !narrow_out<Arg<double, false>> && !narrow_out<Sum<int>> && !narrow_out<Sum<float>> &&
              !narrow_out<Mean<float>> && !narrow_out<Prod<int>>);
static bool narrow_rows(const gr_kjob *j)
{
    return short_rows(j) && gr_dtype_size(j->dtype) == 4 && j->op != GR_SUM && j->op != GR_MEAN &&
           j->op != GR_PROD;
}

extern "C" size_t gr_k_state_bytes(const struct gr_kjob *j)
{
    if (narrow_rows(j))
        return gr_op_is_arg(j->op) ? sizeof(arg_wire<int>) : sizeof(int);
    return gr_op_is_arg(j->op) ? sizeof(arg_state<i64>) : sizeof(i64);
}

extern "C" int gr_k_scratch(const struct gr_kjob *j, size_t *bytes, struct gr_err *e)
{
    if (!covers(j))
        return gr_fail(e, GR_EUNPROC, "algorithm", "kernel '%s' does not cover op %s on %s along axis %d",
                       j->variant >= 0 && j->variant < GR_K_NVARIANTS ? gr_k_algos[j->variant].name : "?",
                       gr_op_name(j->op), gr_dtype_name(j->dtype), j->axis);
    if (j->rows < 1 || j->cols < 1)
        return gr_fail(e, GR_EUNPROC, "shape", "a reduction needs at least one element");
    *bytes = 0;
    cudaError_t err = run(j, NULL, bytes, NULL, 0);
    if (err != cudaSuccess)
        return gr_fail(e, GR_ECUDA, NULL, "sizing kernel '%s': %s", gr_k_algos[j->variant].name,
                       cudaGetErrorString(err));
    return GR_OK;
}

extern "C" cudaError_t gr_k_launch(const struct gr_kjob *j, void *scratch, size_t scratch_bytes, unsigned *counters,
                                   cudaStream_t st)
{
    if (!covers(j) || j->rows < 1 || j->cols < 1)
        return cudaErrorInvalidValue;
    if (!scratch || !counters)
        return cudaErrorInvalidValue;
    return run(j, scratch, &scratch_bytes, counters, st);
}

extern "C" void gr_k_finish(const struct gr_kjob *j, const void *states, int64_t n, int64_t count,
                            struct gr_result *r, int64_t first)
{
    const unsigned char *p = static_cast<const unsigned char *>(states);
    size_t step = gr_k_state_bytes(j);
    int int_state = !gr_dtype_is_float(j->dtype), arg = gr_op_is_arg(j->op);
    bool narrow = narrow_rows(j); /* a 4-byte element as read, then (arg ops) a u32 index */
    for (int64_t k = 0; k < n; k++, p += step) {
        i64 iv;
        double fv;
        if (narrow) {
            int32_t i32;
            float f32;
            memcpy(&i32, p, 4);
            memcpy(&f32, p, 4);
            iv = i32;
            fv = f32;
        } else {
            memcpy(&iv, p, sizeof iv);
            memcpy(&fv, p, sizeof fv);
        }
        if (arg && narrow) {
            unsigned u;
            memcpy(&u, p + 4, sizeof u);
            r->index[first + k] = u;
        } else if (arg) {
            memcpy(&r->index[first + k], p + sizeof(i64), sizeof(i64));
        }
        if (j->op == GR_MEAN)
            r->f[first + k] = fv / (double)count;
        else if (int_state)
            r->i[first + k] = iv;
        else
            r->f[first + k] = fv;
    }
}
