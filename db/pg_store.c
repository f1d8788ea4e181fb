/* pg_store.c: the PostgreSQL backend (libpq) of the store interface (store_backend.h), for a
 * store several replicas share. The store's writer thread owns the write connection; each
 * reading thread owns its read connection (a thread-specific). A connection the server dropped
 * (a restart) is reset on its next use. */
#include "db/store_backend.h"

#include "common/buf.h"
#include "db/readers.h"
#include "db/schema.h"

#include <arpa/inet.h>
#include <endian.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPARAMS 14 /* schema.h's numbering */
#define TEXTOID 25 /* pg_type.h's, which libpq's headers do not carry */
#define BYTEAOID 17
#define INT8OID 20
#define FLOAT8OID 701
/* any constant: the advisory lock every replica takes while it migrates */
#define MIGRATE_LOCK "7468207579"

/* Sorts after every text id under COLLATE "C", so one list statement serves the first page too. */
static const char no_cursor[] = "\xf4\x8f\xbf\xbf";


struct pg {
    char *url;
    /* the listener: its own connection and thread; listening cleared by close */
    pthread_t listener;
    int listening;
    gr_store_told changed, offered, cancel;
    void *told_ctx;
    PGconn *wdb; /* the writer thread's */
    int committed; /* the writer's last apply committed its transaction */
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
 * every parameter text but GR_SQL_INPUT's bytes and the arrays of the _MANY ones. */
static int prepare_all(PGconn *db, int from, int to, struct gr_err *e)
{
    for (int i = from; i < to; i++) {
        if (!gr_pg_sql[i] || i == GR_SQL_BEGIN || i == GR_SQL_COMMIT || i == GR_SQL_ROLLBACK)
            continue;
        Oid types[NPARAMS];
        int arrays = i >= GR_SQL_INSERT_MANY && i <= GR_SQL_OFFERED;
        for (int k = 0; k < NPARAMS; k++)
            types[k] = arrays ? 0 : TEXTOID; /* 0: as the statement casts it */
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

/* A read's failure for its client: a store out of reach (a lost connection, a server stopping or
 * starting) is GR_EUNAVAIL, a 503 to try again; any other is GR_EIO. Neither names the SQL. */
static int read_failed(struct gr_err *e, PGconn *db, PGresult *r)
{
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (PQstatus(db) != CONNECTION_OK || (st && (!strncmp(st, "08", 2) || !strncmp(st, "57P0", 4))))
        return gr_fail(e, GR_EUNAVAIL, NULL, "the store (PostgreSQL) is out of reach for now; try again");
    const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    return gr_fail(e, GR_EIO, NULL, "store: a read failed (SQLSTATE %s): %s", st ? st : "?",
                   m ? m : "no message");
}

/* What a read that failed returns: the code its e was filled with. */
static int failed_code(const struct gr_err *e) { return e && e->code == GR_EUNAVAIL ? GR_EUNAVAIL : GR_EIO; }

/* Run read statement sql with the first of params it takes (text, NULL for SQL NULL); the result
 * (caller clears) or NULL with e filled. */
static PGresult *run(struct pg *s, int sql, const char *const *params, int binary, int again, struct gr_err *e)
{
    PGconn *db = reader(s, e);
    if (!db) {
        if (e)
            gr_fail(e, GR_EUNAVAIL, NULL, "the store (PostgreSQL) is out of reach for now; try again");
        return NULL;
    }
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
    read_failed(e, db, r);
    PQclear(r);
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
        return failed_code(e);
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
        return failed_code(e);
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
    if (sql == GR_SQL_EVENTS || sql == GR_SQL_EVENTS_LAST || sql == GR_SQL_EVENTS_OWN) { /* what is committed gets its seq first */
        PGresult *r = query(impl, GR_SQL_EVENTS_NUMBER, NULL, 0, e);
        if (!r)
            return failed_code(e);
        PQclear(r);
    }
    PGresult *r = query(impl, sql, params, 0, e);
    if (!r)
        return failed_code(e);
    for (int i = 0; i < PQntuples(r); i++)
        row(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    return GR_OK;
}

static int pg_tenant_bytes(void *impl, gr_store_tenant tenant, void *ctx, struct gr_err *e)
{
    PGresult *r = query(impl, GR_SQL_TENANT_BYTES, NULL, 0, e);
    if (!r)
        return failed_code(e);
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
static int pg_lease(void *impl, int sql, const char *owner, double lease_s, int limit, const char *arg,
                    gr_store_pending pending, void *ctx, int *n, struct gr_err *e)
{
    char lim[16], secs[32];
    snprintf(lim, sizeof lim, "%d", limit);
    snprintf(secs, sizeof secs, "%.17g", lease_s);
    int claim = sql == GR_SQL_CLAIM;
    const char *params[NPARAMS] = {NULL, claim || !arg ? lim : arg, claim ? arg : NULL, [10] = owner, [11] = secs};
    /* not run again on a dropped connection: a claim whose answer was lost must not be made twice */
    PGresult *r = run(impl, sql, params, claim, 0, e);
    *n = r && claim ? PQntuples(r) : 0;
    for (int i = 0; i < *n; i++) {
        int none = PQgetisnull(r, i, 2);
        pending(ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), none ? NULL : PQgetvalue(r, i, 2),
                none ? 0 : (size_t)PQgetlength(r, i, 2), strtoll(PQgetvalue(r, i, 3), NULL, 10));
    }
    PQclear(r);
    return r ? GR_OK : failed_code(e);
}

static int pg_ping(void *impl, struct gr_err *e)
{
    PGresult *r = query(impl, GR_SQL_PING, NULL, 0, e);
    PQclear(r);
    return r ? GR_OK : failed_code(e);
}

/* A notice: an offer (its payload the replica offered to first, or ""), a job's holder asked to
 * cancel it (its id), or the ids of jobs whose status changed, space-separated. */
static void told(struct pg *s, PGnotify *n)
{
    if (!strcmp(n->relname, "gpured_offers") || !strcmp(n->relname, "gpured_cancel")) {
        (strcmp(n->relname, "gpured_offers") ? s->cancel : s->offered)(s->told_ctx, n->extra);
        return;
    }
    for (char *p = n->extra, *end; *p; p = *end ? end + 1 : end) {
        end = p + strcspn(p, " ");
        char id[32];
        if (end - p < (long)sizeof id) {
            memcpy(id, p, (size_t)(end - p));
            id[end - p] = '\0';
            s->changed(s->told_ctx, id);
        }
    }
}

/* LISTEN on a connection of its own; a lost one is opened again after a second. Each wait on
 * the socket is at most half a second, so that close is never kept waiting long. */
static void *listener_main(void *arg)
{
    struct pg *s = arg;
    PGconn *db = NULL;
    int lost = 0; /* a connection was lost: what it missed meanwhile is looked at again */
    /* TCP keepalives: a peer gone without a word (a half-open connection) is noticed in about
     * 25 s rather than the kernel's two hours */
    const char *const keys[] = {"dbname", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                                NULL};
    const char *const values[] = {s->url, "1", "10", "5", "3", NULL};
    while (__atomic_load_n(&s->listening, __ATOMIC_ACQUIRE)) {
        if (!db || PQstatus(db) != CONNECTION_OK) {
            lost |= db != NULL;
            PQfinish(db);
            db = PQconnectdbParams(keys, values, 1);
            if (PQstatus(db) != CONNECTION_OK || !exec_ok(db, "LISTEN gpured_jobs; LISTEN gpured_offers; LISTEN gpured_cancel")) {
                sleep(1);
                continue;
            }
            if (lost) { /* every wait on another replica's job reads the store again; offers are looked for */
                s->changed(s->told_ctx, "");
                s->offered(s->told_ctx, "");
                lost = 0;
            }
        }
        struct pollfd p = {PQsocket(db), POLLIN, 0};
        if (poll(&p, 1, 500) > 0 && !PQconsumeInput(db))
            continue; /* the connection is gone: the next round opens another */
        for (PGnotify *n; (n = PQnotifies(db)); PQfreemem(n))
            told(s, n);
    }
    PQfinish(db);
    return NULL;
}

static int pg_listen(void *impl, gr_store_told changed, gr_store_told offered, gr_store_told cancel, void *ctx,
                     struct gr_err *e)
{
    struct pg *s = impl;
    s->changed = changed;
    s->offered = offered;
    s->cancel = cancel;
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
    return r ? GR_OK : failed_code(e);
}

static int pg_slot(void *impl, const char *owner, double lease_s, int stride, long long *n, struct gr_err *e)
{
    char secs[32], st[16];
    snprintf(secs, sizeof secs, "%.17g", lease_s);
    snprintf(st, sizeof st, "%d", stride);
    const char *params[NPARAMS] = {NULL, st, [10] = owner, [11] = secs};
    PGresult *r = query(impl, GR_SQL_SLOT, params, 0, e);
    if (!r)
        return failed_code(e);
    *n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return GR_OK;
}

static int pg_key_hold(void *impl, int hold, const char *tenant, const char *key, const char *owner, double secs,
                       struct gr_err *e)
{
    char t[32];
    snprintf(t, sizeof t, "%.17g", secs);
    const char *params[NPARAMS] = {[5] = tenant, [7] = key, [10] = owner, [11] = t};
    PGresult *r = query(impl, hold ? GR_SQL_KEY_HOLD : GR_SQL_KEY_UNHOLD, params, 0, e);
    if (!r)
        return failed_code(e);
    int held = !hold || PQntuples(r) > 0;
    PQclear(r);
    return held ? GR_OK
                : gr_fail(e, GR_ECONFLICT, "Idempotency-Key",
                          "a request with this Idempotency-Key is still being processed (through another replica); "
                          "retry in a moment");
}

static int pg_cancel(void *impl, const char *id, const char *scope, const char *now, char **doc,
                     struct gr_err *e)
{
    const char *params[] = {id, scope, now};
    PGresult *r = query(impl, GR_SQL_CANCEL, params, 0, e);
    if (!r)
        return failed_code(e);
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
    const char *v[NPARAMS] = {o->id,          o->status, o->doc,   o->opname, created,   o->tenant, bytes,
                              o->key,         o->fingerprint, epoch, o->owner,  lease,     o->prefer, o->via};
    int lengths[NPARAMS] = {0}, formats[NPARAMS] = {0};
    if (sql == GR_SQL_INPUT) {
        v[1] = o->input;
        lengths[1] = (int)o->input_bytes;
        formats[1] = 1;
    }
    return PQsendQueryPrepared(s->wdb, name, nparams(sql), v, lengths, formats, 0);
}

/* --- a batch's like writes as one statement: its parameters are arrays, in binary --- */

/* The most writes one such statement carries: its arrays stay a few megabytes. */
#define MANY_MAX 1024

/* One-dimensional arrays in array_recv's format: a header (filled when sent), then each element
 * as its length and bytes. Text literals took a tenth of PostgreSQL's writer backend to parse,
 * and a JSON document's every quote an escape here. */
#define ARRAY_HEADER 20
static const char no_header[ARRAY_HEADER];
struct arrays {
    struct gr_buf a[10];
    int n[10];
};

static void put(struct arrays *x, int i, const void *v, int len) /* len -1: NULL */
{
    if (!x->a[i].len)
        gr_buf_add(&x->a[i], no_header, ARRAY_HEADER);
    uint32_t be = htonl((uint32_t)len);
    gr_buf_add(&x->a[i], (const char *)&be, 4);
    if (len > 0)
        gr_buf_add(&x->a[i], v, (size_t)len);
    x->n[i]++;
}

static void element(struct arrays *x, int i, const char *v)
{
    put(x, i, v, v ? (int)strlen(v) : -1);
}

static void element_int(struct arrays *x, int i, int64_t v)
{
    uint64_t u = htobe64((uint64_t)v);
    put(x, i, &u, 8);
}

static void element_real(struct arrays *x, int i, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    element_int(x, i, (int64_t)u);
}

/* A small input's bytes (NULL: none, or not inline). */
static void element_input(struct arrays *x, int i, const struct gr_store_op *o)
{
    put(x, i, o->input, gr_inline_input(o) ? (int)o->input_bytes : -1);
}

/* Send statement sql with the first n arrays of x, whose elements are of the types given (the
 * statement's casts: array_recv refuses another). 1 if sent. x is freed. */
static int send_arrays(struct pg *s, int sql, struct arrays *x, int n, const Oid *types)
{
    const char *v[10];
    int lengths[10], formats[10], ok = 1;
    for (int i = 0; i < n; i++) {
        struct gr_buf *b = &x->a[i];
        if (!b->len) /* no elements: a header of no dimensions, its first 12 bytes */
            gr_buf_add(b, no_header, ARRAY_HEADER);
        ok = ok && !b->oom;
        if (ok) {
            uint32_t h[5] = {htonl(x->n[i] ? 1 : 0), 0, htonl(types[i]), htonl((uint32_t)x->n[i]), htonl(1)};
            memcpy(b->p, h, sizeof h);
        }
        v[i] = b->p, lengths[i] = x->n[i] ? (int)b->len : 12, formats[i] = 1;
    }
    char name[16];
    snprintf(name, sizeof name, "s%d", sql);
    ok = ok && PQsendQueryPrepared(s->wdb, name, n, v, lengths, formats, 0);
    for (int i = 0; i < n; i++)
        free(x->a[i].p);
    memset(x, 0, sizeof *x);
    return ok;
}

static int send_inserts(struct pg *s, struct gr_store_op **o, int n)
{
    static const Oid types[10] = {TEXTOID, TEXTOID, TEXTOID,   TEXTOID, FLOAT8OID,
                                  TEXTOID, TEXTOID, FLOAT8OID, TEXTOID, BYTEAOID};
    struct arrays a = {0};
    for (int i = 0; i < n; i++) {
        element(&a, 0, o[i]->id), element(&a, 1, o[i]->status), element(&a, 2, o[i]->doc);
        element(&a, 3, o[i]->opname), element_real(&a, 4, o[i]->created), element(&a, 5, o[i]->tenant);
        element(&a, 6, o[i]->owner), element_real(&a, 7, o[i]->lease_s), element(&a, 8, o[i]->prefer);
        element_input(&a, 9, o[i]);
    }
    return send_arrays(s, GR_SQL_INSERT_MANY, &a, 10, types);
}

/* The new jobs' events: a row a run of like ones, as SQLite's writer gathers them. */
static int send_events(struct pg *s, struct gr_store_op **o, int n)
{
    static const Oid types[5] = {TEXTOID, INT8OID, INT8OID, TEXTOID, TEXTOID};
    struct arrays a = {0};
    for (int i = 0; i < n;) {
        int k = i + 1;
        while (k < n && k - i < GR_SQ_EVENT_RUN && !strcmp(o[k]->status, o[i]->status) &&
               !strcmp(o[k]->tenant, o[i]->tenant))
            k++;
        element_int(&a, 1, i + 1), element_int(&a, 2, k - i), element(&a, 3, o[i]->status);
        element(&a, 4, o[i]->tenant);
        i = k;
    }
    for (int i = 0; i < n; i++)
        element(&a, 0, o[i]->id);
    return send_arrays(s, GR_SQL_EVENTS_NEW, &a, 5, types);
}

/* A new job no replica holds is offered: to the replica it prefers while that lasts, else to any
 * (''). */
static int offered(const struct gr_store_op *o) { return o->owner && !o->owner[0]; }
static const char *offered_to(const struct gr_store_op *o) { return o->lease_s > 0 ? o->prefer : ""; }

/* Whom the n new jobs are offered to, each once, in a; 0 when none is offered. */
static int offers(struct arrays *a, struct gr_store_op **o, int n)
{
    for (int i = 0; i < n; i++) {
        if (!offered(o[i]))
            continue;
        int j = 0;
        while (j < i && !(offered(o[j]) && !strcmp(offered_to(o[j]), offered_to(o[i]))))
            j++;
        if (j == i)
            element(a, 0, offered_to(o[i]));
    }
    return a->n[0] > 0;
}

static int send_offers(struct pg *s, struct arrays *a)
{
    static const Oid types[1] = {TEXTOID};
    return send_arrays(s, GR_SQL_OFFERED, a, 1, types);
}

static int send_updates(struct pg *s, struct gr_store_op **o, int n)
{
    static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, INT8OID};
    struct arrays a = {0};
    for (int i = 0; i < n; i++) {
        element(&a, 0, o[i]->id), element(&a, 1, o[i]->status), element(&a, 2, o[i]->doc);
        element_int(&a, 3, o[i]->epoch);
    }
    return send_arrays(s, GR_SQL_UPDATE_MANY, &a, 4, types);
}

static int by_id(const void *x, const void *y)
{
    return strcmp((*(struct gr_store_op *const *)x)->id, (*(struct gr_store_op *const *)y)->id);
}

/* The datasets' marks, one a dataset (its latest: a statement may write a row once). o is sorted
 * here. */
static int send_used(struct pg *s, struct gr_store_op **o, int n)
{
    qsort(o, (size_t)n, sizeof *o, by_id);
    struct arrays a = {0};
    for (int i = 0; i < n;) {
        double at = o[i]->created;
        int k = i + 1;
        for (; k < n && !strcmp(o[k]->id, o[i]->id); k++)
            at = o[k]->created > at ? o[k]->created : at;
        element(&a, 0, o[i]->id), element_real(&a, 1, at);
        i = k;
    }
    static const Oid types[2] = {TEXTOID, FLOAT8OID};
    return send_arrays(s, GR_SQL_DS_USED_MANY, &a, 2, types);
}

/* --- the writer's batch: one pipeline, one round trip --- */

/* A statement sent and not yet answered: what its answer says of the n ops from o. */
enum sent_kind { SENT_TX, SENT_MANY, SENT_UPDATES, SENT_OP, SENT_PART };
struct sent {
    enum sent_kind kind;
    struct gr_store_op **o; /* SENT_MANY, _UPDATES: the ops it carries */
    int n;
    struct gr_store_op *op; /* SENT_OP: the op whose own statement it is; _PART: its input or key
                             * (NULL: new jobs' events or offers) */
};

struct batch {
    struct pg *s;
    struct sent *sent;
    int nsent, read, ok;
};

/* Read the answers of every statement sent so far (a sync ends them). */
static void read_answers(struct batch *b)
{
    PGconn *db = b->s->wdb;
    if (!PQpipelineSync(db)) {
        writer_failed(b->s, NULL);
        b->ok = 0;
        b->read = b->nsent;
        return;
    }
    for (; b->read < b->nsent; b->read++) {
        struct sent *t = &b->sent[b->read];
        PGresult *r = PQgetResult(db);
        ExecStatusType st = PQresultStatus(r);
        int ran = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
        if (!ran && st != PGRES_PIPELINE_ABORTED) /* the first failure is the one to tell */
            writer_failed(b->s, r);
        b->ok = b->ok && ran;
        if (ran && t->kind == SENT_TX && !strcmp(PQcmdStatus(r), "ROLLBACK"))
            b->ok = 0; /* a COMMIT of an aborted transaction answers ROLLBACK: it did not commit */
        if (ran && t->kind == SENT_OP) {
            int changes_row = t->op->sql == GR_SQL_DS_DELETE || t->op->sql == GR_SQL_JOB_DELETE ||
                              t->op->sql == GR_SQL_DS_INSERT || /* its intent gone: no row */
                              t->op->sql == GR_SQL_DS_INSERT_KEPT; /* fenced out: no row */
            t->op->code = changes_row && !strcmp(PQcmdTuples(r), "0") ? GR_ENOTFOUND : GR_OK;
        } else if (ran && t->kind == SENT_MANY) {
            for (int i = 0; i < t->n; i++)
                t->o[i]->code = GR_OK;
        } else if (ran && t->kind == SENT_UPDATES) {
            for (int i = 0; i < t->n; i++)
                t->o[i]->code = GR_ENOTFOUND; /* fenced, unless the statement names it below */
            for (int i = 0; i < PQntuples(r); i++) {
                long k = strtol(PQgetvalue(r, i, 0), NULL, 10);
                if (k >= 1 && k <= t->n)
                    t->o[k - 1]->code = GR_OK;
            }
        }
        PQclear(r);
        PQclear(PQgetResult(db)); /* the NULL that ends a statement's answer */
    }
    PGresult *r = PQgetResult(db); /* the sync's */
    b->ok = b->ok && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
}

/* Up to this many statements are sent before their answers are read: what the server has to
 * write back stays far below what a socket holds, so neither side waits on the other. */
#define PIPELINE_STATEMENTS 256

/* Note a statement sent (sent: what sending returned), reading the answers every
 * PIPELINE_STATEMENTS of them. */
static void sent(struct batch *b, int sent, struct sent t)
{
    if (!b->ok)
        return;
    if (!sent) {
        writer_failed(b->s, NULL);
        b->ok = 0;
        return;
    }
    b->sent[b->nsent++] = t;
    if (b->nsent - b->read >= PIPELINE_STATEMENTS)
        read_answers(b);
}

static int send_tx(struct pg *s, const char *sql) { return PQsendQueryParams(s->wdb, sql, 0, NULL, NULL, NULL, NULL, 0); }

/* Whether two of the n ops name one id (an UPDATE ... FROM changes a row once, whichever of its
 * matches it takes). */
static int repeats_id(struct gr_store_op **ops, int n)
{
    struct gr_store_op **v = malloc(sizeof *v * (size_t)n);
    int dup = !v;
    if (v) {
        memcpy(v, ops, sizeof *v * (size_t)n);
        qsort(v, (size_t)n, sizeof *v, by_id);
        for (int i = 1; i < n && !dup; i++)
            dup = !strcmp(v[i - 1]->id, v[i]->id);
    }
    free(v);
    return dup;
}

/* Each kind of op of ops (n of them), in chunks of MANY_MAX, through send; updates one a
 * statement, in order, where one job has two. */
static void send_chunks(struct batch *b, struct gr_store_op **ops, int n, enum sent_kind kind,
                        int (*send)(struct pg *, struct gr_store_op **, int))
{
    int most = kind == SENT_UPDATES && repeats_id(ops, n) ? 1 : MANY_MAX;
    for (int i = 0; i < n && b->ok; i += most) {
        int k = n - i < most ? n - i : most;
        sent(b, send(b->s, ops + i, k), (struct sent){kind, ops + i, k, NULL});
    }
}

/* New jobs in chunks of MANY_MAX: each chunk's rows, its events, the offers it makes. */
static void send_new(struct batch *b, struct gr_store_op **ops, int n)
{
    for (int i = 0; i < n && b->ok; i += MANY_MAX) {
        int k = n - i < MANY_MAX ? n - i : MANY_MAX;
        sent(b, send_inserts(b->s, ops + i, k), (struct sent){SENT_MANY, ops + i, k, NULL});
        if (b->ok)
            sent(b, send_events(b->s, ops + i, k), (struct sent){.kind = SENT_PART});
        struct arrays a = {0};
        if (b->ok && offers(&a, ops + i, k))
            sent(b, send_offers(b->s, &a), (struct sent){.kind = SENT_PART});
        free(a.a[0].p); /* none offered, or not sent (sending frees it) */
    }
}

/* The whole transaction in one pipeline: BEGIN, the batch's statements, COMMIT; one round trip
 * for all of it (and one more every PIPELINE_STATEMENTS statements). Like writes go as one
 * statement each kind, in an order that keeps every dependency a batch can hold: new jobs
 * first (their inputs and keys after them), then the writes that are one statement an op in
 * the order queued (datasets, deletes, keys expired), then jobs' final states, then the
 * datasets' marks of use. Nothing outside the transaction sees its order. Any error aborts the
 * transaction: -1 then (the batch is retried op by op). */
static int pg_apply(void *impl, struct gr_store_op *o, int n)
{
    struct pg *s = impl;
    struct gr_store_op **by = malloc(sizeof *by * ((size_t)n * 3 + 1));
    struct batch b = {s, malloc(sizeof *b.sent * ((size_t)n * 3 + 8)), 0, 0, 1};
    s->committed = 0;
    if (!by || !b.sent || !PQenterPipelineMode(s->wdb)) {
        free(by);
        free(b.sent);
        return writer_failed(s, NULL);
    }
    struct gr_store_op **ins = by, **upd = by + n, **used = by + 2 * n;
    int nins = 0, nupd = 0, nused = 0;
    struct gr_store_op *x = o;
    for (int k = 0; k < n && x; k++, x = x->next) {
        x->code = GR_EIO;
        if (x->sql == GR_SQL_INSERT)
            ins[nins++] = x;
        else if (x->sql == GR_SQL_UPDATE)
            upd[nupd++] = x;
        else if (x->sql == GR_SQL_DS_USED)
            used[nused++] = x;
    }
    sent(&b, send_tx(s, "BEGIN"), (struct sent){SENT_TX});
    send_new(&b, ins, nins);
    x = o;
    for (int k = 0; k < n && b.ok; k++, x = x->next) {
        int own = x->sql != GR_SQL_INSERT && x->sql != GR_SQL_UPDATE && x->sql != GR_SQL_DS_USED;
        if (own && b.ok)
            sent(&b, send_op(s, x->sql, x), (struct sent){SENT_OP, .op = x});
        if (x->sql == GR_SQL_INSERT && x->input && x->input_bytes > INT32_MAX) { /* more than a bytea carries */
            snprintf(s->state, sizeof s->state, "54000");
            snprintf(s->msg, sizeof s->msg, "job %s: an input of %zu bytes is more than one write carries", x->id,
                     x->input_bytes);
            b.ok = 0;
        }
        if (b.ok && x->sql == GR_SQL_INSERT && x->input && !gr_inline_input(x))
            sent(&b, send_op(s, GR_SQL_INPUT, x), (struct sent){SENT_PART, .op = x});
        if (b.ok && (x->sql == GR_SQL_INSERT || x->sql == GR_SQL_DS_INSERT) && x->key)
            sent(&b, send_op(s, GR_SQL_KEY_INSERT, x), (struct sent){SENT_PART, .op = x});
    }
    send_chunks(&b, upd, nupd, SENT_UPDATES, send_updates);
    send_chunks(&b, used, nused, SENT_MANY, send_used);
    if (b.ok)
        sent(&b, send_tx(s, "COMMIT"), (struct sent){SENT_TX});
    if (b.read < b.nsent || !b.ok)
        read_answers(&b);
    s->committed = b.ok;
    free(by);
    free(b.sent);
    if (!PQexitPipelineMode(s->wdb)) { /* answers left unread: a connection in a known state instead */
        writer_failed(s, NULL);
        PQreset(s->wdb);
        prepare_all(s->wdb, GR_SQL_NREAD, GR_SQL_N, NULL);
        s->committed = 0;
    }
    if (!s->committed)
        for (x = o; n-- > 0 && x; x = x->next)
            x->code = GR_EIO;
    return s->committed ? 0 : -1;
}

/* The transaction is begun and committed in apply's pipeline; here the connection is checked. */
static int pg_begin(void *impl)
{
    struct pg *s = impl;
    struct gr_err e;
    if (alive(s->wdb, GR_SQL_NREAD, GR_SQL_N, &e) != GR_OK) {
        writer_failed(s, NULL);
        return 0;
    }
    return 1;
}

static int pg_commit(void *impl) { return ((struct pg *)impl)->committed; }

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
    .key_hold = pg_key_hold,
    .slot = pg_slot,
    .listen = pg_listen,
    .replica = pg_replica,
    .ping = pg_ping,
    .close = pg_close,
};
