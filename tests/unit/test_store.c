/* test_store.c: the store against plain in-test references, each test in its own temporary
 * directory: on SQLite, or with GPURED_TEST_PG_URL_FILE (a file naming a PostgreSQL server, from
 * ctest's pg fixture) on a database of its own there. The main thread drives; done callbacks run
 * on the store's writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "db/schema.h"
#include "db/store.h"

struct fixture {
    char dir[64];
    char data[96];
    char db[128];
    /* on PostgreSQL: the server's URL, this test's database and its URL ("" on SQLite) */
    char pg[512], pgname[64], url[600];
    struct gr_store *s;
};

/* Run sql on the PostgreSQL server's own database (CREATE and DROP DATABASE). */
static int pg_admin(const struct fixture *fx, const char *sql)
{
    PGconn *c = PQconnectdb(fx->pg);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        print_message("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return ok ? 0 : -1;
}

/* One per queued write: done must run exactly once. */
struct rec {
    int calls, code;
};

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int ndone;

static void on_done(void *ctx, int code)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&done_mu);
    r->calls++;
    r->code = code;
    ndone++;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

/* Wait (at most a minute) until n done callbacks ran since the test began. */
static void wait_done(int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&done_mu);
    while (ndone < n && pthread_cond_timedwait(&done_cv, &done_mu, &until) == 0)
        ;
    int got = ndone;
    pthread_mutex_unlock(&done_mu);
    assert_int_equal(got, n);
}

static void make_id(char id[24], unsigned long long n) { snprintf(id, 24, "j_%016llx", n); }

static void doc_text(char *buf, size_t size, unsigned long long n, const char *tag)
{
    snprintf(buf, size, "{\"n\":%llu,\"tag\":\"%s\"}", n, tag);
}

static char *make_doc(unsigned long long n, const char *tag)
{
    char *d = malloc(64);
    assert_non_null(d);
    doc_text(d, 64, n, tag);
    return d;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/gr_store_XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->data, sizeof fx->data, "%s/data", fx->dir);
    snprintf(fx->db, sizeof fx->db, "%s/gpured.db", fx->data);
    ndone = 0;
    *state = fx;
    const char *file = getenv("GPURED_TEST_PG_URL_FILE");
    if (!file)
        return 0;
    FILE *f = fopen(file, "r");
    if (!f || !fgets(fx->pg, sizeof fx->pg, f)) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    fx->pg[strcspn(fx->pg, "\n")] = '\0';
    static int made;
    snprintf(fx->pgname, sizeof fx->pgname, "gr_store_%d_%d", (int)getpid(), made++);
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", fx->pgname);
    const char *db = strrchr(fx->pg, '/'); /* postgresql://USER@HOST:PORT/DB */
    snprintf(fx->url, sizeof fx->url, "%.*s/%s", db ? (int)(db - fx->pg) : 0, fx->pg, fx->pgname);
    return pg_admin(fx, sql);
}

static void remove_in(const char *dir, const char *name)
{
    char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    gr_store_close(fx->s);
    const char *names[] = {"gpured.db", "gpured.db-wal", "gpured.db-shm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        remove_in(fx->data, names[i]);
    char datasets[160];
    snprintf(datasets, sizeof datasets, "%s/datasets", fx->data);
    rmdir(datasets);
    rmdir(fx->data);
    remove_in(fx->dir, "data"); /* the plain file of test_open_fails */
    int rc = rmdir(fx->dir);
    if (fx->pg[0]) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP DATABASE %s", fx->pgname);
        rc |= pg_admin(fx, sql);
    }
    free(fx);
    return rc;
}

static void open_store(struct fixture *fx)
{
    struct gr_err e = {0};
    int rc = gr_store_open(&fx->s, fx->url, fx->data, &e);
    if (rc != GR_OK)
        fail_msg("gr_store_open: %s", e.msg);
    assert_non_null(fx->s);
}

/* A connection of the test's own to the store's database, beside the store. */
struct raw {
    sqlite3 *sq;
    PGconn *pg;
};

