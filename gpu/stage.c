/* stage.c: filling pinned staging buffers on several threads, so that reading a dataset from the
 * page cache keeps up with the PCIe copies (one thread's pread is well below the bus). Each piece's
 * copy starts as soon as that piece is filled: no thread waits for a whole batch. Stateless. */
#include "gpu/stage.h"

#include <errno.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

static int fill_one(const struct gr_piece *p)
{
    if (p->fd <= 0) {
        memcpy(p->dst, (const char *)p->src + p->off, p->len);
        return 0;
    }
    for (size_t done = 0; done < p->len;) {
        ssize_t got = pread(p->fd, (char *)p->dst + done, p->len - done, (off_t)(p->off + (int64_t)done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? errno : -1; /* -1: the file ended early */
        done += (size_t)got;
    }
    return 0;
}

/* The pieces whose slot belongs to thread t of nt, in order. Returns 0, a read error (errno or -1),
 * or -2 when a callback stopped it. *stop is shared: once set, every thread ends. */
static int run_slots(int64_t n, int nslots, int t, int nt, gr_stage_fn before, gr_stage_fn after, void *ctx,
                     int *stop)
{
    for (int64_t k = 0; k < n; k++) {
        if ((int)(k % nslots) % nt != t)
            continue;
        if (__atomic_load_n(stop, __ATOMIC_RELAXED))
            return 0;
        struct gr_piece p;
        int r = before(ctx, k, &p) ? -2 : fill_one(&p);
        if (!r && after(ctx, k, &p))
            r = -2;
        if (r) {
            __atomic_store_n(stop, 1, __ATOMIC_RELAXED);
            return r;
        }
    }
    return 0;
}

int gr_stage_pipeline(int64_t n, int nslots, int threads, gr_stage_fn before, gr_stage_fn after, void *ctx,
                      struct gr_err *e)
{
    int why = 0, stop = 0; /* why: any one thread's failure */
    int team = threads < nslots ? threads : nslots;
    team = n < team ? (int)n : team;
    if (team <= 1) /* small inputs: no team to start */
        why = run_slots(n, nslots, 0, 1, before, after, ctx, &stop);
    else {
#pragma omp parallel num_threads(team)
        {
            int r = run_slots(n, nslots, omp_get_thread_num(), omp_get_num_threads(), before, after, ctx, &stop);
            if (r) {
#pragma omp atomic write
                why = r;
            }
        }
    }
    if (why == -2)
        return GR_ECUDA;
    if (why)
        return gr_fail(e, GR_EIO, NULL, "cannot read the job's input from its dataset file: %s",
                       why > 0 ? strerror(why) : "the file is shorter than the dataset");
    return GR_OK;
}
