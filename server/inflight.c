/* inflight.c: the in-flight table (jobs from submission until their final state is stored), the
 * stand-ins watched for jobs other replicas hold, and lookup and cancel by id. All of it under mu;
 * the store's listener thread tells of other replicas' changes (gr_jobs_changed) and asks for
 * cancels (gr_jobs_cancel_asked), the HTTP threads look up and cancel. */
#include "server/jobs_internal.h"

#include "server/job_doc.h"
#include "server/log.h"
#include "server/metrics.h"

#include <stdio.h>
#include <string.h>

/* --- in-flight table (mu held) --- */

struct gr_job *gr_inflight_table[NBUCKETS];

static unsigned bucket(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h % NBUCKETS;
}

struct gr_job *gr_inflight_find(const char *id)
{
    for (struct gr_job *j = gr_inflight_table[bucket(id)]; j; j = j->hnext)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

void gr_inflight_add(struct gr_job *j)
{
    unsigned b = bucket(j->id);
    j->hnext = gr_inflight_table[b];
    gr_inflight_table[b] = j;
    gr_job_ref(j);
}

void gr_inflight_remove(struct gr_job *j)
{
    for (struct gr_job **p = &gr_inflight_table[bucket(j->id)]; *p; p = &(*p)->hnext)
        if (*p == j) {
            *p = j->hnext;
            gr_job_unref(j); /* never the last reference: the caller holds one */
            return;
        }
}

/* --- jobs other replicas hold, waited on here (mu held) --- */

/* A stand-in per such job that someone waits on: waiters park on it as on a job in flight,
 * and the store's word that its status changed (gr_jobs_changed) fires them. */
static struct gr_job *watched[NBUCKETS];

struct gr_job **gr_watch_link(const char *id)
{
    struct gr_job **p = &watched[bucket(id)];
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->hnext;
    return p;
}

struct gr_job *gr_jobs_watch(const char *id, int status)
{
    pthread_mutex_lock(&gr_jobs_mu);
    struct gr_job **p = gr_watch_link(id), *w = *p;
    if (!w && (w = gr_job_new())) {
        snprintf(w->id, sizeof w->id, "%s", id);
        w->status = w->committed = status; /* waiters wait for a change from it */
        *p = w;                            /* the table's reference */
    }
    if (w)
        gr_job_ref(w); /* the caller's */
    pthread_mutex_unlock(&gr_jobs_mu);
    return w;
}

/* The stand-in *p told that its job changed (mu held): unlinked, its waiters on *fired; the
 * table's reference is the caller's now. */
static struct gr_job *watch_fire(struct gr_job **p, struct gr_waiter **fired)
{
    struct gr_job *w = *p;
    *p = w->hnext;
    w->committed = -3; /* its state is the store's: the waiters read it there */
    gr_waiters_collect(w, gr_mono_ms(), fired);
    return w;
}

void gr_jobs_changed(void *ctx, const char *id)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *gone = NULL;
    pthread_mutex_lock(&gr_jobs_mu);
    if (!id[0]) { /* the store's word may have been missed: every stand-in */
        for (int b = 0; b < NBUCKETS; b++)
            while (watched[b]) {
                struct gr_job *w = watch_fire(&watched[b], &fired);
                w->hnext = gone;
                gone = w;
            }
    } else if (*gr_watch_link(id)) {
        gone = watch_fire(gr_watch_link(id), &fired);
        gone->hnext = NULL;
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_waiters_wake(fired);
    while (gone) {
        struct gr_job *next = gone->hnext;
        gr_job_unref(gone);
        gone = next;
    }
}

/* The in-flight job id if it is tenant scope's (NULL: anyone's) (mu held). */
static struct gr_job *scoped_find(const char *id, const char *scope)
{
    struct gr_job *j = gr_inflight_find(id);
    return j && (!scope || !strcmp(j->tenant, scope)) ? j : NULL;
}

struct gr_job *gr_jobs_find(const char *id, const char *scope)
{
    pthread_mutex_lock(&gr_jobs_mu);
    struct gr_job *j = scoped_find(id, scope);
    if (j)
        gr_job_ref(j);
    pthread_mutex_unlock(&gr_jobs_mu);
    return j;
}

int gr_jobs_cancel(const char *id, const char *scope, struct gr_job **out, struct gr_err *e)
{
    *out = NULL;
    char *doc;
    pthread_mutex_lock(&gr_jobs_mu);
    struct gr_job *j = scoped_find(id, scope);
    if (!j) {
        pthread_mutex_unlock(&gr_jobs_mu);
        return GR_ENOTFOUND;
    }
    if (j->status != GR_QUEUED) {
        int st = j->status;
        pthread_mutex_unlock(&gr_jobs_mu);
        if (GR_TERMINAL(st))
            return gr_fail(e, GR_ECONFLICT, NULL, "job %s has just ended and its end is being stored: send the "
                                                  "DELETE again in a moment to delete it", id);
        return gr_fail(e, GR_ECONFLICT, NULL, "job %s is %s; only queued jobs can be canceled, and finished ones "
                                              "deleted", id, gr_status_name(st));
    }
    j->finished_at = gr_now();
    j->t.total = (j->finished_at - j->created_at) * 1e3;
    j->status = GR_CANCELED;
    doc = gr_job_render(j);
    gr_job_ref(j);
    int dev = gr_queue_dev(gr_queue_of(j->backend));
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_metrics_job_end(dev, j->op, GR_CANCELED, NULL, 0);
    gr_commits_final(j, doc);
    gr_log(GR_LOG_INFO, "job %s canceled", id);
    *out = j;
    return GR_OK;
}

void gr_jobs_cancel_asked(void *ctx, const char *id)
{
    struct gr_job *j = NULL;
    struct gr_err e = {0};
    if (gr_jobs_cancel(id, NULL, &j, &e) == GR_OK) {
        gr_log(GR_LOG_INFO, "job %s canceled, as another replica asked", id);
        gr_job_unref(j);
    }
}

void gr_inflight_drop(void)
{
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct gr_job *j = gr_inflight_table[b], *n; j; j = n) {
            n = j->hnext;
            gr_job_unref(j);
        }
        for (struct gr_job *j = watched[b], *n; j; j = n) {
            n = j->hnext;
            gr_job_unref(j);
        }
        gr_inflight_table[b] = watched[b] = NULL;
    }
}
