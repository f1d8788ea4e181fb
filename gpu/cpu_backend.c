/* cpu_backend.c: the CPU (OpenMP) backend, the reference semantics of every reduction (products: cpu_matmul.c); one
 * worker thread calls reduce() or matmul() at a time, the OpenMP teams it starts live only inside that call. */
#include "gpu/backend.h"
#include "gpu/cpu_matmul.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GR_INLINE static inline __attribute__((always_inline))

enum variant { V_SEQ, V_REDUCTION, V_CHUNKED, V_STRIDED };

static const struct gr_algo cpu_algos[] = {
    [V_SEQ] = {"cpu_seq", "one thread, plain loop: the reference", GR_ALL_OPS, GR_ALL_DTYPES,
               GR_ALL_AXES},
    [V_REDUCTION] = {"cpu_omp_reduction",
                     "OpenMP parallel for with a declared reduction over accumulators "
                     "(combine order, so float rounding, may vary run to run)",
                     GR_ALL_OPS, GR_ALL_DTYPES, GR_ALL_AXES},
    [V_CHUNKED] = {"cpu_omp_chunked",
                   "each thread one contiguous block, partials combined in thread order "
                   "(deterministic for a given thread count)",
                   GR_ALL_OPS, GR_ALL_DTYPES, GR_ALL_AXES},
    [V_STRIDED] = {"cpu_omp_strided",
                   "thread i takes elements i, i+T, ...: every thread touches every cache "
                   "line, kept for comparison",
                   GR_ALL_OPS, GR_ALL_DTYPES, GR_ALL_AXES},
};
#define NVARIANTS ((int)(sizeof cpu_algos / sizeof cpu_algos[0]))

/* auto runs cpu_seq below this many elements. Forking and joining a team costs 3-5 us and one
 * core reduces at 1-3 ns an element, so threads alone break even near 4-8K elements. But after
 * every region the team spin-waits (libgomp), taking cores from the HTTP threads, the store and
 * the database: small jobs' launch groups of 16-64K elements cost a 2-core server a third of its
 * rate on PostgreSQL, a tenth on SQLite (docs/PERFORMANCE.md, the store). 256K is where a
 * region saves a job hundreds of microseconds; the sizes between were not measured. */
#define AUTO_PARALLEL_MIN (1 << 18)
/* Outputs per stack block of accumulators: bounds the extra memory whatever the shape
 * (a 1 x n axis-0 job has n outputs). */
#define OUT_BLOCK 256
/* Elements of the reduced dimension per iteration of cpu_omp_reduction's loop. */
#define K_BLOCK 4096

/* One output's running state. Which members are live depends on op and on whether the input
 * is float (fl); op/fl/last are stored too because the OpenMP combiner sees only two accs.
 * s and c are not neighbours: side by side, GCC's SLP pass packs them into one vector
 * register and the shuffles halve the speed of float sums. */
struct acc {
    double s;     /* float sum/mean: Neumaier sum s + correction c; float prod/extreme: s; var: mean */
    uint64_t u;   /* integer sum/prod, wrapping modulo 2^64; counts (var: of the values) */
    double c;     /* var: the squared deviations from s, summed (Welford's M2); float ptp: the minimum */
    int64_t v;    /* integer extreme (ptp: the maximum) */
    int64_t w;    /* integer ptp: the minimum */
    int64_t idx;  /* arg ops: index of the extreme within the reduced set, -1 while empty */
    signed char op, fl, last;
};

struct val {
    double f;  /* float inputs */
    int64_t i; /* integer inputs */
};

/* What to compute: output o reduces elements k = 0..len-1 found at o * so + k * sk. */
struct job {
    const void *data;
    int op, dtype, fl, last;
    int64_t nout, len, so, sk;
    int64_t gl, gs; /* axis 0: outputs a group, elements between groups' starts */
    int ddof;
};

