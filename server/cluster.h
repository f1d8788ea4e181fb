/* cluster.h: replicas on a shared store (PostgreSQL): where a new job runs (here, or offered
 * to the replica caching its dataset or to any with a free device), a thread that keeps this
 * replica's leases on the jobs it holds and claims jobs offered and those of replicas gone
 * (their leases ran out), and the hand-back of queued jobs at a graceful stop. Nothing runs on SQLite's file (one gpured). */
#ifndef GR_CLUSTER_H
#define GR_CLUSTER_H

#include "common/gr.h"

#include <jansson.h>

struct gr_store;
struct gr_job;

/* This replica's devices (GET /v1/devices; what it announces to the others): its id on a shared
 * store, its GPUs with their dataset caches, its CPU. NULL when memory is out. Any thread. */
json_t *gr_cluster_devices(void);

/* Join the store as a new replica (its id logged) holding jobs for lease_s seconds at a time,
 * with an id residue no other live replica has, offering the others a new job that would wait
 * offer_after_ms here (0: none); call before the first job is submitted or recovered. GR_OK, or
 * the store's failure (no residue free, the store away) with e filled. */
int gr_cluster_join(struct gr_store *s, int64_t lease_s, int offer_after_ms, struct gr_err *e);

/* Where a new job j (routed) should run: on a shared store, offer it (j->offered, j->offer) to
 * the replica whose GPU caches its dataset when that is not this one, or to any replica when
 * its device here is far behind; else leave it to run here. Any thread. */
void gr_cluster_place(struct gr_job *j);

/* The store's word that jobs were offered to replica to (or to any, ""), or let go: claim them
 * if this replica's queues are short (gr_store_listen's offered). */
void gr_cluster_offered(void *ctx, const char *to);

/* Start the thread (not on SQLite): renew every lease/3; every second claim a few of the jobs
 * replicas gone left, while this one's queues are short. GR_OK or GR_EINTERNAL. */
int gr_cluster_start(struct gr_err *e);

/* A graceful stop: claim no more, and let this replica's queued jobs go for the others to claim
 * at once (the workers are paused: nothing more starts here). Leases on running jobs are still
 * renewed until gr_cluster_stop. */
void gr_cluster_leave(void);

/* Stop the thread (after the running jobs' final states are queued to the store). Safe if it
 * never started. */
void gr_cluster_stop(void);

#endif
