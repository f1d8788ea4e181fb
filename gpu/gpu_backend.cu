/* gpu_backend.cu: one backend per GPU (streams, pinned staging, grow-only device buffers), made by
 * gr_gpu_discover at start-up; afterwards only the worker thread that owns the GPU calls it. */
#include "reduce.h" /* brings backend.h with C linkage */

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS 16
#define STAGE_BYTES ((size_t)8 << 20) /* pinned staging per stream: a multiple of every state size */
#define GROW_STEP ((size_t)2 << 20)   /* device buffers grow in steps of this */

enum { EV_H2D0, EV_H2D1, EV_K0, EV_K1, EV_D2H0, EV_D2H1, NEV };

struct dbuf {
    void *p;
    size_t bytes;
};

struct gpu {
    int dev, nst;
    cudaStream_t st[MAX_STREAMS];
    void *stage[MAX_STREAMS];         /* pinned host buffers, one per stream */
    cudaEvent_t staged[MAX_STREAMS];  /* the copy out of stage[s] has finished */
    cudaEvent_t ev[NEV];              /* stage timings, all on st[0] */
    unsigned *tickets;                /* GR_K_COUNTERS, zero between launches */
    struct dbuf in, out, scratch;     /* grow-only: no cudaMalloc per job in steady state */
};

/* Fill e from a CUDA error; clears the (non-sticky) error so the next job starts clean. */
static int cuda_fail(struct gr_err *e, cudaError_t err, const char *what)
{
    cudaGetLastError();
    return gr_fail(e, err == cudaErrorMemoryAllocation ? GR_ENOMEM : GR_ECUDA, NULL, "CUDA error while %s: %s (%s)",
                   what, cudaGetErrorString(err), cudaGetErrorName(err));
}

#define CUDA_TRY(call, what)                                                                                           \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess)                                                                                       \
            return cuda_fail(e, err_, what);                                                                           \
    } while (0)

/* Make b hold at least bytes. Returns GR_OK, or GR_ENOMEM with b empty (the old contents are gone). */
static int grow(struct dbuf *b, size_t bytes, const char *what, struct gr_err *e)
{
    if (b->bytes >= bytes)
        return GR_OK;
    cudaFree(b->p);
    b->p = NULL;
    b->bytes = 0;
    size_t want = (bytes + GROW_STEP - 1) / GROW_STEP * GROW_STEP;
    if (cudaMalloc(&b->p, want) != cudaSuccess) {
        size_t free_b = 0, total = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total);
        b->p = NULL;
        return gr_fail(e, GR_ENOMEM, NULL, "out of GPU memory: the job needs %zu MiB for its %s, %zu MiB of %zu are free",
                       want >> 20, what, free_b >> 20, total >> 20);
    }
    b->bytes = want;
    return GR_OK;
}

/* Pageable job input -> pinned staging -> device, in chunks spread over the streams so the host
 * copy of one chunk overlaps the DMA of the others. st[0] waits for all of them. */
static int upload(struct gpu *g, const void *src, size_t bytes, struct gr_err *e)
{
    int used = 0;
    CUDA_TRY(cudaEventRecord(g->ev[EV_H2D0], g->st[0]), "timing the upload");
    for (size_t off = 0, k = 0; off < bytes; k++) {
        int s = (int)(k % (size_t)g->nst);
        size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        if (k >= (size_t)g->nst)
            CUDA_TRY(cudaEventSynchronize(g->staged[s]), "waiting for a staging buffer");
        memcpy(g->stage[s], (const char *)src + off, len);
        CUDA_TRY(cudaMemcpyAsync((char *)g->in.p + off, g->stage[s], len, cudaMemcpyHostToDevice, g->st[s]),
                 "copying the input to the GPU");
        CUDA_TRY(cudaEventRecord(g->staged[s], g->st[s]), "recording a copy");
        used = s + 1 > used ? s + 1 : used;
        off += len;
    }
    for (int s = 1; s < used; s++)
        CUDA_TRY(cudaStreamWaitEvent(g->st[0], g->staged[s], 0), "ordering the copies");
    CUDA_TRY(cudaEventRecord(g->ev[EV_H2D1], g->st[0]), "timing the upload");
    return GR_OK;
}

/* Device states -> pinned staging -> results, chunk by chunk. */
static int download(struct gpu *g, const struct gr_kjob *j, int64_t count, struct gr_result *r, struct gr_err *e)
{
    size_t sb = gr_k_state_bytes(j->op), bytes = (size_t)gr_k_nout(j) * sb;
    CUDA_TRY(cudaEventRecord(g->ev[EV_D2H0], g->st[0]), "timing the download");
    for (size_t off = 0; off < bytes;) {
        size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        CUDA_TRY(cudaMemcpyAsync(g->stage[0], (const char *)g->out.p + off, len, cudaMemcpyDeviceToHost, g->st[0]),
                 "copying results from the GPU");
        CUDA_TRY(cudaEventRecord(g->ev[EV_D2H1], g->st[0]), "timing the download");
        CUDA_TRY(cudaStreamSynchronize(g->st[0]), "running the kernel and copying its results");
        gr_k_finish(j->op, j->dtype, g->stage[0], (int64_t)(len / sb), count, r, (int64_t)(off / sb));
        off += len;
    }
    return GR_OK;
}

