/* idempotency.c: Idempotency-Key: keys in flight (a set under one mutex, held by their
 * requests from any HTTP thread; on a shared store also held there, for the other replicas) and
 * keys done (rows the store wrote with their resources). */
#include "api/idempotency.h"

#include "server/config.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 255

/* Keys in flight, as "tenant key" strings: few at a time (one per request being processed). */
struct held {
    struct held *next;
    int in_store; /* held in a shared store too (other replicas' requests see it) */
    char name[];
};

/* How long a shared store holds a key should this replica die with the request under way: more
 * than a request waits (GR_MAX_WAIT_S), short enough that a retry elsewhere goes through soon. */
#define STORE_HOLD_S 120
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *held;

int gr_idem_hold(struct gr_req *r, struct gr_err *e)
{
    const char *key = gr_header(r, "Idempotency-Key");
    if (!key)
        return GR_OK;
    size_t n = strlen(key);
    while (n && (key[n - 1] == ' ' || key[n - 1] == '\t')) /* HTTP: a field value's trailing space is not part of it */
        n--;
    for (size_t i = 0; i < n; i++)
        if (key[i] < 0x20 || key[i] > 0x7e)
            n = 0;
    if (n < 1 || n > KEY_MAX)
        return gr_fail(e, GR_EINVAL, "Idempotency-Key", "Idempotency-Key must be 1 to %d printable characters",
                       KEY_MAX);
    size_t tn = strlen(r->who.tenant);
    struct held *h = malloc(sizeof *h + tn + 1 + n + 1);
    if (!h)
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    snprintf(h->name, tn + 1 + n + 1, "%s %.*s", r->who.tenant, (int)n, key);
    pthread_mutex_lock(&mu);
    struct held *x = held;
    while (x && strcmp(x->name, h->name))
        x = x->next;
    if (!x) {
        h->next = held;
        held = h;
    }
    pthread_mutex_unlock(&mu);
    if (x) {
        free(h);
        return gr_fail(e, GR_ECONFLICT, "Idempotency-Key",
                       "a request with this Idempotency-Key is still being processed; retry in a moment");
    }
    r->idem = h->name;
    r->done = gr_idem_release;
    /* the key, after the tenant and its space */
    int rc = gr_store_hold_key(gr_api_store, r->who.tenant, h->name + tn + 1, STORE_HOLD_S, e);
    if (rc != GR_OK) {
        gr_idem_release(r);
        return rc;
    }
    h->in_store = gr_store_shared(gr_api_store);
    return GR_OK;
}

void gr_idem_release(struct gr_req *r)
{
    if (!r->idem)
        return;
    struct held *h = NULL;
    pthread_mutex_lock(&mu);
    for (struct held **p = &held; *p; p = &(*p)->next)
        if ((*p)->name == r->idem) {
            h = *p;
            *p = h->next;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (h && h->in_store) /* its key row, if any, was stored with what it made: a retry finds that */
        gr_store_unhold_key(gr_api_store, r->who.tenant, h->name + strlen(r->who.tenant) + 1);
    free(h);
    r->idem = NULL;
}

static enum MHD_Result hash_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    EVP_DigestUpdate(cls, key, strlen(key) + 1);
    EVP_DigestUpdate(cls, value ? value : "", value ? strlen(value) + 1 : 1);
    return MHD_YES;
}

void gr_idem_fingerprint(struct gr_req *r, const void *what, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    const char *ct = gr_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    out[0] = 0;
    if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL)) {
        EVP_DigestUpdate(c, r->method, strlen(r->method) + 1);
        EVP_DigestUpdate(c, r->url, strlen(r->url) + 1);
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, hash_arg, c);
        EVP_DigestUpdate(c, ct ? ct : "", ct ? strlen(ct) + 1 : 1);
        EVP_DigestUpdate(c, what, n);
        EVP_DigestFinal_ex(c, md, &len);
    }
    EVP_MD_CTX_free(c);
    for (unsigned k = 0; k < len && k < 32; k++)
        snprintf(out + 2 * k, 3, "%02x", md[k]);
}

int gr_idem_lookup(struct gr_req *r, const char *fingerprint, char id[24], struct gr_err *e)
{
    char stored[65];
    const char *key = strchr(r->idem, ' ') + 1;
    int rc = gr_store_get_key(gr_api_store, r->who.tenant, key, gr_now() - (double)gr_api_cfg->idempotency_ttl_s,
                              stored, id, e);
    if (rc == GR_OK && strcmp(stored, fingerprint))
        return gr_fail(e, GR_EUNPROC, "Idempotency-Key",
                       "this Idempotency-Key was used for another request (another body, path or query); use a new "
                       "key for a new request");
    return rc;
}
