/* id.h: resource ids ("j_" jobs, "d_" datasets + 16 hex digits): unique, time-ordered, so that
 * ORDER BY id is creation order and an id is its own list cursor. Safe from any thread. */
#ifndef GR_ID_H
#define GR_ID_H

#include <stddef.h>
#include <stdint.h>

#define GR_ID_LEN 18 /* "x_" + 16 hex digits */

/* Replicas on one store: from now on every id is k modulo n (n distinct k: distinct ids). At
 * start-up, before the first id. A burst of more than 1/n ids per microsecond runs ahead of the
 * clock, as any burst past one per microsecond does. */
void gr_id_space(unsigned n, unsigned k);

/* A fresh id with this prefix letter into buf (len > GR_ID_LEN; else buf gets ""). */
void gr_id_new(char prefix, char *buf, size_t len);

/* The id of number n with this prefix letter (a store keeps ids as their numbers). */
void gr_id_text(char prefix, uint64_t n, char out[GR_ID_LEN + 1]);

/* 1 if id is one gr_id_new could have made with this prefix. */
int gr_id_valid(const char *id, char prefix);

#endif