/* A piece of work: outputs o0 + i * os (i < no) over k = k0, k0 + ks, ... < k1. */
struct span {
    int64_t o0, no, os, k0, k1, ks;
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Two's complement reading of u without relying on implementation-defined conversion. */
static int64_t u2i(uint64_t u) { return u <= INT64_MAX ? (int64_t)u : -(int64_t)~u - 1; }

static void acc_init(struct acc *a, const struct job *j)
{
    memset(a, 0, sizeof *a);
    a->op = (signed char)j->op;
    a->fl = (signed char)j->fl;
    a->last = (signed char)j->last;
    a->idx = -1;
    if (j->op == GR_PROD || j->op == GR_NANPROD) {
        a->s = 1;
        a->u = 1;
    } else if (j->op == GR_PTP) {
        a->s = -INFINITY, a->c = INFINITY;
        a->v = INT64_MIN, a->w = INT64_MAX;
    } else if (j->op == GR_MIN || j->op == GR_NANMIN) {
        a->s = j->op == GR_MIN ? INFINITY : NAN; /* NaN: no number seen yet (an all-NaN lane's answer) */
        a->v = INT64_MAX;
    } else if (j->op == GR_MAX || j->op == GR_NANMAX) {
        a->s = j->op == GR_MAX ? -INFINITY : NAN;
        a->v = INT64_MIN;
    }
}

/* Neumaier's compensated step: c collects what s + x rounds away, so float64 sums of large
 * arrays keep their accuracy. */
GR_INLINE void neumaier(struct acc *a, double x)
{
    double t = a->s + x;
    a->c += fabs(a->s) >= fabs(x) ? (a->s - t) + x : (x - t) + a->s;
    a->s = t;
}

/* Once s is infinite c turns NaN (inf - inf) while the true result is s itself. */
static double neumaier_total(const struct acc *a) { return isfinite(a->c) ? a->s + a->c : a->s; }

/* Does (x, k) replace a's extreme? NaN is the most extreme value; equal values (-0.0 == +0.0
 * included) go to the lower index, or the higher one with last. */
GR_INLINE int arg_better(const struct acc *a, struct val x, int64_t k, int max, int fl, int last)
{
    if (a->idx < 0)
        return 1;
    int tie = last ? k > a->idx : k < a->idx;
    if (fl) {
        int xn = isnan(x.f), an = isnan(a->s);
        if (xn || an)
            return xn && (!an || tie);
        if (x.f == a->s)
            return tie;
        return max ? x.f > a->s : x.f < a->s;
    }
    if (x.i == a->v)
        return tie;
    return max ? x.i > a->v : x.i < a->v;
}

/* Add element x (index k in the reduced set); inlined with op and fl constant. */
GR_INLINE void acc_add(struct acc *a, struct val x, int64_t k, int op, int fl, int last)
{
    switch (op) {
    case GR_SUM:
    case GR_NANSUM:
        if (fl && !(op == GR_NANSUM && isnan(x.f)))
            neumaier(a, x.f);
        else if (!fl)
            a->u += (uint64_t)x.i;
        break;
    case GR_COUNT_NONZERO:
    case GR_ANY:
    case GR_ALL:
        a->u += fl ? x.f != 0 : x.i != 0; /* a NaN is not 0 */
        break;
    case GR_MEAN:
        neumaier(a, fl ? x.f : (double)x.i);
        break;
    case GR_NANMEAN: /* the numbers' sum, and their count */
        if (!fl || !isnan(x.f))
            neumaier(a, fl ? x.f : (double)x.i), a->u++;
        break;
    case GR_PROD:
    case GR_NANPROD:
        if (fl && !(op == GR_NANPROD && isnan(x.f)))
            a->s *= x.f;
        else if (!fl)
            a->u *= (uint64_t)x.i;
        break;
    case GR_PTP: /* a NaN, once in s and c, stays */
        if (fl) {
            if (isnan(x.f) || x.f > a->s)
                a->s = x.f;
            if (isnan(x.f) || x.f < a->c)
                a->c = x.f;
        } else {
            a->v = x.i > a->v ? x.i : a->v;
            a->w = x.i < a->w ? x.i : a->w;
        }
        break;
    case GR_MIN:
    case GR_MAX:
        if (fl) {
            /* a NaN, once in s, stays: no comparison with it is true */
            if (isnan(x.f) || (op == GR_MIN ? x.f < a->s : x.f > a->s))
                a->s = x.f;
        } else if (op == GR_MIN ? x.i < a->v : x.i > a->v) {
            a->v = x.i;
        }
        break;
    case GR_NANMIN:
    case GR_NANMAX:
        if (fl) {
            if (!isnan(x.f) && (isnan(a->s) || (op == GR_NANMIN ? x.f < a->s : x.f > a->s)))
                a->s = x.f;
        } else if (op == GR_NANMIN ? x.i < a->v : x.i > a->v) {
            a->v = x.i;
        }
        break;
    case GR_ARGMIN:
    case GR_ARGMAX:
    case GR_NANARGMIN:
    case GR_NANARGMAX:
        if ((op == GR_NANARGMIN || op == GR_NANARGMAX) && fl && isnan(x.f))
            break; /* the nan-ops take the numbers alone */
        if (arg_better(a, x, k, op == GR_ARGMAX || op == GR_NANARGMAX, fl, last)) {
            a->s = x.f;
            a->v = x.i;
            a->idx = k;
        }
        break;
    case GR_VAR:
    case GR_STD:
    case GR_NANVAR:
    case GR_NANSTD: { /* Welford: one pass, no sum of squares to cancel */
        if (fl && (op == GR_NANVAR || op == GR_NANSTD) && isnan(x.f))
            break;
        double v = fl ? x.f : (double)x.i, d = v - a->s;
        a->u++;
        a->s += d / (double)a->u;
        a->c += d * (v - a->s);
        break;
    }
    }
}

/* Fold b (another part of the same output's reduced set) into a. */
static void acc_merge(struct acc *a, const struct acc *b)
{
    switch (a->op) {
    case GR_SUM:
    case GR_NANSUM:
    case GR_MEAN:
    case GR_NANMEAN:
        if (a->fl || a->op == GR_MEAN || a->op == GR_NANMEAN) {
            neumaier(a, b->s);
            a->c += b->c;
        }
        if ((!a->fl && a->op != GR_MEAN) || a->op == GR_NANMEAN)
            a->u += b->u; /* nanmean: its count too */
        break;
    case GR_COUNT_NONZERO:
    case GR_ANY:
    case GR_ALL:
        a->u += b->u;
        break;
    case GR_PROD:
    case GR_NANPROD:
        if (a->fl)
            a->s *= b->s;
        else
            a->u *= b->u;
        break;
    case GR_PTP:
        if (a->fl) { /* a NaN on either side stays */
            if (!isnan(a->s) && (isnan(b->s) || b->s > a->s))
                a->s = b->s;
            if (!isnan(a->c) && (isnan(b->c) || b->c < a->c))
                a->c = b->c;
        } else {
            a->v = b->v > a->v ? b->v : a->v;
            a->w = b->w < a->w ? b->w : a->w;
        }
        break;
    case GR_VAR:
    case GR_STD:
    case GR_NANVAR:
    case GR_NANSTD: { /* Chan et al.: two parts' counts, means and M2 into one */
        if (!b->u)
            break;
        double n = (double)(a->u + b->u), d = b->s - a->s;
        a->c += b->c + d * d * ((double)a->u * (double)b->u / n);
        a->s += d * ((double)b->u / n);
        a->u += b->u;
        break;
    }
    default: /* min, max and the arg ops: b's extreme is one more candidate */
        if (!gr_op_is_arg(a->op) || b->idx >= 0)
            acc_add(a, (struct val){b->s, b->v}, b->idx, a->op, a->fl, a->last);
        break;
    }
}

/* The originals handed to the reduction clause hold the identity, so copying them is the
 * initialiser. Combine order is up to OpenMP: indices keep arg ties right whatever it is. */
#pragma omp declare reduction(gr_acc : struct acc : acc_merge(&omp_out, &omp_in)) \
    initializer(omp_priv = omp_orig)

static void acc_finish(const struct acc *a, struct gr_result *r, int64_t o, const struct job *j)
{
    int64_t len = j->len;
    switch (a->op) {
    case GR_VAR:
    case GR_STD:
    case GR_NANVAR:
    case GR_NANSTD: { /* no degrees of freedom left: var and std M2 / 0 (inf or NaN), the nan-ops NaN, as
                       * NumPy gives them (with a warning) */
        int nan_op = a->fl && (a->op == GR_NANVAR || a->op == GR_NANSTD); /* on integers, var and std */
        double dof = (int64_t)a->u > j->ddof ? (double)((int64_t)a->u - j->ddof) : nan_op ? NAN : 0.0;
        double var = a->c / dof;
        r->f[o] = a->op == GR_STD || a->op == GR_NANSTD ? sqrt(var) : var;
        break;
    }
    case GR_NANMEAN: /* no numbers: 0 / 0, NaN, as NumPy gives */
        r->f[o] = neumaier_total(a) / (double)a->u;
        break;
    case GR_PTP:
        if (a->fl)
            r->f[o] = a->s - a->c;
        else
            r->i[o] = u2i((uint64_t)a->v - (uint64_t)a->w); /* wraps as NumPy's does */
        break;
    case GR_SUM:
    case GR_NANSUM:
        if (a->fl)
            r->f[o] = neumaier_total(a);
        else
            r->i[o] = u2i(a->u);
        break;
    case GR_COUNT_NONZERO:
        r->i[o] = u2i(a->u);
        break;
    case GR_ANY:
        r->i[o] = a->u > 0;
        break;
    case GR_ALL:
        r->i[o] = a->u == (uint64_t)len;
        break;
    case GR_MEAN:
        r->f[o] = neumaier_total(a) / (double)len;
        break;
    case GR_PROD:
    case GR_NANPROD:
        if (a->fl)
            r->f[o] = a->s;
        else
            r->i[o] = u2i(a->u);
        break;
    default:
        if (a->fl)
            r->f[o] = a->s;
        else
            r->i[o] = a->v;
        if (r->index)
            r->index[o] = a->idx;
        break;
    }
}

/* Little-endian element e; memcpy because a body buffer need not be aligned. */
GR_INLINE struct val load(const void *data, int64_t e, int dtype)
{
    const char *p = data;
    struct val v = {0, 0};
    switch (dtype) {
    case GR_INT32: {
        int32_t x;
        memcpy(&x, p + e * 4, 4);
        v.i = x;
        break;
    }
    case GR_INT64:
        memcpy(&v.i, p + e * 8, 8);
        break;
    case GR_FLOAT32: {
        float x;
        memcpy(&x, p + e * 4, 4);
        v.f = x;
        break;
    }
    case GR_FLOAT64:
        memcpy(&v.f, p + e * 8, 8);
        break;
    }
    return v;
}

/* The only loops over elements, into accumulators a[0..s.no). */
GR_INLINE void tile_as(const struct job *j, struct acc *a, struct span s, int op, int dtype)
{
    int fl = gr_dtype_is_float(dtype);
    if (j->sk == 1) { /* each output's elements are contiguous: keep its acc in registers */
        for (int64_t i = 0; i < s.no; i++) {
            int64_t base = (s.o0 + i * s.os) * j->so;
            struct acc x = a[i];
            for (int64_t k = s.k0; k < s.k1; k += s.ks)
                acc_add(&x, load(j->data, base + k, dtype), k, op, fl, j->last);
            a[i] = x;
        }
    } else { /* axis 0: walk each row across the outputs so memory is read in order */
        for (int64_t i0 = 0; i0 < s.no; i0 += OUT_BLOCK) {
            int64_t n = min64(OUT_BLOCK, s.no - i0), at[OUT_BLOCK];
            for (int64_t i = 0; i < n; i++) { /* output o is column o % gl of group o / gl */
                int64_t o = s.o0 + (i0 + i) * s.os;
                at[i] = o / j->gl * j->gs + o % j->gl * j->so;
            }
            for (int64_t k = s.k0; k < s.k1; k += s.ks)
                for (int64_t i = 0; i < n; i++)
                    acc_add(&a[i0 + i], load(j->data, k * j->sk + at[i], dtype), k, op, fl, j->last);
        }
    }
}

/* One switch per span hands tile_as constant op and dtype, so each of the 44 inlined copies
 * keeps only its own arithmetic in the inner loop. */
static void run_tile(const struct job *j, struct acc *a, struct span s)
{
#define GR_CASE(op, dt)                                                                            \
    case (op) * GR_NDTYPES + (dt):                                                                 \
        tile_as(j, a, s, op, dt);                                                                  \
        return;
#define GR_CASES(op) GR_CASE(op, GR_INT32) GR_CASE(op, GR_INT64) GR_CASE(op, GR_FLOAT32) GR_CASE(op, GR_FLOAT64)
    switch (j->op * GR_NDTYPES + j->dtype) {
        GR_CASES(GR_SUM)
        GR_CASES(GR_PROD)
        GR_CASES(GR_MIN)
        GR_CASES(GR_MAX)
        GR_CASES(GR_MEAN)
        GR_CASES(GR_ARGMIN)
        GR_CASES(GR_ARGMAX)
        GR_CASES(GR_NANSUM)
        GR_CASES(GR_NANMIN)
        GR_CASES(GR_NANMAX)
        GR_CASES(GR_COUNT_NONZERO)
        GR_CASES(GR_VAR)
        GR_CASES(GR_STD)
        GR_CASES(GR_NANMEAN)
        GR_CASES(GR_NANPROD)
        GR_CASES(GR_NANVAR)
        GR_CASES(GR_NANSTD)
        GR_CASES(GR_NANARGMIN)
        GR_CASES(GR_NANARGMAX)
        GR_CASES(GR_PTP)
        GR_CASES(GR_ANY)
        GR_CASES(GR_ALL)
    }
#undef GR_CASES
#undef GR_CASE
}

/* Outputs o0 + i * os (i < no <= OUT_BLOCK), each over its whole reduced set, into r. */
static void out_block(const struct job *j, struct gr_result *r, int64_t o0, int64_t no, int64_t os)
{
    struct acc a[OUT_BLOCK];
    for (int64_t i = 0; i < no; i++)
        acc_init(&a[i], j);
    run_tile(j, a, (struct span){o0, no, os, 0, j->len, 1});
    for (int64_t i = 0; i < no; i++)
        acc_finish(&a[i], r, o0 + i * os, j);
}

/* Thread t of nt's contiguous share [*start, *end) of 0..len-1. */
static void share(int64_t len, int t, int nt, int64_t *start, int64_t *end)
{
    int64_t q = len / nt, rem = len % nt;
    *start = t * q + min64(t, rem);
    *end = *start + q + (t < rem);
}

/* Thread t of nt computes its outputs whole: a contiguous range, or t, t + nt, ... */
static void out_share(const struct job *j, struct gr_result *r, int t, int nt, int strided)
{
    int64_t first, count, step = strided ? nt : 1;
    if (strided) {
        first = t;
        count = t < j->nout ? (j->nout - 1 - t) / nt + 1 : 0;
    } else {
        int64_t end;
        share(j->nout, t, nt, &first, &end);
        count = end - first;
    }
    for (int64_t i = 0; i < count; i += OUT_BLOCK)
        out_block(j, r, first + i * step, min64(OUT_BLOCK, count - i), step);
}

/* Thread t of nt reduces its part of every output's reduced set into part[0..nout). */
static void in_share(const struct job *j, struct acc *part, int t, int nt, int strided)
{
    int64_t k0 = t, k1 = j->len, ks = nt;
    if (!strided) {
        share(j->len, t, nt, &k0, &k1);
        ks = 1;
    }
    for (int64_t o = 0; o < j->nout; o++)
        acc_init(&part[o], j);
    run_tile(j, part, (struct span){0, j->nout, 1, k0, k1, ks});
}

/* Many outputs: threads split them and never share an accumulator. */
static void split_outputs(const struct job *j, enum variant v, int nthreads, struct gr_result *r)
{
    if (v == V_REDUCTION) {
        /* nothing to reduce across threads: the clause's variant is a plain parallel for */
        int64_t blk = min64(OUT_BLOCK, (j->nout + nthreads - 1) / nthreads);
        int64_t nblk = (j->nout + blk - 1) / blk;
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (int64_t b = 0; b < nblk; b++)
            out_block(j, r, b * blk, min64(blk, j->nout - b * blk), 1);
        return;
    }
#pragma omp parallel num_threads(nthreads)
    out_share(j, r, omp_get_thread_num(), omp_get_num_threads(), v == V_STRIDED);
}

/* Few outputs (whole array, few rows or columns): threads split each reduced set and their
 * partials are combined. part holds nthreads * nout accumulators. */
static void split_inner(const struct job *j, enum variant v, int nthreads, struct acc *part,
                        struct gr_result *r)
{
    if (v == V_REDUCTION) {
        int64_t nblk = (j->len + K_BLOCK - 1) / K_BLOCK, nout = j->nout;
        for (int64_t o = 0; o < nout; o++)
            acc_init(&part[o], j);
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(gr_acc : part[0:nout])
        for (int64_t b = 0; b < nblk; b++)
            run_tile(j, part, (struct span){0, nout, 1, b * K_BLOCK, min64(j->len, (b + 1) * K_BLOCK), 1});
    } else {
        int used = 1;
#pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num();
            if (t == 0)
                used = omp_get_num_threads(); /* the runtime may grant fewer than asked */
            in_share(j, part + t * j->nout, t, omp_get_num_threads(), v == V_STRIDED);
        }
        for (int t = 1; t < used; t++)
            for (int64_t o = 0; o < j->nout; o++)
                acc_merge(&part[o], &part[t * j->nout + o]);
    }
    for (int64_t o = 0; o < j->nout; o++)
        acc_finish(&part[o], r, o, j);
}

