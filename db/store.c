/* store.c: the store interface (store.h) over its backends (store_backend.h): SQLite, or
 * PostgreSQL for a store shared by replicas. Callers' threads queue writes; the one writer thread
 * commits whatever is queued as one transaction (group commit) and runs their callbacks. Reads
 * go straight to the backend on the caller's thread. */
#include "db/store_backend.h"

#include "db/dsfile.h"
#include "db/schema.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct gr_store_op op_t;

/* PostgreSQL's writers: each commits on a connection of its own, so that a replica's commits
 * overlap in the server (one connection's backend process had been what limits a replica). */
#define MAX_WRITERS GR_STORE_WRITERS_MAX
/* Ids with writes queued, or in a batch not yet committed, and the writer they went to: a later
 * write of the same id goes to that writer too, and so commits after them. */
#define ROUTE_BUCKETS 4096

struct route {
    struct route *next;
    int writer, pending;
    char id[];
};

struct writer {
    struct gr_store *s;
    void *impl; /* its backend connection: the store's own for the first writer */
    pthread_t thread;
    int started;
    pthread_cond_t cv;
    op_t *head, **tail;
    unsigned pushed; /* lists queued so far (__atomic): watched by the writer before it sleeps */
    uint64_t batch;  /* the number of the batch it commits now, 0 between batches (told_mu) */
};

struct gr_store {
    const struct gr_store_backend *b;
    void *impl; /* reads, and the first writer's writes */
    char *dir;
    struct writer w[MAX_WRITERS];
    int nwriters;
    pthread_mutex_t mu; /* the writers' queues, routes and closing; never taken by reads */
    struct route *routes[ROUTE_BUCKETS];
    int closing;
    /* batches the writers have taken, and the number below which all have had their done
     * callbacks run: an events read waits for the second to reach the first, so no event is seen
     * before its write is told */
    pthread_mutex_t told_mu;
    pthread_cond_t told_cv;
    uint64_t begun, told;
    _Atomic uint64_t version;
    char owner[64]; /* this replica on a shared store (gr_store_join) */
    double lease_s;
    void (*_Atomic observer)(double ms, int writes); /* told of each commit (metrics), or NULL */
    void (*_Atomic after)(void);                     /* after each commit's done callbacks, or NULL */
};

/* Commit the n writes from o (one, or a group that stands or falls together) in a transaction of
 * their own; on failure each gets the first failure's code. */
static void commit_alone(struct writer *w, op_t *o, int n)
{
    const struct gr_store_backend *b = w->s->b;
    int code = GR_OK;
    if (!b->begin(w->impl)) {
        code = b->failed(w->impl);
    } else {
        b->apply(w->impl, o, n);
        op_t *x = o;
        for (int k = 0; k < n && code == GR_OK; k++, x = x->next)
            code = x->code;
        if (code != GR_OK || !b->commit(w->impl)) {
            if (code == GR_OK || code == GR_EIO)
                code = b->failed(w->impl);
            b->rollback(w->impl);
        }
    }
    for (int k = 0; k < n; k++, o = o->next)
        o->code = code;
}

