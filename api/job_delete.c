/* job_delete.c: DELETE /v1/jobs/{id} on a finished job: the datasets its result was kept in go
 * first, then its row, as retention removes them; and DELETE /v1/jobs, finished jobs in bulk,
 * which the sweep thread deletes. Runs on HTTP threads; the request owns its struct deletion or
 * gr_cleanup (r->state) and is suspended while the deletes commit. */
#include "api/job_delete.h"

#include "api/headers.h"
#include "server/sweep.h"

#include "db/dsfile.h"
#include "db/store.h"
#include "server/jobs.h"
#include "server/log.h"
#include "server/tenants.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct deletion {
    char kept[2][24];  /* the result's datasets (values, indices), "" none or deleted */
    char tenant[2][65];
    uint64_t bytes[2];
    int k;             /* the write under way: a dataset's (0, 1), then the job's (2) */
};

/* Let go of the kept datasets still held for deleting, and of d. */
static void release(struct deletion *d)
{
    for (int k = 0; k < 2; k++)
        if (d->kept[k][0])
            gr_jobs_delete_dataset_end(d->kept[k]);
    free(d);
}

/* Runs on the store's writer thread once a delete is committed (or refused). */
static void on_deleted(void *ctx, int code)
{
    struct gr_req *r = ctx;
    r->store_code = code;
    gr_wake(r);
}

static void deleted(struct gr_req *r);

/* The next delete: a kept dataset's, or at last the job's. */
static void next(struct gr_req *r)
{
    struct deletion *d = r->state;
    while (d->k < 2 && !d->kept[d->k][0])
        d->k++;
    gr_suspend(r, deleted);
    int rc = d->k < 2 ? gr_store_delete_dataset(gr_api_store, d->kept[d->k], on_deleted, r)
                      : gr_store_delete_job(gr_api_store, r->id, on_deleted, r);
    if (rc != GR_OK)
        on_deleted(r, rc);
}

static void deleted(struct gr_req *r)
{
    struct deletion *d = r->state;
    struct gr_err e = {0};
    int rc = r->store_code;
    if (d->k < 2) {
        char *id = d->kept[d->k];
        if (rc == GR_OK) { /* the row is gone: the values are unreachable, the file only disk space */
            gr_tenant_drop_bytes(d->tenant[d->k], d->bytes[d->k]);
            if (gr_dsfile_remove(gr_store_data_dir(gr_api_store), id, &e) != GR_OK)
                gr_log(GR_LOG_WARN, "dataset %s deleted, but its file stays: %s", id, e.msg);
        }
        gr_jobs_delete_dataset_end(id);
        if (rc == GR_OK || rc == GR_ENOTFOUND) {
            id[0] = '\0';
            d->k++;
            next(r);
            return;
        }
        gr_fail(&e, GR_EIO, NULL, "the store could not delete dataset %s, job %s's result; the job is still there",
                id, r->id);
        id[0] = '\0';
    } else if (rc == GR_OK) {
        gr_log(GR_LOG_INFO, "job %s deleted", r->id);
    } else if (rc == GR_ENOTFOUND) {
        gr_fail(&e, rc, NULL, "no job with id %s (deleted meanwhile)", r->id);
    } else {
        gr_fail(&e, GR_EIO, NULL, "the store could not delete job %s; it is still there", r->id);
    }
    release(d);
    r->state = NULL;
    if (e.code)
        gr_respond_problem(r, &e);
    else
        gr_respond(r, 204, NULL, NULL, 0, NULL);
}

/* Hold kept dataset id for deleting into d's slot k: GR_OK (slot empty if it is gone already), or
 * GR_ECONFLICT while jobs read it, here or (a shared store) on other replicas. */
