/* routes.c: the routing table and one handler per route and method (API.md). Handlers run on
 * the request's HTTP thread; a handler answers at once or parks the request until a job's
 * state is committed, and its resume function answers then. */
#include "api/http.h"

#include "api/datasets.h"
#include "api/events.h"
#include "api/headers.h"
#include "api/idempotency.h"
#include "api/job_delete.h"
#include "api/parse.h"
#include "api/results.h"
#include "api/routes_ops.h"
#include "common/buf.h"
#include "common/id.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "gpu/bench.h"
#include "server/cluster.h"
#include "server/config.h"
#include "server/job_doc.h"
#include "server/log.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <stdlib.h>
#include <string.h>

static void problem(struct gr_req *r, int code, const char *field, const char *msg)
{
    struct gr_err e;
    gr_fail(&e, code, field, "%s", msg);
    gr_respond_problem(r, &e);
}

static int64_t prefer_wait(struct gr_req *r) { return gr_prefer_wait(gr_header(r, "Prefer")); }

/* --- jobs --- */

/* buf (of n) with "name;dur=ms" added at its end, at: its length; returns the new length. */
static size_t phase(char *buf, size_t n, size_t at, const char *name, double ms)
{
    int k = at < n ? snprintf(buf + at, n - at, "%s%s;dur=%.3f", at ? ", " : "", name, ms) : 0;
    return at + (k > 0 ? (size_t)k : 0);
}

/* A submission's first phases, from its marks: what every Server-Timing begins with. */
static size_t first_phases(const struct gr_req *r, char *buf, size_t n)
{
    const double *m = r->marks;
    size_t at = phase(buf, n, 0, "receive", m[GR_MARK_BODY] - r->t0);
    at = phase(buf, n, at, "parse", m[GR_MARK_PARSED] - m[GR_MARK_BODY]);
    return phase(buf, n, at, "submit", m[GR_MARK_QUEUED] - m[GR_MARK_PARSED]);
}

/* A submission's answer: doc (taken) with 200 (done) or 202, Location, Idempotent-Replayed on a
 * replay, Preference-Applied when the client's Prefer: wait was read (r->wait_s), and for a job
 * submitted here (not a replay) Server-Timing: where its time went. ended: when the job ended
 * (gr_mono_ms), 0 if it had not when woken. */
static void respond_job(struct gr_req *r, const char *id, int done, char *doc, double ended)
{
    char loc[48], applied[24], timing[256];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", id);
    snprintf(applied, sizeof applied, "wait=%lld", (long long)r->wait_s);
    const char *hdrs[9] = {MHD_HTTP_HEADER_LOCATION, loc}, **h = hdrs + 2;
    if (r->replayed) {
        *h++ = "Idempotent-Replayed";
        *h++ = "true";
    }
    if (r->wait_s >= 0) {
        *h++ = "Preference-Applied";
        *h++ = applied;
    }
    const double *m = r->marks;
    if (m[GR_MARK_QUEUED] && m[GR_MARK_WOKEN]) {
        /* a waited job's run ends before the one commit that wakes it */
        int ran = ended > m[GR_MARK_QUEUED] && ended <= m[GR_MARK_WOKEN];
        size_t at = first_phases(r, timing, sizeof timing);
        at = phase(timing, sizeof timing, at, "run", ran ? ended - m[GR_MARK_QUEUED] : 0);
        at = phase(timing, sizeof timing, at, "store", m[GR_MARK_WOKEN] - (ran ? ended : m[GR_MARK_QUEUED]));
        at = phase(timing, sizeof timing, at, "resume", m[GR_MARK_RESUMED] - m[GR_MARK_WOKEN]);
        phase(timing, sizeof timing, at, "answer", gr_mono_ms() - m[GR_MARK_RESUMED]);
        *h++ = "Server-Timing";
        *h++ = timing;
    }
    gr_respond(r, done ? 200 : 202, "application/json", doc, strlen(doc), hdrs);
}

/* Answer with the job: 200 once its final state is stored and the client asked to wait
 * for it (or canceled it), 202 while it is only accepted. */
static void answer_job(struct gr_req *r)
{
    r->marks[GR_MARK_RESUMED] = gr_mono_ms();
    struct gr_job *j = r->w.job;
    int committed, st;
    char *doc = gr_jobs_render(j, &committed, &st);
    if (committed == -2) {
        problem(r, j->refused == GR_ENOMEM ? GR_ENOMEM : GR_EIO, NULL,
                j->refused == GR_ENOMEM ? "the server's disk is full, so this job was not accepted; retry once space "
                                          "is freed (delete datasets you no longer need)"
                                        : "the store could not keep this job; it was not accepted");
        free(doc);
        return;
    }
    if (committed == -3) { /* another replica claimed it: what the store has is its state */
        char status[16] = "";
        free(doc);
        doc = NULL;
        struct gr_err e;
        if (gr_store_get_job(gr_api_store, j->id, NULL, &doc, status, &e) != GR_OK) {
            gr_respond_problem(r, &e);
            return;
        }
        committed = gr_status_parse(status);
    }
    if (!doc) {
        problem(r, GR_ENOMEM, NULL, "out of memory rendering the job");
        return;
    }
    int done = GR_TERMINAL(committed) && r->w.until == GR_UNTIL_TERMINAL;
    /* its end (wall clock, stable once its final state is committed) on the monotonic clock */
    double ended = GR_TERMINAL(committed) ? j->finished_at * 1000 - (gr_now() * 1000 - gr_mono_ms()) : 0;
    respond_job(r, j->id, done, doc, ended);
}

/* Every variant a job names must exist on its device and cover what it asks; a product, which
 * becomes a dataset, must fit in one (and in the worker's memory before that). */
