/* numbers.h: the numbers of a JSON job body's top-level "data", read from its text without a
 * json_t per number (numbers.c says why). Pure functions; the caller's thread owns the results. */
#ifndef GR_NUMBERS_H
#define GR_NUMBERS_H

#include <stddef.h>
#include <stdint.h>

/* One number as JSON wrote it: an integer (no '.', 'e' or 'E': iv) or a real (dv), as jansson
 * tells them apart. */
struct gr_number {
    int is_int;
    long long iv;
    double dv;
};

struct gr_numbers {
    struct gr_number *v; /* n of them, row after row */
    size_t n;
    int ndim;         /* 1: [..]; 2: [[..], ..], every row as long as the first */
    int64_t shape[2]; /* [n, 1] or [rows, cols] */
};

/* If body is a JSON object whose top-level "data" is a non-empty array of numbers, or of rows of
 * numbers all of one length, that jansson would read as they are read here: *out holds them, and
 * the result is a copy of body (malloc'd, *rest_len bytes) with that array written as the
 * number 0. Else NULL (out empty): body is jansson's alone. The rest is not checked here: where
 * jansson refuses the copy, the caller has it read body itself, for the message it gives. */
char *gr_numbers_take(const char *body, size_t len, struct gr_numbers *out, size_t *rest_len);

void gr_numbers_free(struct gr_numbers *x);

#endif
