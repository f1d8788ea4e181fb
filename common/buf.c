/* buf.c: the growable text buffer; used only by the thread that fills it. */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and a NUL; 0 (oom set) if memory is out. */
static int room(struct gr_buf *b, size_t n)
{
    if (b->oom)
        return 0;
    if (b->cap - b->len > n)
        return 1;
    size_t cap = b->cap ? b->cap : 16384;
    while (cap - b->len <= n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void gr_buf_add(struct gr_buf *b, const char *s, size_t n)
{
    if (!room(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void gr_buf_printf(struct gr_buf *b, const char *fmt, ...)
{
    for (int tries = 0; !b->oom && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        if (!room(b, (size_t)n))
            return;
    }
}