static struct raw raw_open(struct fixture *fx)
{
    struct raw db = {0};
    if (fx->pg[0]) {
        db.pg = PQconnectdb(fx->url);
        assert_int_equal(PQstatus(db.pg), CONNECTION_OK);
        return db;
    }
    assert_int_equal(sqlite3_open_v2(fx->db, &db.sq, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db.sq, 5000);
    return db;
}

static void raw_close(struct raw db)
{
    sqlite3_close(db.sq);
    PQfinish(db.pg);
}

/* The first column of sql's first row as text into buf. */
static void raw_text(struct raw db, const char *sql, char *buf, size_t n)
{
    if (db.pg) {
        PGresult *r = PQexec(db.pg, sql);
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        assert_true(PQntuples(r) > 0);
        snprintf(buf, n, "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
        return;
    }
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db.sq, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

static void raw_exec(struct raw db, const char *sql)
{
    if (db.pg) {
        PGresult *r = PQexec(db.pg, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            fail_msg("%s: %s", sql, PQerrorMessage(db.pg));
        PQclear(r);
        return;
    }
    assert_int_equal(sqlite3_exec(db.sq, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* Hold the store's writer until raw_exec(db, "COMMIT"): its job inserts wait for this lock. */
static void raw_hold_writer(struct raw db)
{
    raw_exec(db, db.pg ? "BEGIN" : "BEGIN IMMEDIATE");
    if (db.pg)
        raw_exec(db, "LOCK TABLE jobs IN EXCLUSIVE MODE");
}

static void insert_as(struct fixture *fx, unsigned long long n, int op, const char *status, const void *input,
                      size_t bytes, const struct gr_owner *own, struct rec *r)
{
    char id[24];
    make_id(id, n);
    assert_int_equal(gr_store_insert_job(fx->s, id, op, status, make_doc(n, status), input, bytes, own, on_done, r),
                     GR_OK);
}

static void insert(struct fixture *fx, unsigned long long n, int op, const char *status, const void *input,
                   size_t bytes, struct rec *r)
{
    insert_as(fx, n, op, status, input, bytes, NULL, r);
}

static void expect_job(struct fixture *fx, unsigned long long n, const char *status, const char *tag)
{
    char id[24], want[64], st[16] = "poison", *doc = NULL;
    struct gr_err e = {0};
    make_id(id, n);
    doc_text(want, sizeof want, n, tag);
    int rc = gr_store_get_job(fx->s, id, NULL, &doc, st, &e);
    if (rc != GR_OK)
        fail_msg("get %s: %d %s", id, rc, e.msg);
    assert_string_equal(doc, want);
    assert_string_equal(st, status);
    free(doc);
}

static void test_open_close(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct stat sb;
    assert_int_equal(stat(fx->data, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0750);
    struct gr_err e = {0};
    assert_int_equal(gr_store_ping(fx->s, &e), GR_OK);

    struct rec r = {0};
    insert(fx, 1, GR_SUM, "queued", NULL, 0, &r);
    wait_done(1);
    char v[32];
    struct raw db = raw_open(fx);
    if (!fx->pg[0]) { /* the -wal file exists while the store is open and has written */
        char wal[160];
        snprintf(wal, sizeof wal, "%s-wal", fx->db);
        assert_int_equal(access(wal, F_OK), 0);
        raw_text(db, "PRAGMA journal_mode", v, sizeof v);
        assert_string_equal(v, "wal");
    }
    raw_text(db, fx->pg[0] ? "SELECT version FROM gpured_schema" : "PRAGMA user_version", v, sizeof v);
    assert_int_equal(atoi(v), fx->pg[0] ? gr_pg_schema_nsteps : gr_schema_nsteps);
    raw_close(db);

    gr_store_close(fx->s);
    fx->s = NULL;
    open_store(fx); /* reopening migrates nothing and keeps the data */
    expect_job(fx, 1, "queued", "queued");
    assert_int_equal(gr_store_ping(fx->s, &e), GR_OK);
    gr_store_close(fx->s);
    fx->s = NULL;
    db = raw_open(fx);
    raw_text(db, fx->pg[0] ? "SELECT version FROM gpured_schema" : "PRAGMA user_version", v, sizeof v);
    assert_int_equal(atoi(v), fx->pg[0] ? gr_pg_schema_nsteps : gr_schema_nsteps);
    raw_text(db, "SELECT count(*) FROM jobs", v, sizeof v);
    assert_string_equal(v, "1");
    raw_close(db);
    gr_store_close(NULL);
}

static void test_newer_schema_refused(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    gr_store_close(fx->s);
    fx->s = NULL;
    struct raw db = raw_open(fx);
    raw_exec(db, fx->pg[0] ? "UPDATE gpured_schema SET version = 99" : "PRAGMA user_version = 99");
    raw_close(db);
    struct gr_err e = {0};
    struct gr_store *s = (struct gr_store *)&e; /* poison: must come back NULL */
    assert_int_equal(gr_store_open(&s, fx->url, fx->data, &e), GR_EIO);
    assert_null(s);
    assert_int_equal(e.code, GR_EIO);
    assert_non_null(strstr(e.msg, "99"));
    assert_non_null(strstr(e.msg, "newer"));
}

static void test_open_fails(void **state)
{
    struct fixture *fx = *state;
    FILE *f = fopen(fx->data, "w"); /* data_dir is a plain file: cannot hold a database */
    assert_non_null(f);
    fclose(f);
    struct gr_err e = {0};
    struct gr_store *s = NULL;
    assert_int_equal(gr_store_open(&s, fx->url, fx->data, &e), GR_EIO);
    assert_null(s);
    assert_true(e.msg[0] != '\0');
}

/* The after-commits hook: how many done callbacks had run at each of its calls. */
static int after_calls, after_seen, after_went_back;

static void after_hook(void)
{
    pthread_mutex_lock(&done_mu);
    after_went_back |= ndone < after_seen;
    after_seen = ndone;
    after_calls++;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

/* gr_store_after_commits: its hook runs after a commit's done callbacks, once a commit. */
static void test_after_commits(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    gr_store_after_commits(fx->s, after_hook);
    enum { N = 200 };
    struct rec *r = calloc(N, sizeof *r);
    assert_non_null(r);
    for (int n = 0; n < N; n++)
        insert(fx, (unsigned long long)n + 1, GR_SUM, "queued", NULL, 0, &r[n]);
    wait_done(N);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&done_mu);
    while (after_seen < N && pthread_cond_timedwait(&done_cv, &done_mu, &until) == 0)
        ;
    int calls = after_calls, seen = after_seen, went_back = after_went_back;
    pthread_mutex_unlock(&done_mu);
    gr_store_after_commits(fx->s, NULL);
    assert_int_equal(seen, N); /* the last call came after every callback */
    assert_false(went_back);
    assert_true(calls >= 1 && calls <= N); /* once a commit, not once a write */
    for (int n = 0; n < N; n++)
        assert_int_equal(r[n].calls, 1);
    free(r);
}

static void test_insert_get(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    uint64_t v0 = gr_store_version(fx->s);
    struct rec r = {0};
    static const unsigned char input[] = {1, 2, 3, 4};
    insert(fx, 7, GR_MAX, "queued", input, sizeof input, &r);
    wait_done(1);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.code, GR_OK);
    assert_true(gr_store_version(fx->s) > v0);
    expect_job(fx, 7, "queued", "queued");

    char *doc = (char *)&r, st[16] = "poison";
    struct gr_err e = {0};
    assert_int_equal(gr_store_get_job(fx->s, "j_ffffffffffffffff", NULL, &doc, st, &e), GR_ENOTFOUND);
    assert_null(doc);
    assert_int_equal(e.code, GR_ENOTFOUND);

    /* Bad arguments are refused at once and the doc is still taken. */
    assert_int_equal(gr_store_insert_job(fx->s, "j_x", GR_MATMUL + 1, "queued", make_doc(1, "x"), NULL, 0, NULL, NULL, NULL),
                     GR_EINVAL);
    assert_int_equal(gr_store_insert_job(fx->s, "j_x", GR_SUM, "a-status-far-too-long", make_doc(1, "x"), NULL, 0, NULL,
                                         NULL, NULL),
                     GR_EINVAL);
}

static void test_update(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct rec r[4] = {{0}};
    insert(fx, 3, GR_SUM, "queued", NULL, 0, &r[0]);
    wait_done(1);
    uint64_t v0 = gr_store_version(fx->s);
    char id[24];
    make_id(id, 3);
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "running", make_doc(3, "running"), 1, on_done, &r[1]), GR_OK);
    wait_done(2);
    assert_int_equal(r[1].calls, 1);
    assert_int_equal(r[1].code, GR_OK);
    assert_true(gr_store_version(fx->s) > v0);
    expect_job(fx, 3, "running", "running");

    /* done may be NULL; a later write's callback shows the earlier one is committed. */
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "succeeded", make_doc(3, "final"), 1, NULL, NULL), GR_OK);
    make_id(id, 4);
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "failed", make_doc(4, "x"), 1, on_done, &r[2]), GR_OK);
    wait_done(3);
    assert_int_equal(r[2].code, GR_ENOTFOUND);
    expect_job(fx, 3, "succeeded", "final");
    char *doc = NULL, st[16];
    assert_int_equal(gr_store_get_job(fx->s, id, NULL, &doc, st, NULL), GR_ENOTFOUND);
}

/* On PostgreSQL with several writers, each id's writes commit in the order queued: a job inserted
 * in a group and ended at once is ended after its insert, whichever writer its own id would get.
 * The writers are held on the jobs table's lock until everything is queued. */
static void test_writers_keep_each_ids_order(void **state)
{
    struct fixture *fx = *state;
    struct gr_err e = {0};
    if (gr_store_open_with(&fx->s, fx->url, fx->data, 3, &e) != GR_OK)
        fail_msg("gr_store_open_with: %s", e.msg);
    enum { N = 24 };
    static struct gr_store_job v[N];
    static char id[N][24];
    struct rec r[2 * N] = {{0}};
    struct raw db = raw_open(fx);
    raw_hold_writer(db);
    for (int k = 0; k < N; k++) {
        make_id(id[k], 100 + (unsigned long long)k);
        v[k] = (struct gr_store_job){id[k], GR_SUM, "queued", make_doc(100 + (unsigned long long)k, "queued"),
                                     NULL, 0, {0}, &r[k]};
    }
    assert_int_equal(gr_store_insert_jobs(fx->s, v, N, on_done), GR_OK);
    for (int k = 0; k < N; k++) {
        assert_int_equal(gr_store_dataset_used(fx->s, "d_00000000000000aa", 1700000000.0, id[k]), GR_OK);
        assert_int_equal(gr_store_update_job(fx->s, id[k], NULL, "succeeded", make_doc(100 + (unsigned long long)k,
                                             "final"), 1, on_done, &r[N + k]),
                         GR_OK);
    }
    raw_exec(db, "COMMIT");
    wait_done(2 * N);
    for (int k = 0; k < 2 * N; k++)
        assert_int_equal(r[k].code, GR_OK);
    for (int k = 0; k < N; k++)
        expect_job(fx, 100 + (unsigned long long)k, "succeeded", "final");
    raw_close(db);
}

/* Each live replica takes an id residue no other live one has, however many replicas came and
 * went before (a sequence modulo the stride had come round to a live one's); with every residue
 * live, a new one is refused. */
static void test_residues_of_live_replicas(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    if (!fx->pg[0]) {
        long long n = -1;
        assert_int_equal(gr_store_slot(fx->s, 32, &n, NULL), GR_OK);
        assert_int_equal(n, 0);
        return;
    }
    enum { STRIDE = 4 };
    struct gr_err e = {0};
    long long first = -1, n = -1;
    gr_store_join(fx->s, "replica-long", 60);
    assert_int_equal(gr_store_slot(fx->s, STRIDE, &first, &e), GR_OK);
    for (int k = 0; k < 3 * STRIDE; k++) { /* replicas that start and stop beside it */
        char name[32];
        snprintf(name, sizeof name, "replica-%d", k);
        gr_store_join(fx->s, name, 60);
        assert_int_equal(gr_store_slot(fx->s, STRIDE, &n, &e), GR_OK);
        assert_true(n >= 0 && n < STRIDE && n != first);
        assert_int_equal(gr_store_leave(fx->s, &e), GR_OK);
    }
    long long seen = 1LL << first;
    for (int k = 1; k < STRIDE; k++) { /* all live at once: each its own */
        char name[32];
        snprintf(name, sizeof name, "replica-live-%d", k);
        gr_store_join(fx->s, name, 60);
        assert_int_equal(gr_store_slot(fx->s, STRIDE, &n, &e), GR_OK);
        assert_false(seen & (1LL << n));
        seen |= 1LL << n;
    }
    gr_store_join(fx->s, "replica-one-too-many", 60);
    assert_int_equal(gr_store_slot(fx->s, STRIDE, &n, &e), GR_EIO);
    assert_non_null(strstr(e.msg, "residues are held"));
}

static void test_duplicate_insert_fails_alone(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct rec r[3] = {{0}};
    char id[24];
    make_id(id, 5);
    insert(fx, 5, GR_SUM, "queued", NULL, 0, &r[0]);
    assert_int_equal(gr_store_insert_job(fx->s, id, GR_SUM, "running", make_doc(5, "dup"), NULL, 0, NULL, on_done, &r[1]),
                     GR_OK);
    insert(fx, 6, GR_MIN, "queued", NULL, 0, &r[2]);
    wait_done(3);
    assert_int_equal(r[0].code, GR_OK);
    assert_int_equal(r[1].code, GR_EIO);
    assert_int_equal(r[2].code, GR_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(r[i].calls, 1);
    expect_job(fx, 5, "queued", "queued");
    expect_job(fx, 6, "queued", "queued");
}

/* A group of inserts stands or falls together: one duplicate id in it sinks the other two, and
 * every one of them is told the same failure, while a write beside them commits. */
static void test_group_all_or_none(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct rec r[5] = {{0}};
    insert(fx, 7, GR_SUM, "queued", NULL, 0, &r[0]);
    wait_done(1);
    char id[3][24];
    struct gr_store_job v[3];
    for (int k = 0; k < 3; k++) {
        make_id(id[k], (unsigned long long)(k == 1 ? 7 : 8 + k));
        v[k] = (struct gr_store_job){id[k], GR_SUM, "queued", make_doc(8 + (unsigned long long)k, "group"), NULL, 0,
                                     {.tenant = "default"}, &r[1 + k]};
    }
    assert_int_equal(gr_store_insert_jobs(fx->s, v, 3, on_done), GR_OK);
    insert(fx, 20, GR_MIN, "queued", NULL, 0, &r[4]);
    wait_done(5);
    for (int k = 1; k < 4; k++) {
        assert_int_equal(r[k].calls, 1);
        assert_int_equal(r[k].code, GR_EIO);
    }
    assert_int_equal(r[4].code, GR_OK);
    char *doc = NULL, st[16];
    struct gr_err e = {0};
    assert_int_equal(gr_store_get_job(fx->s, id[0], NULL, &doc, st, &e), GR_ENOTFOUND);
    assert_int_equal(gr_store_get_job(fx->s, id[2], NULL, &doc, st, &e), GR_ENOTFOUND);
    expect_job(fx, 7, "queued", "queued");
    expect_job(fx, 20, "queued", "queued");
}

/* A write that fails half way (its input row refused by a test trigger after the job row
 * went in) sinks the batch; retried alone, it fails by itself and leaves nothing behind
 * while its neighbours in the same batch commit. */
static void test_failed_write_isolated(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct raw db = raw_open(fx);
    if (fx->pg[0]) {
        raw_exec(db, "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$BEGIN RAISE EXCEPTION 'refused by test'; END$$");
        raw_exec(db, "CREATE TRIGGER refuse BEFORE INSERT ON job_inputs FOR EACH ROW"
                     " WHEN (NEW.id = 'j_0000000000000002') EXECUTE FUNCTION refuse()");
    } else {
        raw_exec(db, "CREATE TRIGGER refuse BEFORE INSERT ON job_inputs WHEN NEW.id = 2"
                     " BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
    }
    raw_hold_writer(db); /* so the four land in one or two batches */
    struct rec r[4] = {{0}};
    static const unsigned char input[300] = {9, 8, 7}; /* over 256 bytes: a job_inputs row in SQLite too */
    for (int n = 0; n < 4; n++)
        insert(fx, (unsigned long long)n, GR_SUM, "queued", input, sizeof input, &r[n]);
    raw_exec(db, "COMMIT");
    wait_done(4);
    for (int n = 0; n < 4; n++) {
        assert_int_equal(r[n].calls, 1);
        assert_int_equal(r[n].code, n == 2 ? GR_EIO : GR_OK);
    }
    expect_job(fx, 3, "queued", "queued");
    char *doc = NULL, st[16];
    assert_int_equal(gr_store_get_job(fx->s, "j_0000000000000002", NULL, &doc, st, NULL), GR_ENOTFOUND);
    char v[32];
    raw_text(db, "SELECT count(*) FROM job_inputs", v, sizeof v);
    assert_string_equal(v, "3");
    raw_close(db);
}

/* An input is kept until its job ends, and no longer: one of at most 256 bytes in the job's row,
 * a bigger one in job_inputs (both stores). */
static void test_inputs_kept_until_the_end(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    static const unsigned char small[16] = {1, 2, 3}, big[300] = {4, 5, 6};
    struct rec r[4] = {{0}};
    insert(fx, 1, GR_SUM, "queued", small, sizeof small, &r[0]);
    insert(fx, 2, GR_SUM, "queued", big, sizeof big, &r[1]);
    wait_done(2);
    struct raw db = raw_open(fx);
    char v[32];
    raw_text(db, "SELECT count(*) FROM job_inputs", v, sizeof v);
    assert_string_equal(v, "1");
    raw_text(db, "SELECT count(*) FROM jobs WHERE input IS NOT NULL", v, sizeof v);
    assert_string_equal(v, "1");
    char id[24];
    for (unsigned long long n = 1; n <= 2; n++) {
        make_id(id, n);
        assert_int_equal(gr_store_update_job(fx->s, id, NULL, "succeeded", make_doc(n, "done"), 1, on_done, &r[1 + n]),
                         GR_OK);
    }
    wait_done(4);
    assert_int_equal(r[2].code, GR_OK);
    assert_int_equal(r[3].code, GR_OK);
    raw_text(db, "SELECT count(*) FROM job_inputs", v, sizeof v);
    assert_string_equal(v, "0");
    raw_text(db, "SELECT count(*) FROM jobs WHERE input IS NOT NULL", v, sizeof v);
    assert_string_equal(v, "0");
    raw_close(db);
}

/* 250 jobs; n's status and op cycle so every filter matches a different subset. */
#define NLIST 250
static const char *const list_status[] = {"queued", "running", "succeeded"};
static const int list_op[] = {GR_SUM, GR_MIN, GR_MAX, GR_ARGMIN};
/* five tenants (one with a long name), so that a list of every tenant's merges their pages */
static const char *const list_tenant[] = {"default", "alice", "bob", "carol", "a-tenant-whose-name-is-forty-bytes-long"};

struct page {
    int n;
    unsigned long long got[NLIST];
    char last[24];
    int bad_doc;
};

static void on_row(void *ctx, const char *id, const char *doc)
{
    struct page *p = ctx;
    unsigned long long n = strtoull(id + 2, NULL, 16);
    char want[64];
    doc_text(want, sizeof want, n, list_status[n % 3]);
    p->bad_doc += strcmp(doc, want) != 0;
    if (p->n < NLIST)
        p->got[p->n] = n;
    p->n++;
    snprintf(p->last, sizeof p->last, "%s", id);
}

/* Page through the list of tenant t's jobs (t < 0: every tenant's) at limit a page. */
static void check_listing(struct fixture *fx, int t, const char *status, const char *op, int limit)
{
    unsigned long long want[NLIST];
    int nwant = 0;
    for (int n = NLIST - 1; n >= 0; n--)
        if ((!status || strcmp(status, list_status[n % 3]) == 0) && (!op || strcmp(op, gr_op_name(list_op[n % 4])) == 0) &&
            (t < 0 || n % 5 == t))
            want[nwant++] = (unsigned long long)n;
    assert_true(nwant > 0);

    struct page all = {0};
    char before[24] = "";
    for (int pages = 0;; pages++) {
        assert_true(pages <= NLIST);
        struct page p = {0};
        struct gr_err e = {0};
        int rc = gr_store_list_jobs(fx->s, t < 0 ? NULL : list_tenant[t], status, op, before[0] ? before : NULL, limit,
                                    on_row, &p, &e);
        if (rc != GR_OK)
            fail_msg("list: %s", e.msg);
        assert_true(p.n <= limit);
        assert_int_equal(p.bad_doc, 0);
        for (int i = 0; i < p.n && all.n < NLIST; i++)
            all.got[all.n++] = p.got[i];
        if (p.n < limit)
            break;
        snprintf(before, sizeof before, "%s", p.last);
    }
    assert_int_equal(all.n, nwant);
    for (int i = 0; i < nwant; i++)
        assert_int_equal(all.got[i], want[i]);
}

static void test_list_paging_filters(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct rec *r = calloc(NLIST, sizeof *r);
    assert_non_null(r);
    for (int n = 0; n < NLIST; n++)
        insert_as(fx, (unsigned long long)n, list_op[n % 4], list_status[n % 3], NULL, 0,
                  &(struct gr_owner){.tenant = list_tenant[n % 5]}, &r[n]);
    wait_done(NLIST);
    for (int n = 0; n < NLIST; n++)
        assert_int_equal(r[n].code, GR_OK);
    free(r);

    /* every filter, without a tenant and with each: those that no one index serves merge pages */
    for (int t = -1; t < 5; t++) {
        check_listing(fx, t, NULL, NULL, 100);
        check_listing(fx, t, NULL, NULL, 1000);
        check_listing(fx, t, NULL, NULL, 1);
        check_listing(fx, t, "running", NULL, 7);
        check_listing(fx, t, NULL, "argmin", 10);
        check_listing(fx, t, "succeeded", "min", 3);
        check_listing(fx, t, "succeeded", NULL, 9); /* outside the status indexes */
        check_listing(fx, t, "queued", "argmin", 4);
        check_listing(fx, t, NULL, "max", 1);
        check_listing(fx, t, NULL, "sum", 1000);
    }

    /* a cursor past every id gr_id_new makes (a client may send one) pages from the newest */
    static const char *const past[] = {"j_7fffffffffffffff", "j_8000000000000000", "j_ffffffffffffffff"};
    for (int i = 0; i < 3; i++) {
        struct page all = {0};
        assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, NULL, past[i], 1000, on_row, &all, NULL), GR_OK);
        assert_int_equal(all.n, NLIST);
    }

    struct page p = {0};
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, "canceled", NULL, NULL, 10, on_row, &p, NULL), GR_OK);
    assert_int_equal(p.n, 0);
    struct gr_err e = {0};
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, NULL, NULL, 0, on_row, &p, &e), GR_EINVAL);
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, NULL, NULL, GR_STORE_LIST_MAX + 1, on_row, &p, &e), GR_EINVAL);
    assert_int_equal(p.n, 0);
}

