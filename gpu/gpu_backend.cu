/* gpu_backend.cu: one backend per GPU, made by gr_gpu_discover at start-up. Each lane (a stream with
 * its pinned staging ring, events and grow-only device buffers; for products, copy streams and a
 * cuBLAS handle) is used by one worker thread only;
 * the dataset cache is shared by the lanes under the backend's mutex, and evict/stats may come
 * from any thread. */
#include "common/axes.h"
#include "gpu/kernels/matmul.h"
#include "gpu/kernels/reduce.h" /* brings backend.h with C linkage */
#include "gpu/pinned.h"
#include "gpu/stage.h"
#include "gpu/kernels/cuda_check.h"
#include "gpu/nvml.h"

#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LANES 16
#define NSTAGE 32                     /* pinned staging buffers per lane, used as a ring */
#define FILL_THREADS 16               /* threads filling them (bench/bench_ingest: 16 reach the bus best) */
#define STAGE_BYTES ((size_t)2 << 20) /* each; a multiple of every state size */
#define GROW_STEP ((size_t)2 << 20)  /* device buffers grow in steps of this */
#define NCOPY 2                      /* a product's row blocks are copied on these, beside the lane's stream */
/* Products with m x k at least this (4096 x 4096) are streamed by row blocks: bench_matmul (H200)
 * gains 1.2x end to end there, while at 2048 x 2048 the blocks' smaller multiplies cost 29 % of the
 * kernel's rate (matmul_api, 2026-11-22) for copies too short to hide much. */
#define MM_STREAM_MIN ((double)(1 << 24))
/* Device memory a product leaves in the pool for the next one (on any lane); above it the pool
 * gives memory back at the next synchronisation, for the dataset cache and reductions' buffers. */
#define POOL_KEEP ((uint64_t)1 << 30)

enum { EV_H2D0, EV_H2D1, EV_K0, EV_K1, EV_D2H0, EV_D2H1, NEV };

struct dbuf {
    void *p;
    size_t bytes;
};

struct lane {
    cudaStream_t st;
    void *stage[NSTAGE];
    void *direct[2];              /* stage[0] and stage[1] as the device sees them; NULL: none (no direct path) */
    cudaEvent_t staged[NSTAGE];   /* the copy out of stage[s] has finished */
    cudaEvent_t ev[NEV];          /* stage timings */
    unsigned *tickets;            /* GR_K_COUNTERS, zero between launches */
    struct dbuf in, out, scratch; /* no cudaMalloc per job in steady state */
    struct dbuf out2;             /* chained passes' outputs, in turn with out */
    cudaStream_t copy[NCOPY];
    cudaEvent_t copied[NCOPY]; /* a page-locked file's share copied on copy[s] */
    cublasHandle_t blas;
};

/* A dataset kept on the device. refs: lanes reading it now; ready: its upload has finished. */
struct entry {
    char id[24];
    void *p;
    size_t bytes;
    int refs, ready, doomed;
    unsigned long long used; /* LRU clock */
    struct entry *next;
};

struct gpu {
    int dev, nlanes;
    struct lane lane[MAX_LANES];
    cudaMemPool_t pool; /* the device's default pool, products' operands (thread-safe) */
    pthread_mutex_t mu; /* guards everything below */
    struct entry *cache;
    size_t cap, cached;
    unsigned long long clock;
    struct gr_cache_stats stats;
    void *nvml; /* NVML's handle of the device, NULL without NVML (set at init, then read-only) */
};


static int oom(size_t want, const char *what, struct gr_err *e)
{
    size_t free_b = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total);
    return gr_fail(e, GR_ENOMEM, NULL, "out of GPU memory: the job needs %zu MiB for its %s, %zu MiB of %zu are free",
                   want >> 20, what, free_b >> 20, total >> 20);
}

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
        b->p = NULL;
        return oom(want, what, e);
    }
    b->bytes = want;
    return GR_OK;
}

/* --- the dataset cache (g->mu held) --- */

