/* store.c: the SQLite store. The writer thread owns the write connection and commits the
 * queue in batches; each reading thread owns its read connection (a thread-specific). */
#include "store.h"

#include "dsfile.h"
#include "schema.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BUSY_MS 5000
#define NWRITE (GR_SQL_N - GR_SQL_NREAD)

/* Sorts after every text id (U+10FFFF), so one list statement serves the first page too. */
static const char no_cursor[] = "\xf4\x8f\xbf\xbf";

/* A queued write, allocated by the caller's thread and freed by the writer. */
struct op {
    struct op *next;
    int sql; /* the statement: a job insert or update, a dataset insert or delete */
    const char *opname;
    char *doc;
    const void *input;
    size_t input_bytes;
    double created;
    gr_store_done done;
    void *ctx;
    int code;
    char status[16];
    char tenant[65];
    int64_t bytes;
    char *key; /* Idempotency-Key (malloc'd) or NULL */
    char fingerprint[65];
    char id[];
};

struct reader {
    struct reader *prev, *next;
    struct gr_store *s;
    sqlite3 *db;
    sqlite3_stmt *st[GR_SQL_NREAD];
};

struct gr_store {
    char *path, *dir;
    sqlite3 *wdb; /* the writer thread's */
    sqlite3_stmt *w[NWRITE];
    pthread_t writer;
    int have_writer, have_key;
    pthread_mutex_t mu; /* queue and closing; never taken by reads */
    pthread_cond_t cv;
    struct op *head, **tail;
    int closing;
    _Atomic uint64_t version;
    pthread_key_t key;   /* this thread's struct reader */
    pthread_mutex_t rmu; /* readers list: taken only when a thread opens or drops one */
    struct reader *readers;
    /* WAL checkpoints run on their own thread and connection, so that the writer's commits
     * never wait for the checkpoint's copy and fsync (SQLite's automatic one is off). */
    sqlite3 *cdb;
    pthread_t checkpointer;
    int have_checkpointer, checkpoint_wanted;
    pthread_cond_t ckpt_cv; /* with mu */
    struct stat file;       /* gpured.db as opened: a file removed or replaced since is noticed */
};

#define CHECKPOINT_PAGES 4096 /* WAL size (pages) that asks for a checkpoint */

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
        if (sqlite3_prepare_v3(db, gr_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i - from], NULL) !=
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

static int on_wal(void *arg, sqlite3 *db, const char *name, int pages);

/* Whether a dataset row exists (start-up, on the writer's connection); when it cannot be told,
 * yes, so that nothing is removed in doubt. */
static int has_dataset(void *ctx, const char *id)
{
    struct gr_store *s = ctx;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->wdb, gr_sql[GR_SQL_DS_GET], -1, &st, NULL) != SQLITE_OK)
        return 1;
    int rc = sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC) == SQLITE_OK ? sqlite3_step(st) : SQLITE_ERROR;
    sqlite3_finalize(st);
    return rc != SQLITE_DONE;
}

static int open_writer(struct gr_store *s, const char *data_dir, struct gr_err *e)
{
    if (mkdir(data_dir, 0750) != 0 && errno != EEXIST)
        return gr_fail(e, GR_EIO, NULL, "store: cannot create %s: %s", data_dir, strerror(errno));
    size_t n = strlen(data_dir) + sizeof "/gpured.db";
    if (!(s->path = malloc(n)) || !(s->dir = strdup(data_dir)))
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
        exec(s->wdb, "PRAGMA foreign_keys = ON", e) != GR_OK || migrate(s->wdb, e) != GR_OK ||
        gr_dsfile_init(data_dir, has_dataset, s, e) != GR_OK)
        return GR_EIO;
    if (sqlite3_open_v2(s->path, &s->cdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(s->cdb, BUSY_MS) != SQLITE_OK || exec(s->cdb, "PRAGMA synchronous = NORMAL", e) != GR_OK)
        return db_fail(e, s->cdb, "opening the checkpoint connection");
    sqlite3_wal_autocheckpoint(s->wdb, 0);
    sqlite3_wal_hook(s->wdb, on_wal, s);
    return prepare_all(s->wdb, GR_SQL_NREAD, GR_SQL_N, s->w, e);
}

