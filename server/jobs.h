/* jobs.h: the job pipeline: routing to a device, the bounded per-device queues, one worker
 * thread per backend, jobs in flight, and waiters parked until a job's state is committed.
 * Everything here is guarded by one jobs lock; callbacks (waiter wake) run without it. */
#ifndef GR_JOBS_H
#define GR_JOBS_H

#include "server/job.h"

struct gr_buf;

struct gr_store;
struct gr_backend;

enum gr_until {
    GR_UNTIL_DURABLE,  /* the job's insert is committed */
    GR_UNTIL_CHANGED,  /* the status differs from `seen` (a final one: once committed) */
    GR_UNTIL_TERMINAL, /* a final status is committed */
};

/* A parked request. wake() runs exactly once, on some other thread (or on the caller's,
 * inside gr_jobs_wait, when the condition already holds), with no lock held. A deadline
 * only fires once the job is durable: nothing answers for a job the store may not keep. */
struct gr_waiter {
    void (*wake)(struct gr_waiter *w);
    struct gr_job *job; /* the waiter holds a reference */
    int until, seen;
    double deadline_ms; /* gr_mono_ms() time; 0 = none */
    int fired;
    struct gr_waiter *next, *tnext, **tpprev;
};

/* Start one worker per backend (backends[0] is the CPU) and the timer thread. The store
 * and backends must outlive gr_jobs_stop(). Returns GR_OK or GR_EINTERNAL. */
int gr_jobs_start(struct gr_store *store, struct gr_backend **backends, int nbackends, int queue_capacity,
                  struct gr_err *e);

/* Queue again the jobs the store holds as queued or running (start-up), or on a shared store
 * those a replica gone left or offered (cluster.c), at most limit (0: all) and only of the kinds
 * given (GR_JOBS_*). Returns the count re-queued, or -1 with e filled. */
int gr_jobs_recover(int limit, int kinds, struct gr_err *e);

/* A job another replica holds, at stored status, to wait on here: a stand-in (referenced for
 * the caller) that gr_jobs_changed(NULL, id) fires with committed -3, when the store says its
 * status changed. NULL when memory is out. */
struct gr_job *gr_jobs_watch(const char *id, int status);
void gr_jobs_changed(void *ctx, const char *id);
/* Another replica asks the holder of job id to cancel it (the store's listener thread): canceled
 * here if this replica has it queued; nothing if it has it not, or runs it. */
void gr_jobs_cancel_asked(void *ctx, const char *id);
/* Shared store: the workers start no job at gr_mono_ms() mono_ms or later, until called again
 * (the cluster thread, after each renewal): past it this replica's leases may have run out. */
void gr_jobs_hold_until(double mono_ms);
/* Shared store: drop the queued jobs whose row was stored before since_ms (gr_mono_ms) and is not
 * among the n ids of held (sorted here), the jobs the store has this replica holding: another
 * replica claimed or canceled them while this one's lease had run out. How many. */
int gr_jobs_drop_unheld(char (*held)[24], int n, double since_ms);

/* The ids of the jobs the workers have taken (running, or about to): how many, into *ids
 * (malloc'd; the caller frees it; NULL and 0 when memory is out). */
int gr_jobs_taken(char (**ids)[24]);

/* Up to max kept results of runs fenced out (another replica claimed their job), taken from the
 * list jobs keeps of them, for the sweep to delete. How many. */
int gr_jobs_take_orphans(char ids[][24], int max);

/* The backend for a requested device ("auto", "cpu", "gpu", "gpu:N") for a job of op on dataset
 * (NULL or "": none): GR_OK with *out, GR_EINVAL (not a device name) or GR_EUNPROC (no such
 * device here). auto and gpu take the GPU that caches the dataset unless its queue is 16 jobs
 * longer than the shortest; else the shortest queue (for a dataset, the emptiest cache among
 * equals). auto sends an op the GPUs do not run to the CPU. */
int gr_jobs_route(const char *device, int op, const char *dataset, struct gr_backend **out, struct gr_err *e);
int gr_jobs_nbackends(void);
struct gr_backend *gr_jobs_backend(int i);

/* Accept the n jobs js (each with its backend and tenant set), all or none: reserve their queue
 * slots (GR_EFULL if a queue lacks room, or a tenant would pass --tenant-max-queued), queue
 * their inserts in the store as one transaction (with each one's Idempotency-Key, if any), then
 * queue them for their workers. Takes its own references. A job offered (j->offered) is
 * inserted for the replicas to claim and queued nowhere here: from then on it is a stand-in, as
 * gr_jobs_watch's, that the store's word of its end fires. accepted (NULL: not wanted) gets the
 * jobs as accepted, the documents the store is given, as a JSON array (out.oom if it ran out). */
