/* test_gpu_backend.c: the GPU backend through struct gr_backend on GPU 0: discovery, every op x
 * dtype x axis against cpu_seq, staging across streams, errors and recovery, timings.
 * Single-threaded; exit 77 (skipped) where there is no GPU. */
#include "gpu/backend.h"
#include "gr_testdata.h"


static struct gr_backend *gpu, *cpu;
static struct gr_rng rng;

/* Run q (its data filled here, offset bytes into a fresh buffer) on the GPU and on cpu_seq and
 * compare; out_gpu (if set) receives the GPU result, which the caller frees. */
static void against_cpu(struct gr_reduce_req q, int mode, int special, size_t offset, struct gr_result *out_gpu)
{
    int64_t n = q.rows * q.cols;
    size_t bytes = (size_t)n * gr_dtype_size(q.dtype);
    char *buf = malloc(bytes + offset);
    CHECK(buf != NULL, "out of host memory");
    if (!buf)
        return;
    gr_fill(buf + offset, q.dtype, q.op, n, mode, special, &rng);
    q.data = buf + offset;
    struct gr_reduce_req c = q;
    c.algorithm = "cpu_seq";
    struct gr_result want, got;
    struct gr_timings t = {0}, tc = {0};
    struct gr_err e = {0}, ec = {0};
    char used[32] = "", used_c[32];
    int rc_c = cpu->reduce(cpu, &c, &want, &tc, used_c, &ec);
    int rc = gpu->reduce(gpu, &q, &got, &t, used, &e);
    if (rc_c == GR_EUNPROC && (q.op == GR_NANARGMIN || q.op == GR_NANARGMAX)) { /* a lane of NaNs alone */
        CHECK(rc == GR_EUNPROC && strcmp(e.msg, ec.msg) == 0, "%s %s axis %d: the GPU's answer to '%s' was %d '%s'",
              gr_op_name(q.op), gr_dtype_name(q.dtype), q.axis, ec.msg, rc, e.msg);
        if (rc == GR_OK)
            gr_result_free(&got);
        free(buf);
        return;
    }
    CHECK(rc_c == GR_OK && rc == GR_OK, "%s %s axis %d %lldx%lld: %s", gr_op_name(q.op), gr_dtype_name(q.dtype),
          q.axis, (long long)q.rows, (long long)q.cols, rc_c != GR_OK ? ec.msg : e.msg);
    if (rc_c == GR_OK && rc == GR_OK) {
        double *tol = gr_needs_tol(q.op, q.dtype, mode) ? gr_tolerances(cpu, &q, 1e-11) : NULL;
        int64_t o = gr_result_diff(&got, &want, tol);
        CHECK(o < 0, "%s %s axis %d ties %d %lldx%lld (%s): output %lld differs", gr_op_name(q.op),
              gr_dtype_name(q.dtype), q.axis, q.ties_last, (long long)q.rows, (long long)q.cols, used, (long long)o);
        if (o >= 0) {
            gr_result_print(stderr, "  gpu", &got, o);
            gr_result_print(stderr, "  cpu", &want, o);
        }
        if (bytes <= GR_GPU_DIRECT_MAX) /* read and written over the bus by the kernel: no copies */
            CHECK(t.h2d == 0 && t.kernel > 0 && t.d2h == 0, "stage timings of %zu bytes read directly %g %g %g", bytes,
                  t.h2d, t.kernel, t.d2h);
        else
            CHECK(t.h2d > 0 && t.kernel > 0 && t.d2h > 0, "stage timings %g %g %g", t.h2d, t.kernel, t.d2h);
        const char *expect = !q.algorithm || strcmp(q.algorithm, "auto") == 0 ? "fast" : q.algorithm;
        CHECK(strcmp(used, expect) == 0, "algorithm used %s, asked %s", used, expect);
        free(tol);
        if (out_gpu)
            *out_gpu = got;
        else
            gr_result_free(&got);
        gr_result_free(&want);
    }
    free(buf);
}

/* The ops the "cub" variant covers. */
static unsigned cub_ops(void)
{
    for (int v = 0; v < gpu->nalgos; v++)
        if (strcmp(gpu->algos[v].name, "cub") == 0)
            return gpu->algos[v].ops;
    return 0;
}

