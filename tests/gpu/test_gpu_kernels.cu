/* test_gpu_kernels.cu: every kernel variant x op x dtype x axis it claims, called through its
 * launcher on fresh random data with poisoned outputs, against the CPU backend's cpu_seq.
 * Single-threaded. GR_TEST_SMALL=1: small sizes only (for compute-sanitizer); GR_TEST_VARIANTS=a,b:
 * only those variants; GR_TEST_OPS=a,b: only those ops. Exit 77: no GPU. */
#include "gpu/kernels/reduce.h"

#include "gr_testdata.h"

#include <cuda_runtime.h>

#include <set>
#include <vector>

#define POISON 0xa5 /* as float64 about -1e-127, as int64 and index negative: never a result */

struct dev_buf {
    void *p = nullptr;
    size_t bytes = 0;
    void release()
    {
        cudaFree(p);
        p = nullptr;
        bytes = 0;
    }
    bool fit(size_t want)
    {
        if (bytes >= want)
            return true;
        release();
        if (cudaMalloc(&p, want) != cudaSuccess)
            return false;
        bytes = want;
        return true;
    }
};

struct tally {
    long pass = 0, fail = 0;
};

static struct gr_backend *cpu;
static dev_buf d_in, d_out, d_scratch;
static unsigned *d_tickets;
static int sms;
static tally per_variant[GR_K_NVARIANTS];
static long failures_printed;
static struct gr_rng rng;

static const char *axis_name(int axis) { return axis == GR_AXIS_ALL ? "null" : axis == 0 ? "0" : "1"; }

struct kase {
    int variant, op, dtype, axis, ties_last;
    int64_t rows, cols;
    int mode, special;
};

static void report(const kase &c, const char *what)
{
    if (failures_printed++ < 40)
        fprintf(stderr, "FAIL %s %s %s axis=%s ties=%s shape=%lldx%lld mode=%s special=%d: %s\n",
                gr_k_algos[c.variant].name, gr_op_name(c.op), gr_dtype_name(c.dtype), axis_name(c.axis),
                c.ties_last ? "last" : "first", (long long)c.rows, (long long)c.cols,
                c.mode == GR_FILL_EXACT ? "exact" : "real", c.special, what);
}

