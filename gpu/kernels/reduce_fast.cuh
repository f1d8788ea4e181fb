/* reduce_fast.cuh: the production kernels (variant fast): 16-byte loads, grids sized to the
 * machine, warp shuffles, one launch, deterministic; every op, dtype and axis, shaped by
 * reduce_policy.cuh. Included by reduce.cu alone; launchers run on the caller's stream. */

namespace {

/* ---------------------------------------------------------------- fast */

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
/* An op by moments's last pass writes its answers (gr_kjob's answers), not its states. */
struct answering {
    bool on, skip;
    int op, ddof;
};
answering answers_of(const gr_kjob *j) { return answering{j->answers != 0, j->skipped != 0, j->op, j->ddof}; }
template <class S>
constexpr bool by_moments = std::is_same<S, var_state>::value || std::is_same<S, sum_count>::value;
/* Output i of a column reduction or short rows: its state, or its float64 answer in the same buffer. */
template <class State> __device__ void put(State *out, i64 i, State s, answering a)
{
    if constexpr (by_moments<State>)
        if (a.on) {
            reinterpret_cast<double *>(out)[i] = moments_answer(s, a.op, a.ddof, a.skip);
            return;
        }
    out[i] = s;
}

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
         * 2^27-2^30 (H100) */
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
                 row_out<Op> *__restrict__ out, answering ans)
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
            put(out, row, w, ans);
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
                row_out<Op> *__restrict__ out, answering ans)
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
                    put(out, t + row_of(u), w, ans);
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

/* V adjacent elements of In: one load of V * sizeof(In) bytes (16 at most) when aligned. */
template <class In, int V> struct alignas(V == 1 ? alignof(In) : V * sizeof(In)) vecn {
    In e[V];
};

/* Axis 0: a block covers a tile of w x V columns (R row-lanes of it when the matrix is narrow)
 * over a chunk of rows; each thread reads V adjacent columns of a row in one load, consecutive
 * threads consecutive addresses. V > 1 where the columns of a group come in whole 16-byte vectors:
 * with one 4-byte load an element, the loads, their addresses and an arg op's 64-bit index were
 * work enough to hold a column reduction under the memory's pace. Chunks of one tile are finished
 * by the block that takes its last ticket. Groups (an N-D array's middle axes): the cols outputs
 * are groups of inner columns, each group's rows x inner elements after the one before.
 * !SPLIT: a thread's columns whole (R = 1, one chunk, w = B), known when compiled: no barrier,
 * tree or ticket, so a block's warps run on to their next tile apart, not at the pace of its
 * slowest, and fewer registers let more of them in (float32 over axis 0 of (64, 4194304), the
 * kernel alone on an H200: sums 92 -> 97% of the ceiling, var 81 -> 97%, argmax 81 -> 93%). */