static int compute(const struct job *j, enum variant v, struct gr_result *r, struct gr_err *e)
{
    int nthreads = omp_get_max_threads();
    if (v == V_SEQ || nthreads == 1) {
        out_share(j, r, 0, 1, 0);
        return GR_OK;
    }
    /* four outputs per thread balance well enough; fewer leave threads idle */
    if (j->nout >= 4 * (int64_t)nthreads) {
        split_outputs(j, v, nthreads, r);
        return GR_OK;
    }
    /* nout < 4 * nthreads here, so the product cannot overflow */
    struct acc *part = malloc((size_t)nthreads * (size_t)j->nout * sizeof *part);
    if (!part)
        return gr_fail(e, GR_ENOMEM, NULL, "out of host memory for %d partial results", nthreads);
    split_inner(j, v, nthreads, part, r);
    free(part);
    return GR_OK;
}

static int cpu_reduce(struct gr_backend *b, const struct gr_reduce_req *req, struct gr_result *r,
                      struct gr_timings *t, char algo_used[32], struct gr_err *e)
{
    memset(r, 0, sizeof *r);
    if (req->op < 0 || req->op >= GR_NOPS || req->dtype < 0 || req->dtype >= GR_NDTYPES ||
        req->axis < GR_AXIS_ALL || req->axis > 1 || !req->data)
        return gr_fail(e, GR_EINVAL, NULL, "invalid reduction request (op %d, dtype %d, axis %d)",
                       req->op, req->dtype, req->axis);
    size_t n, bytes;
    if (req->rows < 1 || req->cols < 1 || gr_mul_size((size_t)req->rows, (size_t)req->cols, &n) ||
        gr_mul_size(n, gr_dtype_size(req->dtype), &bytes) || n > INT64_MAX)
        return gr_fail(e, GR_EUNPROC, "shape", "cannot reduce a %lld x %lld array",
                       (long long)req->rows, (long long)req->cols);
    int rc = gr_backend_check(b, req->algorithm, req->op, req->dtype, req->axis, e);
    if (rc != GR_OK)
        return rc;

