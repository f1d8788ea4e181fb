/* dsfile.c: datasets' values as files: streamed into a .tmp, made durable and renamed, opened or
 * mapped read-only for downloads and jobs, removed. No shared state: each caller owns its file. */
#include "dsfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
    /* a .tmp is an upload that never finished: no row names it */
    for (struct dirent *de; (de = readdir(d));) {
        char id[32];
        size_t n = strlen(de->d_name);
        int tmp = n > 4 && !strcmp(de->d_name + n - 4, ".tmp"), bin = n > 4 && !strcmp(de->d_name + n - 4, ".bin");
        if (bin && n - 4 < sizeof id)
            snprintf(id, sizeof id, "%.*s", (int)(n - 4), de->d_name);
        if (tmp || (bin && n - 4 < sizeof id && !keep(ctx, id)))
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    return GR_OK;
}

int gr_dsfile_create(struct gr_dsfile *f, const char *data_dir, const char *id, struct gr_err *e)
{
    *f = (struct gr_dsfile){.fd = -1};
    if (!path_of(f->tmp, sizeof f->tmp, data_dir, id, ".tmp") || !path_of(f->bin, sizeof f->bin, data_dir, id, ".bin"))
        return gr_fail(e, GR_EIO, NULL, "dataset storage: the data directory's name is too long");
    if (!(f->buf = malloc(GR_DSFILE_BUF)))
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory for an upload buffer");
    if ((f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640)) < 0) {
        int rc = io_fail(e, "create", f->tmp);
        free(f->buf);
        f->buf = NULL;
        return rc;
    }
    f->state = 1;
    return GR_OK;
}

static int flush(struct gr_dsfile *f, struct gr_err *e)
{
    for (size_t off = 0; off < f->len;) {
        ssize_t n = write(f->fd, f->buf + off, f->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return io_fail(e, "write", f->tmp);
        off += (size_t)n;
    }
    f->len = 0;
    return GR_OK;
}

int gr_dsfile_write(struct gr_dsfile *f, const void *data, size_t n, struct gr_err *e)
{
    const char *p = data;
    int rc;
    while (n) {
        size_t k = GR_DSFILE_BUF - f->len < n ? GR_DSFILE_BUF - f->len : n;
        memcpy(f->buf + f->len, p, k);
        f->len += k;
        p += k;
        n -= k;
        if (f->len == GR_DSFILE_BUF && (rc = flush(f, e)) != GR_OK)
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
    int rc = flush(f, e);
    if (rc == GR_OK && fsync(f->fd) != 0)
        rc = io_fail(e, "sync", f->tmp);
    if (rc == GR_OK && close(f->fd) != 0)
        rc = io_fail(e, "close", f->tmp);
    f->fd = -1;
    if (rc == GR_OK && rename(f->tmp, f->bin) != 0)
        rc = io_fail(e, "rename", f->tmp);
    if (rc == GR_OK && (rc = sync_dir(f->bin, e)) != GR_OK)
        unlink(f->bin);
    if (rc != GR_OK) {
        gr_dsfile_abort(f);
        return rc;
    }
    f->state = 2;
    free(f->buf);
    f->buf = NULL;
    return GR_OK;
}

void gr_dsfile_abort(struct gr_dsfile *f)
{
    if (f->state == 1) {
        if (f->fd >= 0)
            close(f->fd);
        unlink(f->tmp);
    }
    free(f->buf);
    f->buf = NULL;
    f->fd = -1;
    f->state = 0;
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
