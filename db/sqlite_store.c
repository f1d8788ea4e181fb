/* sqlite_store.c: the SQLite backend (one file, WAL) of the store interface (store_backend.h).
 * The store's writer thread owns the write connection; each reading thread owns its read
 * connection (a thread-specific); WAL checkpoints run on a thread and connection of their own. */
#include "db/store_backend.h"

#include "common/id.h"
#include "db/readers.h"
#include "db/schema.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BUSY_MS 5000
#define NWRITE (GR_SQL_N - GR_SQL_NREAD)
#define CHECKPOINT_PAGES 4096 /* WAL size (pages) that asks for a checkpoint */

/* Sorts after every text id (U+10FFFF), so one list statement serves the first page too (of
 * datasets; jobs: bind_key). */
static const char no_cursor[] = "\xf4\x8f\xbf\xbf";

/* A reading thread's connection, with its statements prepared. */
struct reader {
    sqlite3 *db;
    sqlite3_stmt *st[GR_SQL_NREAD];
};

/* The writer's job events of the open transaction not yet stored: a run of like ones (one
 * status, one tenant) becomes one events row (sqlite_schema.c says why). Ids are gpured's own
 * (common/id.c: letters, digits and '_'), so the JSON array needs no escapes. */
struct event_run {
    char status[16], tenant[65];
    int n;            /* ids gathered */
    size_t first_len; /* the first id's length: it starts at ids + 2 */
    char *ids;        /* "[\"id\",\"id\"" so far, not terminated */
    size_t len, cap;
};

struct sq {
    char *path;
    struct event_run run; /* the writer's */
    sqlite3 *wdb; /* the writer thread's */
    sqlite3_stmt *w[NWRITE];
    struct gr_readers readers; /* each reading thread's struct reader */
    /* WAL checkpoints run on their own thread and connection, so that the writer's commits
     * never wait for the checkpoint's copy and fsync (SQLite's automatic one is off). */
    sqlite3 *cdb;
    pthread_t checkpointer;
    int have_checkpointer, checkpoint_wanted, closing;
    pthread_mutex_t mu; /* checkpoint_wanted, closing */
    pthread_cond_t ckpt_cv;
    struct stat file; /* gpured.db as opened: a file removed or replaced since is noticed */
};

static int db_fail(struct gr_err *e, sqlite3 *db, const char *what)
{
    return gr_fail(e, GR_EIO, NULL, "store: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

static int exec(sqlite3 *db, const char *sql, struct gr_err *e)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? GR_OK : db_fail(e, db, sql);
}

/* Run a statement that answers one row and copy its first column as text into buf. */
static int query1(sqlite3 *db, const char *sql, char *buf, size_t n, struct gr_err *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(e, db, sql);
    int code = GR_OK;
    const unsigned char *t = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    if (t)
        snprintf(buf, n, "%s", (const char *)t);
    else
        code = db_fail(e, db, sql);
    sqlite3_finalize(st);
    return code;
}

static int prepare_all(sqlite3 *db, int from, int to, sqlite3_stmt **st, struct gr_err *e)
{
    for (int i = from; i < to; i++)
        if (gr_sql[i] && sqlite3_prepare_v3(db, gr_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i - from], NULL) !=
            SQLITE_OK)
            return db_fail(e, db, gr_sql[i]);
    return GR_OK;
}

static void finalize_all(sqlite3_stmt **st, int n)
{
    for (int i = 0; i < n; i++)
        sqlite3_finalize(st[i]);
}

/* Each migration step commits on its own; the version is read inside the write
 * transaction so two processes opening at once cannot both apply a step. */
static int migrate(sqlite3 *db, struct gr_err *e)
{
    for (;;) {
        char v[32], set[48];
        if (exec(db, "BEGIN IMMEDIATE", e) != GR_OK)
            return GR_EIO;
        if (query1(db, "PRAGMA user_version", v, sizeof v, e) != GR_OK)
            break;
        long ver = strtol(v, NULL, 10);
        if (ver < 0 || ver > gr_schema_nsteps) {
            gr_fail(e, GR_EIO, NULL,
                    "store: database schema version %ld is newer than this gpured knows (%d); "
                    "run a newer gpured or use another data directory",
                    ver, gr_schema_nsteps);
            break;
        }
        if (ver == gr_schema_nsteps)
            return exec(db, "COMMIT", e);
        snprintf(set, sizeof set, "PRAGMA user_version = %ld", ver + 1);
        if (exec(db, gr_schema_steps[ver], e) != GR_OK || exec(db, set, e) != GR_OK ||
            exec(db, "COMMIT", e) != GR_OK)
            break;
    }
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return GR_EIO;
}

