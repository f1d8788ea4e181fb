/* datasets.h: the /v1/datasets routes (upload streamed to disk, get, list, values as .npy,
 * delete) and the binding of a job to a stored dataset. Handlers run on HTTP threads. */
#ifndef GR_DATASETS_H
#define GR_DATASETS_H

#include "api/http.h"
#include "api/parse.h"

extern const struct gr_stream gr_dataset_upload; /* POST /v1/datasets takes its body through this */
void gr_post_dataset(struct gr_req *r);
void gr_list_datasets(struct gr_req *r);
void gr_get_dataset(struct gr_req *r);
void gr_get_dataset_data(struct gr_req *r);

/* Answer with dataset id's values, streamed from its file: a .npy (npy 1) or raw bytes. */
void gr_respond_dataset_data(struct gr_req *r, const char *id, int npy);
void gr_delete_dataset(struct gr_req *r);

/* A job's "dataset" (a gr_dataset_fn for gr_parse_job): the dataset's layout into src, with the
 * job's pin on it taken. GR_ENOTFOUND (field "dataset") when there is none, or GR_EIO. */
int gr_dataset_for_job(void *ctx, struct gr_job *j, const char *id, struct gr_source *src, struct gr_err *e);

#endif