/* Launch the job once on poisoned outputs and scratch; states copied back into host. */
static bool launch(const kase &c, gr_kjob *j, size_t scratch_bytes, std::vector<unsigned char> &host)
{
    size_t out_bytes = (size_t)gr_k_nout(j) * gr_k_state_bytes(j);
    if (!d_out.fit(out_bytes) || !d_scratch.fit(scratch_bytes ? scratch_bytes : 1)) {
        report(c, "out of device memory for outputs or scratch");
        return false;
    }
    cudaMemset(d_out.p, POISON, out_bytes);
    cudaMemset(d_scratch.p, POISON, d_scratch.bytes);
    j->out = d_out.p;
    cudaError_t err = gr_k_launch(j, d_scratch.p, d_scratch.bytes, d_tickets, 0);
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        report(c, cudaGetErrorString(err));
        cudaGetLastError();
        return false;
    }
    host.resize(out_bytes);
    return cudaMemcpy(host.data(), d_out.p, out_bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* Do the states a kernel left (host copies) give the reference's results, within tol? A nanarg
 * op over a lane of NaNs alone (nan_lane) must leave that lane empty. */
static bool agrees(const kase &c, const gr_kjob *j, const std::vector<unsigned char> &states, int64_t count,
                   bool nan_lane, const gr_result *want, const double *tol)
{
    struct gr_result got;
    struct gr_err e;
    if (gr_result_alloc(&got, gr_k_nout(j), gr_result_is_int(j->op, j->dtype), gr_op_is_arg(j->op), &e) != GR_OK) {
        report(c, e.msg);
        return false;
    }
    gr_k_finish(j, states.data(), got.n, count, &got, 0);
    bool ok = true;
    int64_t o;
    if (nan_lane) {
        bool empty = false;
        for (int64_t k = 0; k < got.n; k++)
            empty |= got.index[k] < 0;
        if (!empty) {
            report(c, "the reference found a lane of NaNs alone; every lane here has an index");
            ok = false;
        }
    } else if ((o = gr_result_diff(&got, want, tol)) >= 0) {
        char what[64];
        snprintf(what, sizeof what, "output %lld differs%s", (long long)o, j->op != c.op ? " (answers)" : "");
        report(c, what);
        if (failures_printed <= 40) {
            gr_result_print(stderr, "  gpu", &got, o);
            gr_result_print(stderr, "  cpu", want, o);
        }
        ok = false;
    }
    gr_result_free(&got);
    return ok;
}

static void run_case(const kase &c)
{
    int64_t n = c.rows * c.cols;
    size_t in_bytes = (size_t)n * gr_dtype_size(c.dtype);
    void *data = malloc(in_bytes);
    tally &t = per_variant[c.variant];
    if (!data || !d_in.fit(in_bytes)) {
        report(c, "out of memory for the input");
        t.fail++;
        free(data);
        return;
    }
    gr_fill(data, c.dtype, c.op, n, c.mode, c.special, &rng);

    struct gr_reduce_req q = {c.op, c.dtype, c.axis, c.ties_last, c.rows, c.cols, data, "cpu_seq", 0, NULL, 0, 0, 0, NULL, 0};
    struct gr_result want = {};
    struct gr_timings tm;
    struct gr_err e;
    char used[32];
    int rc_c = cpu->reduce(cpu, &q, &want, &tm, used, &e);
    /* a nanarg op over a lane of NaNs alone: the reference refuses it, the kernel leaves it empty */
    bool nan_lane = rc_c == GR_EUNPROC && (c.op == GR_NANARGMIN || c.op == GR_NANARGMAX);
    bool ok = rc_c == GR_OK || nan_lane;
    if (!ok)
        report(c, e.msg);
    double *tol = rc_c == GR_OK && gr_needs_tol(c.op, c.dtype, c.mode) ? gr_tolerances(cpu, &q, 1e-11) : nullptr;

    gr_kjob j = {c.variant, c.op, c.dtype, c.axis, c.ties_last, c.rows, c.cols, d_in.p, nullptr, sms};
    size_t scratch_bytes = 0;
    if (ok && gr_k_scratch(&j, &scratch_bytes, &e) != GR_OK) {
        report(c, e.msg);
        ok = false;
    }
    std::vector<unsigned char> states, again;
    ok = ok && cudaMemcpy(d_in.p, data, in_bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
         launch(c, &j, scratch_bytes, states);
    int64_t count = c.axis == GR_AXIS_ALL ? n : c.axis == 0 ? c.rows : c.cols;
    ok = ok && agrees(c, &j, states, count, nan_lane, &want, tol);
    /* an op by moments's answers written in place of its states (gr_k_answer) agree as well */
    gr_kjob a = j;
    if (ok && !nan_lane && gr_k_answer(&a, c.dtype)) {
        gr_kjob f = a; /* read back as float64 sums are */
        f.op = GR_SUM, f.dtype = GR_FLOAT64, f.answers = 0;
        ok = launch(c, &a, scratch_bytes, again) && agrees(c, &f, again, count, false, &want, tol);
    }
    /* the production and reference kernels promise run-to-run identical bits */
    if (ok && (c.variant == GR_K_FAST || c.variant == GR_K_CUB)) {
        ok = launch(c, &j, scratch_bytes, again) && again == states;
        if (!ok)
            report(c, "a second run gave different bits");
    }
    if (want.n)
        gr_result_free(&want);
    free(tol);
    free(data);
    (ok ? t.pass : t.fail)++;
}

/* Shapes for one size: along the reduced axis, and many short outputs. */
static std::vector<std::pair<int64_t, int64_t>> shapes(int axis, int64_t s)
{
    if (axis == GR_AXIS_ALL)
        return s > 2 ? std::vector<std::pair<int64_t, int64_t>>{{1, s}, {2, s / 2 + 1}}
                     : std::vector<std::pair<int64_t, int64_t>>{{1, s}};
    if (axis == 1) {
        int64_t r = (1 << 21) / s;
        return {{r < 1 ? 1 : r > 40 ? 40 : r, s}, {s, 5}};
    }
    return {{s, 9}, {4, s}};
}

static int case_no;

/* Is name an item of the comma-separated list? */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return true;
        p += n + (end != nullptr);
    }
    return false;
}

/* Is op among those GR_TEST_OPS names (all when it is unset)? */
static bool op_tested(int op)
{
    const char *only = getenv("GR_TEST_OPS");
    return !(only && *only) || listed(only, gr_op_name(op));
}

static void sweep(int variant, const std::vector<int64_t> &sizes)
{
    const struct gr_algo *a = &gr_k_algos[variant];
    for (int op = 0; op < GR_NOPS; op++)
        for (int last = 0; last <= gr_op_is_arg(op); last++)
            for (int dt = 0; dt < GR_NDTYPES; dt++)
                for (int axis = GR_AXIS_ALL; axis <= 1; axis++) {
                    if (!(a->ops & (1u << op)) || !(a->dtypes & (1u << dt)) || !(a->axes & GR_AXIS_BIT(axis)) ||
                        !op_tested(op))
                        continue;
                    for (int64_t s : sizes)
                        for (auto sh : shapes(axis, s)) {
                            case_no++;
                            kase c = {variant, op, dt, axis, last, sh.first, sh.second, case_no % 2, case_no % GR_NSPECIALS};
                            run_case(c);
                        }
                }
}

