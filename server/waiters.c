/* waiters.c: parked waiters (gr_jobs_wait) and the timer thread that fires them at their deadline,
 * storing first, as queued, a deferred job a deadline cannot wait for. Waiters are parked and
 * collected under mu, by whichever thread changes their job; wake() runs after, without it. The
 * timer thread owns the deadlines' firing. */
#include "server/jobs_internal.h"

#include <time.h>

static pthread_cond_t timer_cv;
static pthread_t timer_thread;
static int waking_all, timer_stop, timer_started;
static struct gr_waiter *timed; /* waiters with a deadline */
static int parked;

/* --- waiters (mu held) --- */

static int satisfied(const struct gr_waiter *w, double now)
{
    const struct gr_job *j = w->job;
    if (j->committed == -2 || j->committed == -3) /* refused, or claimed away: answer now */
        return 1;
    if (j->committed < 0)
        return 0;
    if (waking_all || (w->deadline_ms > 0 && now >= w->deadline_ms))
        return 1;
    switch (w->until) {
    case GR_UNTIL_DURABLE:
        return 1;
    case GR_UNTIL_CHANGED:
        /* running is never stored (a crash re-queues running jobs anyway): that change is
         * seen in memory; a final state only once it is committed */
        return (j->status != w->seen && !GR_TERMINAL(j->status)) || (GR_TERMINAL(j->committed) && j->committed != w->seen);
    default:
        return GR_TERMINAL(j->committed);
    }
}

static void timed_remove(struct gr_waiter *w)
{
    if (!w->tpprev)
        return;
    *w->tpprev = w->tnext;
    if (w->tnext)
        w->tnext->tpprev = w->tpprev;
    w->tpprev = NULL;
}

/* Move the waiters of j that are satisfied onto *fired (mu held). */
void gr_waiters_collect(struct gr_job *j, double now, struct gr_waiter **fired)
{
    for (struct gr_waiter **p = &j->waiters; *p;) {
        struct gr_waiter *w = *p;
        if (!satisfied(w, now)) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        timed_remove(w);
        w->fired = 1;
        w->next = *fired;
        *fired = w;
        parked--;
    }
}

/* Wake collected waiters, without mu: wake() resumes an HTTP connection. */
void gr_waiters_wake(struct gr_waiter *w)
{
    while (w) {
        struct gr_waiter *next = w->next;
        w->wake(w);
        w = next;
    }
}

void gr_jobs_wait(struct gr_waiter *w)
{
    struct gr_waiter *fired = NULL;
    pthread_mutex_lock(&gr_jobs_mu);
    w->fired = 0;
    w->tpprev = NULL;
    w->next = w->job->waiters;
    w->job->waiters = w;
    parked++;
    if (w->deadline_ms > 0) {
        w->tnext = timed;
        if (timed)
            timed->tpprev = &w->tnext;
        timed = w;
        w->tpprev = &timed;
        pthread_cond_signal(&timer_cv);
    }
    gr_waiters_collect(w->job, gr_mono_ms(), &fired);
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_waiters_wake(fired);
}

int gr_jobs_parked(void)
{
    pthread_mutex_lock(&gr_jobs_mu);
    int n = parked;
    pthread_mutex_unlock(&gr_jobs_mu);
    return n;
}

/* Store, as queued, deferred jobs whose answer cannot wait for their end any longer: those whose
 * waiter's deadline passed (all 0), or every one (all 1, at shutdown). At most 64 a call; how
 * many (mu held; released and taken again). */
static int undefer(int all, double now)
{
    struct gr_job *js[64];
    int n = 0;
    for (struct gr_waiter *w = timed; !all && w && n < 64; w = w->tnext)
        if (w->deadline_ms <= now && w->job->deferred == 1)
            js[n++] = w->job;
    for (int b = 0; all && b < NBUCKETS && n < 64; b++)
        for (struct gr_job *j = gr_inflight_table[b]; j && n < 64; j = j->hnext)
            if (j->deferred == 1)
                js[n++] = j;
    gr_commits_insert_undeferred(js, n);
    return n;
}

static void *timer_main(void *arg)
{
    pthread_mutex_lock(&gr_jobs_mu);
    while (!timer_stop) {
        double now = gr_mono_ms(), next = now + 1000;
        struct gr_waiter *fired = NULL;
        if (undefer(0, now)) /* their waiters fire once the inserts commit */
            continue;
        for (struct gr_waiter *w = timed, *n; w; w = n) {
            n = w->tnext;
            if (w->deadline_ms <= now)
                gr_waiters_collect(w->job, now, &fired);
            else if (w->deadline_ms < next)
                next = w->deadline_ms;
        }
        if (fired) {
            pthread_mutex_unlock(&gr_jobs_mu);
            gr_waiters_wake(fired);
            pthread_mutex_lock(&gr_jobs_mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double wait_ms = next - now;
        ts.tv_sec += (time_t)(wait_ms / 1000);
        ts.tv_nsec += (long)((wait_ms - (double)(long)(wait_ms / 1000) * 1000) * 1e6);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&timer_cv, &gr_jobs_mu, &ts);
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    return NULL;
}

void gr_jobs_wake_all(void)
{
    struct gr_waiter *fired = NULL;
    pthread_mutex_lock(&gr_jobs_mu);
    waking_all = 1;
    while (undefer(1, 0)) /* stored as queued: they run after a restart */
        ;
    double now = gr_mono_ms();
    for (int b = 0; b < NBUCKETS; b++)
        for (struct gr_job *j = gr_inflight_table[b]; j; j = j->hnext)
            gr_waiters_collect(j, now, &fired);
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_waiters_wake(fired);
}

void gr_waiters_init(void)
{
    waking_all = timer_stop = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&timer_cv, &ca);
    pthread_condattr_destroy(&ca);
}

int gr_waiters_start(struct gr_err *e)
{
    if (pthread_create(&timer_thread, NULL, timer_main, NULL))
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the timer thread");
    pthread_setname_np(timer_thread, "gr-timer");
    timer_started = 1;
    return GR_OK;
}

void gr_waiters_stop(void)
{
    pthread_mutex_lock(&gr_jobs_mu);
    timer_stop = 1;
    pthread_cond_signal(&timer_cv);
    pthread_mutex_unlock(&gr_jobs_mu);
    if (timer_started)
        pthread_join(timer_thread, NULL);
    timer_started = 0;
    pthread_cond_destroy(&timer_cv);
}
