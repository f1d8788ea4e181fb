/* test_jobs.c: the job pipeline with the real store: bounded queue (full -> GR_EFULL), cancel of
 * a queued job, waiters woken once a final state is committed, and re-queueing after a stop.
 * The backend is a gate the test opens, so what is queued and what runs is decided, not raced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/buf.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "gpu/bench.h"
#include "server/job_doc.h"
#include "server/jobs.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open, runs, calls; /* runs: jobs reduced; calls: launches (a launch group is one) */

static void gate(int open)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = open;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* Sums int32s as the backend contract says: the whole array, or (axis 1) each row. */
static int gated_reduce(struct gr_backend *b, const struct gr_reduce_req *req, struct gr_result *r,
                        struct gr_timings *t, char algo_used[32], struct gr_err *e)
{
    int64_t nout = req->axis == 1 ? req->rows : 1, len = req->rows * req->cols / nout;
    pthread_mutex_lock(&gate_mu);
    runs += (int)nout;
    calls++;
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    if (gr_result_alloc(r, nout, 1, 0, e))
        return e->code;
    for (int64_t o = 0; o < nout; o++) {
        r->i[o] = 0;
        for (int64_t k = 0; k < len; k++)
            r->i[o] += ((const int32_t *)req->data)[o * len + k];
    }
    snprintf(algo_used, 32, "gate");
    return GR_OK;
}

static void no_destroy(struct gr_backend *b) {}
static struct gr_backend gated = {.name = "cpu", .reduce = gated_reduce, .destroy = no_destroy};

static struct gr_job *make_job(int32_t a, int32_t b)
{
    struct gr_job *j = gr_job_new();
    j->op = GR_SUM;
    j->dtype = GR_INT32;
    j->shape[0] = 2;
    j->input = malloc(8);
    j->input_bytes = 8;
    ((int32_t *)j->input)[0] = a;
    ((int32_t *)j->input)[1] = b;
    snprintf(j->device, sizeof j->device, "cpu");
    j->backend = &gated;
    return j;
}

static int status_of(struct gr_job *j)
{
    int committed, st;
    free(gr_jobs_render(j, &committed, &st));
    return st;
}

static int committed_of(struct gr_job *j)
{
    int committed, st;
    free(gr_jobs_render(j, &committed, &st));
    return committed;
}

static void wait_for(struct gr_job *j, int (*get)(struct gr_job *), int want)
{
    for (int i = 0; i < 5000 && get(j) != want; i++)
        usleep(1000);
    assert_int_equal(get(j), want);
}

struct flag {
    struct gr_waiter w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int woken;
};

static void wake_flag(struct gr_waiter *w)
{
    struct flag *f = (struct flag *)w;
    pthread_mutex_lock(&f->mu);
    f->woken++;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* A store in a new folder, and the jobs module on its n backends with room for cap per queue. */
struct rig {
    char dir[32];
    struct gr_store *store;
};

static void rig_up(struct rig *g, struct gr_backend **bs, int n, int cap)
{
    struct gr_err e = {0};
    snprintf(g->dir, sizeof g->dir, "/tmp/gpured-test-jobs-XXXXXX");
    assert_non_null(mkdtemp(g->dir));
    assert_int_equal(gr_store_open(&g->store, NULL, g->dir, &e), GR_OK);
    assert_int_equal(gr_jobs_start(g->store, bs, n, cap, &e), GR_OK);
}

/* Stop the workers, the store and the jobs module, and remove the folder. */
static void rig_down(struct rig *g)
{
    gr_jobs_stop_workers();
    gr_store_close(g->store);
    gr_jobs_stop();
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g->dir);
    assert_int_equal(system(cmd), 0);
}