static int check_variants(const struct gr_job *j, struct gr_err *e)
{
    size_t out = 0;
    if (j->kind == GR_JOB_MATMUL && (gr_mul_size((size_t)j->shape[0], (size_t)j->shape[1], &out) ||
                                     gr_mul_size(out, gr_dtype_size(j->dtype), &out) ||
                                     out > gr_api_cfg->max_dataset_bytes))
        return gr_fail(e, GR_EUNPROC, "b",
                       "the product would be %lld x %lld %s (%zu MiB), over --max-dataset-bytes (%zu MiB): "
                       "products are kept as datasets",
                       (long long)j->shape[0], (long long)j->shape[1], gr_dtype_name(j->dtype), out >> 20,
                       gr_api_cfg->max_dataset_bytes >> 20);
    if (j->kind == GR_JOB_MATMUL)
        return gr_backend_check(j->backend, j->algorithm, j->op, j->dtype, GR_AXIS_ALL, e);
    if (j->kind != GR_JOB_BENCH)
        return gr_backend_check_axes(j->backend, j->algorithm, j->op, j->dtype, j->ndim, j->shape, j->axes, e);
    /* the limits of the device it was routed to (device auto may land on the CPU) */
    if (gr_bench_fits(!strcmp(j->backend->name, "cpu"), j->op, j->shape[0], j->repeats, e) != GR_OK)
        return e->code;
    for (int k = 0; k < j->nalgos; k++) {
        int rc = gr_backend_check(j->backend, j->algos[k], j->op, j->dtype, GR_AXIS_ALL, e);
        if (rc) {
            snprintf(e->field, sizeof e->field, "algorithms");
            return rc;
        }
    }
    return GR_OK;
}

/* Park r on job j (referenced, ours now) until it is durable, or with Prefer: wait=N until it
 * ends or N s pass; answer_job answers then. */
static void park_job(struct gr_req *r, struct gr_job *j)
{
    r->wait_s = prefer_wait(r);
    r->w = (struct gr_waiter){.job = j, .until = r->wait_s > 0 ? GR_UNTIL_TERMINAL : GR_UNTIL_DURABLE,
                              .deadline_ms = r->wait_s > 0 ? gr_mono_ms() + (double)r->wait_s * 1000 : 0};
    gr_park(r, answer_job);
}

/* A retried submission: answer with the job its key made, as a new submission would be answered. */
static void replay_job(struct gr_req *r, const char *id)
{
    struct gr_err e = {0};
    char *doc = NULL, status[16];
    r->replayed = 1;
    struct gr_job *j = gr_jobs_find(id, NULL);
    if (j) {
        park_job(r, j);
        return;
    }
    int rc = gr_store_get_job(gr_api_store, id, NULL, &doc, status, &e);
    if (rc == GR_ENOTFOUND)
        gr_fail(&e, rc, NULL, "job %s, which this Idempotency-Key made, has been deleted since", id);
    if (rc) {
        gr_respond_problem(r, &e);
        return;
    }
    /* as a new submission is answered: 200 only to a client that asked to wait for the end */
    r->wait_s = prefer_wait(r);
    respond_job(r, id, GR_TERMINAL(gr_status_parse(status)) && r->wait_s > 0, doc, 0);
}

/* The Idempotency-Key of a job's submission: GR_OK to go on (the key, if any, into j), else
 * answered (a replay or a problem) and non-zero. */
static int job_key(struct gr_req *r, struct gr_job *j)
{
    struct gr_err e = {0};
    char fp[65], id[24];
    int rc = gr_idem_hold(r, &e);
    if (rc == GR_OK && !r->idem)
        return GR_OK;
    if (rc == GR_OK) {
        gr_idem_fingerprint(r, r->body ? r->body : "", r->len, fp);
        rc = gr_idem_lookup(r, fp, id, &e);
    }
    if (rc == GR_OK) {
        replay_job(r, id);
        return GR_ECONFLICT;
    }
    if (rc == GR_ENOTFOUND) {
        if ((j->idem_key = strdup(strchr(r->idem, ' ') + 1))) {
            memcpy(j->idem_fp, fp, sizeof fp);
            return GR_OK;
        }
        rc = gr_fail(&e, GR_ENOMEM, NULL, "out of memory");
    }
    gr_respond_problem(r, &e);
    return rc;
}

/* Parse the body into a new job of the request's tenant, accept it, and park until it is
 * durable (or, with Prefer: wait=N, until it ends or N s pass). */
static void submit(struct gr_req *r, int (*parse)(struct gr_req *, struct gr_job *, struct gr_err *))
{
    r->marks[GR_MARK_BODY] = gr_mono_ms();
    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    if (!j) {
        problem(r, GR_ENOMEM, NULL, "out of memory for a new job");
        return;
    }
    memcpy(j->tenant, r->who.tenant, sizeof j->tenant);
    if (job_key(r, j) != GR_OK) {
        gr_job_unref(j);
        return;
    }
    int rc = parse(r, j, &e);
    r->marks[GR_MARK_PARSED] = gr_mono_ms();
    if (!rc)
        rc = gr_jobs_route(j->device, j->op, j->dataset, &j->backend, &e);
    if (!rc)
        rc = check_variants(j, &e);
    if (!rc) {
        gr_cluster_place(j);
        /* a job the client waits for is told to no one before its answer: stored once, at its
         * end (or as queued when the wait runs out first); one commit where two were */
        j->deferred = !j->offered && prefer_wait(r) > 0;
        rc = gr_jobs_submit(&j, 1, NULL, &e);
        r->marks[GR_MARK_QUEUED] = gr_mono_ms();
    }
    if (rc) {
        gr_respond_problem(r, &e);
        gr_job_unref(j);
        return;
    }
    /* the body is parsed into the job: free it now rather than when the connection ends */
    free(r->body);
    r->body = NULL;
    park_job(r, j);
}

