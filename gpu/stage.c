/* stage.c: filling pinned staging buffers in parallel, so that reading a dataset from the page
 * cache keeps up with the PCIe copies (one thread's pread is well below the bus). Stateless. */
#include "stage.h"

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

int gr_stage_fill(const struct gr_piece *p, int n, struct gr_err *e)
{
    int why = 0; /* any one piece's failure: errno, or -1 */
    if (n == 1)  /* small inputs: no team to start */
        why = fill_one(p);
    else {
#pragma omp parallel for num_threads(n) schedule(static, 1)
        for (int i = 0; i < n; i++) {
            int r = fill_one(&p[i]);
            if (r) {
#pragma omp atomic write
                why = r;
            }
        }
    }
    if (why)
        return gr_fail(e, GR_EIO, NULL, "cannot read the job's input from its dataset file: %s",
                       why > 0 ? strerror(why) : "the file is shorter than the dataset");
    return GR_OK;
}
