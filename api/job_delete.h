/* job_delete.h: DELETE /v1/jobs/{id} on a finished job, DELETE /v1/jobs in bulk (job_delete.c).
 * HTTP threads. */
#ifndef GR_JOB_DELETE_H
#define GR_JOB_DELETE_H

#include "api/http.h"

/* Delete finished job r->id, whose stored document is doc, and the datasets its result was kept
 * in: answers 204 once all are gone, 409 while jobs read a kept result (nothing deleted). */
void gr_delete_finished_job(struct gr_req *r, const char *doc);

/* DELETE /v1/jobs?older_than=SECONDS&kept=true: the caller's finished jobs (an admin's: every
 * tenant's, or ?tenant='s) submitted that long ago and/or whose result was kept as datasets,
 * with those datasets: 200 {"deleted": n, "in_use": m}. */
void gr_cleanup_jobs(struct gr_req *r);

#endif
