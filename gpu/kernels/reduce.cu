/* reduce.cu: the reduction variants' table, the selector that runs one, and the C interface
 * (reduce.h); stateless, runs on the stream of the worker thread that calls it. The kernels are
 * in reduce_ops.cuh (operators, trees), reduce_teaching.cuh, reduce_fast.cuh and its tuning,
 * reduce_policy.cuh.
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
#include "gpu/kernels/reduce.h"

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/std/limits>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <limits.h>
#include <math.h>
#include <string.h>

#include <type_traits>

typedef long long i64;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
#define B_(x) (1u << (x))
#define OPS_SUM (B_(GR_SUM) | B_(GR_MEAN))
#define OPS_CORE (B_(GR_NANSUM) - 1) /* sum to argmax: CUB's own operators take these */
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
     OPS_CORE, GR_ALL_DTYPES, CUB_AXES},
    {"fast", "production kernel: 16-byte loads, machine-sized grid, warp shuffles, one launch, "
             "deterministic; every op, dtype and axis",
     GR_GPU_OPS, GR_ALL_DTYPES, GR_ALL_AXES},
};

/* Each part opens its own anonymous namespace: one translation unit, so the selector below
 * instantiates only what it dispatches. */
#include "gpu/kernels/reduce_ops.cuh" /* in this order: each part uses the ones before it */
#include "gpu/kernels/reduce_teaching.cuh"
#include "gpu/kernels/reduce_policy.cuh"
#include "gpu/kernels/reduce_fast.cuh"

namespace {

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
        return with_op<OPS_CORE, GR_ALL_DTYPES>(j->op, j->dtype, last,
                                                [&](auto op) { return cub_run(op, j, scratch, bytes, st); });
    case GR_K_FAST:
        if (j->merge)
            return merge_cols(j, sms, scratch, bytes, tickets, st);
        return with_op<GR_GPU_OPS, GR_ALL_DTYPES>(
            j->op, j->dtype, last, [&](auto op) { return fast(op, j, sms, scratch, bytes, tickets, st); });
    }
    return cudaErrorNotSupported;
}

int covers(const gr_kjob *j)
{
    if ((gr_k_groups(j) > 1 && (j->axis != 0 || j->rows % gr_k_groups(j))) || j->variant < 0 || j->variant >= GR_K_NVARIANTS || j->op < 0 || j->op >= GR_NOPS || j->dtype < 0 ||
        j->dtype >= GR_NDTYPES || j->axis < GR_AXIS_ALL || j->axis > 1)
        return 0;
    if (j->merge && (j->variant != GR_K_FAST || !gr_op_by_moments(j->op) || j->axis != 0))
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
    return j->axis == GR_AXIS_ALL ? 1 : j->axis == 0 ? gr_k_groups(j) * j->cols : j->rows;
}

/* Does `fast` write j's results narrow (row_out): short rows of 4-byte min, max or arg ops. The
 * kernels' rule (narrow_out) must say the same of every op and dtype: */
static_assert(narrow_out<Min<int>> && narrow_out<Max<float>> && narrow_out<Arg<int, false>> &&
              narrow_out<Arg<float, true>> && narrow_out<NanMin<float>> && narrow_out<NanMax<int>>);
static_assert(!narrow_out<Max<i64>> && !narrow_out<Min<double>> && !narrow_out<Arg<i64, true>> &&
              !narrow_out<Arg<double, false>> && !narrow_out<Sum<int>> && !narrow_out<Sum<float>> &&
              !narrow_out<Mean<float>> && !narrow_out<Prod<int>> && !narrow_out<Sum<float, true>> &&
              !narrow_out<CountNonzero<int>> && !narrow_out<NanMax<double>>);
static_assert(narrow_out<Arg<float, false, true>> && narrow_out<Arg<int, true, true>> && !narrow_out<Ptp<float>> &&
              !narrow_out<Ptp<int>> && !narrow_out<Logic<float, true>> && !narrow_out<Var<float, true>> && !narrow_out<NanMean<float>> &&
              !narrow_out<Prod<float, true>>);
static bool narrow_rows(const gr_kjob *j)
{
    int extreme = j->op == GR_MIN || j->op == GR_MAX || j->op == GR_NANMIN || j->op == GR_NANMAX;
    return short_rows(j) && gr_dtype_size(j->dtype) == 4 && (extreme || gr_op_is_arg(j->op));
}