static void cache_drop(struct gpu *g, struct entry *x)
{
    for (struct entry **p = &g->cache; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    cudaFree(x->p);
    g->cached -= x->bytes;
    g->stats.evictions += x->ready; /* a failed upload's entry was never cached */
    free(x);
}

/* Evict least recently used idle entries until bytes more fit under the cap; 0 if they cannot. */
static int cache_room(struct gpu *g, size_t bytes)
{
    while (g->cached + bytes > g->cap) {
        struct entry *lru = NULL;
        for (struct entry *x = g->cache; x; x = x->next)
            if (!x->refs && (!lru || x->used < lru->used))
                lru = x;
        if (!lru)
            return 0;
        cache_drop(g, lru);
    }
    return 1;
}

/* The entry to read dataset id from (hit) or to upload it into (miss, the entry not yet ready);
 * NULL when it is not cached and cannot be (no cache, too big, memory, another lane loading it). */
static struct entry *cache_take(struct gpu *g, const char *id, size_t bytes, int *cache)
{
    struct entry *x = NULL;
    *cache = GR_CACHE_MISS;
    pthread_mutex_lock(&g->mu);
    for (x = g->cache; x && strcmp(x->id, id); x = x->next)
        ;
    if (x && x->ready && !x->doomed && x->bytes == bytes) {
        *cache = GR_CACHE_HIT;
        g->stats.hits++;
    } else if (x) {
        x = NULL;
        g->stats.misses++;
    } else {
        g->stats.misses++;
        if (bytes <= g->cap && cache_room(g, bytes) && (x = (struct entry *)calloc(1, sizeof *x))) {
            if (cudaMalloc(&x->p, bytes) == cudaSuccess) {
                snprintf(x->id, sizeof x->id, "%s", id);
                x->bytes = bytes;
                x->next = g->cache;
                g->cache = x;
                g->cached += bytes;
            } else {
                cudaGetLastError(); /* no room after all: the job runs from its lane's buffer */
                free(x);
                x = NULL;
            }
        }
    }
    if (x) {
        x->refs++;
        x->used = ++g->clock;
    }
    pthread_mutex_unlock(&g->mu);
    return x;
}

/* The job that took x is done; ok: the upload into it (on a miss) completed. */
static void cache_give(struct gpu *g, struct entry *x, int ok)
{
    pthread_mutex_lock(&g->mu);
    x->refs--;
    x->ready |= ok;
    if (!x->refs && (x->doomed || !x->ready))
        cache_drop(g, x);
    pthread_mutex_unlock(&g->mu);
}

static void gpu_evict(struct gr_backend *b, const char *dataset)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    gr_pin_drop(dataset);
    pthread_mutex_lock(&g->mu);
    for (struct entry *x = g->cache; x; x = x->next)
        if (!strcmp(x->id, dataset)) {
            x->doomed = 1;
            if (!x->refs) {
                cudaSetDevice(g->dev);
                cache_drop(g, x);
            }
            break;
        }
    pthread_mutex_unlock(&g->mu);
}

static int by_use(const void *a, const void *b)
{
    unsigned long long x = (*(struct entry *const *)a)->used, y = (*(struct entry *const *)b)->used;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int gpu_cached(struct gr_backend *b, char ids[][24], int max)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    pthread_mutex_lock(&g->mu);
    int n = 0, all = 0;
    for (struct entry *x = g->cache; x; x = x->next)
        all++;
    struct entry **v = (struct entry **)malloc(sizeof *v * (all ? all : 1));
    for (struct entry *x = g->cache; v && x; x = x->next)
        if (x->ready && !x->doomed)
            v[n++] = x;
    if (v)
        qsort(v, n, sizeof *v, by_use);
    n = n < max ? n : max;
    for (int i = 0; i < n; i++)
        memcpy(ids[i], v[i]->id, sizeof ids[i]);
    pthread_mutex_unlock(&g->mu);
    free(v);
    return n;
}

static int gpu_holds(struct gr_backend *b, const char *dataset)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    pthread_mutex_lock(&g->mu);
    struct entry *x = g->cache;
    while (x && (strcmp(x->id, dataset) || !x->ready || x->doomed))
        x = x->next;
    pthread_mutex_unlock(&g->mu);
    return x != NULL;
}

static void gpu_cache_stats(struct gr_backend *b, struct gr_cache_stats *s)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    pthread_mutex_lock(&g->mu);
    *s = g->stats;
    s->bytes = (int64_t)g->cached;
    s->entries = 0;
    for (struct entry *x = g->cache; x; x = x->next)
        s->entries++;
    pthread_mutex_unlock(&g->mu);
    gr_pin_stats(&s->pinned_bytes, &s->pinned_hits);
}

/* --- one job on one lane --- */

/* One upload through a lane's staging ring (the pipeline's callbacks run on its fill threads). */
struct upload {
    struct lane *l;
    const struct gr_reduce_req *req;
    char *dst;
    size_t bytes;
    int dev;
    cudaError_t err; /* the first CUDA error of any thread */
    const char *what;
};