#define NPEND 60
static const char *const pend_status[] = {"queued", "running", "succeeded", "failed", "canceled"};

struct pending_seen {
    int n, bad;
    int64_t epoch; /* the one every pending job must come with */
    unsigned long long got[NPEND];
    unsigned char *input[NPEND];
    size_t bytes[NPEND];
};

static void on_pending(void *ctx, const char *id, const char *doc, const void *input, size_t bytes, int64_t epoch)
{
    struct pending_seen *p = ctx;
    if (epoch != p->epoch)
        p->bad++;
    unsigned long long n = strtoull(id + 2, NULL, 16);
    char want[64];
    doc_text(want, sizeof want, n, pend_status[n % 5]);
    if (n >= NPEND || p->n >= NPEND || strcmp(doc, want) != 0 || bytes != p->bytes[n] ||
        (bytes && memcmp(input, p->input[n], bytes) != 0)) {
        p->bad++;
        return;
    }
    p->got[p->n++] = n;
}

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static void test_load_pending(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct pending_seen p = {0};
    struct rec r[NPEND] = {{0}};
    srand(12345);
    for (int n = 0; n < NPEND; n++) {
        /* Every seventh job has no input; the others random bytes, some empty. */
        p.bytes[n] = n % 7 == 0 ? 0 : (size_t)(rand() % 3000);
        p.input[n] = n % 7 == 0 ? NULL : malloc(p.bytes[n] + 1);
        for (size_t i = 0; n % 7 && i < p.bytes[n]; i++)
            p.input[n][i] = (unsigned char)rand();
        insert_as(fx, (unsigned long long)n, GR_SUM, pend_status[n % 5], p.input[n], p.bytes[n],
                  &(struct gr_owner){.tenant = list_tenant[n % 3]}, &r[n]); /* each tenant's pending jobs */
    }
    wait_done(NPEND);
    for (int n = 0; n < NPEND; n++)
        assert_int_equal(r[n].code, GR_OK);

    struct gr_err e = {0};
    p.epoch = fx->pg[0] ? 2 : 1; /* PostgreSQL: claimed (no replica holds them: no lease), epoch 2 */
    int rc = gr_store_load_pending(fx->s, 0, NULL, on_pending, &p, &e);
    if (rc != GR_OK)
        fail_msg("load_pending: %s", e.msg);
    assert_int_equal(p.bad, 0);
    if (fx->pg[0]) /* claims come in lease order, which need not be the ids' */
        qsort(p.got, (size_t)p.n, sizeof p.got[0], cmp_ull);
    int k = 0;
    for (int n = 0; n < NPEND; n++)
        if (n % 5 < 2) {
            assert_true(k < p.n);
            assert_int_equal(p.got[k++], n);
        }
    assert_int_equal(k, p.n);
    for (int n = 0; n < NPEND; n++)
        free(p.input[n]);
}

