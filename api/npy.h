/* npy.h: NumPy .npy preambles (format versions 1.0 to 3.0): reading what a client sends, writing
 * what we send back. Pure functions of their arguments; safe from any thread. */
#ifndef GR_NPY_H
#define GR_NPY_H

#include "common/axes.h" /* GR_MAX_DIMS */
#include "common/gr.h"

#define GR_NPY_MAX_HEADER 65536 /* longest header dict read (version 1.0 cannot say more) */
#define GR_NPY_HEADER_MAX 256   /* longest preamble gr_npy_header writes */

/* A parsed preamble: C-order little-endian values follow it. */
struct gr_npy {
    int dtype;
    int ndim;                   /* 0 (one value) to GR_MAX_DIMS */
    int64_t shape[GR_MAX_DIMS]; /* dimensions past ndim are 1 */
    size_t count;     /* elements (0 when a dimension is 0) */
    size_t bytes;     /* count x the dtype's size */
    size_t data_at;   /* the preamble's length: where the values start */
};

/* The preamble's full length from the first n bytes of a .npy: GR_OK with *need (0 while n is
 * too short to tell), or GR_EINVAL (not a .npy: bad magic, unknown version, header too long). */
int gr_npy_need(const void *buf, size_t n, size_t *need, struct gr_err *e);

/* Parse a whole preamble (n at least what gr_npy_need said). GR_OK with *h; GR_EINVAL (not a
 * .npy, or a header that is not a dict literal of 'descr', 'fortran_order' and 'shape');
 * GR_EMEDIA (a dtype other than <i4 <i8 <f4 <f8, or big-endian); GR_EUNPROC (Fortran order,
 * more than GR_MAX_DIMS dimensions, a size that overflows). h is unspecified on failure. */
int gr_npy_parse(const void *buf, size_t n, struct gr_npy *h, struct gr_err *e);

/* Write a version 1.0 preamble for C-order little-endian values of dtype (GR_BOOL too) and shape (ndim 0 to
 * GR_MAX_DIMS) into buf (len >= GR_NPY_HEADER_MAX), padded so the values start at a multiple of 64.
 * Returns its length, or 0 when it does not fit. */
size_t gr_npy_header(int dtype, int ndim, const int64_t *shape, char *buf, size_t len);

#endif