static int upload_stop(struct upload *u, cudaError_t err, const char *what)
{
    cudaError_t none = cudaSuccess;
    if (__atomic_compare_exchange_n(&u->err, &none, err, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        u->what = what;
    return 1;
}

/* Piece k goes through slot k % NSTAGE: wait until that slot's last copy has finished. */
static int upload_before(void *ctx, int64_t k, struct gr_piece *p)
{
    struct upload *u = static_cast<struct upload *>(ctx);
    int s = (int)(k % NSTAGE);
    cudaError_t err = cudaSetDevice(u->dev); /* the current device is per thread */
    if (err == cudaSuccess && k >= NSTAGE)
        err = cudaEventSynchronize(u->l->staged[s]);
    if (err != cudaSuccess)
        return upload_stop(u, err, "waiting for a staging buffer");
    size_t off = (size_t)k * STAGE_BYTES, len = u->bytes - off < STAGE_BYTES ? u->bytes - off : STAGE_BYTES;
    *p = (struct gr_piece){u->l->stage[s], u->req->data, u->req->fd, (int64_t)off, len};
    return 0;
}

static int upload_after(void *ctx, int64_t k, struct gr_piece *p)
{
    struct upload *u = static_cast<struct upload *>(ctx);
    cudaError_t err = cudaMemcpyAsync(u->dst + p->off, p->dst, p->len, cudaMemcpyHostToDevice, u->l->st);
    if (err == cudaSuccess)
        err = cudaEventRecord(u->l->staged[k % NSTAGE], u->l->st);
    return err == cudaSuccess ? 0 : upload_stop(u, err, "copying the input to the GPU");
}

/* The input (memory or file) -> pinned staging ring -> dst: FILL_THREADS threads each fill their
 * own slots and start each slot's copy as soon as it is full, so host reads overlap the DMA. A
 * dataset's file kept page-locked (pinned.h) is copied straight from its mapping instead, with
 * *pin to give back once the copy has finished. */
static int upload(struct gpu *g, struct lane *l, const struct gr_reduce_req *req, void *dst, size_t bytes,
                  struct gr_pin **pin, struct gr_err *e)
{
    struct upload u = {l, req, static_cast<char *>(dst), bytes, g->dev, cudaSuccess, NULL};
    GR_CUDA_TRY(cudaEventRecord(l->ev[EV_H2D0], l->st), "timing the upload");
    const void *mapped = req->data ? NULL : gr_pin_take(req->dataset, req->fd, bytes, pin);
    if (mapped) { /* in shares on the lane's stream and its copy streams: 97.9% of pinned H2D for 1 GiB on the
                   * H100 (bench/data_plane.py), where one copy on the lane's stream had given 81.1% */
        size_t share = (bytes / (NCOPY + 1) + 4095) / 4096 * 4096;
        cudaError_t err = cudaSuccess;
        for (int s = 0; s <= NCOPY && err == cudaSuccess && share * (size_t)s < bytes; s++) {
            size_t off = share * (size_t)s, len = s == NCOPY || bytes - off < share ? bytes - off : share;
            cudaStream_t st = s == NCOPY ? l->st : l->copy[s];
            if (s < NCOPY)
                err = cudaStreamWaitEvent(st, l->ev[EV_H2D0], 0);
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(static_cast<char *>(dst) + off, static_cast<const char *>(mapped) + off, len,
                                      cudaMemcpyHostToDevice, st);
            if (err == cudaSuccess && s < NCOPY)
                err = cudaEventRecord(l->copied[s], st);
            if (err == cudaSuccess && s < NCOPY)
                err = cudaStreamWaitEvent(l->st, l->copied[s], 0);
        }
        if (err != cudaSuccess) { /* the caller waits for the lane's stream only: no share may still read */
            for (int s = 0; s < NCOPY; s++)
                cudaStreamSynchronize(l->copy[s]);
            return gr_cuda_fail(e, err, "copying the input to the GPU");
        }
        GR_CUDA_TRY(cudaEventRecord(l->ev[EV_H2D1], l->st), "timing the upload");
        return GR_OK;
    }
    int rc = gr_stage_pipeline((int64_t)((bytes + STAGE_BYTES - 1) / STAGE_BYTES), NSTAGE, FILL_THREADS, upload_before,
                               upload_after, &u, e);
    if (rc == GR_ECUDA)
        return gr_cuda_fail(e, u.err, u.what);
    if (rc != GR_OK)
        return rc;
    GR_CUDA_TRY(cudaEventRecord(l->ev[EV_H2D1], l->st), "timing the upload");
    return GR_OK;
}

/* Device states (j->out) -> the pinned staging ring -> results: up to NSTAGE pieces copy while
 * the host finishes the ones before them. */
static int download(struct lane *l, const struct gr_kjob *j, int64_t count, struct gr_result *r, struct gr_err *e)
{
    size_t sb = gr_k_state_bytes(j), bytes = (size_t)gr_k_nout(j) * sb;
    int64_t pieces = (int64_t)((bytes + STAGE_BYTES - 1) / STAGE_BYTES), sent = 0;
    GR_CUDA_TRY(cudaEventRecord(l->ev[EV_D2H0], l->st), "timing the download");
    for (int64_t k = 0; k < pieces; k++) {
        for (; sent < pieces && sent < k + NSTAGE; sent++) { /* piece k - 1's slot was finished */
            size_t off = (size_t)sent * STAGE_BYTES, len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
            GR_CUDA_TRY(cudaMemcpyAsync(l->stage[sent % NSTAGE], (const char *)j->out + off, len,
                                        cudaMemcpyDeviceToHost, l->st),
                        "copying results from the GPU");
            if (sent == pieces - 1) /* before the last piece's staged event: done once it is */
                GR_CUDA_TRY(cudaEventRecord(l->ev[EV_D2H1], l->st), "timing the download");
            GR_CUDA_TRY(cudaEventRecord(l->staged[sent % NSTAGE], l->st), "copying results from the GPU");
        }
        GR_CUDA_TRY(cudaEventSynchronize(l->staged[k % NSTAGE]), "running the kernel and copying its results");
        size_t off = (size_t)k * STAGE_BYTES, len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        gr_k_finish(j, l->stage[k % NSTAGE], (int64_t)(len / sb), count, r, (int64_t)(off / sb));
    }
    return GR_OK;
}

static double elapsed(const struct lane *l, int a, int b)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, l->ev[a], l->ev[b]) == cudaSuccess ? ms : 0;
}