static double elapsed(struct gpu *g, int a, int b)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, g->ev[a], g->ev[b]) == cudaSuccess ? ms : 0;
}

static int run_job(struct gpu *g, const struct gr_reduce_req *req, struct gr_kjob *j, struct gr_result *r,
                   struct gr_err *e)
{
    size_t in_bytes, out_bytes, scr_bytes;
    if (gr_mul_size((size_t)req->rows, (size_t)req->cols, &in_bytes) ||
        gr_mul_size(in_bytes, gr_dtype_size(req->dtype), &in_bytes) ||
        gr_mul_size((size_t)gr_k_nout(j), gr_k_state_bytes(req->op), &out_bytes))
        return gr_fail(e, GR_EUNPROC, NULL, "input of %lld x %lld elements is too large", (long long)req->rows,
                       (long long)req->cols);
    int rc = gr_k_scratch(j, &scr_bytes, e);
    if (rc == GR_OK)
        rc = grow(&g->in, in_bytes, "input", e);
    if (rc == GR_OK)
        rc = grow(&g->out, out_bytes, "results", e);
    if (rc == GR_OK)
        rc = grow(&g->scratch, scr_bytes ? scr_bytes : 1, "scratch", e);
    if (rc == GR_OK)
        rc = gr_result_alloc(r, gr_k_nout(j), gr_result_is_int(req->op, req->dtype), gr_op_is_arg(req->op), e);
    if (rc != GR_OK)
        return rc;
    j->x = g->in.p;
    j->out = g->out.p;
    if ((rc = upload(g, req->data, in_bytes, e)) != GR_OK)
        return rc;
    CUDA_TRY(cudaEventRecord(g->ev[EV_K0], g->st[0]), "timing the kernel");
    CUDA_TRY(gr_k_launch(j, g->scratch.p, g->scratch.bytes, g->tickets, g->st[0]), "launching the kernel");
    CUDA_TRY(cudaEventRecord(g->ev[EV_K1], g->st[0]), "timing the kernel");
    int64_t count = req->axis == GR_AXIS_ALL ? req->rows * req->cols : req->axis == 0 ? req->rows : req->cols;
    return download(g, j, count, r, e);
}

static int gpu_reduce(struct gr_backend *b, const struct gr_reduce_req *req, struct gr_result *r,
                      struct gr_timings *t, char algo_used[32], struct gr_err *e)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    memset(r, 0, sizeof *r);
    if (req->op < 0 || req->op >= GR_NOPS || req->dtype < 0 || req->dtype >= GR_NDTYPES ||
        req->axis < GR_AXIS_ALL || req->axis > 1)
        return gr_fail(e, GR_EINVAL, NULL, "invalid reduction request (op %d, dtype %d, axis %d)", req->op,
                       req->dtype, req->axis);
    int rc = gr_backend_check(b, req->algorithm, req->op, req->dtype, req->axis, e);
    if (rc != GR_OK)
        return rc;
    if (req->rows < 1 || req->cols < 1 || !req->data)
        return gr_fail(e, GR_EUNPROC, "data", "a reduction needs at least one element");
    CUDA_TRY(cudaSetDevice(g->dev), "selecting the device");
    struct gr_kjob j = {gr_k_variant(req->algorithm), req->op, req->dtype, req->axis, req->ties_last,
                        req->rows, req->cols, NULL, NULL, b->info.sms};
    rc = run_job(g, req, &j, r, e);
    if (rc != GR_OK) {
        gr_result_free(r);
        /* a sticky error (illegal address, ...) outlives cudaGetLastError: the context is lost */
        cudaError_t again = rc == GR_ECUDA ? cudaDeviceSynchronize() : cudaSuccess;
        if (again != cudaSuccess && !__atomic_load_n(&b->broken, __ATOMIC_ACQUIRE)) {
            snprintf(b->broken_why, sizeof b->broken_why, "%s: %s", b->name, cudaGetErrorString(again));
            __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
        }
        return rc;
    }
    t->h2d = elapsed(g, EV_H2D0, EV_H2D1);
    t->kernel = elapsed(g, EV_K0, EV_K1);
    t->d2h = elapsed(g, EV_D2H0, EV_D2H1);
    snprintf(algo_used, 32, "%s", gr_k_algos[j.variant].name);
    return GR_OK;
}

static int64_t gpu_memory_used(struct gr_backend *b)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    size_t free_bytes, total;
    if (cudaSetDevice(g->dev) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int64_t)(total - free_bytes);
}

