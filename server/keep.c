/* keep.c: a result too large to answer inline, and every product, kept as datasets before the
 * job's final state names them: named under way in the store, the file durable, then its row
 * committed (fenced as the final state is, so a run another replica took over keeps nothing). Runs on the worker
 * that ran the job, no lock held; blocks on the disk and the store. */
#include "server/keep.h"

#include "common/id.h"
#include "db/dsfile.h"
#include "server/job_doc.h"
#include "server/log.h"
#include "server/tenants.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Values of dtype and shape (ndim 1 to GR_MAX_DIMS) as a new dataset id of job j's tenant: counted
 * against its quota, its file durable, then its row committed, fenced as j's final state is. */
static int keep_values(struct gr_store *s, const struct gr_job *j, const void *values, int dtype, int ndim,
                       const int64_t *shape, char id[24], struct gr_err *e)
{
    const char *tenant = j->tenant;
    const char *dir = gr_store_data_dir(s);
    struct gr_dsfile *f = NULL;
    struct gr_store_wait w = GR_STORE_WAIT_INIT;
    size_t bytes = gr_dtype_size(dtype);
    char *doc = NULL;
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    gr_id_new('d', id, 24);
    int rc = GR_OK;
    for (int d = 0; d < ndim && rc == GR_OK; d++)
        if (gr_mul_size(bytes, (size_t)shape[d], &bytes))
            rc = gr_fail(e, GR_EINTERNAL, NULL, "the result's size overflows");
    int intended = 0;
    if (rc != GR_OK || (rc = gr_tenant_add_bytes(tenant, bytes, GR_ENOMEM, 0, e)) != GR_OK)
        bytes = 0; /* nothing counted, nothing to give back */
    else if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL))
        rc = gr_fail(e, GR_ENOMEM, NULL, "cannot start a sha256 digest");
    else if ((rc = gr_store_intend(s, id, e)) == GR_OK) {
        intended = 1;
        rc = gr_dsfile_create(&f, dir, id, gr_dataset_digest, sha, e);
    }
    if (rc == GR_OK)
        rc = gr_dsfile_write(f, values, bytes, e);
    if (rc == GR_OK)
        rc = gr_dsfile_commit(f, e);
    gr_dsfile_close(f); /* a .tmp not committed goes with it */
    if (rc == GR_OK && !(doc = gr_dataset_render(id, tenant, dtype, ndim, shape, bytes, sha, j->id)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory rendering the result's dataset");
    EVP_MD_CTX_free(sha);
    struct gr_owner own = {.tenant = tenant};
    if (rc == GR_OK) {
        gr_store_wait_add(&w, gr_store_insert_kept(s, id, &own, bytes, doc, j->id,
                                                   __atomic_load_n(&j->epoch, __ATOMIC_RELAXED), gr_store_wait_done, &w));
        int code = gr_store_wait_all(&w);
        if (code == GR_ENOTFOUND)
            rc = gr_fail(e, GR_ECONFLICT, NULL, "another replica canceled the job, or claimed it while it ran here");
        else if (code != GR_OK)
            rc = gr_fail(e, GR_EIO, NULL, "the store could not keep the result's dataset");
    }
    if (rc != GR_OK) { /* a committed file no row names is removed here (or by the next cleanup) */
        gr_dsfile_remove(dir, id, NULL);
        gr_tenant_drop_bytes(tenant, bytes);
        if (intended)
            gr_store_unintend(s, id);
    }
    return rc;
}

/* r's values packed in their dtype (r->dtype) into a new buffer, or NULL: out of memory. */
static void *packed(const struct gr_result *r)
{
    char *out = malloc((size_t)r->n * gr_dtype_size(r->dtype));
    for (int64_t k = 0; out && k < r->n; k++) {
        if (r->dtype == GR_FLOAT64)
            memcpy(out + 8 * k, &r->f[k], 8);
        else if (r->dtype == GR_FLOAT32)
            ((float *)(void *)out)[k] = (float)r->f[k];
        else if (r->dtype == GR_INT64)
            memcpy(out + 8 * k, &r->i[k], 8);
        else if (r->dtype == GR_INT32)
            ((int32_t *)(void *)out)[k] = (int32_t)r->i[k];
        else
            out[k] = (char)(r->i[k] != 0);
    }
    return out;
}

int gr_job_keep_result(struct gr_job *j, const struct gr_result *r, struct gr_store *s, struct gr_err *e)
{
    if (j->kind != GR_JOB_REDUCE || r->n <= GR_RESULT_INLINE_MAX)
        return GR_OK;
    struct gr_err why = {0};
    int64_t shape[GR_MAX_DIMS];
    int ndim = gr_job_result_shape(j, shape);
    void *values = packed(r);
    int rc = values ? keep_values(s, j, values, r->dtype, ndim, shape, j->result_dataset, &why)
                    : gr_fail(&why, GR_ENOMEM, NULL, "out of host memory");
    free(values);
    if (rc == GR_OK && r->index &&
        (rc = keep_values(s, j, r->index, GR_INT64, ndim, shape, j->indices_dataset, &why))) {
        /* all or nothing: the values' dataset goes too */
        struct gr_store_wait w = GR_STORE_WAIT_INIT;
        gr_store_wait_add(&w, gr_store_delete_dataset(s, j->result_dataset, gr_store_wait_done, &w));
        if (gr_store_wait_all(&w) == GR_OK) {
            gr_dsfile_remove(gr_store_data_dir(s), j->result_dataset, NULL);
            gr_tenant_drop_bytes(j->tenant, (uint64_t)r->n * gr_dtype_size(r->dtype));
        }
    }
    if (rc != GR_OK) {
        j->result_dataset[0] = j->indices_dataset[0] = 0;
        return gr_fail(e, rc, NULL, "the result (%lld values) could not be kept as a dataset: %s", (long long)r->n,
                       why.msg);
    }
    gr_log(GR_LOG_INFO, "job %s: its %lld results kept as dataset %s%s%s", j->id, (long long)r->n, j->result_dataset,
           r->index ? ", their indices as " : "", j->indices_dataset);
    return GR_OK;
}

int gr_job_keep_product(struct gr_job *j, const void *out, struct gr_store *s, struct gr_err *e)
{
    struct gr_err why = {0};
    if (keep_values(s, j, out, j->dtype, 2, j->shape, j->result_dataset, &why) != GR_OK) {
        j->result_dataset[0] = 0;
        return gr_fail(e, why.code, NULL, "the product (%lld x %lld) could not be kept as a dataset: %s",
                       (long long)j->shape[0], (long long)j->shape[1], why.msg);
    }
    gr_log(GR_LOG_INFO, "job %s: its %lld x %lld product kept as dataset %s", j->id, (long long)j->shape[0],
           (long long)j->shape[1], j->result_dataset);
    return GR_OK;
}
