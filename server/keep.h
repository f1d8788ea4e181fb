/* keep.h: large results and products kept as datasets, on the worker (keep.c). */
#ifndef GR_KEEP_H
#define GR_KEEP_H

#include "db/store.h"
#include "server/job.h"

/* On the worker, once r is j's result: a result over GR_RESULT_INLINE_MAX outputs becomes a
 * dataset of its values in their dtype (and one of its int64 indices for argmin/argmax), durable with its row
 * committed before this returns, so that a job's final state never names a missing dataset;
 * their ids go into j; they count against the job's tenant's --tenant-max-bytes. GR_OK (also when
 * there is nothing to keep), else GR_ENOMEM (no disk space, or over the tenant's bytes), GR_EIO,
 * with nothing kept. Blocks on the disk and the store: no lock held. */
int gr_job_keep_result(struct gr_job *j, const struct gr_result *r, struct gr_store *s, struct gr_err *e);

/* On the worker, once out (j's dtype, shape[0] x shape[1]) is a matmul job's product: kept as a
 * dataset as gr_job_keep_result keeps a large result (always, whatever its size), its id into
 * j->result_dataset. Same codes. */
int gr_job_keep_product(struct gr_job *j, const void *out, struct gr_store *s, struct gr_err *e);

#endif
