/* stage.h: filling pinned staging buffers from a job's input, many pieces in parallel (OpenMP);
 * called by a GPU worker thread for its own lane's buffers. */
#ifndef GR_STAGE_H
#define GR_STAGE_H

#include "gr.h"

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

/* Fill every piece. GR_OK, or GR_EIO (a read failed or the file is short) with e filled. */
int gr_stage_fill(const struct gr_piece *p, int n, struct gr_err *e);

#ifdef __cplusplus
}
#endif

#endif