#ifdef GR_TEST_FAULTS
/* Test builds only (cmake -DGPURED_TEST_FAULTS=ON; never a release): GPURED_TEST_KERNEL_FAULT=N
 * makes the N-th reduction this process launches trap instead (after about a second). A trap
 * loses the context as a real kernel fault does: tests/e2e/test_gpu_faults.py watches the
 * backend break. */
__global__ void k_trap()
{
    /* about a second of spinning first: a test queues jobs behind it on the lane meanwhile */
    for (long long t0 = clock64(); clock64() - t0 < 2000000000LL;)
        ;
    __trap();
}

static bool fault_due()
{
    static long due = -1, launched;
    long armed = __atomic_load_n(&due, __ATOMIC_ACQUIRE);
    if (armed < 0) {
        const char *v = getenv("GPURED_TEST_KERNEL_FAULT");
        armed = v ? atol(v) : 0;
        __atomic_store_n(&due, armed, __ATOMIC_RELEASE);
    }
    return armed > 0 && __atomic_add_fetch(&launched, 1, __ATOMIC_ACQ_REL) == armed;
}
#endif

static cudaError_t launch(const struct gr_kjob *j, struct lane *l)
{
#ifdef GR_TEST_FAULTS
    if (fault_due()) {
        k_trap<<<1, 1, 0, l->st>>>();
        return cudaGetLastError();
    }
#endif
    return gr_k_launch(j, l->scratch.p, l->scratch.bytes, l->tickets, l->st);
}

/* Values each of j's outputs reduces. */
static int64_t per_output(const struct gr_kjob *j)
{
    return j->axis == GR_AXIS_ALL ? j->rows * j->cols : j->axis == 0 ? j->rows / gr_k_groups(j) : j->cols;
}

/* js[0] (set by the caller) and a job for each of req->then after it, reading the states before
 * it; mean's passes after the first sum its raw sums, an op by moments's merge its states. Returns
 * the values each last output reduces. */
static int64_t chain(const struct gr_reduce_req *req, struct gr_kjob *js)
{
    int64_t count = per_output(&js[0]);
    for (int k = 1; k <= req->nthen; k++) {
        const struct gr_pass *p = &req->then[k - 1];
        js[k] = js[k - 1];
        js[k].dtype = gr_k_states_dtype(&js[k - 1]);
        js[k].op = req->op == GR_MEAN ? GR_SUM : gr_axes_next_op(js[k - 1].op);
        js[k].merge = gr_op_by_moments(js[k].op);
        js[k].axis = p->axis, js[k].groups = p->groups, js[k].rows = p->rows, js[k].cols = p->cols;
        count *= per_output(&js[k]);
    }
    return count;
}

/* Buffers, input (cached, uploaded, or read directly: *direct), kernels (j, then req->then on its
 * outputs, turn about in out and out2), results. *cache says where the input came from; x (when
 * the dataset cache holds or takes the input) and pin (a page-locked file copied from) are
 * released by the caller. */
