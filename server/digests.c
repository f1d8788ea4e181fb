/* digests.c: the digest thread. It owns the queue (under mu) and the one file it maps at a
 * time; any thread queues. A large upload's 201 comes when its values are durable: one core's
 * sha256 (about 1.3 GB/s on the H100 host) would otherwise set the upload's pace, so the digest
 * is read back from the page cache here and stored after. */
#include "server/digests.h"

#include "db/dsfile.h"
#include "db/store.h"
#include "server/job.h"
#include "server/job_doc.h"
#include "server/log.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PIECE ((size_t)64 << 20) /* digested between looks at `stopping` */

struct pending {
    struct pending *next;
    size_t bytes;
    char id[24];
};

static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct pending *head, **tail = &head;
static int started, stopping;
static struct gr_store *store;

void gr_digest_later(const char *id, size_t bytes)
{
    struct pending *p = strlen(id) < sizeof p->id ? calloc(1, sizeof *p) : NULL;
    if (!p) { /* left null until the next start finds it */
        gr_log(GR_LOG_ERROR, "dataset %s: cannot queue its sha256 (%s)", id,
               strlen(id) < sizeof p->id ? "out of memory" : "id too long");
        return;
    }
    snprintf(p->id, sizeof p->id, "%s", id);
    p->bytes = bytes;
    pthread_mutex_lock(&mu);
    *tail = p;
    tail = &p->next;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static int is_stopping(void)
{
    pthread_mutex_lock(&mu);
    int stop = stopping;
    pthread_mutex_unlock(&mu);
    return stop;
}

/* GR_OK with hex filled, GR_EUNAVAIL when stopping came first, else the failure (in e). */
static int digest(const struct pending *p, char hex[GR_DIGEST_HEX], struct gr_err *e)
{
    const void *values;
    int rc = gr_dsfile_map(gr_store_data_dir(store), p->id, p->bytes, &values, e);
    if (rc != GR_OK)
        return rc;
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    rc = sha && EVP_DigestInit_ex(sha, EVP_sha256(), NULL) ? GR_OK : gr_fail(e, GR_ENOMEM, NULL, "cannot start a sha256");
    for (size_t at = 0; rc == GR_OK && at < p->bytes; at += PIECE) {
        size_t n = p->bytes - at < PIECE ? p->bytes - at : PIECE;
        if (is_stopping())
            rc = GR_EUNAVAIL;
        else if (!EVP_DigestUpdate(sha, (const char *)values + at, n))
            rc = gr_fail(e, GR_EINTERNAL, NULL, "sha256 failed");
    }
    if (rc == GR_OK)
        rc = gr_digest_hex(sha, hex);
    EVP_MD_CTX_free(sha);
    gr_dsfile_unmap(values, p->bytes);
    return rc;
}

/* A stored dataset whose digest is still null: queued. */
static void on_dataset(void *ctx, const char *id, const char *doc)
{
    json_t *o = json_loads(doc, 0, NULL), *sha = json_object_get(o, "sha256");
    if (sha && json_is_null(sha))
        gr_digest_later(id, (size_t)json_integer_value(json_object_get(o, "bytes")));
    snprintf(ctx, 24, "%s", id);
    json_decref(o);
}

/* Queue every stored dataset whose digest is still null (a crash between a 201 and its digest),
 * a page at a time: on this thread, so that a store of many datasets does not hold up start-up. */
static void queue_stored(void)
{
    char before[24] = "", last[24] = "";
    struct gr_err e = {0};
    while (!is_stopping()) {
        if (gr_store_list_datasets(store, NULL, before[0] ? before : NULL, 500, on_dataset, last, &e) != GR_OK) {
            gr_log(GR_LOG_WARN, "datasets whose sha256 a crash left null are not looked for until a restart: %s",
                   e.msg);
            return;
        }
        if (!strcmp(last, before))
            return;
        memcpy(before, last, sizeof before);
    }
}

static void *digest_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "gr-digest");
    queue_stored();
    pthread_mutex_lock(&mu);
    while (!stopping) {
        struct pending *p = head;
        if (!p) {
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        if (!(head = p->next))
            tail = &head;
        pthread_mutex_unlock(&mu);
        char hex[GR_DIGEST_HEX];
        struct gr_err e = {0};
        double t0 = gr_mono_ms();
        int rc = digest(p, hex, &e);
        if (rc == GR_OK && (rc = gr_store_dataset_digest(store, p->id, hex)) != GR_OK)
            gr_fail(&e, rc, NULL, "the store refused it");
        if (rc == GR_OK)
            gr_log(GR_LOG_INFO, "dataset %s: sha256 stored, %zu bytes digested in %.0f ms", p->id, p->bytes,
                   gr_mono_ms() - t0);
        else if (rc != GR_EUNAVAIL) /* stopping: the next start queues it again */
            gr_log(GR_LOG_WARN, "dataset %s: no sha256 (%s)", p->id, e.msg);
        free(p);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int gr_digests_start(struct gr_store *s, struct gr_err *e)
{
    store = s;
    pthread_mutex_lock(&mu);
    stopping = 0;
    pthread_mutex_unlock(&mu);
    if (pthread_create(&thread, NULL, digest_main, NULL) != 0)
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the digest thread");
    started = 1;
    return GR_OK;
}

void gr_digests_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    if (started)
        pthread_join(thread, NULL);
    started = 0;
    pthread_mutex_lock(&mu);
    while (head) { /* still null in the store: the next start queues them again */
        struct pending *p = head;
        head = p->next;
        free(p);
    }
    tail = &head;
    pthread_mutex_unlock(&mu);
}