/* After each commit, on the writer thread: ask for a checkpoint once the WAL has grown. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct gr_store *s = arg;
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
    struct gr_store *s = arg;
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

static void close_reader(struct reader *r)
{
    finalize_all(r->st, GR_SQL_NREAD);
    sqlite3_close(r->db);
    free(r);
}

/* Thread-exit destructor. gr_store_close must not run while a thread that read from the
 * store is exiting: by then every such thread is expected to be gone or idle. */
static void drop_reader(void *arg)
{
    struct reader *r = arg;
    pthread_mutex_lock(&r->s->rmu);
    if (r->prev)
        r->prev->next = r->next;
    else
        r->s->readers = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&r->s->rmu);
    close_reader(r);
}

/* This thread's read connection, opened on first use. NULL with e filled on failure. */
static struct reader *reader(struct gr_store *s, struct gr_err *e)
{
    struct reader *r = pthread_getspecific(s->key);
    if (r)
        return r;
    if (!(r = calloc(1, sizeof *r))) {
        gr_fail(e, GR_EIO, NULL, "store: out of memory");
        return NULL;
    }
    r->s = s;
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
    if (pthread_setspecific(s->key, r) != 0) {
        gr_fail(e, GR_EIO, NULL, "store: cannot keep a read connection for this thread");
        close_reader(r);
        return NULL;
    }
    pthread_mutex_lock(&s->rmu);
    r->next = s->readers;
    if (r->next)
        r->next->prev = r;
    s->readers = r;
    pthread_mutex_unlock(&s->rmu);
    return r;
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

/* Bind the parameters st names (schema.h's numbering) from o. */
static int bind_op(sqlite3_stmt *st, const struct op *o)
{
    int rc = SQLITE_OK, n = sqlite3_bind_parameter_count(st);
    for (int i = 1; rc == SQLITE_OK && i <= n; i++) {
        if (!sqlite3_bind_parameter_name(st, i)) /* a number the statement skips */
            continue;
        switch (i) {
        case 1: rc = bind_text(st, i, o->id); break;
        case 2: rc = bind_text(st, i, o->status); break;
        case 3: rc = bind_text(st, i, o->doc); break;
        case 4: rc = bind_text(st, i, o->opname); break;
        case 5: rc = sqlite3_bind_double(st, i, o->created); break;
        case 6: rc = bind_text(st, i, o->tenant); break;
        case 7: rc = sqlite3_bind_int64(st, i, o->bytes); break;
        case 8: rc = bind_text(st, i, o->key); break;
        default: rc = bind_text(st, i, o->fingerprint); break;
        }
    }
    return rc;
}

/* Run one op inside the open transaction and set o->code. Returns 0, or -1 when the error
 * may have ended the transaction or left half an op in it (retry the batch op by op). */
static int apply(struct gr_store *s, struct op *o)
{
    sqlite3_stmt *st = s->w[o->sql - GR_SQL_NREAD];
    sqlite3_stmt *in = s->w[GR_SQL_INPUT - GR_SQL_NREAD];
    sqlite3_stmt *key = s->w[GR_SQL_KEY_INSERT - GR_SQL_NREAD];
    int with_input = o->sql == GR_SQL_INSERT && o->input;
    int with_key = (o->sql == GR_SQL_INSERT || o->sql == GR_SQL_DS_INSERT) && o->key;
    /* Everything is bound before anything runs, so a too-big input fails only its op. */
    int rc = bind_op(st, o);
    if (rc == SQLITE_OK && with_key)
        rc = bind_op(key, o);
    if (rc == SQLITE_OK && with_input)
        rc = bind_text(in, 1, o->id);
    if (rc == SQLITE_OK && with_input)
        rc = sqlite3_bind_blob64(in, 2, o->input, o->input_bytes, SQLITE_STATIC);
    o->code = GR_EIO;
    if (rc != SQLITE_OK)
        return 0;
    rc = step_done(st);
    int changes_row = o->sql == GR_SQL_UPDATE || o->sql == GR_SQL_DS_DELETE || o->sql == GR_SQL_JOB_DELETE;
    if (rc == SQLITE_OK && changes_row && sqlite3_changes(s->wdb) == 0) {
        o->code = GR_ENOTFOUND;
        return 0;
    }
    if (rc == SQLITE_OK && ((with_input && step_done(in) != SQLITE_OK) || (with_key && step_done(key) != SQLITE_OK)))
        return -1;
    if (rc == SQLITE_OK) {
        o->code = GR_OK;
        return 0;
    }
    /* A constraint (duplicate id) aborts only its statement. */
    return (rc & 0xff) == SQLITE_CONSTRAINT && !sqlite3_get_autocommit(s->wdb) ? 0 : -1;
}

static void rollback(struct gr_store *s)
{
    if (!sqlite3_get_autocommit(s->wdb))
        step_done(s->w[GR_SQL_ROLLBACK - GR_SQL_NREAD]);
}

static int begin(struct gr_store *s) { return step_done(s->w[GR_SQL_BEGIN - GR_SQL_NREAD]) == SQLITE_OK; }
static int commit(struct gr_store *s) { return step_done(s->w[GR_SQL_COMMIT - GR_SQL_NREAD]) == SQLITE_OK; }

/* The code of the writer's last failure: a full disk is the client's 507, the rest the store's. */
static int failed(struct gr_store *s) { return (sqlite3_extended_errcode(s->wdb) & 0xff) == SQLITE_FULL ? GR_ENOMEM : GR_EIO; }

static void commit_alone(struct gr_store *s, struct op *o)
{
    o->code = GR_EIO;
    if (!begin(s)) {
        o->code = failed(s);
        return;
    }
    apply(s, o);
    if (o->code != GR_OK || !commit(s)) {
        if (o->code == GR_OK || o->code == GR_EIO)
            o->code = failed(s);
        rollback(s);
    }
}

/* One transaction for the whole batch: this is what keeps many small jobs from costing a
 * transaction each. */
/* GR_OK while gpured.db is still the file the store opened. Removed (or replaced), SQLite would
 * go on writing to an inode no path names: commits would "succeed" and vanish at the next start. */
static int same_file(const struct gr_store *s, struct gr_err *e)
{
    struct stat now;
    if (stat(s->path, &now) != 0 || now.st_ino != s->file.st_ino || now.st_dev != s->file.st_dev)
        return gr_fail(e, GR_EIO, NULL, "store: %s was removed or replaced under the running server; restart gpured "
                                        "once it is back",
                       s->path);
    return GR_OK;
}

static void commit_batch(struct gr_store *s, struct op *batch)
{
    if (same_file(s, NULL) != GR_OK) { /* nothing is written: every write of the batch fails */
        for (struct op *o = batch; o; o = o->next)
            o->code = GR_EIO;
        goto done;
    }
    int ok = begin(s);
    for (struct op *o = batch; ok && o; o = o->next)
        ok = apply(s, o) == 0;
    if (ok)
        ok = commit(s);
    if (!ok) {
        fprintf(stderr, "gpured: store: batch commit failed (%s); retrying each write alone\n",
                sqlite3_errmsg(s->wdb));
        rollback(s);
        for (struct op *o = batch; o; o = o->next)
            commit_alone(s, o);
    }
done:
    atomic_fetch_add(&s->version, 1);
    while (batch) {
        struct op *next = batch->next;
        if (batch->done)
            batch->done(batch->ctx, batch->code);
        free(batch->doc);
        free(batch->key);
        free(batch);
        batch = next;
    }
}

static void *writer_main(void *arg)
{
    struct gr_store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->closing)
            pthread_cond_wait(&s->cv, &s->mu);
        struct op *batch = s->head;
        if (!batch)
            break;
        s->head = NULL;
        s->tail = &s->head;
        pthread_mutex_unlock(&s->mu);
        commit_batch(s, batch);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Frees whatever part of the store exists; the writer must be stopped. */
static void free_store(struct gr_store *s)
{
    while (s->readers) {
        struct reader *r = s->readers;
        s->readers = r->next;
        close_reader(r);
    }
    if (s->have_key)
        pthread_key_delete(s->key);
    finalize_all(s->w, NWRITE);
    sqlite3_close(s->wdb);
    sqlite3_close(s->cdb);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->ckpt_cv);
    pthread_mutex_destroy(&s->rmu);
    free(s->path);
    free(s->dir);
    free(s);
}

