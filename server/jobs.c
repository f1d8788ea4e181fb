/* jobs.c: the job pipeline (jobs.h) as a whole: the one jobs lock, the store it writes to, and
 * its start and stop, in order. One mutex (`mu`, gr_jobs_mu) guards all the pipeline's state,
 * held only for short bookkeeping: never across a kernel, a store call or a waiter's wake. Its
 * parts, each a file (jobs_internal.h): inflight.c, pins.c, waiters.c, commits.c, queues.c and
 * submit.c. Start and stop run on the main thread. */
#include "server/jobs_internal.h"

#include "db/store.h"

pthread_mutex_t gr_jobs_mu = GR_MUTEX_INITIALIZER;
struct gr_store *gr_jobs_store;
static int capacity;
static gr_jobs_running_fn *on_running; /* set once before the workers start */

void gr_jobs_on_running(gr_jobs_running_fn *fn) { on_running = fn; }

void gr_jobs_told_running(const struct gr_job *j)
{
    if (on_running)
        on_running(j->id, j->tenant, gr_op_name(j->op), j->device, j->started_at);
}

int gr_jobs_start(struct gr_store *s, struct gr_backend **backends, int nbackends, int queue_capacity,
                  struct gr_err *e)
{
    if (nbackends < 1 || nbackends > MAX_BACKENDS)
        return gr_fail(e, GR_EINTERNAL, NULL, "%d backends (1 to %d supported)", nbackends, MAX_BACKENDS);
    gr_jobs_store = s;
    gr_job_unpin = gr_jobs_unpin_dataset;
    gr_store_after_commits(s, gr_commits_told);
    capacity = queue_capacity;
    gr_waiters_init(); /* before the workers: they fire waiters */
    int rc = gr_queues_start(backends, nbackends, e);
    return rc == GR_OK ? gr_waiters_start(e) : rc;
}

int gr_jobs_capacity(void) { return capacity; } /* set once at start-up */

void gr_jobs_stop(void)
{
    gr_waiters_stop();
    /* drop what is still queued or in flight: the store has it as queued */
    gr_queues_drop();
    gr_inflight_drop();
}