static void every_op(void)
{
    const char *algos[] = {"auto", "fast", "cub"};
    int k = 0;
    for (int op = 0; (GR_GPU_OPS >> op) & 1; op++) /* the ops the GPU runs: all of them */
        for (int last = 0; last <= gr_op_is_arg(op); last++)
            for (int dt = 0; dt < GR_NDTYPES; dt++)
                for (int axis = GR_AXIS_ALL; axis <= 1; axis++, k++) {
                    const char *algo = algos[k % 3];
                    if (strcmp(algo, "cub") == 0 && (axis == 0 || !(cub_ops() & (1u << op))))
                        algo = "fast"; /* cub does not cover axis 0, nor the nan-ops and counts */
                    struct gr_reduce_req q = {op, dt, axis, last, gr_rng_range(&rng, 1, 300),
                                              gr_rng_range(&rng, 1, 3000), NULL, algo, 0, NULL, 0, 0, 0, NULL, 0};
                    q.ddof = gr_op_takes_ddof(op) ? k % 3 : 0;
                    against_cpu(q, k % 2, k % GR_NSPECIALS, 0, NULL);
                    if (axis == 0) { /* in groups: an N-D array's middle axes, narrow and wide */
                        int64_t g = gr_rng_range(&rng, 2, 40), inner = k % 2 ? gr_rng_range(&rng, 1, 8) : q.cols;
                        q = (struct gr_reduce_req){op, dt, 0, last, g * gr_rng_range(&rng, 1, 200), inner, NULL, "fast",
                                                   0, NULL, 0, g, q.ddof, NULL, 0};
                        against_cpu(q, k % 2, k % GR_NSPECIALS, 0, NULL);
                    }
                }
}

/* Axis sets split by kept axes: the GPU runs the passes after the first on its own outputs
 * (gr_backend_reduce_axes with then), the CPU on host copies of them; both must agree, with two
 * and three passes, short rows (narrow states) and long, and NaNs or infinities planted. */
static void chained_passes(void)
{
    static const struct {
        int ndim;
        int64_t shape[5];
        unsigned mask;
    } cases[] = {{3, {7, 5, 300}, 0x5},    {4, {6, 4, 9, 3}, 0x5},     {4, {5, 3, 4, 700}, 0xa},
                 {4, {3, 70, 2, 9}, 0x9},  {5, {4, 3, 5, 2, 6}, 0x15}, {5, {2, 9, 3, 5, 40}, 0x15}};
    int k = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int op = 0; (GR_GPU_OPS >> op) & 1; op++)
            for (int dt = 0; dt < GR_NDTYPES && !gr_op_is_arg(op); dt++, k++) {
                int64_t n = 1;
                for (int d = 0; d < cases[c].ndim; d++)
                    n *= cases[c].shape[d];
                void *data = malloc((size_t)n * gr_dtype_size(dt));
                CHECK(data != NULL, "out of host memory");
                if (!data)
                    return;
                gr_fill(data, dt, op, n, GR_FILL_EXACT, k % GR_NSPECIALS, &rng);
                struct gr_reduce_req q = {op, dt, 0, 0, 0, 0, data, "auto", 0, NULL, 0, 0,
                                          op == GR_STD || op == GR_NANVAR, NULL, 0};
                struct gr_reduce_req qc = q;
                qc.algorithm = "cpu_seq";
                struct gr_result got = {0}, want = {0};
                struct gr_timings t = {0};
                struct gr_err e = {0};
                char used[32];
                int rc_c = gr_backend_reduce_axes(cpu, &qc, cases[c].ndim, cases[c].shape, cases[c].mask, &want, &t,
                                                  used, &e);
                int rc = gr_backend_reduce_axes(gpu, &q, cases[c].ndim, cases[c].shape, cases[c].mask, &got, &t,
                                                used, &e);
                CHECK(rc_c == GR_OK && rc == GR_OK, "%s %s case %zu: %s", gr_op_name(op), gr_dtype_name(dt), c, e.msg);
                if (rc_c == GR_OK && rc == GR_OK) {
                    /* a mean of means on the host, one division on the device; var and std: Welford
                     * on the host, shifted sums and Chan's merges on the device (nanmean too) */
                    double *tol = NULL;
                    int spread = gr_op_takes_ddof(op);
                    if ((op == GR_MEAN || op == GR_NANMEAN || spread) && (tol = malloc((size_t)want.n * sizeof *tol)))
                        for (int64_t o = 0; o < want.n; o++)
                            tol[o] = spread ? 1e-9 * fabs(want.f[o]) : 1e-12 * 1000;
                    int64_t o = gr_result_diff(&got, &want, tol);
                    CHECK(o < 0, "%s %s case %zu (mask 0x%x): output %lld of %lld differs", gr_op_name(op),
                          gr_dtype_name(dt), c, cases[c].mask, (long long)o, (long long)want.n);
                    if (o >= 0) {
                        gr_result_print(stderr, "  gpu", &got, o);
                        gr_result_print(stderr, "  cpu", &want, o);
                    }
                    free(tol);
                }
                gr_result_free(&got);
                gr_result_free(&want);
                free(data);
            }
}

