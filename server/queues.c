/* queues.c: the bounded per-device queues, one worker thread per backend lane with its launch
 * groups, and routing a job to a device. The queues, what each worker has taken and the recent
 * run times are under mu; a worker runs its jobs on its own lane without it. */
#include "server/jobs_internal.h"

#include "db/dsfile.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "gpu/bench.h"
#include "server/job_doc.h"
#include "server/keep.h"
#include "server/log.h"
#include "server/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Launch groups (jobs.h): the jobs' values side by side as the rows of one axis-1 reduction (one
 * copy in, one kernel, one copy out), each row's result its job's. At most group_max jobs of
 * GROUP_JOB_BYTES each. */
#define GROUP_JOB_BYTES (64 << 10) /* larger jobs fill the device alone: they gain nothing */

static struct queue queues[MAX_BACKENDS];
static int nqueues;
int gr_queues_stopping;
static char replica[96];          /* set once before any job runs */
static int group_max = GROUP_MAX; /* likewise */
/* Shared store: new jobs are taken only before this (gr_mono_ms; 0: always), when this replica's
 * leases may have run out (a pause, a store away) (mu). */
static double hold_until;

struct queue *gr_queue_of(const struct gr_backend *b)
{
    for (int i = 0; i < nqueues; i++)
        if (queues[i].backend == b)
            return &queues[i];
    return NULL;
}

int gr_queue_dev(const struct queue *q) { return q ? (int)(q - queues) : -1; } /* metrics index */

/* A GPU whose context a kernel fault lost (gpu_backend.cu): nothing runs there until a restart. */
static int broken(const struct queue *q) { return __atomic_load_n(&q->backend->broken, __ATOMIC_ACQUIRE); }

void gr_queue_push(struct queue *q, struct gr_job *j)
{
    j->qnext = NULL;
    if (q->tail)
        q->tail->qnext = j;
    else
        q->head = j;
    q->tail = j;
    q->count++;
    __atomic_fetch_add(&q->pushed, 1, __ATOMIC_RELEASE);
    gr_metrics_queued(gr_queue_dev(q), 1);
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
        return gr_dsfile_open(gr_store_data_dir(gr_jobs_store), j->dataset, j->input_bytes, &req->fd, e);
    return gr_dsfile_map(gr_store_data_dir(gr_jobs_store), j->dataset, j->input_bytes, &req->data, e);
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
            rc = gr_dsfile_map(gr_store_data_dir(gr_jobs_store), x->dataset, bytes[k], &p[k], e);
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
        rc = gr_job_keep_product(j, out, gr_jobs_store, e);
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
    return b->kind == GR_JOB_REDUCE && b->input && !b->dataset[0] && gr_job_whole(b) &&
           !strcmp(b->algorithm, "auto") && b->input_bytes > 0 && b->input_bytes <= GROUP_JOB_BYTES &&
           b->input_bytes == a->input_bytes && b->op == a->op && b->dtype == a->dtype &&
           b->ties_last == a->ties_last && b->ddof == a->ddof && b->acc64 == a->acc64 && runnable(b);
}

/* j is running from now (mu held): its waiters for that go on *fired. */
static void begin(struct queue *q, struct gr_job *j, struct gr_waiter **fired)
{
    j->started_at = gr_now();
    j->t.queue = (j->started_at - j->created_at) * 1e3;
    j->status = GR_RUNNING; /* in memory only: one store write less per job */
    if (j->committed == GR_QUEUED) /* else told once it is (commits.c) */
        gr_jobs_told_running(j);
    gr_metrics_running(gr_queue_dev(q), 1);
    gr_waiters_collect(j, gr_mono_ms(), fired);
}

/* Run one job on w's lane into o. */
static void execute(struct worker *w, struct gr_job *j, struct outcome *o)
{
    struct queue *q = w->q;
    struct gr_reduce_req req = {.op = j->op, .dtype = j->dtype, .ties_last = j->ties_last, .rows = gr_job_rows(j),
                                .cols = gr_job_cols(j), .data = j->input, .algorithm = j->algorithm, .lane = w->lane,
                                .ddof = j->ddof};
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
            o->rc = gr_backend_reduce_axes(q->backend, &req, j->ndim, j->shape, j->axes, &o->r, &o->t, o->used, &o->e);
        input_close(j, &req);
        if (o->rc == GR_OK)
            gr_result_narrow(&o->r, gr_result_dtype(j->op, j->dtype, j->acc64));
        if (o->rc == GR_OK) /* a large result is durable as datasets before the state naming them is stored */
            o->rc = gr_job_keep_result(j, &o->r, gr_jobs_store, &o->e);
    }
}