/* Events (or job ids) as read, in order. */
struct event_seen {
    char id[24], status[16], tenant[8];
    long long seq, tseq;
};

struct events_page {
    struct event_seen *v;
    int n, cap;
};

static void keep_id(void *ctx, const char *id, const char *doc)
{
    struct events_page *p = ctx;
    assert_true(p->n < p->cap);
    snprintf(p->v[p->n++].id, sizeof p->v[0].id, "%s", id);
}

/* A store from before jobs were keyed by number (text ids, inputs in the row and apart) is
 * migrated in place: every job reads, lists and loads as before, its input with it. */
static void test_text_keys_upgraded(void **state)
{
    struct fixture *fx = *state;
    if (fx->pg[0])
        skip(); /* SQLite's migration */
    enum { N = 10 };
    int keyed = 0;
    while (keyed < gr_schema_nsteps && !strstr(gr_schema_steps[keyed], "CREATE TABLE jobs_k"))
        keyed++;
    assert_true(keyed < gr_schema_nsteps);
    assert_int_equal(mkdir(fx->data, 0700), 0);
    struct raw db = {0};
    assert_int_equal(sqlite3_open(fx->db, &db.sq), SQLITE_OK);
    for (int v = 0; v < keyed; v++)
        raw_exec(db, gr_schema_steps[v]);
    char sql[640];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", keyed);
    raw_exec(db, sql);
    struct pending_seen p = {.epoch = 1};
    int apart = 0;
    for (int n = 0; n < N; n++) {
        const char *status = pend_status[n % 5];
        p.bytes[n] = n % 5 < 2 ? (n % 2 ? 300 : 40) : 0; /* 300: in job_inputs; 40: in the row */
        p.input[n] = malloc(p.bytes[n] + 1);
        for (size_t i = 0; i < p.bytes[n]; i++)
            p.input[n][i] = (unsigned char)(n * 7 + i);
        char id[24], doc[64];
        make_id(id, (unsigned long long)n);
        doc_text(doc, sizeof doc, (unsigned long long)n, status);
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(db.sq, "INSERT INTO jobs(id, status, op, doc, created, tenant, input)"
                                                   " VALUES (?1, ?2, 'sum', ?3, 1.0, 'default', ?4)", -1, &st, NULL),
                         SQLITE_OK);
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, status, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, doc, -1, SQLITE_STATIC);
        if (p.bytes[n] && p.bytes[n] <= 256)
            sqlite3_bind_blob(st, 4, p.input[n], (int)p.bytes[n], SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_finalize(st);
        if (p.bytes[n] > 256) {
            assert_int_equal(sqlite3_prepare_v2(db.sq, "INSERT INTO job_inputs(id, data) VALUES (?1, ?2)", -1, &st, NULL),
                             SQLITE_OK);
            sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
            sqlite3_bind_blob(st, 2, p.input[n], (int)p.bytes[n], SQLITE_STATIC);
            assert_int_equal(sqlite3_step(st), SQLITE_DONE);
            sqlite3_finalize(st);
            apart++;
        }
    }
    /* every hex digit at every place: the migration's own reading of a text id */
    const char *big = "j_0fedcba987654321", *big_doc = "{\"n\":99,\"tag\":\"big\"}";
    snprintf(sql, sizeof sql, "INSERT INTO jobs(id, status, op, doc, created) VALUES ('%s', 'succeeded', 'max', '%s', 2.0)",
             big, big_doc);
    raw_exec(db, sql);
    raw_close(db);

    open_store(fx);
    for (int n = 0; n < N; n++)
        expect_job(fx, (unsigned long long)n, pend_status[n % 5], pend_status[n % 5]);
    char *doc = NULL, st[16];
    struct gr_err e = {0};
    assert_int_equal(gr_store_get_job(fx->s, big, NULL, &doc, st, &e), GR_OK);
    assert_string_equal(doc, big_doc);
    free(doc);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_pending, &p, &e), GR_OK);
    assert_int_equal(p.bad, 0);
    const unsigned long long pending[] = {0, 1, 5, 6};
    assert_int_equal(p.n, 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(p.got[k], pending[k]);
    struct event_seen ids[N + 2];
    struct events_page page = {ids, 0, N + 2};
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, NULL, NULL, N + 2, keep_id, &page, &e), GR_OK);
    assert_int_equal(page.n, N + 1);
    assert_string_equal(ids[0].id, big);
    for (int k = 0; k < N; k++) {
        char want[24];
        make_id(want, (unsigned long long)(N - 1 - k));
        assert_string_equal(ids[1 + k].id, want);
    }
    db = raw_open(fx);
    char v[32];
    raw_text(db, "SELECT count(*) FROM jobs WHERE typeof(id) = 'integer'", v, sizeof v);
    assert_int_equal(atoi(v), N + 1);
    raw_text(db, "SELECT count(*) FROM job_inputs", v, sizeof v);
    assert_int_equal(atoi(v), apart);
    char id[24];
    make_id(id, 1); /* its input apart: gone with its end */
    struct rec r = {0};
    assert_int_equal(gr_store_update_job(fx->s, id, "default", "succeeded", make_doc(1, "done"), 1, on_done, &r), GR_OK);
    wait_done(1);
    assert_int_equal(r.code, GR_OK);
    raw_text(db, "SELECT count(*) FROM job_inputs", v, sizeof v);
    assert_int_equal(atoi(v), apart - 1);
    raw_close(db);
    for (int n = 0; n < N; n++)
        free(p.input[n]);
}

struct claimed {
    int n;
    char id[24];
    int64_t epoch;
};

static void on_claimed(void *ctx, const char *id, const char *doc, const void *input, size_t bytes, int64_t epoch)
{
    struct claimed *c = ctx;
    c->n++;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->epoch = epoch;
}

/* A shared store: a job held under a lease is not claimed; released, or its lease run out, it is
 * (epoch 2); the old holder's final state is then fenced out, the new holder's kept. */
static void test_leases_and_fence(void **state)
{
    struct fixture *fx = *state;
    if (!fx->pg[0])
        skip(); /* one SQLite file has one gpured: nothing is leased */
    open_store(fx);
    assert_true(gr_store_shared(fx->s));
    gr_store_join(fx->s, "replica-a", 60);
    struct rec r[4] = {{0}};
    insert(fx, 1, GR_SUM, "queued", NULL, 0, &r[0]);
    wait_done(1);
    struct claimed c = {0};
    struct gr_err e = {0};
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 0); /* held for 60 s */
    assert_int_equal(gr_store_renew(fx->s, &e), GR_OK);
    assert_int_equal(gr_store_release(fx->s, NULL, 0, &e), GR_OK);
    gr_store_join(fx->s, "replica-b", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    char id[24];
    make_id(id, 1);
    assert_int_equal(c.n, 1); /* let go: b claims it, under epoch 2 */
    assert_string_equal(c.id, id);
    assert_int_equal(c.epoch, 2);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 1); /* b holds it now */
    struct page held = {0};
    assert_int_equal(gr_store_held(fx->s, on_row, &held, &e), GR_OK);
    assert_int_equal(held.n, 1);
    assert_string_equal(held.last, id);
    char let[1][24];
    snprintf(let[0], sizeof let[0], "%s", id);
    assert_int_equal(gr_store_let_go(fx->s, let, 1, &e), GR_OK); /* b lets it go: c claims it, epoch 3 */
    gr_store_join(fx->s, "replica-c", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.epoch, 3);
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "succeeded", make_doc(1, "late"), 2, on_done, &r[1]), GR_OK);
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "succeeded", make_doc(1, "final"), 3, on_done, &r[2]), GR_OK);
    assert_int_equal(gr_store_update_job(fx->s, id, NULL, "failed", make_doc(1, "after"), 3, on_done, &r[3]), GR_OK);
    wait_done(4);
    assert_int_equal(r[1].code, GR_ENOTFOUND); /* b's epoch passed */
    assert_int_equal(r[2].code, GR_OK);
    assert_int_equal(r[3].code, GR_ENOTFOUND); /* final already */
    expect_job(fx, 1, "succeeded", "final");
}

/* Three queued jobs (ids first..first+2) inserted offered to offer[k] ("": any replica), each
 * document naming device[k]. */