static int closing(struct gr_store *s)
{
    pthread_mutex_lock(&s->mu);
    int c = s->closing;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* 0 if a write of a group failed (SQLite goes on past a duplicate id): the group must not commit
 * in part. */
static int groups_whole(op_t *o)
{
    for (int left = 0, ok = 1; o; o = o->next, left--) {
        if (o->group > 1)
            left = o->group, ok = 1;
        ok &= o->code == GR_OK;
        if (left > 0 && !ok)
            return 0;
    }
    return 1;
}

/* One transaction for the whole batch: this is what keeps many small jobs from costing a
 * transaction each. 1 if it committed. */
static int try_batch(struct writer *w, op_t *batch)
{
    const struct gr_store_backend *b = w->s->b;
    int n = 0;
    for (op_t *o = batch; o; o = o->next)
        n++;
    return b->begin(w->impl) && b->apply(w->impl, batch, n) == 0 && groups_whole(batch) && b->commit(w->impl);
}

static unsigned route_hash(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h;
}

static struct route **route_slot(struct gr_store *s, const char *id)
{
    struct route **r = &s->routes[route_hash(id) % ROUTE_BUCKETS];
    while (*r && strcmp((*r)->id, id))
        r = &(*r)->next;
    return r;
}

/* What a write is routed by: its id, or the job it must not commit after (a dataset's mark). */
static const char *key(const op_t *o) { return o->via[0] ? o->via : o->id; }

/* The writer for the writes of list head (mu held): the one that has a write of one of their ids
 * still to commit, else one by the first id. Each id is noted as routed there. */
static struct writer *route(struct gr_store *s, op_t *head)
{
    if (s->nwriters == 1)
        return &s->w[0];
    int k = -1;
    for (op_t *o = head; o && k < 0; o = o->next) {
        struct route *r = *route_slot(s, key(o));
        k = r ? r->writer : -1;
    }
    if (k < 0)
        k = (int)(route_hash(key(head)) % (unsigned)s->nwriters);
    for (op_t *o = head; o; o = o->next) {
        struct route **r = route_slot(s, key(o));
        if (!*r && (*r = calloc(1, sizeof **r + strlen(key(o)) + 1))) {
            (*r)->writer = k;
            memcpy((*r)->id, key(o), strlen(key(o)) + 1);
        }
        if (*r)
            (*r)->pending++;
    }
    return &s->w[k];
}

/* The writes of batch are committed (or failed): their ids no longer hold a writer. */
static void unroute(struct gr_store *s, op_t *batch)
{
    if (s->nwriters == 1)
        return;
    pthread_mutex_lock(&s->mu);
    for (op_t *o = batch; o; o = o->next) {
        struct route **r = route_slot(s, key(o)), *dead = *r;
        if (dead && --dead->pending <= 0) {
            *r = dead->next;
            free(dead);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void commit_batch(struct writer *w, op_t *batch)
{
    struct gr_store *s = w->s;
    const struct gr_store_backend *b = s->b;
    double t0 = gr_mono_ms();
    if (b->usable(w->impl, NULL) != GR_OK) { /* nothing is written: every write of the batch fails */
        for (op_t *o = batch; o; o = o->next)
            o->code = GR_EIO;
        goto done;
    }
    int ok = try_batch(w, batch);
    /* A store out of reach (a PostgreSQL restart) comes back: its writes wait for it rather than
     * fail, so a job's final state is not lost to a failover. Until gpured stops. */
    for (int ms = 50; !ok && b->failed(w->impl) == GR_EUNAVAIL && !closing(s); ms = ms < 1000 ? 2 * ms : ms) {
        if (ms == 50)
            fprintf(stderr, "gpured: store: out of reach (%s); writes wait for it\n", b->message(w->impl));
        b->rollback(w->impl);
        struct timespec t = {0, ms * 1000000L};
        nanosleep(&t, NULL);
        ok = try_batch(w, batch);
    }
    if (!ok) {
        fprintf(stderr, "gpured: store: batch commit failed (%s); retrying each write alone\n", b->message(w->impl));
        b->rollback(w->impl);
        for (op_t *o = batch; o;) {
            int n = o->group > 1 ? o->group : 1;
            commit_alone(w, o, n);
            while (n-- && o)
                o = o->next;
        }
    }
done:
    atomic_fetch_add(&s->version, 1);
    void (*observer)(double, int) = atomic_load(&s->observer);
    if (observer) {
        int n = 0;
        for (op_t *o = batch; o; o = o->next)
            n++;
        observer(gr_mono_ms() - t0, n);
    }
    unroute(s, batch);
    while (batch) {
        op_t *next = batch->next;
        if (batch->done)
            batch->done(batch->ctx, batch->code);
        free(batch->doc);
        free(batch->key);
        free(batch);
        batch = next;
    }
    void (*after)(void) = atomic_load(&s->after);
    if (after)
        after();
}

/* The number below which every batch has had its callbacks run (told_mu held). */
static uint64_t told_below(struct gr_store *s)
{
    uint64_t n = s->begun + 1;
    for (int k = 0; k < s->nwriters; k++)
        if (s->w[k].batch && s->w[k].batch < n)
            n = s->w[k].batch;
    return n;
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct gr_store *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        for (int spun = 0; !w->head && !s->closing;) /* a small job's end is often a moment away */
            gr_idle_wait(&w->cv, &s->mu, &w->pushed, &spun);
        op_t *batch = w->head;
        if (!batch)
            break;
        w->head = NULL;
        w->tail = &w->head;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->told_mu);
        w->batch = ++s->begun;
        pthread_mutex_unlock(&s->told_mu);
        commit_batch(w, batch);
        pthread_mutex_lock(&s->told_mu);
        w->batch = 0;
        s->told = told_below(s) - 1;
        pthread_cond_broadcast(&s->told_cv);
        pthread_mutex_unlock(&s->told_mu);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The writers commit what is queued and end; then the backend closes. */
static void free_store(struct gr_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    for (int k = 0; k < s->nwriters; k++)
        pthread_cond_signal(&s->w[k].cv);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < s->nwriters; k++) {
        if (s->w[k].started)
            pthread_join(s->w[k].thread, NULL);
        if (k > 0 && s->w[k].impl)
            s->b->close(s->w[k].impl);
        pthread_cond_destroy(&s->w[k].cv);
    }
    if (s->impl)
        s->b->close(s->impl);
    for (int k = 0; k < ROUTE_BUCKETS; k++)
        for (struct route *r = s->routes[k], *next; r; r = next) {
            next = r->next;
            free(r);
        }
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->told_mu);
    pthread_cond_destroy(&s->told_cv);
    free(s->dir);
    free(s);
}

static void found(void *ctx, const char *id, const char *doc)
{
    (void)id, (void)doc;
    *(int *)ctx = 1;
}

/* Does anything name dataset id's file: its row, or (a shared store) a live replica's intent?
 * When it cannot be told, yes, so that nothing is removed in doubt. */
static int file_named(void *ctx, const char *id)
{
    struct gr_store *s = ctx;
    char *doc = NULL;
    int named = 0;
    if (s->b->replica)
        return s->b->replica(s->impl, GR_SQL_FILE_NAMED, s->owner, s->lease_s, id, found, &named, NULL) != GR_OK ||
               named;
    int rc = s->b->get(s->impl, GR_SQL_DS_GET, id, NULL, &doc, NULL, NULL);
    free(doc);
    return rc != GR_ENOTFOUND;
}

int gr_store_open(struct gr_store **out, const char *url, const char *data_dir, struct gr_err *e)
{
    return gr_store_open_with(out, url, data_dir, 0, e);
}

/* A writer for each four cores, up to four: on a small machine more writers only make smaller
 * commits that compete for the same cores with the database, the workers and the HTTP threads. */
static int auto_writers(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores >= 16 ? 4 : cores >= 8 ? (int)(cores / 4) : 1;
}

int gr_store_open_with(struct gr_store **out, const char *url, const char *data_dir, int writers, struct gr_err *e)
{
    *out = NULL;
    int pg = url && (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11));
    if (url && *url && !pg && strncmp(url, "sqlite:", 7))
        return gr_fail(e, GR_EINVAL, NULL, "store: '%s' is neither sqlite:PATH nor postgresql://...", url);
    struct gr_store *s = calloc(1, sizeof *s);
    if (!s)
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    gr_mutex_init(&s->mu);
    pthread_mutex_init(&s->told_mu, NULL);
    pthread_cond_init(&s->told_cv, NULL);
    if (writers < 0 || writers > MAX_WRITERS) {
        free(s);
        return gr_fail(e, GR_EINVAL, NULL, "store: %d writers: 0 (as the cores allow) to %d", writers, MAX_WRITERS);
    }
    s->nwriters = !pg ? 1 : writers ? writers : auto_writers(); /* SQLite's file has one writer at a time */
    for (int k = 0; k < s->nwriters; k++) {
        s->w[k].s = s;
        s->w[k].tail = &s->w[k].head;
        pthread_cond_init(&s->w[k].cv, NULL);
    }
    s->b = pg ? &gr_pg_store : &gr_sqlite_store;
    int code = GR_OK;
    if (mkdir(data_dir, 0750) != 0 && errno != EEXIST)
        code = gr_fail(e, GR_EIO, NULL, "store: cannot create %s: %s", data_dir, strerror(errno));
    else if (!(s->dir = strdup(data_dir)))
        code = gr_fail(e, GR_EIO, NULL, "store: out of memory");
    /* sqlite:PATH names the file's directory, the data dir itself by default */
    const char *where = url && !strncmp(url, "sqlite:", 7) && url[7] ? url + 7 : data_dir;
    if (code == GR_OK)
        code = pg ? gr_pg_store_open(url, &s->impl, e) : gr_sqlite_store_open(where, &s->impl, e);
    if (code == GR_OK)
        code = gr_dsfile_init(data_dir, file_named, s, e);
    s->w[0].impl = s->impl;
    for (int k = 1; code == GR_OK && k < s->nwriters; k++)
        code = gr_pg_store_open(url, &s->w[k].impl, e);
    for (int k = 0; code == GR_OK && k < s->nwriters; k++) {
        struct writer *w = &s->w[k];
        if (!(w->started = pthread_create(&w->thread, NULL, writer_main, w) == 0))
            code = gr_fail(e, GR_EIO, NULL, "store: cannot start a writer thread");
        else
            pthread_setname_np(w->thread, "gr-store-writer");
    }
    if (code != GR_OK) {
        free_store(s);
        return code;
    }
    *out = s;
    return GR_OK;
}

void gr_store_close(struct gr_store *s)
{
    if (s)
        free_store(s);
}

const char *gr_store_backend_name(struct gr_store *s) { return s->b->name; }

int gr_store_clean_files(struct gr_store *s, struct gr_err *e)
{
    if (s->b->replica && s->b->replica(s->impl, GR_SQL_INTENTS_PURGE, s->owner, s->lease_s, NULL, NULL, NULL, e))
        return GR_EIO;
    return gr_dsfile_init(s->dir, file_named, s, e);
}

int gr_store_intend(struct gr_store *s, const char *id, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_INTENT, s->owner, s->lease_s, id, NULL, NULL, e) : GR_OK;
}

