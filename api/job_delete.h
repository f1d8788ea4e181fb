/* job_delete.h: DELETE /v1/jobs/{id} on a finished job (job_delete.c). HTTP threads. */
#ifndef GR_JOB_DELETE_H
#define GR_JOB_DELETE_H

#include "api/http.h"

/* Delete finished job r->id, whose stored document is doc, and the datasets its result was kept
 * in: answers 204 once all are gone, 409 while jobs read a kept result (nothing deleted). */
void gr_delete_finished_job(struct gr_req *r, const char *doc);

#endif
