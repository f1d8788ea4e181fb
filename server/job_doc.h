/* job_doc.h: a job's document and a dataset's, as stored and served (job_doc.c), a stored job
 * rebuilt from its document, and the sha256 digests of dataset values. */
#ifndef GR_JOB_DOC_H
#define GR_JOB_DOC_H

#include "server/job.h"

#include <stddef.h>

/* The job resource (API.md) as JSON text, malloc'd; NULL if out of memory. Caller holds the
 * jobs lock or otherwise knows the job is not changing. */
char *gr_job_render(const struct gr_job *j);
/* j rendered as if its status were status (an end not yet durable is told as running) */
char *gr_job_render_as(const struct gr_job *j, int status);

/* A dataset's resource (API.md; uploads and kept results alike), malloc'd, for its store row:
 * sha is the EVP sha256 digest of its values, finished here, or NULL: "sha256" is null until
 * the digest thread stores it (digests.h); job: the job whose result it keeps, or NULL for an
 * upload. NULL if out of memory. */
char *gr_dataset_render(const char *id, const char *tenant, int dtype, int ndim, const int64_t *shape, size_t bytes,
                        void *sha, const char *job);

/* Finish an EVP digest (sha) as lower-case hex. GR_OK or GR_EINTERNAL. */
#define GR_DIGEST_HEX 129 /* 2 * EVP_MAX_MD_SIZE + 1 */
int gr_digest_hex(void *sha, char hex[GR_DIGEST_HEX]);

/* A gr_dsfile_tap feeding an EVP digest (sha) with a dataset's values as they are written. */
int gr_dataset_digest(void *sha, const void *data, size_t n);

/* Rebuild a stored queued/running job from its doc and input (start-up recovery).
 * Returns GR_OK with *out (status queued) or GR_EINVAL when the doc is unreadable. */
int gr_job_restore(const char *id, const char *doc, const void *input, size_t bytes, struct gr_job **out,
                   struct gr_err *e);

/* RFC 3339 UTC with milliseconds into buf (>= 32 bytes). */
void gr_rfc3339(double t, char *buf, size_t len);

#endif