/* j ends with o (whose result and rows it takes): recorded, rendered, its final state queued. */
static void end(struct queue *q, struct gr_job *j, struct outcome *o)
{
    pthread_mutex_lock(&gr_jobs_mu);
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
    pthread_mutex_unlock(&gr_jobs_mu);
    char *doc = gr_job_render(j); /* a final job no longer changes: no lock needed to read it */
    gr_metrics_running(gr_queue_dev(q), -1);
    /* a benchmark's kernel stage is all its variants' repeats: kept out of the stage histograms */
    gr_metrics_job_end(gr_queue_dev(q), j->op, j->status, j->kind == GR_JOB_BENCH ? NULL : &o->t, j->input_bytes);
    gr_commits_final(j, doc);
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
                                .lane = w->lane, .ddof = j0->ddof};
    all.rc = b->reduce(b, &req, &all.r, &all.t, all.used, &all.e);
    free(values);
    if (all.rc != GR_OK) {
        gr_log(GR_LOG_WARN, "a launch of %d jobs failed on %s (%s): they run one by one", n, b->name, all.e.msg);
        return all.rc;
    }
    gr_result_narrow(&all.r, gr_result_dtype(j0->op, j0->dtype, j0->acc64));
    for (int k = 0; k < n; k++) {
        struct outcome o = {.group = n, .t = {.h2d = all.t.h2d / n, .kernel = all.t.kernel / n, .d2h = all.t.d2h / n}};
        memcpy(o.used, all.used, sizeof o.used);
        o.rc = gr_result_alloc(&o.r, 1, all.r.i != NULL, all.r.index != NULL, &o.e);
        o.r.dtype = all.r.dtype;
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
    if (gr_jobs_route(j->device, j->op, j->dataset, &to, NULL) != GR_OK || to == from->backend)
        return 0;
    pthread_mutex_lock(&gr_jobs_mu);
    j->backend = to;
    gr_job_ref(j);
    gr_queue_push(gr_queue_of(to), j);
    pthread_mutex_unlock(&gr_jobs_mu);
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
    gr_metrics_queued(gr_queue_dev(q), -1);
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
    pthread_mutex_lock(&gr_jobs_mu);
    for (;;) {
        /* one client's next job is often a moment away: one idle worker a GPU watches for it, so
         * that under load the others leave their cores to the HTTP threads and the writer */
        for (int spun = 0; !q->head && !gr_queues_stopping;) {
            int watch = !spun && !q->watching;
            spun |= !watch;
            q->watching += watch;
            gr_idle_wait(&q->cv, &gr_jobs_mu, &q->pushed, &spun);
            q->watching -= watch;
        }
        if (gr_queues_stopping)
            break;
        if (hold_until > 0 && gr_mono_ms() >= hold_until) { /* its lease may be gone: others may run it */
            pthread_mutex_unlock(&gr_jobs_mu);
            struct timespec t = {0, 5 * 1000000L};
            nanosleep(&t, NULL);
            pthread_mutex_lock(&gr_jobs_mu);
            continue;
        }
        struct gr_job *j = w->taken[0] = pop(q);
        struct gr_waiter *fired = NULL;
        int n = 0;
        if (runnable(j) && broken(q)) { /* moved elsewhere, or run here to fail */
            pthread_mutex_unlock(&gr_jobs_mu);
            int gone = moved(q, j);
            pthread_mutex_lock(&gr_jobs_mu);
            if (!gone && runnable(j))
                begin(q, j, &fired), n = 1;
        } else if (runnable(j)) {
            n = take(w, j, &fired);
        }
        w->ntaken = n;
        w->began = gr_mono_ms();
        pthread_mutex_unlock(&gr_jobs_mu);
        gr_waiters_wake(fired);
        if (n)
            run(w, n);
        pthread_mutex_lock(&gr_jobs_mu);
        if (n) {
            double each = (gr_mono_ms() - w->began) / n;
            q->run_ms = q->run_ms > 0 ? 0.9 * q->run_ms + 0.1 * each : each;
        }
        w->ntaken = 0;
        pthread_mutex_unlock(&gr_jobs_mu);
        for (int k = 0; k < (n ? n : 1); k++)
            gr_job_unref(w->taken[k]);
        pthread_mutex_lock(&gr_jobs_mu);
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    return NULL;
}

int gr_queues_start(struct gr_backend **backends, int nbackends, struct gr_err *e)
{
    gr_queues_stopping = 0;
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

int gr_jobs_route(const char *device, int op, const char *dataset, struct gr_backend **out, struct gr_err *e)
{
    *out = NULL;
    /* auto: an op no GPU runs goes to the CPU (every GPU runs the same ops) */
    if (!strcmp(device, "cpu") || (!strcmp(device, "auto") && nqueues > 1 && op < GR_NOPS &&
                                   !(gr_backend_ops(queues[1].backend) & (1u << op)))) {
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
            pthread_mutex_lock(&gr_jobs_mu);
            best = pick_gpu(dataset, holds, bytes);
            pthread_mutex_unlock(&gr_jobs_mu);
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

int gr_jobs_taken(char (**ids)[24])
{
    int n = 0;
    pthread_mutex_lock(&gr_jobs_mu);
    *ids = malloc(sizeof **ids * MAX_BACKENDS * MAX_LANES * GROUP_MAX);
    for (int i = 0; i < nqueues && *ids; i++)
        for (int k = 0; k < queues[i].nworkers; k++)
            for (int t = 0; t < queues[i].workers[k].ntaken; t++)
                memcpy((*ids)[n++], queues[i].workers[k].taken[t]->id, sizeof **ids);
    pthread_mutex_unlock(&gr_jobs_mu);
    return n;
}

void gr_jobs_hold_until(double mono_ms)
{
    pthread_mutex_lock(&gr_jobs_mu);
    hold_until = mono_ms;
    for (int i = 0; i < nqueues; i++)
        pthread_cond_broadcast(&queues[i].cv);
    pthread_mutex_unlock(&gr_jobs_mu);
}

static int by_text(const void *a, const void *b) { return strcmp(a, b); }

int gr_jobs_drop_unheld(char (*held)[24], int n, double since_ms)
{
    struct gr_waiter *fired = NULL;
    struct gr_job *retry = NULL;
    int dropped = 0;
    if (n > 0) /* qsort and bsearch want an array, even of none */
        qsort(held, (size_t)n, sizeof *held, by_text);
    pthread_mutex_lock(&gr_jobs_mu);
    for (int i = 0; i < nqueues; i++)
        for (struct gr_job *j = queues[i].head; j; j = j->qnext)
            if (runnable(j) && j->committed >= 0 && j->stored_ms < since_ms &&
                !(n > 0 && bsearch(j->id, held, (size_t)n, sizeof *held, by_text))) {
                gr_commits_record(j, j->status, GR_ENOTFOUND, &fired, &retry); /* as a fenced write */
                dropped++;
            }
    pthread_mutex_unlock(&gr_jobs_mu);
    gr_waiters_wake(fired);
    gr_commits_write_again(retry);
    return dropped;
}

/* How long a job queued on q now would wait to start (ms; mu held). */
static double backlog(const struct queue *q, double now)
{
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
    return (q->count + q->reserved + running) * each / q->nworkers;
}

double gr_jobs_backlog_ms(const struct gr_backend *b)
{
    double now = gr_mono_ms(), ms = 0;
    pthread_mutex_lock(&gr_jobs_mu);
    const struct queue *q = gr_queue_of(b);
    if (q)
        ms = backlog(q, now);
    pthread_mutex_unlock(&gr_jobs_mu);
    return ms;
}

int gr_jobs_starting_within(double ms)
{
    double now = gr_mono_ms();
    int kinds = 0, gpus = 0;
    pthread_mutex_lock(&gr_jobs_mu);
    for (int i = 1; i < nqueues; i++)
        if (!broken(&queues[i])) {
            gpus = 1;
            kinds |= backlog(&queues[i], now) < ms ? GR_JOBS_GPU : 0;
        }
    /* with no GPU working, jobs asking for one (auto) run on the CPU */
    if (backlog(&queues[0], now) < ms)
        kinds |= gpus ? GR_JOBS_CPU : GR_JOBS_CPU | GR_JOBS_GPU;
    pthread_mutex_unlock(&gr_jobs_mu);
    return kinds;
}

void gr_jobs_set_replica(const char *id) { snprintf(replica, sizeof replica, "%s", id); }
void gr_jobs_set_launch_group(int n) { group_max = n < 1 ? 1 : n > GROUP_MAX ? GROUP_MAX : n; }

int gr_jobs_queued(void)
{
    int n = 0;
    pthread_mutex_lock(&gr_jobs_mu);
    for (int i = 0; i < nqueues; i++)
        n += queues[i].count;
    pthread_mutex_unlock(&gr_jobs_mu);
    return n;
}

void gr_jobs_pause(void)
{
    pthread_mutex_lock(&gr_jobs_mu);
    gr_queues_stopping = 1;
    for (int i = 0; i < nqueues; i++)
        pthread_cond_broadcast(&queues[i].cv);
    pthread_mutex_unlock(&gr_jobs_mu);
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

void gr_queues_drop(void)
{
    for (int i = 0; i < nqueues; i++) {
        for (struct gr_job *j = queues[i].head, *n; j; j = n) {
            n = j->qnext;
            gr_job_unref(j);
        }
        queues[i].head = queues[i].tail = NULL;
        queues[i].count = 0;
        pthread_cond_destroy(&queues[i].cv);
    }
    nqueues = 0;
}
