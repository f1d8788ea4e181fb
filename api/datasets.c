/* datasets.c: POST /v1/datasets (the body streamed into a file as it arrives, hashed on the way
 * or, when large, by the digest thread after its 201, made durable, then its row stored), GET
 * one or a page, the values as .npy, DELETE. An upload's state belongs to its request's HTTP
 * thread, its digest to the file's tap thread until the file is committed; the store writer
 * only records its answer and wakes the request. */
#include "api/datasets.h"

#include "api/idempotency.h"
#include "api/npy.h"
#include "api/parse.h"
#include "common/id.h"
#include "db/dsfile.h"
#include "server/config.h"
#include "server/digests.h"
#include "server/job_doc.h"
#include "server/log.h"
#include "server/tenants.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void problem(struct gr_req *r, int code, const char *field, const char *msg)
{
    struct gr_err e;
    gr_fail(&e, code, field, "%s", msg);
    gr_respond_problem(r, &e);
}

static const char *data_dir(void) { return gr_store_data_dir(gr_api_store); }

/* A stored dataset's doc into its dtype, dimensions and element count. */
static int source_of(const char *doc, struct gr_source *src, struct gr_err *e)
{
    json_t *o = json_loads(doc, 0, NULL), *shape = json_object_get(o, "shape");
    size_t nd = json_array_size(shape);
    int ok = json_is_array(shape) && nd <= GR_MAX_DIMS;
    *src = (struct gr_source){.dtype = gr_result_dtype_parse(json_string_value(json_object_get(o, "dtype"))),
                              .ndim = (int)nd, .count = 1};
    for (int d = 0; d < GR_MAX_DIMS; d++)
        src->shape[d] = 1;
    for (size_t d = 0; ok && d < nd; d++) {
        src->shape[d] = json_integer_value(json_array_get(shape, d));
        ok = src->shape[d] > 0 && !__builtin_mul_overflow(src->count, src->shape[d], &src->count);
    }
    json_decref(o);
    if (!ok || src->dtype < 0)
        return gr_fail(e, GR_EIO, NULL, "a stored dataset's record is unreadable");
    return GR_OK;
}

/* Dataset id: its doc (malloc'd) and, if src is not NULL, what it holds. Answers the problem
 * itself and returns non-zero when there is none. */
static int find(struct gr_req *r, const char *id, char **doc, struct gr_source *src)
{
    struct gr_err e = {0};
    *doc = NULL;
    int rc = gr_id_valid(id, 'd') ? gr_store_get_dataset(gr_api_store, id, gr_scope(r), doc, &e) : GR_ENOTFOUND;
    if (rc == GR_ENOTFOUND)
        gr_fail(&e, rc, NULL, "no dataset with id %s (ids look like d_0123456789abcdef)", id);
    if (rc == GR_OK && src)
        rc = source_of(*doc, src, &e);
    if (rc) {
        free(*doc);
        *doc = NULL;
        gr_respond_problem(r, &e);
    }
    return rc;
}

int gr_dataset_for_job(void *ctx, struct gr_job *j, const char *id, struct gr_source *src, struct gr_err *e)
{
    char *doc = NULL;
    if (!gr_id_valid(id, 'd'))
        return gr_fail(e, GR_ENOTFOUND, "dataset", "no dataset with that id (ids look like d_0123456789abcdef)");
    /* the look-up is announced first: a DELETE from now on waits for it; one before left no row */
    int rc = gr_jobs_look_up_dataset(id, e);
    if (rc)
        return rc;
    rc = gr_store_get_dataset(gr_api_store, id, gr_scope(ctx), &doc, e);
    if (rc == GR_ENOTFOUND)
        gr_fail(e, rc, "dataset", "no dataset %s (GET /v1/datasets lists them)", id);
    if (rc == GR_OK)
        rc = source_of(doc, src, e);
    if (rc == GR_OK && src->dtype == GR_BOOL)
        rc = gr_fail(e, GR_EUNPROC, "dataset", "dataset %s holds bools (an any or all result kept): jobs read "
                                               "int32, int64, float32 or float64 values", id);
    free(doc);
    gr_jobs_looked_up_dataset(id, rc == GR_OK);
    if (rc)
        return rc;
    snprintf(j->dataset, sizeof j->dataset, "%s", id);
    j->dataset_pinned = 1;
    return GR_OK;
}