static void test_queue_cancel_wait_recover(void **state)
{
    struct rig g;
    struct gr_backend *bs[] = {&gated};
    rig_up(&g, bs, 1, 3);
    struct gr_store *store = g.store;
    struct gr_err e = {0};
    gate(0);

    struct gr_job *a = make_job(1, 2), *b = make_job(3, 4), *c = make_job(5, 6), *d = make_job(7, 8),
                  *x = make_job(0, 0);
    assert_int_equal(gr_jobs_submit(&a, 1, NULL, &e), GR_OK);
    wait_for(a, status_of, GR_RUNNING); /* a is at the gate: the queue is empty again */
    assert_int_equal(gr_jobs_submit(&b, 1, NULL, &e), GR_OK);
    assert_int_equal(gr_jobs_submit(&c, 1, NULL, &e), GR_OK);
    assert_int_equal(gr_jobs_submit(&d, 1, NULL, &e), GR_OK);
    assert_int_equal(gr_jobs_submit(&x, 1, NULL, &e), GR_EFULL); /* capacity 3: b, c, d */
    assert_int_equal(gr_jobs_queued(), 3);

    struct gr_job *canceled;
    assert_int_equal(gr_jobs_cancel(a->id, NULL, &canceled, &e), GR_ECONFLICT); /* running */
    assert_int_equal(gr_jobs_cancel(b->id, NULL, &canceled, &e), GR_OK);
    assert_ptr_equal(canceled, b);
    gr_job_unref(canceled);
    assert_int_equal(gr_jobs_cancel("j_ffffffffffffffff", NULL, &canceled, &e), GR_ENOTFOUND);

    /* a waiter on c, parked before c can run */
    struct flag f = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    gr_job_ref(c);
    f.w = (struct gr_waiter){.wake = wake_flag, .job = c, .until = GR_UNTIL_TERMINAL};
    gr_jobs_wait(&f.w);
    assert_int_equal(f.woken, 0);

    /* stop while c and d wait: a finishes, the rest stays queued in the store */
    gr_jobs_pause();
    gate(1);
    gr_jobs_stop_workers();
    wait_for(a, committed_of, GR_SUCCEEDED);
    wait_for(b, committed_of, GR_CANCELED);
    assert_int_equal(runs, 1);
    gr_jobs_wake_all(); /* shutdown: c's waiter answers now that c is durable */
    assert_int_equal(f.woken, 1);
    assert_int_equal(gr_jobs_parked(), 0);
    gr_job_unref(c);
    gr_store_close(store);
    gr_jobs_stop();

    /* restart on the same store: c and d run, a and b do not run again */
    assert_int_equal(gr_store_open(&store, NULL, g.dir, &e), GR_OK);
    assert_int_equal(gr_jobs_start(store, bs, 1, 3, &e), GR_OK);
    g.store = store;
    assert_int_equal(gr_jobs_recover(0, GR_JOBS_ANY, &e), 2);
    /* d may have run and left the jobs in flight already: its state is the store's to read */
    char *doc = NULL, st[16] = "";
    for (int i = 0; i < 6000 && strcmp(st, "succeeded"); i++) {
        free(doc);
        doc = NULL;
        assert_int_equal(gr_store_get_job(store, d->id, NULL, &doc, st, &e), GR_OK);
        if (strcmp(st, "succeeded"))
            usleep(10000);
    }
    assert_string_equal(st, "succeeded");
    assert_non_null(strstr(doc, "\"value\":15"));
    free(doc);
    assert_int_equal(gr_store_get_job(store, c->id, NULL, &doc, st, &e), GR_OK);
    assert_non_null(strstr(doc, "\"value\":11"));
    free(doc);
    assert_int_equal(runs, 3);
    rig_down(&g);
    for (struct gr_job **j = (struct gr_job *[]){a, b, c, d, x, NULL}; *j; j++)
        gr_job_unref(*j);
}

/* A batch big enough to be rendered on several threads (submit.c renders spans of 4096 and more)
 * is told as accepted whole and in order, and every job of it, from each span, ends stored with
 * its own sum. */
static void test_big_batch_in_spans(void **state)
{
    enum { N = 9000 };
    struct rig g;
    struct gr_backend *bs[] = {&gated};
    rig_up(&g, bs, 1, N + 1);
    gate(1);
    struct gr_job **js = calloc(N, sizeof *js);
    assert_non_null(js);
    for (int k = 0; k < N; k++)
        js[k] = make_job(k, 1);
    struct gr_buf told = {0};
    struct gr_err e = {0};
    assert_int_equal(gr_jobs_submit(js, N, &told, &e), GR_OK);
    json_t *arr = json_loadb(told.p, told.len, 0, NULL);
    assert_true(json_is_array(arr) && json_array_size(arr) == N);
    for (int k = 0; k < N; k++) {
        json_t *o = json_array_get(arr, k);
        assert_string_equal(json_string_value(json_object_get(o, "id")), js[k]->id);
        assert_string_equal(json_string_value(json_object_get(o, "status")), "queued");
    }
    json_decref(arr);
    free(told.p);
    char *doc = NULL, st[16], want[32];
    for (int k = 0; k < N; k += 97) {
        wait_for(js[k], committed_of, GR_SUCCEEDED);
        assert_int_equal(gr_store_get_job(g.store, js[k]->id, NULL, &doc, st, &e), GR_OK);
        snprintf(want, sizeof want, "\"value\":%d", k + 1);
        assert_non_null(strstr(doc, want));
        free(doc);
    }
    rig_down(&g);
    for (int k = 0; k < N; k++)
        gr_job_unref(js[k]);
    free(js);
}