static int run_job(struct gpu *g, struct lane *l, const struct gr_reduce_req *req, struct gr_kjob *j,
                   struct gr_result *r, struct entry **x, struct gr_pin **pin, int *direct, struct gr_timings *t,
                   struct gr_err *e)
{
    struct gr_kjob js[1 + GR_MAX_DIMS];
    js[0] = *j;
    int64_t count = chain(req, js), last = req->nthen;
    size_t in_bytes, out_bytes[2] = {0, 0}, scr_bytes = 0;
    if (gr_mul_size((size_t)req->rows, (size_t)req->cols, &in_bytes) ||
        gr_mul_size(in_bytes, gr_dtype_size(req->dtype), &in_bytes))
        return gr_fail(e, GR_EUNPROC, NULL, "input of %lld x %lld elements is too large", (long long)req->rows,
                       (long long)req->cols);
    int rc = GR_OK;
    for (int k = 0; k <= last && rc == GR_OK; k++) {
        size_t o, s;
        if (gr_mul_size((size_t)gr_k_nout(&js[k]), gr_k_state_bytes(&js[k]), &o))
            return gr_fail(e, GR_EUNPROC, NULL, "%lld results are too many", (long long)gr_k_nout(&js[k]));
        out_bytes[k & 1] = o > out_bytes[k & 1] ? o : out_bytes[k & 1];
        if ((rc = gr_k_scratch(&js[k], &s, e)) == GR_OK && s > scr_bytes)
            scr_bytes = s;
    }
    if (rc == GR_OK && req->dataset && req->dataset[0] && g->cap)
        *x = cache_take(g, req->dataset, in_bytes, &t->cache);
    *direct = !*x && req->data && l->direct[0] && in_bytes <= GR_GPU_DIRECT_MAX && !last &&
              out_bytes[0] <= STAGE_BYTES;
    /* an op by moments copied as its float64 answers, made in the other buffer than the last states */
    int moments = !*direct && gr_op_by_moments(req->op);
    size_t *fin = &out_bytes[(last + 1) & 1], fb = (size_t)gr_k_nout(&js[last]) * sizeof(double);
    *fin = moments && fb > *fin ? fb : *fin;
    if (rc == GR_OK && !*x && !*direct)
        rc = grow(&l->in, in_bytes, "input", e);
    if (rc == GR_OK && !*direct)
        rc = grow(&l->out, out_bytes[0], "results", e);
    if (rc == GR_OK && (last || moments))
        rc = grow(&l->out2, out_bytes[1], "results", e);
    if (rc == GR_OK)
        rc = grow(&l->scratch, scr_bytes ? scr_bytes : 1, "scratch", e);
    if (rc == GR_OK)
        rc = gr_result_alloc(r, gr_k_nout(&js[last]), gr_result_is_int(req->op, req->dtype), gr_op_is_arg(req->op),
                             e);
    if (rc != GR_OK)
        return rc;
    if (*direct) /* nothing runs on the lane between jobs (each waits for its stream): both are free */
        memcpy(l->stage[0], req->data, in_bytes);
    js[0].x = *direct ? l->direct[0] : *x ? (*x)->p : l->in.p;
    for (int k = 0; k <= last; k++) {
        js[k].out = *direct ? l->direct[1] : k & 1 ? l->out2.p : l->out.p;
        if (k)
            js[k].x = js[k - 1].out;
    }
    if (t->cache != GR_CACHE_HIT && !*direct &&
        (rc = upload(g, l, req, const_cast<void *>(js[0].x), in_bytes, pin, e)) != GR_OK)
        return rc;
    int answered = moments && gr_k_answer(&js[last], req->dtype);
    GR_CUDA_TRY(cudaEventRecord(l->ev[EV_K0], l->st), "timing the kernel");
    for (int k = 0; k <= last; k++)
        GR_CUDA_TRY(launch(&js[k], l), "launching the kernel");
    struct gr_kjob done = js[last];
    if (moments && !answered) {
        struct gr_kjob m = js[last];
        m.dtype = req->dtype; /* whether its states skipped NaNs: the input's, not a merge's float64 */
        done.out = last & 1 ? l->out.p : l->out2.p;
        GR_CUDA_TRY(gr_k_moments(&m, (double *)done.out, l->st), "launching the kernel");
    }
    if (moments) /* then read back as float64 sums are */
        done.op = GR_SUM, done.dtype = GR_FLOAT64, done.merge = 0;
    GR_CUDA_TRY(cudaEventRecord(l->ev[EV_K1], l->st), "timing the kernel");
    done.op = req->op == GR_MEAN ? GR_MEAN : done.op; /* finished as the op asked: a mean divides */
    if (!*direct)
        return download(l, &done, count, r, e);
    GR_CUDA_TRY(cudaStreamSynchronize(l->st), "running the kernel");
    gr_k_finish(&js[0], l->stage[1], gr_k_nout(&js[0]), count, r, 0);
    return GR_OK;
}

/* After a failed job (rc): a sticky error (illegal address, ...) outlives cudaGetLastError, the
 * context is lost, and the backend is marked broken. Returns rc. */
static int check_broken(struct gr_backend *b, int rc)
{
    cudaError_t again = rc == GR_ECUDA ? cudaDeviceSynchronize() : cudaSuccess;
    if (again != cudaSuccess && !__atomic_load_n(&b->broken, __ATOMIC_ACQUIRE)) {
        snprintf(b->broken_why, sizeof b->broken_why, "%s: %s", b->name, cudaGetErrorString(again));
        __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
    }
    return rc;
}