/* After each commit, on the writer thread: ask for a checkpoint once the WAL has grown. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct sq *s = arg;
    if (pages >= CHECKPOINT_PAGES) {
        pthread_mutex_lock(&s->mu);
        s->checkpoint_wanted = 1;
        pthread_cond_signal(&s->ckpt_cv);
        pthread_mutex_unlock(&s->mu);
    }
    return SQLITE_OK;
}

static void *checkpointer_main(void *arg)
{
    struct sq *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->checkpoint_wanted && !s->closing)
            pthread_cond_wait(&s->ckpt_cv, &s->mu);
        if (!s->checkpoint_wanted)
            break;
        s->checkpoint_wanted = 0;
        pthread_mutex_unlock(&s->mu);
        /* PASSIVE: copies what no reader still needs, never blocks the writer */
        sqlite3_wal_checkpoint_v2(s->cdb, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void close_reader(void *conn)
{
    struct reader *r = conn;
    finalize_all(r->st, GR_SQL_NREAD);
    sqlite3_close(r->db);
    free(r);
}

/* This thread's read connection, opened on first use. NULL with e filled on failure. */
static struct reader *reader(struct sq *s, struct gr_err *e)
{
    struct reader *r = gr_readers_mine(&s->readers);
    if (r)
        return r;
    if (!(r = calloc(1, sizeof *r))) {
        gr_fail(e, GR_EIO, NULL, "store: out of memory");
        return NULL;
    }
    if (sqlite3_open_v2(s->path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(r->db, BUSY_MS) != SQLITE_OK) {
        db_fail(e, r->db, s->path);
        close_reader(r);
        return NULL;
    }
    if (prepare_all(r->db, 0, GR_SQL_NREAD, r->st, e) != GR_OK) {
        close_reader(r);
        return NULL;
    }
    return gr_readers_add(&s->readers, r, e) == GR_OK ? r : NULL;
}

/* Step a statement that returns no rows and reset it: SQLITE_OK or the error. */
static int step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}

/* A job id as its key (the jobs table's rowid: sqlite_schema.c says why); NULL (no cursor) as
 * the largest, so one list statement serves the first page too. Any other text binds as itself,
 * which no key equals and every key sorts below (SQLite orders numbers before text): so does an
 * id past the largest key (16 hex digits from 8), which gr_id_new never makes but a client may
 * send as a cursor or a name. */
static int bind_key(sqlite3_stmt *st, int i, const char *id)
{
    if (!id)
        return sqlite3_bind_int64(st, i, INT64_MAX);
    unsigned long long key = gr_id_valid(id, 'j') ? strtoull(id + 2, NULL, 16) : ULLONG_MAX;
    return key <= INT64_MAX ? sqlite3_bind_int64(st, i, (sqlite3_int64)key) : bind_text(st, i, id);
}

/* Column col of st's row, a job's key, as its id's text in buf. */
static const char *column_id(sqlite3_stmt *st, int col, char buf[GR_ID_LEN + 1])
{
    gr_id_text('j', (uint64_t)sqlite3_column_int64(st, col), buf);
    return buf;
}

/* The statements whose ?1 is a job's key. */
static int keyed(int sql)
{
    return sql <= GR_SQL_GET || sql == GR_SQL_EXPIRED || sql == GR_SQL_INSERT ||
           sql == GR_SQL_UPDATE || sql == GR_SQL_JOB_DELETE;
}

/* Bind the parameters st (statement sql) names (schema.h's numbering) from o. */
static int bind_op(sqlite3_stmt *st, int sql, const struct gr_store_op *o)
{
    int rc = SQLITE_OK, n = sqlite3_bind_parameter_count(st);
    for (int i = 1; rc == SQLITE_OK && i <= n; i++) {
        if (!sqlite3_bind_parameter_name(st, i)) /* a number the statement skips */
            continue;
        switch (i) {
        case 1: rc = keyed(sql) ? bind_key(st, i, o->id) : bind_text(st, i, o->id); break;
        case 2: rc = bind_text(st, i, o->status); break;
        case 3: rc = bind_text(st, i, o->doc); break;
        case 4: rc = bind_text(st, i, o->opname); break;
        case 5: rc = sqlite3_bind_double(st, i, o->created); break;
        case 6: rc = bind_text(st, i, o->tenant); break;
        case 7: rc = sqlite3_bind_int64(st, i, o->bytes); break;
        case 8: rc = bind_text(st, i, o->key); break;
        case 14:
            rc = gr_inline_input(o) ? sqlite3_bind_blob64(st, i, o->input, o->input_bytes, SQLITE_STATIC)
                                 : sqlite3_bind_null(st, i);
            break;
        default: rc = bind_text(st, i, o->fingerprint); break;
        }
    }
    return rc;
}

/* After an events row of n seqs was inserted: each time the seqs pass a 1,000th, the events
 * past the newest 1,000,000 go. SQLITE_OK, or the failure. */
static int prune_events(struct sq *s, int n)
{
    sqlite3_int64 seq = sqlite3_last_insert_rowid(s->wdb);
    if (sqlite3_changes(s->wdb) == 0 || (seq + n - 1) / 1000 == (seq - 1) / 1000)
        return SQLITE_OK;
    int rc = step_done(s->w[GR_SQL_EVENTS_PRUNE_KEEP - GR_SQL_NREAD]);
    return rc == SQLITE_OK ? step_done(s->w[GR_SQL_EVENTS_PRUNE - GR_SQL_NREAD]) : rc;
}

static void run_clear(struct event_run *r) { r->n = 0, r->len = 0; }

static int run_append(struct event_run *r, const char *text, size_t n)
{
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        char *p = realloc(r->ids, cap);
        if (!p)
            return SQLITE_NOMEM;
        r->ids = p, r->cap = cap;
    }
    memcpy(r->ids + r->len, text, n);
    r->len += n;
    return SQLITE_OK;
}

