/* cluster.h: replicas on a shared store (PostgreSQL): a thread that keeps this replica's leases
 * on the jobs it holds and claims the jobs of replicas gone (their leases ran out), and the
 * hand-back of queued jobs at a graceful stop. Nothing runs on SQLite's file (one gpured). */
#ifndef GR_CLUSTER_H
#define GR_CLUSTER_H

#include "gr.h"

struct gr_store;

/* Join the store as a new replica (its id logged) holding jobs for lease_s seconds at a time;
 * call before the first job is submitted or recovered. */
void gr_cluster_join(struct gr_store *s, int64_t lease_s);

/* Start the thread (not on SQLite): renew every lease/3, claim every second at most. GR_OK or
 * GR_EINTERNAL. */
int gr_cluster_start(struct gr_err *e);

/* Stop the thread, then let this replica's queued jobs go for the others to claim at once (the
 * workers are paused: nothing more starts here). Safe if it never started. */
void gr_cluster_stop(void);

#endif
