/* stage.h: filling pinned staging buffers from a job's input on several threads (OpenMP) and
 * handing each piece on as soon as it is filled; called by a GPU worker thread for its own lane. */
#ifndef GR_STAGE_H
#define GR_STAGE_H

#include "common/gr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* len bytes for dst: from src + off, or from file fd at off when fd > 0. */
struct gr_piece {
    void *dst;
    const void *src;
    int fd;
    int64_t off;
    size_t len;
};

/* Piece k of a pipeline: before() says what to fill (and waits until its buffer is free),
 * after() starts its copy. Both return 0, or nonzero to stop the pipeline. */
typedef int (*gr_stage_fn)(void *ctx, int64_t k, struct gr_piece *p);

/* Pieces 0..n-1 on up to `threads` threads. Piece k uses buffer slot k % nslots, and every
 * slot belongs to one thread, so a slot's uses never overlap. GR_OK; GR_EIO when a read
 * failed or the file is short (e filled); GR_ECUDA when before/after stopped it (the caller
 * knows why, e untouched). */
int gr_stage_pipeline(int64_t n, int nslots, int threads, gr_stage_fn before, gr_stage_fn after, void *ctx,
                      struct gr_err *e);

#ifdef __cplusplus
}
#endif

#endif
