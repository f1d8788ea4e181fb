/* reduce_ops.cuh: what every reduction kernel is made of: element types, the operators (every
 * reduction gpured has) with their states, the run-time dispatch to them, and warp and block trees. Included by reduce.cu alone
 * (one translation unit); device code, no state. */

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
    /* V columns' accumulators, each taking its column's element of one row (index i) */
    template <class L, int V> __device__ void lcols(L (&l)[V], const In (&e)[V], i64 i) const
    {
#pragma unroll
        for (int k = 0; k < V; k++)
            l[k] = self().lacc(l[k], e[k], i);
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

/* SKIP: nansum, a NaN counted as 0. */
template <class In, bool SKIP = false> struct Sum : op_base<In, Sum<In, SKIP>, acc_t<In>> {
    __host__ __device__ acc_t<In> id() const { return 0; }
    __host__ __device__ acc_t<In> from(In x, i64) const { return SKIP && is_nan(x) ? 0 : (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return add(a, b); }
};
/* count_nonzero: a NaN is not 0. */
template <class In> struct CountNonzero : op_base<In, CountNonzero<In>, i64> {
    __host__ __device__ i64 id() const { return 0; }
    __host__ __device__ i64 from(In x, i64) const { return x != 0; }
    __host__ __device__ i64 operator()(i64 a, i64 b) const { return add(a, b); }
};
/* Means of integers too are float64 sums (an int64 sum could wrap); the host divides. */
template <class In> struct Mean : op_base<In, Mean<In>, double> {
    __host__ __device__ double id() const { return 0; }
    __host__ __device__ double from(In x, i64) const { return (double)x; }
    __host__ __device__ double operator()(double a, double b) const { return a + b; }
};
/* SKIP: nanprod, a NaN counted as 1. */
template <class In, bool SKIP = false> struct Prod : op_base<In, Prod<In, SKIP>, acc_t<In>> {
    __host__ __device__ acc_t<In> id() const { return 1; }
    __host__ __device__ acc_t<In> from(In x, i64) const { return SKIP && is_nan(x) ? 1 : (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return mul(a, b); }
};
/* NaN propagates: a NaN operand wins. SKIP (nanmin, nanmax): a NaN loses, and the identity is a
 * NaN, so a lane of NaNs alone gives one (as NumPy does). */
template <class In, bool MAX, bool SKIP = false> struct Extreme : op_base<In, Extreme<In, MAX, SKIP>, acc_t<In>> {
    using Local = In;
    template <class T> __host__ __device__ static T pick(T a, T b)
    {
        return ((MAX ? a > b : a < b) | (SKIP ? is_nan(b) : is_nan(a))) ? a : b;
    }
    template <class T> __host__ __device__ static T none()
    {
        return SKIP && ::cuda::std::numeric_limits<T>::has_quiet_NaN ? ::cuda::std::numeric_limits<T>::quiet_NaN()
               : MAX ? bottom<T>() : top<T>();
    }
    __host__ __device__ acc_t<In> id() const { return none<acc_t<In>>(); }
    __host__ __device__ acc_t<In> from(In x, i64) const { return (acc_t<In>)x; }
    __host__ __device__ acc_t<In> operator()(acc_t<In> a, acc_t<In> b) const { return pick(a, b); }
    __device__ In lid() const { return none<In>(); }
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
template <class In> using NanMin = Extreme<In, false, true>;
template <class In> using NanMax = Extreme<In, true, true>;

/* ptp: the max and the min at once (a NaN in either stays); the host subtracts. */
template <class A> struct ptp_state {
    A hi, lo;
};
template <class In> struct Ptp : op_base<In, Ptp<In>, acc_t<In>, ptp_state<acc_t<In>>> {
    using A = acc_t<In>;
    using Local = ptp_state<In>;
    using Hi = Max<In>;
    using Lo = Min<In>;
    __host__ __device__ ptp_state<A> id() const { return {Hi::template none<A>(), Lo::template none<A>()}; }
    __host__ __device__ ptp_state<A> from(In x, i64) const { return {(A)x, (A)x}; }
    __host__ __device__ ptp_state<A> operator()(ptp_state<A> a, ptp_state<A> b) const
    {
        return {Hi::pick(a.hi, b.hi), Lo::pick(a.lo, b.lo)};
    }
    __device__ Local lid() const { return {Hi::template none<In>(), Lo::template none<In>()}; }
    __device__ Local lacc(Local s, In x, i64) const { return {Hi::pick(x, s.hi), Lo::pick(x, s.lo)}; }
    __device__ ptp_state<A> done(Local s) const { return {(A)s.hi, (A)s.lo}; }
};

/* any (ALL: all): 1 when a value (every value) is not 0; a NaN is not 0. */
template <class In, bool ALL> struct Logic : op_base<In, Logic<In, ALL>, i64> {
    __host__ __device__ i64 id() const { return ALL; }
    __host__ __device__ i64 from(In x, i64) const { return x != 0; }
    __host__ __device__ i64 operator()(i64 a, i64 b) const { return ALL ? a & b : a | b; }
};

/* var and std: a count, a mean and M2 (the sum of squared deviations from the mean). Two merge
 * by Chan et al.'s update, which stays stable where a sum of squares would cancel. Equal counts
 * (the lanes of a row, the row-lanes of a tile) take b.n / n as the 0.5 it exactly is, not by a
 * float64 division (var over rows of 256 floats on an H200: 86 -> 88% of the ceiling). */
struct var_state {
    double n, mean, m2;
};
__host__ __device__ inline var_state chan(var_state a, var_state b)
{
    if (a.n == 0)
        return b;
    if (b.n == 0)
        return a;
    double n = a.n + b.n, d = b.mean - a.mean, f = a.n == b.n ? 0.5 : b.n / n;
    return var_state{n, a.mean + d * f, a.m2 + b.m2 + d * d * (a.n * f)};
}
/* The answer op (var, std, nanvar, nanstd) gives from a state: M2 over the count less ddof; with
 * none left M2 / 0 (inf, or NaN where M2 is 0), and NaN for a nan-op on floats (skip), as the CPU
 * and NumPy give; std its root. */
__host__ __device__ inline double moments_answer(var_state v, int op, int ddof, bool skip)
{
    double var = v.m2 / (v.n > ddof ? v.n - ddof : skip ? NAN : 0.0);
    return op == GR_STD || op == GR_NANSTD ? sqrt(var) : var;
}
/* A thread's own scan sums deviations from its first element (k) and their squares, in float64:
 * no division an element (Welford's update has one), and no cancellation, since k is one of the
 * values the deviations are taken from. done() turns it into a var_state. Its count is an int (a
 * thread's share is far below 2^31): the float64 units are what var's scan is bound by. */
struct var_local {
    int n;
    double k, s1, s2;
};
/* SKIP: nanvar, nanstd, NaNs left out of the count too. */
template <class In, bool SKIP = false> struct Var : op_base<In, Var<In, SKIP>, double, var_state> {
    using Local = var_local;
    __host__ __device__ var_state id() const { return var_state{0, 0, 0}; }
    __host__ __device__ var_state from(In x, i64) const
    {
        return SKIP && is_nan(x) ? id() : var_state{1, (double)x, 0};
    }
    __host__ __device__ var_state operator()(var_state a, var_state b) const { return chan(a, b); }
    __device__ var_local lid() const { return var_local{0, 0, 0, 0}; }
    __device__ var_local lacc(var_local s, In x, i64) const
    {
        if (SKIP && is_nan(x))
            return s;
        double v = (double)x;
        s.k = s.n == 0 ? v : s.k;
        double d = v - s.k;
        return var_local{s.n + 1, s.k, s.s1 + d, fma(d, d, s.s2)};
    }
    __device__ var_state done(var_local s) const
    {
        if (s.n == 0)
            return id();
        double n = s.n, m2 = s.s2 - s.s1 * (s.s1 / n);
        return var_state{n, s.k + s.s1 / n, m2 < 0 ? 0 : m2}; /* a NaN stays a NaN */
    }
};
/* nanmean: the numbers' sum and their count. Not var's mean: a shift by an infinity leaves NaN
 * where the mean is infinite. */
struct sum_count {
    double s, n;
};
__host__ __device__ inline sum_count chan(sum_count a, sum_count b) { return sum_count{a.s + b.s, a.n + b.n}; }
__host__ __device__ inline double moments_answer(sum_count c, int, int, bool) { return c.s / c.n; } /* 0/0: NaN */
template <class In> struct NanMean : op_base<In, NanMean<In>, double, sum_count> {
    __host__ __device__ sum_count id() const { return sum_count{0, 0}; }
    __host__ __device__ sum_count from(In x, i64) const { return is_nan(x) ? id() : sum_count{(double)x, 1}; }
    __host__ __device__ sum_count operator()(sum_count a, sum_count b) const { return chan(a, b); }
};
/* A pass after the first of an op by moments over split axes: it merges the states St (var_state
 * or sum_count) the pass before left, and is launched by merge_cols alone. */
template <class St> struct Merge : op_base<St, Merge<St>, double, St> {
    __host__ __device__ St id() const { return St{}; }
    __host__ __device__ St from(St x, i64) const { return x; }
    __host__ __device__ St operator()(St a, St b) const { return chan(a, b); }
};

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
/* SKIP: nanargmin, nanargmax: NaNs are never taken, so no state holds one; a lane of NaNs alone
 * stays empty (index -1), which the host refuses as NumPy raises. */
template <class In, bool MAX, bool SKIP = false>
struct Arg : op_base<In, Arg<In, MAX, SKIP>, acc_t<In>, arg_state<acc_t<In>>> {
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
        if constexpr (SKIP) /* b is a NaN only as lscan's first candidate */
            return !xn & (bn | gt);
        return (xn & ((last != 0) | !bn)) | (!xn & !bn & gt);
    }
    __device__ Local lid() const { return Local{0, -1}; }
    template <bool NUM = false> __device__ Local lacc(Local s, In x, i64 i) const
    {
        bool take = (s.i < 0) | takes<NUM>(x, s.v);
        if constexpr (SKIP && !NUM)
            take &= !is_nan(x);
        return take ? Local{x, i} : s;
    }
    /* The vector's own extreme first, with a small index: one 64-bit select per vector. A vector
     * of 4 floats without NaNs, folded into a state that is not one (nearly every vector),
     * takes the compares without NaN tests: float32 argmax on an H200 was bound by the SMs'
     * work, and this took its rows up 1-12 points of the ceiling there. A float64 vector is 2
     * elements: there the branch cost more than the tests it saves (-3 points at rows of 32-64). */
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
    /* As lvec: a row of columns without a NaN, in accumulators without one, skips the NaN tests
     * (float32 argmax over a leading axis on an H200 was bound by the SMs' work at 60-66% of the
     * ceiling). */
    template <int V> __device__ void lcols(Local (&l)[V], const In (&e)[V], i64 i) const
    {
        bool nan = false;
#pragma unroll
        for (int k = 0; k < V; k++)
            nan |= is_nan(e[k]) | is_nan(l[k].v);
        if (nan) {
#pragma unroll
            for (int k = 0; k < V; k++)
                l[k] = lacc<false>(l[k], e[k], i);
        } else {
#pragma unroll
            for (int k = 0; k < V; k++)
                l[k] = lacc<true>(l[k], e[k], i);
        }
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
    if constexpr ((OPS & B_(GR_NANSUM)) != 0) {
        if (op == GR_NANSUM)
            return f(Sum<In, true>{});
    }
    if constexpr ((OPS & B_(GR_NANMIN)) != 0) {
        if (op == GR_NANMIN)
            return f(NanMin<In>{});
    }
    if constexpr ((OPS & B_(GR_NANMAX)) != 0) {
        if (op == GR_NANMAX)
            return f(NanMax<In>{});
    }
    if constexpr ((OPS & B_(GR_COUNT_NONZERO)) != 0) {
        if (op == GR_COUNT_NONZERO)
            return f(CountNonzero<In>{});
    }
    if constexpr ((OPS & B_(GR_VAR)) != 0) {
        if (op == GR_VAR || op == GR_STD) /* the same states; the answer takes the root */
            return f(Var<In>{});
    }
    if constexpr ((OPS & B_(GR_NANMEAN)) != 0) {
        if (op == GR_NANMEAN)
            return f(NanMean<In>{});
    }
    if constexpr ((OPS & B_(GR_NANVAR)) != 0) {
        if (op == GR_NANVAR || op == GR_NANSTD)
            return f(Var<In, true>{});
    }
    if constexpr ((OPS & B_(GR_NANPROD)) != 0) {
        if (op == GR_NANPROD)
            return f(Prod<In, true>{});
    }
    if constexpr ((OPS & B_(GR_NANARGMIN)) != 0) {
        if (op == GR_NANARGMIN)
            return f(Arg<In, false, true>{{}, last});
    }
    if constexpr ((OPS & B_(GR_NANARGMAX)) != 0) {
        if (op == GR_NANARGMAX)
            return f(Arg<In, true, true>{{}, last});
    }
    if constexpr ((OPS & B_(GR_PTP)) != 0) {
        if (op == GR_PTP)
            return f(Ptp<In>{});
    }
    if constexpr ((OPS & B_(GR_ANY)) != 0) {
        if (op == GR_ANY)
            return f(Logic<In, false>{});
    }
    if constexpr ((OPS & B_(GR_ALL)) != 0) {
        if (op == GR_ALL)
            return f(Logic<In, true>{});
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
__device__ inline var_state shfl_down(var_state s, int off, int w)
{
    return var_state{shfl_down(s.n, off, w), shfl_down(s.mean, off, w), shfl_down(s.m2, off, w)};
}
__device__ inline sum_count shfl_down(sum_count s, int off, int w)
{
    return sum_count{shfl_down(s.s, off, w), shfl_down(s.n, off, w)};
}
template <class A> __device__ arg_state<A> shfl_down(arg_state<A> s, int off, int w)
{
    return arg_state<A>{shfl_down(s.v, off, w), shfl_down(s.i, off, w)};
}
template <class A> __device__ ptp_state<A> shfl_down(ptp_state<A> s, int off, int w)
{
    return ptp_state<A>{shfl_down(s.hi, off, w), shfl_down(s.lo, off, w)};
}
/* Partials written by other blocks: read through L2, never a stale L1 line. */
__device__ inline i64 load_cg(const i64 *p) { return __ldcg(p); }
__device__ inline double load_cg(const double *p) { return __ldcg(p); }
__device__ inline var_state load_cg(const var_state *p)
{
    return var_state{load_cg(&p->n), load_cg(&p->mean), load_cg(&p->m2)};
}
__device__ inline sum_count load_cg(const sum_count *p) { return sum_count{load_cg(&p->s), load_cg(&p->n)}; }
template <class A> __device__ arg_state<A> load_cg(const arg_state<A> *p)
{
    return arg_state<A>{load_cg(&p->v), load_cg(&p->i)};
}
template <class A> __device__ ptp_state<A> load_cg(const ptp_state<A> *p)
{
    return ptp_state<A>{load_cg(&p->hi), load_cg(&p->lo)};
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

} // namespace
