/* commits.c: the job pipeline's writes to the store and what they come to: each job's insert,
 * its final state (written again when the store refuses it for a passing reason), a deferred
 * job's insert, and what the store has committed for a job, fenced-out runs' results included.
 * The store's writer threads each own their `told`, a commit's answers, which they hand in under
 * mu at the commit's end; a job's committed state is read and changed under mu. */
#include "server/jobs_internal.h"

#include "db/store.h"
#include "server/job_doc.h"
#include "server/log.h"
#include "server/tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_cond_t undefer_cv = PTHREAD_COND_INITIALIZER; /* a deferred job's insert is queued */

/* Kept results of runs fenced out: no job names them, the sweep deletes them (mu held). */
#define MAX_ORPHANS 256
static char orphans[MAX_ORPHANS][24];
static int norphans;

static void orphan(const char *dataset)
{
    if (dataset[0] && norphans < MAX_ORPHANS)
        snprintf(orphans[norphans++], sizeof orphans[0], "%s", dataset);
    else if (dataset[0])
        gr_log(GR_LOG_WARN, "dataset %s of a fenced-out run is left: delete it by hand", dataset);
}

int gr_jobs_take_orphans(char ids[][24], int max)
{
    pthread_mutex_lock(&gr_jobs_mu);
    int n = norphans < max ? norphans : max;
    memcpy(ids, orphans[norphans - n], (size_t)n * sizeof orphans[0]);
    norphans -= n;
    pthread_mutex_unlock(&gr_jobs_mu);
    return n;
}

struct commit {
    struct gr_job *job;
    int status, code;
    struct commit *next;
};

/* The store's answers on_commit has gathered in this commit, oldest first: each writer thread's
 * own (a store may have several). */
static _Thread_local struct commit *told, **told_tail;

/* A final state the store refused for a passing reason (a deadlock, a timeout, a full disk) is
 * written again this many times before the job is given up. Given up, it leaves this replica's
 * table: on a shared store the stored row is still this replica's, queued, which reconcile
 * (cluster.c) then lets go for a replica to run again; SQLite runs it again at the next start. */
#define FINAL_TRIES 3

/* Record that the store has (code GR_OK) or has not kept j at status; what waits on it goes on
 * *fired, a final state to write again on *retry (referenced) (mu held). */
void gr_commits_record(struct gr_job *j, int status, int code, struct gr_waiter **fired,
                       struct gr_job **retry)
{
    if (code == GR_OK) {
        if (j->committed == -1)
            j->stored_ms = gr_mono_ms();
        if (j->committed == -1 && status == GR_QUEUED && j->status == GR_RUNNING) /* it began before this */
            gr_jobs_told_running(j);
        if (status > j->committed && j->committed != -3) /* an offer's end may be told before its insert's commit */
            j->committed = status;
    } else if (code == GR_ENOTFOUND && j->committed >= 0 && gr_store_shared(gr_jobs_store)) {
        /* fenced (store.h): another replica canceled the job, or claimed it once this one's lease
         * ran out; the store's state is the one kept, and what this run made goes */
        gr_log(GR_LOG_WARN, "job %s: another replica canceled it, or claimed it once this one's lease ran out; its "
                            "%s here is dropped",
               j->id, gr_status_name(status));
        j->committed = -3;
        orphan(j->result_dataset);
        orphan(j->indices_dataset);
    } else if (GR_TERMINAL(status) && j->committed >= 0 && j->final_doc && j->final_tries < FINAL_TRIES) {
        j->final_tries++;
        gr_log(GR_LOG_WARN, "job %s: the store did not keep status %s%s; writing it again (%d of %d)", j->id,
               gr_status_name(status), code == GR_ENOMEM ? " (the disk is full)" : "", j->final_tries, FINAL_TRIES);
        gr_job_ref(j);
        j->retry_next = *retry;
        *retry = j;
    } else {
        gr_log(GR_LOG_ERROR, "job %s: the store did not keep status %s%s", j->id, gr_status_name(status),
               code == GR_ENOMEM ? " (the disk is full)" : "");
        /* the first refusal says why (later writes fail for want of the row), or a final state
         * given up on */
        if (j->committed == -1 || (j->committed >= 0 && GR_TERMINAL(status))) {
            j->committed = -2;
            j->refused = code;
        }
    }
    /* the dataset is free to delete, and the tenant's count lower, before anyone hears that the
     * job ended */
    int gone = GR_TERMINAL(j->committed) || j->committed == -2 || j->committed == -3 || j->offered;
    if (gone) {
        gr_unpin_job(j);
        if (j->counted)
            gr_tenant_drop_job(j->tenant);
        j->counted = 0;
    }
    gr_waiters_collect(j, gr_mono_ms(), fired);
    if (gone)
        gr_inflight_remove(j);
    struct gr_job **p = gr_watch_link(j->id);
    if (j->offered && code != GR_OK && *p == j) { /* an offer the store refused: no end to be told */
        *p = j->hnext;
        gr_job_unref(j);
    }
}