/* A batch is accepted whole or not at all: four jobs do not fit a queue of three, so none is
 * queued or stored (and nothing is told as accepted); three do, are told as accepted (queued,
 * in order, as the store got them), and each ends stored with its own sum. */
static void test_batch_all_or_none(void **state)
{
    struct rig g;
    struct gr_backend *bs[] = {&gated};
    rig_up(&g, bs, 1, 3);
    struct gr_store *store = g.store;
    struct gr_err e = {0};
    gate(1);
    struct gr_job *big[4], *fit[3];
    for (int k = 0; k < 4; k++)
        big[k] = make_job(k, 100);
    for (int k = 0; k < 3; k++)
        fit[k] = make_job(k, 200);
    struct gr_buf told = {0};
    assert_int_equal(gr_jobs_submit(big, 4, &told, &e), GR_EFULL);
    assert_null(told.p);
    assert_int_equal(gr_jobs_queued(), 0);
    assert_int_equal(gr_jobs_submit(fit, 3, &told, &e), GR_OK);
    json_t *arr = json_loadb(told.p, told.len, 0, NULL);
    assert_true(json_is_array(arr) && json_array_size(arr) == 3);
    for (int k = 0; k < 3; k++) {
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, k), "id")), fit[k]->id);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, k), "status")), "queued");
    }
    json_decref(arr);
    free(told.p);
    char *doc = NULL, st[16], want[32];
    for (int k = 0; k < 3; k++) {
        wait_for(fit[k], committed_of, GR_SUCCEEDED);
        assert_int_equal(gr_store_get_job(store, fit[k]->id, NULL, &doc, st, &e), GR_OK);
        snprintf(want, sizeof want, "\"value\":%d", k + 200);
        assert_non_null(strstr(doc, want));
        free(doc);
    }
    for (int k = 0; k < 4; k++)
        assert_int_equal(gr_store_get_job(store, big[k]->id, NULL, &doc, st, &e), GR_ENOTFOUND);
    rig_down(&g);
    for (int k = 0; k < 4; k++)
        gr_job_unref(big[k]);
    for (int k = 0; k < 3; k++)
        gr_job_unref(fit[k]);
}

/* Like jobs queued behind a running one run as one launch (one call, each its own sum and
 * "launch_group"); one of another op waits for its own, and the launch is at most
 * --launch-group jobs. */
static void test_launch_groups(void **state)
{
    struct rig g;
    struct gr_backend *bs[] = {&gated};
    gr_jobs_set_launch_group(2);
    rig_up(&g, bs, 1, 8);
    struct gr_err e = {0};
    gate(0);
    calls = 0;
    struct gr_job *first = make_job(0, 1), *like[3], *other = make_job(9, 9);
    assert_int_equal(gr_jobs_submit(&first, 1, NULL, &e), GR_OK);
    wait_for(first, status_of, GR_RUNNING);
    for (int k = 0; k < 3; k++)
        like[k] = make_job(k, 10);
    other->op = GR_MAX; /* the stand-in sums whatever the op: only the grouping is under test */
    struct gr_job *queued[] = {like[0], like[1], other, like[2]};
    assert_int_equal(gr_jobs_submit(queued, 4, NULL, &e), GR_OK);
    gate(1);
    for (int k = 0; k < 4; k++)
        wait_for(queued[k], committed_of, GR_SUCCEEDED);
    assert_int_equal(calls, 4); /* first, {like 0, like 1}, other, like 2 */
    const char *want[] = {"\"launch_group\":2", "\"launch_group\":2", NULL, NULL};
    for (int k = 0; k < 4; k++) {
        char *doc = NULL, st[16], value[32];
        assert_int_equal(gr_store_get_job(g.store, queued[k]->id, NULL, &doc, st, &e), GR_OK);
        snprintf(value, sizeof value, "\"value\":%d", k == 2 ? 18 : (k == 3 ? 2 : k) + 10);
        assert_non_null(strstr(doc, value));
        assert_true(want[k] ? strstr(doc, want[k]) != NULL : strstr(doc, "launch_group") == NULL);
        free(doc);
    }
    rig_down(&g);
    gr_jobs_set_launch_group(GR_JOBS_GROUP_MAX);
    gr_job_unref(first);
    for (int k = 0; k < 4; k++)
        gr_job_unref(queued[k]);
}

/* A job whose end is not durable yet reads as running, without its end's fields, until the store
 * commits it: here another connection holds the store's write lock across the job's end. */
