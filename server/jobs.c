/* jobs.c: routing, bounded per-device queues, one worker thread per backend lane, the in-flight
 * table and parked waiters with their timer thread. One mutex (`mu`) guards all of it, held
 * only for short bookkeeping: never across a kernel, a store call or a waiter's wake. The store's
 * writer threads each own their `told`, a commit's answers, which they hand in under mu at the
 * commit's end. A big batch's render threads touch only its new jobs, and are joined before it is queued. */
#include "jobs.h"

#include "backend.h"
#include "bench.h"
#include "buf.h"
#include "dsfile.h"
#include "log.h"
#include "metrics.h"
#include "spans.h"
#include "store.h"
#include "tenants.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BACKENDS 17
#define MAX_LANES 16
/* in-flight table (a batch may put 100k jobs in flight); jobs leave it once their final state
 * is stored */
#define NBUCKETS 65536

/* Launch groups (jobs.h): the jobs' values side by side as the rows of one axis-1 reduction (one
 * copy in, one kernel, one copy out), each row's result its job's. At most group_max jobs of
 * GROUP_JOB_BYTES each. */
#define GROUP_MAX GR_JOBS_GROUP_MAX
#define GROUP_JOB_BYTES (64 << 10) /* larger jobs fill the device alone: they gain nothing */

struct queue;
struct worker {
    struct queue *q;
    int lane;                         /* the backend lane this thread alone uses */
    struct gr_job *taken[GROUP_MAX]; /* the jobs it runs now: one, or a launch group (mu) */
    int ntaken;
    double began; /* when it took them (gr_mono_ms, mu) */
    pthread_t thread;
    int started;
};

struct queue {
    struct gr_job *head, *tail;
    int count, reserved;
    unsigned pushed; /* jobs queued so far (__atomic): watched by an idle worker before it sleeps */
    int watching;    /* idle workers watching pushed now (mu): one at a time, the rest sleep */
    pthread_cond_t cv;
    struct worker workers[MAX_LANES]; /* one per lane: a GPU's lanes run jobs side by side */
    int nworkers;
    double run_ms; /* wall time a job's run took on a lane, recent ones weighted most (mu) */
    struct gr_backend *backend;
};

static pthread_mutex_t mu = GR_MUTEX_INITIALIZER;
static pthread_cond_t timer_cv;
static pthread_cond_t undefer_cv = PTHREAD_COND_INITIALIZER; /* a deferred job's insert is queued */
static pthread_t timer_thread;
static struct gr_store *store;
static struct queue queues[MAX_BACKENDS];
static int nqueues, capacity, stopping, waking_all, timer_stop, timer_started;
static struct gr_job *table[NBUCKETS];
static struct gr_waiter *timed; /* waiters with a deadline */
static char replica[96];        /* set once before any job runs */
static int group_max = GROUP_MAX; /* likewise */
static int parked;
/* Shared store: new jobs are taken only before this (gr_mono_ms; 0: always), when this replica's
 * leases may have run out (a pause, a store away) (mu). */
static double hold_until;

/* --- in-flight table (mu held) --- */

static unsigned bucket(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h % NBUCKETS;
}

