/* buf.c: the growable text buffer; used only by the thread that fills it. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
        size_t cap = b->cap ? b->cap : 16384;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

