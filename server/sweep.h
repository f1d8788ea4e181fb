/* sweep.h: retention: a background thread that deletes finished jobs past --result-ttl (with
 * the datasets their results were kept in) and Idempotency-Keys past --idempotency-ttl. */
#ifndef GR_SWEEP_H
#define GR_SWEEP_H

#include "common/gr.h"

#include <stdint.h>

struct gr_store;

/* Start the thread (result_ttl_s 0: jobs are kept; keys always expire). GR_OK or GR_EINTERNAL. */
int gr_sweep_start(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, struct gr_err *e);

/* One round now, on the caller's thread (the thread runs these): GR_OK or GR_EIO. */
int gr_sweep_once(struct gr_store *s, int64_t result_ttl_s, int64_t key_ttl_s, int *jobs_deleted, struct gr_err *e);

/* Stop the thread, after the batch it is in. Safe if it was never started. */
void gr_sweep_stop(void);

#endif