static void insert_offered(struct fixture *fx, int first, const char *offer[3], const char *device[3], char id[3][24])
{
    struct rec r[3] = {{0}};
    for (int k = 0; k < 3; k++) {
        make_id(id[k], (unsigned long long)(first + k));
        char *doc = malloc(64);
        assert_non_null(doc);
        snprintf(doc, 64, "{\"n\":%d,\"device\":\"%s\",\"tag\":\"offered\"}", first + k, device[k]);
        struct gr_owner own = {.tenant = "default", .offer = offer[k]};
        assert_int_equal(gr_store_insert_job(fx->s, id[k], GR_SUM, "queued", doc, NULL, 0, &own, on_done, &r[k]), GR_OK);
    }
    wait_done(3);
}

/* Offers: a job inserted for any replica is the first claimer's (epoch 2), and its inserter does
 * not hold it; one offered to replica-b first is b's to claim at once, another's only once
 * GR_OFFER_FIRST_S has passed. */
static void test_offers(void **state)
{
    struct fixture *fx = *state;
    if (!fx->pg[0])
        skip(); /* one SQLite file has one gpured: nothing is offered */
    open_store(fx);
    gr_store_join(fx->s, "replica-a", 60);
    const char *offer[3] = {"", "replica-b", "replica-b"}, *device[3] = {"cpu", "cpu", "cpu"};
    char id[3][24];
    insert_offered(fx, 10, offer, device, id);
    struct page held = {0};
    struct gr_err e = {0};
    assert_int_equal(gr_store_held(fx->s, on_row, &held, &e), GR_OK);
    assert_int_equal(held.n, 0); /* offered: not the inserter's */
    struct claimed c = {0};
    gr_store_join(fx->s, "replica-c", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 1); /* the offer to any replica; b's two are b's for now */
    assert_string_equal(c.id, id[0]);
    assert_int_equal(c.epoch, 2);
    gr_store_join(fx->s, "replica-b", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 1, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.epoch, 2);
    usleep((useconds_t)(GR_OFFER_FIRST_S * 1e6) + 200000);
    gr_store_join(fx->s, "replica-c", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 0, NULL, on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 3); /* b left one: past its first second, c takes it */
    assert_int_equal(c.epoch, 2);
}

/* A claim for one kind of device: "cpu" takes only the jobs that ask for the CPU, "gpu" only the
 * others, so a replica whose CPU is busy leaves the CPU jobs it offered to the others. */
static void test_claim_by_device(void **state)
{
    struct fixture *fx = *state;
    if (!fx->pg[0])
        skip(); /* one SQLite file has one gpured: nothing is offered */
    open_store(fx);
    gr_store_join(fx->s, "replica-a", 60);
    const char *offer[3] = {"", "", ""}, *device[3] = {"cpu", "auto", "gpu:1"};
    char id[3][24];
    insert_offered(fx, 20, offer, device, id);
    struct claimed c = {0};
    struct gr_err e = {0};
    assert_int_equal(gr_store_load_pending(fx->s, 0, "gpu", on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 2); /* auto and gpu:1, the CPU job left */
    assert_string_equal(c.id, id[2]);
    gr_store_join(fx->s, "replica-b", 60);
    assert_int_equal(gr_store_load_pending(fx->s, 0, "gpu", on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(gr_store_load_pending(fx->s, 0, "cpu", on_claimed, &c, &e), GR_OK);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.id, id[0]);
}

/* Concurrency: writers on many threads, readers beside them. */
#define NTHREADS 8
#define PER_THREAD 2000

struct writer_arg {
    struct gr_store *s;
    int t;
    struct rec *r;
    int refused;
};

static void *insert_many(void *arg)
{
    struct writer_arg *w = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        char id[24];
        unsigned long long n = ((unsigned long long)w->t << 48) | (unsigned long long)i;
        make_id(id, n);
        char *doc = malloc(64);
        if (!doc) {
            w->refused++;
            continue;
        }
        doc_text(doc, 64, n, "queued");
        w->refused += gr_store_insert_job(w->s, id, GR_SUM, "queued", doc, NULL, 0, NULL, on_done, &w->r[i]) != GR_OK;
    }
    return NULL;
}

struct presence {
    unsigned char *seen;
    int n, distinct, bad;
    char last[24];
};

static void on_present(void *ctx, const char *id, const char *doc)
{
    struct presence *p = ctx;
    unsigned long long n = strtoull(id + 2, NULL, 16), t = n >> 48, i = n & 0xffffffffffffull;
    char want[64];
    doc_text(want, sizeof want, n, "queued");
    p->n++;
    snprintf(p->last, sizeof p->last, "%s", id);
    if (t >= NTHREADS || i >= PER_THREAD || p->seen[t * PER_THREAD + i] || strcmp(doc, want) != 0) {
        p->bad++;
        return;
    }
    p->seen[t * PER_THREAD + i] = 1;
    p->distinct++;
}

struct reader_arg {
    struct gr_store *s;
    atomic_int *stop;
    int rounds, errors;
};

static void count_row(void *ctx, const char *id, const char *doc) { (*(int *)ctx)++; }

static void *read_loop(void *arg)
{
    struct reader_arg *a = arg;
    while (!atomic_load(a->stop) || a->rounds == 0) {
        int rows = 0;
        char *doc = NULL, st[16];
        a->errors += gr_store_list_jobs(a->s, NULL, "queued", NULL, NULL, 50, count_row, &rows, NULL) != GR_OK;
        int rc = gr_store_get_job(a->s, "j_0000000000000000", NULL, &doc, st, NULL);
        a->errors += rc != GR_OK && rc != GR_ENOTFOUND;
        free(doc);
        a->rounds++;
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A done callback that holds the writer until the test lets it go. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open, told;
};

static void gated_done(void *ctx, int code)
{
    struct gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    g->told = code == GR_OK;
    pthread_mutex_unlock(&g->mu);
}

struct events_read {
    struct fixture *fx;
    struct gate *g;
    int rows, rc, told_then;
};

static void *read_events(void *arg)
{
    struct events_read *r = arg;
    struct gr_err e = {0};
    r->rc = gr_store_events(r->fx->s, 0, 10, count_row, &r->rows, &e);
    pthread_mutex_lock(&r->g->mu);
    r->told_then = r->g->told;
    pthread_mutex_unlock(&r->g->mu);
    return NULL;
}

/* An events read that sees a write's event returns only once that write's done callback has run
 * (a stream never tells of a job's end before the job's GET shows it). */
static void test_events_after_told(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char id[24];
    make_id(id, 1);
    assert_int_equal(gr_store_insert_job(fx->s, id, GR_SUM, "queued", make_doc(1, "queued"), NULL, 0, NULL,
                                         gated_done, &g),
                     GR_OK);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) /* committed: its event is there to read */
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    struct events_read r = {fx, &g, 0, -1, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_events, &r), 0);
    struct timespec pause = {0, 100 * 1000000L}; /* room for a read that does not wait to return early */
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(t, NULL);
    assert_int_equal(r.rc, GR_OK);
    assert_int_equal(r.rows, 1);
    assert_int_equal(r.told_then, 1);
}

/* The text of a string field of an event (either store's JSON spacing) into out. */
static void event_field(const char *json, const char *name, char *out, size_t n)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *p = strstr(json, key);
    assert_non_null(p);
    p = strchr(p + strlen(key), '"');
    assert_non_null(p);
    size_t len = strcspn(p + 1, "\"");
    assert_true(len < n);
    memcpy(out, p + 1, len);
    out[len] = 0;
}

static void keep_event(void *ctx, const char *seq, const char *json)
{
    struct events_page *p = ctx;
    assert_true(p->n < p->cap);
    struct event_seen *e = &p->v[p->n++];
    e->seq = strtoll(seq, NULL, 10);
    const char *seq_field = strstr(json, "\"seq\"") + 5;
    assert_int_equal(e->seq, strtoll(seq_field + strspn(seq_field, " :"), NULL, 10));
    event_field(json, "id", e->id, sizeof e->id);
    event_field(json, "status", e->status, sizeof e->status);
    event_field(json, "tenant", e->tenant, sizeof e->tenant);
    const char *tseq = strstr(json, "\"tseq\"");
    assert_non_null(tseq);
    e->tseq = strtoll(tseq + 6 + strspn(tseq + 6, " :"), NULL, 10);
}

/* Each tenant's events (v, in seq order) are numbered 1, 2, ... by their tenant's count. */
static void assert_own_numbers(const struct event_seen *v, int n)
{
    for (int k = 0; k < n; k++) {
        long long before = 0;
        for (int q = 0; q < k; q++)
            before += !strcmp(v[q].tenant, v[k].tenant);
        assert_int_equal(v[k].tseq, before + 1);
    }
}

