/* pg_store.c: the PostgreSQL backend (libpq) of the store interface (store_backend.h), for a
 * store several replicas share. The store's writer thread owns the write connection; each
 * reading thread owns its read connection (a thread-specific). A connection the server dropped
 * (a restart) is reset on its next use. */
#include "store_backend.h"

#include "readers.h"
#include "schema.h"

#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPARAMS 13 /* schema.h's numbering */
#define TEXTOID 25 /* pg_type.h's, which libpq's headers do not carry */
#define BYTEAOID 17
/* any constant: the advisory lock every replica takes while it migrates */
#define MIGRATE_LOCK "7468207579"

/* Sorts after every text id under COLLATE "C", so one list statement serves the first page too. */
static const char no_cursor[] = "\xf4\x8f\xbf\xbf";


struct pg {
    char *url;
    /* the listener: its own connection and thread; listening cleared by close */
    pthread_t listener;
    int listening;
    gr_store_told changed, offered;
    void *told_ctx;
    PGconn *wdb; /* the writer thread's */
    char state[6], msg[256]; /* the writer's last failure: SQLSTATE and text */
    struct gr_readers readers; /* each reading thread's PGconn */
};

static int db_fail(struct gr_err *e, PGconn *db, const char *what)
{
    const char *m = db ? PQerrorMessage(db) : "out of memory";
    int n = (int)strlen(m);
    while (n > 0 && m[n - 1] == '\n')
        n--;
    return gr_fail(e, GR_EIO, NULL, "store: %s: %.*s", what, n, m);
}

/* The highest $N statement sql names: how many parameters it takes. */
static int nparams(int sql)
{
    int n = 0;
    for (const char *p = gr_pg_sql[sql]; (p = strchr(p, '$'));) {
        int k = (int)strtol(p + 1, (char **)&p, 10); /* $$ of a function body reads as 0 */
        if (k > n)
            n = k;
    }
    return n;
}

/* Prepare the statements a reader (from 0) or the writer (from GR_SQL_NREAD) runs, as "s<N>",
 * every parameter text but GR_SQL_INPUT's bytes. */
static int prepare_all(PGconn *db, int from, int to, struct gr_err *e)
{
    for (int i = from; i < to; i++) {
        if (!gr_pg_sql[i] || i == GR_SQL_BEGIN || i == GR_SQL_COMMIT || i == GR_SQL_ROLLBACK)
            continue;
        Oid types[NPARAMS];
        for (int k = 0; k < NPARAMS; k++)
            types[k] = TEXTOID;
        if (i == GR_SQL_INPUT)
            types[1] = BYTEAOID;
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        PGresult *r = PQprepare(db, name, gr_pg_sql[i], nparams(i), types);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok)
            return db_fail(e, db, gr_pg_sql[i]);
    }
    return GR_OK;
}

/* A new connection to url, its statements from..to prepared; NULL with e filled. */
static PGconn *connect_db(const char *url, int from, int to, struct gr_err *e)
{
    PGconn *db = PQconnectdb(url);
    if (!db || PQstatus(db) != CONNECTION_OK) {
        db_fail(e, db, "connecting to PostgreSQL");
        PQfinish(db);
        return NULL;
    }
    if (prepare_all(db, from, to, e) != GR_OK) {
        PQfinish(db);
        return NULL;
    }
    return db;
}

/* The connection back after the server dropped it (restarted): reset and prepared again. */
static int alive(PGconn *db, int from, int to, struct gr_err *e)
{
    if (PQstatus(db) == CONNECTION_OK)
        return GR_OK;
    PQreset(db);
    if (PQstatus(db) != CONNECTION_OK)
        return db_fail(e, db, "reconnecting to PostgreSQL");
    return prepare_all(db, from, to, e);
}