static int expect_error(struct gr_reduce_req q, int code, const char *label)
{
    struct gr_result r;
    struct gr_timings t = {0};
    struct gr_err e = {0};
    char used[32];
    int rc = gpu->reduce(gpu, &q, &r, &t, used, &e);
    CHECK(rc == code && e.msg[0], "%s: code %d (want %d), message '%s'", label, rc, code, e.msg);
    if (rc == GR_OK)
        gr_result_free(&r);
    return rc;
}

static void errors_and_recovery(void)
{
    float x[4] = {1, 2, 3, 4};
    struct gr_reduce_req q = {GR_PROD, GR_FLOAT32, GR_AXIS_ALL, 0, 1, 4, x, "harris1", 0, NULL, 0, 0, 0, NULL, 0};
    expect_error(q, GR_EUNPROC, "harris1 prod");
    q.op = GR_SUM;
    q.algorithm = "no_such_kernel";
    expect_error(q, GR_EINVAL, "unknown algorithm");
    q.algorithm = "auto";
    q.op = 99;
    expect_error(q, GR_EINVAL, "op out of range");
    q.op = GR_SUM;
    q.rows = 0;
    expect_error(q, GR_EUNPROC, "no elements");
    /* more than the GPU holds: the device allocation fails before the (small) input is read */
    q.rows = 1;
    q.cols = gpu->info.memory_bytes / 4 + ((int64_t)1 << 28);
    expect_error(q, GR_ENOMEM, "larger than GPU memory");
    /* the backend must still work */
    struct gr_reduce_req ok = {GR_SUM, GR_FLOAT32, GR_AXIS_ALL, 0, 1, 1000, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
    against_cpu(ok, GR_FILL_EXACT, GR_SPECIAL_NONE, 0, NULL);
}

int main(void)
{
    struct gr_backend *gpus[16];
    struct gr_err e = {0};
    int n = gr_gpu_discover(gpus, 16, 4, 0, 0, &e);
    if (n < 1) {
        printf("SKIP: %s\n", e.msg);
        return 77;
    }
    gpu = gpus[0];
    cpu = gr_cpu_backend_new();
    rng.s = gr_test_seed();
    printf("seed %llu (GR_TEST_SEED reproduces); %d GPU(s); %s: %s, %lld MiB, %d SMs, %d streams\n",
           (unsigned long long)rng.s, n, gpu->name, gpu->info.name, (long long)(gpu->info.memory_bytes >> 20),
           gpu->info.sms, gpu->info.streams);
    CHECK(strcmp(gpu->name, "gpu:0") == 0 && gpu->info.name[0] && gpu->info.memory_bytes > 0 && gpu->info.sms > 0 &&
              gpu->info.streams == 4,
          "device info");
    CHECK(gpu->nalgos > 0 && strcmp(gpu->algos[gpu->nalgos - 1].name, "fast") == 0 &&
              gpu->algos[gpu->nalgos - 1].ops == GR_GPU_OPS && gpu->algos[gpu->nalgos - 1].dtypes == GR_ALL_DTYPES &&
              gpu->algos[gpu->nalgos - 1].axes == GR_ALL_AXES,
          "fast covers everything");

    every_op();
    chained_passes();

    /* every op and dtype at the largest input read directly (whole, and as rows of 16 along
     * either axis) and at one element more, which is copied */
    for (int op = 0; (GR_GPU_OPS >> op) & 1; op++)
        for (int dt = 0; dt < GR_NDTYPES; dt++) {
            int64_t most = (int64_t)(GR_GPU_DIRECT_MAX / gr_dtype_size(dt));
            int last = gr_op_is_arg(op) ? dt % 2 : 0;
            struct gr_reduce_req whole = {op, dt, GR_AXIS_ALL, last, 1, most, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
            struct gr_reduce_req rows = {op, dt, op % 2, last, most / 16, 16, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
            struct gr_reduce_req past = {op, dt, GR_AXIS_ALL, last, 1, most + 1, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
            against_cpu(whole, GR_FILL_EXACT, op % GR_NSPECIALS, 0, NULL);
            against_cpu(rows, GR_FILL_EXACT, dt % GR_NSPECIALS, 0, NULL);
            against_cpu(past, GR_FILL_EXACT, op % GR_NSPECIALS, 0, NULL);
        }

    /* 100 MB through 8 MiB staging buffers on 4 streams, from an unaligned host pointer */
    struct gr_reduce_req big = {GR_SUM, GR_FLOAT32, GR_AXIS_ALL, 0, 1, 25000003, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
    against_cpu(big, GR_FILL_REAL, GR_SPECIAL_NONE, 4, NULL);
    big.op = GR_ARGMAX;
    big.dtype = GR_INT64;
    big.ties_last = 1;
    big.rows = 5000;
    big.cols = 2501;
    big.axis = 1;
    against_cpu(big, GR_FILL_EXACT, GR_SPECIAL_NONE, 8, NULL);
    /* results past the staging ring (32 x 2 MiB): 72 MiB of sum states, 144 MiB of argmax's, the
     * ring's slots reused while the host finishes the pieces before them */
    struct gr_reduce_req wide = {GR_SUM, GR_FLOAT32, 0, 0, 2, 9000001, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
    against_cpu(wide, GR_FILL_EXACT, GR_SPECIAL_NONE, 0, NULL);
    wide.op = GR_ARGMAX;
    against_cpu(wide, GR_FILL_EXACT, GR_SPECIAL_NAN, 0, NULL);

    /* identical bits run to run */
    struct gr_reduce_req d = {GR_SUM, GR_FLOAT64, GR_AXIS_ALL, 0, 1, 5000011, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
    struct gr_result r1 = {0}, r2 = {0};
    uint64_t seed = rng.s;
    against_cpu(d, GR_FILL_REAL, GR_SPECIAL_NONE, 0, &r1);
    rng.s = seed;
    against_cpu(d, GR_FILL_REAL, GR_SPECIAL_NONE, 0, &r2);
    CHECK(r1.f && r2.f && memcmp(r1.f, r2.f, sizeof(double)) == 0, "two runs differ");
    gr_result_free(&r1);
    gr_result_free(&r2);

    errors_and_recovery();

    /* many small jobs back to back (the steady state: buffers already grown) */
    double t0 = gr_mono_ms();
    for (int k = 0; k < 300; k++) {
        struct gr_reduce_req s = {k % 2 ? GR_MAX : GR_SUM, GR_INT32, GR_AXIS_ALL, 0, 1, 1000 + k, NULL, "auto", 0, NULL, 0, 0, 0, NULL, 0};
        against_cpu(s, GR_FILL_EXACT, GR_SPECIAL_NONE, 0, NULL);
    }
    printf("300 small jobs: %.3f ms each (with the CPU reference)\n", (gr_mono_ms() - t0) / 300);

    for (int k = 0; k < n; k++)
        gpus[k]->destroy(gpus[k]);
    cpu->destroy(cpu);
    printf("%d checks, %d failed\n", gr_checks, gr_fails);
    return gr_fails ? 1 : 0;
}
