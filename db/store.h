/* store.h: where jobs, datasets' rows and idempotency keys are kept: SQLite (one file, WAL) by
 * default, or PostgreSQL (a store several replicas share). Writes go through one writer thread
 * that commits whatever is pending as one transaction (group commit) and then calls each
 * write's done callback; reads use a connection owned by the calling thread. */
#ifndef GR_STORE_H
#define GR_STORE_H

#include "common/gr.h"

#include <pthread.h>

struct gr_store;

/* Open the store url names: NULL, "" or "sqlite:" for <data_dir>/gpured.db, "sqlite:DIR" for
 * DIR/gpured.db (WAL, synchronous=NORMAL, busy_timeout, schema migrated through PRAGMA
 * user_version), or "postgresql://..." (libpq's URI; PG* variables fill what it leaves out; schema
 * migrated under an advisory lock, so replicas may start at once). Datasets' values stay files
 * under data_dir, which is created (with its datasets/ folder, emptied of interrupted uploads) if
 * missing. Starts the writer thread. Returns GR_OK, or GR_EINVAL (url) or GR_EIO with e filled
 * and *out NULL. */
int gr_store_open(struct gr_store **out, const char *url, const char *data_dir, struct gr_err *e);
/* The same with this many writer threads, each on a connection of its own, on PostgreSQL (0: one
 * for each four cores, up to four; SQLite has one). A later write of an id goes to the writer
 * that has one of it to commit still, so each id's writes commit in the order queued; writes of
 * different ids may commit in either order. GR_EINVAL beyond GR_STORE_WRITERS_MAX. */
#define GR_STORE_WRITERS_MAX 8
int gr_store_open_with(struct gr_store **out, const char *url, const char *data_dir, int writers, struct gr_err *e);

/* "sqlite" or "postgresql". */
const char *gr_store_backend_name(struct gr_store *s);

/* Remove the dataset files a crash left (as at open): those no dataset's row names nor, on a
 * shared store, a live replica's intent (the retention sweep calls this there, after dropping the
 * intents of replicas gone). GR_OK or GR_EIO. */
int gr_store_clean_files(struct gr_store *s, struct gr_err *e);
/* Before dataset id's file is made: on a shared store, the store names it this replica's under
 * way, so no replica's cleanup removes it while this one's lease runs; the dataset's row takes
 * the intent's place, and is refused without it (the done code GR_ENOTFOUND: the lease ran out and
 * the file may be gone). unintend drops it once the file is removed unkept. GR_OK (nothing to do
 * on SQLite), GR_EUNAVAIL or GR_EIO. On the calling thread's connection. */
int gr_store_intend(struct gr_store *s, const char *id, struct gr_err *e);
void gr_store_unintend(struct gr_store *s, const char *id);

/* Commit everything still pending (running its callbacks), stop the writer, close every
 * connection. Safe on NULL. Not while a thread that has read from the store is exiting. */
void gr_store_close(struct gr_store *s);

/* Called on the writer thread after the write is committed (code GR_OK) or failed (GR_ENOMEM:
 * the disk is full; GR_EIO: another store failure; nothing of it was stored). Must not block. */
typedef void (*gr_store_done)(void *ctx, int code);

/* Who a new row belongs to, and the Idempotency-Key it was made under (key NULL: none): the
 * key's row is written in the same transaction as the row it names. On a shared store, a job
 * is held by the replica that inserts it unless offer is set: "" for any replica to claim, or a
 * replica's id for that one to claim within GR_OFFER_FIRST_S seconds, and any after. */
struct gr_owner {
    const char *tenant;
    const char *key, *fingerprint;
    const char *offer;
};
#define GR_OFFER_FIRST_S 1.0

/* For a thread that waits for its writes: queue each with gr_store_wait_done and the waiter as
 * done and ctx, counting it with gr_store_wait_add (rc: what queueing returned), then
 * gr_store_wait_all blocks until all are done and returns GR_OK or the first failure's code. */
struct gr_store_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, code;
};
#define GR_STORE_WAIT_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, GR_OK}
void gr_store_wait_done(void *waiter, int code);
void gr_store_wait_add(struct gr_store_wait *w, int rc);
int gr_store_wait_all(struct gr_store_wait *w);

/* Queue the insert of a job row (own: its tenant and key). doc (the rendered job JSON) becomes the store's and is
 * freed by it in every case; input must stay valid until done runs. Returns GR_OK, GR_EIO
 * when the store is closing, or GR_EINVAL for bad arguments (done is then not called).
 * done gets GR_OK, GR_EIO, or (update of a missing id) GR_ENOTFOUND. A job's input is
 * dropped when its status becomes final. */
