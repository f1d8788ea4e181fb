/* dsfile.h: datasets' values on disk, <data_dir>/datasets/<id>.bin (raw little-endian values, no
 * header), written through <id>.tmp so that a crash never leaves a partial .bin. A writer or a
 * mapping belongs to the thread that made it (a writer's own two threads apart); no shared state. */
#ifndef GR_DSFILE_H
#define GR_DSFILE_H

#include "common/gr.h"

struct gr_dsfile; /* an upload being written: its HTTP thread's, and its two workers' (dsfile.c) */

/* Sees every byte of an upload, in order, on a thread of its own (a digest); returns 0, or
 * non-zero to fail the upload. */
typedef int (*gr_dsfile_tap)(void *ctx, const void *data, size_t n);

/* Create <data_dir>/datasets/ if missing and remove what a crash left there: each file (.tmp of
 * an upload, .bin of values) that keep(ctx, id) says nothing names: no dataset's row, nor, in a
 * folder replicas share, a live replica's file under way. GR_OK or GR_EIO. */
int gr_dsfile_init(const char *data_dir, int (*keep)(void *ctx, const char *id), void *ctx, struct gr_err *e);

/* Start writing dataset id's values: GR_OK with *f writing its .tmp (a writer thread puts the
 * bytes on disk and a second thread hands them to tap, if not NULL, both behind the caller), or
 * GR_EIO or GR_ENOMEM with *f NULL. */
int gr_dsfile_create(struct gr_dsfile **f, const char *data_dir, const char *id, gr_dsfile_tap tap, void *ctx,
                     struct gr_err *e);

/* Append n bytes (copied: data may be reused at once). GR_OK, GR_EIO, GR_ENOMEM when the disk is
 * full, or GR_EINTERNAL when tap failed. */
int gr_dsfile_write(struct gr_dsfile *f, const void *data, size_t n, struct gr_err *e);

/* Wait until tap has seen every byte and the writer has written them, fsync, rename to the .bin
 * and fsync the folder: the values are durable. GR_OK, or as gr_dsfile_write (closing f then
 * leaves nothing). Either way the threads are gone when it returns. */
int gr_dsfile_commit(struct gr_dsfile *f, struct gr_err *e);

/* Release f (NULL is fine), stopping its threads; a .tmp not committed is removed (a committed
 * .bin stays). */
void gr_dsfile_close(struct gr_dsfile *f);

/* Open (read-only) or map id's values, checking that they are `bytes` long. GR_OK, or GR_EIO
 * (missing, another size, cannot be read). */
int gr_dsfile_open(const char *data_dir, const char *id, size_t bytes, int *fd, struct gr_err *e);
int gr_dsfile_map(const char *data_dir, const char *id, size_t bytes, const void **p, struct gr_err *e);
void gr_dsfile_unmap(const void *p, size_t bytes);

/* Remove id's .bin. GR_OK (also when it was already gone) or GR_EIO. */
int gr_dsfile_remove(const char *data_dir, const char *id, struct gr_err *e);

#endif