static int by_seq(const void *a, const void *b)
{
    const struct event_seen *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_change(const void *a, const void *b)
{
    const struct event_seen *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : strcmp(x->status, y->status);
}

/* Events come back one per change, in commit order with rising seqs, whatever page boundaries
 * cut through: SQLite stores a commit's like job events as one row (a run, at most
 * GR_SQ_EVENT_RUN), so runs here change tenant, change status, pass the cap, and are cut by a
 * dataset's event. */
static void test_event_runs(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    enum { A = 3, B = GR_SQ_EVENT_RUN + 2, C = 2, N = A + B + C, DONE = 3, ALL = N + 1 + DONE };
    static char id[N][24];
    static struct gr_store_job v[N];
    static struct rec r[N + 1 + DONE];
    static struct event_seen want[ALL], got[ALL];
    for (int k = 0; k < N; k++) {
        make_id(id[k], 100 + (unsigned long long)k);
        const char *tenant = k < A || k >= A + B ? "a" : "b";
        v[k] = (struct gr_store_job){id[k], GR_SUM, "queued", make_doc(100 + (unsigned long long)k, "run"), NULL, 0,
                                     {.tenant = tenant}, &r[k]};
        want[k] = (struct event_seen){.status = "queued"};
        memcpy(want[k].id, id[k], sizeof want[k].id);
        snprintf(want[k].tenant, sizeof want[k].tenant, "%s", tenant);
    }
    assert_int_equal(gr_store_insert_jobs(fx->s, v, N, on_done), GR_OK);
    struct gr_owner own = {.tenant = "a"};
    assert_int_equal(gr_store_intend(fx->s, "d_00000000000000aa", NULL), GR_OK);
    assert_int_equal(gr_store_insert_dataset(fx->s, "d_00000000000000aa", &own, 0, make_doc(1, "ds"), on_done, &r[N]),
                     GR_OK);
    want[N] = (struct event_seen){"d_00000000000000aa", "created", "a", 0, 0};
    for (int k = 0; k < DONE; k++) {
        assert_int_equal(gr_store_update_job(fx->s, id[A + k], "b", "succeeded", make_doc(1, "done"), 1, on_done,
                                             &r[N + 1 + k]),
                         GR_OK);
        want[N + 1 + k] = (struct event_seen){.status = "succeeded", .tenant = "b"};
        memcpy(want[N + 1 + k].id, id[A + k], sizeof want[N + 1 + k].id);
    }
    wait_done(ALL);
    for (int k = 0; k < ALL; k++)
        assert_int_equal(r[k].code, GR_OK);

    struct gr_err e = {0};
    const int pages[] = {7, 1000};
    long long first = 0, last = 0;
    for (size_t q = 0; q < sizeof pages / sizeof pages[0]; q++) {
        struct events_page page = {got, 0, ALL};
        long long after = 0;
        for (int before = -1; page.n > before && page.n < ALL;) {
            before = page.n;
            assert_int_equal(gr_store_events(fx->s, after, pages[q], keep_event, &page, &e), GR_OK);
            assert_true(page.n - before <= pages[q]);
            for (int k = before; k < page.n; k++) {
                assert_true(got[k].seq > after);
                after = got[k].seq;
            }
        }
        assert_int_equal(page.n, ALL);
        assert_own_numbers(got, ALL);
        first = got[0].seq, last = got[ALL - 1].seq;
        if (fx->pg[0]) { /* its writers commit side by side: writes of different ids in either order */
            qsort(got, ALL, sizeof *got, by_change);
            qsort(want, ALL, sizeof *want, by_change);
        }
        for (int k = 0; k < ALL; k++) {
            assert_string_equal(got[k].id, want[k].id);
            assert_string_equal(got[k].status, want[k].status);
            assert_string_equal(got[k].tenant, want[k].tenant);
        }
        int more = 0;
        assert_int_equal(gr_store_events(fx->s, after, 10, count_row, &more, &e), GR_OK);
        assert_int_equal(more, 0);
    }
    int64_t oldest, newest;
    assert_int_equal(gr_store_events_span(fx->s, &oldest, &newest, &e), GR_OK);
    assert_int_equal(oldest, first);
    assert_int_equal(newest, last);
    if (!fx->pg[0]) { /* the runs: a, b (two rows: the cap), a, the dataset, the updates (their commits) */
        struct raw db = raw_open(fx);
        char rows[32];
        raw_text(db, "SELECT count(*) FROM events", rows, sizeof rows);
        raw_close(db);
        assert_in_range(atoi(rows), 5, 4 + DONE);
    }
    /* a tenant's own numbers from a resume: within a run, past it, and none yet */
    qsort(got, ALL, sizeof *got, by_seq);
    long long b1 = 0, b6 = 0; /* the seqs of b's first and sixth events */
    for (int k = 0, n = 0; k < ALL; k++)
        if (!strcmp(got[k].tenant, "b") && ++n <= 6)
            *(n == 1 ? &b1 : &b6) = got[k].seq;
    struct gr_events_own o;
    assert_int_equal(gr_store_events_own(fx->s, "b", 0, &o, &e), GR_OK);
    assert_true(o.newest == last && o.last == B + DONE && o.tseq == 1 && o.seq == b1);
    assert_int_equal(gr_store_events_own(fx->s, "b", 5, &o, &e), GR_OK);
    assert_true(o.tseq == 6 && o.seq == b6);
    assert_int_equal(gr_store_events_own(fx->s, "b", B + DONE, &o, &e), GR_OK);
    assert_true(o.tseq == 0 && o.seq == 0 && o.last == B + DONE);
    assert_int_equal(gr_store_events_own(fx->s, "nobody", -1, &o, &e), GR_OK);
    assert_true(o.newest == last && o.last == 0 && o.tseq == 0);
    if (fx->pg[0])
        return;
    /* SQLite: once every event of a tenant is pruned, its numbers still go on from its newest */
    struct raw db = raw_open(fx);
    raw_exec(db, "INSERT INTO events(seq, tseq, kind, id, status, tenant, at) VALUES (1001999, 1, 'job', 'j_x', 'queued',"
                 " 'z', 0)");
    raw_close(db);
    static struct gr_store_job more[2];
    static char more_id[2][24];
    static struct rec mr[2];
    for (int k = 0; k < 2; k++) { /* the first passes a 1,000th seq: every event before 2,000 goes */
        make_id(more_id[k], 5000 + (unsigned long long)k);
        more[k] = (struct gr_store_job){more_id[k], GR_SUM, "queued", make_doc(5000 + (unsigned long long)k, "more"),
                                        NULL, 0, {.tenant = k ? "b" : "a"}, &mr[k]};
        assert_int_equal(gr_store_insert_jobs(fx->s, &more[k], 1, on_done), GR_OK);
        wait_done(ALL + k + 1);
        assert_int_equal(mr[k].code, GR_OK);
    }
    struct events_page page = {got, 0, ALL};
    assert_int_equal(gr_store_events(fx->s, 0, 10, keep_event, &page, &e), GR_OK);
    assert_int_equal(page.n, 3); /* z's, then a's and b's new ones, numbered on */
    assert_true(got[1].tseq == A + C + 2 && got[2].tseq == B + DONE + 1);
    assert_int_equal(gr_store_events_own(fx->s, "b", 0, &o, &e), GR_OK);
    assert_true(o.tseq == B + DONE + 1 && o.seq == got[2].seq);
}

static void test_concurrent_inserts(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    enum { TOTAL = NTHREADS * PER_THREAD };
    struct rec *recs = calloc(TOTAL, sizeof *recs);
    assert_non_null(recs);
    struct writer_arg w[NTHREADS];
    pthread_t wt[NTHREADS], rt[2];
    atomic_int stop = 0;
    struct reader_arg ra[2] = {{fx->s, &stop, 0, 0}, {fx->s, &stop, 0, 0}};
    uint64_t v0 = gr_store_version(fx->s);

    double t0 = now_s();
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&rt[i], NULL, read_loop, &ra[i]), 0);
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (struct writer_arg){fx->s, t, recs + t * PER_THREAD, 0};
        assert_int_equal(pthread_create(&wt[t], NULL, insert_many, &w[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(wt[t], NULL);
        assert_int_equal(w[t].refused, 0);
    }
    wait_done(TOTAL);
    double secs = now_s() - t0;
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) {
        pthread_join(rt[i], NULL); /* its read connection closes as it exits */
        assert_int_equal(ra[i].errors, 0);
    }
    uint64_t commits = gr_store_version(fx->s) - v0;
    for (int i = 0; i < TOTAL; i++) {
        assert_int_equal(recs[i].calls, 1);
        assert_int_equal(recs[i].code, GR_OK);
    }
    free(recs);
    print_message("concurrent: %d inserts from %d threads in %.3f s = %.0f inserts/s, %llu commits "
                  "(%.1f inserts per commit); readers did %d + %d rounds\n",
                  TOTAL, NTHREADS, secs, TOTAL / secs, (unsigned long long)commits, (double)TOTAL / (double)commits,
                  ra[0].rounds, ra[1].rounds);
    assert_true(commits >= 1 && commits <= TOTAL);

    /* All present: paging newest first meets every id exactly once. */
    struct presence pr = {calloc(TOTAL, 1), 0, 0, 0, ""};
    assert_non_null(pr.seen);
    for (int pages = 0; pages <= TOTAL / 1000; pages++) {
        int before_n = pr.n;
        struct gr_err e = {0};
        assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, "sum", pr.last[0] ? pr.last : NULL, 1000, on_present, &pr, &e),
                         GR_OK);
        if (pr.n - before_n < 1000)
            break;
    }
    assert_int_equal(pr.bad, 0);
    assert_int_equal(pr.n, TOTAL);
    assert_int_equal(pr.distinct, TOTAL);
    free(pr.seen);
}

/* Each thread waits for its write to be durable before the next, as a client waiting for
 * 202 does: the batches then come only from concurrency. */
#define PER_ACKED 500