int gr_jobs_submit(struct gr_job **js, int n, struct gr_buf *accepted, struct gr_err *e);

/* How long a job queued for backend b now would wait to start (ms): the jobs queued and running
 * there, each as long as recent runs took, or as the longest running now has lasted. */
double gr_jobs_backlog_ms(const struct gr_backend *b);
/* The kinds of job this replica would start within ms if it took one now: those asking for the
 * CPU (GR_JOBS_CPU) and the others (GR_JOBS_GPU), the others' on any working GPU, or on the CPU
 * when it has none. */
enum { GR_JOBS_CPU = 1, GR_JOBS_GPU = 2, GR_JOBS_ANY = 3 };
int gr_jobs_starting_within(double ms);

/* On a shared store: the replica this one is, named in the jobs it runs. */
void gr_jobs_set_replica(const char *replica);

/* Told (fn) of each job once it runs and its queued state is stored, so that it never comes
 * before that state's event: its id, tenant, op, device and start (gr_now's clock). A job stored
 * once, final (answered within its wait), is not told. Called with the pipeline's lock held: fn
 * is quick and calls nothing of the pipeline's. Set before gr_jobs_start. */
typedef void gr_jobs_running_fn(const char *id, const char *tenant, const char *op, const char *device, double at);
void gr_jobs_on_running(gr_jobs_running_fn *fn);

/* Small whole-array reductions queued one behind another, of one op, dtype and length, run as one
 * launch of at most n jobs (1..GR_JOBS_GROUP_MAX; 1: each alone). Set before gr_jobs_start. */
#define GR_JOBS_GROUP_MAX 256
void gr_jobs_set_launch_group(int n);

/* The in-flight job with this id of tenant scope (NULL: any tenant's), with a reference taken;
 * NULL when not in flight (or another tenant's). */
struct gr_job *gr_jobs_find(const char *id, const char *scope);

/* Cancel a queued in-flight job of tenant scope (NULL: any): GR_OK (status canceled, its write
 * queued; *out referenced), GR_ECONFLICT (running or finished), GR_ENOTFOUND (not in flight, or
 * another tenant's: ask the store). */
int gr_jobs_cancel(const char *id, const char *scope, struct gr_job **out, struct gr_err *e);

/* j's JSON as it may be told now (malloc'd, NULL if out of memory), that status, and the status
 * the store has committed (-1 none yet, -2 refused). A job whose end is not committed yet is
 * told as running. */
char *gr_jobs_render(struct gr_job *j, int *committed, int *status);

/* The status the store has committed for j (-1 none yet, -2 refused, -3 another replica's). */
int gr_jobs_committed(struct gr_job *j);

/* Whether nothing more will happen to j here: its final state is stored, the store refused it,
 * or the store's state is the one to read (-3). */
int gr_jobs_settled(struct gr_job *j);

/* Queue the inserts, as queued, of those of the n jobs js still deferred (a waited batch whose
 * answer cannot wait for the rest: every job it tells of must be durable first; the caller then
 * waits until each has a committed state, as one the timer is inserting will). */
void gr_jobs_undefer(struct gr_job **js, int n);

/* Park w (w->job, until, seen, deadline_ms, wake set by the caller). */
void gr_jobs_wait(struct gr_waiter *w);

/* Shutdown, in order: workers finish their current job and exit (queued jobs stay queued in
 * the store); then every parked waiter is woken as soon as its job is durable and new ones
 * wake at once; gr_jobs_parked() tells how many are still parked; gr_jobs_stop frees the rest. */
void gr_jobs_pause(void); /* workers take no new job (the first half of stop_workers) */
void gr_jobs_stop_workers(void);
void gr_jobs_wake_all(void);
int gr_jobs_parked(void);
void gr_jobs_stop(void);

/* Datasets in use: a job that names a dataset pins it from its look-up until its final state
 * is stored, and DELETE of a pinned dataset is refused. look_up (before the store is read):
 * GR_OK, or GR_ENOTFOUND while the dataset is being deleted; looked_up (found: the caller may
 * name it) ends it, a pin if found, which unpin gives back. delete_begin waits for the look-ups
 * under way and refuses new ones: GR_OK (until delete_end), or GR_ECONFLICT while jobs pin it or
 * another delete runs. A look-up that finds nothing (another tenant's id) never holds a delete. */
int gr_jobs_look_up_dataset(const char *id, struct gr_err *e);
void gr_jobs_looked_up_dataset(const char *id, int found);
void gr_jobs_unpin_dataset(const char *id);
int gr_jobs_delete_dataset_begin(const char *id, struct gr_err *e);
void gr_jobs_delete_dataset_end(const char *id);

/* Gauges for /readyz and logs. */
int gr_jobs_queued(void);
int gr_jobs_capacity(void); /* --queue-capacity: jobs a device's queue holds before 429 */

#endif