static int parse_json_job(struct gr_req *r, struct gr_job *j, struct gr_err *e)
{
    return gr_parse_job(r->body ? r->body : "", r->len, gr_dataset_for_job, r, j, e);
}

struct query {
    json_t *args;
    int bad; /* not UTF-8, or given twice */
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct query *q = cls;
    if (json_object_get(q->args, key) || json_object_set_new(q->args, key, json_string(value ? value : "")))
        q->bad = 1;
    return MHD_YES;
}

/* A one-shot job: its arguments in the query, its values the body (raw or .npy). */
static int parse_binary_job(struct gr_req *r, struct gr_job *j, struct gr_err *e)
{
    struct query q = {json_object(), 0};
    if (q.args)
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    json_object_del(q.args, "batch"); /* post_job's (submit_rows) */
    int npy = gr_ctype_is(gr_header(r, MHD_HTTP_HEADER_CONTENT_TYPE), "application/x-npy");
    int rc = !q.args ? gr_fail(e, GR_ENOMEM, NULL, "out of memory")
             : q.bad ? gr_fail(e, GR_EINVAL, NULL, "each query argument must appear once, in UTF-8")
                     : gr_parse_binary_job(q.args, npy, &r->body, r->len, j, e);
    json_decref(q.args);
    return rc;
}

static int parse_benchmark(struct gr_req *r, struct gr_job *j, struct gr_err *e)
{
    return gr_parse_benchmark(r->body ? r->body : "", r->len, j, e);
}

static enum MHD_Result first_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    *(const char **)cls = key;
    return MHD_NO;
}

/* A batch's answer: its jobs in order, as a JSON array, 200 once every one has ended for a client
 * that waited for it, else 202; one problem if the store refused them (all were, or none). A
 * batch not waited for is answered with its jobs as accepted (queued), the documents rendered
 * for the store: rendering 100,000 jobs again, as they stand, took a third of its 202. */
static void answer_batch(struct gr_req *r)
{
    double at = gr_mono_ms(); /* every job has ended, or the 202 may go */
    struct gr_buf out = {0};
    int done = r->wait_s > 0, refused = 0, as_accepted = r->accepted.p || r->accepted.oom;
    if (as_accepted) {
        out = r->accepted;
        r->accepted = (struct gr_buf){0};
        for (int k = 0; k < r->nbatch && !refused; k++)
            refused = gr_jobs_committed(r->batch[k]) == -2;
    }
    for (int k = 0; !as_accepted && k < r->nbatch && !refused; k++) {
        int committed, st;
        char *doc = gr_jobs_render(r->batch[k], &committed, &st), status[16] = "";
        refused = committed == -2;
        if (committed == -3) { /* claimed elsewhere: the store's state */
            free(doc);
            doc = NULL;
            gr_store_get_job(gr_api_store, r->batch[k]->id, NULL, &doc, status, NULL);
            committed = gr_status_parse(status);
        }
        done &= GR_TERMINAL(committed);
        gr_buf_add(&out, k ? "," : "[", 1);
        gr_buf_add(&out, doc ? doc : "null", strlen(doc ? doc : "null"));
        free(doc);
    }
    if (!as_accepted)
        gr_buf_add(&out, "]", 1);
    if (refused || out.oom) {
        struct gr_job *j = r->batch[0];
        free(out.p);
        problem(r, refused && j->refused == GR_ENOMEM ? GR_ENOMEM : refused ? GR_EIO : GR_ENOMEM, NULL,
                !refused         ? "out of memory rendering the batch"
                : r->wait_s <= 0 ? "the store could not keep this batch; none of its jobs was accepted"
                                 : "the store could not keep every job of this waited batch, so it is not accepted; "
                                   "jobs of it that ended before may be stored (API.md)");
        return;
    }
    /* where the batch's time went, for a client to see without the server's log */
    const double *m = r->marks;
    char applied[24], timing[256];
    snprintf(applied, sizeof applied, "wait=%lld", (long long)r->wait_s);
    size_t t = first_phases(r, timing, sizeof timing);
    t = phase(timing, sizeof timing, t, "store", m[GR_MARK_WOKEN] - m[GR_MARK_QUEUED]);
    t = phase(timing, sizeof timing, t, "run", at - m[GR_MARK_WOKEN]);
    phase(timing, sizeof timing, t, "answer", gr_mono_ms() - at);
    const char *hdrs[] = {"Preference-Applied", applied, "Server-Timing", timing, NULL};
    gr_log(GR_LOG_INFO, "a batch of %d jobs %s %.1f ms after its request came (%s)", r->nbatch,
           done ? "ended" : "accepted", gr_mono_ms() - r->t0, timing);
    gr_respond(r, done ? 200 : 202, "application/json", out.p, out.len, r->wait_s >= 0 ? hdrs : hdrs + 2);
}

/* Answer once every job of the batch from batch_at on is durable (stored as it ended, or as
 * queued): park on each not stored yet until it is. */
static void batch_durable(struct gr_req *r)
{
    while (r->batch_at < r->nbatch && gr_jobs_committed(r->batch[r->batch_at]) != -1)
        r->batch_at++;
    if (r->batch_at == r->nbatch) {
        answer_batch(r);
        return;
    }
    struct gr_job *j = r->batch[r->batch_at];
    gr_job_unref(r->w.job);
    gr_job_ref(j);
    r->w = (struct gr_waiter){.job = j, .until = GR_UNTIL_DURABLE};
    gr_park(r, batch_durable);
}