struct acker {
    struct gr_store *s;
    int t, errors, acked, code;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void on_acked(void *ctx, int code)
{
    struct acker *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->acked = 1;
    a->code = code;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void *insert_acked(void *arg)
{
    struct acker *a = arg;
    for (int i = 0; i < PER_ACKED; i++) {
        char id[24];
        unsigned long long n = ((unsigned long long)a->t << 48) | (unsigned long long)i;
        make_id(id, n);
        a->acked = 0;
        if (gr_store_insert_job(a->s, id, GR_SUM, "queued", make_doc(n, "queued"), NULL, 0, NULL, on_acked, a) != GR_OK) {
            a->errors++;
            continue;
        }
        pthread_mutex_lock(&a->mu);
        while (!a->acked)
            pthread_cond_wait(&a->cv, &a->mu);
        a->errors += a->code != GR_OK;
        pthread_mutex_unlock(&a->mu);
    }
    return NULL;
}

static void test_concurrent_acked(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct acker a[NTHREADS];
    pthread_t t[NTHREADS];
    uint64_t v0 = gr_store_version(fx->s);
    double t0 = now_s();
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (struct acker){.s = fx->s, .t = i};
        pthread_mutex_init(&a[i].mu, NULL);
        pthread_cond_init(&a[i].cv, NULL);
        assert_int_equal(pthread_create(&t[i], NULL, insert_acked, &a[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    double secs = now_s() - t0;
    uint64_t commits = gr_store_version(fx->s) - v0;
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(a[i].errors, 0);
        pthread_mutex_destroy(&a[i].mu);
        pthread_cond_destroy(&a[i].cv);
    }
    print_message("acked: %d durable inserts from %d waiting threads in %.3f s = %.0f inserts/s, "
                  "%llu commits (%.1f inserts per commit)\n",
                  NTHREADS * PER_ACKED, NTHREADS, secs, NTHREADS * PER_ACKED / secs, (unsigned long long)commits,
                  (double)(NTHREADS * PER_ACKED) / (double)commits);
    assert_true(commits >= 1 && commits <= NTHREADS * PER_ACKED);
    struct presence pr = {calloc(NTHREADS * PER_THREAD, 1), 0, 0, 0, ""};
    assert_non_null(pr.seen);
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, "queued", NULL, NULL, 1000, on_present, &pr, NULL), GR_OK);
    int more = pr.n;
    while (more == 1000) {
        int n0 = pr.n;
        assert_int_equal(gr_store_list_jobs(fx->s, NULL, "queued", NULL, pr.last, 1000, on_present, &pr, NULL), GR_OK);
        more = pr.n - n0;
    }
    assert_int_equal(pr.bad, 0);
    assert_int_equal(pr.distinct, NTHREADS * PER_ACKED);
    free(pr.seen);
}

/* With the write lock held elsewhere the writer is stuck on its first batch, so all 100
 * writes queued meanwhile must go in at most two commits. */
static void test_group_commit(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    struct rec r[100] = {{0}};
    struct raw db = raw_open(fx);
    raw_hold_writer(db);
    uint64_t v0 = gr_store_version(fx->s);
    for (int n = 0; n < 100; n++)
        insert(fx, (unsigned long long)n, GR_PROD, "queued", NULL, 0, &r[n]);
    raw_exec(db, "COMMIT");
    wait_done(100);
    uint64_t commits = gr_store_version(fx->s) - v0;
    print_message("group commit: 100 writes in %llu commits\n", (unsigned long long)commits);
    assert_true(commits >= 1 && commits <= 2);
    for (int n = 0; n < 100; n++)
        assert_int_equal(r[n].code, GR_OK);
    raw_close(db);
}

struct closer {
    struct gr_store *s;
};

static void *close_store(void *arg)
{
    gr_store_close(((struct closer *)arg)->s);
    return NULL;
}

/* close drains: writes queued before close all commit and run their callbacks. The writer
 * is held on the lock, so the store outlives the probing insert that close refuses. */
static void test_close_drains(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    enum { N = 500, MAXPROBE = 5000 };
    struct rec *r = calloc(N + MAXPROBE, sizeof *r);
    assert_non_null(r);
    struct raw db = raw_open(fx);
    raw_hold_writer(db);
    for (int n = 0; n < N; n++)
        insert(fx, (unsigned long long)n, GR_MEAN, "queued", NULL, 0, &r[n]);
    struct closer c = {fx->s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, close_store, &c), 0);
    int probes = 0, rc;
    do {
        assert_true(probes < MAXPROBE);
        char id[24];
        make_id(id, (unsigned long long)(N + probes));
        rc = gr_store_insert_job(fx->s, id, GR_MEAN, "queued", make_doc((unsigned long long)(N + probes), "queued"),
                                 NULL, 0, NULL, on_done, &r[N + probes]);
        probes++;
        if (rc == GR_OK)
            usleep(1000);
    } while (rc == GR_OK);
    assert_int_equal(rc, GR_EIO);
    raw_exec(db, "COMMIT");
    pthread_join(t, NULL);
    fx->s = NULL;
    int accepted = N + probes - 1;
    assert_int_equal(ndone, accepted);
    for (int n = 0; n < accepted; n++) {
        assert_int_equal(r[n].calls, 1);
        assert_int_equal(r[n].code, GR_OK);
    }
    assert_int_equal(r[accepted].calls, 0); /* refused: no callback */
    free(r);
    char v[32];
    raw_text(db, "SELECT count(*) FROM jobs", v, sizeof v);
    assert_int_equal(atoi(v), accepted);
    raw_close(db);
}

struct ds_page {
    int n;
    char ids[8][24], docs[8][64];
};

static void on_ds_row(void *ctx, const char *id, const char *doc)
{
    struct ds_page *p = ctx;
    if (p->n < 8) {
        snprintf(p->ids[p->n], 24, "%s", id);
        snprintf(p->docs[p->n], 64, "%s", doc);
    }
    p->n++;
}

/* Datasets: insert, get, pages newest first, delete (once), apart from jobs; their folder is
 * made at open and emptied of interrupted uploads (.tmp) then. */
static void test_datasets(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    assert_string_equal(gr_store_data_dir(fx->s), fx->data);
    struct rec r[5] = {{0}};
    char id[3][24];
    for (int n = 0; n < 3; n++) {
        snprintf(id[n], 24, "d_%016x", 100 + n);
        assert_int_equal(gr_store_intend(fx->s, id[n], NULL), GR_OK); /* as an upload does: a row takes its place */
        assert_int_equal(gr_store_insert_dataset(fx->s, id[n], NULL, 0, make_doc((unsigned long long)n, "ds"), on_done, &r[n]),
                         GR_OK);
    }
    wait_done(3);
    for (int n = 0; n < 3; n++) {
        char *doc = NULL, want[64];
        struct gr_err e = {0};
        assert_int_equal(r[n].code, GR_OK);
        assert_int_equal(gr_store_get_dataset(fx->s, id[n], NULL, &doc, &e), GR_OK);
        doc_text(want, sizeof want, (unsigned long long)n, "ds");
        assert_string_equal(doc, want);
        free(doc);
    }
    char *doc = NULL;
    struct gr_err e = {0};
    assert_int_equal(gr_store_get_dataset(fx->s, "d_ffffffffffffffff", NULL, &doc, &e), GR_ENOTFOUND);
    assert_null(doc);

    struct ds_page p = {0}, q = {0};
    assert_int_equal(gr_store_list_datasets(fx->s, NULL, NULL, 2, on_ds_row, &p, &e), GR_OK);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.ids[0], id[2]);
    assert_string_equal(p.ids[1], id[1]);
    assert_int_equal(gr_store_list_datasets(fx->s, NULL, p.ids[1], 2, on_ds_row, &q, &e), GR_OK);
    assert_int_equal(q.n, 1);
    assert_string_equal(q.ids[0], id[0]);
    assert_int_equal(gr_store_list_datasets(fx->s, NULL, NULL, 0, on_ds_row, &q, &e), GR_EINVAL);
    struct page jobs = {0};
    assert_int_equal(gr_store_list_jobs(fx->s, NULL, NULL, NULL, NULL, 10, on_row, &jobs, &e), GR_OK);
    assert_int_equal(jobs.n, 0);

    assert_int_equal(gr_store_delete_dataset(fx->s, id[1], on_done, &r[3]), GR_OK);
    assert_int_equal(gr_store_delete_dataset(fx->s, id[1], on_done, &r[4]), GR_OK);
    wait_done(5);
    assert_int_equal(r[3].code, GR_OK);
    assert_int_equal(r[4].code, GR_ENOTFOUND);
    assert_int_equal(gr_store_get_dataset(fx->s, id[1], NULL, &doc, &e), GR_ENOTFOUND);
    memset(&p, 0, sizeof p);
    assert_int_equal(gr_store_list_datasets(fx->s, NULL, NULL, 10, on_ds_row, &p, &e), GR_OK);
    assert_int_equal(p.n, 2);

    /* a use fills in last_used_at, and an earlier one told later does not move it back */
    char *used = strdup("{\"id\":\"d_00000000000000aa\",\"last_used_at\":null}");
    struct rec u[2] = {{0}};
    assert_int_equal(gr_store_intend(fx->s, "d_00000000000000aa", NULL), GR_OK);
    assert_int_equal(gr_store_insert_dataset(fx->s, "d_00000000000000aa", NULL, 0, used, on_done, &u[0]), GR_OK);
    assert_int_equal(gr_store_dataset_used(fx->s, "d_00000000000000aa", 1700000000.5, NULL), GR_OK);
    assert_int_equal(gr_store_dataset_used(fx->s, "d_00000000000000aa", 1600000000.0, NULL), GR_OK);
    assert_int_equal(gr_store_dataset_used(fx->s, "d_ffffffffffffffff", 1700000000.0, NULL), GR_OK); /* gone: no error */
    assert_int_equal(gr_store_delete_dataset(fx->s, "d_ffffffffffffffff", on_done, &u[1]), GR_OK); /* after them */
    wait_done(7);
    assert_int_equal(gr_store_get_dataset(fx->s, "d_00000000000000aa", NULL, &doc, &e), GR_OK);
    assert_string_equal(doc, "{\"id\":\"d_00000000000000aa\",\"last_used_at\":\"2023-11-14T22:13:20.500Z\"}");
    free(doc);
    doc = NULL;
    assert_int_equal(gr_store_delete_dataset(fx->s, "d_00000000000000aa", on_done, &u[1]), GR_OK);
    wait_done(8);

