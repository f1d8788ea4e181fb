/* tokens.c: the tokens file's parser and the table the HTTP threads check bearer tokens
 * against. The table is replaced whole (main thread, SIGHUP) under a write lock; HTTP threads
 * read it under the read lock. Only SHA-256 digests of tokens are kept. */
#include "server/tokens.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TOKEN_MIN 16
#define TOKEN_MAX 256
#define FILE_MAX ((size_t)1 << 20)

struct entry {
    unsigned char sha[SHA256_DIGEST_LENGTH];
    struct gr_principal who;
};

struct gr_token_table {
    int n;
    struct entry e[];
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct gr_token_table *active;
static _Atomic unsigned loads; /* tables made active so far */

int gr_tenant_valid(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > GR_TENANT_MAX)
        return 0;
    for (; *name; name++)
        if (!((*name >= 'a' && *name <= 'z') || (*name >= '0' && *name <= '9') || *name == '_' || *name == '-'))
            return 0;
    return 1;
}

static int token_valid(const char *t, size_t n)
{
    if (n < TOKEN_MIN || n > TOKEN_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x21 || t[i] > 0x7e)
            return 0;
    return 1;
}

/* The next whitespace-separated field of [*p, end) (*p advanced past it), and its length. */
static const char *field(const char **p, const char *end, size_t *n)
{
    while (*p < end && (**p == ' ' || **p == '\t' || **p == '\r'))
        (*p)++;
    const char *f = *p;
    while (*p < end && **p != ' ' && **p != '\t' && **p != '\r')
        (*p)++;
    *n = (size_t)(*p - f);
    return *n ? f : NULL;
}

/* One line into t->e[t->n] (a token line) or nothing (blank, comment). */
static int parse_line(const char *s, const char *end, int line, struct gr_token_table *t, struct gr_err *e)
{
    const char *p = s;
    size_t tn, kn, an, xn;
    const char *tenant = field(&p, end, &tn);
    if (!tenant || *tenant == '#')
        return GR_OK;
    const char *token = field(&p, end, &kn), *admin = field(&p, end, &an), *extra = field(&p, end, &xn);
    char name[GR_TENANT_MAX + 1] = "";
    if (tn <= GR_TENANT_MAX)
        memcpy(name, tenant, tn);
    if (!gr_tenant_valid(name))
        return gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: the tenant must be 1 to %d of a-z 0-9 _ -", line,
                       GR_TENANT_MAX);
    if (!token)
        return gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: no token after the tenant (TENANT TOKEN [admin])",
                       line);
    if (!token_valid(token, kn))
        return gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: a token is %d to %d printable characters, no spaces",
                       line, TOKEN_MIN, TOKEN_MAX);
    if ((admin && (an != 5 || strncmp(admin, "admin", 5))) || extra)
        return gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: after the token only the word admin may follow",
                       line);
    struct entry *x = &t->e[t->n];
    SHA256((const unsigned char *)token, kn, x->sha);
    for (int i = 0; i < t->n; i++)
        if (!memcmp(t->e[i].sha, x->sha, sizeof x->sha))
            return gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: this token is given on an earlier line too", line);
    memcpy(x->who.tenant, name, tn + 1);
    x->who.admin = admin != NULL;
    t->n++;
    return GR_OK;
}

int gr_tokens_parse(const char *text, size_t len, struct gr_token_table **out, struct gr_err *e)
{
    *out = NULL;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    struct gr_token_table *t = calloc(1, sizeof *t + lines * sizeof t->e[0]);
    if (!t)
        return gr_fail(e, GR_EIO, NULL, "out of memory reading the tokens file");
    int line = 1, rc = GR_OK;
    for (const char *s = text, *end = text + len; rc == GR_OK && s < end; line++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *eol = nl ? nl : end;
        if (memchr(s, 0, (size_t)(eol - s)))
            rc = gr_fail(e, GR_EINVAL, NULL, "tokens file line %d: holds a NUL byte", line);
        else
            rc = parse_line(s, eol, line, t, e);
        s = eol + 1;
    }
    if (rc == GR_OK && t->n == 0)
        rc = gr_fail(e, GR_EINVAL, NULL, "the tokens file holds no token (lines are TENANT TOKEN [admin])");
    if (rc != GR_OK) {
        free(t);
        return rc;
    }
    *out = t;
    return GR_OK;
}

void gr_tokens_free(struct gr_token_table *t) { free(t); }
int gr_tokens_count(const struct gr_token_table *t) { return t ? t->n : 0; }

int gr_tokens_load(const char *path, struct gr_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gr_fail(e, GR_EIO, NULL, "cannot open the tokens file %s: %s", path, strerror(errno));
    char *text = malloc(FILE_MAX + 1);
    size_t n = text ? fread(text, 1, FILE_MAX + 1, f) : 0;
    int bad = !text || ferror(f);
    fclose(f);
    struct gr_token_table *t = NULL;
    int rc = bad ? gr_fail(e, GR_EIO, NULL, "cannot read the tokens file %s", path)
             : n > FILE_MAX ? gr_fail(e, GR_EINVAL, NULL, "the tokens file %s is over %zu bytes", path, FILE_MAX)
                            : gr_tokens_parse(text, n, &t, e);
    if (text)
        OPENSSL_cleanse(text, FILE_MAX + 1); /* the tokens themselves stay nowhere in memory */
    free(text);
    if (rc != GR_OK)
        return rc;
    pthread_rwlock_wrlock(&lock);
    struct gr_token_table *old = active;
    active = t;
    loads++;
    pthread_rwlock_unlock(&lock);
    free(old);
    return GR_OK;
}

unsigned gr_tokens_loads(void) { return loads; }

int gr_tokens_enabled(void)
{
    pthread_rwlock_rdlock(&lock);
    int on = active != NULL;
    pthread_rwlock_unlock(&lock);
    return on;
}

int gr_tokens_check(const char *authorization, struct gr_principal *p, struct gr_err *e)
{
    const char *a = authorization;
    if (!a)
        return gr_fail(e, GR_EUNAUTH, NULL, "this server needs a token: send -H 'Authorization: Bearer TOKEN'");
    while (*a == ' ')
        a++;
    if (strncasecmp(a, "Bearer ", 7))
        return gr_fail(e, GR_EUNAUTH, NULL, "the Authorization header must be 'Bearer TOKEN'");
    a += 7;
    while (*a == ' ')
        a++;
    size_t n = strlen(a);
    while (n && a[n - 1] == ' ')
        n--;
    unsigned char sha[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)a, n, sha);
    int found = -1;
    pthread_rwlock_rdlock(&lock);
    /* every entry is compared, in constant time, so the time taken says nothing of the token */
    for (int i = 0; active && i < active->n; i++)
        if (!CRYPTO_memcmp(active->e[i].sha, sha, sizeof sha))
            found = i;
    if (found >= 0)
        *p = active->e[found].who;
    pthread_rwlock_unlock(&lock);
    if (found < 0)
        return gr_fail(e, GR_EUNAUTH, NULL, "the token is not valid (or no longer)");
    return GR_OK;
}

void gr_tokens_unload(void)
{
    pthread_rwlock_wrlock(&lock);
    free(active);
    active = NULL;
    pthread_rwlock_unlock(&lock);
}