static int gpu_reduce(struct gr_backend *b, const struct gr_reduce_req *req, struct gr_result *r,
                      struct gr_timings *t, char algo_used[32], struct gr_err *e)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    memset(r, 0, sizeof *r);
    if (req->op < 0 || req->op >= GR_NOPS || req->dtype < 0 || req->dtype >= GR_NDTYPES ||
        req->axis < GR_AXIS_ALL || req->axis > 1 || req->lane < 0 || req->lane >= g->nlanes || req->nthen < 0 ||
        req->nthen >= GR_MAX_DIMS || (req->nthen && (!req->then || gr_op_is_arg(req->op))))
        return gr_fail(e, GR_EINVAL, NULL, "invalid reduction request (op %d, dtype %d, axis %d, lane %d, %d passes)",
                       req->op, req->dtype, req->axis, req->lane, 1 + req->nthen);
    int rc = gr_backend_check(b, req->algorithm, req->op, req->dtype, req->axis, e);
    if (rc != GR_OK)
        return rc;
    if (req->rows < 1 || req->cols < 1 || (!req->data && req->fd <= 0))
        return gr_fail(e, GR_EUNPROC, "data", "a reduction needs at least one element");
    GR_CUDA_TRY(cudaSetDevice(g->dev), "selecting the device");
    struct lane *l = &g->lane[req->lane];
    struct gr_kjob j = {gr_k_variant(req->algorithm), req->op, req->dtype, req->axis, req->ties_last,
                        req->rows, req->cols, NULL, NULL, b->info.sms, req->groups, req->ddof, 0};
    struct entry *x = NULL;
    struct gr_pin *pin = NULL;
    int direct = 0;
    t->cache = GR_CACHE_NONE;
    rc = run_job(g, l, req, &j, r, &x, &pin, &direct, t, e);
    if (rc != GR_OK) /* nothing of a failed job may still run when its buffers are reused or freed */
        cudaStreamSynchronize(l->st);
    gr_pin_give(pin);
    if (x)
        cache_give(g, x, rc == GR_OK);
    if (rc != GR_OK) {
        gr_result_free(r);
        return check_broken(b, rc);
    }
    if ((rc = gr_backend_nanarg_check(req->op, r, e)) != GR_OK)
        return rc;
    t->h2d = t->cache == GR_CACHE_HIT || direct ? 0 : elapsed(l, EV_H2D0, EV_H2D1);
    t->kernel = elapsed(l, EV_K0, EV_K1); /* a direct input's reads over the bus included */
    t->d2h = direct ? 0 : elapsed(l, EV_D2H0, EV_D2H1);
    snprintf(algo_used, 32, "%s", gr_k_algos[j.variant].name);
    return GR_OK;
}

/* A product on a lane: the lane's stream multiplies, its copy streams move the row blocks
 * through its pinned staging ring (gr_mm_gpu), operands come from the device's pool. */
