/* headers.h: the small parsers of request headers and query values (Prefer: wait=N, whole
 * numbers such as ?limit= and ?wait=, a request's framing). Pure functions of their text: any
 * thread; fuzzed (tests/fuzz/fuzz_headers.c). */
#ifndef GR_HEADERS_H
#define GR_HEADERS_H

#include "common/gr.h"

#include <stdint.h>

#define GR_MAX_WAIT_S 60 /* the longest wait honoured */

/* A whole number 0..max from text (digits only); -1 if it is not one. */
int64_t gr_parse_uint(const char *s, int64_t max);

/* The wait=N of a Prefer header (RFC 7240, among other preferences), capped at GR_MAX_WAIT_S;
 * -1 when prefer is NULL, has none, or it is unreadable. */
int64_t gr_prefer_wait(const char *prefer);

/* A body's length said two ways (RFC 9112 6.3): a proxy in front may read it one way and this
 * server another, and smuggle a request past the proxy. libmicrohttpd 0.9.75 takes the first
 * Content-Length, or Transfer-Encoding over it, so a request's headers are weighed here: each
 * added in turn (name case-insensitive, values pointing into the request: kept while it is),
 * then checked. */
struct gr_framing {
    const char *length; /* the first Content-Length */
    int lengths_differ, chunked;
};
void gr_framing_add(struct gr_framing *f, const char *name, const char *value);
/* GR_OK, or GR_EINVAL when Content-Length is given twice with different values, or beside
 * Transfer-Encoding: e says which. */
int gr_framing_check(const struct gr_framing *f, struct gr_err *e);

#endif