/* The writer commits what is queued and ends, then the checkpointer (it may still be asked
 * for one last checkpoint by the writer's final commits). */
static void stop_threads(struct gr_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_signal(&s->cv);
    pthread_cond_signal(&s->ckpt_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->have_writer)
        pthread_join(s->writer, NULL);
    if (s->have_checkpointer)
        pthread_join(s->checkpointer, NULL);
    s->have_writer = s->have_checkpointer = 0;
}

int gr_store_open(struct gr_store **out, const char *data_dir, struct gr_err *e)
{
    *out = NULL;
    struct gr_store *s = calloc(1, sizeof *s);
    if (!s)
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->ckpt_cv, NULL);
    pthread_mutex_init(&s->rmu, NULL);
    s->tail = &s->head;
    int code = open_writer(s, data_dir, e);
    if (code == GR_OK && !(s->have_key = pthread_key_create(&s->key, drop_reader) == 0))
        code = gr_fail(e, GR_EIO, NULL, "store: out of thread-specific keys");
    if (code == GR_OK && !(s->have_writer = pthread_create(&s->writer, NULL, writer_main, s) == 0))
        code = gr_fail(e, GR_EIO, NULL, "store: cannot start the writer thread");
    if (code == GR_OK && !(s->have_checkpointer = pthread_create(&s->checkpointer, NULL, checkpointer_main, s) == 0))
        code = gr_fail(e, GR_EIO, NULL, "store: cannot start the checkpoint thread");
    if (code != GR_OK) {
        stop_threads(s);
        free_store(s);
        return code;
    }
    *out = s;
    return GR_OK;
}