static void gpu_destroy(struct gr_backend *b)
{
    if (!b)
        return;
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    if (g) {
        cudaSetDevice(g->dev);
        for (int s = 0; s < MAX_STREAMS; s++) {
            if (g->st[s])
                cudaStreamDestroy(g->st[s]);
            if (g->staged[s])
                cudaEventDestroy(g->staged[s]);
            cudaFreeHost(g->stage[s]);
        }
        for (int k = 0; k < NEV; k++)
            if (g->ev[k])
                cudaEventDestroy(g->ev[k]);
        cudaFree(g->tickets);
        cudaFree(g->in.p);
        cudaFree(g->out.p);
        cudaFree(g->scratch.p);
        cudaGetLastError();
        free(g);
    }
    free(b);
}

/* The device's memory ceiling, measured once at start-up: a device-to-device copy of 512 MiB,
 * best of 3 after a warm-up, as bytes read + written per second. 0 if it cannot be measured
 * (too little free memory): the ceiling is then reported unknown, nothing fails. */
static double measure_copy_gbps(struct gpu *g)
{
    const size_t bytes = (size_t)512 << 20;
    void *src = NULL, *dst = NULL;
    float best = 0;
    if (cudaMalloc(&src, bytes) == cudaSuccess && cudaMalloc(&dst, bytes) == cudaSuccess) {
        for (int k = 0; k < 4; k++) {
            float ms = 0;
            cudaEventRecord(g->ev[0], g->st[0]);
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g->st[0]);
            cudaEventRecord(g->ev[1], g->st[0]);
            if (cudaEventSynchronize(g->ev[1]) == cudaSuccess && cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]) ==
                cudaSuccess && k > 0 && ms > 0 && (best == 0 || ms < best))
                best = ms;
        }
    }
    cudaFree(src);
    cudaFree(dst);
    cudaGetLastError();
    return best > 0 ? 2.0 * (double)bytes / ((double)best * 1e6) : 0;
}

static int gpu_init(struct gr_backend *b, struct gpu *g, int streams, struct gr_err *e)
{
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaSetDevice(g->dev), "selecting the device");
    CUDA_TRY(cudaGetDeviceProperties(&prop, g->dev), "reading the device properties");
    snprintf(b->name, sizeof b->name, "gpu:%d", g->dev);
    snprintf(b->info.name, sizeof b->info.name, "%s", prop.name);
    b->info.memory_bytes = (int64_t)prop.totalGlobalMem;
    b->info.sms = prop.multiProcessorCount;
    b->info.streams = g->nst = streams;
    for (int s = 0; s < g->nst; s++) {
        CUDA_TRY(cudaStreamCreateWithFlags(&g->st[s], cudaStreamNonBlocking), "creating a stream");
        CUDA_TRY(cudaEventCreateWithFlags(&g->staged[s], cudaEventDisableTiming), "creating an event");
        CUDA_TRY(cudaMallocHost(&g->stage[s], STAGE_BYTES), "allocating pinned staging memory");
    }
    for (int k = 0; k < NEV; k++)
        CUDA_TRY(cudaEventCreate(&g->ev[k]), "creating an event");
    CUDA_TRY(cudaMalloc((void **)&g->tickets, GR_K_COUNTERS * sizeof(unsigned)), "allocating kernel tickets");
    CUDA_TRY(cudaMemset(g->tickets, 0, GR_K_COUNTERS * sizeof(unsigned)), "clearing kernel tickets");
    CUDA_TRY(cudaDeviceSynchronize(), "initialising the device");
    b->info.ceiling_gbps = measure_copy_gbps(g);
    return GR_OK;
}

/* One backend for device dev, or NULL with e filled. */
static struct gr_backend *gpu_new(int dev, int streams, struct gr_err *e)
{
    struct gr_backend *b = static_cast<struct gr_backend *>(calloc(1, sizeof *b));
    struct gpu *g = static_cast<struct gpu *>(calloc(1, sizeof *g));
    if (!b || !g) {
        free(b);
        free(g);
        gr_fail(e, GR_ENOMEM, NULL, "out of host memory for GPU %d", dev);
        return NULL;
    }
    g->dev = dev;
    b->impl = g;
    b->algos = gr_k_algos;
    b->nalgos = GR_K_NVARIANTS;
    b->reduce = gpu_reduce;
    b->memory_used = gpu_memory_used;
    b->destroy = gpu_destroy;
    if (gpu_init(b, g, streams, e) != GR_OK) {
        gpu_destroy(b);
        return NULL;
    }
    return b;
}

int gr_gpu_discover(struct gr_backend **out, int max, int streams, struct gr_err *e)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        cudaGetLastError();
        gr_fail(e, GR_OK, NULL, "no GPU: %s",
                err != cudaSuccess ? cudaGetErrorString(err) : "the CUDA driver reports no device");
        return 0;
    }
    streams = streams < 1 ? 1 : streams > MAX_STREAMS ? MAX_STREAMS : streams;
    int made = 0;
    for (int d = 0; d < n && made < max; d++) {
        struct gr_err why = {0};
        struct gr_backend *b = gpu_new(d, streams, &why);
        if (b)
            out[made++] = b;
        else
            gr_fail(e, GR_OK, NULL, "GPU %d unusable: %s", d, why.msg);
    }
    return made;
}