extern "C" size_t gr_k_state_bytes(const struct gr_kjob *j)
{
    if (narrow_rows(j))
        return gr_op_is_arg(j->op) ? sizeof(arg_wire<int>) : sizeof(int);
    if (gr_op_by_moments(j->op))
        return j->op == GR_NANMEAN ? sizeof(sum_count) : sizeof(var_state);
    return gr_op_is_arg(j->op) ? sizeof(arg_state<i64>) : j->op == GR_PTP ? sizeof(ptp_state<i64>) : sizeof(i64);
}

extern "C" int gr_k_states_dtype(const struct gr_kjob *j)
{
    return narrow_rows(j) ? j->dtype : gr_result_is_int(j->op, j->dtype) ? GR_INT64 : GR_FLOAT64;
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

/* Did j's states leave NaNs out: nanvar's and nanstd's on floats (moments_answer's skip)? */
static bool skips_nan(const gr_kjob *j)
{
    return gr_dtype_is_float(j->dtype) && (j->op == GR_NANVAR || j->op == GR_NANSTD);
}

extern "C" int gr_k_answer(struct gr_kjob *j, int in_dtype)
{
    if (j->variant != GR_K_FAST || (j->axis != 0 && !short_rows(j)) || !gr_op_by_moments(j->op))
        return 0;
    gr_kjob in = *j;
    in.dtype = in_dtype;
    j->answers = 1;
    j->skipped = skips_nan(&in);
    return 1;
}

namespace {
template <class St>
__global__ void k_moments(const St *__restrict__ s, i64 n, int op, int ddof, bool skip, double *__restrict__ out)
{
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (i64)gridDim.x * blockDim.x)
        out[k] = moments_answer(s[k], op, ddof, skip);
}
/* op's answer from the state at p (host) */
double moments_at(const unsigned char *p, int op, int ddof, bool skip)
{
    if (op == GR_NANMEAN) {
        sum_count c;
        memcpy(&c, p, sizeof c);
        return moments_answer(c, op, ddof, skip);
    }
    var_state v;
    memcpy(&v, p, sizeof v);
    return moments_answer(v, op, ddof, skip);
}
} // namespace

extern "C" cudaError_t gr_k_moments(const struct gr_kjob *j, double *out, cudaStream_t st)
{
    if (!gr_op_by_moments(j->op))
        return cudaErrorInvalidValue;
    i64 n = gr_k_nout(j);
    unsigned grid = (unsigned)min(ceil_div(n, 256), (i64)j->sms * 8);
    if (j->op == GR_NANMEAN)
        k_moments<<<grid, 256, 0, st>>>(static_cast<const sum_count *>(j->out), n, j->op, j->ddof, false, out);
    else
        k_moments<<<grid, 256, 0, st>>>(static_cast<const var_state *>(j->out), n, j->op, j->ddof, skips_nan(j), out);
    return cudaGetLastError();
}

extern "C" void gr_k_finish(const struct gr_kjob *j, const void *states, int64_t n, int64_t count,
                            struct gr_result *r, int64_t first)
{
    const unsigned char *p = static_cast<const unsigned char *>(states);
    size_t step = gr_k_state_bytes(j);
    int int_state = gr_result_is_int(j->op, j->dtype), arg = gr_op_is_arg(j->op);
    bool narrow = narrow_rows(j); /* a 4-byte element as read, then (arg ops) a u32 index */
    for (int64_t k = 0; k < n; k++, p += step) {
        if (gr_op_by_moments(j->op)) {
            r->f[first + k] = moments_at(p, j->op, j->ddof, skips_nan(j));
            continue;
        }
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
            r->index[first + k] = u == ~0u ? (int64_t)-1 : (int64_t)u; /* empty: a nanarg op's lane of NaNs */
        } else if (arg) {
            memcpy(&r->index[first + k], p + sizeof(i64), sizeof(i64));
        }
        if (j->op == GR_PTP) { /* the max, then the min; integers wrap as NumPy's do */
            double flo;
            i64 ilo;
            memcpy(&flo, p + sizeof(i64), sizeof flo);
            memcpy(&ilo, p + sizeof(i64), sizeof ilo);
            iv = (i64)((u64)iv - (u64)ilo);
            fv -= flo;
        }
        if (j->op == GR_MEAN)
            r->f[first + k] = fv / (double)count;
        else if (int_state)
            r->i[first + k] = iv;
        else
            r->f[first + k] = fv;
    }
}