void gr_store_close(struct gr_store *s)
{
    if (!s)
        return;
    stop_threads(s);
    free_store(s);
}

/* A write of statement sql. Takes doc in every case (NULL only for a delete). NULL with doc
 * freed if the arguments are bad or memory is out. */
static struct op *new_op(int sql, const char *id, const char *status, char *doc, gr_store_done done, void *ctx)
{
    struct op *o = NULL;
    if (id && status && (doc || sql == GR_SQL_DS_DELETE || sql == GR_SQL_JOB_DELETE || sql == GR_SQL_KEYS_EXPIRE) &&
        strlen(status) < sizeof o->status)
        o = calloc(1, sizeof *o + strlen(id) + 1);
    if (!o) {
        free(doc);
        return NULL;
    }
    o->sql = sql;
    memcpy(o->id, id, strlen(id) + 1);
    memcpy(o->status, status, strlen(status) + 1);
    o->doc = doc;
    o->created = gr_now();
    o->done = done;
    o->ctx = ctx;
    return o;
}

/* o's tenant and key from own (NULL: the default tenant, no key). NULL, with o freed, if they
 * do not fit or memory is out. */
static struct op *owned(struct op *o, const struct gr_owner *own)
{
    const char *tenant = own && own->tenant ? own->tenant : "default";
    if (!o)
        return NULL;
    if (strlen(tenant) >= sizeof o->tenant || (own && own->key && (!own->fingerprint ||
                                                                   strlen(own->fingerprint) >= sizeof o->fingerprint ||
                                                                   !(o->key = strdup(own->key))))) {
        free(o->doc);
        free(o);
        return NULL;
    }
    memcpy(o->tenant, tenant, strlen(tenant) + 1);
    if (o->key)
        memcpy(o->fingerprint, own->fingerprint, strlen(own->fingerprint) + 1);
    return o;
}