template <class Op, int B, int U, int V, bool SPLIT>
__global__ void __launch_bounds__(B)
    k_fast_cols(Op op, const typename Op::input *__restrict__ x, i64 rows, i64 inner, i64 cols, int w, int R,
                i64 tiles, int chunks, i64 chunk_rows, typename Op::State *__restrict__ part,
                unsigned *__restrict__ tickets, typename Op::State *__restrict__ out, answering ans)
{
    using In = typename Op::input;
    using State = typename Op::State;
    using Vec = vecn<In, V>;
    if constexpr (!SPLIT)
        w = B, R = 1, chunks = 1;
    __shared__ State sm[B];
    __shared__ bool finisher;
    int r0 = threadIdx.x / w, c = threadIdx.x - r0 * w;
    for (i64 item = blockIdx.x; item < tiles * chunks; item += gridDim.x) {
        i64 tile = item / chunks, ch = item - tile * chunks;
        i64 col = (tile * w + c) * V; /* the first of this thread's V columns */
        bool on = r0 < R && col < cols;
        i64 rend = min(rows, (ch + 1) * chunk_rows);
        decltype(op.lid()) l[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            l[k] = op.lid();
        if (on) {
            /* its columns' first elements; a row of them is inner / V vectors on */
            const Vec *y = reinterpret_cast<const Vec *>(x + (col / inner) * rows * inner + col % inner);
            i64 step = inner / V, r = ch * chunk_rows + r0;
            for (; r + (i64)(U - 1) * R < rend; r += (i64)U * R) {
                Vec v[U];
#pragma unroll
                for (int u = 0; u < U; u++)
                    v[u] = y[(r + (i64)u * R) * step];
#pragma unroll
                for (int u = 0; u < U; u++)
                    op.lcols(l, v[u].e, r + (i64)u * R);
            }
            for (; r < rend; r += R)
                op.lcols(l, y[r * step].e, r);
        }
        State s[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            s[k] = SPLIT ? tile_reduce(op, sm, op.done(l[k]), r0, w, R) : op.done(l[k]);
        if (chunks == 1) {
#pragma unroll
            for (int k = 0; k < V; k++)
                if (r0 == 0 && on)
                    put(out, col + k, s[k], ans);
            continue;
        }
        if (r0 == 0 && on) {
#pragma unroll
            for (int k = 0; k < V; k++)
                part[ch * cols + col + k] = s[k];
            __threadfence();
        }
        __syncthreads();
        if (threadIdx.x == 0)
            finisher = atomicAdd(&tickets[tile], 1u) == (unsigned)chunks - 1;
        __syncthreads();
        if (finisher) {
#pragma unroll
            for (int k = 0; k < V; k++) {
                State f = op.id();
                for (int q = r0; on && q < chunks; q += R)
                    f = op(f, load_cg(part + (i64)q * cols + col + k));
                f = tile_reduce(op, sm, f, r0, w, R);
                if (r0 == 0 && on)
                    put(out, col + k, f, ans);
            }
            if (threadIdx.x == 0)
                tickets[tile] = 0;
        }
    }
}

template <class Op, int G, int U>
cudaError_t fast_group(const Op &op, const typename Op::input *x, i64 rows, i64 cols, row_out<Op> *out,
                       answering ans, int sms, cudaStream_t st)
{
    constexpr auto k = k_fast_group<Op, G, U>;
    i64 warps = min(ceil_div(rows, 32 / G), (i64)sms * occupancy<k>(256) * 8);
    k<<<(unsigned)ceil_div(warps, 8), 256, 0, st>>>(op, x, rows, cols, out, ans);
    return cudaGetLastError();
}

/* Elements [0, B x R x vec) of x, a thread's R vectors strided by B (CUB's full tile): R
 * unguarded 16-byte loads, all issued before the first is folded in, and no loop. On an H100
 * at 2^12 4-byte elements this ran at CUB's speed, 0.3-0.4 us (7-9%) under thread_range's head,
 * loops and tail. */
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
 * at 2^9-2^12; 1024 threads beat 256 and 512 at 64 KiB; a full tile of one or two vectors a
 * thread beat thread_range by 5-10% at 2^10-2^11. */
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
 * elements, argmax 1-11%, float64 argmax at 2^21 0.94 -> 1.03 of CUB. */
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
cudaError_t fast_tile(const Op &op, const typename Op::input *x, i64 rows, int R, row_out<Op> *out,
                      answering ans, int sms, cudaStream_t st)
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
    k<<<(unsigned)ceil_div(warps, 8), 256, 0, st>>>(op, x, rows, R, G, out, ans);
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

/* Axis 0 (in groups): k_fast_cols with P's block, V columns a thread (U loads in flight). */
template <class Op, class P, int U, int V>
cudaError_t fast_cols(const Op &op, const gr_kjob *j, int sms, void *scratch, size_t *bytes, unsigned *tickets,
                      cudaStream_t st)
{
    using State = typename Op::State;
    constexpr auto k = k_fast_cols<Op, P::block, U, V, true>, whole = k_fast_cols<Op, P::block, U, V, false>;
    i64 inner = j->cols, rows = j->rows / gr_k_groups(j), cols = j->cols * gr_k_groups(j);
    /* a tile is as many columns with V > 1 as with V = 1, R = V times the row-lanes: tiles V times
     * wider are fewer and longer blocks, and their last wave left SMs idle (float32 sums read in
     * vectors over axis 2 of (64, 64, 256, 256) on an H200: 71% of the ceiling so, 84% thus) */
    int w = (int)min(cols, (i64)P::block) / V, R = P::block / w;
    /* over short columns a thread takes 64 rows or more where the columns fill the wider tile:
     * a tile of row-lanes ends in a tree and barriers (an op by moments's tree in float64
     * divisions), one row-lane in neither */
    while (R > 1 && rows < (i64)64 * R && (i64)(P::block / (R / 2)) * V <= cols)
        R /= 2, w = P::block / R;
    i64 tiles = ceil_div(cols, (i64)w * V), slots = (i64)sms * occupancy<k>(P::block);
    int chunks = tiles > GR_K_COUNTERS ? 1 : (int)split(tiles, rows, slots, (i64)R * U, 1, 1);
    i64 chunk_rows = ceil_div(ceil_div(rows, chunks), R) * R;
    chunks = (int)ceil_div(rows, chunk_rows);
    cudaError_t err = need(scratch, bytes, chunks > 1 ? (size_t)chunks * cols * sizeof(State) : 0);
    if (err != cudaSuccess || !scratch)
        return err;
    bool split = chunks > 1 || R > 1;
    slots = split ? slots : (i64)sms * occupancy<whole>(P::block);
    (split ? k : whole)<<<(unsigned)min(tiles * chunks, slots * P::waves), P::block, 0, st>>>(
        op, static_cast<const typename Op::input *>(j->x), rows, inner, cols, w, R, tiles, chunks, chunk_rows,
        static_cast<State *>(scratch), tickets, static_cast<State *>(j->out),
        answers_of(j));
    return cudaGetLastError();
}

/* A later pass of an op by moments over split axes (j->merge): the states the pass before left
 * are merged along axis 0 as columns of float64 are (its passes after the first are never a row's). */
cudaError_t merge_cols(const gr_kjob *j, int sms, void *scratch, size_t *bytes, unsigned *tickets, cudaStream_t st)
{
    if (j->axis != 0)
        return cudaErrorNotSupported;
    using P = fast_policy<double>;
    if (j->op == GR_NANMEAN)
        return fast_cols<Merge<sum_count>, P, P::cols_unroll, 1>(Merge<sum_count>{}, j, sms, scratch, bytes, tickets, st);
    return fast_cols<Merge<var_state>, P, P::cols_unroll, 1>(Merge<var_state>{}, j, sms, scratch, bytes, tickets, st);
}

/* Columns in 16-byte vectors (fast_cols's V > 1) for the arg ops, whose folds the SMs' work
 * bounds: float32 argmax over axis 0 of (64, 4194304) on an H200 87 -> 92% of the ceiling.
 * The other ops' scalar loads, 8 in flight, stay: in vectors, var over axis 2 of (64, 64, 256,
 * 256) fell 98 -> 91%, sums 100 -> 92%. */
template <class Op> constexpr bool cols_vectors = arg_op<Op>;

template <class Op>
cudaError_t fast(const Op &op, const gr_kjob *j, int sms, void *scratch, size_t *bytes, unsigned *tickets,
                 cudaStream_t st)
{
    using In = typename Op::input;
    using State = typename Op::State;
    using P = fast_policy<In>;
    const In *x = static_cast<const In *>(j->x);
    State *out = static_cast<State *>(j->out);
    i64 rows = j->axis == GR_AXIS_ALL ? 1 : j->rows, cols = j->axis == GR_AXIS_ALL ? j->rows * j->cols : j->cols;
    cudaError_t err;

    if (j->axis == 0) {
        if constexpr (cols_vectors<Op>)
            if (j->cols % P::vec == 0)
                return fast_cols<Op, P, P::cols_vec_unroll, P::vec>(op, j, sms, scratch, bytes, tickets, st);
        return fast_cols<Op, P, P::cols_unroll, 1>(op, j, sms, scratch, bytes, tickets, st);
    }
    if (short_rows(j)) {
        if ((err = need(scratch, bytes, 0)) != cudaSuccess || !scratch)
            return err;
        auto *wout = static_cast<row_out<Op> *>(j->out);
        answering ans = answers_of(j);
        /* var and its kin from rows of 16 vectors: 4 lanes a row, each with its own loads in
         * flight, not tiles, whose many registers of float64 states left few warps (float32 on
         * an H200, % of the ceiling: rows of 64 65 -> 75, of 256 86 -> 96, of 512 86 -> 98) */
        if constexpr (std::is_same<State, var_state>::value)
            if (cols >= 16 * P::vec)
                return fast_group<Op, 4, P::unroll>(op, x, rows, cols, wout, ans, sms, st);
        if (int R = tile_vectors<In>(cols))
            return (arg_op<Op> ? R == P::tile_arg_ahead : R <= P::tile_ahead_max)
                       ? fast_tile<Op, P::tile_ahead_unroll, true>(op, x, rows, R, wout, ans, sms, st)
                       : fast_tile<Op, P::tile_unroll, false>(op, x, rows, R, wout, ans, sms, st);
        if (cols <= 2)
            return fast_group<Op, 1, 2>(op, x, rows, cols, wout, ans, sms, st);
        if (cols <= P::group4_max)
            return fast_group<Op, 4, 2>(op, x, rows, cols, wout, ans, sms, st);
        return fast_group<Op, 32, P::unroll>(op, x, rows, cols, wout, ans, sms, st);
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
    k<<<(unsigned)grid, P::block, 0, st>>>(op, x, rows, cols, chunks, chunk_len, static_cast<State *>(scratch),
                                           tickets, out);
    return cudaGetLastError();
}

} // namespace