/* Store the gathered job events as one row, in the open transaction. SQLITE_OK, or the failure. */
static int flush_events(struct sq *s)
{
    struct event_run *r = &s->run;
    if (!r->n)
        return SQLITE_OK;
    sqlite3_stmt *ev = s->w[GR_SQL_EVENT_JOB - GR_SQL_NREAD];
    int n = r->n, rc = run_append(r, "]", 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(ev, 1, r->ids + 2, (int)r->first_len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = bind_text(ev, 2, r->status);
    if (rc == SQLITE_OK)
        rc = bind_text(ev, 6, r->tenant);
    if (rc == SQLITE_OK)
        rc = n > 1 ? sqlite3_bind_text(ev, 15, r->ids, (int)r->len, SQLITE_STATIC) : sqlite3_bind_null(ev, 15);
    if (rc == SQLITE_OK)
        rc = step_done(ev);
    run_clear(r);
    return rc == SQLITE_OK ? prune_events(s, n) : rc;
}

/* A job's status as stored now, as an event (GET /v1/events) of o's transaction: gathered into
 * the run, which is stored when the next event is unlike it, is full, or the transaction commits. */
static int gather_event(struct sq *s, const struct gr_store_op *o)
{
    struct event_run *r = &s->run;
    int rc = SQLITE_OK;
    if (r->n && (r->n == GR_SQ_EVENT_RUN || strcmp(r->status, o->status) || strcmp(r->tenant, o->tenant)))
        rc = flush_events(s);
    if (rc == SQLITE_OK && !r->n) {
        snprintf(r->status, sizeof r->status, "%s", o->status);
        snprintf(r->tenant, sizeof r->tenant, "%s", o->tenant);
        r->first_len = strlen(o->id);
    }
    if (rc == SQLITE_OK)
        rc = run_append(r, r->n ? ",\"" : "[\"", 2);
    if (rc == SQLITE_OK)
        rc = run_append(r, o->id, strlen(o->id));
    if (rc == SQLITE_OK)
        rc = run_append(r, "\"", 1);
    r->n += rc == SQLITE_OK;
    return rc;
}

/* A dataset created, or one about to be deleted, as an event after the job events before it.
 * SQLITE_OK, or the failure. */
static int add_ds_event(struct sq *s, const struct gr_store_op *o)
{
    sqlite3_stmt *ev = s->w[GR_SQL_EVENT_DS - GR_SQL_NREAD];
    int rc = flush_events(s);
    if (rc == SQLITE_OK)
        rc = bind_text(ev, 1, o->id);
    if (rc == SQLITE_OK)
        rc = bind_text(ev, 2, o->sql == GR_SQL_DS_DELETE ? "deleted" : "created");
    if (rc == SQLITE_OK)
        rc = step_done(ev);
    return rc == SQLITE_OK ? prune_events(s, 1) : rc;
}

static int drop_input(struct sq *s, const struct gr_store_op *o)
{
    sqlite3_stmt *st = s->w[GR_SQL_INPUT_DONE - GR_SQL_NREAD];
    int rc = bind_key(st, 1, o->id);
    return rc == SQLITE_OK ? step_done(st) : rc;
}

/* Run one op inside the open transaction and set o->code. Returns 0, or -1 when the error
 * may have ended the transaction or left half an op in it (retry the batch op by op). */
static int apply_one(void *impl, struct gr_store_op *o)
{
    struct sq *s = impl;
    sqlite3_stmt *st = s->w[o->sql - GR_SQL_NREAD];
    sqlite3_stmt *in = s->w[GR_SQL_INPUT - GR_SQL_NREAD];
    sqlite3_stmt *key = s->w[GR_SQL_KEY_INSERT - GR_SQL_NREAD];
    int with_input = o->sql == GR_SQL_INSERT && o->input && !gr_inline_input(o);
    int with_key = (o->sql == GR_SQL_INSERT || o->sql == GR_SQL_DS_INSERT) && o->key;
    /* Everything is bound before anything runs, so a too-big input fails only its op. */
    int rc = bind_op(st, o->sql, o);
    if (rc == SQLITE_OK && with_key)
        rc = bind_op(key, GR_SQL_KEY_INSERT, o);
    if (rc == SQLITE_OK && with_input)
        rc = bind_key(in, 1, o->id);
    if (rc == SQLITE_OK && with_input)
        rc = sqlite3_bind_blob64(in, 2, o->input, o->input_bytes, SQLITE_STATIC);
    int job = o->sql == GR_SQL_INSERT || o->sql == GR_SQL_UPDATE;
    /* an input is only needed to run its job again after a crash: it goes with the job's end */
    int input_done = o->sql == GR_SQL_UPDATE && (!strcmp(o->status, "succeeded") || !strcmp(o->status, "failed") ||
                                                 !strcmp(o->status, "canceled"));
    o->code = GR_EIO;
    if (rc != SQLITE_OK)
        return 0;
    if (o->sql == GR_SQL_DS_DELETE && add_ds_event(s, o) != SQLITE_OK) /* while its row is there to read */
        return -1;
    rc = step_done(st);
    int changes_row = o->sql == GR_SQL_UPDATE || o->sql == GR_SQL_DS_DELETE || o->sql == GR_SQL_JOB_DELETE;
    if (rc == SQLITE_OK && changes_row && sqlite3_changes(s->wdb) == 0) {
        o->code = GR_ENOTFOUND;
        return 0;
    }
    if (rc == SQLITE_OK && ((with_input && step_done(in) != SQLITE_OK) || (with_key && step_done(key) != SQLITE_OK) ||
                            (job && gather_event(s, o) != SQLITE_OK) ||
                            ((o->sql == GR_SQL_DS_INSERT || o->sql == GR_SQL_DS_INSERT_KEPT) &&
                             add_ds_event(s, o) != SQLITE_OK) ||
                            (input_done && drop_input(s, o) != SQLITE_OK)))
        return -1;
    if (rc == SQLITE_OK) {
        o->code = GR_OK;
        return 0;
    }
    /* A constraint (duplicate id) aborts only its statement. */
    return (rc & 0xff) == SQLITE_CONSTRAINT && !sqlite3_get_autocommit(s->wdb) ? 0 : -1;
}

/* Statements are function calls here: one after another. */
static int sq_apply(void *impl, struct gr_store_op *o, int n)
{
    for (int i = 0; i < n; i++, o = o->next)
        if (apply_one(impl, o) != 0)
            return -1;
    return 0;
}

static void sq_rollback(void *impl)
{
    struct sq *s = impl;
    run_clear(&s->run);
    if (!sqlite3_get_autocommit(s->wdb))
        step_done(s->w[GR_SQL_ROLLBACK - GR_SQL_NREAD]);
}

static int sq_begin(void *impl)
{
    struct sq *s = impl;
    run_clear(&s->run);
    return step_done(s->w[GR_SQL_BEGIN - GR_SQL_NREAD]) == SQLITE_OK;
}

static int sq_commit(void *impl)
{
    struct sq *s = impl;
    return flush_events(s) == SQLITE_OK && step_done(s->w[GR_SQL_COMMIT - GR_SQL_NREAD]) == SQLITE_OK;
}

/* A full disk is the client's 507, the rest the store's. */
static int sq_failed(void *impl)
{
    return (sqlite3_extended_errcode(((struct sq *)impl)->wdb) & 0xff) == SQLITE_FULL ? GR_ENOMEM : GR_EIO;
}

static const char *sq_message(void *impl) { return sqlite3_errmsg(((struct sq *)impl)->wdb); }

/* GR_OK while gpured.db is still the file the store opened. Removed (or replaced), SQLite would
 * go on writing to an inode no path names: commits would "succeed" and vanish at the next start. */
static int sq_usable(void *impl, struct gr_err *e)
{
    const struct sq *s = impl;
    struct stat now;
    if (stat(s->path, &now) != 0 || now.st_ino != s->file.st_ino || now.st_dev != s->file.st_dev)
        return gr_fail(e, GR_EIO, NULL, "store: %s was removed or replaced under the running server; restart gpured "
                                        "once it is back",
                       s->path);
    return GR_OK;
}

/* One row by id: its doc (column 0, malloc'd into *doc) and, when status is not NULL, its
 * status (column 1). GR_OK, GR_ENOTFOUND or GR_EIO. */
static int sq_get(void *impl, int sql, const char *id, const char *scope, char **doc, char status[16],
                  struct gr_err *e)
{
    struct sq *s = impl;
    const char *what = sql == GR_SQL_GET ? "job" : "dataset";
    *doc = NULL;
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[sql];
    int rc = keyed(sql) ? bind_key(st, 1, id) : bind_text(st, 1, id);
    if (rc == SQLITE_OK)
        rc = bind_text(st, 2, scope); /* NULL binds NULL: any tenant */
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int code;
    const char *doc_text = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    const char *st_text = rc == SQLITE_ROW && status ? (const char *)sqlite3_column_text(st, 1) : "";
    if (rc == SQLITE_DONE) {
        code = gr_fail(e, GR_ENOTFOUND, NULL, "no %s %s", what, id ? id : "");
    } else if (!st_text || !doc_text) {
        code = db_fail(e, r->db, what);
    } else {
        size_t n = (size_t)sqlite3_column_bytes(st, 0);
        if ((*doc = malloc(n + 1))) {
            memcpy(*doc, doc_text, n + 1);
            if (status)
                snprintf(status, 16, "%s", st_text);
            code = GR_OK;
        } else {
            code = gr_fail(e, GR_EIO, NULL, "store: out of memory");
        }
    }
    sqlite3_reset(st);
    return code;
}

static int sq_get_key(void *impl, const char *tenant, const char *key, double since, char fingerprint[65],
                      char resource[24], struct gr_err *e)
{
    struct sq *s = impl;
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_KEY_GET];
    int rc = bind_text(st, 1, tenant);
    if (rc == SQLITE_OK)
        rc = bind_text(st, 2, key);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, 3, since);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    const char *f = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    const char *id = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 1) : NULL;
    int code = rc == SQLITE_DONE ? GR_ENOTFOUND : f && id ? GR_OK : db_fail(e, r->db, "reading a key");
    if (code == GR_OK) {
        snprintf(fingerprint, 65, "%s", f);
        snprintf(resource, 24, "%s", id);
    }
    sqlite3_reset(st);
    return code;
}

