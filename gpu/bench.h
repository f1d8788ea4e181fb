/* bench.h: the kernel variants of one backend side by side (POST /v1/benchmarks): each run
 * `repeats` times on the same generated data and checked against a reference. Called by the
 * worker thread that owns the backend; the limits also by the API threads. */
#ifndef GR_BENCH_H
#define GR_BENCH_H

#include "gpu/backend.h"

struct gr_bench_row {
    char algorithm[32];
    double median_ms; /* kernel stage */
    double rate;      /* over median_ms: GB/s read (reductions), GFLOP/s at 2 n^3 (products) */
    int matched;      /* every answer equals the reference's (floats: within rounding) */
    char error[256];  /* why it did not run, "" when it did */
};

/* A benchmark holds its worker: GR_OK when n and repeats keep it short on that device (on_cpu:
 * the CPU backend, else a GPU), else GR_EUNPROC naming the limit, field "n" or "repeats".
 * Reductions: n <= 2^28 elements, n x repeats <= 2^31. Products (n x n x n): n <= 8192 and
 * n^3 x repeats <= 2^43 on a GPU, n <= 1024 and n^3 x repeats <= 2^31 on the CPU. */
int gr_bench_fits(int on_cpu, int op, int64_t n, int64_t repeats, struct gr_err *e);

/* The variant every answer is checked against: cpu_seq (reductions, the CPU backend's), cpu_tiled
 * (products up to n = 1024, the CPU backend's) or cublas (larger products, the benchmarked GPU's). */
const char *gr_bench_reference(int op, int64_t n);

/* Run the variants named in algos (nalgos 0: every variant of b covering op/dtype; reductions
 * over the whole array) on generated data: n elements, or for op GR_MATMUL n x n operands with
 * alpha 1, beta 0. b's lane `lane` runs them; ref is the CPU backend. *rows (malloc'd, caller
 * frees) gets one row each. Returns GR_OK, GR_EUNPROC (a named variant does not cover op/dtype,
 * or gr_bench_fits refuses), GR_EINVAL (unknown name), GR_ENOMEM, or the reference's failure;
 * a variant that fails while running gets its error in its row. */
int gr_bench_run(struct gr_backend *b, int lane, struct gr_backend *ref, int op, int dtype, int64_t n, char (*algos)[32],
                 int nalgos, int repeats, struct gr_bench_row **rows, int *nrows, struct gr_err *e);

#endif