static void test_end_told_once_durable(void **state)
{
    struct rig g;
    struct gr_backend *bs[] = {&gated};
    rig_up(&g, bs, 1, 3);
    struct gr_err e = {0};
    gate(0);
    struct gr_job *a = make_job(20, 22);
    assert_int_equal(gr_jobs_submit(&a, 1, NULL, &e), GR_OK);
    wait_for(a, status_of, GR_RUNNING);
    wait_for(a, committed_of, GR_QUEUED);

    char path[64];
    snprintf(path, sizeof path, "%s/gpured.db", g.dir);
    sqlite3 *lock = NULL;
    assert_int_equal(sqlite3_open(path, &lock), SQLITE_OK);
    assert_int_equal(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    gate(1);
    int committed, st;
    char *doc = NULL;
    for (int i = 0; i < 2000 && !(doc && strstr(doc, "\"algorithm\":\"gate\"")); i++) { /* named at its end */
        free(doc);
        usleep(1000);
        doc = gr_jobs_render(a, &committed, &st);
    }
    /* the lock goes before any assertion, so that a failing one leaves no writer stuck behind it */
    assert_int_equal(sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    assert_non_null(strstr(doc, "\"algorithm\":\"gate\""));
    assert_int_equal(st, GR_RUNNING);
    assert_int_equal(committed, GR_QUEUED);
    assert_non_null(strstr(doc, "\"status\":\"running\""));
    for (const char **f = (const char *[]){"\"result\":null", "\"timings_ms\":null", "\"finished_at\":null", NULL}; *f;
         f++)
        assert_non_null(strstr(doc, *f));
    free(doc);

    wait_for(a, committed_of, GR_SUCCEEDED);
    doc = gr_jobs_render(a, &committed, &st);
    assert_int_equal(st, GR_SUCCEEDED);
    assert_non_null(strstr(doc, "\"value\":42"));
    assert_null(strstr(doc, "\"finished_at\":null"));
    free(doc);
    rig_down(&g);
    gr_job_unref(a);
}

/* Two stand-in GPUs whose caches hold what the test says, for routing. */
static int held[2];
static int64_t cached_bytes[2];
static int fake_holds(struct gr_backend *b, const char *dataset) { return held[b->name[4] - '0']; }
static void fake_stats(struct gr_backend *b, struct gr_cache_stats *s)
{
    *s = (struct gr_cache_stats){.bytes = cached_bytes[b->name[4] - '0']};
}
/* GPUs that run every op but nanvar: a job no GPU can run goes to the CPU */
static const struct gr_algo fake_algos[] = {
    {"fast", "every op but nanvar", GR_ALL_OPS & ~(1u << GR_NANVAR), GR_ALL_DTYPES, GR_ALL_AXES}};
static struct gr_backend gpu0 = {.name = "gpu:0", .algos = fake_algos, .nalgos = 1, .reduce = gated_reduce,
                                 .destroy = no_destroy, .holds = fake_holds, .cache_stats = fake_stats},
                         gpu1 = {.name = "gpu:1", .algos = fake_algos, .nalgos = 1, .reduce = gated_reduce,
                                 .destroy = no_destroy, .holds = fake_holds, .cache_stats = fake_stats};

static struct gr_backend *route(const char *dataset)
{
    struct gr_backend *b = NULL;
    struct gr_err e = {0};
    assert_int_equal(gr_jobs_route("auto", GR_SUM, dataset, &b, &e), GR_OK);
    return b;
}

/* A job on a dataset goes to the GPU caching it unless that GPU has 16 more queued than the
 * shortest queue; a dataset cached nowhere goes to the emptiest cache among the shortest queues. */
static void test_route_by_cache(void **state)
{
    struct rig g;
    struct gr_backend *bs[] = {&gated, &gpu0, &gpu1};
    gr_jobs_set_launch_group(1); /* queue lengths are under test: jobs taken one at a time */
    rig_up(&g, bs, 3, 100);
    struct gr_err e = {0};
    gate(0);
    struct gr_backend *b = NULL;
    assert_int_equal(gr_jobs_route("auto", GR_NANVAR, "d_a", &b, &e), GR_OK);
    assert_ptr_equal(b, &gated); /* an op no GPU runs: the CPU */
    assert_ptr_equal(route("d_a"), &gpu0); /* nothing cached, queues equal: the first */
    cached_bytes[0] = 1 << 20;
    assert_ptr_equal(route("d_a"), &gpu1); /* gpu:0's cache holds another dataset */
    assert_ptr_equal(route(NULL), &gpu0);  /* no dataset: the shortest queue, the first */
    held[1] = 1;
    struct gr_job *js[40];
    for (int k = 0; k < 40; k++) {
        js[k] = make_job(k, 1);
        js[k]->backend = &gpu1;
    }
    assert_int_equal(gr_jobs_submit(js, 17, NULL, &e), GR_OK); /* one at the gate, 16 queued on gpu:1 */
    wait_for(js[0], status_of, GR_RUNNING);
    assert_ptr_equal(route("d_a"), &gpu1); /* 16 longer: still the one caching it */
    assert_int_equal(gr_jobs_submit(js + 17, 1, NULL, &e), GR_OK);
    assert_ptr_equal(route("d_a"), &gpu0); /* 17 longer: the shortest queue */
    assert_ptr_equal(route(NULL), &gpu0);
    gate(1);
    for (int k = 0; k < 18; k++)
        wait_for(js[k], committed_of, GR_SUCCEEDED);
    rig_down(&g);
    gr_jobs_set_launch_group(GR_JOBS_GROUP_MAX);
    for (int k = 0; k < 40; k++)
        gr_job_unref(js[k]);
}

/* a and b are the same text but for how reals outside strings are spelled: each pair of reals
 * reads as the same double. Integers, strings and the rest must match character for character. */
static void same_but_reals(const char *a, const char *b)
{
    const char *a0 = a;
    int in_str = 0;
    while (*a && *b) {
        if (!in_str && (*a == '-' || isdigit((unsigned char)*a))) {
            size_t na = strspn(a, "-+.eE0123456789"), nb = strspn(b, "-+.eE0123456789");
            int real = strcspn(a, ".eE") < na;
            if (!real && (na != nb || memcmp(a, b, na) != 0))
                fail_msg("integers differ at %d: %s", (int)(a - a0), a0);
            if (real && strtod(a, NULL) != strtod(b, NULL))
                fail_msg("reals differ at %d: %.*s / %.*s", (int)(a - a0), (int)na, a, (int)nb, b);
            a += na, b += nb;
            continue;
        }
        if (*a != *b)
            fail_msg("differ at %d: %s\nagainst %s", (int)(a - a0), a0, b);
        if (in_str && *a == '\\' && a[1]) /* an escaped character, '"' too */
            a++, b++;
        else if (*a == '"')
            in_str = !in_str;
        a++, b++;
    }
    assert_int_equal(*a, *b);
}

/* doc is a job resource as jansson writes it (compact, 17 digits) but for timings (6 decimals)
 * and rates (6 digits: job.c): read back and written again, it is the same text, reals read
 * alike; the parsed object is returned (the caller's). */
static json_t *canonical(const char *doc)
{
    json_error_t err;
    json_t *o = json_loads(doc, 0, &err);
    if (!o)
        fail_msg("not JSON (%s): %s", err.text, doc);
    char *again = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    assert_non_null(again);
    same_but_reals(doc, again);
    free(again);
    return o;
}

/* A stage's time as a job resource gives it: to 6 decimals where it is a plain number. */
static double measured(double v) { return v >= 0 && v < 9e12 ? (double)llround(v * 1e6) / 1e6 : v; }

/* A rate as a job resource gives it: 6 significant digits. */
static double rate(double v)
{
    char d[40];
    snprintf(d, sizeof d, "%.6g", v);
    return strtod(d, NULL);
}

static double member_real(json_t *o, const char *path1, const char *path2)
{
    json_t *v = json_object_get(path2 ? json_object_get(o, path1) : o, path2 ? path2 : path1);
    assert_true(json_is_real(v));
    return json_real_value(v);
}

/* The resource is written straight out (job.c), not by jansson: every kind and state reads
 * back as the same text in jansson's form, with the values it was given. */
static void test_render_canonical(void **state)
{
    (void)state;
    struct gr_err e = {0};
    const double odd[] = {0.1, 1e-7, 1e20, 123456789012345678.0, 5e-324, 1.7976931348623157e308, 0.0, 3.0, 2.5e-300};
    /* queued and succeeded reductions, float and integer, scalar and per row, with a dataset */
    for (int k = 0; k < (int)(sizeof odd / sizeof odd[0]); k++) {
        struct gr_job *j = gr_job_new();
        assert_non_null(j);
        j->dtype = k % 2 ? GR_INT64 : GR_FLOAT64;
        j->op = k % 3 ? GR_SUM : GR_ARGMAX;
        j->ties_last = k % 2;
        j->input_bytes = 8 * 100;
        j->shape[0] = 100;
        char *queued = gr_job_render(j);
        json_decref(canonical(queued));
        free(queued);
        j->status = GR_SUCCEEDED;
        j->started_at = j->created_at + 0.25, j->finished_at = j->created_at + 1.5;
        j->t = (struct gr_timings){odd[k], odd[(k + 1) % 9], odd[(k + 2) % 9] + 1e-3, odd[(k + 3) % 9], 7.0, 0, GR_CACHE_HIT};
        if (k == 4)
            snprintf(j->dataset, sizeof j->dataset, "d_0123456789abcdef"), j->group = 3;
        int rows = k == 5 ? 3 : 1;
        if (rows > 1)
            j->ndim = 2, j->axes = 2u, j->shape[0] = 3, j->shape[1] = 5;
        assert_int_equal(gr_result_alloc(&j->result, rows, j->dtype == GR_INT64, j->op == GR_ARGMAX, &e), GR_OK);
        for (int r = 0; r < rows; r++) {
            if (j->result.i)
                j->result.i[r] = -9007199254740993LL + r;
            else
                j->result.f[r] = k == 2 ? NAN : k == 6 ? -INFINITY : odd[(k + r) % 9];
            if (j->result.index)
                j->result.index[r] = 12345678901LL + r;
        }
        char *doc = gr_job_render(j);
        json_t *o = canonical(doc);
        assert_true(member_real(o, "timings_ms", "queue") == measured(odd[k]));
        assert_true(member_real(o, "timings_ms", "kernel") == measured(odd[(k + 2) % 9] + 1e-3));
        assert_true(member_real(o, "gbps", NULL) == rate(800.0 / ((odd[(k + 2) % 9] + 1e-3) * 1e6)));
        json_t *res = json_object_get(o, "result");
        if (rows == 1 && j->result.i)
            assert_true(json_integer_value(json_object_get(res, "value")) == -9007199254740993LL);
        else if (rows == 1 && k == 2)
            assert_string_equal(json_string_value(json_object_get(res, "value")), "NaN");
        else if (rows == 1 && k == 6)
            assert_string_equal(json_string_value(json_object_get(res, "value")), "-Infinity");
        else if (rows == 1)
            assert_true(member_real(res, "value", NULL) == odd[k]);
        else
            assert_int_equal(json_array_size(json_object_get(res, "values")), 3);
        if (j->result.index)
            assert_true(json_integer_value(json_object_get(res, rows == 1 ? "index" : "indices")) == 12345678901LL ||
                        json_integer_value(json_array_get(json_object_get(res, "indices"), 0)) == 12345678901LL);
        if (k == 4)
            assert_string_equal(json_string_value(json_object_get(o, "cache")), "hit");
        json_decref(o);
        free(doc);
        gr_job_unref(j);
    }
    /* a failed one whose error and names need escaping, a benchmark, a product */
    struct gr_job *j = gr_job_new();
    assert_non_null(j);
    snprintf(j->tenant, sizeof j->tenant, "t\"e\\n\x01\x1ct");
    snprintf(j->replica, sizeof j->replica, "host\tone");
    j->status = GR_FAILED;
    j->err = (struct gr_err){GR_EINVAL, "data", "a \"quoted\" line\nand a tab\there, \x1f, caf\xc3\xa9"};
    char *doc = gr_job_render(j);
    json_t *o = canonical(doc);
    assert_string_equal(json_string_value(json_object_get(o, "tenant")), j->tenant);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "error"), "detail")), j->err.msg);
    json_decref(o);
    free(doc);
    j->kind = GR_JOB_BENCH, j->status = GR_QUEUED, j->repeats = 5, j->nalgos = 2;
    assert_non_null(j->algos = calloc(2, sizeof *j->algos));
    snprintf(j->algos[0], sizeof j->algos[0], "fast");
    snprintf(j->algos[1], sizeof j->algos[1], "odd\"name\\");
    o = canonical(doc = gr_job_render(j));
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "algorithms"), 1)), j->algos[1]);
    json_decref(o);
    free(doc);
    j->nalgos = 0;
    json_decref(canonical(doc = gr_job_render(j)));
    free(doc);
    /* its table once it ran: one row measured, one that could not run */
    j->status = GR_SUCCEEDED, j->shape[0] = 1 << 20, j->nrows = 2;
    assert_non_null(j->rows = calloc(2, sizeof *j->rows));
    j->rows[0] = (struct gr_bench_row){"fast", 0.0123, 321.5, 1, ""};
    j->rows[1] = (struct gr_bench_row){"odd\"name\\", 0, 0, 0, "not on \"this\" device"};
    o = canonical(doc = gr_job_render(j));
    json_t *rows = json_object_get(json_object_get(o, "result"), "rows");
    assert_true(member_real(json_array_get(rows, 0), "gbps", NULL) == 321.5);
    assert_true(json_is_null(json_object_get(json_array_get(rows, 1), "median_ms")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 1), "error")), j->rows[1].error);
    json_decref(o);
    free(doc);
    j->status = GR_QUEUED;
    j->kind = GR_JOB_MATMUL, j->op = GR_MATMUL, j->status = GR_SUCCEEDED, j->alpha = 0.5, j->beta = -2;
    j->ndim = 2, j->shape[0] = 2, j->shape[1] = 3;
    j->mm[0] = (struct gr_operand){.present = 1, .rows = 2, .cols = 4};
    j->mm[1] = (struct gr_operand){.present = 1, .rows = 4, .cols = 3, .dataset = "d_00000000000000ab"};
    j->t = (struct gr_timings){.kernel = 0.125, .total = 1, .overlap = 0.0625};
    assert_int_equal(gr_result_alloc(&j->result, 6, 0, 0, &e), GR_OK);
    o = canonical(doc = gr_job_render(j));
    assert_true(member_real(o, "timings_ms", "overlap") == 0.0625);
    assert_true(member_real(o, "alpha", NULL) == 0.5 && member_real(o, "beta", NULL) == -2.0);
    assert_true(member_real(o, "gflops", NULL) == rate(2.0 * 2 * 3 * 4 / (0.125 * 1e6)));
    json_decref(o);
    free(doc);
    /* kept as a dataset, its values inline too */
    snprintf(j->result_dataset, sizeof j->result_dataset, "d_00000000000000cd");
    for (int k = 0; k < 6; k++)
        j->result.f[k] = odd[k];
    o = canonical(doc = gr_job_render(j));
    json_t *kept = json_object_get(o, "result");
    assert_string_equal(json_string_value(json_object_get(kept, "data")), "/v1/datasets/d_00000000000000cd/data");
    assert_true(json_real_value(json_array_get(json_array_get(json_object_get(kept, "values"), 1), 1)) == 5e-324);
    assert_int_equal(json_array_size(json_array_get(json_object_get(kept, "values"), 1)), 3);
    json_decref(o);
    free(doc);
    gr_job_unref(j);
    /* an arg op's result kept with its indices */
    j = gr_job_new();
    assert_non_null(j);
    j->status = GR_SUCCEEDED, j->op = GR_ARGMAX, j->ndim = 2, j->axes = 2u, j->shape[0] = 5000, j->shape[1] = 2;
    snprintf(j->result_dataset, sizeof j->result_dataset, "d_00000000000000ef");
    snprintf(j->indices_dataset, sizeof j->indices_dataset, "d_00000000000000f0");
    j->result.n = 5000;
    o = canonical(doc = gr_job_render(j));
    kept = json_object_get(o, "result");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(kept, "shape"), 0)), 5000);
    assert_string_equal(json_string_value(json_object_get(kept, "indices_data")), "/v1/datasets/d_00000000000000f0/data");
    json_decref(o);
    free(doc);
    gr_job_unref(j);
    /* a dataset's document, an upload's and a kept result's */
    const int64_t shape[3] = {2, 3, 4};
    json_decref(canonical(doc = gr_dataset_render("d_0000000000000001", "alice", GR_FLOAT32, 3, shape, 96, NULL, NULL)));
    free(doc);
    o = canonical(doc = gr_dataset_render("d_0000000000000002", "b\"ob", GR_INT64, 1, shape, 16, NULL, "j_01"));
    assert_string_equal(json_string_value(json_object_get(o, "job")), "j_01");
    assert_true(json_is_null(json_object_get(o, "sha256")) && json_is_null(json_object_get(o, "last_used_at")));
    assert_int_equal(json_integer_value(json_object_get(o, "bytes")), 16);
    json_decref(o);
    free(doc);
}