/* fast's kernels switch on the row length (lanes per row, the 16-byte vector tiles with loads
 * ahead and without, one block, the tiles, chunks): every power of two up to 2^13 (a 4-byte arg
 * op's last warp-a-row length) and its neighbours, with a few rows and with a partial last tile,
 * and whole arrays around each switch (GR_TEST_SMALL: a few, for the sanitizers: rows of 16 take
 * the tiles ahead for sums, and for float64 arg ops, of 256 the tiles without, 1024 a warp each). */
static void policy_edges(bool small)
{
    std::set<int64_t> lengths;
    for (int64_t p = 1; p <= 8192; p *= 2)
        if (!small || p == 16 || p == 256 || p == 1024)
            lengths.insert({p - 1, p, p + 1});
    lengths.erase(0);
    for (int op = 0; (GR_GPU_OPS >> op) & 1; op++) /* the ops the GPU runs: all of them */
        for (int last = 0; last <= gr_op_is_arg(op); last++)
            for (int dt = 0; dt < GR_NDTYPES && op_tested(op); dt++)
                for (int64_t cols : lengths)
                    for (int64_t rows : {3, 517}) {
                        case_no++;
                        kase c = {GR_K_FAST, op, dt, 1, last, rows, cols, case_no % 2, case_no % GR_NSPECIALS};
                        run_case(c);
                    }
    /* whole arrays where the block's shape, the tiles' and the split rows take over (16, 32 and
     * 64 KiB, 1 and 64 MiB, for every dtype), and the one block's full tiles of 1, 2 and 4
     * vectors a thread (1024 elements: 1 for 4-byte types, 2 for 8-byte); the sanitizers' small
     * run keeps these and both tile sizes (2^18 + 1 elements of 4 bytes: 512 threads); 3 vectors
     * a thread, no full tile (1536, 3072); tiles whose last is one element or one vector a thread
     * (2^18 + 1, 2^18 + 2048) */
    std::set<int64_t> sizes;
    for (int64_t p : {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 1 << 18, 1 << 23, 1 << 24})
        if (!small || p == 1024 || p == 4096 || p == 16384 || p == 1 << 18)
            sizes.insert({p - 1, p, p + 1});
    if (!small)
        sizes.insert({1536, 3072, (1 << 18) + 1, (1 << 18) + 2048});
    for (int op = 0; (GR_GPU_OPS >> op) & 1; op++)
        for (int last = 0; last <= gr_op_is_arg(op); last++)
            for (int dt = 0; dt < GR_NDTYPES && op_tested(op); dt++)
                for (int64_t n : sizes) {
                    case_no++;
                    kase c = {GR_K_FAST, op, dt, GR_AXIS_ALL, last, 1, n, case_no % 2, case_no % GR_NSPECIALS};
                    run_case(c);
                }
}

/* The comparison itself must be able to fail. */
static bool comparison_fails_on_a_difference()
{
    struct gr_result a, b;
    struct gr_err e;
    if (gr_result_alloc(&a, 2, 0, 1, &e) || gr_result_alloc(&b, 2, 0, 1, &e))
        return false;
    a.f[0] = b.f[0] = 1.5;
    a.f[1] = b.f[1] = NAN;
    a.index[0] = b.index[0] = 3;
    a.index[1] = b.index[1] = 4;
    bool same = gr_result_diff(&a, &b, nullptr) < 0;
    b.index[1] = 5;
    bool index_seen = gr_result_diff(&a, &b, nullptr) == 1;
    b.index[1] = 4;
    b.f[0] = 1.5000001;
    bool value_seen = gr_result_diff(&a, &b, nullptr) == 0;
    gr_result_free(&a);
    gr_result_free(&b);
    return same && index_seen && value_seen;
}

