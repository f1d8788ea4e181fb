/* jobs_internal.h: what the files of the job pipeline (jobs.h) share, private to them: the one
 * jobs lock, the queues' and workers' shapes, and each file's helpers for the others. jobs.c
 * starts and stops them; inflight.c owns the in-flight table and the jobs watched for other
 * replicas, pins.c the datasets in use, waiters.c the waiters and their timer thread, commits.c
 * the store's writes and what it has committed, queues.c the queues, workers and routing, submit.c
 * submission and recovery. "mu" in their comments is gr_jobs_mu. */
#ifndef GR_JOBS_INTERNAL_H
#define GR_JOBS_INTERNAL_H

#include "server/jobs.h"

#include <pthread.h>

#define MAX_BACKENDS 17
#define MAX_LANES 16
/* in-flight table (a batch may put 100k jobs in flight); jobs leave it once their final state
 * is stored */
#define NBUCKETS 65536
#define GROUP_MAX GR_JOBS_GROUP_MAX /* jobs in a launch group at most (queues.c) */

/* --- jobs.c --- */

extern pthread_mutex_t gr_jobs_mu;     /* the one jobs lock ("mu"): what it guards, and how, jobs.c says */
extern struct gr_store *gr_jobs_store; /* set once before any job runs */
/* j runs, and its queued state is stored: told to gr_jobs_on_running's fn (mu held) */
void gr_jobs_told_running(const struct gr_job *j);

/* --- inflight.c (mu held) --- */

extern struct gr_job *gr_inflight_table[NBUCKETS];
struct gr_job *gr_inflight_find(const char *id);
void gr_inflight_add(struct gr_job *j);
void gr_inflight_remove(struct gr_job *j);
/* The slot of the stand-in watched for job id, or the empty slot at its bucket's end. */
struct gr_job **gr_watch_link(const char *id);
/* Drop every job in flight or watched (gr_jobs_stop; mu not needed: the threads are gone). */
void gr_inflight_drop(void);

/* --- pins.c (mu held) --- */

int gr_pin_change(const char *id, int delta, struct gr_err *e);
void gr_unpin_job(struct gr_job *j);

/* --- waiters.c --- */

void gr_waiters_collect(struct gr_job *j, double now, struct gr_waiter **fired); /* mu held */
void gr_waiters_wake(struct gr_waiter *w);                                        /* mu not held */
/* The timer thread: its state reset (before any worker starts), started, stopped and joined. */
void gr_waiters_init(void);
int gr_waiters_start(struct gr_err *e);
void gr_waiters_stop(void);

/* --- commits.c --- */

void gr_commits_told(void); /* the store's after-commits hook (gr_store_after_commits) */
void gr_commits_record(struct gr_job *j, int status, int code, struct gr_waiter **fired,
                       struct gr_job **retry); /* mu held */
void gr_commits_write_again(struct gr_job *retry);
void gr_commits_insert(struct gr_job **js, char **docs, int n, int status);
void gr_commits_final(struct gr_job *j, char *doc);
void gr_commits_insert_undeferred(struct gr_job **js, int n); /* mu held; released and taken again */

/* --- queues.c --- */

struct queue;
struct worker {
    struct queue *q;
    int lane;                         /* the backend lane this thread alone uses */
    struct gr_job *taken[GROUP_MAX]; /* the jobs it runs now: one, or a launch group (mu) */
    int ntaken;
    double began; /* when it took them (gr_mono_ms, mu) */
    pthread_t thread;
    int started;
};

struct queue {
    struct gr_job *head, *tail;
    int count, reserved;
    unsigned pushed; /* jobs queued so far (__atomic): watched by an idle worker before it sleeps */
    int watching;    /* idle workers watching pushed now (mu): one at a time, the rest sleep */
    pthread_cond_t cv;
    struct worker workers[MAX_LANES]; /* one per lane: a GPU's lanes run jobs side by side */
    int nworkers;
    double run_ms; /* wall time a job's run took on a lane, recent ones weighted most (mu) */
    struct gr_backend *backend;
};

extern int gr_queues_stopping; /* gr_jobs_pause: workers take no new job (mu) */
struct queue *gr_queue_of(const struct gr_backend *b);
int gr_queue_dev(const struct queue *q);
void gr_queue_push(struct queue *q, struct gr_job *j); /* mu held */
/* One queue and its workers per backend (backends[0] is the CPU), started; and at gr_jobs_stop
 * the jobs still queued dropped. */
int gr_queues_start(struct gr_backend **backends, int nbackends, struct gr_err *e);
void gr_queues_drop(void);

#endif