static void store_write(struct gr_job *j, char *doc, int status);

/* Queue again the final states of list retry, each as it was first written (mu not held). */
void gr_commits_write_again(struct gr_job *retry)
{
    while (retry) {
        struct gr_job *j = retry, *next = j->retry_next;
        pthread_mutex_lock(&gr_jobs_mu);
        char *doc = j->final_doc ? strdup(j->final_doc) : NULL;
        int status = j->status;
        pthread_mutex_unlock(&gr_jobs_mu);
        store_write(j, doc, status);
        gr_job_unref(j);
        retry = next;
    }
}

static void committed(struct gr_job *j, int status, int code)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *retry = NULL;
    pthread_mutex_lock(&gr_jobs_mu);
    gr_commits_record(j, status, code, &fired, &retry);
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_waiters_wake(fired);
    gr_commits_write_again(retry);
}

/* Runs on the store's writer thread once a job's write is committed (or refused): kept for
 * gr_commits_told, at the commit's end. */
static void on_commit(void *ctx, int code)
{
    struct commit *c = ctx;
    c->code = code;
    c->next = NULL;
    if (!told_tail)
        told_tail = &told;
    *told_tail = c;
    told_tail = &c->next;
}

/* After each commit's callbacks, on the writer: its jobs' answers, up to TOLD_HOLD a hold of mu
 * (a 100,000-job batch's commit must not stall every other thread for its whole length). */
#define TOLD_HOLD 256
void gr_commits_told(void)
{
    struct commit *list = told;
    told = NULL;
    told_tail = &told;
    while (list) {
        struct gr_waiter *fired = NULL;
        struct gr_job *retry = NULL;
        struct commit *c = list;
        pthread_mutex_lock(&gr_jobs_mu);
        for (int k = 0; c && k < TOLD_HOLD; k++, c = c->next)
            gr_commits_record(c->job, c->status, c->code, &fired, &retry);
        pthread_mutex_unlock(&gr_jobs_mu);
        gr_waiters_wake(fired);
        gr_commits_write_again(retry);
        while (list != c) {
            struct commit *next = list->next;
            gr_job_unref(list->job);
            free(list);
            list = next;
        }
    }
}

/* A write that was never queued: told at once, on the caller's thread. */
static void commit_refused(struct commit *c, int code)
{
    committed(c->job, c->status, code);
    gr_job_unref(c->job);
    free(c);
}

/* A commit record for j at status, referencing j; NULL (doc freed, j told GR_ENOMEM) if memory is out. */
static struct commit *commit_of(struct gr_job *j, char *doc, int status)
{
    struct commit *c = doc ? malloc(sizeof *c) : NULL;
    if (!c) {
        free(doc);
        committed(j, status, GR_ENOMEM);
        return NULL;
    }
    gr_job_ref(j);
    *c = (struct commit){j, status, GR_OK, NULL};
    return c;
}

/* Queue the write of j's current state (doc rendered under mu by the caller; ours now). */
static void store_write(struct gr_job *j, char *doc, int status)
{
    struct commit *c = commit_of(j, doc, status);
    int rc = c ? gr_store_update_job(gr_jobs_store, j->id, j->tenant, gr_status_name(status), doc,
                                     __atomic_load_n(&j->epoch, __ATOMIC_RELAXED), on_commit, c)
               : GR_OK;
    if (rc != GR_OK)
        commit_refused(c, rc);
}

/* Queue the inserts of the n jobs js at status (docs ours now) as one all-or-nothing write: new
 * jobs, queued with their inputs, or a deferred job's one write, its final state. Deferred jobs
 * among new ones are left for that write (their docs freed). */
void gr_commits_insert(struct gr_job **js, char **docs, int n, int status)
{
    struct gr_store_job *v = calloc((size_t)n, sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct gr_job *j = js[i];
        struct commit *c = status == GR_QUEUED && j->deferred == 1 ? (free(docs[i]), NULL)
                           : v                                  ? commit_of(j, docs[i], status)
                                                                : NULL;
        if (!c) {
            if (!v) {
                free(docs[i]);
                committed(j, status, GR_ENOMEM);
            }
            continue;
        }
        int queued = status == GR_QUEUED; /* an input is kept only to run the job again */
        v[k++] = (struct gr_store_job){j->id, j->op, gr_status_name(status), docs[i], queued ? j->input : NULL,
                                       queued && j->input ? j->input_bytes : 0,
                                       {j->tenant, j->idem_key, j->idem_fp, j->offered ? j->offer : NULL}, c};
    }
    int rc = k ? gr_store_insert_jobs(gr_jobs_store, v, k, on_commit) : GR_OK;
    for (int i = 0; rc != GR_OK && i < k; i++)
        commit_refused(v[i].ctx, rc);
    free(v);
}