static int exec_ok(PGconn *db, const char *sql)
{
    PGresult *r = PQexec(db, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok;
}

/* Every step not yet applied, in one transaction under an advisory lock: replicas starting at
 * once apply each step once, the later ones find them done. */
static int migrate(PGconn *db, struct gr_err *e)
{
    if (!exec_ok(db, "BEGIN") || !exec_ok(db, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK ")") ||
        !exec_ok(db, "CREATE TABLE IF NOT EXISTS gpured_schema(version integer NOT NULL)") ||
        !exec_ok(db, "INSERT INTO gpured_schema SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM gpured_schema)"))
        goto fail;
    PGresult *r = PQexec(db, "SELECT version FROM gpured_schema");
    long ver = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    if (ver < 0)
        goto fail;
    if (ver > gr_pg_schema_nsteps) {
        exec_ok(db, "ROLLBACK");
        return gr_fail(e, GR_EIO, NULL,
                       "store: database schema version %ld is newer than this gpured knows (%d); run a newer gpured",
                       ver, gr_pg_schema_nsteps);
    }
    for (; ver < gr_pg_schema_nsteps; ver++) {
        char set[64];
        snprintf(set, sizeof set, "UPDATE gpured_schema SET version = %ld", ver + 1);
        if (!exec_ok(db, gr_pg_schema_steps[ver]) || !exec_ok(db, set))
            goto fail;
    }
    if (exec_ok(db, "COMMIT"))
        return GR_OK;
fail:
    db_fail(e, db, "migrating the schema");
    exec_ok(db, "ROLLBACK");
    return GR_EIO;
}

/* --- readers --- */

static void close_reader(void *conn) { PQfinish(conn); }

/* This thread's read connection, opened on first use and reset after a drop. */
static PGconn *reader(struct pg *s, struct gr_err *e)
{
    PGconn *db = gr_readers_mine(&s->readers);
    if (db)
        return alive(db, 0, GR_SQL_NREAD, e) == GR_OK ? db : NULL;
    if (!(db = connect_db(s->url, 0, GR_SQL_NREAD, e)))
        return NULL;
    return gr_readers_add(&s->readers, db, e) == GR_OK ? db : NULL;
}

/* Run read statement sql with the first of params it takes (text, NULL for SQL NULL); the result
 * (caller clears) or NULL with e filled. */
static PGresult *run(struct pg *s, int sql, const char *const *params, int binary, int again, struct gr_err *e)
{
    PGconn *db = reader(s, e);
    if (!db)
        return NULL;
    char name[16];
    snprintf(name, sizeof name, "s%d", sql);
    PGresult *r = PQexecPrepared(db, name, nparams(sql), params, NULL, NULL, binary);
    if (again && PQresultStatus(r) != PGRES_TUPLES_OK && PQstatus(db) != CONNECTION_OK &&
        alive(db, 0, GR_SQL_NREAD, e) == GR_OK) {
        PQclear(r); /* the server dropped the connection (a restart) since this thread's last read */
        r = PQexecPrepared(db, name, nparams(sql), params, NULL, NULL, binary);
    }
    if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
        return r;
    PQclear(r);
    db_fail(e, db, gr_pg_sql[sql]);
    return NULL;
}

/* A read: run again once on a connection the server dropped. */
static PGresult *query(struct pg *s, int sql, const char *const *params, int binary, struct gr_err *e)
{
    return run(s, sql, params, binary, 1, e);
}

static int pg_get(void *impl, int sql, const char *id, const char *scope, char **doc, char status[16],
                  struct gr_err *e)
{
    *doc = NULL;
    const char *params[] = {id, scope};
    PGresult *r = query(impl, sql, params, 0, e);
    if (!r)
        return GR_EIO;
    int code;
    if (PQntuples(r) == 0)
        code = gr_fail(e, GR_ENOTFOUND, NULL, "no %s %s", sql == GR_SQL_GET ? "job" : "dataset", id ? id : "");
    else if (!(*doc = strdup(PQgetvalue(r, 0, 0))))
        code = gr_fail(e, GR_EIO, NULL, "store: out of memory");
    else
        code = GR_OK;
    if (code == GR_OK && status)
        snprintf(status, 16, "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
    return code;
}

static int pg_get_key(void *impl, const char *tenant, const char *key, double since, char fingerprint[65],
                      char resource[24], struct gr_err *e)
{
    char t[32];
    snprintf(t, sizeof t, "%.17g", since);
    const char *params[] = {tenant, key, t};
    PGresult *r = query(impl, GR_SQL_KEY_GET, params, 0, e);
    if (!r)
        return GR_EIO;
    int code = PQntuples(r) ? GR_OK : GR_ENOTFOUND;
    if (code == GR_OK) {
        snprintf(fingerprint, 65, "%s", PQgetvalue(r, 0, 0));
        snprintf(resource, 24, "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return code;
}

static int pg_list(void *impl, int sql, const char *before, int limit, const char *status, const char *op,
                   const char *tenant, gr_store_row row, void *ctx, struct gr_err *e)
{
    if (limit < 1 || limit > GR_STORE_LIST_MAX)
        return gr_fail(e, GR_EINVAL, "limit", "limit must be 1 to %d, not %d", GR_STORE_LIST_MAX, limit);
    char n[16];
    snprintf(n, sizeof n, "%d", limit);
    const char *params[] = {before ? before : no_cursor, n, status, op, tenant};
    PGresult *r = query(impl, sql, params, 0, e);
    if (!r)
        return GR_EIO;
    for (int i = 0; i < PQntuples(r); i++)
        row(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    return GR_OK;
}

static int pg_tenant_bytes(void *impl, gr_store_tenant tenant, void *ctx, struct gr_err *e)
{
    PGresult *r = query(impl, GR_SQL_TENANT_BYTES, NULL, 0, e);
    if (!r)
        return GR_EIO;
    for (int i = 0; i < PQntuples(r); i++) {
        long long bytes = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        if (bytes > 0)
            tenant(ctx, PQgetvalue(r, i, 0), (uint64_t)bytes);
    }
    PQclear(r);
    return GR_OK;
}

/* Renew, claim or release (store_backend.h). A claim answers in binary, so that inputs come as
 * their bytes; its text columns (the epoch cast to text too) are their bytes as well. */
static int pg_lease(void *impl, int sql, const char *owner, double lease_s, int limit, const char *keep,
                    gr_store_pending pending, void *ctx, int *n, struct gr_err *e)
{
    char lim[16], secs[32];
    snprintf(lim, sizeof lim, "%d", limit);
    snprintf(secs, sizeof secs, "%.17g", lease_s);
    const char *params[NPARAMS] = {NULL, keep ? keep : lim, [10] = owner, [11] = secs};
    /* not run again on a dropped connection: a claim whose answer was lost must not be made twice */
    PGresult *r = run(impl, sql, params, sql == GR_SQL_CLAIM, 0, e);
    *n = r && sql == GR_SQL_CLAIM ? PQntuples(r) : 0;
    for (int i = 0; i < *n; i++) {
        int none = PQgetisnull(r, i, 2);
        pending(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), none ? NULL : PQgetvalue(r, i, 2),
                none ? 0 : (size_t)PQgetlength(r, i, 2), strtoll(PQgetvalue(r, i, 3), NULL, 10));
    }
    PQclear(r);
    return r ? GR_OK : GR_EIO;
}

static int pg_ping(void *impl, struct gr_err *e)
{
    PGresult *r = query(impl, GR_SQL_PING, NULL, 0, e);
    PQclear(r);
    return r ? GR_OK : GR_EIO;
}

/* LISTEN on a connection of its own; a lost one is opened again after a second. Each wait on
 * the socket is at most half a second, so that close is never kept waiting long. */
static void *listener_main(void *arg)
{
    struct pg *s = arg;
    PGconn *db = NULL;
    while (__atomic_load_n(&s->listening, __ATOMIC_ACQUIRE)) {
        if (!db || PQstatus(db) != CONNECTION_OK) {
            PQfinish(db);
            db = PQconnectdb(s->url);
            if (PQstatus(db) != CONNECTION_OK || !exec_ok(db, "LISTEN gpured_jobs; LISTEN gpured_offers")) {
                sleep(1);
                continue;
            }
        }
        struct pollfd p = {PQsocket(db), POLLIN, 0};
        if (poll(&p, 1, 500) > 0 && !PQconsumeInput(db))
            continue; /* the connection is gone: the next round opens another */
        for (PGnotify *n; (n = PQnotifies(db)); PQfreemem(n))
            (strcmp(n->relname, "gpured_offers") ? s->changed : s->offered)(s->told_ctx, n->extra);
    }
    PQfinish(db);
    return NULL;
}

static int pg_listen(void *impl, gr_store_told changed, gr_store_told offered, void *ctx, struct gr_err *e)
{
    struct pg *s = impl;
    s->changed = changed;
    s->offered = offered;
    s->told_ctx = ctx;
    s->listening = 1;
    if (pthread_create(&s->listener, NULL, listener_main, s)) {
        s->listening = 0;
        return gr_fail(e, GR_EIO, NULL, "store: cannot start the listener thread");
    }
    pthread_setname_np(s->listener, "gr-store-listen");
    return GR_OK;
}

static int pg_replica(void *impl, int sql, const char *owner, double lease_s, const char *doc, gr_store_row row,
                      void *ctx, struct gr_err *e)
{
    char secs[32];
    snprintf(secs, sizeof secs, "%.17g", lease_s);
    const char *params[NPARAMS] = {[2] = doc, [10] = owner, [11] = secs};
    PGresult *r = run(impl, sql, params, 0, 1, e);
    for (int i = 0; r && row && i < PQntuples(r); i++)
        row(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    return r ? GR_OK : GR_EIO;
}

static int pg_slot(void *impl, long long *n, struct gr_err *e)
{
    PGresult *r = query(impl, GR_SQL_SLOT, NULL, 0, e);
    if (!r)
        return GR_EIO;
    *n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return GR_OK;
}

static int pg_cancel(void *impl, const char *id, const char *scope, const char *now, char **doc,
                     struct gr_err *e)
{
    const char *params[] = {id, scope, now};
    PGresult *r = query(impl, GR_SQL_CANCEL, params, 0, e);
    if (!r)
        return GR_EIO;
    int code = PQntuples(r) == 0 ? GR_ENOTFOUND : (*doc = strdup(PQgetvalue(r, 0, 0))) ? GR_OK
                                                 : gr_fail(e, GR_EIO, NULL, "store: out of memory");
    PQclear(r);
    return code;
}

/* --- the writer --- */

/* Keep the writer's failure (r NULL: the connection's) for failed and message; returns -1. */
static int writer_failed(struct pg *s, PGresult *r)
{
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    snprintf(s->state, sizeof s->state, "%s", st ? st : "");
    snprintf(s->msg, sizeof s->msg, "%s", r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(s->wdb));
    s->msg[strcspn(s->msg, "\n")] = '\0'; /* libpq's text runs over lines; a log line is one */
    return -1;
}

/* Send writer statement sql with o's parameters, its answer read later (pipeline mode). 1 if
 * sent. */
static int send_op(struct pg *s, int sql, const struct gr_store_op *o)
{
    char created[32], bytes[24], epoch[24], lease[32], name[16];
    snprintf(created, sizeof created, "%.17g", o->created);
    snprintf(bytes, sizeof bytes, "%lld", (long long)o->bytes);
    snprintf(epoch, sizeof epoch, "%lld", (long long)o->epoch);
    snprintf(lease, sizeof lease, "%.17g", o->lease_s);
    snprintf(name, sizeof name, "s%d", sql);
    const char *v[NPARAMS] = {o->id,          o->status, o->doc, o->opname, created, o->tenant, bytes, o->key,
                              o->fingerprint, epoch,     o->owner, lease,      o->prefer};
    int lengths[NPARAMS] = {0}, formats[NPARAMS] = {0};
    if (sql == GR_SQL_INPUT) {
        v[1] = o->input;
        lengths[1] = (int)o->input_bytes;
        formats[1] = 1;
    }
    return PQsendQueryPrepared(s->wdb, name, nparams(sql), v, lengths, formats, 0);
}

/* The statements of o, in order: its own, then its input's and its key's. */
static int statements(const struct gr_store_op *o, int sql[3])
{
    int n = 0;
    sql[n++] = o->sql;
    if (o->sql == GR_SQL_INSERT && o->input)
        sql[n++] = GR_SQL_INPUT;
    if ((o->sql == GR_SQL_INSERT || o->sql == GR_SQL_DS_INSERT) && o->key)
        sql[n++] = GR_SQL_KEY_INSERT;
    return n;
}

/* One statement's answer in pipeline mode (its result, then the NULL that ends it): 1 if it
 * ran, *changed the rows it touched. */
static int take(struct pg *s, long *changed)
{
    PGresult *r = PQgetResult(s->wdb);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (ok)
        *changed = strtol(PQcmdTuples(r), NULL, 10);
    else if (PQresultStatus(r) != PGRES_PIPELINE_ABORTED) /* the first failure is the one to tell */
        writer_failed(s, r);
    PQclear(r);
    PQclear(PQgetResult(s->wdb));
    return ok;
}

/* Up to this many ops' statements are sent before their answers are read: what the server has
 * to write back stays far below what a socket holds, so neither side waits on the other. */
#define PIPELINE_OPS 256

/* The batch's statements go out back to back and their answers are read after (libpq's pipeline
 * mode): one round trip per PIPELINE_OPS ops, not one per statement. Any error aborts the
 * transaction, so -1 then (the batch is retried op by op). */
static int pg_apply(void *impl, struct gr_store_op *o, int n)
{
    struct pg *s = impl;
    if (!PQenterPipelineMode(s->wdb))
        return writer_failed(s, NULL);
    int ok = 1;
    while (ok && n > 0) {
        struct gr_store_op *first = o;
        int k = 0, sql[3];
        for (; ok && k < n && k < PIPELINE_OPS; k++, o = o->next) {
            o->code = GR_EIO;
            if (o->input_bytes > INT32_MAX) /* more than one bytea parameter carries: refused alone */
                continue;
            for (int i = 0, m = statements(o, sql); ok && i < m; i++)
                ok = send_op(s, sql[i], o);
        }
        if (!ok || !PQpipelineSync(s->wdb)) { /* nothing is read: the connection is made anew below */
            writer_failed(s, NULL);
            ok = 0;
            break;
        }
        struct gr_store_op *p = first;
        for (int j = 0; j < k; j++, p = p->next) {
            if (p->input_bytes > INT32_MAX)
                continue;
            long changed = 1, ignored;
            int m = statements(p, sql), ran = take(s, &changed);
            for (int i = 1; i < m; i++)
                ran = take(s, &ignored) && ran;
            int changes_row = p->sql == GR_SQL_UPDATE || p->sql == GR_SQL_DS_DELETE || p->sql == GR_SQL_JOB_DELETE;
            p->code = !ran ? GR_EIO : changes_row && changed == 0 ? GR_ENOTFOUND : GR_OK;
            ok = ok && ran;
        }
        PGresult *r = PQgetResult(s->wdb); /* the sync's */
        ok = ok && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
        n -= k;
    }
    if (!PQexitPipelineMode(s->wdb)) { /* answers left unread: a connection in a known state instead */
        writer_failed(s, NULL);
        PQreset(s->wdb);
        prepare_all(s->wdb, GR_SQL_NREAD, GR_SQL_N, NULL);
        ok = 0;
    }
    return ok ? 0 : -1;
}

static int pg_begin(void *impl)
{
    struct pg *s = impl;
    struct gr_err e;
    if (alive(s->wdb, GR_SQL_NREAD, GR_SQL_N, &e) != GR_OK) {
        writer_failed(s, NULL);
        return 0;
    }
    PGresult *r = PQexec(s->wdb, "BEGIN");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        writer_failed(s, r);
    PQclear(r);
    return ok;
}

static int pg_commit(void *impl)
{
    struct pg *s = impl;
    PGresult *r = PQexec(s->wdb, "COMMIT");
    /* a COMMIT of an aborted transaction answers OK with ROLLBACK: it did not commit */
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT");
    if (!ok)
        writer_failed(s, r);
    PQclear(r);
    return ok;
}

static void pg_rollback(void *impl)
{
    struct pg *s = impl;
    if (PQtransactionStatus(s->wdb) != PQTRANS_IDLE)
        PQclear(PQexec(s->wdb, "ROLLBACK"));
}

/* disk_full (53100) is the client's 507, as SQLite's SQLITE_FULL. A lost connection (class 08),
 * or a server shutting down or starting (57P01 to 57P03), is a store out of reach for now. */
static int pg_failed(void *impl)
{
    struct pg *s = impl;
    if (PQstatus(s->wdb) != CONNECTION_OK || !strncmp(s->state, "08", 2) || !strncmp(s->state, "57P0", 4))
        return GR_EUNAVAIL;
    return !strcmp(s->state, "53100") ? GR_ENOMEM : GR_EIO;
}

static const char *pg_message(void *impl) { return ((struct pg *)impl)->msg; }

static int pg_usable(void *impl, struct gr_err *e) { return GR_OK; }

static void pg_close(void *impl)
{
    struct pg *s = impl;
    if (s->listening) {
        __atomic_store_n(&s->listening, 0, __ATOMIC_RELEASE);
        pthread_join(s->listener, NULL);
    }
    gr_readers_end(&s->readers);
    PQfinish(s->wdb);
    free(s->url);
    free(s);
}

int gr_pg_store_open(const char *url, void **impl, struct gr_err *e)
{
    *impl = NULL;
    struct pg *s = calloc(1, sizeof *s);
    if (!s || !(s->url = strdup(url))) {
        free(s);
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    }
    int code = gr_readers_init(&s->readers, close_reader, e);
    if (code == GR_OK && (!(s->wdb = PQconnectdb(url)) || PQstatus(s->wdb) != CONNECTION_OK))
        code = db_fail(e, s->wdb, "connecting to PostgreSQL");
    if (code == GR_OK)
        code = migrate(s->wdb, e);
    if (code == GR_OK)
        code = prepare_all(s->wdb, GR_SQL_NREAD, GR_SQL_N, e);
    if (code != GR_OK) {
        pg_close(s);
        return code;
    }
    *impl = s;
    return GR_OK;
}

const struct gr_store_backend gr_pg_store = {
    .name = "postgresql",
    .begin = pg_begin,
    .apply = pg_apply,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .failed = pg_failed,
    .message = pg_message,
    .usable = pg_usable,
    .get = pg_get,
    .get_key = pg_get_key,
    .list = pg_list,
    .tenant_bytes = pg_tenant_bytes,
    .lease = pg_lease,
    .cancel = pg_cancel,
    .slot = pg_slot,
    .listen = pg_listen,
    .replica = pg_replica,
    .ping = pg_ping,
    .close = pg_close,
};
