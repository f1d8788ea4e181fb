/* pinned.cu: datasets' files kept mapped and page-locked for DMA (pinned.h). The registry is one
 * list under mu; a registration (mmap + cudaHostRegister) runs outside it, on the lane thread of
 * the job that asked, while the entry is marked loading. */
#include "gpu/pinned.h"

#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Datasets read once are remembered (to register on the second read) up to this many. */
#define MAX_SEEN 1024

enum { SEEN, LOADING, READY, FAILED };

struct gr_pin {
    char id[24];
    int state, refs, doomed;
    void *p; /* the mapping (READY) */
    size_t bytes, len; /* registered, and mapped (whole pages) */
    unsigned long long used; /* LRU clock */
    struct gr_pin *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gr_pin *pins;
static size_t cap, registered; /* registered: READY and LOADING bytes */
static unsigned long long clock_, hits;
static int seen;

void gr_pin_init(int64_t bytes) { cap = bytes > 0 ? (size_t)bytes : 0; }

/* Unlink x, let its registration go, free it (mu held, x->refs 0). */
static void release(struct gr_pin *x)
{
    for (struct gr_pin **p = &pins; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    if (x->state == READY) {
        cudaHostUnregister(x->p);
        munmap(x->p, x->len);
    }
    if (x->state == READY || x->state == LOADING)
        registered -= x->bytes;
    seen -= x->state == SEEN;
    free(x);
}

/* The least recently used idle entry in state st, or NULL (mu held). */
static struct gr_pin *lru(int st)
{
    struct gr_pin *v = NULL;
    for (struct gr_pin *x = pins; x; x = x->next)
        if (x->state == st && !x->refs && (!v || x->used < v->used))
            v = x;
    return v;
}

/* Let idle registrations go, oldest first, until bytes more fit under the cap; 0 if they cannot. */
static int room(size_t bytes)
{
    struct gr_pin *v;
    while (registered + bytes > cap)
        if ((v = lru(READY)))
            release(v);
        else
            return 0;
    return 1;
}

/* mmap and register the first bytes of fd, or NULL (the file is shorter, or the system refused). */
static void *register_file(int fd, size_t bytes, size_t *len)
{
    struct stat st;
    long page = sysconf(_SC_PAGESIZE);
    *len = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page; /* the last page holds the file's end */
    if (fstat(fd, &st) || (size_t)st.st_size < bytes)
        return NULL;
    void *p = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return NULL;
    cudaError_t err = cudaHostRegister(p, *len, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
    if (err == cudaSuccess)
        return p;
    cudaGetLastError();
    fprintf(stderr, "gpured: keeping a dataset's file page-locked failed (%s): it is copied through the staging "
                    "ring instead\n", cudaGetErrorString(err));
    munmap(p, *len);
    return NULL;
}

const void *gr_pin_take(const char *id, int fd, size_t bytes, struct gr_pin **pin)
{
    *pin = NULL;
    if (!cap || !id || !id[0] || fd < 0)
        return NULL;
    pthread_mutex_lock(&mu);
    struct gr_pin *x = pins;
    while (x && strcmp(x->id, id))
        x = x->next;
    if (!x) { /* read once: remembered for the next read */
        if (seen >= MAX_SEEN)
            release(lru(SEEN));
        if ((x = (struct gr_pin *)calloc(1, sizeof *x))) {
            snprintf(x->id, sizeof x->id, "%s", id);
            x->used = ++clock_;
            x->next = pins;
            pins = x;
            seen++;
        }
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    x->used = ++clock_;
    if (x->state == READY && !x->doomed && x->bytes >= bytes) {
        x->refs++;
        hits++;
        pthread_mutex_unlock(&mu);
        *pin = x;
        return x->p;
    }
    if (x->state != SEEN || bytes > cap || !room(bytes)) {
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    x->state = LOADING;
    x->bytes = bytes;
    x->refs++;
    registered += bytes;
    seen--;
    pthread_mutex_unlock(&mu);

    size_t len;
    void *p = register_file(fd, bytes, &len);
    pthread_mutex_lock(&mu);
    if (p) {
        x->p = p;
        x->len = len;
        x->state = READY;
        hits++;
        *pin = x;
    } else {
        registered -= x->bytes;
        x->state = FAILED; /* not tried again for this dataset while the process lives */
        x->refs--;
        if (x->doomed)
            release(x);
    }
    pthread_mutex_unlock(&mu);
    return p;
}

void gr_pin_give(struct gr_pin *x)
{
    if (!x)
        return;
    pthread_mutex_lock(&mu);
    if (!--x->refs && x->doomed)
        release(x);
    pthread_mutex_unlock(&mu);
}

void gr_pin_drop(const char *id)
{
    pthread_mutex_lock(&mu);
    struct gr_pin *x = pins;
    while (x && strcmp(x->id, id))
        x = x->next;
    if (x && x->refs)
        x->doomed = 1;
    else if (x)
        release(x);
    pthread_mutex_unlock(&mu);
}

void gr_pin_end(void)
{
    pthread_mutex_lock(&mu);
    for (struct gr_pin *x = pins, *next; x; x = next) {
        next = x->next;
        if (x->refs)
            x->doomed = 1;
        else
            release(x);
    }
    pthread_mutex_unlock(&mu);
}

void gr_pin_stats(int64_t *bytes, int64_t *n)
{
    pthread_mutex_lock(&mu);
    *bytes = (int64_t)registered;
    *n = (int64_t)hits;
    pthread_mutex_unlock(&mu);
}
