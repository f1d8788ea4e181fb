/* pins.c: the datasets in use: a job in flight pins those it names until its final state is
 * stored, and a DELETE holds its dataset against new pins while it runs. Any thread, under mu:
 * the HTTP threads pin and delete, the store's writers unpin at a job's end (commits.c). */
#include "server/jobs_internal.h"

#include "gpu/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One per dataset that jobs in flight name (refs) or that is being deleted; never both. */
struct pin {
    struct pin *next;
    int refs, deleting;
    char id[24];
};
static struct pin *pins; /* few: only datasets with jobs in flight */

/* The slot holding id's pin, or the empty slot at the end (mu held). */
static struct pin **pin_slot(const char *id)
{
    struct pin **p = &pins;
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->next;
    return p;
}

static void pin_drop(struct pin **p) /* mu held */
{
    struct pin *dead = *p;
    *p = dead->next;
    free(dead);
}

/* Add (delta 1) or drop a job's hold on a dataset (mu held); GR_ENOTFOUND while it is being
 * deleted. */
int gr_pin_change(const char *id, int delta, struct gr_err *e)
{
    int rc = GR_OK;
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        rc = gr_fail(e, GR_ENOTFOUND, "dataset", "dataset %s is being deleted", id);
    else if (!*p && delta > 0 && !(*p = calloc(1, sizeof **p)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else if (*p) {
        snprintf((*p)->id, sizeof (*p)->id, "%s", id);
        if (((*p)->refs += delta) <= 0)
            pin_drop(p);
    }
    return rc;
}

/* A job's holds end once its final state is stored (mu held). */
void gr_unpin_job(struct gr_job *j)
{
    if (j->dataset_pinned)
        gr_pin_change(j->dataset, -1, NULL);
    j->dataset_pinned = 0;
    for (int k = 0; k < GR_MM_OPERANDS; k++) {
        if (j->mm[k].pinned)
            gr_pin_change(j->mm[k].dataset, -1, NULL);
        j->mm[k].pinned = 0;
    }
}

int gr_jobs_pin_dataset(const char *id, struct gr_err *e)
{
    pthread_mutex_lock(&gr_jobs_mu);
    int rc = gr_pin_change(id, 1, e);
    pthread_mutex_unlock(&gr_jobs_mu);
    return rc;
}

void gr_jobs_unpin_dataset(const char *id)
{
    pthread_mutex_lock(&gr_jobs_mu);
    gr_pin_change(id, -1, NULL);
    pthread_mutex_unlock(&gr_jobs_mu);
}

int gr_jobs_delete_dataset_begin(const char *id, struct gr_err *e)
{
    int rc = GR_OK;
    pthread_mutex_lock(&gr_jobs_mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        rc = gr_fail(e, GR_ECONFLICT, NULL, "dataset %s is being deleted already", id);
    else if (*p)
        rc = gr_fail(e, GR_ECONFLICT, NULL,
                     "dataset %s is used by %d queued or running job(s); delete it once they end (or cancel them)",
                     id, (*p)->refs);
    else if (!(*p = calloc(1, sizeof **p)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else {
        snprintf((*p)->id, sizeof (*p)->id, "%s", id);
        (*p)->deleting = 1;
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    return rc;
}

void gr_jobs_delete_dataset_end(const char *id)
{
    pthread_mutex_lock(&gr_jobs_mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting)
        pin_drop(p);
    pthread_mutex_unlock(&gr_jobs_mu);
    for (int i = 0; i < gr_jobs_nbackends(); i++) {
        struct gr_backend *b = gr_jobs_backend(i);
        if (b->evict)
            b->evict(b, id);
    }
}
