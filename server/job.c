/* job.c: a job's lifetime: its id, references (atomic) and freeing, status names, and the rows of
 * a 2-D job as jobs of their own. Any thread. */
#include "server/job.h"

#include "common/id.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gr_operand_names[GR_MM_OPERANDS] = {"a", "b", "c"};

void (*gr_job_unpin)(const char *dataset);

static const char *status_names[GR_NSTATUS] = {"queued", "running", "succeeded", "failed", "canceled"};

const char *gr_status_name(int s) { return s >= 0 && s < GR_NSTATUS ? status_names[s] : "?"; }

int gr_status_parse(const char *s)
{
    for (int i = 0; s && i < GR_NSTATUS; i++)
        if (!strcmp(s, status_names[i]))
            return i;
    return -1;
}

struct gr_job *gr_job_new(void)
{
    struct gr_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->refs = 1;
    gr_id_new('j', j->id, sizeof j->id);
    j->axes = 1u;
    j->axis_null = 1;
    j->ndim = 1;
    for (int d = 0; d < GR_MAX_DIMS; d++)
        j->shape[d] = 1;
    j->status = GR_QUEUED;
    j->committed = -1;
    j->epoch = 1;
    j->created_at = gr_now();
    snprintf(j->tenant, sizeof j->tenant, "default");
    snprintf(j->algorithm, sizeof j->algorithm, "auto");
    snprintf(j->device, sizeof j->device, "auto");
    return j;
}

void gr_job_ref(struct gr_job *j) { atomic_fetch_add((_Atomic int *)&j->refs, 1); }

void gr_job_unref(struct gr_job *j)
{
    if (!j || atomic_fetch_sub((_Atomic int *)&j->refs, 1) != 1)
        return;
    if (j->dataset_pinned) /* a job refused before it was queued */
        gr_job_unpin(j->dataset);
    for (int k = 0; k < GR_MM_OPERANDS; k++)
        if (j->mm[k].pinned)
            gr_job_unpin(j->mm[k].dataset);
    free(j->input);
    free(j->final_doc);
    free(j->idem_key);
    free(j->algos);
    free(j->rows);
    gr_result_free(&j->result);
    free(j);
}

struct gr_job *gr_job_row(const struct gr_job *t, int64_t r)
{
    struct gr_job *j = gr_job_new();
    size_t bytes = (size_t)t->shape[1] * gr_dtype_size(t->dtype);
    if (!j || !(j->input = malloc(bytes))) {
        gr_job_unref(j);
        return NULL;
    }
    memcpy(j->input, (const char *)t->input + (size_t)r * bytes, bytes);
    j->input_bytes = bytes;
    j->kind = t->kind;
    j->op = t->op;
    j->dtype = t->dtype;
    j->ties_last = t->ties_last;
    j->keepdims = t->keepdims;
    j->shape[0] = t->shape[1];
    memcpy(j->algorithm, t->algorithm, sizeof j->algorithm);
    memcpy(j->device, t->device, sizeof j->device);
    memcpy(j->tenant, t->tenant, sizeof j->tenant);
    return j;
}

int64_t gr_job_rows(const struct gr_job *j)
{
    int64_t rows = 1;
    for (int d = 0; d < j->ndim - 1; d++)
        rows *= j->shape[d];
    return rows;
}

int64_t gr_job_cols(const struct gr_job *j) { return j->shape[j->ndim - 1]; }

int gr_job_whole(const struct gr_job *j) { return j->axes == (1u << j->ndim) - 1; }

int gr_job_result_shape(const struct gr_job *j, int64_t shape[GR_MAX_DIMS])
{
    int n = 0;
    for (int d = 0; d < j->ndim; d++)
        if (!(j->axes >> d & 1u))
            shape[n++] = j->shape[d];
        else if (j->keepdims)
            shape[n++] = 1;
    return n;
}
