/* buf.h: a growable text buffer for answers assembled piece by piece (list pages, metrics).
 * Owned by the one thread that fills it. */
#ifndef GR_BUF_H
#define GR_BUF_H

#include <stddef.h>

struct gr_buf {
    char *p; /* NUL-terminated once anything was added; malloc'd, the filler frees or hands it on */
    size_t len, cap;
    int oom; /* set once memory ran out: later additions are ignored, the caller answers 507 */
};

/* Append n bytes of s. */
void gr_buf_add(struct gr_buf *b, const char *s, size_t n);

/* Append printf-style text. */
void gr_buf_printf(struct gr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