/* Woken by the batch's job parked on: park on the next one not yet ended while the client's
 * Prefer: wait lasts, else answer: once the jobs still deferred are stored as queued. */
static void batch_next(struct gr_req *r)
{
    double deadline = r->w.deadline_ms;
    while (r->wait_s > 0 && r->batch_at < r->nbatch && gr_jobs_settled(r->batch[r->batch_at]))
        r->batch_at++;
    if (r->wait_s <= 0 || r->batch_at == r->nbatch || gr_mono_ms() >= deadline) {
        gr_jobs_undefer(r->batch + r->batch_at, r->nbatch - r->batch_at);
        batch_durable(r);
        return;
    }
    struct gr_job *j = r->batch[r->batch_at];
    gr_job_unref(r->w.job);
    gr_job_ref(j);
    r->w = (struct gr_waiter){.job = j, .until = GR_UNTIL_TERMINAL, .deadline_ms = deadline};
    gr_park(r, batch_next);
}

/* Accept the n jobs js of a batch (ours now; rc: how parsing them went, e why not) whole or not
 * at all: each routed and checked (the problem names the first that fails), then all stored in
 * one transaction; park until they are durable. With Prefer: wait, as a waited single job, each
 * is stored once, at its end (or as queued when the wait runs out first): park until they end. */
static void accept_batch(struct gr_req *r, struct gr_job **js, int n, int rc, struct gr_err *e)
{
    r->marks[GR_MARK_PARSED] = gr_mono_ms();
    r->wait_s = prefer_wait(r);
    for (int k = 0; rc == GR_OK && k < n; k++) {
        memcpy(js[k]->tenant, r->who.tenant, sizeof js[k]->tenant);
        if ((rc = gr_jobs_route(js[k]->device, js[k]->op, js[k]->dataset, &js[k]->backend, e)) || (rc = check_variants(js[k], e)))
            gr_err_at(e, k);
        else
            gr_cluster_place(js[k]);
        js[k]->deferred = !js[k]->offered && r->wait_s > 0;
    }
    if (rc == GR_OK)
        rc = gr_jobs_submit(js, n, r->wait_s > 0 ? NULL : &r->accepted, e);
    r->marks[GR_MARK_QUEUED] = gr_mono_ms();
    if (rc) {
        gr_respond_problem(r, e);
        for (int k = 0; k < n; k++)
            gr_job_unref(js[k]);
        free(js);
        return;
    }
    free(r->body);
    r->body = NULL;
    r->batch = js;
    r->nbatch = n;
    /* one transaction: the last insert's commit is every one's */
    gr_job_ref(js[n - 1]);
    r->w = (struct gr_waiter){.job = js[n - 1], .until = GR_UNTIL_DURABLE,
                              .deadline_ms = r->wait_s > 0 ? gr_mono_ms() + (double)r->wait_s * 1000 : 0};
    if (r->wait_s <= 0) {
        gr_park(r, batch_next);
        return;
    }
    r->marks[GR_MARK_WOKEN] = r->marks[GR_MARK_QUEUED]; /* nothing to store first: its "store" is 0 */
    batch_next(r);
}

/* GR_OK, or the problem of an Idempotency-Key on a batch. */
static int batch_unkeyed(struct gr_req *r, struct gr_err *e)
{
    return gr_header(r, "Idempotency-Key")
               ? gr_fail(e, GR_EUNPROC, "Idempotency-Key",
                         "a batch takes no Idempotency-Key yet: send it without one, or its jobs one by one with a key "
                         "each")
               : GR_OK;
}

/* POST /v1/jobs with a JSON array of jobs. */
static void submit_batch(struct gr_req *r)
{
    r->marks[GR_MARK_BODY] = gr_mono_ms();
    struct gr_err e = {0};
    struct gr_job **js = NULL;
    int n = 0, rc = batch_unkeyed(r, &e);
    if (rc == GR_OK)
        rc = gr_parse_batch(r->body, r->len, gr_api_cfg->queue_capacity, gr_dataset_for_job, r, &js, &n, &e);
    accept_batch(r, js, n, rc, &e);
}

/* POST /v1/jobs?batch=rows with a one-shot body of 2-D values: each row a job of its own,
 * reduced whole. */
static void submit_rows(struct gr_req *r)
{
    r->marks[GR_MARK_BODY] = gr_mono_ms();
    struct gr_err e = {0};
    struct gr_job *t = gr_job_new(), **js = NULL;
    int n = 0, rc = !t ? gr_fail(&e, GR_ENOMEM, NULL, "out of memory") : batch_unkeyed(r, &e);
    if (rc == GR_OK)
        rc = parse_binary_job(r, t, &e);
    if (rc == GR_OK && (t->ndim != 2 || !gr_job_whole(t)))
        rc = gr_fail(&e, GR_EUNPROC, "batch", "?batch=rows makes each row of 2-D values (?shape=R,C, or a 2-D .npy) "
                                              "a job that reduces it whole: give 2-D values and no ?axis=");
    else if (rc == GR_OK && t->shape[0] > gr_api_cfg->queue_capacity)
        rc = gr_fail(&e, GR_EUNPROC, "batch", "a batch of %lld rows is over the limit of %d (--queue-capacity): send "
                                              "it in parts",
                     (long long)t->shape[0], gr_api_cfg->queue_capacity);
    else if (rc == GR_OK && !(js = calloc((size_t)t->shape[0], sizeof *js)))
        rc = gr_fail(&e, GR_ENOMEM, NULL, "out of memory");
    for (int64_t k = 0; rc == GR_OK && k < t->shape[0]; k++, n++)
        if (!(js[k] = gr_job_row(t, k)))
            rc = gr_fail(&e, GR_ENOMEM, NULL, "out of memory");
    gr_job_unref(t);
    accept_batch(r, js, n, rc, &e);
}