/* This thread's statement sql for a list page into *st, with ?1 before and ?2 limit bound.
 * GR_OK, GR_EINVAL (limit) or GR_EIO. */
static int list_statement(struct sq *s, int sql, const char *before, int limit, const char *tenant,
                          sqlite3_stmt **st, struct gr_err *e)
{
    if (limit < 1 || limit > GR_STORE_LIST_MAX)
        return gr_fail(e, GR_EINVAL, "limit", "limit must be 1 to %d, not %d", GR_STORE_LIST_MAX, limit);
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    *st = r->st[sql];
    int named = sqlite3_bind_parameter_count(*st); /* GR_SQL_TENANTS names no cursor or limit */
    if ((named >= 1 && (keyed(sql) ? bind_key(*st, 1, before) : bind_text(*st, 1, before ? before : no_cursor)) != SQLITE_OK) ||
        (named >= 2 && sqlite3_bind_int(*st, 2, limit) != SQLITE_OK) || (tenant && bind_text(*st, 5, tenant) != SQLITE_OK)) {
        sqlite3_reset(*st);
        return db_fail(e, r->db, "listing");
    }
    return GR_OK;
}

/* Step a bound list statement, row(ctx, id, doc) for each of its rows (id: a job's key when
 * job_keys), and reset it. */