int gr_store_insert_job(struct gr_store *s, const char *id, int op, const char *status, char *doc,
                        const void *input, size_t input_bytes, const struct gr_owner *own, gr_store_done done,
                        void *ctx);

/* Several job inserts (as gr_store_insert_job's, each with its own ctx) committed in one
 * transaction, all or none: done(ctx, code) for each, with one code. Every doc is taken. Same
 * returns. */
struct gr_store_job {
    const char *id;
    int op;
    const char *status;
    char *doc;
    const void *input;
    size_t input_bytes;
    struct gr_owner own;
    void *ctx;
};
int gr_store_insert_jobs(struct gr_store *s, struct gr_store_job *v, int n, gr_store_done done);

/* Queue an update of a job's status and doc (doc becomes the store's); tenant: the job's, as
 * inserted (NULL: "default"), for its event. done may be NULL. On a shared store the update is
 * fenced: it changes nothing (done gets GR_ENOTFOUND) unless the job is still queued or running
 * under this epoch, the one its holder got with it (1 at insert). */
int gr_store_update_job(struct gr_store *s, const char *id, const char *tenant, const char *status, char *doc,
                        int64_t epoch, gr_store_done done, void *ctx);

/* Read one job of tenant scope (NULL: any tenant's): *doc (malloc'd, caller frees) and status
 * (e.g. "queued"). GR_OK, GR_ENOTFOUND (also another tenant's), or GR_EIO. */
int gr_store_get_job(struct gr_store *s, const char *id, const char *scope, char **doc, char status[16],
                     struct gr_err *e);

/* Delete a finished job's row (the retention sweep). done gets GR_OK, GR_ENOTFOUND or GR_EIO. */
int gr_store_delete_job(struct gr_store *s, const char *id, gr_store_done done, void *ctx);

/* Newest first: jobs with id < before (NULL: from the newest), filtered by tenant, status and/or
 * op name (NULL: any), at most limit (1..GR_STORE_LIST_MAX, else GR_EINVAL) rows; row(ctx, id, doc) for each,
 * in order. Served from indexes, in order; "succeeded", which the status indexes leave out, walks
 * the id, op or tenant index past jobs that ended otherwise. GR_OK or GR_EIO. */
/* The most rows one list call gives: a page of up to 1000, and one more that tells whether
 * another page follows. */
#define GR_STORE_LIST_MAX 1001
typedef void (*gr_store_row)(void *ctx, const char *id, const char *doc);
int gr_store_list_jobs(struct gr_store *s, const char *tenant, const char *status, const char *op,
                       const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e);

/* Finished jobs with id < before, in no set order, at most limit (1..GR_STORE_LIST_MAX) rows (the sweep). */
int gr_store_list_expired(struct gr_store *s, const char *before, int limit, gr_store_row row, void *ctx,
                          struct gr_err *e);

/* Events (GET /v1/events) with seq > after, oldest first, at most limit (1..GR_STORE_LIST_MAX): row(ctx, seq
 * as text, the event {"seq", "kind": "job"|"dataset", "id", "status", "tenant", "at"} as JSON).
 * Each job status the store keeps and each dataset made or deleted is one, in commit order;
 * the newest 1,000,000 are kept. Returns once every write whose event it read has been told to
 * its done callback (a stream never tells of an end before the job's GET shows it). */
int gr_store_events(struct gr_store *s, int64_t after, int limit, gr_store_row row, void *ctx, struct gr_err *e);
/* The oldest and newest seq kept (0 and 0: none yet). Unlike gr_store_events it returns at
 * once: the newest may be a write's whose done callback has not run yet (gr_store_begun). */
int gr_store_events_span(struct gr_store *s, int64_t *oldest, int64_t *newest, struct gr_err *e);
/* A tenant's own numbering of its events (the event's "tseq": 1, 2, ... in seq order), which
 * moves only with its events. At one moment: the newest seq, the tenant's newest number, and
 * its first event numbered past after (-1: none asked) as its seq and number (0 and 0: none
 * kept). */
struct gr_events_own {
    int64_t newest, last, seq, tseq;
};
int gr_store_events_own(struct gr_store *s, const char *tenant, int64_t after, struct gr_events_own *o,
                        struct gr_err *e);
/* The writer's transactions begun so far (their count). Whatever a read saw committed belongs to
 * one of the first gr_store_begun() after the read; once they are told (every done callback of
 * theirs has run), reads of what they changed show it: gr_store_settled says whether the first n
 * are, gr_store_wait_told waits until they are. */
uint64_t gr_store_begun(struct gr_store *s);
int gr_store_settled(struct gr_store *s, uint64_t n);
void gr_store_wait_told(struct gr_store *s, uint64_t n);

