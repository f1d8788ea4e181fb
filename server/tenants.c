/* tenants.c: per-tenant counters behind the quotas, in a small hash table of tenants that
 * only grows (tenants come from the tokens file and the store: few). One mutex, any thread. */
#include "server/tenants.h"

#include "server/tokens.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 256

struct tenant {
    struct tenant *next;
    int64_t jobs;
    uint64_t bytes;
    char name[GR_TENANT_MAX + 1];
};

static pthread_mutex_t mu = GR_MUTEX_INITIALIZER;
static struct tenant *table[NBUCKETS];
static int64_t max_jobs, max_bytes;

void gr_tenants_limits(int64_t jobs, int64_t bytes)
{
    max_jobs = jobs;
    max_bytes = bytes;
}

/* The tenant's counters, made on first use; NULL only when out of memory (mu held). */
static struct tenant *find(const char *name)
{
    unsigned h = 2166136261u;
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    struct tenant **p = &table[h % NBUCKETS];
    for (; *p; p = &(*p)->next)
        if (!strcmp((*p)->name, name))
            return *p;
    if ((*p = calloc(1, sizeof **p)))
        snprintf((*p)->name, sizeof (*p)->name, "%s", name);
    return *p;
}

int gr_tenant_add_job(const char *tenant, int force, struct gr_err *e)
{
    pthread_mutex_lock(&mu);
    struct tenant *t = find(tenant);
    int rc = !t ? gr_fail(e, GR_ENOMEM, NULL, "out of memory")
             : !force && max_jobs && t->jobs >= max_jobs
                 ? gr_fail(e, GR_EFULL, NULL,
                           "tenant %s has %lld jobs queued or running, its limit (--tenant-max-queued); retry once "
                           "some have finished",
                           tenant, (long long)t->jobs)
                 : GR_OK;
    if (rc == GR_OK)
        t->jobs++;
    pthread_mutex_unlock(&mu);
    return rc;
}

void gr_tenant_drop_job(const char *tenant)
{
    pthread_mutex_lock(&mu);
    struct tenant *t = find(tenant);
    if (t && t->jobs > 0)
        t->jobs--;
    pthread_mutex_unlock(&mu);
}

int gr_tenant_add_bytes(const char *tenant, uint64_t n, int refuse, int force, struct gr_err *e)
{
    pthread_mutex_lock(&mu);
    struct tenant *t = find(tenant);
    int rc = GR_OK;
    if (!t)
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else if (!force && max_bytes && (n > (uint64_t)max_bytes || t->bytes > (uint64_t)max_bytes - n))
        rc = gr_fail(e, refuse, NULL,
                     "tenant %s stores %llu bytes; %llu more would pass its limit of %lld (--tenant-max-bytes): "
                     "delete datasets it no longer needs",
                     tenant, (unsigned long long)t->bytes, (unsigned long long)n, (long long)max_bytes);
    else
        t->bytes += n;
    pthread_mutex_unlock(&mu);
    return rc;
}

void gr_tenant_drop_bytes(const char *tenant, uint64_t n)
{
    pthread_mutex_lock(&mu);
    struct tenant *t = find(tenant);
    if (t)
        t->bytes = t->bytes > n ? t->bytes - n : 0;
    pthread_mutex_unlock(&mu);
}

void gr_tenants_reset(void)
{
    pthread_mutex_lock(&mu);
    for (int b = 0; b < NBUCKETS; b++)
        while (table[b]) {
            struct tenant *t = table[b];
            table[b] = t->next;
            free(t);
        }
    pthread_mutex_unlock(&mu);
}
