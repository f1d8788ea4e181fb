/* dsfile.c: datasets' values as files: streamed into a .tmp, made durable and renamed, opened or
 * mapped read-only for downloads and jobs, removed. Each caller owns its file; an upload's ring
 * of slots is shared with its writer and tap threads under its own lock. */
#include "db/dsfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DIR_NAME "datasets"

static int io_fail(struct gr_err *e, const char *what, const char *path)
{
    int err = errno;
    if (err == ENOSPC || err == EDQUOT)
        return gr_fail(e, GR_ENOMEM, NULL, "no space left for the dataset on the server's disk");
    return gr_fail(e, GR_EIO, NULL, "dataset storage: cannot %s %s: %s", what, path, strerror(err));
}

static int path_of(char *buf, size_t len, const char *data_dir, const char *id, const char *ext)
{
    int n = snprintf(buf, len, "%s/" DIR_NAME "/%s%s", data_dir, id, ext);
    return n > 0 && (size_t)n < len;
}

int gr_dsfile_init(const char *data_dir, int (*keep)(void *ctx, const char *id), void *ctx, struct gr_err *e)
{
    char dir[600];
    if (!path_of(dir, sizeof dir, data_dir, "", ""))
        return gr_fail(e, GR_EIO, NULL, "dataset storage: the data directory's name is too long");
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return io_fail(e, "create", dir);
    DIR *d = opendir(dir);
    if (!d)
        return io_fail(e, "read", dir);
    for (struct dirent *de; (de = readdir(d));) {
        char id[32];
        size_t n = strlen(de->d_name);
        int tmp = n > 4 && !strcmp(de->d_name + n - 4, ".tmp"), bin = n > 4 && !strcmp(de->d_name + n - 4, ".bin");
        if (!(tmp || bin) || n - 4 >= sizeof id)
            continue; /* not a dataset's */
        snprintf(id, sizeof id, "%.*s", (int)(n - 4), de->d_name);
        if (!keep(ctx, id))
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    return GR_OK;
}

/* An upload is a ring of slots: the HTTP thread fills them; a writer thread writes each to the
 * .tmp and a tap thread hands each to tap, so the disk, the digest and the network overlap. A
 * slot is filled again once both are past it. */
#define SLOT_BYTES ((size_t)1 << 20) /* writes reach the file in pieces this big */
#define SLOTS 8                       /* allocated as the upload grows: small uploads take one */
#define SYNC_STEP ((off_t)8 << 20)    /* writeback starts for each such piece as it is written, */
#define DIRTY_MAX ((off_t)64 << 20)   /* and is waited for this far behind: commit's fsync is short */

enum { WRITER, TAPPER, WORKERS };

struct gr_dsfile {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a slot filled, a slot passed, or the end */
    char *slot[SLOTS];
    size_t len[SLOTS];
    size_t fill;                  /* bytes in the slot being filled (the HTTP thread's) */
    uint64_t filled, past[WORKERS]; /* slots handed over, and slots each worker is done with */
    int ending;                   /* 1: no slot follows the filled ones; 2: stop at once */
    int started;                  /* workers running */
    pthread_t th[WORKERS];
    gr_dsfile_tap tap;
    void *ctx;
    struct gr_err err; /* the workers' first failure */
    int fd, state; /* 0: no .tmp; 1: writing the .tmp (it is ours to remove); 2: committed */
    char tmp[600], bin[600];
};

/* Worker k's next slot, or -1 once there is none left to take; *failed: a worker has failed, and
 * the slot is only to be passed, so that the HTTP thread never waits for ever. */
static int next_slot(struct gr_dsfile *f, int k, int *failed)
{
    pthread_mutex_lock(&f->mu);
    while (f->past[k] == f->filled && !f->ending)
        pthread_cond_wait(&f->cv, &f->mu);
    int i = f->ending == 2 || f->past[k] == f->filled ? -1 : (int)(f->past[k] % SLOTS);
    *failed = f->err.code != 0;
    pthread_mutex_unlock(&f->mu);
    return i;
}

static void slot_done(struct gr_dsfile *f, int k, const struct gr_err *e)
{
    pthread_mutex_lock(&f->mu);
    if (e->code && !f->err.code)
        f->err = *e;
    f->past[k]++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static int write_at(struct gr_dsfile *f, const char *p, size_t n, off_t off, struct gr_err *e)
{
    while (n) {
        ssize_t k = pwrite(f->fd, p, n, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return io_fail(e, "write", f->tmp);
        p += k;
        n -= (size_t)k;
        off += k;
    }
    return GR_OK;
}

static void *writer(void *arg)
{
    struct gr_dsfile *f = arg;
    off_t off = 0;
    pthread_setname_np(pthread_self(), "gr-upload-write"); /* for top and perf */
    for (int i, failed; (i = next_slot(f, WRITER, &failed)) >= 0;) {
        struct gr_err e = {0};
        if (!failed && write_at(f, f->slot[i], f->len[i], off, &e) == GR_OK) {
            off += (off_t)f->len[i];
            /* only the last slot can be short, so each SYNC_STEP boundary is met exactly; the
             * hints' failures are fsync's to report */
            if (off % SYNC_STEP == 0) {
                sync_file_range(f->fd, off - SYNC_STEP, SYNC_STEP, SYNC_FILE_RANGE_WRITE);
                if (off > DIRTY_MAX)
                    sync_file_range(f->fd, off - DIRTY_MAX - SYNC_STEP, SYNC_STEP,
                                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
            }
        }
        slot_done(f, WRITER, &e);
    }
    return NULL;
}

static void *tapper(void *arg)
{
    struct gr_dsfile *f = arg;
    pthread_setname_np(pthread_self(), "gr-upload-tap");
    for (int i, failed; (i = next_slot(f, TAPPER, &failed)) >= 0;) {
        struct gr_err e = {0};
        if (!failed && f->tap && f->tap(f->ctx, f->slot[i], f->len[i]) != 0)
            gr_fail(&e, GR_EINTERNAL, NULL, "dataset storage: digesting the values failed");
        slot_done(f, TAPPER, &e);
    }
    return NULL;
}

/* Tell the workers how to end (1: after the filled slots, 2: now) and wait until they are gone. */
static void stop(struct gr_dsfile *f, int how)
{
    pthread_mutex_lock(&f->mu);
    f->ending = how;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    for (; f->started; f->started--)
        pthread_join(f->th[f->started - 1], NULL);
}

int gr_dsfile_create(struct gr_dsfile **fp, const char *data_dir, const char *id, gr_dsfile_tap tap, void *ctx,
                     struct gr_err *e)
{
    struct gr_dsfile *f = *fp = calloc(1, sizeof *f);
    if (!f)
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory for an upload");
    f->fd = -1;
    f->tap = tap;
    f->ctx = ctx;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = GR_OK;
    if (!path_of(f->tmp, sizeof f->tmp, data_dir, id, ".tmp") || !path_of(f->bin, sizeof f->bin, data_dir, id, ".bin"))
        rc = gr_fail(e, GR_EIO, NULL, "dataset storage: the data directory's name is too long");
    else if ((f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640)) < 0)
        rc = io_fail(e, "create", f->tmp);
    else
        f->state = 1;
    void *(*work[WORKERS])(void *) = {writer, tapper};
    for (; rc == GR_OK && f->started < WORKERS; f->started++)
        if (pthread_create(&f->th[f->started], NULL, work[f->started], f) != 0)
            rc = gr_fail(e, GR_ENOMEM, NULL, "cannot start an upload's threads");
    if (rc != GR_OK) {
        gr_dsfile_close(f);
        *fp = NULL;
    }
    return rc;
}

/* Hand the slot being filled to the workers, and wait until the next one is free. */
static int hand_over(struct gr_dsfile *f, struct gr_err *e)
{
    pthread_mutex_lock(&f->mu);
    f->len[f->filled++ % SLOTS] = f->fill;
    f->fill = 0;
    pthread_cond_broadcast(&f->cv);
    while (f->filled - (f->past[WRITER] < f->past[TAPPER] ? f->past[WRITER] : f->past[TAPPER]) == SLOTS &&
           !f->err.code)
        pthread_cond_wait(&f->cv, &f->mu);
    int rc = f->err.code;
    if (rc)
        *e = f->err;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int gr_dsfile_write(struct gr_dsfile *f, const void *data, size_t n, struct gr_err *e)
{
    const char *p = data;
    while (n) {
        char **slot = &f->slot[f->filled % SLOTS];
        if (!*slot && !(*slot = malloc(SLOT_BYTES)))
            return gr_fail(e, GR_ENOMEM, NULL, "out of memory for an upload buffer");
        size_t k = SLOT_BYTES - f->fill < n ? SLOT_BYTES - f->fill : n;
        memcpy(*slot + f->fill, p, k);
        f->fill += k;
        p += k;
        n -= k;
        int rc = f->fill == SLOT_BYTES ? hand_over(f, e) : GR_OK;
        if (rc)
            return rc;
    }
    return GR_OK;
}

/* fsync the folder holding path, so that a rename or unlink in it is durable. */
static int sync_dir(const char *path, struct gr_err *e)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? GR_OK : io_fail(e, "sync", dir);
    if (fd >= 0)
        close(fd);
    return rc;
}

int gr_dsfile_commit(struct gr_dsfile *f, struct gr_err *e)
{
    int rc = f->fill ? hand_over(f, e) : GR_OK;
    stop(f, 1);
    if (rc == GR_OK && f->err.code) { /* the workers are gone: their failure is still */
        *e = f->err;
        rc = e->code;
    }
    if (rc == GR_OK && fsync(f->fd) != 0)
        rc = io_fail(e, "sync", f->tmp);
    if (rc == GR_OK) {
        int closed = close(f->fd); /* the descriptor is gone even when close fails */
        f->fd = -1;
        if (closed != 0)
            rc = io_fail(e, "close", f->tmp);
    }
    if (rc == GR_OK && rename(f->tmp, f->bin) != 0)
        rc = io_fail(e, "rename", f->tmp);
    if (rc == GR_OK && (rc = sync_dir(f->bin, e)) != GR_OK)
        unlink(f->bin);
    f->state = rc == GR_OK ? 2 : 1;
    return rc;
}

void gr_dsfile_close(struct gr_dsfile *f)
{
    if (!f)
        return;
    stop(f, 2);
    if (f->fd >= 0)
        close(f->fd);
    if (f->state == 1)
        unlink(f->tmp);
    for (int i = 0; i < SLOTS; i++)
        free(f->slot[i]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

int gr_dsfile_open(const char *data_dir, const char *id, size_t bytes, int *fd, struct gr_err *e)
{
    char path[600];
    struct stat st;
    *fd = -1;
    if (!path_of(path, sizeof path, data_dir, id, ".bin"))
        return gr_fail(e, GR_EIO, NULL, "dataset storage: the data directory's name is too long");
    if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return io_fail(e, "open", path);
    if (fstat(*fd, &st) != 0 || (size_t)st.st_size != bytes) {
        close(*fd);
        *fd = -1;
        return gr_fail(e, GR_EIO, NULL, "dataset storage: %s is not the %zu bytes its dataset holds", path, bytes);
    }
    return GR_OK;
}

int gr_dsfile_map(const char *data_dir, const char *id, size_t bytes, const void **p, struct gr_err *e)
{
    int fd, rc = gr_dsfile_open(data_dir, id, bytes, &fd, e);
    *p = NULL;
    if (rc)
        return rc;
    void *m = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED)
        return gr_fail(e, GR_EIO, NULL, "dataset storage: cannot map dataset %s: %s", id, strerror(errno));
    madvise(m, bytes, MADV_SEQUENTIAL);
    *p = m;
    return GR_OK;
}

void gr_dsfile_unmap(const void *p, size_t bytes)
{
    if (p)
        munmap((void *)p, bytes);
}

int gr_dsfile_remove(const char *data_dir, const char *id, struct gr_err *e)
{
    char path[600];
    if (!path_of(path, sizeof path, data_dir, id, ".bin"))
        return gr_fail(e, GR_EIO, NULL, "dataset storage: the data directory's name is too long");
    if (unlink(path) != 0 && errno != ENOENT)
        return io_fail(e, "remove", path);
    return sync_dir(path, e);
}