/* Jobs left queued or running, with their input, for re-queueing: pending(ctx, id, doc, input,
 * bytes, epoch) for each. SQLite: every one (oldest first), at start-up. A shared store: those
 * whose holder's lease ran out (a replica gone), each claimed for this replica under a new epoch
 * (gr_store_join), at most limit of them (0: every one), and with device "cpu" only those asking
 * for the CPU, with "gpu" only the others (NULL: any). GR_OK or GR_EIO. */
typedef void (*gr_store_pending)(void *ctx, const char *id, const char *doc, const void *input, size_t bytes,
                                 int64_t epoch);
int gr_store_load_pending(struct gr_store *s, int limit, const char *device, gr_store_pending pending, void *ctx,
                          struct gr_err *e);

/* Datasets: a row per dataset (its rendered resource, doc, and its size in bytes), written like
 * jobs through the writer; the values are files (dsfile.h) under gr_store_data_dir. Insert
 * takes doc in every case; done gets GR_OK or GR_EIO (insert), GR_OK, GR_ENOTFOUND or GR_EIO
 * (delete). Same returns as gr_store_insert_job. */
int gr_store_insert_dataset(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes,
                            char *doc, gr_store_done done, void *ctx);
/* A job's kept result (keep.c), as insert_dataset but fenced as the job's final state is: on a
 * shared store no row is made (done gets GR_ENOTFOUND) once another replica canceled the job or
 * claimed it (its epoch passed), so a run fenced out never shows a result. */
int gr_store_insert_kept(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes, char *doc,
                         const char *job, int64_t epoch, gr_store_done done, void *ctx);
int gr_store_delete_dataset(struct gr_store *s, const char *id, gr_store_done done, void *ctx);
/* Mark dataset id used at (epoch seconds; its resource's last_used_at), unless it is already
 * marked later; nothing is told (a dataset gone meanwhile is no error). job (or NULL): the job
 * whose write queued next must not commit before the mark. */
int gr_store_dataset_used(struct gr_store *s, const char *id, double at, const char *job);
/* The sha256 (hex) of a dataset's values, stored after its row named it null. Queued like
 * dataset_used; a dataset deleted since is left alone. */
int gr_store_dataset_digest(struct gr_store *s, const char *id, const char *hex);

/* One dataset's doc (malloc'd) if tenant scope's (NULL: any): GR_OK, GR_ENOTFOUND or GR_EIO. */
int gr_store_get_dataset(struct gr_store *s, const char *id, const char *scope, char **doc, struct gr_err *e);

/* Newest first, ids < before (NULL: from the newest), of tenant (NULL: any), at most limit
 * (1..GR_STORE_LIST_MAX) rows, as for jobs. */
int gr_store_list_datasets(struct gr_store *s, const char *tenant, const char *before, int limit, gr_store_row row,
                           void *ctx, struct gr_err *e);

/* Each tenant's dataset bytes, tenant(ctx, name, bytes) for each (start-up). GR_OK or GR_EIO. */
typedef void (*gr_store_tenant)(void *ctx, const char *tenant, uint64_t bytes);
int gr_store_tenant_bytes(struct gr_store *s, gr_store_tenant tenant, void *ctx, struct gr_err *e);

/* Idempotency-Key: the resource id and request fingerprint stored for tenant's key, if stored
 * at gr_now() time `since` or later. GR_OK, GR_ENOTFOUND or GR_EIO. */
int gr_store_get_key(struct gr_store *s, const char *tenant, const char *key, double since, char fingerprint[65],
                     char resource[24], struct gr_err *e);
/* A shared store's hold on tenant's key while a request with it is under way on this replica
 * (at most secs, should this replica die), so that another replica's request with it answers 409:
 * GR_OK (held, or SQLite, where one gpured holds keys in memory), GR_ECONFLICT (another replica
 * holds it), GR_EUNAVAIL or GR_EIO, e filled. unhold ends it. */
int gr_store_hold_key(struct gr_store *s, const char *tenant, const char *key, double secs, struct gr_err *e);
void gr_store_unhold_key(struct gr_store *s, const char *tenant, const char *key);
/* Forget up to a thousand keys stored before time `before`; done as for the other writes. */
int gr_store_expire_keys(struct gr_store *s, double before, gr_store_done done, void *ctx);

/* Replicas on a shared store (PostgreSQL): this one is `replica`, and the jobs it inserts or
 * claims are its own for lease_s seconds at a time (by the database's clock). Call before the
 * first write. */