static int list_rows(sqlite3_stmt *st, int rc, int job_keys, gr_store_row row, void *ctx, struct gr_err *e)
{
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(st)) != SQLITE_ROW)
            break;
        char buf[GR_ID_LEN + 1];
        const char *id = job_keys ? column_id(st, 0, buf) : (const char *)sqlite3_column_text(st, 0);
        const char *doc = (const char *)sqlite3_column_text(st, 1);
        if (!id || !doc)
            break;
        row(ctx, id, doc);
    }
    int code = rc == SQLITE_DONE ? GR_OK : db_fail(e, sqlite3_db_handle(st), "listing");
    sqlite3_reset(st);
    return code;
}

static int sq_list(void *impl, int sql, const char *before, int limit, const char *status, const char *op,
                   const char *tenant, gr_store_row row, void *ctx, struct gr_err *e)
{
    sqlite3_stmt *st = NULL;
    int code = list_statement(impl, sql, before, limit, tenant, &st, e);
    if (code)
        return code;
    int rc = status ? bind_text(st, 3, status) : SQLITE_OK;
    if (rc == SQLITE_OK && op)
        rc = bind_text(st, 4, op);
    return list_rows(st, rc, keyed(sql), row, ctx, e);
}

static int sq_tenant_bytes(void *impl, gr_store_tenant tenant, void *ctx, struct gr_err *e)
{
    struct sq *s = impl;
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_TENANT_BYTES];
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        sqlite3_int64 bytes = sqlite3_column_int64(st, 1);
        if (name && bytes > 0)
            tenant(ctx, name, (uint64_t)bytes);
    }
    int code = rc == SQLITE_DONE ? GR_OK : db_fail(e, r->db, "summing datasets per tenant");
    sqlite3_reset(st);
    return code;
}