/* Results in NumPy's dtypes: the table, each rounded to its dtype, written as that dtype reads
 * (float32 in its fewest digits, bools as true/false), named by the result; "accumulate" kept
 * through a restore. */
static void test_result_dtypes(void **state)
{
    (void)state;
    const struct { int op, dtype, acc64, want; } table[] = {
        {GR_SUM, GR_INT32, 0, GR_INT64},       {GR_PROD, GR_INT32, 0, GR_INT64},    {GR_MAX, GR_INT32, 0, GR_INT32},
        {GR_PTP, GR_INT32, 0, GR_INT32},       {GR_ARGMIN, GR_INT32, 0, GR_INT32},  {GR_MEAN, GR_INT32, 0, GR_FLOAT64},
        {GR_VAR, GR_INT64, 0, GR_FLOAT64},     {GR_NANSUM, GR_INT64, 0, GR_INT64},  {GR_MIN, GR_INT64, 0, GR_INT64},
        {GR_SUM, GR_FLOAT32, 0, GR_FLOAT32},   {GR_SUM, GR_FLOAT32, 1, GR_FLOAT64}, {GR_MAX, GR_FLOAT32, 1, GR_FLOAT32},
        {GR_NANSTD, GR_FLOAT32, 1, GR_FLOAT64}, {GR_MEAN, GR_FLOAT64, 0, GR_FLOAT64},
        {GR_COUNT_NONZERO, GR_FLOAT32, 0, GR_INT64}, {GR_ANY, GR_FLOAT64, 0, GR_BOOL}, {GR_ALL, GR_INT32, 0, GR_BOOL},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        assert_int_equal(gr_result_dtype(table[k].op, table[k].dtype, table[k].acc64), table[k].want);

    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    assert_non_null(j);
    j->op = GR_SUM, j->dtype = GR_FLOAT32, j->status = GR_SUCCEEDED, j->ndim = 2, j->axes = 2u;
    j->shape[0] = 6, j->shape[1] = 2, j->input_bytes = 48;
    const double given[] = {0.1, 16777217.0, 1e39, 1.401298464324817e-45, -3.0, NAN};
    const char *const shown[] = {"0.1", "16777216.0", "\"Infinity\"", "1e-45", "-3.0", "\"NaN\""};
    assert_int_equal(gr_result_alloc(&j->result, 6, 0, 0, &e), GR_OK);
    memcpy(j->result.f, given, sizeof given);
    gr_result_narrow(&j->result, gr_result_dtype(j->op, j->dtype, 0));
    char *doc = gr_job_render(j), want[160] = "\"result\":{\"shape\":[6],\"values\":[";
    for (int k = 0; k < 6; k++)
        strcat(strcat(want, k ? "," : ""), shown[k]);
    strcat(want, "],\"dtype\":\"float32\"}");
    if (!strstr(doc, want))
        fail_msg("expected %s in %s", want, doc);
    free(doc);
    gr_result_free(&j->result);
    j->op = GR_ANY; /* bools */
    assert_int_equal(gr_result_alloc(&j->result, 2, 1, 0, &e), GR_OK);
    j->shape[0] = 2, j->input_bytes = 16;
    j->result.i[0] = 0, j->result.i[1] = 7;
    gr_result_narrow(&j->result, gr_result_dtype(j->op, j->dtype, 0));
    assert_non_null(strstr(doc = gr_job_render(j), "\"result\":{\"shape\":[2],\"values\":[false,true],\"dtype\":\"bool\"}"));
    free(doc);
    gr_result_free(&j->result);
    j->op = GR_PTP, j->dtype = GR_INT32; /* NumPy's int32 ptp wraps in int32 */
    assert_int_equal(gr_result_alloc(&j->result, 2, 1, 0, &e), GR_OK);
    j->result.i[0] = 4294967295LL, j->result.i[1] = 5;
    gr_result_narrow(&j->result, gr_result_dtype(j->op, j->dtype, 0));
    assert_non_null(strstr(doc = gr_job_render(j), "\"values\":[-1,5],\"dtype\":\"int32\"}"));
    free(doc);
    gr_job_unref(j);

    /* "accumulate" is rendered when asked, and a restore keeps it */
    j = gr_job_new();
    j->op = GR_MEAN, j->dtype = GR_FLOAT32, j->acc64 = 1, j->ndim = 1, j->shape[0] = 1, j->axis_null = 1;
    j->input_bytes = 4;
    snprintf(j->algorithm, sizeof j->algorithm, "auto"), snprintf(j->device, sizeof j->device, "cpu");
    doc = gr_job_render(j);
    assert_non_null(strstr(doc, "\"accumulate\":\"float64\""));
    struct gr_job *back = NULL;
    float one = 1;
    assert_int_equal(gr_job_restore("j_0000000000000001", doc, &one, 4, &back, &e), GR_OK);
    assert_int_equal(back->acc64, 1);
    free(doc);
    gr_job_unref(back);
    j->acc64 = 0;
    assert_null(strstr(doc = gr_job_render(j), "accumulate"));
    free(doc);
    gr_job_unref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_queue_cancel_wait_recover),
                                       cmocka_unit_test(test_batch_all_or_none),
                                       cmocka_unit_test(test_big_batch_in_spans),
                                       cmocka_unit_test(test_launch_groups),
                                       cmocka_unit_test(test_end_told_once_durable),
                                       cmocka_unit_test(test_route_by_cache),
                                       cmocka_unit_test(test_render_canonical),
                                       cmocka_unit_test(test_result_dtypes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