void gr_store_join(struct gr_store *s, const char *replica, double lease_s);
/* On a shared store, changed(ctx, id) runs on a thread of the store's whenever a job's status
 * changes, on any replica (PostgreSQL's LISTEN/NOTIFY), offered(ctx, replica) whenever jobs are
 * offered (replica "": to any; else first to that one) or let go, and cancel(ctx, id) when a
 * replica asks the job's holder to cancel it (gr_store_ask_cancel), until gr_store_close; none
 * may block long. changed(ctx, "") and offered(ctx, "") after a lost connection to the store is
 * back: anything may have changed meanwhile. Nothing on SQLite. GR_OK or GR_EIO. */
typedef void (*gr_store_told)(void *ctx, const char *what);
int gr_store_listen(struct gr_store *s, gr_store_told changed, gr_store_told offered, gr_store_told cancel, void *ctx,
                    struct gr_err *e);
/* How many queued or running jobs the store has that name dataset id (*n; 0 on SQLite, where the
 * one gpured knows its own). A job waited on, which is stored only at its end, is not among
 * them. GR_OK, GR_EUNAVAIL or GR_EIO. */
int gr_store_dataset_jobs(struct gr_store *s, const char *id, long long *n, struct gr_err *e);
/* Ask whichever replica holds job id to cancel it (each replica's cancel callback hears it).
 * GR_OK, GR_EUNAVAIL or GR_EIO; nothing on SQLite. */
int gr_store_ask_cancel(struct gr_store *s, const char *id, struct gr_err *e);

/* The replicas of a shared store: this one's devices (doc, JSON) announced until its lease runs
 * out (renewed by announcing again), its row dropped (leave), and row(ctx, id, doc) for every
 * live one (replicas). GR_OK (nothing on SQLite) or GR_EIO; on the calling thread's connection. */
int gr_store_announce(struct gr_store *s, const char *doc, struct gr_err *e);
int gr_store_leave(struct gr_store *s, struct gr_err *e);
int gr_store_replicas(struct gr_store *s, gr_store_row row, void *ctx, struct gr_err *e);

/* An id residue modulo stride that no other live replica has (*n, 0 to stride - 1; 0 on SQLite),
 * kept while this replica's announcements keep it live (call after gr_store_join). GR_OK, or
 * GR_EIO (every residue taken, or the store failed). */
int gr_store_slot(struct gr_store *s, int stride, long long *n, struct gr_err *e);
/* 1 for a store several replicas share (PostgreSQL), 0 for SQLite's file. */
int gr_store_shared(struct gr_store *s);
/* This replica's queued and running jobs held for another lease (renew), or all of them but the
 * nkeep ids of keep (the running ones: the store does not know which) let go at once for others
 * to claim (release, at a graceful stop). GR_OK (nothing to do on SQLite) or GR_EIO. On the
 * calling thread's connection, not the writer's. */
int gr_store_renew(struct gr_store *s, struct gr_err *e);
int gr_store_release(struct gr_store *s, char keep[][24], int nkeep, struct gr_err *e);
/* row(ctx, id, doc) for each job the store has this replica holding (held), and the n ids of
 * ids let go at once for others to claim (let_go). GR_OK (nothing on SQLite) or GR_EIO. */
int gr_store_held(struct gr_store *s, gr_store_row row, void *ctx, struct gr_err *e);
int gr_store_let_go(struct gr_store *s, char ids[][24], int n, struct gr_err *e);

/* Cancel a queued job of tenant scope (NULL: any) that no live replica holds (offered, or its
 * holder gone), at time now (RFC 3339): *doc (malloc'd) its stored state. A holder that comes
 * back has its final state fenced out. GR_OK, GR_ENOTFOUND (no such job; always on SQLite,
 * where none is another's) or GR_EIO. */
int gr_store_cancel_job(struct gr_store *s, const char *id, const char *scope, const char *now, char **doc,
                        struct gr_err *e);

/* The data directory the store was opened on. */
const char *gr_store_data_dir(struct gr_store *s);

/* fn (any thread may set it; NULL: none) is called by the writer after each of its transactions
 * with the milliseconds from begin to durable and the writes it held (the metrics' histogram). */
void gr_store_observe_commits(struct gr_store *s, void (*fn)(double ms, int writes));

/* fn (any thread may set it; NULL: none) is called by the writer after the done callbacks of each
 * transaction, so that what they gathered is handled at once: the job pipeline (commits.c) takes
 * its lock once a commit rather than once a job, the lock every HTTP thread meets. */
void gr_store_after_commits(struct gr_store *s, void (*fn)(void));

/* Bumped after every commit: lets list pages carry a cheap ETag. */
uint64_t gr_store_version(struct gr_store *s);

/* GR_OK if the store answers a trivial query on this thread's connection (for /readyz). */
int gr_store_ping(struct gr_store *s, struct gr_err *e);

#endif