static int push(struct gr_store *s, struct op *o)
{
    if (!o)
        return GR_EINVAL;
    pthread_mutex_lock(&s->mu);
    int closing = s->closing;
    if (!closing) {
        *s->tail = o;
        s->tail = &o->next;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (closing) {
        free(o->doc);
        free(o->key);
        free(o);
        return GR_EIO;
    }
    return GR_OK;
}

int gr_store_insert_job(struct gr_store *s, const char *id, int op, const char *status, char *doc,
                        const void *input, size_t input_bytes, const struct gr_owner *own, gr_store_done done,
                        void *ctx)
{
    if (!s || op < 0 || op > GR_MATMUL || (!input && input_bytes)) {
        free(doc);
        return GR_EINVAL;
    }
    struct op *o = new_op(GR_SQL_INSERT, id, status, doc, done, ctx);
    if (o) {
        o->opname = gr_op_name(op);
        o->input = input;
        o->input_bytes = input_bytes;
    }
    return push(s, owned(o, own));
}

int gr_store_update_job(struct gr_store *s, const char *id, const char *status, char *doc,
                        gr_store_done done, void *ctx)
{
    if (!s) {
        free(doc);
        return GR_EINVAL;
    }
    return push(s, new_op(GR_SQL_UPDATE, id, status, doc, done, ctx));
}

int gr_store_insert_dataset(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes,
                            char *doc, gr_store_done done, void *ctx)
{
    if (!s || bytes > INT64_MAX) {
        free(doc);
        return GR_EINVAL;
    }
    struct op *o = new_op(GR_SQL_DS_INSERT, id, "", doc, done, ctx);
    if (o)
        o->bytes = (int64_t)bytes;
    return push(s, owned(o, own));
}

int gr_store_delete_dataset(struct gr_store *s, const char *id, gr_store_done done, void *ctx)
{
    return s ? push(s, new_op(GR_SQL_DS_DELETE, id, "", NULL, done, ctx)) : GR_EINVAL;
}

int gr_store_delete_job(struct gr_store *s, const char *id, gr_store_done done, void *ctx)
{
    return s ? push(s, new_op(GR_SQL_JOB_DELETE, id, "", NULL, done, ctx)) : GR_EINVAL;
}

int gr_store_expire_keys(struct gr_store *s, double before, gr_store_done done, void *ctx)
{
    struct op *o = s ? new_op(GR_SQL_KEYS_EXPIRE, "", "", NULL, done, ctx) : NULL;
    if (o)
        o->created = before;
    return s ? push(s, o) : GR_EINVAL;
}

/* One row by id: its doc (column 0, malloc'd into *doc) and, when status is not NULL, its
 * status (column 1). GR_OK, GR_ENOTFOUND or GR_EIO. */
static int get_row(struct gr_store *s, int sql, const char *what, const char *id, const char *scope, char **doc,
                   char status[16], struct gr_err *e)
{
    *doc = NULL;
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[sql];
    int rc = bind_text(st, 1, id);
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

int gr_store_get_job(struct gr_store *s, const char *id, const char *scope, char **doc, char status[16],
                     struct gr_err *e)
{
    return get_row(s, GR_SQL_GET, "job", id, scope, doc, status, e);
}

int gr_store_get_dataset(struct gr_store *s, const char *id, const char *scope, char **doc, struct gr_err *e)
{
    return get_row(s, GR_SQL_DS_GET, "dataset", id, scope, doc, NULL, e);
}

int gr_store_get_key(struct gr_store *s, const char *tenant, const char *key, double since, char fingerprint[65],
                     char resource[24], struct gr_err *e)
{
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
static int list_statement(struct gr_store *s, int sql, const char *before, int limit, const char *tenant,
                          sqlite3_stmt **st, struct gr_err *e)
{
    if (limit < 1 || limit > 1000)
        return gr_fail(e, GR_EINVAL, "limit", "limit must be 1 to 1000, not %d", limit);
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    *st = r->st[sql];
    if (bind_text(*st, 1, before ? before : no_cursor) != SQLITE_OK || sqlite3_bind_int(*st, 2, limit) != SQLITE_OK ||
        (tenant && bind_text(*st, 5, tenant) != SQLITE_OK)) {
        sqlite3_reset(*st);
        return db_fail(e, r->db, "listing");
    }
    return GR_OK;
}

/* Step a bound list statement, row(ctx, id, doc) for each of its rows, and reset it. */
static int list_rows(sqlite3_stmt *st, int rc, gr_store_row row, void *ctx, struct gr_err *e)
{
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step(st)) != SQLITE_ROW)
            break;
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *doc = (const char *)sqlite3_column_text(st, 1);
        if (!id || !doc)
            break;
        row(ctx, id, doc);
    }
    int code = rc == SQLITE_DONE ? GR_OK : db_fail(e, sqlite3_db_handle(st), "listing");
    sqlite3_reset(st);
    return code;
}

