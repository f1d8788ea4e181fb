/* datasets.h: the /v1/datasets routes (upload streamed to disk, get, list, values as .npy,
 * delete) and the binding of a job to a stored dataset. Handlers run on HTTP threads. */
#ifndef GR_DATASETS_H
#define GR_DATASETS_H

#include "http.h"

extern const struct gr_stream gr_dataset_upload; /* POST /v1/datasets takes its body through this */
void gr_post_dataset(struct gr_req *r);
void gr_list_datasets(struct gr_req *r);
void gr_get_dataset(struct gr_req *r);
void gr_get_dataset_data(struct gr_req *r);
void gr_delete_dataset(struct gr_req *r);

#endif