    enum variant v = n < AUTO_PARALLEL_MIN ? V_SEQ : V_CHUNKED;
    for (int i = 0; req->algorithm && i < NVARIANTS; i++)
        if (strcmp(req->algorithm, cpu_algos[i].name) == 0)
            v = (enum variant)i;

    /* output o reduces elements o * so + k * sk, k < len (axis 0: o / gl * gs + o % gl * so + k * sk) */
    struct job j = {.data = req->data, .op = req->op, .dtype = req->dtype,
                    .fl = gr_dtype_is_float(req->dtype), .last = req->ties_last != 0,
                    .nout = 1, .len = (int64_t)n, .so = 0, .sk = 1, .gl = 1, .ddof = req->ddof};
    int64_t groups = req->groups > 1 ? req->groups : 1;
    if (groups > 1 && (req->axis != 0 || req->rows % groups))
        return gr_fail(e, GR_EINVAL, NULL, "%lld groups of a %lld x %lld reduction along axis %d", (long long)groups,
                       (long long)req->rows, (long long)req->cols, req->axis);
    if (req->axis == 0) {
        j.nout = groups * req->cols; /* at most n: no overflow */
        j.len = req->rows / groups;
        j.so = req->cols == 1 ? j.len : 1; /* one column: each group's elements in a row */
        j.sk = req->cols;
        j.gl = req->cols;
        j.gs = j.len * req->cols;
    } else if (req->axis == 1) {
        j.nout = req->rows;
        j.len = req->cols;
        j.so = req->cols;
    }