static int gpu_matmul(struct gr_backend *b, int lane, const struct gr_mm_req *req, struct gr_timings *t,
                      char algo_used[32], struct gr_err *e)
{
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    if (lane < 0 || lane >= g->nlanes)
        return gr_fail(e, GR_EINVAL, NULL, "invalid matmul request (lane %d)", lane);
    GR_CUDA_TRY(cudaSetDevice(g->dev), "selecting the device");
    struct lane *l = &g->lane[lane];
    cudaStream_t streams[1 + NCOPY] = {l->st};
    for (int s = 0; s < NCOPY; s++)
        streams[1 + s] = l->copy[s];
    struct gr_mm_env env = {streams, 1 + NCOPY, l->blas, l->stage, NSTAGE, STAGE_BYTES, g->pool};
    struct gr_mm_req r = *req;
    r.streamed = (double)req->m * (double)req->k >= MM_STREAM_MIN;
    struct gr_mm_timings mt;
    int rc = gr_mm_gpu(&r, &env, &mt, algo_used, e);
    if (rc != GR_OK)
        return check_broken(b, rc);
    t->h2d = mt.h2d;
    t->kernel = mt.kernel;
    t->d2h = mt.d2h;
    t->overlap = mt.overlap;
    t->cache = GR_CACHE_NONE;
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

static int gpu_utilization(struct gr_backend *b)
{
    return gr_nvml_utilization(static_cast<struct gpu *>(b->impl)->nvml);
}

static void lane_free(struct lane *l)
{
    if (l->st)
        cudaStreamDestroy(l->st);
    for (int s = 0; s < NCOPY; s++) {
        if (l->copy[s])
            cudaStreamDestroy(l->copy[s]);
        if (l->copied[s])
            cudaEventDestroy(l->copied[s]);
    }
    if (l->blas)
        cublasDestroy(l->blas);
    for (int s = 0; s < NSTAGE; s++) {
        if (l->staged[s])
            cudaEventDestroy(l->staged[s]);
        cudaFreeHost(l->stage[s]);
    }
    for (int k = 0; k < NEV; k++)
        if (l->ev[k])
            cudaEventDestroy(l->ev[k]);
    cudaFree(l->tickets);
    cudaFree(l->in.p);
    cudaFree(l->out.p);
    cudaFree(l->out2.p);
    cudaFree(l->scratch.p);
}

static void gpu_destroy(struct gr_backend *b)
{
    if (!b)
        return;
    struct gpu *g = static_cast<struct gpu *>(b->impl);
    if (g) {
        cudaSetDevice(g->dev);
        for (int i = 0; i < MAX_LANES; i++)
            lane_free(&g->lane[i]);
        while (g->cache)
            cache_drop(g, g->cache);
        gr_pin_end(); /* no job runs any more */
        pthread_mutex_destroy(&g->mu);
        cudaGetLastError();
        free(g);
    }
    free(b);
}

/* Best of 3 timed copies (after a warm-up) of bytes from src to dst on l's stream, in GB/s of
 * bytes moved once; 0 if it cannot be timed. */
static double copy_gbps(struct lane *l, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    float best = 0;
    for (int k = 0; k < 4; k++) {
        float ms = 0;
        cudaEventRecord(l->ev[0], l->st);
        cudaMemcpyAsync(dst, src, bytes, kind, l->st);
        cudaEventRecord(l->ev[1], l->st);
        if (cudaEventSynchronize(l->ev[1]) == cudaSuccess &&
            cudaEventElapsedTime(&ms, l->ev[0], l->ev[1]) == cudaSuccess && k > 0 && ms > 0 && (best == 0 || ms < best))
            best = ms;
    }
    cudaGetLastError();
    return best > 0 ? (double)bytes / ((double)best * 1e6) : 0;
}

/* The device's ceilings, measured once at start-up, 0 where they cannot be (too little memory;
 * nothing fails): memory, as a 512 MiB device copy (bytes read + written per second), and the
 * bus, as a 256 MiB copy from pinned host memory. */
static void measure_ceilings(struct gpu *g, struct gr_device_info *info)
{
    const size_t bytes = (size_t)512 << 20;
    void *src = NULL, *dst = NULL, *host = NULL;
    if (cudaMalloc(&src, bytes) == cudaSuccess && cudaMalloc(&dst, bytes) == cudaSuccess) {
        info->ceiling_gbps = 2 * copy_gbps(&g->lane[0], dst, src, bytes, cudaMemcpyDeviceToDevice);
        if (cudaMallocHost(&host, bytes / 2) == cudaSuccess)
            info->h2d_gbps = copy_gbps(&g->lane[0], dst, host, bytes / 2, cudaMemcpyHostToDevice);
    }
    cudaFreeHost(host);
    cudaFree(src);
    cudaFree(dst);
    cudaGetLastError();
}

static int lane_init(struct lane *l, struct gr_err *e)
{
    GR_CUDA_TRY(cudaStreamCreateWithFlags(&l->st, cudaStreamNonBlocking), "creating a stream");
    for (int s = 0; s < NCOPY; s++) {
        GR_CUDA_TRY(cudaStreamCreateWithFlags(&l->copy[s], cudaStreamNonBlocking), "creating a copy stream");
        GR_CUDA_TRY(cudaEventCreateWithFlags(&l->copied[s], cudaEventDisableTiming), "creating an event");
    }
    cublasStatus_t bs = cublasCreate(&l->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        l->blas = NULL;
        return gr_fail(e, bs == CUBLAS_STATUS_ALLOC_FAILED ? GR_ENOMEM : GR_ECUDA, NULL, "cannot create a cuBLAS handle: %s",
                       cublasGetStatusString(bs));
    }
    for (int s = 0; s < NSTAGE; s++) {
        GR_CUDA_TRY(cudaEventCreateWithFlags(&l->staged[s], cudaEventDisableTiming), "creating an event");
        GR_CUDA_TRY(cudaMallocHost(&l->stage[s], STAGE_BYTES), "allocating pinned staging memory");
    }
    for (int s = 0; s < 2; s++) /* a device without mapped host memory has no direct path */
        if (cudaHostGetDevicePointer(&l->direct[s], l->stage[s], 0) != cudaSuccess) {
            cudaGetLastError();
            l->direct[0] = l->direct[1] = NULL;
            break;
        }
    for (int k = 0; k < NEV; k++)
        GR_CUDA_TRY(cudaEventCreate(&l->ev[k]), "creating an event");
    GR_CUDA_TRY(cudaMalloc((void **)&l->tickets, GR_K_COUNTERS * sizeof(unsigned)), "allocating kernel tickets");
    GR_CUDA_TRY(cudaMemset(l->tickets, 0, GR_K_COUNTERS * sizeof(unsigned)), "clearing kernel tickets");
    return GR_OK;
}

static int gpu_init(struct gr_backend *b, struct gpu *g, int streams, int64_t cache_bytes, struct gr_err *e)
{
    struct cudaDeviceProp prop;
    GR_CUDA_TRY(cudaSetDevice(g->dev), "selecting the device");
    GR_CUDA_TRY(cudaGetDeviceProperties(&prop, g->dev), "reading the device properties");
    snprintf(b->name, sizeof b->name, "gpu:%d", g->dev);
    snprintf(b->info.name, sizeof b->info.name, "%s", prop.name);
    b->info.memory_bytes = (int64_t)prop.totalGlobalMem;
    b->info.sms = prop.multiProcessorCount;
    b->info.streams = b->info.lanes = g->nlanes = streams;
    for (int i = 0; i < g->nlanes; i++)
        if (lane_init(&g->lane[i], e) != GR_OK)
            return e->code;
    uint64_t keep = POOL_KEEP;
    GR_CUDA_TRY(cudaDeviceGetDefaultMemPool(&g->pool, g->dev), "finding the memory pool");
    GR_CUDA_TRY(cudaMemPoolSetAttribute(g->pool, cudaMemPoolAttrReleaseThreshold, &keep), "setting up the memory pool");
    GR_CUDA_TRY(cudaDeviceSynchronize(), "initialising the device");
    measure_ceilings(g, &b->info);
    char bus_id[32];
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, g->dev) == cudaSuccess)
        g->nvml = gr_nvml_device(bus_id, b->no_utilization_why, sizeof b->no_utilization_why);
    else
        snprintf(b->no_utilization_why, sizeof b->no_utilization_why, "CUDA gave no PCI address");
