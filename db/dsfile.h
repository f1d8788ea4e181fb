/* dsfile.h: datasets' values on disk, <data_dir>/datasets/<id>.bin (raw little-endian values, no
 * header), written through <id>.tmp so that a crash never leaves a partial .bin. A writer or a
 * mapping belongs to the thread that made it; the functions share no state. */
#ifndef GR_DSFILE_H
#define GR_DSFILE_H

#include "gr.h"

struct gr_dsfile {
    int state; /* 0: nothing open; 1: writing the .tmp; 2: committed to the .bin */
    int fd;
    char *buf; /* writes reach the file in pieces of GR_DSFILE_BUF bytes */
    size_t len;
    char tmp[600], bin[600];
};
#define GR_DSFILE_BUF (1u << 20)

/* Create <data_dir>/datasets/ if missing and remove what a crash left there: the .tmp files
 * of interrupted uploads, and each .bin whose dataset keep(ctx, id) says has no row (a crash
 * between a file and its row). At start-up only. GR_OK or GR_EIO. */
int gr_dsfile_init(const char *data_dir, int (*keep)(void *ctx, const char *id), void *ctx, struct gr_err *e);

/* Start writing dataset id's values: GR_OK with f writing its .tmp, GR_EIO or GR_ENOMEM (f is
 * then released). f must be zeroed or released. */
int gr_dsfile_create(struct gr_dsfile *f, const char *data_dir, const char *id, struct gr_err *e);

/* Append n bytes. GR_OK, GR_EIO, or GR_ENOMEM when the disk is full. */
int gr_dsfile_write(struct gr_dsfile *f, const void *data, size_t n, struct gr_err *e);

/* Flush, fsync, rename to the .bin and fsync the folder: the values are durable. GR_OK, GR_EIO
 * or GR_ENOMEM (disk full); on failure the .tmp is removed. */
int gr_dsfile_commit(struct gr_dsfile *f, struct gr_err *e);

/* Release f; a .tmp not committed is removed (a committed .bin stays). Safe to repeat. */
void gr_dsfile_abort(struct gr_dsfile *f);

/* Open (read-only) or map id's values, checking that they are `bytes` long. GR_OK, or GR_EIO
 * (missing, another size, cannot be read). */
int gr_dsfile_open(const char *data_dir, const char *id, size_t bytes, int *fd, struct gr_err *e);
int gr_dsfile_map(const char *data_dir, const char *id, size_t bytes, const void **p, struct gr_err *e);
void gr_dsfile_unmap(const void *p, size_t bytes);

/* Remove id's .bin. GR_OK (also when it was already gone) or GR_EIO. */
int gr_dsfile_remove(const char *data_dir, const char *id, struct gr_err *e);

#endif
