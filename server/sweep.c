/* sweep.c: the retention sweep's thread. It reads expired jobs on its own store connection and
 * deletes them through the store's writer a batch at a time, waiting for each batch's commit
 * before reading the next, so that requests' writes interleave with it. Bulk deletes the API
 * asks for queue here (asked, under mu) and run the same way between rounds. */
#include "server/sweep.h"

#include "db/dsfile.h"
#include "db/store.h"
#include "server/jobs.h"
#include "server/log.h"
#include "server/tenants.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256 /* jobs per transaction: about a millisecond of the writer's time */

static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int started, stopping;
static struct gr_cleanup *asked; /* bulk deletes waiting for the thread */
static struct gr_store *store;
static int64_t result_ttl, key_ttl;

struct expired {
    int n, rows;
    int only_kept; /* take only jobs whose result was kept as datasets */
    char last[24]; /* the last row's id: where the next page starts */
    char id[BATCH][24];
    char kept[BATCH][2][24]; /* the datasets a job's result was kept in ("" none) */
};

static void on_expired(void *ctx, const char *id, const char *doc)
{
    struct expired *x = ctx;
    json_t *o = json_loads(doc, 0, NULL), *res = json_object_get(o, "result");
    const char *ds[2] = {json_string_value(json_object_get(res, "dataset")),
                         json_string_value(json_object_get(res, "indices_dataset"))};
    snprintf(x->last, sizeof x->last, "%s", id);
    x->rows++;
    if (!x->only_kept || ds[0]) {
        snprintf(x->id[x->n], sizeof x->id[0], "%s", id);
        for (int k = 0; k < 2; k++)
            snprintf(x->kept[x->n][k], sizeof x->kept[0][0], "%s", ds[k] ? ds[k] : "");
        x->n++;
    }
    json_decref(o);
}

/* Delete a kept result's dataset (row, file, cache copies, its tenant's bytes). 0 when it is
 * gone (or was already), -1 while a job uses it (the job that kept it waits for the next round). */
static int drop_dataset(const char *id)
{
    char *doc = NULL;
    struct gr_err e = {0};
    if (!id[0] || gr_store_get_dataset(store, id, NULL, &doc, &e) == GR_ENOTFOUND)
        return 0;
    if (!doc || gr_jobs_delete_dataset_begin(id, &e) != GR_OK) {
        free(doc);
        return -1;
    }
    struct gr_store_wait w = GR_STORE_WAIT_INIT;
    gr_store_wait_add(&w, gr_store_delete_dataset(store, id, gr_store_wait_done, &w));
    int rc = gr_store_wait_all(&w);
    if (rc == GR_OK) {
        json_t *o = json_loads(doc, 0, NULL);
        const char *tenant = json_string_value(json_object_get(o, "tenant"));
        gr_tenant_drop_bytes(tenant ? tenant : "default", (uint64_t)json_integer_value(json_object_get(o, "bytes")));
        json_decref(o);
        gr_dsfile_remove(gr_store_data_dir(store), id, NULL);
    }
    gr_jobs_delete_dataset_end(id);
    free(doc);
    return rc == GR_OK || rc == GR_ENOTFOUND ? 0 : -1;
}

/* Delete the jobs x lists, each after the datasets its result was kept in: how many went (a
 * job whose kept result other jobs read stays, counted in *in_use), or -1 (e) if the store failed. */
static int delete_listed(const struct expired *x, int *in_use, struct gr_err *e)
{
    struct gr_store_wait w = GR_STORE_WAIT_INIT;
    int n = 0;
    for (int i = 0; i < x->n; i++) {
        if (drop_dataset(x->kept[i][0]) || drop_dataset(x->kept[i][1])) {
            if (in_use)
                ++*in_use;
            continue; /* a job uses its result: the job stays until its result can go */
        }
        gr_store_wait_add(&w, gr_store_delete_job(store, x->id[i], gr_store_wait_done, &w));
        n++;
    }
    int rc = gr_store_wait_all(&w);
    if (rc != GR_OK && rc != GR_ENOTFOUND)
        return gr_fail(e, GR_EIO, NULL, "the store could not delete finished jobs"), -1;
    return n;
}

/* One bulk delete the API asked for: each finished status's jobs of the tenant, a page at a time. */
static void run_cleanup(struct gr_cleanup *c)
{
    static const char *const ended[] = {"succeeded", "failed", "canceled"};
    struct expired *x = malloc(sizeof *x);
    c->code = x ? GR_OK : gr_fail(&c->e, GR_ENOMEM, NULL, "out of memory deleting jobs");
    for (int k = 0; k < 3 && c->code == GR_OK; k++) {
        char cursor[24];
        snprintf(cursor, sizeof cursor, "%s", c->before);
        for (;;) {
            *x = (struct expired){.only_kept = c->kept};
            if ((c->code = gr_store_list_jobs(store, c->tenant, ended[k], NULL, cursor[0] ? cursor : NULL, BATCH,
                                              on_expired, x, &c->e)))
                break;
            int n = delete_listed(x, &c->in_use, &c->e);
            if (n < 0) {
                c->code = GR_EIO;
                break;
            }
            c->deleted += n;
            if (x->rows < BATCH)
                break;
            memcpy(cursor, x->last, sizeof cursor); /* the jobs deleted were above it: the next page is below */
        }
    }
    free(x);
}

