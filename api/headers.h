/* headers.h: the small parsers of request headers and query values (Prefer: wait=N, whole
 * numbers such as ?limit= and ?wait=). Pure functions of their text: any thread; fuzzed
 * (tests/fuzz/fuzz_headers.c). */
#ifndef GR_HEADERS_H
#define GR_HEADERS_H

#include <stdint.h>

#define GR_MAX_WAIT_S 60 /* the longest wait honoured */

/* A whole number 0..max from text (digits only); -1 if it is not one. */
int64_t gr_parse_uint(const char *s, int64_t max);

/* The wait=N of a Prefer header (RFC 7240, among other preferences), capped at GR_MAX_WAIT_S;
 * -1 when prefer is NULL, has none, or it is unreadable. */
int64_t gr_prefer_wait(const char *prefer);

#endif
