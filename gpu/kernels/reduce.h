/* reduce.h: the reduction kernel variants (listed in reduce.cu's header), their coverage table,
 * launchers and the host-side finishing step. Stateless; the caller owns streams and memory. */
#ifndef GR_REDUCE_H
#define GR_REDUCE_H

#include <cuda_runtime_api.h>

/* gr.h and backend.h are C; C++ (nvcc) users reach them through this header. */
#ifdef __cplusplus
extern "C" {
#endif

#include "gpu/backend.h"

enum gr_kvariant {
    GR_K_HARRIS1, GR_K_HARRIS2, GR_K_HARRIS3, GR_K_HARRIS4, GR_K_HARRIS5, GR_K_HARRIS6,
    GR_K_HARRIS7, GR_K_SHFL, GR_K_REDUX, GR_K_CUB, GR_K_FAST, GR_K_NVARIANTS
};

/* What each variant covers, indexed by enum gr_kvariant (the backend's algorithm table). */
extern const struct gr_algo gr_k_algos[GR_K_NVARIANTS];

/* Variant for an algorithm name; "auto" or NULL -> GR_K_FAST; -1 if unknown. */
int gr_k_variant(const char *name);

/* Launchers keep their last-block-done tickets here; it must be zeroed once when allocated
 * and every launch leaves it zeroed again. */
#define GR_K_COUNTERS 65536

/* One reduction of device memory: x holds rows x cols elements of dtype (row-major, 16-byte
 * aligned); out receives nout device states of gr_k_state_bytes(j) bytes each. */
struct gr_kjob {
    int variant, op, dtype, axis, ties_last;
    int64_t rows, cols;
    const void *x;
    void *out;
    int sms; /* multiprocessors of the device, for sizing grids */
    int64_t groups; /* axis 0: the rows are this many groups, each reduced on its own (0 or 1: one) */
    int ddof;       /* var, std: the divisor is the count less this */
    int merge;      /* an op by moments over axis 0: x holds the states an earlier pass left */
    int answers;    /* an op by moments's last pass: out gets float64 answers, not states (gr_k_answer) */
    int skipped;    /* with answers: the states left NaNs out (moments_answer's skip) */
};

int64_t gr_k_nout(const struct gr_kjob *j);
static inline int64_t gr_k_groups(const struct gr_kjob *j) { return j->groups > 1 ? j->groups : 1; }
size_t gr_k_state_bytes(const struct gr_kjob *j); /* per output; short rows' are narrow */
/* The dtype j's states are read as when a further pass reduces them on the device (not arg ops;
 * var and std merge theirs, j->merge): narrow states are the input's dtype, others int64 or
 * float64 (raw sums for mean). */
int gr_k_states_dtype(const struct gr_kjob *j);

/* Device scratch bytes the job needs besides the counters. Returns GR_OK, or GR_EUNPROC
 * (e filled) when the variant does not cover the job. */
int gr_k_scratch(const struct gr_kjob *j, size_t *bytes, struct gr_err *e);

/* Enqueue the job on stream st. scratch has at least gr_k_scratch() bytes; counters is the
 * zeroed GR_K_COUNTERS region; neither may be NULL. Returns the first CUDA error of the launches. */
cudaError_t gr_k_launch(const struct gr_kjob *j, void *scratch, size_t scratch_bytes,
                        unsigned *counters, cudaStream_t st);

/* An op by moments (gr_op_by_moments): j's states (j->out) into their float64 answers at out
 * (gr_k_nout(j) of them) on stream st, a third of the bytes to copy. */
cudaError_t gr_k_moments(const struct gr_kjob *j, double *out, cudaStream_t st);

/* Have j, the last pass of an op by moments over an input of in_dtype, write its outputs' float64
 * answers in place of their states where its kernel can (the fast variant along axis 0 or over
 * short rows): one write of 8 bytes an output instead of the state's, read again by
 * gr_k_moments. 1 if so. */
int gr_k_answer(struct gr_kjob *j, int in_dtype);

/* Turn n host copies of the device states into results r[first .. first+n) (r allocated by
 * the caller with gr_result_alloc for gr_k_nout outputs). count = elements per output (mean). */
void gr_k_finish(const struct gr_kjob *j, const void *states, int64_t n, int64_t count,
                 struct gr_result *r, int64_t first);

#ifdef __cplusplus
}
#endif

#endif