/* Mark the datasets a job that ran read as used now, queued before its final state so that
 * whoever hears of its end finds the mark. */
static void store_used(const struct gr_job *j)
{
    if (j->status != GR_SUCCEEDED && j->status != GR_FAILED)
        return;
    double now = gr_now();
    if (j->dataset[0])
        gr_store_dataset_used(gr_jobs_store, j->dataset, now, j->id);
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        if (j->mm[k].dataset[0])
            gr_store_dataset_used(gr_jobs_store, j->mm[k].dataset, now, j->id);
}

/* Queue the write of j's final state (doc ours now): its first write, an insert, if it is still
 * deferred (the timer may be inserting it as queued just now: wait for that), else an update. */
void gr_commits_final(struct gr_job *j, char *doc)
{
    char *copy = doc ? strdup(doc) : NULL; /* what its answers send: a final job no longer changes */
    pthread_mutex_lock(&gr_jobs_mu);
    free(j->final_doc);
    j->final_doc = copy;
    while (j->deferred == 2)
        pthread_cond_wait(&undefer_cv, &gr_jobs_mu);
    int first = j->deferred;
    j->deferred = 0;
    pthread_mutex_unlock(&gr_jobs_mu);
    store_used(j);
    if (first)
        gr_commits_insert(&j, &doc, 1, j->status);
    else
        store_write(j, doc, j->status);
}

/* Queue the inserts, as queued, of the n (<= 64) deferred jobs js (mu held; released and taken
 * again). */
void gr_commits_insert_undeferred(struct gr_job **js, int n)
{
    char *docs[64];
    for (int k = 0; k < n; k++) {
        js[k]->deferred = 2; /* its worker's final write waits for this insert to be queued */
        gr_job_ref(js[k]);
        docs[k] = gr_job_render_as(js[k], GR_QUEUED); /* as its row says, also if it has just ended */
    }
    if (!n)
        return;
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_commits_insert(js, docs, n, GR_QUEUED);
    pthread_mutex_lock(&gr_jobs_mu);
    for (int k = 0; k < n; k++)
        js[k]->deferred = 0;
    pthread_cond_broadcast(&undefer_cv);
    pthread_mutex_unlock(&gr_jobs_mu);
    for (int k = 0; k < n; k++)
        gr_job_unref(js[k]);
    pthread_mutex_lock(&gr_jobs_mu);
}

void gr_jobs_undefer(struct gr_job **js, int n)
{
    /* those at 2 are being inserted by the timer already: the caller waits for their commit */
    pthread_mutex_lock(&gr_jobs_mu);
    for (int k = 0; k < n;) {
        struct gr_job *take[64];
        int m = 0;
        for (; k < n && m < 64; k++) /* mu held from here until gr_commits_insert_undeferred marks them */
            if (js[k]->deferred == 1)
                take[m++] = js[k];
        gr_commits_insert_undeferred(take, m);
    }
    pthread_mutex_unlock(&gr_jobs_mu);
}

int gr_jobs_committed(struct gr_job *j)
{
    pthread_mutex_lock(&gr_jobs_mu);
    int c = j->committed;
    pthread_mutex_unlock(&gr_jobs_mu);
    return c;
}

int gr_jobs_settled(struct gr_job *j)
{
    int c = gr_jobs_committed(j);
    return GR_TERMINAL(c) || c == -2 || c == -3;
}

char *gr_jobs_render(struct gr_job *j, int *committed, int *status)
{
    pthread_mutex_lock(&gr_jobs_mu);
    *committed = j->committed;
    *status = j->status;
    if (GR_TERMINAL(j->status) && j->committed >= -1 && !GR_TERMINAL(j->committed)) {
        /* ended, but its end is not durable yet: told as running until it is, so that no one
         * hears of an end a crash could take back (nor finds its dataset still held by it) */
        *status = GR_RUNNING; /* not a copy of j: its reference count changes under other threads */
        char *doc = gr_job_render_as(j, GR_RUNNING);
        pthread_mutex_unlock(&gr_jobs_mu);
        return doc;
    }
    if (GR_TERMINAL(*status) && j->final_doc) { /* rendered once, at its end */
        char *doc = strdup(j->final_doc);
        pthread_mutex_unlock(&gr_jobs_mu);
        return doc;
    }
    if (GR_TERMINAL(*status)) { /* a final job no longer changes: render it without the lock */
        pthread_mutex_unlock(&gr_jobs_mu);
        return gr_job_render(j);
    }
    char *doc = gr_job_render(j);
    pthread_mutex_unlock(&gr_jobs_mu);
    return doc;
}