void gr_store_unintend(struct gr_store *s, const char *id)
{
    struct gr_err e = {0};
    if (s->b->replica && s->b->replica(s->impl, GR_SQL_INTENT_DROP, s->owner, s->lease_s, id, NULL, NULL, &e))
        fprintf(stderr, "gpured: store: dropping a dataset file's intent: %s (the purge takes it once this replica "
                        "is gone)\n", e.msg);
}

/* A write of statement sql. Takes doc in every case (NULL only for a delete). NULL with doc
 * freed if the arguments are bad or memory is out. */
static op_t *new_op(int sql, const char *id, const char *status, char *doc, gr_store_done done, void *ctx)
{
    op_t *o = NULL;
    if (id && status && (doc || sql == GR_SQL_DS_DELETE || sql == GR_SQL_JOB_DELETE || sql == GR_SQL_KEYS_EXPIRE ||
                          sql == GR_SQL_DS_USED) &&
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
static op_t *owned(op_t *o, const struct gr_owner *own)
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
    if (own && own->offer && strlen(own->offer) < sizeof o->prefer) {
        o->owner = "";
        o->lease_s = own->offer[0] ? GR_OFFER_FIRST_S : -1;
        memcpy(o->prefer, own->offer, strlen(own->offer) + 1);
    }
    if (o->key)
        memcpy(o->fingerprint, own->fingerprint, strlen(own->fingerprint) + 1);
    return o;
}

/* Queue the writes of list head (linked, last the last one's next) at once: the
 * writer takes them into one transaction. Frees them all if one is NULL (bad arguments, memory)
 * or the store is closing. */
static int push_list(struct gr_store *s, op_t *head, op_t **last, int bad)
{
    for (op_t *o = head; o && !bad; o = o->next)
        if (!o->owner) { /* held by this replica, unless offered (owned) */
            o->owner = s->owner;
            o->lease_s = s->lease_s;
        }
    pthread_mutex_lock(&s->mu);
    int closing = s->closing;
    if (!closing && !bad) {
        struct writer *w = route(s, head);
        *w->tail = head;
        w->tail = last;
        __atomic_fetch_add(&w->pushed, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (closing || bad) {
        while (head) {
            op_t *next = head->next;
            free(head->doc);
            free(head->key);
            free(head);
            head = next;
        }
        return bad ? GR_EINVAL : GR_EIO;
    }
    return GR_OK;
}

static int push(struct gr_store *s, op_t *o) { return push_list(s, o, o ? &o->next : NULL, !o); }

int gr_store_insert_jobs(struct gr_store *s, struct gr_store_job *v, int n, gr_store_done done)
{
    op_t *head = NULL, **tail = &head;
    int bad = !s || n < 1;
    for (int k = 0; k < n; k++) {
        const struct gr_store_job *x = &v[k];
        op_t *o = NULL;
        if (bad || x->op < 0 || x->op > GR_MATMUL || (!x->input && x->input_bytes)) {
            free(x->doc);
            bad = 1;
            continue;
        }
        if ((o = owned(new_op(GR_SQL_INSERT, x->id, x->status, x->doc, done, x->ctx), &x->own))) {
            o->opname = gr_op_name(x->op);
            o->input = x->input;
            o->input_bytes = x->input_bytes;
            *tail = o;
            tail = &o->next;
        }
        bad |= !o;
    }
    if (head)
        head->group = n; /* committed together or not at all, also when the batch is retried op by op */
    return push_list(s, head, tail, bad);
}

int gr_store_insert_job(struct gr_store *s, const char *id, int op, const char *status, char *doc,
                        const void *input, size_t input_bytes, const struct gr_owner *own, gr_store_done done,
                        void *ctx)
{
    struct gr_store_job x = {id, op, status, doc, input, input_bytes, own ? *own : (struct gr_owner){0}, ctx};
    return gr_store_insert_jobs(s, &x, 1, done);
}

int gr_store_update_job(struct gr_store *s, const char *id, const char *tenant, const char *status, char *doc,
                        int64_t epoch, gr_store_done done, void *ctx)
{
    if (!s) {
        free(doc);
        return GR_EINVAL;
    }
    op_t *o = new_op(GR_SQL_UPDATE, id, status, doc, done, ctx);
    if (o)
        o->epoch = epoch;
    return push(s, owned(o, &(struct gr_owner){.tenant = tenant}));
}

int gr_store_insert_dataset(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes,
                            char *doc, gr_store_done done, void *ctx)
{
    if (!s || bytes > INT64_MAX) {
        free(doc);
        return GR_EINVAL;
    }
    op_t *o = new_op(GR_SQL_DS_INSERT, id, "", doc, done, ctx);
    if (o)
        o->bytes = (int64_t)bytes;
    return push(s, owned(o, own));
}

int gr_store_insert_kept(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes, char *doc,
                         const char *job, int64_t epoch, gr_store_done done, void *ctx)
{
    if (!s || bytes > INT64_MAX || !job || strlen(job) >= sizeof ((op_t *)0)->via) {
        free(doc);
        return GR_EINVAL;
    }
    op_t *o = new_op(GR_SQL_DS_INSERT_KEPT, id, "", doc, done, ctx);
    if (o) {
        o->bytes = (int64_t)bytes;
        o->epoch = epoch;
        memcpy(o->via, job, strlen(job) + 1); /* the job's writer: committed before its final state */
    }
    return push(s, owned(o, own));
}

int gr_store_delete_dataset(struct gr_store *s, const char *id, gr_store_done done, void *ctx)
{
    return s ? push(s, new_op(GR_SQL_DS_DELETE, id, "", NULL, done, ctx)) : GR_EINVAL;
}

int gr_store_dataset_used(struct gr_store *s, const char *id, double at, const char *job)
{
    op_t *o = s ? new_op(GR_SQL_DS_USED, id, "", NULL, NULL, NULL) : NULL;
    if (o)
        o->created = at;
    if (o && job) /* the job's writer: its write queued next commits with the mark or after it */
        snprintf(o->via, sizeof o->via, "%s", job);
    return s ? push(s, o) : GR_EINVAL;
}

int gr_store_dataset_digest(struct gr_store *s, const char *id, const char *hex)
{
    return s ? push(s, new_op(GR_SQL_DS_DIGEST, id, "", strdup(hex), NULL, NULL)) : GR_EINVAL;
}

int gr_store_delete_job(struct gr_store *s, const char *id, gr_store_done done, void *ctx)
{
    return s ? push(s, new_op(GR_SQL_JOB_DELETE, id, "", NULL, done, ctx)) : GR_EINVAL;
}

int gr_store_expire_keys(struct gr_store *s, double before, gr_store_done done, void *ctx)
{
    op_t *o = s ? new_op(GR_SQL_KEYS_EXPIRE, "", "", NULL, done, ctx) : NULL;
    if (o)
        o->created = before;
    return s ? push(s, o) : GR_EINVAL;
}

int gr_store_get_job(struct gr_store *s, const char *id, const char *scope, char **doc, char status[16],
                     struct gr_err *e)
{
    return s->b->get(s->impl, GR_SQL_GET, id, scope, doc, status, e);
}

int gr_store_get_dataset(struct gr_store *s, const char *id, const char *scope, char **doc, struct gr_err *e)
{
    return s->b->get(s->impl, GR_SQL_DS_GET, id, scope, doc, NULL, e);
}

int gr_store_get_key(struct gr_store *s, const char *tenant, const char *key, double since, char fingerprint[65],
                     char resource[24], struct gr_err *e)
{
    return s->b->get_key(s->impl, tenant, key, since, fingerprint, resource, e);
}

/* Rows read for a merge: each id with its doc (or a tenant's or an op's name twice). */
struct rows {
    struct kept {
        char *id, *doc;
    } *v;
    int n, cap, lost;
};

static void keep(void *ctx, const char *id, const char *doc)
{
    struct rows *r = ctx;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        struct kept *v = realloc(r->v, (size_t)cap * sizeof *v);
        if (!v) {
            r->lost = 1;
            return;
        }
        r->v = v, r->cap = cap;
    }
    struct kept *k = &r->v[r->n];
    k->id = strdup(id);
    k->doc = strdup(doc);
    r->n++;
    r->lost |= !k->id || !k->doc;
}

static void free_rows(struct rows *r)
{
    for (int k = 0; k < r->n; k++)
        free(r->v[k].id), free(r->v[k].doc);
    free(r->v);
}

static int newest_first(const void *a, const void *b) { return strcmp(((const struct kept *)b)->id, ((const struct kept *)a)->id); }

/* A list no one index serves: one of every tenant (an admin's, or one without tokens) that
 * names an op or a status other than "succeeded", or one tenant's that names no op and no status
 * other than "succeeded" (every job index leads with the tenant and names an op or a status:
 * sqlite_schema.c says why). Each tenant's page, or each of the tenant's ops' page, is read
 * through its index and the pages merged, newest first. Ids order as the statements order them
 * (bytewise), so the first limit of the merge are the first limit of all. */
static int list_merged(struct gr_store *s, int sql, const char *status, const char *op, const char *tenant,
                       const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    struct rows keys = {0}, page = {0};
    int code = s->b->list(s->impl, tenant ? GR_SQL_OPS : GR_SQL_TENANTS, NULL, limit, NULL, NULL, tenant, keep, &keys, e);
    for (int k = 0; code == GR_OK && !keys.lost && k < keys.n; k++)
        code = tenant ? s->b->list(s->impl, sql | GR_SQL_LIST_OP, before, limit, status, keys.v[k].doc, tenant, keep,
                                   &page, e)
                      : s->b->list(s->impl, sql | GR_SQL_LIST_TENANT, before, limit, status, op, keys.v[k].doc, keep,
                                   &page, e);
    if (code == GR_OK && (keys.lost || page.lost))
        code = gr_fail(e, GR_EIO, NULL, "store: out of memory");
    if (code == GR_OK && page.n) { /* none: v is NULL, which qsort may not be given */
        qsort(page.v, (size_t)page.n, sizeof *page.v, newest_first);
        for (int k = 0; k < page.n && k < limit; k++)
            row(ctx, page.v[k].id, page.v[k].doc);
    }
    free_rows(&keys);
    free_rows(&page);
    return code;
}

int gr_store_list_jobs(struct gr_store *s, const char *tenant, const char *status, const char *op,
                       const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    int succeeded = status && !strcmp(status, "succeeded");
    int sql = GR_SQL_LIST_ALL | (status ? GR_SQL_LIST_STATUS : 0) | (op ? GR_SQL_LIST_OP : 0) |
              (tenant ? GR_SQL_LIST_TENANT : 0) | (succeeded ? GR_SQL_LIST_SUCCEEDED : 0);
    if (tenant ? !op && (!status || succeeded) : op || (status && !succeeded))
        return list_merged(s, sql, status, op, tenant, before, limit, row, ctx, e);
    return s->b->list(s->impl, sql, before, limit, status, op, tenant, row, ctx, e);
}

int gr_store_list_datasets(struct gr_store *s, const char *tenant, const char *before, int limit, gr_store_row row,
                           void *ctx, struct gr_err *e)
{
    return s->b->list(s->impl, tenant ? GR_SQL_DS_LIST_TENANT : GR_SQL_DS_LIST, before, limit, NULL, NULL, tenant,
                      row, ctx, e);
}

int gr_store_list_expired(struct gr_store *s, const char *before, int limit, gr_store_row row, void *ctx,
                          struct gr_err *e)
{
    return s->b->list(s->impl, GR_SQL_EXPIRED, before, limit, NULL, NULL, NULL, row, ctx, e);
}

int gr_store_events(struct gr_store *s, int64_t after, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    char from[24];
    snprintf(from, sizeof from, "%lld", (long long)after);
    int rc = s->b->list(s->impl, GR_SQL_EVENTS, from, limit, NULL, NULL, NULL, row, ctx, e);
    /* A batch whose events this read saw began before the read ended: once every batch begun by
     * now is told, a job's end heard from a stream is the end a GET of it shows. */
    gr_store_wait_told(s, gr_store_begun(s));
    return rc;
}

uint64_t gr_store_begun(struct gr_store *s)
{
    pthread_mutex_lock(&s->told_mu);
    uint64_t n = s->begun;
    pthread_mutex_unlock(&s->told_mu);
    return n;
}

int gr_store_settled(struct gr_store *s, uint64_t n)
{
    pthread_mutex_lock(&s->told_mu);
    int told = s->told >= n;
    pthread_mutex_unlock(&s->told_mu);
    return told;
}

void gr_store_wait_told(struct gr_store *s, uint64_t n)
{
    pthread_mutex_lock(&s->told_mu);
    while (s->told < n)
        pthread_cond_wait(&s->told_cv, &s->told_mu);
    pthread_mutex_unlock(&s->told_mu);
}

static void seq_of(void *ctx, const char *seq, const char *event) { *(int64_t *)ctx = strtoll(seq, NULL, 10); }

int gr_store_events_span(struct gr_store *s, int64_t *oldest, int64_t *newest, struct gr_err *e)
{
    *oldest = *newest = 0;
    int rc = s->b->list(s->impl, GR_SQL_EVENTS, "-1", 1, NULL, NULL, NULL, seq_of, oldest, e);
    return rc ? rc : s->b->list(s->impl, GR_SQL_EVENTS_LAST, "-1", 1, NULL, NULL, NULL, seq_of, newest, e);
}

static void own_of(void *ctx, const char *unused, const char *row)
{
    struct gr_events_own *o = ctx;
    long long v[4];
    (void)unused;
    if (sscanf(row, "%lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3]) == 4)
        *o = (struct gr_events_own){v[0], v[1], v[2], v[3]};
}

int gr_store_events_own(struct gr_store *s, const char *tenant, int64_t after, struct gr_events_own *o,
                        struct gr_err *e)
{
    char from[24];
    snprintf(from, sizeof from, "%lld", (long long)after);
    *o = (struct gr_events_own){-1, 0, 0, 0}; /* newest -1: no row read */
    int rc = s->b->list(s->impl, GR_SQL_EVENTS_OWN, from, 1, NULL, NULL, tenant, own_of, o, e);
    if (rc == GR_OK && o->newest < 0)
        rc = gr_fail(e, GR_EIO, NULL, "store: reading %s's event numbers gave no answer", tenant);
    return rc;
}

int gr_store_tenant_bytes(struct gr_store *s, gr_store_tenant tenant, void *ctx, struct gr_err *e)
{
    return s->b->tenant_bytes(s->impl, tenant, ctx, e);
}

int gr_store_load_pending(struct gr_store *s, int limit, const char *device, gr_store_pending pending, void *ctx,
                          struct gr_err *e)
{
    if (!s->b->lease)
        return s->b->load_pending(s->impl, pending, ctx, e);
    enum { BATCH = 256 }; /* a claim per batch: one round trip takes many small jobs */
    int left = limit > 0 ? limit : INT32_MAX, rc = GR_OK;
    for (int want = BATCH, n = BATCH; rc == GR_OK && n == want && left > 0; left -= n) {
        want = left < BATCH ? left : BATCH;
        rc = s->b->lease(s->impl, GR_SQL_CLAIM, s->owner, s->lease_s, want, device, pending, ctx, &n, e);
    }
    return rc;
}

void gr_store_join(struct gr_store *s, const char *replica, double lease_s)
{
    snprintf(s->owner, sizeof s->owner, "%s", replica);
    s->lease_s = lease_s;
}

int gr_store_shared(struct gr_store *s) { return s->b->lease != NULL; }

int gr_store_listen(struct gr_store *s, gr_store_told changed, gr_store_told offered, gr_store_told cancel, void *ctx,
                    struct gr_err *e)
{
    return s->b->listen ? s->b->listen(s->impl, changed, offered, cancel, ctx, e) : GR_OK;
}

int gr_store_hold_key(struct gr_store *s, const char *tenant, const char *key, double secs, struct gr_err *e)
{
    return s->b->key_hold ? s->b->key_hold(s->impl, 1, tenant, key, s->owner, secs, e) : GR_OK;
}

void gr_store_unhold_key(struct gr_store *s, const char *tenant, const char *key)
{
    struct gr_err e = {0};
    if (s->b->key_hold && s->b->key_hold(s->impl, 0, tenant, key, s->owner, 0, &e) != GR_OK)
        fprintf(stderr, "gpured: store: releasing an Idempotency-Key's hold: %s (it ends with its time)\n", e.msg);
}

static void count_of(void *ctx, const char *n, const char *unused) { *(long long *)ctx = strtoll(n, NULL, 10); }

int gr_store_dataset_jobs(struct gr_store *s, const char *id, long long *n, struct gr_err *e)
{
    *n = 0;
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_DS_JOBS, s->owner, s->lease_s, id, count_of, n, e) : GR_OK;
}

int gr_store_ask_cancel(struct gr_store *s, const char *id, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_CANCEL_ASK, s->owner, s->lease_s, id, NULL, NULL, e) : GR_OK;
}

int gr_store_announce(struct gr_store *s, const char *doc, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_ANNOUNCE, s->owner, s->lease_s, doc, NULL, NULL, e) : GR_OK;
}

int gr_store_leave(struct gr_store *s, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_LEAVE, s->owner, s->lease_s, NULL, NULL, NULL, e) : GR_OK;
}

