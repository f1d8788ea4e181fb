/* results.h: a finished job's result as data (GET /v1/jobs/{id}/result with Accept:
 * application/x-npy or application/octet-stream). Runs on the request's HTTP thread. */
#ifndef GR_RESULTS_H
#define GR_RESULTS_H

#include "api/http.h"

/* ?part= of job's result (job: its stored resource): GR_OK with *indices 0 (values, also when
 * absent) or 1 (indices), else GR_EINVAL (not a part), GR_ECONFLICT (indices of a result that
 * has none: not argmin/argmax), GR_ENOTFOUND (the part was kept as a dataset since deleted)
 * or GR_EIO. */
int gr_result_part(const json_t *job, const char *part, int *indices, struct gr_err *e);

/* Answer with the values of job's result, or its indices, as a .npy (npy 1) or raw
 * little-endian bytes in the result's dtype (indices int64); one value is a 0-D array, an axis
 * result in its shape (a kept result: its dataset's file, streamed). */
void gr_respond_result_data(struct gr_req *r, json_t *job, int npy, int indices);

#endif
