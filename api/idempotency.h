/* idempotency.h: the Idempotency-Key header on the POSTs that create jobs, benchmarks and
 * datasets. A key is held in memory while its request is processed (so that a second request
 * with it answers 409), and stored by the store with what it created (so that a retry answers
 * that). Any HTTP thread. */
#ifndef GR_IDEMPOTENCY_H
#define GR_IDEMPOTENCY_H

#include "api/http.h"

/* Take r's Idempotency-Key, if it sent one, and hold it until r ends: GR_OK (r->idem set, or no
 * key sent), GR_EINVAL (not 1 to 255 printable characters) or GR_ECONFLICT (another request
 * holds it), e filled. */
int gr_idem_hold(struct gr_req *r, struct gr_err *e);

/* The request as its key's fingerprint (hex SHA-256): method, path, query arguments,
 * Content-Type, then n bytes of what it sends (its body, or a digest of it). */
void gr_idem_fingerprint(struct gr_req *r, const void *what, size_t n, char out[65]);

/* What r's held key created before: GR_OK with its id (the same request: replay it),
 * GR_ENOTFOUND (a new key: create, and store the key with it), GR_EUNPROC (the key was used
 * for another request) or GR_EIO, e filled. */
int gr_idem_lookup(struct gr_req *r, const char *fingerprint, char id[24], struct gr_err *e);

/* Let go of r's key (when r ends). */
void gr_idem_release(struct gr_req *r);

#endif