static int hold(struct deletion *d, int k, const char *id, const char *job, struct gr_err *e)
{
    char *doc = NULL;
    long long elsewhere = 0;
    int rc = gr_store_get_dataset(gr_api_store, id, NULL, &doc, e);
    if (rc == GR_ENOTFOUND)
        return GR_OK;
    if (rc == GR_OK && (rc = gr_jobs_delete_dataset_begin(id, e)) == GR_OK) {
        snprintf(d->kept[k], sizeof d->kept[k], "%s", id);
        if (gr_store_shared(gr_api_store) && (rc = gr_store_dataset_jobs(gr_api_store, id, &elsewhere, e)) == GR_OK &&
            elsewhere > 0)
            rc = gr_fail(e, GR_ECONFLICT, NULL, "job %s's result (dataset %s) is read by %lld queued or running "
                                                "job(s) of other replicas: delete it once they end", job, id, elsewhere);
    } else if (rc == GR_ECONFLICT) {
        rc = gr_fail(e, GR_ECONFLICT, NULL, "job %s's result (dataset %s) is read by queued or running jobs: delete "
                                            "it once they end", job, id);
    }
    json_t *o = rc == GR_OK ? json_loads(doc, 0, NULL) : NULL;
    const char *tenant = json_string_value(json_object_get(o, "tenant"));
    snprintf(d->tenant[k], sizeof d->tenant[k], "%s", tenant ? tenant : "default");
    d->bytes[k] = (uint64_t)json_integer_value(json_object_get(o, "bytes"));
    json_decref(o);
    free(doc);
    return rc;
}

void gr_delete_finished_job(struct gr_req *r, const char *doc)
{
    struct gr_err e = {0};
    struct deletion *d = calloc(1, sizeof *d);
    json_t *o = json_loads(doc, 0, NULL), *res = json_object_get(o, "result");
    const char *kept[2] = {json_string_value(json_object_get(res, "dataset")),
                           json_string_value(json_object_get(res, "indices_dataset"))};
    int rc = d ? GR_OK : gr_fail(&e, GR_ENOMEM, NULL, "out of memory deleting job %s", r->id);
    for (int k = 0; k < 2 && rc == GR_OK; k++)
        if (kept[k])
            rc = hold(d, k, kept[k], r->id, &e);
    json_decref(o);
    if (rc != GR_OK) {
        if (d)
            release(d);
        gr_respond_problem(r, &e);
        return;
    }
    r->state = d;
    next(r);
}

/* Runs on the sweep thread once the bulk delete is done. */
static void cleaned(struct gr_cleanup *c) { gr_wake(c->ctx); }

static void answer_cleanup(struct gr_req *r)
{
    struct gr_cleanup *c = r->state;
    r->state = NULL;
    if (c->code != GR_OK) {
        gr_respond_problem(r, &c->e);
    } else {
        char *body = malloc(96);
        int n = body ? snprintf(body, 96, "{\"deleted\":%d,\"in_use\":%d}", c->deleted, c->in_use) : 0;
        gr_respond(r, 200, "application/json", body, (size_t)n, NULL);
        gr_log(GR_LOG_INFO, "%d finished job(s) deleted on request, %d left in use", c->deleted, c->in_use);
    }
    free(c);
}

void gr_cleanup_jobs(struct gr_req *r)
{
    struct gr_err e = {0};
    const char *older = gr_query(r, "older_than"), *kept = gr_query(r, "kept"), *tenant;
    int64_t secs = older ? gr_parse_uint(older, INT64_MAX / 1000000) : -1;
    int rc = GR_OK;
    if (older && secs < 0)
        rc = gr_fail(&e, GR_EINVAL, "older_than", "older_than must be whole seconds (0 or more), not '%.40s'", older);
    else if (kept && strcmp(kept, "true") && strcmp(kept, "false"))
        rc = gr_fail(&e, GR_EINVAL, "kept", "kept must be true or false, not '%.40s'", kept);
    else if (!older && !(kept && !strcmp(kept, "true")))
        rc = gr_fail(&e, GR_EINVAL, NULL, "say which finished jobs to delete: ?older_than=SECONDS (submitted that long "
                                          "ago), ?kept=true (results kept as datasets), or both");
    if (rc != GR_OK) {
        gr_respond_problem(r, &e);
        return;
    }
    if (gr_list_tenant(r, &tenant) != GR_OK)
        return;
    struct gr_cleanup *c = calloc(1, sizeof *c);
    if (!c) {
        gr_fail(&e, GR_ENOMEM, NULL, "out of memory");
        gr_respond_problem(r, &e);
        return;
    }
    c->tenant = tenant; /* the request's or its token's: kept while it is parked */
    c->kept = kept && !strcmp(kept, "true");
    if (older) /* ids are microseconds since the epoch: every job id below this one was submitted earlier */
        snprintf(c->before, sizeof c->before, "j_%016llx", (unsigned long long)((gr_now() - (double)secs) * 1e6));
    c->done = cleaned;
    c->ctx = r;
    r->state = c;
    gr_suspend(r, answer_cleanup);
    gr_sweep_cleanup(c);
}