/* --- upload --- */

struct upload {
    int npy, have_header; /* raw bodies have theirs from the query */
    char tenant[65];      /* whose it is */
    uint64_t counted;     /* bytes counted against the tenant's quota (given back unless stored) */
    struct gr_source src;
    size_t expect, got;       /* value bytes dtype x shape needs, and received */
    unsigned long long clen;  /* Content-Length, when sent */
    int has_clen;
    unsigned char *head;      /* a .npy preamble, gathered until it is whole */
    size_t head_len, need;
    struct gr_dsfile *file;
    EVP_MD_CTX *sha; /* fed by the file's tap thread until it is committed or closed; NULL: later */
    char id[24];
    char *doc;     /* the resource, once the values are durable */
    int intended;  /* the store names its file under way (gr_store_intend) */
    int committed; /* the values are durable in their .bin */
    int stored;    /* its row is committed: the file stays */
};

/* Removes the values of an upload that will not be kept: its .tmp, or its durable .bin whose
 * row was never stored. Called before a failure is answered, so a client that has its answer
 * finds no file of it. */
static void discard(struct upload *u)
{
    gr_dsfile_close(u->file);
    u->file = NULL;
    if (u->committed && !u->stored)
        gr_dsfile_remove(data_dir(), u->id, NULL);
    if (u->intended && !u->stored)
        gr_store_unintend(gr_api_store, u->id);
    u->committed = u->intended = 0;
}

static void release(struct upload *u)
{
    if (!u)
        return;
    discard(u);
    if (!u->stored)
        gr_tenant_drop_bytes(u->tenant, u->counted);
    EVP_MD_CTX_free(u->sha);
    free(u->head);
    free(u->doc);
    free(u);
}

/* A raw body's ?dtype= and ?shape=, and the bytes they make. */
static int raw_layout(struct gr_req *r, struct upload *u, struct gr_err *e)
{
    const char *dtype = gr_query(r, "dtype"), *shape = gr_query(r, "shape");
    if (!dtype || !*dtype)
        return gr_fail(e, GR_EINVAL, "dtype", "?dtype= is required with a raw body: int32, int64, float32 or float64");
    if ((u->src.dtype = gr_dtype_parse(dtype)) < 0)
        return gr_fail(e, GR_EINVAL, "dtype", "unknown ?dtype=: use int32, int64, float32 or float64");
    if (!shape || !*shape)
        return gr_fail(e, GR_EINVAL, "shape", "?shape= is required with a raw body: N, R,C (rows, columns) or more "
                                              "dimensions, e.g. 4,8,16");
    int rc = gr_parse_dims(shape, &u->src.ndim, u->src.shape, e);
    if (rc)
        return rc;
    size_t count = 1;
    for (int d = 0; d < u->src.ndim; d++)
        if (gr_mul_size(count, (size_t)u->src.shape[d], &count))
            return gr_fail(e, GR_EUNPROC, "shape", "?shape= holds more bytes than can be addressed");
    if (gr_mul_size(count, gr_dtype_size(u->src.dtype), &u->expect) || count > INT64_MAX)
        return gr_fail(e, GR_EUNPROC, "shape", "?shape= holds more bytes than can be addressed");
    u->src.count = (int64_t)count;
    u->have_header = 1;
    return GR_OK;
}

/* Every way a body's size can be refused before it is read (413, 422); once the size is known
 * it is counted against the tenant's quota (413 over it). */
static int check_size(struct upload *u, size_t preamble, struct gr_err *e)
{
    size_t max = gr_api_cfg->max_dataset_bytes;
    if ((u->has_clen && u->clen > max) || u->expect > max)
        return gr_fail(e, GR_ETOOBIG, NULL, "the dataset is %llu bytes; this server takes at most %zu (--max-dataset-bytes)",
                       u->has_clen && u->clen > max ? u->clen : (unsigned long long)u->expect, max);
    if (u->have_header && u->has_clen && u->clen != preamble + u->expect)
        return gr_fail(e, u->npy ? GR_EINVAL : GR_EUNPROC, NULL, "the body is %llu bytes but %lld %s values need %zu%s",
                       u->clen, (long long)u->src.count, gr_dtype_name(u->src.dtype), u->expect,
                       u->npy ? " after the .npy header" : "");
    if (u->have_header && !u->counted && gr_tenant_add_bytes(u->tenant, u->expect, GR_ETOOBIG, 0, e) != GR_OK)
        return e->code;
    u->counted = u->have_header ? u->expect : 0;
    return GR_OK;
}

