/* digests.h: the sha256 of datasets whose 201 came before it (large uploads without an
 * Idempotency-Key, API.md): a background thread reads each stored file, digests it and stores
 * the digest in place of the null its resource showed. */
#ifndef GR_DIGESTS_H
#define GR_DIGESTS_H

#include "common/gr.h"

#include <stddef.h>

struct gr_store;

/* Start the thread. It first queues every stored dataset whose digest is still null (a crash
 * between a 201 and its digest), paging through them on its own. GR_OK or GR_EINTERNAL. */
int gr_digests_start(struct gr_store *s, struct gr_err *e);

/* Queue dataset id (bytes of values, its row committed) for its digest. Any thread. */
void gr_digest_later(const char *id, size_t bytes);

/* Stop the thread, leaving what is queued for the next start. Safe if it was never started. */
void gr_digests_stop(void);

#endif
