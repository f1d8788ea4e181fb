/* store_backend.h: what each store backend (sqlite_store.c, pg_store.c) gives store.c, private
 * to db/ and its tests. store.c owns the queue of writes and the one writer thread that commits
 * them in batches; the writer calls the write hooks, any thread the reads (each backend keeps a
 * connection per reading thread). Statements are named by schema.h's gr_sql_id in both. */
#ifndef GR_STORE_BACKEND_H
#define GR_STORE_BACKEND_H

#include "db/store.h"

/* A queued write, allocated by the caller's thread and freed by the writer. Its fields are the
 * statement's parameters, numbered as schema.h says. */
struct gr_store_op {
    struct gr_store_op *next;
    int sql; /* GR_SQL_INSERT, _UPDATE, _DS_INSERT, _DS_DELETE, _JOB_DELETE or _KEYS_EXPIRE */
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
    int64_t epoch;     /* an update's fence */
    const char *owner; /* the replica, and its lease (gr_store_join); "" for a job offered */
    double lease_s;    /* < 0: claimable at once */
    char prefer[96];   /* the replica a job is offered to first, or "" */
    int group;         /* on the first op of writes committed together or not at all: their count */
    char *key; /* Idempotency-Key (malloc'd) or NULL */
    char fingerprint[65];
    char via[24]; /* routed as the writes of this id (store.c), if set */
    char id[];
};

/* Inputs up to this many bytes (a batch's jobs) are kept in their job's row, not in job_inputs:
 * a second row and its index entry for each small job were most of a big batch's insert. */
#define GR_INLINE_INPUT_BYTES 256

static inline int gr_inline_input(const struct gr_store_op *o) { return o->input && o->input_bytes <= GR_INLINE_INPUT_BYTES; }

struct gr_store_backend {
    const char *name; /* "sqlite" or "postgresql" */

    /* The writer thread's. begin/commit: 1 on success. apply runs n ops (o and the next ones)
     * inside the open transaction and sets each one's code (GR_OK, GR_ENOTFOUND for an update or
     * delete of no row, GR_EIO); it returns 0, or -1 when an error may have ended the
     * transaction or left half an op in it (the batch is then retried op by op). failed: the code of the last failure
     * (GR_ENOMEM: the disk is full; GR_EUNAVAIL: the store is out of reach, the batch is tried
     * again until it is back; else GR_EIO); message: its text. */
    int (*begin)(void *impl);
    int (*apply)(void *impl, struct gr_store_op *o, int n);
    int (*commit)(void *impl);
    void (*rollback)(void *impl);
    int (*failed)(void *impl);
    const char *(*message)(void *impl);
    /* GR_OK while the store can take a batch at all (before each one); else nothing is tried. */
    int (*usable)(void *impl, struct gr_err *e);

    /* Any thread's. As the gr_store_* functions of the same names; get reads GR_SQL_GET (doc and
     * status) or GR_SQL_DS_GET (doc; status NULL); list runs one of the list statements with
     * its parameters (NULL: not bound; before NULL: from the newest). */
    int (*get)(void *impl, int sql, const char *id, const char *scope, char **doc, char status[16],
               struct gr_err *e);
    int (*get_key)(void *impl, const char *tenant, const char *key, double since, char fingerprint[65],
                   char resource[24], struct gr_err *e);
    int (*list)(void *impl, int sql, const char *before, int limit, const char *status, const char *op,
                const char *tenant, gr_store_row row, void *ctx, struct gr_err *e);
    int (*tenant_bytes)(void *impl, gr_store_tenant tenant, void *ctx, struct gr_err *e);
    /* SQLite's: every job left queued or running. */
    int (*load_pending)(void *impl, gr_store_pending pending, void *ctx, struct gr_err *e);
    /* A shared store's (NULL on SQLite): start a thread of its own that calls changed and
     * offered as gr_store_listen says, until close. */
    int (*listen)(void *impl, gr_store_told changed, gr_store_told offered, gr_store_told cancel, void *ctx,
                  struct gr_err *e);
    /* A shared store's (NULL on SQLite): run GR_SQL_ANNOUNCE (doc), _LEAVE, _REPLICAS or _HELD
     * (row for each) for owner, or _CANCEL_ASK or _DS_JOBS (doc: the job's or dataset's id), on
     * the calling thread's connection. */
    int (*replica)(void *impl, int sql, const char *owner, double lease_s, const char *doc, gr_store_row row,
                   void *ctx, struct gr_err *e);
    /* A shared store's (NULL on SQLite): gr_store_hold_key (hold) or _unhold_key for owner. */
    int (*key_hold)(void *impl, int hold, const char *tenant, const char *key, const char *owner, double secs,
                    struct gr_err *e);
    /* A shared store's (NULL on SQLite): gr_store_slot for owner, its row kept lease_s. */
    int (*slot)(void *impl, const char *owner, double lease_s, int stride, long long *n, struct gr_err *e);
    /* A shared store's (NULL on SQLite): cancel a queued job another replica holds (*doc its
     * new state; GR_OK, GR_ENOTFOUND or GR_EIO). */
    int (*cancel)(void *impl, const char *id, const char *scope, const char *now, char **doc, struct gr_err *e);
    /* A shared store's (NULL on SQLite): run GR_SQL_RENEW, _CLAIM (at most limit jobs, those asking
     * for the device arg if not NULL, each to pending; *n how many), _RELEASE (all but the ids of
     * arg, an array literal) or _LET_GO (the ids of arg) for owner on the calling thread's
     * connection. */
    int (*lease)(void *impl, int sql, const char *owner, double lease_s, int limit, const char *arg,
                 gr_store_pending pending, void *ctx, int *n, struct gr_err *e);
    int (*ping)(void *impl, struct gr_err *e);

    /* Once the writer has stopped: every connection closed, impl freed. */
    void (*close)(void *impl);
};

/* Open a backend (SQLite: dir/gpured.db; PostgreSQL: libpq's url), migrated to the schema this
 * gpured knows: *impl for the backend's hooks. GR_OK, or GR_EIO with e filled. */
int gr_sqlite_store_open(const char *dir, void **impl, struct gr_err *e);
int gr_pg_store_open(const char *url, void **impl, struct gr_err *e);
extern const struct gr_store_backend gr_sqlite_store, gr_pg_store;

#endif
