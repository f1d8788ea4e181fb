/* sweep.c: the retention sweep's thread. It reads expired jobs on its own store connection and
 * deletes them through the store's writer a batch at a time, waiting for each batch's commit
 * before reading the next, so that requests' writes interleave with it. */
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
static struct gr_store *store;
static int64_t result_ttl, key_ttl;

struct expired {
    int n;
    char id[BATCH][24];
    char kept[BATCH][2][24]; /* the datasets a job's result was kept in ("" none) */
};

static void on_expired(void *ctx, const char *id, const char *doc)
{
    struct expired *x = ctx;
    json_t *o = json_loads(doc, 0, NULL), *res = json_object_get(o, "result");
    const char *ds[2] = {json_string_value(json_object_get(res, "dataset")),
                         json_string_value(json_object_get(res, "indices_dataset"))};
    snprintf(x->id[x->n], sizeof x->id[0], "%s", id);
    for (int k = 0; k < 2; k++)
        snprintf(x->kept[x->n][k], sizeof x->kept[0][0], "%s", ds[k] ? ds[k] : "");
    x->n++;
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
        x->n = 0;
        if ((rc = gr_store_list_expired(s, before, BATCH, on_expired, x, e)) != GR_OK || x->n == 0)
            break;
        int kept = 0;
        for (int i = 0; i < x->n; i++) {
            if (drop_dataset(x->kept[i][0]) || drop_dataset(x->kept[i][1]))
                continue; /* a job uses its result: the job stays until its result can go */
            gr_store_wait_add(&w, gr_store_delete_job(s, x->id[i], gr_store_wait_done, &w));
            kept++;
        }
        if ((rc = gr_store_wait_all(&w)) != GR_OK && rc != GR_ENOTFOUND) {
            rc = gr_fail(e, GR_EIO, NULL, "the store could not delete expired jobs");
            break;
        }
        rc = GR_OK;
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
    pthread_mutex_lock(&mu);
    while (!stopping) {
        pthread_mutex_unlock(&mu);
        int n = 0;
        struct gr_err e = {0};
        double t0 = gr_mono_ms();
        if (gr_sweep_once(store, result_ttl, key_ttl, &n, &e) != GR_OK)
            gr_log(GR_LOG_WARN, "retention sweep: %s", e.msg);
        else if (n)
            gr_log(GR_LOG_INFO, "retention sweep: %d finished job(s) past --result-ttl deleted in %.0f ms", n,
                   gr_mono_ms() - t0);
        pthread_mutex_lock(&mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += period;
        while (!stopping && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
            ;
    }
    pthread_mutex_unlock(&mu);
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
