/* pins.c: the datasets in use: a job in flight pins those it names from its look-up until its
 * final state is stored, and a DELETE holds its dataset against new look-ups while it runs. Any
 * thread, under mu: the HTTP threads pin and delete, the store's writers unpin at a job's end
 * (commits.c). */
#include "server/jobs_internal.h"

#include "gpu/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One per dataset that jobs in flight name (refs), that requests look up now (looking: not yet
 * known to be the caller's to name), or that is being deleted. */
struct pin {
    struct pin *next;
    int refs, looking, deleting;
    char id[24];
};
static struct pin *pins; /* few: only datasets with jobs in flight */
static pthread_cond_t looked_cv = PTHREAD_COND_INITIALIZER; /* a look-up ended */

/* The slot holding id's pin, or the empty slot at the end (mu held). */
static struct pin **pin_slot(const char *id)
{
    struct pin **p = &pins;
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->next;
    return p;
}

/* id's pin, made if there is none (mu held); NULL if memory is out. */
static struct pin *pin_of(const char *id)
{
    struct pin **p = pin_slot(id);
    if (!*p && (*p = calloc(1, sizeof **p)))
        snprintf((*p)->id, sizeof (*p)->id, "%s", id);
    return *p;
}

/* Free the pin in slot p once nothing holds it (mu held). */
static void pin_settle(struct pin **p)
{
    struct pin *dead = *p;
    if (dead->refs > 0 || dead->looking > 0 || dead->deleting)
        return;
    *p = dead->next;
    free(dead);
}

/* Add (delta 1) or drop a job's hold on a dataset (mu held); GR_ENOTFOUND while it is being
 * deleted. */
int gr_pin_change(const char *id, int delta, struct gr_err *e)
{
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting && delta > 0)
        return gr_fail(e, GR_ENOTFOUND, "dataset", "dataset %s is being deleted", id);
    if (!*p && delta > 0 && !pin_of(id))
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    if (*p) {
        (*p)->refs += delta;
        pin_settle(p);
    }
    return GR_OK;
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

int gr_jobs_look_up_dataset(const char *id, struct gr_err *e)
{
    int rc = GR_OK;
    pthread_mutex_lock(&gr_jobs_mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting) /* as if already gone: the caller may be another tenant */
        rc = gr_fail(e, GR_ENOTFOUND, "dataset", "no dataset %s (GET /v1/datasets lists them)", id);
    else if (!pin_of(id))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else
        (*pin_slot(id))->looking++;
    pthread_mutex_unlock(&gr_jobs_mu);
    return rc;
}

void gr_jobs_looked_up_dataset(const char *id, int found)
{
    pthread_mutex_lock(&gr_jobs_mu);
    struct pin **p = pin_slot(id);
    if (*p) {
        (*p)->looking--;
        (*p)->refs += found != 0;
        pthread_cond_broadcast(&looked_cv);
        pin_settle(p);
    }
    pthread_mutex_unlock(&gr_jobs_mu);
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
    struct pin **p = pin_slot(id), *pin;
    if (*p && (*p)->deleting)
        rc = gr_fail(e, GR_ECONFLICT, NULL, "dataset %s is being deleted already", id);
    else if (!(pin = pin_of(id)))
        rc = gr_fail(e, GR_ENOMEM, NULL, "out of memory");
    else {
        /* look-ups under way end first (no new one starts): only those that found the dataset,
         * the caller's own or an admin's, hold it against the delete */
        pin->deleting = 1;
        while (pin->looking > 0)
            pthread_cond_wait(&looked_cv, &gr_jobs_mu);
        if (pin->refs > 0) {
            rc = gr_fail(e, GR_ECONFLICT, NULL,
                         "dataset %s is used by %d queued or running job(s); delete it once they end (or cancel them)",
                         id, pin->refs);
            pin->deleting = 0;
            pin_settle(pin_slot(id));
        }
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    return rc;
}

void gr_jobs_delete_dataset_end(const char *id)
{
    pthread_mutex_lock(&gr_jobs_mu);
    struct pin **p = pin_slot(id);
    if (*p && (*p)->deleting) {
        (*p)->deleting = 0;
        pin_settle(p);
    }
    pthread_mutex_unlock(&gr_jobs_mu);
    for (int i = 0; i < gr_jobs_nbackends(); i++) {
        struct gr_backend *b = gr_jobs_backend(i);
        if (b->evict)
            b->evict(b, id);
    }
}