    rc = gr_result_alloc(r, j.nout, gr_result_is_int(req->op, req->dtype), gr_op_is_arg(req->op), e);
    if (rc != GR_OK)
        return rc;
    double t0 = gr_mono_ms();
    rc = compute(&j, v, r, e);
    if (rc != GR_OK) {
        gr_result_free(r);
        return rc;
    }
    if ((rc = gr_backend_nanarg_check(req->op, r, e)) != GR_OK)
        return rc;
    t->kernel = gr_mono_ms() - t0;
    t->h2d = t->d2h = 0;
    snprintf(algo_used, 32, "%s", cpu_algos[v].name);
    return GR_OK;
}

static int cpu_matmul(struct gr_backend *b, int lane, const struct gr_mm_req *req, struct gr_timings *t,
                      char algo_used[32], struct gr_err *e)
{
    (void)b;
    (void)lane;
    double t0 = gr_mono_ms();
    int rc = gr_mm_cpu(req, algo_used, e);
    t->kernel = gr_mono_ms() - t0;
    t->h2d = t->d2h = t->overlap = 0;
    return rc;
}

static void cpu_destroy(struct gr_backend *b) { free(b); }

/* "model name" from /proc/cpuinfo (x86), else a generic name with the thread count. */
static void cpu_name(char *out, size_t size, int threads)
{
    snprintf(out, size, "CPU (%d threads)", threads);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        char *s = colon + 1 + strspn(colon + 1, " \t");
        s[strcspn(s, "\n")] = '\0';
        if (*s)
            snprintf(out, size, "%s", s);
        break;
    }
    fclose(f);
}

struct gr_backend *gr_cpu_backend_new(void)
{
    struct gr_backend *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    snprintf(b->name, sizeof b->name, "cpu");
    b->algos = cpu_algos;
    b->nalgos = NVARIANTS;
    b->info.sms = omp_get_max_threads();
    b->info.streams = 0;
    b->info.lanes = 1; /* its OpenMP team uses every core already */
    cpu_name(b->info.name, sizeof b->info.name, b->info.sms);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t mem;
    if (pages > 0 && page > 0 && gr_mul_size((size_t)pages, (size_t)page, &mem) == 0 && mem <= INT64_MAX)
        b->info.memory_bytes = (int64_t)mem;
    b->reduce = cpu_reduce;
    b->mm_algos = gr_mm_cpu_algos;
    b->nmm_algos = GR_MM_CPU_NVARIANTS;
    b->matmul = cpu_matmul;
    b->destroy = cpu_destroy;
    return b;
}