int main(void)
{
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "no device");
        return 77;
    }
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cpu = gr_cpu_backend_new();
    if (!cpu || cudaMalloc((void **)&d_tickets, GR_K_COUNTERS * sizeof(unsigned)) != cudaSuccess) {
        fprintf(stderr, "FAIL: set-up\n");
        return 1;
    }
    cudaMemset(d_tickets, 0, GR_K_COUNTERS * sizeof(unsigned));
    uint64_t seed = gr_test_seed();
    rng.s = seed;
    printf("seed %llu (GR_TEST_SEED reproduces)\n", (unsigned long long)seed);
    if (!comparison_fails_on_a_difference()) {
        fprintf(stderr, "FAIL: the comparison does not detect differences\n");
        return 1;
    }

    const char *small_env = getenv("GR_TEST_SMALL");
    bool small = small_env && *small_env && *small_env != '0';
    std::vector<int64_t> sizes = small ? std::vector<int64_t>{1, 33, 1025, 65537}
                                       : std::vector<int64_t>{1, 2, 31, 32, 33, 1023, 1024, 1025, 65537, (1 << 20) + 7};
    const char *only = getenv("GR_TEST_VARIANTS");
    for (int v = 0; v < GR_K_NVARIANTS; v++) {
        if (only && *only && !listed(only, gr_k_algos[v].name))
            continue;
        double t0 = gr_mono_ms();
        sweep(v, sizes);
        if (v == GR_K_FAST)
            policy_edges(small);
        printf("%-8s %5ld passed %3ld failed  (%.1f s)\n", gr_k_algos[v].name, per_variant[v].pass,
               per_variant[v].fail, (gr_mono_ms() - t0) / 1e3);
        fflush(stdout);
    }
    const char *ops = getenv("GR_TEST_OPS");
    if (!small && !(only && *only) && !(ops && *ops)) { /* a few 2^27-element jobs, one row of 2^28, 2^30 and 2^30 + 1 */
        const int64_t big = 1 << 27;
        const kase bigs[] = {
            {GR_K_FAST, GR_SUM, GR_FLOAT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_ARGMAX, GR_FLOAT64, GR_AXIS_ALL, 1, 1, big, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_MIN, GR_FLOAT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_EXACT, GR_SPECIAL_NAN},
            {GR_K_FAST, GR_MAX, GR_INT32, 1, 0, 2, big / 2, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_SUM, GR_FLOAT32, 0, 0, big / 9, 9, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_ARGMIN, GR_INT32, 0, 0, big / 9, 9, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_SUM, GR_INT32, 1, 0, 1, 2 * big, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_MAX, GR_FLOAT32, GR_AXIS_ALL, 0, 1, 8 * big, GR_FILL_EXACT, GR_SPECIAL_NAN},
            {GR_K_FAST, GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, 8 * big + 1, GR_FILL_REAL, GR_SPECIAL_NONE},
            /* short rows: more tiles than the grid has warps, so each warp takes several, its
             * loads ahead (sums to 32 vectors a row, arg ops at 8) or not, and a last tile that
             * is partial */
            {GR_K_FAST, GR_ARGMAX, GR_FLOAT32, 1, 0, big / 16, 16, GR_FILL_EXACT, GR_SPECIAL_NAN},
            {GR_K_FAST, GR_SUM, GR_FLOAT64, 1, 0, big / 64, 64, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_ARGMIN, GR_FLOAT32, 1, 1, big / 32 + 7, 32, GR_FILL_EXACT, GR_SPECIAL_NAN},
            {GR_K_FAST, GR_ARGMAX, GR_FLOAT64, 1, 0, big / 128 + 3, 128, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_FAST, GR_MAX, GR_INT32, 1, 0, big / 512 + 1, 512, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_CUB, GR_SUM, GR_FLOAT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_HARRIS7, GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_REAL, GR_SPECIAL_NONE},
            {GR_K_HARRIS1, GR_SUM, GR_FLOAT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_EXACT, GR_SPECIAL_NONE},
            {GR_K_SHFL, GR_MAX, GR_FLOAT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_EXACT, GR_SPECIAL_NAN},
            {GR_K_REDUX, GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, big, GR_FILL_REAL, GR_SPECIAL_NONE},
        };
        long before = 0, after = 0;
        for (const tally &t : per_variant)
            before += t.pass;
        double t0 = gr_mono_ms();
        for (const kase &c : bigs)
            run_case(c);
        for (const tally &t : per_variant)
            after += t.pass;
        printf("big      %5ld passed of %zu  (%.1f s)\n", after - before, sizeof bigs / sizeof bigs[0],
               (gr_mono_ms() - t0) / 1e3);
    }

    std::vector<unsigned> tickets(GR_K_COUNTERS);
    cudaMemcpy(tickets.data(), d_tickets, GR_K_COUNTERS * sizeof(unsigned), cudaMemcpyDeviceToHost);
    long dirty = 0;
    for (unsigned k : tickets)
        dirty += k != 0;
    long pass = 0, fail = dirty != 0;
    for (const tally &t : per_variant) {
        pass += t.pass;
        fail += t.fail;
    }
    if (dirty)
        fprintf(stderr, "FAIL: %ld tickets were left non-zero\n", dirty);
    printf("%ld cases passed, %ld failed\n", pass, fail);
    cpu->destroy(cpu);
    /* so that compute-sanitizer's --leak-check full reports only what the kernels' callers leak */
    d_in.release();
    d_out.release();
    d_scratch.release();
    cudaFree(d_tickets);
    return fail ? 1 : 0;
}