#ifdef GR_TEST_FAULTS
    if (getenv("GPURED_TEST_KERNEL_FAULT"))
        fprintf(stderr, "gpured: test build: reduction launch %s (GPURED_TEST_KERNEL_FAULT) will trap\n",
                getenv("GPURED_TEST_KERNEL_FAULT"));
#endif
    size_t free_b = 0, total = 0;
    GR_CUDA_TRY(cudaMemGetInfo(&free_b, &total), "reading the free memory");
    g->cap = cache_bytes == GR_CACHE_DEFAULT ? free_b / 2 : (size_t)cache_bytes;
    b->info.cache_bytes = (int64_t)g->cap;
    return GR_OK;
}

/* One backend for device dev, or NULL with e filled. */
static struct gr_backend *gpu_new(int dev, int streams, int64_t cache_bytes, struct gr_err *e)
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
    pthread_mutex_init(&g->mu, NULL);
    b->impl = g;
    b->algos = gr_k_algos;
    b->nalgos = GR_K_NVARIANTS;
    b->reduce = gpu_reduce;
    b->mm_algos = gr_mm_algos;
    b->nmm_algos = GR_MM_NVARIANTS;
    b->matmul = gpu_matmul;
    b->memory_used = gpu_memory_used;
    b->utilization = gpu_utilization;
    b->destroy = gpu_destroy;
    b->takes_fd = 1;
    b->chains = 1;
    b->evict = gpu_evict;
    b->cache_stats = gpu_cache_stats;
    b->cached = gpu_cached;
    b->holds = gpu_holds;
    if (gpu_init(b, g, streams, cache_bytes, e) != GR_OK) {
        gpu_destroy(b);
        return NULL;
    }
    return b;
}

int gr_gpu_discover(struct gr_backend **out, int max, int streams, int64_t cache_bytes, int64_t pin_bytes,
                    struct gr_err *e)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        cudaGetLastError();
        gr_fail(e, GR_OK, NULL, "no GPU: %s",
                err != cudaSuccess ? cudaGetErrorString(err) : "the CUDA driver reports no device");
        return 0;
    }
    streams = streams < 1 ? 1 : streams > MAX_LANES ? MAX_LANES : streams;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    gr_pin_init(pin_bytes == GR_PIN_DEFAULT ? (pages > 0 && page > 0 ? (int64_t)pages * page / 4 : 0) : pin_bytes);
    int made = 0;
    for (int d = 0; d < n && made < max; d++) {
        struct gr_err why = {0};
        struct gr_backend *b = gpu_new(d, streams, cache_bytes, &why);
        if (b)
            out[made++] = b;
        else
            gr_fail(e, GR_OK, NULL, "GPU %d unusable: %s", d, why.msg);
    }
    return made;
}