static int upload_open(struct gr_req *r, struct gr_err *e)
{
    const char *ct = gr_header(r, MHD_HTTP_HEADER_CONTENT_TYPE), *cl = gr_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int npy = gr_ctype_is(ct, "application/x-npy");
    if (!npy && !gr_ctype_is(ct, "application/octet-stream"))
        return gr_fail(e, GR_EMEDIA, NULL,
                       "send the values raw (little-endian) as application/octet-stream with ?dtype=&shape=, or a "
                       ".npy file as application/x-npy (got %.100s)",
                       ct ? ct : "no Content-Type");
    struct upload *u = calloc(1, sizeof *u);
    if (!u)
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory for an upload");
    u->npy = npy;
    memcpy(u->tenant, r->who.tenant, sizeof u->tenant);
    u->has_clen = cl != NULL;
    u->clen = cl ? strtoull(cl, NULL, 10) : 0;
    int rc = npy ? GR_OK : raw_layout(r, u, e);
    if (!rc && npy && (gr_query(r, "dtype") || gr_query(r, "shape")))
        rc = gr_fail(e, GR_EINVAL, gr_query(r, "dtype") ? "dtype" : "shape",
                     "a .npy body carries its own dtype and shape: drop ?dtype= and ?shape=");
    if (!rc) /* a retry of an upload still arriving is refused before its body is read */
        rc = gr_idem_hold(r, e);
    if (!rc && npy && !(u->head = malloc(GR_NPY_MAX_HEADER + 12)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory for an upload");
    if (!rc)
        rc = check_size(u, 0, e);
    /* One core's sha256 is slower than the disk and the network (1.3 GB/s on the H100 host):
     * a large upload is answered once durable and digested after (digests.h), unless its key's
     * fingerprint needs the digest now. */
    size_t later = gr_api_cfg->digest_later_bytes;
    int now = r->idem || !later || !u->has_clen || u->clen < later;
    if (!rc && now && (!(u->sha = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(u->sha, EVP_sha256(), NULL)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "cannot start a sha256 digest");
    if (!rc) {
        gr_id_new('d', u->id, sizeof u->id);
        u->intended = (rc = gr_store_intend(gr_api_store, u->id, e)) == GR_OK;
    }
    if (!rc) /* the file's tap: the digest runs on a thread of its own, beside the network and the disk */
        rc = gr_dsfile_create(&u->file, data_dir(), u->id, now ? gr_dataset_digest : NULL, u->sha, e);
    if (rc) {
        release(u);
        return rc;
    }
    r->state = u;
    return GR_OK;
}

/* Gather a .npy preamble from the front of the body; *data, *n are left at the values. */
static int take_header(struct upload *u, const char **data, size_t *n, struct gr_err *e)
{
    while (!u->have_header && *n) {
        /* 10 bytes tell a version 1 preamble's length, 12 a version 2 or 3 one's */
        size_t want = u->need ? u->need : u->head_len < 10 ? 10 : 12;
        size_t k = want - u->head_len < *n ? want - u->head_len : *n;
        memcpy(u->head + u->head_len, *data, k);
        u->head_len += k;
        *data += k;
        *n -= k;
        int rc = u->need ? GR_OK : gr_npy_need(u->head, u->head_len, &u->need, e);
        if (rc)
            return rc;
        if (!u->need || u->head_len < u->need)
            continue;
        struct gr_npy h;
        if ((rc = gr_npy_parse(u->head, u->need, &h, e)))
            return rc;
        if (h.count == 0)
            return gr_fail(e, GR_EUNPROC, NULL, "the .npy holds no values: a dataset needs at least one");
        u->src = (struct gr_source){.dtype = h.dtype, .ndim = h.ndim, .count = (int64_t)h.count};
        memcpy(u->src.shape, h.shape, sizeof u->src.shape);
        u->expect = h.bytes;
        u->have_header = 1;
        if ((rc = check_size(u, h.data_at, e)))
            return rc;
    }
    return GR_OK;
}

static int upload_chunk(struct gr_req *r, const char *data, size_t n, struct gr_err *e)
{
    struct upload *u = r->state;
    int rc = u->have_header ? GR_OK : take_header(u, &data, &n, e);
    if (!rc && n > u->expect - u->got)
        rc = gr_fail(e, u->npy ? GR_EINVAL : GR_EUNPROC, NULL,
                     u->npy ? "the .npy holds more than the %zu bytes of values its header gives"
                            : "the body holds more than the %zu bytes that ?dtype= and ?shape= give",
                     u->expect);
    if (!rc && n)
        rc = gr_dsfile_write(u->file, data, n, e);
    u->got += n;
    if (rc) /* nothing more is written; the rest is dropped */
        discard(u);
    return rc;
}

static void upload_close(struct gr_req *r)
{
    release(r->state);
    r->state = NULL;
}

const struct gr_stream gr_dataset_upload = {upload_open, upload_chunk, upload_close};

/* Runs on the store's writer thread once the row is committed (or refused). */
static void on_stored(void *ctx, int code)
{
    struct gr_req *r = ctx;
    struct upload *u = r->state;
    r->store_code = code;
    u->stored = code == GR_OK;
    if (u->stored && !u->sha) /* queued here, so that a request never answered loses nothing */
        gr_digest_later(u->id, u->expect);
    gr_wake(r);
}

/* 201 with the dataset's doc (taken): a new one, or (replayed) the one an earlier request with
 * the same Idempotency-Key made. */
static void answer_created(struct gr_req *r, const char *id, char *doc)
{
    char loc[48];
    snprintf(loc, sizeof loc, "/v1/datasets/%s", id);
    const char *hdrs[] = {MHD_HTTP_HEADER_LOCATION, loc, r->replayed ? "Idempotent-Replayed" : NULL, "true", NULL};
    gr_respond(r, 201, "application/json", doc, strlen(doc), hdrs);
}

static void answer_upload(struct gr_req *r)
{
    struct upload *u = r->state;
    if (!u->stored) {
        discard(u);
        problem(r, r->store_code == GR_ENOMEM ? GR_ENOMEM : r->store_code == GR_ENOTFOUND ? GR_EUNAVAIL : GR_EIO, NULL,
                r->store_code == GR_ENOMEM      ? "the server's disk is full: nothing was kept"
                : r->store_code == GR_ENOTFOUND ? "this replica's lease ran out while the upload arrived (another "
                                                  "replica may have cleaned its file up); nothing was kept: send it again"
                                                : "the store could not keep this dataset; nothing was kept");
        return;
    }
    answer_created(r, u->id, u->doc);
    u->doc = NULL;
    gr_log(GR_LOG_INFO, "dataset %s stored: %zu bytes%s", u->id, u->expect, u->sha ? "" : ", its sha256 to follow");
}

/* An upload with an Idempotency-Key, once its values are in: its fingerprint is the request's
 * with the values' digest (in doc), dtype and shape. GR_OK to store it with the key (fp
 * filled); else its values removed and the request answered (the earlier upload's dataset, or a
 * problem), non-zero. Removed first: a client that has its answer finds no file of it. */
static int upload_key(struct gr_req *r, struct upload *u, char fp[65])
{
    struct gr_err e = {0};
    char id[24], *doc = NULL, what[320];
    json_t *o = json_loads(u->doc, 0, NULL);
    size_t n = (size_t)snprintf(what, sizeof what, "%s %s %lld %lld", json_string_value(json_object_get(o, "sha256")),
                                gr_dtype_name(u->src.dtype), (long long)u->src.shape[0], (long long)u->src.shape[1]);
    for (int d = 2; d < u->src.ndim && n < sizeof what; d++) /* 1-D and 2-D keys as they always were */
        n += (size_t)snprintf(what + n, sizeof what - n, " %lld", (long long)u->src.shape[d]);
    json_decref(o);
    gr_idem_fingerprint(r, what, strlen(what), fp);
    int rc = gr_idem_lookup(r, fp, id, &e);
    if (rc == GR_ENOTFOUND)
        return GR_OK;
    discard(u);
    if (rc == GR_OK && (rc = gr_store_get_dataset(gr_api_store, id, NULL, &doc, &e)) == GR_ENOTFOUND)
        gr_fail(&e, rc, NULL, "dataset %s, which this Idempotency-Key made, has been deleted since", id);
    if (rc == GR_OK) {
        r->replayed = 1;
        answer_created(r, id, doc);
        return GR_ECONFLICT;
    }
    gr_respond_problem(r, &e);
    return rc;
}

void gr_post_dataset(struct gr_req *r)
{
    struct upload *u = r->state;
    struct gr_err e = {0};
    if (!u->have_header) {
        problem(r, GR_EINVAL, NULL, u->head_len ? "the .npy ends inside its header" : "the body is empty: send a .npy file");
        return;
    }
    if (u->got != u->expect) {
        gr_fail(&e, u->npy ? GR_EINVAL : GR_EUNPROC, NULL,
                u->npy ? "the .npy ends after %zu of the %zu bytes of values its header gives"
                       : "the body is %zu bytes but ?dtype= and ?shape= give %zu",
                u->got, u->expect);
        discard(u);
        gr_respond_problem(r, &e);
        return;
    }
    int rc = gr_dsfile_commit(u->file, &e);
    if (rc) {
        discard(u);
        gr_respond_problem(r, &e);
        return;
    }
    u->committed = 1;
    u->doc = gr_dataset_render(u->id, u->tenant, u->src.dtype, u->src.ndim, u->src.shape, u->expect, u->sha, NULL);
    if (!u->doc) {
        discard(u);
        problem(r, GR_ENOMEM, NULL, "out of memory rendering the dataset (or its sha256 failed)");
        return;
    }
    char fp[65] = "";
    if (r->idem && upload_key(r, u, fp) != GR_OK)
        return; /* the values just received go with the request */
    char *copy = strdup(u->doc);
    if (!copy) {
        discard(u);
        problem(r, GR_ENOMEM, NULL, "out of memory rendering the dataset");
        return;
    }
    struct gr_owner own = {.tenant = u->tenant, .key = r->idem ? strchr(r->idem, ' ') + 1 : NULL, .fingerprint = fp};
    /* suspended before the write is queued, so its wake cannot come first */
    gr_suspend(r, answer_upload);
    if ((rc = gr_store_insert_dataset(gr_api_store, u->id, &own, u->expect, copy, on_stored, r)) != GR_OK)
        on_stored(r, rc);
}

/* --- reading and deleting --- */

void gr_get_dataset(struct gr_req *r)
{
    char *doc;
    if (find(r, r->id, &doc, NULL) == GR_OK)
        gr_respond(r, 200, "application/json", doc, strlen(doc), NULL);
}

static int fetch_datasets(void *args, const char *before, int limit, gr_store_row row, void *ctx, struct gr_err *e)
{
    return gr_store_list_datasets(gr_api_store, args, before, limit, row, ctx, e);
}

void gr_list_datasets(struct gr_req *r)
{
    const char *tenant;
    if (gr_list_tenant(r, &tenant) == GR_OK)
        gr_respond_page(r, "datasets", 'd', fetch_datasets, (void *)tenant);
}

/* A download: the .npy preamble from memory, then the file, read as MHD sends. */
struct download {
    int fd;
    size_t hlen;
    uint64_t total;
    char head[GR_NPY_HEADER_MAX];
};

static ssize_t read_download(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct download *d = cls;
    if (pos >= d->total)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (pos < d->hlen) {
        size_t k = d->hlen - pos < max ? d->hlen - (size_t)pos : max;
        memcpy(buf, d->head + pos, k);
        return (ssize_t)k;
    }
    if (max > d->total - pos)
        max = (size_t)(d->total - pos);
    ssize_t n = pread(d->fd, buf, max, (off_t)(pos - d->hlen));
    return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void free_download(void *cls)
{
    struct download *d = cls;
    close(d->fd);
    free(d);
}

void gr_respond_dataset_data(struct gr_req *r, const char *id, int npy)
{
    char *doc;
    struct gr_source src;
    if (find(r, id, &doc, &src) != GR_OK)
        return;
    free(doc);
    struct gr_err e = {0};
    struct download *d = calloc(1, sizeof *d);
    size_t bytes = (size_t)src.count * gr_dtype_size(src.dtype);
    if (!d) {
        problem(r, GR_ENOMEM, NULL, "out of memory for a download");
        return;
    }
    /* the open file outlives a DELETE that comes during the download */
    if (gr_dsfile_open(data_dir(), id, bytes, &d->fd, &e) != GR_OK) {
        free(d);
        gr_respond_problem(r, &e);
        return;
    }
    d->hlen = npy ? gr_npy_header(src.dtype, src.ndim, src.shape, d->head, sizeof d->head) : 0;
    d->total = d->hlen + bytes;
    char disp[64];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.%s\"", id, npy ? "npy" : "bin");
    const char *hdrs[] = {"Content-Disposition", disp, "Vary", "Accept", NULL}; /* /result answers by Accept */
    gr_respond_reader(r, 200, npy ? "application/x-npy" : "application/octet-stream", d->total, read_download, d,
                      free_download, hdrs);
}

void gr_get_dataset_data(struct gr_req *r) { gr_respond_dataset_data(r, r->id, 1); }

/* Runs on the store's writer thread once the row's delete is committed (or refused). */
static void on_deleted(void *ctx, int code)
{
    struct gr_req *r = ctx;
    r->store_code = code;
    gr_wake(r);
}

static void answer_delete(struct gr_req *r)
{
    struct gr_err e = {0};
    int rc = r->store_code;
    /* the row is gone, so the values are unreachable: a file that stays is only disk space */
    if (rc == GR_OK && gr_dsfile_remove(data_dir(), r->id, &e) != GR_OK)
        gr_log(GR_LOG_WARN, "dataset %s deleted, but its file stays: %s", r->id, e.msg);
    gr_jobs_delete_dataset_end(r->id);
    if (rc == GR_OK) {
        gr_respond(r, 204, NULL, NULL, 0, NULL);
        gr_log(GR_LOG_INFO, "dataset %s deleted", r->id);
    } else if (rc == GR_ENOTFOUND) {
        problem(r, rc, NULL, "no dataset with that id (deleted meanwhile)");
    } else {
        problem(r, GR_EIO, NULL, "the store could not delete this dataset; it is still there");
    }
}

void gr_delete_dataset(struct gr_req *r)
{
    char *doc;
    struct gr_source src;
    struct gr_err e = {0};
    if (find(r, r->id, &doc, &src) != GR_OK)
        return;
    /* this replica's jobs, then (a shared store) the other replicas' stored ones */
    long long elsewhere = 0;
    int rc = gr_jobs_delete_dataset_begin(r->id, &e), begun = rc == GR_OK;
    if (begun && (rc = gr_store_dataset_jobs(gr_api_store, r->id, &elsewhere, &e)) == GR_OK && elsewhere > 0)
        rc = gr_fail(&e, GR_ECONFLICT, NULL,
                     "dataset %s is used by %lld queued or running job(s) of other replicas; delete it once they "
                     "end (or cancel them)", r->id, elsewhere);
    if (rc != GR_OK) {
        if (begun)
            gr_jobs_delete_dataset_end(r->id);
        free(doc);
        gr_respond_problem(r, &e);
        return;
    }
    /* its bytes leave the tenant's count now: should the store fail to delete the row, the count
     * is short of it until the next start sums the rows again */
    json_t *o = json_loads(doc, 0, NULL);
    const char *tenant = json_string_value(json_object_get(o, "tenant"));
    gr_tenant_drop_bytes(tenant ? tenant : "default", (uint64_t)src.count * gr_dtype_size(src.dtype));
    json_decref(o);
    free(doc);
    gr_suspend(r, answer_delete);
    rc = gr_store_delete_dataset(gr_api_store, r->id, on_deleted, r);
    if (rc != GR_OK)
        on_deleted(r, rc);
}
