/* backend.h: the one interface every compute backend (CPU, each GPU) implements.
 * A backend is created at start-up and then used only by the worker thread that owns it. */
#ifndef GR_BACKEND_H
#define GR_BACKEND_H

#include "common/axes.h"
#include "common/gr.h"

#ifdef __cplusplus
extern "C" { /* CUDA sources include this too */
#endif

/* One selectable variant. ops / dtypes are bit masks (1 << GR_SUM, 1 << GR_FLOAT32 ...);
 * axes: bit 0 = whole array, bit 1 = axis 0, bit 2 = axis 1. A matrix-product variant lives in
 * its own table (mm_algos below), its ops and axes 0: a second table rather than GR_MATMUL in the
 * masks, so that the reduction variants' masks and every loop over them stay as they are. */
struct gr_algo {
    const char *name;
    const char *description;
    unsigned ops, dtypes, axes;
};
#define GR_ALL_OPS ((1u << GR_NOPS) - 1) /* every reduction */
#define GR_GPU_OPS GR_ALL_OPS /* the GPU kernels' */
/* Ops a GPU answers from states that chained passes merge and a kernel turns into float64 answers:
 * var, std and their nan forms ((count, mean, M2)), and nanmean ((sum, count): a mean over lanes of
 * unequal counts) */
static inline int gr_op_by_moments(int op)
{
    return op == GR_VAR || op == GR_STD || op == GR_NANVAR || op == GR_NANSTD || op == GR_NANMEAN;
}
/* A GPU's reductions of inputs in memory of at most this many bytes copy nothing: the kernel
 * reads them from pinned host memory over the bus and writes its results back the same way (h2d
 * and d2h 0). The two copies of a 4 KiB job took 15 us of its 25-30 us on the device, more than
 * the kernel (bench/c1_probe.py, H100; at 64 KiB the direct kernel still beat the copies). */
#define GR_GPU_DIRECT_MAX ((size_t)64 << 10)
#define GR_ALL_DTYPES ((1u << GR_NDTYPES) - 1)
#define GR_ALL_AXES 7u
#define GR_AXIS_BIT(axis) (1u << ((axis) + 1))

struct gr_device_info {
    char name[128];
    int64_t memory_bytes;
    int sms, streams;
    int lanes;           /* jobs it runs at once, each on its own worker thread (GPU: one per stream) */
    double ceiling_gbps; /* measured memory ceiling (GPU: device copy, read + write); 0 unknown */
    double h2d_gbps;     /* measured host-to-device copy from pinned memory; 0 unknown or none */
    int64_t cache_bytes; /* the dataset cache's cap (--gpu-cache-bytes); 0 none */
};

/* The dataset cache's counters (monotonic except bytes/entries), and the datasets' files kept
 * page-locked on the host for every GPU (gpu/pinned.h): bytes now, copies served so far. */
struct gr_cache_stats {
    int64_t hits, misses, evictions, bytes, entries;
    int64_t pinned_bytes, pinned_hits;
};

struct gr_backend {
    char name[16]; /* "cpu", "gpu:0" */
    const struct gr_algo *algos; /* reductions */
    int nalgos;
    const struct gr_algo *mm_algos; /* matrix products (dtypes only) */
    int nmm_algos;
    struct gr_device_info info;

    /* Run req on lane req->lane (each lane is used by one thread at a time), filling r (allocated here; caller frees with gr_result_free), the stage
     * timings t (queue/total are the caller's), and algo_used (the variant that ran).
     * Returns GR_OK, or a code with e filled and r left empty. GR_EUNPROC when the
     * variant does not cover the op/dtype/axis. */
    int (*reduce)(struct gr_backend *b, const struct gr_reduce_req *req, struct gr_result *r,
                  struct gr_timings *t, char algo_used[32], struct gr_err *e);
    /* Run req (host buffers; req->out filled) on lane (as reduce() runs on req->lane): timings t,
     * algo_used, GR_OK or a code with e filled (gr_mm_check's, GR_ENOMEM, GR_ECUDA ...). The
     * backend decides req->streamed. */
    int (*matmul)(struct gr_backend *b, int lane, const struct gr_mm_req *req, struct gr_timings *t,
                  char algo_used[32], struct gr_err *e);
    void (*destroy)(struct gr_backend *b);
    /* Datasets: takes_fd says reduce() reads req->fd itself (so the caller need not map the file);
     * evict drops a dataset from the device's cache (DELETE; any thread, NULL: no cache);
     * cache_stats reads the cache's counters and cached the ids it holds, most recently used
     * first, at most max of them (their count; any thread); NULL where there is no cache. */
    int takes_fd;
    /* reduce() runs req->then itself, on its outputs in device memory; the ops by moments' too,
     * whose states it merges (they then take a sum's passes, not one over a gathered copy) */
    int chains;
    void (*evict)(struct gr_backend *b, const char *dataset);
    void (*cache_stats)(struct gr_backend *b, struct gr_cache_stats *s);
    int (*cached)(struct gr_backend *b, char ids[][24], int max);
    int (*holds)(struct gr_backend *b, const char *dataset); /* 1 if the cache holds it (any thread) */
    /* Device memory in use now, in bytes, or -1; NULL where it means nothing (the CPU).
     * Safe from any thread (read by /metrics). */
    int64_t (*memory_used)(struct gr_backend *b);
    /* Percent of the last NVML sample period a kernel ran on the device, or -1 (no NVML);
     * NULL where it means nothing (the CPU). Safe from any thread (read by /metrics). */
    int (*utilization)(struct gr_backend *b);
    char no_utilization_why[200]; /* a GPU's: why utilization() answers -1 (set at start; "" if it does not) */
    void *impl;
    /* Set (once, by the owning worker) when the device can run no more jobs, e.g. a sticky
     * CUDA error; /readyz then answers 503 with broken_why. */
    int broken; /* atomic */
    char broken_why[256];
};

/* Does algorithm name (or "auto") cover req's op/dtype/axis on b? Returns GR_OK or
 * GR_EUNPROC / GR_EINVAL with a message naming what is covered. op GR_MATMUL looks in
 * b->mm_algos and checks the dtype only (axis is ignored). */
int gr_backend_check(const struct gr_backend *b, const char *algorithm, int op, int dtype, int axis,
                     struct gr_err *e);

/* req's op over the axes in mask of its values, an ndim-D array of shape (req's rows, cols and
 * axis are set here), as common/axes.h's passes: the first reads req's values (or a gathered copy
 * of them), each after it the outputs before it (in device memory on a backend that chains, else
 * host memory). Fills r, t (the passes' stages summed) and algo_used (the first pass's) as
 * reduce() does. */
int gr_backend_reduce_axes(struct gr_backend *b, const struct gr_reduce_req *req, int ndim, const int64_t *shape,
                           unsigned mask, struct gr_result *r, struct gr_timings *t, char algo_used[32],
                           struct gr_err *e);
/* gr_backend_check of every pass of op over the axes in mask of an ndim-D array of shape. */
int gr_backend_check_axes(const struct gr_backend *b, const char *algorithm, int op, int dtype, int ndim,
                          const int64_t *shape, unsigned mask, struct gr_err *e);
/* op's result r on a backend: GR_OK, or GR_EUNPROC (e filled, r freed) for a nanarg op's lane of
 * NaNs alone (index -1), which has no answer (NumPy raises). */
int gr_backend_nanarg_check(int op, struct gr_result *r, struct gr_err *e);
/* The ops some variant of b runs (a mask of 1 << op). */
unsigned gr_backend_ops(const struct gr_backend *b);
/* The CPU backend (OpenMP). Never fails except out of memory. */
struct gr_backend *gr_cpu_backend_new(void);

/* Discover GPUs: fill out[0..max) with one backend each, return the count (0 when there
 * is no device or CUDA support was not built; why goes in e->msg, code GR_OK). pin_bytes:
 * datasets' files kept page-locked in host memory for every GPU (gpu/pinned.h). */
int gr_gpu_discover(struct gr_backend **out, int max, int streams, int64_t cache_bytes, int64_t pin_bytes,
                    struct gr_err *e);
#define GR_CACHE_DEFAULT (-1) /* cache_bytes: half the memory free after start-up */
#define GR_PIN_DEFAULT (-1)   /* pin_bytes: a quarter of the host's memory */

#ifdef __cplusplus
}
#endif

#endif