int gr_store_list_jobs(struct gr_store *s, const char *tenant, const char *status, const char *op,
                       const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    int sql = GR_SQL_LIST_ALL | (status ? GR_SQL_LIST_STATUS : 0) | (op ? GR_SQL_LIST_OP : 0) |
              (tenant ? GR_SQL_LIST_TENANT : 0);
    sqlite3_stmt *st;
    int code = list_statement(s, sql, before, limit, tenant, &st, e);
    if (code)
        return code;
    int rc = status ? bind_text(st, 3, status) : SQLITE_OK;
    if (rc == SQLITE_OK && op)
        rc = bind_text(st, 4, op);
    return list_rows(st, rc, row, ctx, e);
}

int gr_store_list_datasets(struct gr_store *s, const char *tenant, const char *before, int limit, gr_store_row row,
                           void *ctx, struct gr_err *e)
{
    sqlite3_stmt *st;
    int rc = list_statement(s, tenant ? GR_SQL_DS_LIST_TENANT : GR_SQL_DS_LIST, before, limit, tenant, &st, e);
    return rc ? rc : list_rows(st, SQLITE_OK, row, ctx, e);
}

int gr_store_list_expired(struct gr_store *s, const char *before, int limit, gr_store_row row, void *ctx,
                          struct gr_err *e)
{
    sqlite3_stmt *st;
    int rc = list_statement(s, GR_SQL_EXPIRED, before, limit, NULL, &st, e);
    return rc ? rc : list_rows(st, SQLITE_OK, row, ctx, e);
}

int gr_store_tenant_bytes(struct gr_store *s, gr_store_tenant tenant, void *ctx, struct gr_err *e)
{
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

int gr_store_load_pending(struct gr_store *s, gr_store_pending pending, void *ctx, struct gr_err *e)
{
    struct reader *r = reader(s, e);
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_PENDING];
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *doc = (const char *)sqlite3_column_text(st, 1);
        const void *input = sqlite3_column_blob(st, 2);
        size_t bytes = (size_t)sqlite3_column_bytes(st, 2);
        if (!id || !doc || (!input && bytes))
            break;
        pending(ctx, id, doc, input, bytes);
    }
    int code = rc == SQLITE_DONE ? GR_OK : db_fail(e, r->db, "loading pending jobs");
    sqlite3_reset(st);
    return code;
}

uint64_t gr_store_version(struct gr_store *s) { return atomic_load(&s->version); }

const char *gr_store_data_dir(struct gr_store *s) { return s->dir; }

int gr_store_ping(struct gr_store *s, struct gr_err *e)
{
    struct reader *r = same_file(s, e) == GR_OK ? reader(s, e) : NULL;
    if (!r)
        return GR_EIO;
    sqlite3_stmt *st = r->st[GR_SQL_PING];
    int code = sqlite3_step(st) == SQLITE_ROW ? GR_OK : db_fail(e, r->db, "ping");
    sqlite3_reset(st);
    return code;
}

void gr_store_wait_done(void *waiter, int code)
{
    struct gr_store_wait *w = waiter;
    pthread_mutex_lock(&w->mu);
    if (code != GR_OK && w->code == GR_OK)
        w->code = code;
    w->pending--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void gr_store_wait_add(struct gr_store_wait *w, int rc)
{
    pthread_mutex_lock(&w->mu);
    if (rc == GR_OK)
        w->pending++;
    else if (w->code == GR_OK)
        w->code = rc;
    pthread_mutex_unlock(&w->mu);
}

int gr_store_wait_all(struct gr_store_wait *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->pending > 0)
        pthread_cond_wait(&w->cv, &w->mu);
    int code = w->code;
    w->code = GR_OK;
    pthread_mutex_unlock(&w->mu);
    return code;
}