static struct gr_job *table_find(const char *id)
{
    for (struct gr_job *j = table[bucket(id)]; j; j = j->hnext)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

static void table_add(struct gr_job *j)
{
    unsigned b = bucket(j->id);
    j->hnext = table[b];
    table[b] = j;
    gr_job_ref(j);
}

static void table_remove(struct gr_job *j)
{
    for (struct gr_job **p = &table[bucket(j->id)]; *p; p = &(*p)->hnext)
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

static struct gr_job **watch_link(const char *id)
{
    struct gr_job **p = &watched[bucket(id)];
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->hnext;
    return p;
}

/* --- datasets in use --- */

/* One per dataset that jobs in flight name (refs) or that is being deleted; never both. */
struct pin {
    struct pin *next;
    int refs, deleting;
    char id[24];
};
static struct pin *pins; /* few: only datasets with jobs in flight */

/* The slot holding id's pin, or the empty slot at the end (mu held). */
static struct pin **pin_slot(const char *id)
{
    struct pin **p = &pins;
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->next;
    return p;
}

static void pin_drop(struct pin **p) /* mu held */
{
    struct pin *dead = *p;
    *p = dead->next;
    free(dead);
}

/* Add (delta 1) or drop a job's hold on a dataset (mu held); GR_ENOTFOUND while it is being
 * deleted. */
static int pin_change(const char *id, int delta, struct gr_err *e)
{
    int rc = GR_OK;
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        rc = gr_fail(e, GR_ENOTFOUND, "dataset", "dataset %s is being deleted", id);
    else if (!*p && delta > 0 && !(*p = calloc(1, sizeof **p)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else if (*p) {
        snprintf((*p)->id, sizeof (*p)->id, "%s", id);
        if (((*p)->refs += delta) <= 0)
            pin_drop(p);
    }
    return rc;
}

/* A job's holds end once its final state is stored (mu held). */
static void unpin_job(struct gr_job *j)
{
    if (j->dataset_pinned)
        pin_change(j->dataset, -1, NULL);
    j->dataset_pinned = 0;
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        if (j->mm[k].pinned)
            pin_change(j->mm[k].dataset, -1, NULL);
        j->mm[k].pinned = 0;
    }
}

int gr_jobs_pin_dataset(const char *id, struct gr_err *e)
{
    pthread_mutex_lock(&mu);
    int rc = pin_change(id, 1, e);
    pthread_mutex_unlock(&mu);
    return rc;
}

void gr_jobs_unpin_dataset(const char *id)
{
    pthread_mutex_lock(&mu);
    pin_change(id, -1, NULL);
    pthread_mutex_unlock(&mu);
}

int gr_jobs_delete_dataset_begin(const char *id, struct gr_err *e)
{
    int rc = GR_OK;
    pthread_mutex_lock(&mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        rc = gr_fail(e, GR_ECONFLICT, NULL, "dataset %s is being deleted already", id);
    else if (*p)
        rc = gr_fail(e, GR_ECONFLICT, NULL,
                     "dataset %s is used by %d queued or running job(s); delete it once they end (or cancel them)",
                     id, (*p)->refs);
    else if (!(*p = calloc(1, sizeof **p)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else {
        snprintf((*p)->id, sizeof (*p)->id, "%s", id);
        (*p)->deleting = 1;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void gr_jobs_delete_dataset_end(const char *id)
{
    pthread_mutex_lock(&mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        pin_drop(p);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nqueues; i++)
        if (queues[i].backend->evict)
            queues[i].backend->evict(queues[i].backend, id);
}

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
static void collect(struct gr_job *j, double now, struct gr_waiter **fired)
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
static void wake_list(struct gr_waiter *w)
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
    pthread_mutex_lock(&mu);
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
    collect(w->job, gr_mono_ms(), &fired);
    pthread_mutex_unlock(&mu);
    wake_list(fired);
}

int gr_jobs_parked(void)
{
    pthread_mutex_lock(&mu);
    int n = parked;
    pthread_mutex_unlock(&mu);
    return n;
}

static int undefer(int all, double now);

static void *timer_main(void *arg)
{
    pthread_mutex_lock(&mu);
    while (!timer_stop) {
        double now = gr_mono_ms(), next = now + 1000;
        struct gr_waiter *fired = NULL;
        if (undefer(0, now)) /* their waiters fire once the inserts commit */
            continue;
        for (struct gr_waiter *w = timed, *n; w; w = n) {
            n = w->tnext;
            if (w->deadline_ms <= now)
                collect(w->job, now, &fired);
            else if (w->deadline_ms < next)
                next = w->deadline_ms;
        }
        if (fired) {
            pthread_mutex_unlock(&mu);
            wake_list(fired);
            pthread_mutex_lock(&mu);
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
        pthread_cond_timedwait(&timer_cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* --- store commits --- */

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

struct gr_job *gr_jobs_watch(const char *id, int status)
{
    pthread_mutex_lock(&mu);
    struct gr_job **p = watch_link(id), *w = *p;
    if (!w && (w = gr_job_new())) {
        snprintf(w->id, sizeof w->id, "%s", id);
        w->status = w->committed = status; /* waiters wait for a change from it */
        *p = w;                            /* the table's reference */
    }
    if (w)
        gr_job_ref(w); /* the caller's */
    pthread_mutex_unlock(&mu);
    return w;
}

/* The stand-in *p told that its job changed (mu held): unlinked, its waiters on *fired; the
 * table's reference is the caller's now. */
static struct gr_job *watch_fire(struct gr_job **p, struct gr_waiter **fired)
{
    struct gr_job *w = *p;
    *p = w->hnext;
    w->committed = -3; /* its state is the store's: the waiters read it there */
    collect(w, gr_mono_ms(), fired);
    return w;
}

void gr_jobs_changed(void *ctx, const char *id)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *gone = NULL;
    pthread_mutex_lock(&mu);
    if (!id[0]) { /* the store's word may have been missed: every stand-in */
        for (int b = 0; b < NBUCKETS; b++)
            while (watched[b]) {
                struct gr_job *w = watch_fire(&watched[b], &fired);
                w->hnext = gone;
                gone = w;
            }
    } else if (*watch_link(id)) {
        gone = watch_fire(watch_link(id), &fired);
        gone->hnext = NULL;
    }
    pthread_mutex_unlock(&mu);
    wake_list(fired);
    while (gone) {
        struct gr_job *next = gone->hnext;
        gr_job_unref(gone);
        gone = next;
    }
}

int gr_jobs_taken(char (**ids)[24])
{
    int n = 0;
    pthread_mutex_lock(&mu);
    *ids = malloc(sizeof **ids * MAX_BACKENDS * MAX_LANES * GROUP_MAX);
    for (int i = 0; i < nqueues && *ids; i++)
        for (int k = 0; k < queues[i].nworkers; k++)
            for (int t = 0; t < queues[i].workers[k].ntaken; t++)
                memcpy((*ids)[n++], queues[i].workers[k].taken[t]->id, sizeof **ids);
    pthread_mutex_unlock(&mu);
    return n;
}

int gr_jobs_take_orphans(char ids[][24], int max)
{
    pthread_mutex_lock(&mu);
    int n = norphans < max ? norphans : max;
    memcpy(ids, orphans[norphans - n], (size_t)n * sizeof orphans[0]);
    norphans -= n;
    pthread_mutex_unlock(&mu);
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
static void committed_locked(struct gr_job *j, int status, int code, struct gr_waiter **fired,
                             struct gr_job **retry)
{
    if (code == GR_OK) {
        if (j->committed == -1)
            j->stored_ms = gr_mono_ms();
        if (status > j->committed && j->committed != -3) /* an offer's end may be told before its insert's commit */
            j->committed = status;
    } else if (code == GR_ENOTFOUND && j->committed >= 0 && gr_store_shared(store)) {
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
        unpin_job(j);
        if (j->counted)
            gr_tenant_drop_job(j->tenant);
        j->counted = 0;
    }
    collect(j, gr_mono_ms(), fired);
    if (gone)
        table_remove(j);
    struct gr_job **p = watch_link(j->id);
    if (j->offered && code != GR_OK && *p == j) { /* an offer the store refused: no end to be told */
        *p = j->hnext;
        gr_job_unref(j);
    }
}

static void store_write(struct gr_job *j, char *doc, int status);

/* Queue again the final states of list retry, each as it was first written (mu not held). */
static void write_again(struct gr_job *retry)
{
    while (retry) {
        struct gr_job *j = retry, *next = j->retry_next;
        pthread_mutex_lock(&mu);
        char *doc = j->final_doc ? strdup(j->final_doc) : NULL;
        int status = j->status;
        pthread_mutex_unlock(&mu);
        store_write(j, doc, status);
        gr_job_unref(j);
        retry = next;
    }
}

static void committed(struct gr_job *j, int status, int code)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *retry = NULL;
    pthread_mutex_lock(&mu);
    committed_locked(j, status, code, &fired, &retry);
    pthread_mutex_unlock(&mu);
    wake_list(fired);
    write_again(retry);
}

/* Runs on the store's writer thread once a job's write is committed (or refused): kept for
 * commit_told, at the commit's end. */
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
static void commit_told(void)
{
    struct commit *list = told;
    told = NULL;
    told_tail = &told;
    while (list) {
        struct gr_waiter *fired = NULL;
        struct gr_job *retry = NULL;
        struct commit *c = list;
        pthread_mutex_lock(&mu);
        for (int k = 0; c && k < TOLD_HOLD; k++, c = c->next)
            committed_locked(c->job, c->status, c->code, &fired, &retry);
        pthread_mutex_unlock(&mu);
        wake_list(fired);
        write_again(retry);
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
    int rc = c ? gr_store_update_job(store, j->id, j->tenant, gr_status_name(status), doc,
                                     __atomic_load_n(&j->epoch, __ATOMIC_RELAXED), on_commit, c)
               : GR_OK;
    if (rc != GR_OK)
        commit_refused(c, rc);
}

/* Queue the inserts of the n jobs js at status (docs ours now) as one all-or-nothing write: new
 * jobs, queued with their inputs, or a deferred job's one write, its final state. Deferred jobs
 * among new ones are left for that write (their docs freed). */
static void store_insert(struct gr_job **js, char **docs, int n, int status)
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
    int rc = k ? gr_store_insert_jobs(store, v, k, on_commit) : GR_OK;
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
        gr_store_dataset_used(store, j->dataset, now, j->id);
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        if (j->mm[k].dataset[0])
            gr_store_dataset_used(store, j->mm[k].dataset, now, j->id);
}

/* Queue the write of j's final state (doc ours now): its first write, an insert, if it is still
 * deferred (the timer may be inserting it as queued just now: wait for that), else an update. */
static void store_final(struct gr_job *j, char *doc)
{
    char *copy = doc ? strdup(doc) : NULL; /* what its answers send: a final job no longer changes */
    pthread_mutex_lock(&mu);
    free(j->final_doc);
    j->final_doc = copy;
    while (j->deferred == 2)
        pthread_cond_wait(&undefer_cv, &mu);
    int first = j->deferred;
    j->deferred = 0;
    pthread_mutex_unlock(&mu);
    store_used(j);
    if (first)
        store_insert(&j, &doc, 1, j->status);
    else
        store_write(j, doc, j->status);
}

/* Queue the inserts, as queued, of the n (<= 64) deferred jobs js (mu held; released and taken
 * again). */
static void insert_undeferred(struct gr_job **js, int n)
{
    char *docs[64];
    for (int k = 0; k < n; k++) {
        js[k]->deferred = 2; /* its worker's final write waits for this insert to be queued */
        gr_job_ref(js[k]);
        docs[k] = gr_job_render_as(js[k], GR_QUEUED); /* as its row says, also if it has just ended */
    }
    if (!n)
        return;
    pthread_mutex_unlock(&mu);
    store_insert(js, docs, n, GR_QUEUED);
    pthread_mutex_lock(&mu);
    for (int k = 0; k < n; k++)
        js[k]->deferred = 0;
    pthread_cond_broadcast(&undefer_cv);
    pthread_mutex_unlock(&mu);
    for (int k = 0; k < n; k++)
        gr_job_unref(js[k]);
    pthread_mutex_lock(&mu);
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
        for (struct gr_job *j = table[b]; j && n < 64; j = j->hnext)
            if (j->deferred == 1)
                js[n++] = j;
    insert_undeferred(js, n);
    return n;
}

void gr_jobs_undefer(struct gr_job **js, int n)
{
    /* those at 2 are being inserted by the timer already: the caller waits for their commit */
    pthread_mutex_lock(&mu);
    for (int k = 0; k < n;) {
        struct gr_job *take[64];
        int m = 0;
        for (; k < n && m < 64; k++) /* mu held from here until insert_undeferred marks them */
            if (js[k]->deferred == 1)
                take[m++] = js[k];
        insert_undeferred(take, m);
    }
    pthread_mutex_unlock(&mu);
}

/* --- queues and workers --- */

static struct queue *queue_of(const struct gr_backend *b)
{
    for (int i = 0; i < nqueues; i++)
        if (queues[i].backend == b)
            return &queues[i];
    return NULL;
}

static int dev_of(const struct queue *q) { return q ? (int)(q - queues) : -1; } /* metrics index */

/* A GPU whose context a kernel fault lost (gpu_backend.cu): nothing runs there until a restart. */
static int broken(const struct queue *q) { return __atomic_load_n(&q->backend->broken, __ATOMIC_ACQUIRE); }

static void push(struct queue *q, struct gr_job *j)
{
    j->qnext = NULL;
    if (q->tail)
        q->tail->qnext = j;
    else
        q->head = j;
    q->tail = j;
    q->count++;
    __atomic_fetch_add(&q->pushed, 1, __ATOMIC_RELEASE);
    gr_metrics_queued(dev_of(q), 1);
    /* a watching worker sees pushed move and takes the job itself: waking a sleeper as well would
     * be a futex call under mu for a worker that finds the queue empty and sleeps again */
    if (q->count > q->watching)
        pthread_cond_signal(&q->cv);
}

/* The job's values for b: a dataset is opened for a backend that reads it itself (takes_fd),
 * else mapped, not read: the backend's reads fault it in from the page cache. */
static int input_open(const struct gr_job *j, const struct gr_backend *b, struct gr_reduce_req *req,
                      struct gr_err *e)
{
    if (!j->dataset[0])
        return GR_OK;
    req->dataset = j->dataset;
    if (b->takes_fd)
        return gr_dsfile_open(gr_store_data_dir(store), j->dataset, j->input_bytes, &req->fd, e);
    return gr_dsfile_map(gr_store_data_dir(store), j->dataset, j->input_bytes, &req->data, e);
}

static void input_close(const struct gr_job *j, struct gr_reduce_req *req)
{
    if (req->fd > 0)
        close(req->fd);
    if (j->dataset[0])
        gr_dsfile_unmap(req->data, j->input_bytes);
}

/* A product on w's lane: dataset operands mapped, the product into a buffer kept as a dataset,
 * its values also into r when it is small enough to show inline. */
static int run_matmul(struct worker *w, struct gr_job *j, struct gr_result *r, struct gr_timings *t, char used[32],
                      struct gr_err *e)
{
    struct gr_backend *b = w->q->backend;
    const void *p[GR_MM_OPERANDS] = {NULL, NULL, NULL};
    size_t es = gr_dtype_size(j->dtype), bytes[GR_MM_OPERANDS] = {0, 0, 0}, out_bytes;
    void *out = NULL;
    int rc = GR_OK;
    for (int k = 0; k < GR_MM_OPERANDS && rc == GR_OK; k++) {
        const struct gr_operand *x = &j->mm[k];
        if (!x->present)
            continue;
        bytes[k] = (size_t)x->rows * (size_t)x->cols * es; /* checked when the job was made */
        if (x->dataset[0])
            rc = gr_dsfile_map(gr_store_data_dir(store), x->dataset, bytes[k], &p[k], e);
        else
            p[k] = (const char *)j->input + x->off;
    }
    if (rc == GR_OK && (gr_mul_size((size_t)j->shape[0], (size_t)j->shape[1], &out_bytes) ||
                        gr_mul_size(out_bytes, es, &out_bytes)))
        rc = gr_fail(e, GR_EUNPROC, NULL, "the product is too large");
    if (rc == GR_OK && !(out = malloc(out_bytes)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of host memory for the %lld x %lld product", (long long)j->shape[0],
                     (long long)j->shape[1]);
    struct gr_mm_req req = {.dtype = j->dtype, .m = j->shape[0], .n = j->shape[1], .k = j->mm[0].cols,
                            .alpha = j->alpha, .beta = j->beta, .a = p[0], .b = p[1], .c = p[2], .out = out,
                            .algorithm = j->algorithm};
    if (rc == GR_OK)
        rc = b->matmul(b, w->lane, &req, t, used, e);
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        if (j->mm[k].dataset[0])
            gr_dsfile_unmap(p[k], bytes[k]);
    if (rc == GR_OK) /* durable before the state naming it is stored */
        rc = gr_job_keep_product(j, out, store, e);
    int64_t n = j->shape[0] * j->shape[1];
    if (rc == GR_OK && n <= GR_RESULT_INLINE_MAX && (rc = gr_result_alloc(r, n, 0, 0, e)) == GR_OK)
        for (int64_t i = 0; i < n; i++)
            r->f[i] = j->dtype == GR_FLOAT32 ? (double)((const float *)out)[i] : ((const double *)out)[i];
    free(out);
    return rc;
}

/* What running a job gave: its end, as end() records it. */
struct outcome {
    int rc;
    struct gr_err e;
    struct gr_result r;
    struct gr_timings t;
    char used[32];
    struct gr_bench_row *rows; /* a benchmark's */
    int nrows;
    int group; /* jobs in its launch (1: alone) */
};

/* Not canceled, stored, and not claimed away by another replica: j can run (mu held). */
static int runnable(const struct gr_job *j)
{
    return j->status == GR_QUEUED && j->committed != -2 && j->committed != -3;
}

/* May b share a's launch (launch groups, above)? joins(a, a): may a lead one (mu held). */
static int joins(const struct gr_job *a, const struct gr_job *b)
{
    return b->kind == GR_JOB_REDUCE && b->input && !b->dataset[0] && (b->ndim == 1 || b->axis == GR_AXIS_ALL) &&
           !strcmp(b->algorithm, "auto") && b->input_bytes > 0 && b->input_bytes <= GROUP_JOB_BYTES &&
           b->input_bytes == a->input_bytes && b->op == a->op && b->dtype == a->dtype &&
           b->ties_last == a->ties_last && runnable(b);
}

/* j is running from now (mu held): its waiters for that go on *fired. */
static void begin(struct queue *q, struct gr_job *j, struct gr_waiter **fired)
{
    j->started_at = gr_now();
    j->t.queue = (j->started_at - j->created_at) * 1e3;
    j->status = GR_RUNNING; /* in memory only: one store write less per job */
    gr_metrics_running(dev_of(q), 1);
    collect(j, gr_mono_ms(), fired);
}

/* Run one job on w's lane into o. */
static void execute(struct worker *w, struct gr_job *j, struct outcome *o)
{
    struct queue *q = w->q;
    struct gr_reduce_req req = {.op = j->op, .dtype = j->dtype, .axis = j->ndim == 1 ? GR_AXIS_ALL : j->axis,
                                .ties_last = j->ties_last, .rows = gr_job_rows(j), .cols = gr_job_cols(j),
                                .data = j->input, .algorithm = j->algorithm, .lane = w->lane};
    o->group = 1;
    if (broken(q)) { /* asked for this GPU by name, so not moved (moved()) */
        o->rc = gr_fail(&o->e, GR_EUNAVAIL, "device",
                        "%s broke before this job ran (%s); restart gpured, or submit with \"device\": \"auto\"",
                        q->backend->name, q->backend->broken_why);
    } else if (j->kind == GR_JOB_BENCH) {
        double t0 = gr_mono_ms();
        /* the CPU backend is the reference every answer is checked against */
        o->rc = gr_bench_run(q->backend, w->lane, queues[0].backend, j->op, j->dtype, j->shape[0], j->algos,
                             j->nalgos, j->repeats, &o->rows, &o->nrows, &o->e);
        o->t.kernel = gr_mono_ms() - t0;
        snprintf(o->used, sizeof o->used, "benchmark");
    } else if (j->kind == GR_JOB_MATMUL) {
        o->rc = run_matmul(w, j, &o->r, &o->t, o->used, &o->e);
    } else {
        o->rc = input_open(j, q->backend, &req, &o->e);
        if (o->rc == GR_OK)
            o->rc = q->backend->reduce(q->backend, &req, &o->r, &o->t, o->used, &o->e);
        input_close(j, &req);
        if (o->rc == GR_OK) /* a large result is durable as datasets before the state naming them is stored */
            o->rc = gr_job_keep_result(j, &o->r, store, &o->e);
    }
}

/* j ends with o (whose result and rows it takes): recorded, rendered, its final state queued. */
static void end(struct queue *q, struct gr_job *j, struct outcome *o)
{
    pthread_mutex_lock(&mu);
    j->finished_at = gr_now();
    o->t.queue = j->t.queue;
    o->t.total = (j->finished_at - j->created_at) * 1e3;
    j->t = o->t;
    j->result = o->r;
    j->rows = o->rows;
    j->nrows = o->nrows;
    j->group = o->group;
    snprintf(j->device, sizeof j->device, "%s", q->backend->name);
    memcpy(j->replica, replica, sizeof replica);
    if (o->used[0])
        snprintf(j->algorithm, sizeof j->algorithm, "%s", o->used);
    if (o->rc != GR_OK)
        j->err = o->e.code ? o->e : (struct gr_err){.code = o->rc, .msg = "the backend failed without a message"};
    j->status = o->rc == GR_OK ? GR_SUCCEEDED : GR_FAILED;
    pthread_mutex_unlock(&mu);
    char *doc = gr_job_render(j); /* a final job no longer changes: no lock needed to read it */
    gr_metrics_running(dev_of(q), -1);
    /* a benchmark's kernel stage is all its variants' repeats: kept out of the stage histograms */
    gr_metrics_job_end(dev_of(q), j->op, j->status, j->kind == GR_JOB_BENCH ? NULL : &o->t, j->input_bytes);
    store_final(j, doc);
    gr_log(o->rc == GR_OK ? GR_LOG_INFO : GR_LOG_WARN, "job %s %s on %s (%s) in %.3f ms%s%s", j->id,
           gr_status_name(j->status), q->backend->name, j->algorithm, o->t.total, o->rc ? ": " : "",
           o->rc ? o->e.msg : "");
}

/* The n jobs of a launch group as one axis-1 reduction, each row's result its job's; the launch's
 * copy and kernel times are shared out evenly. GR_OK with every job ended; else none is (the
 * caller runs them one by one, so a job's fate never depends on the company it was queued in). */
static int run_group(struct worker *w, struct gr_job **js, int n)
{
    struct gr_backend *b = w->q->backend;
    const struct gr_job *j0 = js[0];
    size_t each = j0->input_bytes; /* n * each <= GROUP_MAX * GROUP_JOB_BYTES: no overflow */
    struct outcome all = {0};
    char *values = malloc(n * each);
    if (!values)
        return GR_ENOMEM;
    for (int k = 0; k < n; k++)
        memcpy(values + k * each, js[k]->input, each);
    struct gr_reduce_req req = {.op = j0->op, .dtype = j0->dtype, .axis = 1, .ties_last = j0->ties_last, .rows = n,
                                .cols = gr_job_rows(j0) * gr_job_cols(j0), .data = values, .algorithm = "auto",
                                .lane = w->lane};
    all.rc = b->reduce(b, &req, &all.r, &all.t, all.used, &all.e);
    free(values);
    if (all.rc != GR_OK) {
        gr_log(GR_LOG_WARN, "a launch of %d jobs failed on %s (%s): they run one by one", n, b->name, all.e.msg);
        return all.rc;
    }
    for (int k = 0; k < n; k++) {
        struct outcome o = {.group = n, .t = {.h2d = all.t.h2d / n, .kernel = all.t.kernel / n, .d2h = all.t.d2h / n}};
        memcpy(o.used, all.used, sizeof o.used);
        o.rc = gr_result_alloc(&o.r, 1, all.r.i != NULL, all.r.index != NULL, &o.e);
        if (o.rc == GR_OK && o.r.i)
            o.r.i[0] = all.r.i[k];
        if (o.rc == GR_OK && o.r.f)
            o.r.f[0] = all.r.f[k];
        if (o.rc == GR_OK && o.r.index)
            o.r.index[0] = all.r.index[k];
        end(w->q, js[k], &o);
    }
    gr_result_free(&all.r);
    return GR_OK;
}

/* The n jobs w has taken (running since): as one launch when they are a group, else one by one. */
static void run(struct worker *w, int n)
{
    for (int k = 0; k < n; k++)
        gr_log(GR_LOG_INFO, "job %s running on %s", w->taken[k]->id, w->q->backend->name);
    if (n > 1 && run_group(w, w->taken, n) == GR_OK)
        return;
    for (int k = 0; k < n; k++) {
        struct outcome o = {0};
        execute(w, w->taken[k], &o);
        end(w->q, w->taken[k], &o);
    }
}

/* A job queued on a broken GPU goes where its "device" sends it now (auto: another GPU, else the
 * CPU), with the queue's reference. 0 when that is nowhere else: run() then fails it. */
static int moved(struct queue *from, struct gr_job *j)
{
    struct gr_backend *to;
    if (gr_jobs_route(j->device, j->dataset, &to, NULL) != GR_OK || to == from->backend)
        return 0;
    pthread_mutex_lock(&mu);
    j->backend = to;
    gr_job_ref(j);
    push(queue_of(to), j);
    pthread_mutex_unlock(&mu);
    gr_log(GR_LOG_WARN, "job %s moved from %s (broken) to %s", j->id, from->backend->name, to->name);
    return 1;
}

static struct gr_job *pop(struct queue *q)
{
    struct gr_job *j = q->head;
    q->head = j->qnext;
    if (!q->head)
        q->tail = NULL;
    q->count--;
    gr_metrics_queued(dev_of(q), -1);
    return j;
}

/* w takes j, and when j may lead a launch group the jobs queued right behind it that join it,
 * marking them running in the same hold of mu that takes them off the queue: a cancel finds
 * them queued, or running, never taken and still queued. How many (mu held). */
static int take(struct worker *w, struct gr_job *j, struct gr_waiter **fired)
{
    struct queue *q = w->q;
    int n = 1, leads = !broken(q) && joins(j, j);
    begin(q, j, fired);
    while (leads && n < group_max && q->head && joins(j, q->head)) {
        w->taken[n] = pop(q);
        begin(q, w->taken[n++], fired);
    }
    return n;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct queue *q = w->q;
    pthread_mutex_lock(&mu);
    for (;;) {
        /* one client's next job is often a moment away: one idle worker a GPU watches for it, so
         * that under load the others leave their cores to the HTTP threads and the writer */
        for (int spun = 0; !q->head && !stopping;) {
            int watch = !spun && !q->watching;
            spun |= !watch;
            q->watching += watch;
            gr_idle_wait(&q->cv, &mu, &q->pushed, &spun);
            q->watching -= watch;
        }
        if (stopping)
            break;
        if (hold_until > 0 && gr_mono_ms() >= hold_until) { /* its lease may be gone: others may run it */
            pthread_mutex_unlock(&mu);
            struct timespec t = {0, 5 * 1000000L};
            nanosleep(&t, NULL);
            pthread_mutex_lock(&mu);
            continue;
        }
        struct gr_job *j = w->taken[0] = pop(q);
        struct gr_waiter *fired = NULL;
        int n = 0;
        if (runnable(j) && broken(q)) { /* moved elsewhere, or run here to fail */
            pthread_mutex_unlock(&mu);
            int gone = moved(q, j);
            pthread_mutex_lock(&mu);
            if (!gone && runnable(j))
                begin(q, j, &fired), n = 1;
        } else if (runnable(j)) {
            n = take(w, j, &fired);
        }
        w->ntaken = n;
        w->began = gr_mono_ms();
        pthread_mutex_unlock(&mu);
        wake_list(fired);
        if (n)
            run(w, n);
        pthread_mutex_lock(&mu);
        if (n) {
            double each = (gr_mono_ms() - w->began) / n;
            q->run_ms = q->run_ms > 0 ? 0.9 * q->run_ms + 0.1 * each : each;
        }
        w->ntaken = 0;
        pthread_mutex_unlock(&mu);
        for (int k = 0; k < (n ? n : 1); k++)
            gr_job_unref(w->taken[k]);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int gr_jobs_start(struct gr_store *s, struct gr_backend **backends, int nbackends, int queue_capacity,
                  struct gr_err *e)
{
    if (nbackends < 1 || nbackends > MAX_BACKENDS)
        return gr_fail(e, GR_EINTERNAL, NULL, "%d backends (1 to %d supported)", nbackends, MAX_BACKENDS);
    store = s;
    gr_store_after_commits(s, commit_told);
    capacity = queue_capacity;
    stopping = waking_all = timer_stop = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < nbackends; i++) {
        struct queue *q = &queues[i];
        memset(q, 0, sizeof *q);
        q->backend = backends[i];
        pthread_cond_init(&q->cv, NULL);
        nqueues = i + 1;
        q->nworkers = backends[i]->info.lanes < 1 ? 1 : backends[i]->info.lanes > MAX_LANES ? MAX_LANES
                                                                                           : backends[i]->info.lanes;
        for (int k = 0; k < q->nworkers; k++) {
            struct worker *w = &q->workers[k];
            *w = (struct worker){.q = q, .lane = k};
            if (pthread_create(&w->thread, NULL, worker_main, w))
                return gr_fail(e, GR_EINTERNAL, NULL, "cannot start worker %d for %s", k, backends[i]->name);
            char name[40]; /* as top -H and perf show it: "gr-gpu:0-3", cut to the 15 bytes a name holds */
            snprintf(name, sizeof name, "gr-%s-%d", backends[i]->name, k);
            name[15] = '\0';
            pthread_setname_np(w->thread, name);
            w->started = 1;
        }
    }
    if (pthread_create(&timer_thread, NULL, timer_main, NULL))
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the timer thread");
    pthread_setname_np(timer_thread, "gr-timer");
    timer_started = 1;
    return GR_OK;
}

int gr_jobs_nbackends(void) { return nqueues; }
struct gr_backend *gr_jobs_backend(int i) { return i >= 0 && i < nqueues ? queues[i].backend : NULL; }

/* The GPU for a job on dataset (NULL: none) among the working ones, 0 if none works (mu held;
 * holds[i]: GPU i caches it, bytes[i]: what its cache holds). The one that caches the dataset,
 * unless its queue is AFFINITY_SLACK longer than the shortest; else the shortest queue, and
 * among equal ones, for a dataset cached nowhere, the emptiest cache: two hot datasets settle on
 * two GPUs instead of evicting each other on one. */
#define AFFINITY_SLACK 16
static int pick_gpu(const char *dataset, const int *holds, const int64_t *bytes)
{
    int best = 0, home = 0;
    for (int i = 1; i < nqueues; i++) {
        if (broken(&queues[i]))
            continue;
        int load = queues[i].count + queues[i].reserved;
        int best_load = best ? queues[best].count + queues[best].reserved : 0;
        if (!best || load < best_load || (load == best_load && dataset && bytes[i] < bytes[best]))
            best = i;
        if (holds[i] && (!home || load < queues[home].count + queues[home].reserved))
            home = i;
    }
    int home_load = home ? queues[home].count + queues[home].reserved : 0;
    return home && home_load <= queues[best].count + queues[best].reserved + AFFINITY_SLACK ? home : best;
}

int gr_jobs_route(const char *device, const char *dataset, struct gr_backend **out, struct gr_err *e)
{
    *out = NULL;
    if (!strcmp(device, "cpu")) {
        *out = queues[0].backend;
        return GR_OK;
    }
    int auto_dev = !strcmp(device, "auto");
    if (auto_dev || !strcmp(device, "gpu")) {
        if (nqueues == 1) {
            if (auto_dev) {
                *out = queues[0].backend;
                return GR_OK;
            }
            return gr_fail(e, GR_EUNPROC, "device",
                           "device 'gpu' was asked for but this server has no GPU (GET /v1/devices); "
                           "use \"device\": \"cpu\" or \"auto\"");
        }
        /* where its dataset is cached, asked before the lock (each cache has its own); with one
         * GPU it does not matter */
        int holds[MAX_BACKENDS] = {0};
        int64_t bytes[MAX_BACKENDS] = {0};
        dataset = dataset && dataset[0] ? dataset : NULL;
        for (int i = 1; dataset && nqueues > 2 && i < nqueues; i++) {
            struct gr_backend *b = queues[i].backend;
            struct gr_cache_stats cs = {0};
            holds[i] = b->holds && b->holds(b, dataset);
            if (b->cache_stats)
                b->cache_stats(b, &cs);
            bytes[i] = cs.bytes;
        }
        /* auto falls back to the CPU when no GPU works; with one GPU there is nothing to weigh,
         * so no lock */
        int best = nqueues == 2 ? !broken(&queues[1]) : 0;
        if (nqueues > 2) {
            pthread_mutex_lock(&mu);
            best = pick_gpu(dataset, holds, bytes);
            pthread_mutex_unlock(&mu);
        }
        if (!best && !auto_dev)
            return gr_fail(e, GR_EUNAVAIL, "device",
                           "every GPU of this server is broken (%s); restart gpured, or use \"device\": \"auto\"",
                           queues[1].backend->broken_why);
        *out = queues[best].backend;
        return GR_OK;
    }
    int n, used = 0;
    if (sscanf(device, "gpu:%d%n", &n, &used) == 1 && used == (int)strlen(device) && n >= 0 && device[4] != '+' &&
        device[4] != '-') {
        if (n + 1 >= nqueues)
            return gr_fail(e, GR_EUNPROC, "device", "device '%s' does not exist: this server has %d GPU(s)",
                           device, nqueues - 1);
        if (broken(&queues[n + 1]))
            return gr_fail(e, GR_EUNAVAIL, "device", "device '%s' is broken (%s); restart gpured, or use \"device\": "
                                                     "\"auto\"",
                           device, queues[n + 1].backend->broken_why);
        *out = queues[n + 1].backend;
        return GR_OK;
    }
    return gr_fail(e, GR_EINVAL, "device", "unknown device '%s': use auto, cpu, gpu or gpu:N", device);
}

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
    pthread_mutex_lock(&mu);
    for (int k = 0; rc == GR_OK && k < n; k++) {
        struct queue *q = queue_of(js[k]->backend);
        if (!q || q->count + q->reserved + need[dev_of(q)] >= capacity)
            rc = gr_fail(e, GR_EFULL, NULL, "the queue for %s is full (%d jobs); retry after a second",
                         js[k]->backend ? js[k]->backend->name : "?", capacity);
        else if (gr_tenant_add_job(js[k]->tenant, 0, e) == GR_OK)
            need[dev_of(q)] += !js[k]->offered, added++;
        else
            rc = e->code;
    }
    if (rc != GR_OK) { /* all or none */
        for (int k = 0; k < added; k++)
            gr_tenant_drop_job(js[k]->tenant);
        pthread_mutex_unlock(&mu);
        for (int k = 0; docs && k < n; k++)
            free(docs[k]);
        free(docs);
        return rc;
    }
    /* waited jobs whose first write is their end (no insert to queue first, no list to answer)
     * are queued in this hold of mu: one hold less for the lock every thread meets */
    int direct = !accepted && !stopping;
    for (int k = 0; k < n; k++)
        direct &= js[k]->deferred == 1 && !js[k]->offered;
    for (int k = 0; k < n; k++) {
        struct gr_job *j = js[k];
        j->counted = 1;
        j->deferred &= !stopping; /* no worker takes it before the shutdown: stored now, answered 202 */
        if (j->offered) { /* the store's to hand out: waited on here as a stand-in (the table's reference) */
            struct gr_job **p = watch_link(j->id);
            j->hnext = NULL;
            *p = j;
            gr_job_ref(j);
        } else {
            if (direct) {
                gr_job_ref(j);
                push(queue_of(j->backend), j);
            } else {
                queue_of(j->backend)->reserved++;
            }
            table_add(j);
        }
    }
    const char *name[LOGGED];
    if (direct)
        queued_for(js, n, name);
    pthread_mutex_unlock(&mu);
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
    store_insert(js, docs, n, GR_QUEUED);
    free(docs);
    pthread_mutex_lock(&mu);
    for (int k = 0; k < n; k++)
        if (!js[k]->offered) {
            struct queue *q = queue_of(js[k]->backend);
            q->reserved--;
            gr_job_ref(js[k]);
            push(q, js[k]);
        }
    queued_for(js, n, name);
    pthread_mutex_unlock(&mu);
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
    pthread_mutex_lock(&mu);
    struct gr_job *held = table_find(id);
    if (held) /* this replica's own lease ran out while the job waited or ran: the same job, claimed anew */
        __atomic_store_n(&held->epoch, epoch, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
    if (held)
        return;
    if (gr_job_restore(id, doc, input, bytes, &j, &e) != GR_OK) {
        gr_log(GR_LOG_ERROR, "recovery: %s", e.msg);
        return;
    }
    j->epoch = epoch;
    /* a job's device may be gone (a GPU job restarted on a CPU-only machine): run it on the CPU */
    if (gr_jobs_route(j->device, j->dataset, &j->backend, &e) != GR_OK)
        j->backend = queues[0].backend;
    pthread_mutex_lock(&mu);
    j->counted = gr_tenant_add_job(j->tenant, 1, &e) == GR_OK; /* accepted before: past the quota too */
    j->dataset_pinned = j->dataset[0] && pin_change(j->dataset, 1, &e) == GR_OK;
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        j->mm[k].pinned = j->mm[k].dataset[0] && pin_change(j->mm[k].dataset, 1, &e) == GR_OK;
    table_add(j);
    push(queue_of(j->backend), j); /* recovery ignores the capacity: these were accepted */
    pthread_mutex_unlock(&mu);
    rc->count++;
}

int gr_jobs_recover(int limit, struct gr_err *e)
{
    struct recover_ctx rc = {0};
    if (gr_store_load_pending(store, limit, recover_one, &rc, e) != GR_OK)
        return -1;
    return rc.count;
}

/* The in-flight job id if it is tenant scope's (NULL: anyone's) (mu held). */
static struct gr_job *scoped_find(const char *id, const char *scope)
{
    struct gr_job *j = table_find(id);
    return j && (!scope || !strcmp(j->tenant, scope)) ? j : NULL;
}

struct gr_job *gr_jobs_find(const char *id, const char *scope)
{
    pthread_mutex_lock(&mu);
    struct gr_job *j = scoped_find(id, scope);
    if (j)
        gr_job_ref(j);
    pthread_mutex_unlock(&mu);
    return j;
}

int gr_jobs_cancel(const char *id, const char *scope, struct gr_job **out, struct gr_err *e)
{
    *out = NULL;
    char *doc;
    pthread_mutex_lock(&mu);
    struct gr_job *j = scoped_find(id, scope);
    if (!j) {
        pthread_mutex_unlock(&mu);
        return GR_ENOTFOUND;
    }
    if (j->status != GR_QUEUED) {
        int st = j->status;
        pthread_mutex_unlock(&mu);
        return gr_fail(e, GR_ECONFLICT, NULL, "job %s is %s; only queued jobs can be canceled", id,
                       gr_status_name(st));
    }
    j->finished_at = gr_now();
    j->t.total = (j->finished_at - j->created_at) * 1e3;
    j->status = GR_CANCELED;
    doc = gr_job_render(j);
    gr_job_ref(j);
    int dev = dev_of(queue_of(j->backend));
    pthread_mutex_unlock(&mu);
    gr_metrics_job_end(dev, j->op, GR_CANCELED, NULL, 0);
    store_final(j, doc);
    gr_log(GR_LOG_INFO, "job %s canceled", id);
    *out = j;
    return GR_OK;
}

void gr_jobs_hold_until(double mono_ms)
{
    pthread_mutex_lock(&mu);
    hold_until = mono_ms;
    for (int i = 0; i < nqueues; i++)
        pthread_cond_broadcast(&queues[i].cv);
    pthread_mutex_unlock(&mu);
}

static int by_text(const void *a, const void *b) { return strcmp(a, b); }

int gr_jobs_drop_unheld(char (*held)[24], int n, double since_ms)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *retry = NULL;
    int dropped = 0;
    if (n > 0) /* qsort and bsearch want an array, even of none */
        qsort(held, (size_t)n, sizeof *held, by_text);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nqueues; i++)
        for (struct gr_job *j = queues[i].head; j; j = j->qnext)
            if (runnable(j) && j->committed >= 0 && j->stored_ms < since_ms &&
                !(n > 0 && bsearch(j->id, held, (size_t)n, sizeof *held, by_text))) {
                committed_locked(j, j->status, GR_ENOTFOUND, &fired, &retry); /* as a fenced write */
                dropped++;
            }
    pthread_mutex_unlock(&mu);
    wake_list(fired);
    write_again(retry);
    return dropped;
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

double gr_jobs_backlog_ms(const struct gr_backend *b)
{
    double now = gr_mono_ms(), ms = 0;
    pthread_mutex_lock(&mu);
    const struct queue *q = queue_of(b);
    if (q) {
        /* a run that has lasted longer than recent ones says jobs take that long now: a long job
         * ahead is what a new one would wait for */
        double each = q->run_ms;
        int running = 0;
        for (int k = 0; k < q->nworkers; k++)
            if (q->workers[k].ntaken) {
                running++;
                double took = (now - q->workers[k].began) / q->workers[k].ntaken;
                each = took > each ? took : each;
            }
        ms = (q->count + q->reserved + running) * each / q->nworkers;
    }
    pthread_mutex_unlock(&mu);
    return ms;
}

void gr_jobs_set_replica(const char *id) { snprintf(replica, sizeof replica, "%s", id); }
void gr_jobs_set_launch_group(int n) { group_max = n < 1 ? 1 : n > GROUP_MAX ? GROUP_MAX : n; }

int gr_jobs_capacity(void) { return capacity; } /* set once at start-up */

int gr_jobs_queued(void)
{
    int n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nqueues; i++)
        n += queues[i].count;
    pthread_mutex_unlock(&mu);
    return n;
}

void gr_jobs_pause(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    for (int i = 0; i < nqueues; i++)
        pthread_cond_broadcast(&queues[i].cv);
    pthread_mutex_unlock(&mu);
}

void gr_jobs_stop_workers(void)
{
    gr_jobs_pause();
    for (int i = 0; i < nqueues; i++)
        for (int k = 0; k < queues[i].nworkers; k++)
            if (queues[i].workers[k].started) {
                pthread_join(queues[i].workers[k].thread, NULL);
                queues[i].workers[k].started = 0;
            }
}

void gr_jobs_wake_all(void)
{
    struct gr_waiter *fired = NULL;
    pthread_mutex_lock(&mu);
    waking_all = 1;
    while (undefer(1, 0)) /* stored as queued: they run after a restart */
        ;
    double now = gr_mono_ms();
    for (int b = 0; b < NBUCKETS; b++)
        for (struct gr_job *j = table[b]; j; j = j->hnext)
            collect(j, now, &fired);
    pthread_mutex_unlock(&mu);
    wake_list(fired);
}

void gr_jobs_stop(void)
{
    pthread_mutex_lock(&mu);
    timer_stop = 1;
    pthread_cond_signal(&timer_cv);
    pthread_mutex_unlock(&mu);
    if (timer_started)
        pthread_join(timer_thread, NULL);
    timer_started = 0;
    /* drop what is still queued or in flight: the store has it as queued */
    for (int i = 0; i < nqueues; i++) {
        for (struct gr_job *j = queues[i].head, *n; j; j = n) {
            n = j->qnext;
            gr_job_unref(j);
        }
        queues[i].head = queues[i].tail = NULL;
        queues[i].count = 0;
        pthread_cond_destroy(&queues[i].cv);
    }
    for (int b = 0; b < NBUCKETS; b++) {
        for (struct gr_job *j = table[b], *n; j; j = n) {
            n = j->hnext;
            gr_job_unref(j);
        }
        for (struct gr_job *j = watched[b], *n; j; j = n) {
            n = j->hnext;
            gr_job_unref(j);
        }
        table[b] = watched[b] = NULL;
    }
    pthread_cond_destroy(&timer_cv);
    nqueues = 0;
}

int gr_jobs_committed(struct gr_job *j)
{
    pthread_mutex_lock(&mu);
    int c = j->committed;
    pthread_mutex_unlock(&mu);
    return c;
}

int gr_jobs_settled(struct gr_job *j)
{
    int c = gr_jobs_committed(j);
    return GR_TERMINAL(c) || c == -2 || c == -3;
}

char *gr_jobs_render(struct gr_job *j, int *committed, int *status)
{
    pthread_mutex_lock(&mu);
    *committed = j->committed;
    *status = j->status;
    if (GR_TERMINAL(j->status) && j->committed >= -1 && !GR_TERMINAL(j->committed)) {
        /* ended, but its end is not durable yet: told as running until it is, so that no one
         * hears of an end a crash could take back (nor finds its dataset still held by it) */
        *status = GR_RUNNING; /* not a copy of j: its reference count changes under other threads */
        char *doc = gr_job_render_as(j, GR_RUNNING);
        pthread_mutex_unlock(&mu);
        return doc;
    }
    if (GR_TERMINAL(*status) && j->final_doc) { /* rendered once, at its end */
        char *doc = strdup(j->final_doc);
        pthread_mutex_unlock(&mu);
        return doc;
    }
    if (GR_TERMINAL(*status)) { /* a final job no longer changes: render it without the lock */
        pthread_mutex_unlock(&mu);
        return gr_job_render(j);
    }
    char *doc = gr_job_render(j);
    pthread_mutex_unlock(&mu);
    return doc;
}