static void post_job(struct gr_req *r)
{
    int json = gr_ctype_is(gr_header(r, MHD_HTTP_HEADER_CONTENT_TYPE), "application/json");
    const char *arg = NULL;
    if (json)
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, first_arg, &arg);
    if (arg) { /* it would be ignored: say so rather than run a job the client did not describe */
        struct gr_err e;
        gr_fail(&e, GR_EINVAL, NULL, "?%.64s= belongs to the one-shot form (a raw or .npy body); with a JSON body put "
                                     "every member in the JSON",
                arg);
        gr_respond_problem(r, &e);
        return;
    }
    const char *b = r->body ? r->body + strspn(r->body, " \t\r\n") : "", *batch = gr_query(r, "batch");
    if (json && *b == '[') {
        submit_batch(r);
    } else if (batch && strcmp(batch, "rows")) {
        struct gr_err e;
        gr_fail(&e, GR_EINVAL, "batch", "?batch= takes one value: rows (each row of the values a job of its own)");
        gr_respond_problem(r, &e);
    } else if (batch) {
        submit_rows(r);
    } else {
        submit(r, json ? parse_json_job : parse_binary_job);
    }
}

static void post_benchmark(struct gr_req *r) { submit(r, parse_benchmark); }

static void get_job_again(struct gr_req *r);

/* Answer GET /v1/jobs/{id}: a job in flight from memory (its running state is never stored),
 * any other from the store; park first when asked to wait for a change (may_wait: a job here;
 * a job another replica holds, until deadline_ms, when it is later than now). */