int gr_store_replicas(struct gr_store *s, gr_store_row row, void *ctx, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_REPLICAS, s->owner, s->lease_s, NULL, row, ctx, e) : GR_OK;
}

int gr_store_slot(struct gr_store *s, int stride, long long *n, struct gr_err *e)
{
    *n = 0;
    return s->b->slot ? s->b->slot(s->impl, s->owner, s->lease_s, stride, n, e) : GR_OK;
}

int gr_store_cancel_job(struct gr_store *s, const char *id, const char *scope, const char *now, char **doc,
                        struct gr_err *e)
{
    *doc = NULL;
    return s->b->cancel ? s->b->cancel(s->impl, id, scope, now, doc, e) : GR_ENOTFOUND;
}

int gr_store_renew(struct gr_store *s, struct gr_err *e)
{
    int n;
    return s->b->lease ? s->b->lease(s->impl, GR_SQL_RENEW, s->owner, s->lease_s, 0, NULL, NULL, NULL, &n, e)
                       : GR_OK;
}

/* ids as an array literal ("{a,b}"; ids are letters, digits and '_', nothing to quote), run as
 * the $2 of statement sql. */
static int lease_ids(struct gr_store *s, int sql, char ids[][24], int n, struct gr_err *e)
{
    if (!s->b->lease)
        return GR_OK;
    char *lit = malloc((size_t)n * 25 + 3), *p = lit;
    if (!lit)
        return gr_fail(e, GR_EIO, NULL, "store: out of memory");
    *p++ = '{';
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "," : "", ids[i]);
    strcpy(p, "}");
    int got, rc = s->b->lease(s->impl, sql, s->owner, s->lease_s, 0, lit, NULL, NULL, &got, e);
    free(lit);
    return rc;
}

int gr_store_release(struct gr_store *s, char keep[][24], int nkeep, struct gr_err *e)
{
    return lease_ids(s, GR_SQL_RELEASE, keep, nkeep, e);
}

int gr_store_let_go(struct gr_store *s, char ids[][24], int n, struct gr_err *e)
{
    return lease_ids(s, GR_SQL_LET_GO, ids, n, e);
}

int gr_store_held(struct gr_store *s, gr_store_row row, void *ctx, struct gr_err *e)
{
    return s->b->replica ? s->b->replica(s->impl, GR_SQL_HELD, s->owner, s->lease_s, NULL, row, ctx, e) : GR_OK;
}


uint64_t gr_store_version(struct gr_store *s) { return atomic_load(&s->version); }

const char *gr_store_data_dir(struct gr_store *s) { return s->dir; }

void gr_store_observe_commits(struct gr_store *s, void (*fn)(double ms, int writes)) { atomic_store(&s->observer, fn); }

void gr_store_after_commits(struct gr_store *s, void (*fn)(void)) { atomic_store(&s->after, fn); }

int gr_store_ping(struct gr_store *s, struct gr_err *e) { return s->b->ping(s->impl, e); }

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