void gr_sweep_cleanup(struct gr_cleanup *c)
{
    pthread_mutex_lock(&mu);
    int open = started && !stopping;
    if (open) {
        c->next = asked;
        asked = c;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (!open) {
        c->code = gr_fail(&c->e, GR_EUNAVAIL, NULL, "gpured is stopping: delete the jobs through another replica or later");
        c->done(c);
    }
}

int gr_sweep_once(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, int *jobs_deleted, struct gr_err *e)
{
    store = s;
    *jobs_deleted = 0;
    char orphans[64][24];
    for (int i = 0, n = gr_jobs_take_orphans(orphans, 64); i < n; i++)
        drop_dataset(orphans[i]);
    if (gr_store_shared(s) && gr_store_clean_files(s, e) != GR_OK)
        return e ? e->code : GR_EIO;
    struct gr_store_wait w = GR_STORE_WAIT_INIT;
    gr_store_wait_add(&w, gr_store_expire_keys(s, gr_now() - (double)key_ttl_s, gr_store_wait_done, &w));
    int rc = gr_store_wait_all(&w);
    if (rc != GR_OK || result_ttl_s <= 0)
        return rc == GR_OK ? GR_OK : gr_fail(e, GR_EIO, NULL, "the store could not expire idempotency keys");
    /* ids are microseconds since the epoch: every job id below this one was submitted earlier */
    char before[24];
    snprintf(before, sizeof before, "j_%016llx", (unsigned long long)((gr_now() - (double)result_ttl_s) * 1e6));
    struct expired *x = malloc(sizeof *x);
    if (!x)
        return gr_fail(e, GR_EIO, NULL, "out of memory sweeping");
    for (;;) {
        *x = (struct expired){0};
        if ((rc = gr_store_list_expired(s, before, BATCH, on_expired, x, e)) != GR_OK || x->n == 0)
            break;
        int kept = delete_listed(x, NULL, e);
        if (kept < 0) {
            rc = GR_EIO;
            break;
        }
        *jobs_deleted += kept;
        pthread_mutex_lock(&mu);
        int stop = stopping;
        pthread_mutex_unlock(&mu);
        if (stop || x->n < BATCH || kept == 0)
            break;
    }
    free(x);
    return rc;
}

static void *sweep_main(void *arg)
{
    /* often enough that nothing outlives its time by more than a quarter of it, at most a minute late */
    int64_t ttl = result_ttl > 0 && result_ttl < key_ttl ? result_ttl : key_ttl;
    int64_t period = ttl / 4 < 1 ? 1 : ttl / 4 > 60 ? 60 : ttl / 4;
    struct timespec due = {0}; /* the next round's time: now, at first */
    pthread_mutex_lock(&mu);
    while (!stopping) {
        struct gr_cleanup *todo = asked;
        asked = NULL;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int round = now.tv_sec > due.tv_sec || (now.tv_sec == due.tv_sec && now.tv_nsec >= due.tv_nsec);
        pthread_mutex_unlock(&mu);
        for (struct gr_cleanup *c = todo, *next; c; c = next) {
            next = c->next;
            run_cleanup(c);
            c->done(c);
        }
        if (round) {
            int n = 0;
            struct gr_err e = {0};
            double t0 = gr_mono_ms();
            if (gr_sweep_once(store, result_ttl, key_ttl, &n, &e) != GR_OK)
                gr_log(GR_LOG_WARN, "retention sweep: %s", e.msg);
            else if (n)
                gr_log(GR_LOG_INFO, "retention sweep: %d finished job(s) past --result-ttl deleted in %.0f ms", n,
                       gr_mono_ms() - t0);
            clock_gettime(CLOCK_REALTIME, &due);
            due.tv_sec += period;
        }
        pthread_mutex_lock(&mu);
        while (!stopping && !asked && pthread_cond_timedwait(&cv, &mu, &due) == 0)
            ;
    }
    struct gr_cleanup *todo = asked; /* stopping: each is answered, none run */
    asked = NULL;
    pthread_mutex_unlock(&mu);
    for (struct gr_cleanup *c = todo, *next; c; c = next) {
        next = c->next;
        c->code = gr_fail(&c->e, GR_EUNAVAIL, NULL, "gpured is stopping: delete the jobs through another replica or later");
        c->done(c);
    }
    return NULL;
}

int gr_sweep_start(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, struct gr_err *e)
{
    store = s;
    result_ttl = result_ttl_s;
    key_ttl = key_ttl_s;
    stopping = 0;
    if (pthread_create(&thread, NULL, sweep_main, NULL))
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the retention sweep");
    pthread_setname_np(thread, "gr-sweep");
    started = 1;
    return GR_OK;
}

void gr_sweep_stop(void)
{
    if (!started)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    started = 0;
}