static void get_job_answer(struct gr_req *r, int may_wait, double deadline_ms)
{
    struct gr_err e = {0};
    char *doc = NULL, status[16] = "";
    struct gr_job *j = gr_jobs_find(r->id, gr_scope(r));
    if (j) {
        int committed, st;
        doc = gr_jobs_render(j, &committed, &st);
        if (may_wait && deadline_ms > gr_mono_ms() && !GR_TERMINAL(st)) {
            free(doc);
            r->w = (struct gr_waiter){.job = j, .until = GR_UNTIL_CHANGED, .seen = st, .deadline_ms = deadline_ms};
            gr_park(r, get_job_again);
            return;
        }
        gr_job_unref(j);
        snprintf(status, sizeof status, "%s", gr_status_name(st));
        if (!doc) {
            problem(r, GR_ENOMEM, NULL, "out of memory rendering the job");
            return;
        }
    } else {
        int rc = gr_store_get_job(gr_api_store, r->id, gr_scope(r), &doc, status, &e);
        if (rc == GR_ENOTFOUND)
            gr_fail(&e, rc, NULL, "no job with id %s", r->id);
        if (rc) {
            gr_respond_problem(r, &e);
            return;
        }
        int st = gr_status_parse(status);
        /* another replica holds it: wait for the store's word; woken with nothing changed (the
         * store's listener back after a lost connection), wait on for the time left */
        if (deadline_ms > gr_mono_ms() && !GR_TERMINAL(st) && gr_store_shared(gr_api_store) &&
            (j = gr_jobs_watch(r->id, st))) {
            free(doc);
            char id[32]; /* r may be answered and gone once parked */
            snprintf(id, sizeof id, "%s", r->id);
            if (r->w.job) /* the stand-in it waited on before */
                gr_job_unref(r->w.job);
            r->w = (struct gr_waiter){.job = j, .until = GR_UNTIL_CHANGED, .seen = st, .deadline_ms = deadline_ms};
            gr_park(r, get_job_again);
            /* a change told before the watch began would be missed: look once more */
            char *now = NULL, again[16] = "";
            if (gr_store_get_job(gr_api_store, id, NULL, &now, again, NULL) != GR_OK || strcmp(again, status))
                gr_jobs_changed(NULL, id);
            free(now);
            return;
        }
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"%s-%s\"", r->id, status);
    const char *inm = gr_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    const char *hdrs[] = {MHD_HTTP_HEADER_ETAG, etag, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache", NULL};
    if (inm && strstr(inm, etag)) {
        free(doc);
        gr_respond(r, 304, NULL, NULL, 0, hdrs);
        return;
    }
    gr_respond(r, 200, "application/json", doc, strlen(doc), hdrs);
}

static void get_job_again(struct gr_req *r) { get_job_answer(r, 0, r->w.deadline_ms); }

static void get_job(struct gr_req *r)
{
    if (!gr_id_valid(r->id, 'j')) {
        problem(r, GR_ENOTFOUND, NULL, "no job with that id (ids look like j_0123456789abcdef)");
        return;
    }
    const char *w = gr_query(r, "wait");
    r->wait_s = w ? gr_parse_uint(w, INT32_MAX) : 0;
    if (r->wait_s < 0) {
        problem(r, GR_EINVAL, "wait", "?wait= must be a whole number of seconds (at most 60 are honoured)");
        return;
    }
    if (r->wait_s > GR_MAX_WAIT_S)
        r->wait_s = GR_MAX_WAIT_S;
    get_job_answer(r, 1, r->wait_s > 0 ? gr_mono_ms() + (double)r->wait_s * 1000 : 0);
}

/* How long a cancel through another replica waits for the job's holder to cancel it: a holder
 * that has it queued answers within a commit; one that runs it does not answer. */
#define CANCEL_ASK_MS 2000

/* The answer to a cancel the job's holder was asked for (parked until the job changed, or
 * CANCEL_ASK_MS): what the store has now. */
static void cancel_asked(struct gr_req *r)
{
    struct gr_err e = {0};
    char *doc = NULL, status[16] = "";
    int rc = gr_store_get_job(gr_api_store, r->id, gr_scope(r), &doc, status, &e);
    if (rc == GR_OK && !strcmp(status, "canceled")) {
        gr_respond(r, 200, "application/json", doc, strlen(doc), NULL); /* doc is the answer's now */
        return;
    }
    free(doc);
    if (rc == GR_OK && !strcmp(status, "queued"))
        gr_fail(&e, GR_ECONFLICT, NULL, "job %s is running on the replica that holds it (the store shows it queued "
                                        "until it ends); only queued jobs can be canceled", r->id);
    else if (rc == GR_OK)
        gr_fail(&e, GR_ECONFLICT, NULL, "job %s is %s; only queued jobs can be canceled", r->id, status);
    else if (rc == GR_ENOTFOUND)
        gr_fail(&e, rc, NULL, "no job with id %s", r->id);
    gr_respond_problem(r, &e);
}

/* Ask the live replica that holds queued job r->id to cancel it, and park until the job changes
 * or the holder has had its time; GR_OK if parked. */
static int ask_holder(struct gr_req *r, struct gr_err *e)
{
    struct gr_job *w = gr_jobs_watch(r->id, GR_QUEUED);
    if (!w)
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    int rc = gr_store_ask_cancel(gr_api_store, r->id, e);
    if (rc != GR_OK) {
        gr_job_unref(w);
        return rc;
    }
    r->w = (struct gr_waiter){.job = w, .until = GR_UNTIL_CHANGED, .seen = GR_QUEUED,
                              .deadline_ms = gr_mono_ms() + CANCEL_ASK_MS};
    gr_park(r, cancel_asked);
    return GR_OK;
}

static void cancel_job(struct gr_req *r)
{
    if (!gr_id_valid(r->id, 'j')) {
        problem(r, GR_ENOTFOUND, NULL, "no job with that id (ids look like j_0123456789abcdef)");
        return;
    }
    struct gr_err e = {0};
    struct gr_job *j;
    int rc = gr_jobs_cancel(r->id, gr_scope(r), &j, &e);
    if (rc == GR_OK) {
        r->wait_s = -1;
        r->w = (struct gr_waiter){.job = j, .until = GR_UNTIL_TERMINAL};
        gr_park(r, answer_job);
        return;
    }
    if (rc == GR_ENOTFOUND) { /* not in flight here: another replica's, finished, or never existed */
        char *doc = NULL, status[16], now[40];
        gr_rfc3339(gr_now(), now, sizeof now);
        rc = gr_store_cancel_job(gr_api_store, r->id, gr_scope(r), now, &doc, &e);
        if (rc == GR_OK) {
            gr_log(GR_LOG_INFO, "job %s canceled (another replica held it)", r->id);
            gr_respond(r, 200, "application/json", doc, strlen(doc), NULL);
            return;
        }
        if (rc == GR_ENOTFOUND)
            rc = gr_store_get_job(gr_api_store, r->id, gr_scope(r), &doc, status, &e);
        if (rc == GR_OK && GR_TERMINAL(gr_status_parse(status))) {
            gr_delete_finished_job(r, doc);
            free(doc);
            return;
        }
        free(doc);
        if (rc == GR_OK && !strcmp(status, "queued") && gr_store_shared(gr_api_store) &&
            (rc = ask_holder(r, &e)) == GR_OK) /* a live replica holds it: only it knows if it runs it */
            return;
        if (rc == GR_OK)
            gr_fail(&e, GR_ECONFLICT, NULL, "job %s is %s; only queued jobs can be canceled, and finished ones deleted",
                    r->id, status);
        else if (rc == GR_ENOTFOUND)
            gr_fail(&e, rc, NULL, "no job with id %s", r->id);
    }
    gr_respond_problem(r, &e);
}

static void get_result(struct gr_req *r)
{
    struct gr_err e = {0};
    char *doc = NULL, status[16];
    int rc = gr_id_valid(r->id, 'j') ? gr_store_get_job(gr_api_store, r->id, gr_scope(r), &doc, status, &e)
                                     : GR_ENOTFOUND;
    if (rc == GR_ENOTFOUND)
        gr_fail(&e, rc, NULL, "no job with id %s", r->id);
    else if (rc == GR_OK && strcmp(status, "succeeded"))
        rc = gr_fail(&e, GR_ECONFLICT, NULL, "job %s is %s: it has no result%s", r->id, status,
                     GR_TERMINAL(gr_status_parse(status)) ? "" : " yet (GET /v1/jobs/{id}?wait=N waits for it)");
    json_t *o = rc ? NULL : json_loads(doc, 0, NULL);
    free(doc);
    int indices = 0;
    if (rc || (rc = gr_result_part(o, gr_query(r, "part"), &indices, &e))) {
        json_decref(o);
        gr_respond_problem(r, &e);
        return;
    }
    /* values as data on request; a benchmark's table is only JSON */
    const char *accept = gr_header(r, MHD_HTTP_HEADER_ACCEPT);
    int npy = accept && strstr(accept, "application/x-npy"), raw = accept && strstr(accept, "application/octet-stream");
    if ((npy || raw) && !json_object_get(o, "kind")) {
        gr_respond_result_data(r, o, npy, indices);
        json_decref(o);
        return;
    }
    json_t *res = json_incref(json_object_get(o, "result"));
    json_decref(o);
    gr_respond_json(r, 200, res);
}

struct list_ctx {
    struct gr_buf out;
    int rows, limit, more; /* more: a row past the page came, so another page follows */
    char last[32];
};

/* Stored docs are JSON already: the page is assembled as text, not re-parsed. */
static void list_row(void *ctx, const char *id, const char *doc)
{
    struct list_ctx *c = ctx;
    if (c->rows == c->limit) {
        c->more = 1;
        return;
    }
    gr_buf_printf(&c->out, "%s%s", c->rows++ ? "," : "", doc);
    snprintf(c->last, sizeof c->last, "%s", id);
}

void gr_respond_page(struct gr_req *r, const char *key, char prefix, gr_page_fetch fetch, void *args)
{
    const char *lim = gr_query(r, "limit"), *cursor = gr_query(r, "cursor");
    int64_t limit = lim ? gr_parse_uint(lim, 1000) : 50;
    if (limit < 1) {
        problem(r, GR_EINVAL, "limit", "limit must be a whole number from 1 to 1000");
        return;
    }
    if (cursor && !gr_id_valid(cursor, prefix)) {
        problem(r, GR_EINVAL, "cursor", "cursor is not one this server gave out (use next_cursor as is)");
        return;
    }

    struct list_ctx c = {.limit = (int)limit};
    struct gr_err e = {0};
    gr_buf_printf(&c.out, "{\"%s\":[", key);
    if (fetch(args, cursor, (int)limit + 1, list_row, &c, &e) != GR_OK) { /* one more: is there a next page? */
        free(c.out.p);
        gr_respond_problem(r, &e);
        return;
    }
    if (c.more)
        gr_buf_printf(&c.out, "],\"next_cursor\":\"%s\"}", c.last);
    else
        gr_buf_printf(&c.out, "],\"next_cursor\":null}");
    if (c.out.oom) {
        free(c.out.p);
        problem(r, GR_ENOMEM, NULL, "out of memory rendering the list");
        return;
    }
    /* The page's own digest: it changes exactly when what this caller sees does (a counter of
     * the store's commits moved with every tenant's work, and missed other replicas'), and an
     * idle dashboard still polls into 304s. */
    unsigned char md[32];
    char etag[24];
    SHA256((const unsigned char *)c.out.p, c.out.len, md);
    snprintf(etag, sizeof etag, "\"%02x%02x%02x%02x%02x%02x%02x%02x\"", md[0], md[1], md[2], md[3], md[4], md[5],
             md[6], md[7]);
    const char *hdrs[] = {MHD_HTTP_HEADER_ETAG, etag, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache", NULL};
    const char *inm = gr_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (inm && strstr(inm, etag)) {
        free(c.out.p);
        gr_respond(r, 304, NULL, NULL, 0, hdrs);
        return;
    }
    gr_respond(r, 200, "application/json", c.out.p, c.out.len, hdrs);
}

struct job_filter {
    const char *tenant, *status, *op;
};

static int fetch_jobs(void *args, const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    const struct job_filter *f = args;
    return gr_store_list_jobs(gr_api_store, f->tenant, f->status, f->op, before, limit, row, ctx, e);
}

int gr_list_tenant(struct gr_req *r, const char **tenant)
{
    const char *q = gr_query(r, "tenant");
    if (q && !gr_tenant_valid(q)) {
        problem(r, GR_EINVAL, "tenant", "?tenant= must be a tenant name: 1 to 64 of a-z 0-9 _ -");
        return GR_EINVAL;
    }
    /* a tenant that is not admin sees only its own: naming another finds nothing ("" is no tenant) */
    *tenant = r->who.admin ? q : q && strcmp(q, r->who.tenant) ? "" : r->who.tenant;
    return GR_OK;
}

static void list_jobs(struct gr_req *r)
{
    struct job_filter f = {NULL, gr_query(r, "status"), gr_query(r, "op")};
    if (gr_list_tenant(r, &f.tenant) != GR_OK)
        return;
    if (f.status && gr_status_parse(f.status) < 0) {
        problem(r, GR_EINVAL, "status", "unknown status filter: use queued, running, succeeded, failed or canceled");
        return;
    }
    if (f.op && gr_op_parse(f.op) < 0) {
        problem(r, GR_EINVAL, "op", "unknown op filter: use sum, prod, min, max, mean, argmin, argmax or matmul");
        return;
    }
    gr_respond_page(r, "jobs", 'j', fetch_jobs, &f);
}

/* --- service --- */

/* GR_OK, or GR_EUNAVAIL naming the first GPU a kernel fault broke: only a restart repairs it. */
static int devices_work(struct gr_err *e)
{
    for (int i = 0; i < gr_jobs_nbackends(); i++) {
        const struct gr_backend *b = gr_jobs_backend(i);
        if (__atomic_load_n(&b->broken, __ATOMIC_ACQUIRE))
            return gr_fail(e, GR_EUNAVAIL, NULL, "device %s is broken (%s); restart gpured", b->name, b->broken_why);
    }
    return GR_OK;
}

/* Alive is "can do its work without a restart": a lost GPU context fails the liveness probe, so that
 * k8s restarts the container (its jobs are in the store and run again after the restart). */
static void healthz(struct gr_req *r)
{
    struct gr_err e;
    if (devices_work(&e) != GR_OK)
        gr_respond_problem(r, &e);
    else
        gr_respond_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* Free bytes under which the data directory counts as full: a job insert or a WAL commit
 * needs a few pages, an upload more. */
#define MIN_FREE_BYTES ((uint64_t)1 << 20)

static void readyz(struct gr_req *r)
{
    struct gr_err e = {0};
    struct statvfs sv;
    if (gr_store_ping(gr_api_store, &e) != GR_OK) {
        struct gr_err u;
        gr_fail(&u, GR_EUNAVAIL, NULL, "the store is not answering: %s", e.msg);
        gr_respond_problem(r, &u);
        return;
    }
    if (statvfs(gr_store_data_dir(gr_api_store), &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < MIN_FREE_BYTES) {
        gr_fail(&e, GR_EUNAVAIL, NULL, "the data directory's disk has %llu bytes free: jobs and uploads fail until "
                                       "space is freed",
                (unsigned long long)sv.f_bavail * sv.f_frsize);
        gr_respond_problem(r, &e);
        return;
    }
    if (devices_work(&e) != GR_OK) {
        gr_respond_problem(r, &e);
        return;
    }
    gr_respond_json(r, 200, json_pack("{s:s, s:i}", "status", "ready", "queued", gr_jobs_queued()));
}

static json_t *names_of(unsigned mask, int n, const char *(*name)(int))
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (mask & (1u << i))
            json_array_append_new(a, json_string(name(i)));
    return a;
}

static json_t *axes_of(unsigned mask)
{
    json_t *a = json_array();
    for (int axis = GR_AXIS_ALL; axis <= 1; axis++)
        if (mask & GR_AXIS_BIT(axis))
            json_array_append_new(a, axis == GR_AXIS_ALL ? json_null() : json_integer(axis));
    return a;
}

static json_t *algorithm(const struct gr_backend *b, const char *name, const char *description, json_t *ops,
                         unsigned dtypes, unsigned axes)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "device", b->name, "name", name, "description", description,
                     "ops", ops, "dtypes", names_of(dtypes, GR_NDTYPES, gr_dtype_name), "axes", axes_of(axes));
}

/* Per device: auto, the reductions' variants, then the products' (op matmul, no axes). */
static void algorithms(struct gr_req *r)
{
    json_t *list = json_array();
    for (int i = 0; i < gr_jobs_nbackends(); i++) {
        const struct gr_backend *b = gr_jobs_backend(i);
        json_t *ops = names_of(gr_backend_ops(b), GR_NOPS, gr_op_name);
        if (b->nmm_algos)
            json_array_append_new(ops, json_string(gr_op_name(GR_MATMUL)));
        json_array_append_new(list, algorithm(b, "auto", "picks the fastest variant for the op, dtype and size", ops,
                                              GR_ALL_DTYPES, GR_ALL_AXES));
        for (int k = 0; k < b->nalgos; k++) {
            const struct gr_algo *a = &b->algos[k];
            json_array_append_new(list, algorithm(b, a->name, a->description, names_of(a->ops, GR_NOPS, gr_op_name),
                                                  a->dtypes, a->axes));
        }
        for (int k = 0; k < b->nmm_algos; k++) {
            const struct gr_algo *a = &b->mm_algos[k];
            json_array_append_new(list, algorithm(b, a->name, a->description,
                                                  json_pack("[s]", gr_op_name(GR_MATMUL)), a->dtypes, 0));
        }
    }
    gr_respond_json(r, 200, json_pack("{s:o}", "algorithms", list));
}

/* A live replica's announced devices, as an item of "replicas". */
static void add_replica(void *ctx, const char *id, const char *doc)
{
    json_t *o = json_loads(doc, 0, NULL);
    if (json_is_object(o))
        json_array_append(ctx, o);
    json_decref(o);
}

/* This replica's devices; on a shared store every live replica's too, under "replicas". */
static void devices(struct gr_req *r)
{
    json_t *o = gr_cluster_devices();
    struct gr_err e;
    if (o && gr_store_shared(gr_api_store)) {
        json_t *all = json_array();
        if (gr_store_replicas(gr_api_store, add_replica, all, &e) != GR_OK) {
            json_decref(all);
            json_decref(o);
            gr_respond_problem(r, &e);
            return;
        }
        json_object_set_new(o, "replicas", all);
    }
    if (!o)
        problem(r, GR_ENOMEM, NULL, "out of memory rendering the devices");
    else
        gr_respond_json(r, 200, o);
}

const struct gr_route gr_routes[] = {
    {"/v1/jobs", list_jobs, post_job, gr_cleanup_jobs, GR_BODY_JSON | GR_BODY_BINARY, NULL, 0},
    {"/v1/jobs/{id}", get_job, NULL, cancel_job, 0, NULL, 0},
    {"/v1/jobs/{id}/result", get_result, NULL, NULL, 0, NULL, 0},
    {"/v1/benchmarks", NULL, post_benchmark, NULL, GR_BODY_JSON, NULL, 0},
    {"/v1/datasets", gr_list_datasets, gr_post_dataset, NULL, 0, &gr_dataset_upload, 0},
    {"/v1/datasets/{id}", gr_get_dataset, NULL, gr_delete_dataset, 0, NULL, 0},
    {"/v1/datasets/{id}/data", gr_get_dataset_data, NULL, NULL, 0, NULL, 0},
    {"/v1/algorithms", algorithms, NULL, NULL, 0, NULL, 0},
    {"/v1/devices", devices, NULL, NULL, 0, NULL, 0},
    {"/v1/events", gr_get_events, NULL, NULL, 0, NULL, 0},
    {"/healthz", healthz, NULL, NULL, 0, NULL, 1},
    {"/readyz", readyz, NULL, NULL, 0, NULL, 1},
    {"/metrics", gr_get_metrics, NULL, NULL, 0, NULL, 0},
    {"/openapi.json", gr_get_openapi, NULL, NULL, 0, NULL, 0},
    {"/", gr_get_dashboard, NULL, NULL, 0, NULL, 1},
    {"/assets/{id}", gr_get_asset, NULL, NULL, 0, NULL, 1},
    {NULL, NULL, NULL, NULL, 0, NULL, 0},
};
