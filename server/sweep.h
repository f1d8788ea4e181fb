/* sweep.h: retention: a background thread that deletes finished jobs past --result-ttl (with
 * the datasets their results were kept in) and Idempotency-Keys past --idempotency-ttl, and
 * finished jobs in bulk when the API asks (gr_sweep_cleanup). */
#ifndef GR_SWEEP_H
#define GR_SWEEP_H

#include "common/gr.h"

#include <stdint.h>

struct gr_store;

/* Start the thread (result_ttl_s 0: jobs are kept; keys always expire). GR_OK or GR_EINTERNAL. */
int gr_sweep_start(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, struct gr_err *e);

/* One round now, on the caller's thread (the thread runs these): GR_OK or GR_EIO. */
int gr_sweep_once(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, int *jobs_deleted, struct gr_err *e);

/* A bulk delete of finished jobs (with the datasets their results were kept in), as the API asks:
 * those of tenant (NULL: every tenant's) submitted before the id before ("": any), or (kept)
 * whose result was kept as datasets; both: jobs that are both. The sweep thread runs it between
 * its rounds, fills in code (GR_OK, else e), deleted and in_use (jobs left because other jobs read
 * their kept result), then calls done(c) on that thread. */
struct gr_cleanup {
    const char *tenant;
    char before[24];
    int kept;
    int code, deleted, in_use;
    struct gr_err e;
    void (*done)(struct gr_cleanup *c);
    void *ctx;
    struct gr_cleanup *next; /* the thread's queue */
};
void gr_sweep_cleanup(struct gr_cleanup *c);

/* Stop the thread, after the batch it is in. Safe if it was never started. */
void gr_sweep_stop(void);

#endif