static int sq_load_pending(void *impl, gr_store_pending pending, void *ctx, struct gr_err *e)
{
    struct sq *s = impl;
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_PENDING];
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char buf[GR_ID_LEN + 1];
        const char *id = column_id(st, 0, buf);
        const char *doc = (const char *)sqlite3_column_text(st, 1);
        const void *input = sqlite3_column_blob(st, 2);
        size_t bytes = (size_t)sqlite3_column_bytes(st, 2);
        if (!id || !doc || (!input && bytes))
            break;
        pending(ctx, id, doc, input, bytes, 1); /* one gpured per file: nothing fences */
    }
    int code = rc == SQLITE_DONE ? GR_OK : db_fail(e, r->db, "loading pending jobs");
    sqlite3_reset(st);
    return code;
}

static int sq_ping(void *impl, struct gr_err *e)
{
    struct sq *s = impl;
    struct reader *r = sq_usable(s, e) == GR_OK ? reader(s, e) : NULL;
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_PING];
    int code = sqlite3_step(st) == SQLITE_ROW ? GR_OK : db_fail(e, r->db, "ping");
    sqlite3_reset(st);
    return code;
}

/* Stops the checkpointer and frees whatever part of the store exists; the writer is stopped. */
static void sq_close(void *impl)
{
    struct sq *s = impl;
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_signal(&s->ckpt_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->have_checkpointer)
        pthread_join(s->checkpointer, NULL);
    gr_readers_end(&s->readers);
    finalize_all(s->w, NWRITE);
    sqlite3_close(s->wdb);
    sqlite3_close(s->cdb);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->ckpt_cv);
    free(s->run.ids);
    free(s->path);
    free(s);
}

