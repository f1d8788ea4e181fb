/* submit.c: jobs accepted into the pipeline: a submission, all or none (its queue slots reserved,
 * its inserts queued in the store, then its jobs queued), and the jobs the store holds as pending,
 * queued again (recovery). An HTTP thread submits; a big batch's render threads touch only its new
 * jobs, and are joined before it is queued. Recovery runs at start-up and on the cluster thread. */
#include "server/jobs_internal.h"

#include "common/buf.h"
#include "common/spans.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "server/job_doc.h"
#include "server/log.h"
#include "server/tenants.h"

#include <stdlib.h>
#include <string.h>

/* New jobs js[from, to) stamped as accepted and rendered into docs (a deferred job's first write
 * is its end: none); failed set if memory ran out. */
struct render_ctx {
    struct gr_job **js;
    char **docs;
    int failed; /* atomic */
};

static void render_span(void *ctx, int from, int to)
{
    struct render_ctx *c = ctx;
    for (int k = from; k < to && !__atomic_load_n(&c->failed, __ATOMIC_RELAXED); k++) {
        /* the queue stage starts once the job is accepted, not when its body began to parse */
        c->js[k]->created_at = gr_now();
        if (!c->js[k]->deferred && !(c->docs[k] = gr_job_render(c->js[k])))
            __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
    }
}

/* Render the n new jobs js for the store, GR_OK or GR_ENOMEM. They are not shared yet, so no
 * lock is needed, and a big batch is cut into spans of at least 4,096 rendered on threads of
 * their own: about 5 µs a job on one thread was a fifth of a 100,000-job batch's 202. */
static int render_new(struct gr_job **js, char **docs, int n)
{
    struct render_ctx c = {js, docs, 0};
    gr_spans(n, 4096, render_span, &c);
    return c.failed ? GR_ENOMEM : GR_OK;
}

/* A batch's first hundred are logged: the log is no list of a million. */
#define LOGGED 100

/* The backends the first jobs of js were queued for, read under mu (a worker moves a job off a
 * broken GPU under mu once it is queued): NULL for one offered to the store. */
static void queued_for(struct gr_job **js, int n, const char *name[LOGGED])
{
    for (int k = 0; k < n && k < LOGGED; k++)
        name[k] = js[k]->offered ? NULL : js[k]->backend->name;
}

static void log_submitted(struct gr_job **js, int n, const char *const name[LOGGED])
{
    for (int k = 0; k < n && k < LOGGED; k++)
        if (!name[k])
            gr_log(GR_LOG_INFO, "job %s offered to %s", js[k]->id, js[k]->offer[0] ? js[k]->offer : "any replica");
        else
            gr_log(GR_LOG_INFO, "job %s queued for %s", js[k]->id, name[k]);
}