    /* what a crash leaves, gone after the next open: an upload that never finished (.tmp), values
     * whose row was never stored or already deleted (.bin without a row), however young; a row's
     * .bin stays (test_files_under_way: a live replica's files under way stay too) */
    char tmp[200], orphan[200], kept[200];
    snprintf(tmp, sizeof tmp, "%s/datasets/d_0000000000000001.tmp", fx->data);
    snprintf(orphan, sizeof orphan, "%s/datasets/%s.bin", fx->data, id[1]);
    snprintf(kept, sizeof kept, "%s/datasets/%s.bin", fx->data, id[2]);
    for (const char *const *name = (const char *const[]){tmp, orphan, kept, NULL}; *name; name++) {
        FILE *f = fopen(*name, "w");
        assert_non_null(f);
        fclose(f);
    }
    gr_store_close(fx->s);
    fx->s = NULL;
    open_store(fx);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(access(orphan, F_OK), -1);
    assert_int_equal(access(kept, F_OK), 0);
    assert_int_equal(unlink(kept), 0);
    assert_int_equal(gr_store_get_dataset(fx->s, id[2], NULL, &doc, &e), GR_OK);
    free(doc);
}

static void touch(const char *dir, const char *name, char path[200])
{
    snprintf(path, 200, "%s/datasets/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* A shared folder's cleanup (PostgreSQL): a file a live replica named as under way stays, however
 * old; one named by a replica whose lease ran out, or by none, goes at once, its intent with it;
 * a row whose intent went is refused (the file may be gone), and a row takes a live intent's place. */
static void test_files_under_way(void **state)
{
    struct fixture *fx = *state;
    open_store(fx);
    if (!fx->pg[0])
        return; /* one gpured alone on its folder: test_datasets */
    struct gr_err e = {0};
    long long n;
    gr_store_join(fx->s, "replica-live", 60);
    assert_int_equal(gr_store_slot(fx->s, 32, &n, &e), GR_OK);
    char live[200], gone[200], none[200], rowed[200];
    assert_int_equal(gr_store_intend(fx->s, "d_00000000000000a1", &e), GR_OK);
    touch(fx->data, "d_00000000000000a1.tmp", live);
    struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    assert_int_equal(utimensat(AT_FDCWD, live, old, 0), 0);
    struct raw db = raw_open(fx);
    raw_exec(db, "INSERT INTO replicas(id, doc, lease) VALUES ('replica-gone', '', 1);"
                 "INSERT INTO dataset_intents(id, owner) VALUES ('d_00000000000000a2', 'replica-gone'),"
                 " ('d_00000000000000a5', 'replica-gone')");
    touch(fx->data, "d_00000000000000a2.bin", gone);
    touch(fx->data, "d_00000000000000a3.tmp", none);
    assert_int_equal(gr_store_intend(fx->s, "d_00000000000000a4", &e), GR_OK);
    touch(fx->data, "d_00000000000000a4.bin", rowed);
    struct rec r[2] = {{0}};
    assert_int_equal(gr_store_insert_dataset(fx->s, "d_00000000000000a4", NULL, 0, make_doc(4, "ds"), on_done, &r[0]),
                     GR_OK);
    wait_done(1);
    assert_int_equal(r[0].code, GR_OK);
    assert_int_equal(gr_store_clean_files(fx->s, &e), GR_OK);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(gone, F_OK), -1);
    assert_int_equal(access(none, F_OK), -1);
    assert_int_equal(access(rowed, F_OK), 0);
    char left[64] = "";
    raw_text(db, "SELECT string_agg(id, ' ' ORDER BY id) FROM dataset_intents", left, sizeof left);
    assert_string_equal(left, "d_00000000000000a1"); /* a4's row took its place; the gone replica's went */
    /* the gone replica, back after its lease: its row is refused */
    assert_int_equal(gr_store_insert_dataset(fx->s, "d_00000000000000a2", NULL, 0, make_doc(2, "ds"), on_done, &r[1]),
                     GR_OK);
    wait_done(2);
    assert_int_equal(r[1].code, GR_ENOTFOUND);
    char *doc = NULL;
    assert_int_equal(gr_store_get_dataset(fx->s, "d_00000000000000a2", NULL, &doc, &e), GR_ENOTFOUND);
    /* an upload given up drops its intent: its leftover goes at the next cleanup */
    gr_store_unintend(fx->s, "d_00000000000000a1");
    assert_int_equal(gr_store_clean_files(fx->s, &e), GR_OK);
    assert_int_equal(access(live, F_OK), -1);
    assert_int_equal(unlink(rowed), 0);
    raw_close(db);
}

/* PostgreSQL: numbering the events just committed reads them alone, not every event kept (up to
 * a million): no scan of the events table, whatever its size, however the plans are made. */
static void test_events_numbered_without_scans(void **state)
{
    struct fixture *fx = *state;
    if (!fx->pg[0])
        skip(); /* SQLite's writer numbers each event as it writes it */
    open_store(fx);
    struct raw db = raw_open(fx);
#define EVENTS_INSERT(n)                                                                                      \
    "INSERT INTO events(kind, id, status, tenant, at) SELECT 'job', 'j_' || g, 'queued', 't' || g % 3,"          \
    " extract(epoch FROM clock_timestamp()) FROM generate_series(1, " #n ") g"
    char before[32], after[32], left[32], none[8];
    raw_exec(db, EVENTS_INSERT(20000));
    /* no statistics (no ANALYZE), as between autovacuum's under load: a range read is then planned
     * as a scan */
    raw_text(db, "SELECT gpured_events_number(); SELECT gpured_events_number()", none, sizeof none);
    const char *scans = "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'events'";
    raw_text(db, "SELECT pg_stat_force_next_flush()", none, sizeof none); /* this session's counts so far */
    raw_text(db, scans, before, sizeof before);
    for (int k = 0; k < 8; k++) { /* and generic plans, which plpgsql may take after a statement's fifth run */
        raw_exec(db, EVENTS_INSERT(10));
        raw_text(db, "SELECT gpured_events_number()", none, sizeof none);
    }
    raw_text(db, "SELECT pg_stat_force_next_flush()", none, sizeof none);
    raw_text(db, scans, after, sizeof after);
    raw_text(db, "SELECT count(*) FROM events WHERE seq IS NULL", left, sizeof left);
    assert_string_equal(left, "0");
    assert_string_equal(after, before);
    char last[32];
    raw_text(db, "SELECT string_agg(last::text, ' ' ORDER BY tenant) FROM event_tenants", last, sizeof last);
    assert_string_equal(last, "6690 6699 6691"); /* 20080 events: 6690 of t0, 6699 of t1, 6691 of t2 */
    raw_close(db);
}

/* Every read (and the update, the events' inserts) is served by an index: no plan line scans a table. */
static void test_query_plans(void **state)
{
    struct fixture *fx = *state;
    if (fx->pg[0])
        skip(); /* SQLite's planner; PostgreSQL's plans depend on its statistics */
    open_store(fx);
    struct raw db = raw_open(fx);
    const int ids[] = {GR_SQL_LIST_ALL, GR_SQL_GET, GR_SQL_TENANTS, GR_SQL_OPS,
                       GR_SQL_PENDING,  GR_SQL_UPDATE,      GR_SQL_DS_LIST, GR_SQL_DS_GET,         GR_SQL_DS_DELETE,
                       GR_SQL_LIST_TENANT | GR_SQL_LIST_STATUS, GR_SQL_LIST_TENANT | GR_SQL_LIST_OP,
                       GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS, GR_SQL_DS_LIST_TENANT, GR_SQL_KEY_GET,
                       GR_SQL_EXPIRED, GR_SQL_JOB_DELETE, GR_SQL_KEYS_EXPIRE,
                       GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_STATUS,
                       GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS,
                       GR_SQL_EVENTS, GR_SQL_EVENTS_LAST, GR_SQL_EVENT_JOB, GR_SQL_EVENT_DS, GR_SQL_EVENTS_OWN,
                       GR_SQL_EVENTS_PRUNE_KEEP};
    for (size_t q = 0; q < sizeof ids / sizeof ids[0]; q++) {
        char sql[8192];
        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", gr_sql[ids[q]]);
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(db.sq, sql, -1, &st, NULL), SQLITE_OK);
        int indexed = 0, scans = 0, sorts = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *d = (const char *)sqlite3_column_text(st, 3);
            print_message("plan %d: %s\n", ids[q], d);
            indexed += strstr(d, "USING INDEX") || strstr(d, "USING COVERING INDEX") || strstr(d, "USING PRIMARY KEY") ||
                       strstr(d, "USING INTEGER PRIMARY KEY");
            /* t, o: the skips' own rows (schema.h); a VIRTUAL TABLE: json_each over one event row's ids;
             * a CONSTANT ROW: a SELECT of subqueries alone */
            scans += strncmp(d, "SCAN", 4) == 0 && !strstr(d, "USING") && strcmp(d, "SCAN t") != 0 &&
                     strcmp(d, "SCAN o") != 0 && !strstr(d, "VIRTUAL TABLE") && strcmp(d, "SCAN CONSTANT ROW") != 0;
            sorts += strstr(d, "TEMP B-TREE") != NULL;
        }
        sqlite3_finalize(st);
        assert_true(indexed > 0);
        assert_int_equal(scans, 0);
        if (ids[q] == GR_SQL_EVENTS) /* a page of events is read in seq order, not sorted */
            assert_int_equal(sorts, 0);
    }
    raw_close(db);
}

int main(void)
{
    umask(022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_after_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_insert_fails_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_all_or_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writers_keep_each_ids_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_residues_of_live_replicas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_isolated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_paging_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_keys_upgraded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inputs_kept_until_the_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leases_and_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_by_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_inserts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_acked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_drains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_plans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_datasets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_under_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_numbered_without_scans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_after_told, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