static int open_writer(struct sq *s, const char *data_dir, struct gr_err *e)
{
    size_t n = strlen(data_dir) + sizeof "/gpured.db";
    if (!(s->path = malloc(n)))
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    snprintf(s->path, n, "%s/gpured.db", data_dir);

    if (sqlite3_open_v2(s->path, &s->wdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        return db_fail(e, s->wdb, s->path);
    char mode[16];
    if (sqlite3_busy_timeout(s->wdb, BUSY_MS) != SQLITE_OK ||
        query1(s->wdb, "PRAGMA journal_mode = WAL", mode, sizeof mode, e) != GR_OK)
        return db_fail(e, s->wdb, "setting WAL mode");
    if (strcmp(mode, "wal") != 0)
        return gr_fail(e, GR_EIO, NULL, "store: %s stays in journal mode %s, not wal", s->path, mode);
    if (stat(s->path, &s->file) != 0)
        return gr_fail(e, GR_EIO, NULL, "store: cannot stat %s: %s", s->path, strerror(errno));
    if (exec(s->wdb, "PRAGMA synchronous = NORMAL", e) != GR_OK ||
        exec(s->wdb, "PRAGMA foreign_keys = ON", e) != GR_OK || migrate(s->wdb, e) != GR_OK)
        return GR_EIO;
    if (sqlite3_open_v2(s->path, &s->cdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(s->cdb, BUSY_MS) != SQLITE_OK || exec(s->cdb, "PRAGMA synchronous = NORMAL", e) != GR_OK)
        return db_fail(e, s->cdb, "opening the checkpoint connection");
    sqlite3_wal_autocheckpoint(s->wdb, 0);
    sqlite3_wal_hook(s->wdb, on_wal, s);
    return prepare_all(s->wdb, GR_SQL_NREAD, GR_SQL_N, s->w, e);
}

int gr_sqlite_store_open(const char *data_dir, void **impl, struct gr_err *e)
{
    *impl = NULL;
    struct sq *s = calloc(1, sizeof *s);
    if (!s)
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->ckpt_cv, NULL);
    int code = gr_readers_init(&s->readers, close_reader, e);
    if (code == GR_OK)
        code = open_writer(s, data_dir, e);
    if (code == GR_OK && !(s->have_checkpointer = pthread_create(&s->checkpointer, NULL, checkpointer_main, s) == 0))
        code = gr_fail(e, GR_EIO, NULL, "store: cannot start the checkpoint thread");
    if (code == GR_OK)
        pthread_setname_np(s->checkpointer, "gr-checkpoint");
    if (code != GR_OK) {
        sq_close(s);
        return code;
    }
    *impl = s;
    return GR_OK;
}

const struct gr_store_backend gr_sqlite_store = {
    .name = "sqlite",
    .begin = sq_begin,
    .apply = sq_apply,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .failed = sq_failed,
    .message = sq_message,
    .usable = sq_usable,
    .get = sq_get,
    .get_key = sq_get_key,
    .list = sq_list,
    .tenant_bytes = sq_tenant_bytes,
    .load_pending = sq_load_pending,
    .ping = sq_ping,
    .close = sq_close,
};