int gr_jobs_submit(struct gr_job **js, int n, struct gr_buf *accepted, struct gr_err *e)
{
    char **docs = calloc((size_t)n, sizeof *docs);
    int need[MAX_BACKENDS] = {0}, added = 0, rc = docs ? GR_OK : gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    if (rc == GR_OK && render_new(js, docs, n) != GR_OK)
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    pthread_mutex_lock(&gr_jobs_mu);
    for (int k = 0; rc == GR_OK && k < n; k++) {
        struct queue *q = gr_queue_of(js[k]->backend);
        if (!q || q->count + q->reserved + need[gr_queue_dev(q)] >= gr_jobs_capacity())
            rc = gr_fail(e, GR_EFULL, NULL, "the queue for %s is full (%d jobs); retry after a second",
                         js[k]->backend ? js[k]->backend->name : "?", gr_jobs_capacity());
        else if (gr_tenant_add_job(js[k]->tenant, 0, e) == GR_OK)
            need[gr_queue_dev(q)] += !js[k]->offered, added++;
        else
            rc = e->code;
    }
    if (rc != GR_OK) { /* all or none */
        for (int k = 0; k < added; k++)
            gr_tenant_drop_job(js[k]->tenant);
        pthread_mutex_unlock(&gr_jobs_mu);
        for (int k = 0; docs && k < n; k++)
            free(docs[k]);
        free(docs);
        return rc;
    }
    /* waited jobs whose first write is their end (no insert to queue first, no list to answer)
     * are queued in this hold of mu: one hold less for the lock every thread meets */
    int direct = !accepted && !gr_queues_stopping;
    for (int k = 0; k < n; k++)
        direct &= js[k]->deferred == 1 && !js[k]->offered;
    for (int k = 0; k < n; k++) {
        struct gr_job *j = js[k];
        j->counted = 1;
        j->deferred &= !gr_queues_stopping; /* no worker takes it before the shutdown: stored now, answered 202 */
        if (j->offered) { /* the store's to hand out: waited on here as a stand-in (the table's reference) */
            struct gr_job **p = gr_watch_link(j->id);
            j->hnext = NULL;
            *p = j;
            gr_job_ref(j);
        } else {
            if (direct) {
                gr_job_ref(j);
                gr_queue_push(gr_queue_of(j->backend), j);
            } else {
                gr_queue_of(j->backend)->reserved++;
            }
            gr_inflight_add(j);
        }
    }
    const char *name[LOGGED];
    if (direct)
        queued_for(js, n, name);
    pthread_mutex_unlock(&gr_jobs_mu);
    if (direct) {
        free(docs); /* none rendered: deferred */
        log_submitted(js, n, name);
        return GR_OK;
    }
    for (int k = 0; k < n; k++) /* deferred no more (a shutdown began): not queued yet, so unchanged */
        if (!js[k]->deferred && !docs[k])
            docs[k] = gr_job_render(js[k]);
    for (int k = 0; accepted && k < n; k++) { /* a deferred job's first write is later: render it */
        char *own = docs[k] ? NULL : gr_job_render(js[k]);
        const char *doc = docs[k] ? docs[k] : own ? own : "null";
        gr_buf_add(accepted, k ? "," : "[", 1);
        gr_buf_add(accepted, doc, strlen(doc));
        free(own);
    }
    if (accepted)
        gr_buf_add(accepted, "]", 1);
    /* the inserts are queued in the store before a worker can queue any update of them */
    gr_commits_insert(js, docs, n, GR_QUEUED);
    free(docs);
    pthread_mutex_lock(&gr_jobs_mu);
    for (int k = 0; k < n; k++)
        if (!js[k]->offered) {
            struct queue *q = gr_queue_of(js[k]->backend);
            q->reserved--;
            gr_job_ref(js[k]);
            gr_queue_push(q, js[k]);
        }
    queued_for(js, n, name);
    pthread_mutex_unlock(&gr_jobs_mu);
    log_submitted(js, n, name);
    return GR_OK;
}

struct recover_ctx {
    int count;
};

static void recover_one(void *ctx, const char *id, const char *doc, const void *input, size_t bytes, int64_t epoch)
{
    struct recover_ctx *rc = ctx;
    struct gr_job *j;
    struct gr_err e = {0};
    pthread_mutex_lock(&gr_jobs_mu);
    struct gr_job *held = gr_inflight_find(id);
    if (held) /* this replica's own lease ran out while the job waited or ran: the same job, claimed anew */
        __atomic_store_n(&held->epoch, epoch, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&gr_jobs_mu);
    if (held)
        return;
    if (gr_job_restore(id, doc, input, bytes, &j, &e) != GR_OK) {
        gr_log(GR_LOG_ERROR, "recovery: %s", e.msg);
        return;
    }
    j->epoch = epoch;
    /* a job's device may be gone (a GPU job restarted on a CPU-only machine): run it on the CPU */
    if (gr_jobs_route(j->device, j->op, j->dataset, &j->backend, &e) != GR_OK)
        j->backend = gr_jobs_backend(0);
    pthread_mutex_lock(&gr_jobs_mu);
    j->counted = gr_tenant_add_job(j->tenant, 1, &e) == GR_OK; /* accepted before: past the quota too */
    j->dataset_pinned = j->dataset[0] && gr_pin_change(j->dataset, 1, &e) == GR_OK;
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        j->mm[k].pinned = j->mm[k].dataset[0] && gr_pin_change(j->mm[k].dataset, 1, &e) == GR_OK;
    gr_inflight_add(j);
    gr_queue_push(gr_queue_of(j->backend), j); /* recovery ignores the capacity: these were accepted */
    pthread_mutex_unlock(&gr_jobs_mu);
    rc->count++;
}

int gr_jobs_recover(int limit, int kinds, struct gr_err *e)
{
    struct recover_ctx rc = {0};
    const char *device = kinds == GR_JOBS_CPU ? "cpu" : kinds == GR_JOBS_GPU ? "gpu" : NULL;
    if (gr_store_load_pending(gr_jobs_store, limit, device, recover_one, &rc, e) != GR_OK)
        return -1;
    return rc.count;
}
