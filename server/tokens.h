/* tokens.h: bearer tokens from --tokens-file, read at start and again on SIGHUP (main thread),
 * checked by every HTTP thread. A reload swaps the whole table under a write lock; a check
 * holds the read lock only to compare hashes. */
#ifndef GR_TOKENS_H
#define GR_TOKENS_H

#include "common/gr.h"

#include <stddef.h>

#define GR_TENANT_MAX 64 /* [a-z0-9_-]{1,64} */

/* Who a request is: its tenant and whether it may see and manage every tenant. */
struct gr_principal {
    char tenant[GR_TENANT_MAX + 1];
    int admin;
};

struct gr_token_table;

/* Parse a tokens file's text: lines "TENANT TOKEN [admin]", '#' comment lines, blank lines.
 * GR_OK with *out (at least one token), else GR_EINVAL with e naming the line (never the
 * token). Pure: no globals. */
int gr_tokens_parse(const char *text, size_t len, struct gr_token_table **out, struct gr_err *e);
void gr_tokens_free(struct gr_token_table *t);
int gr_tokens_count(const struct gr_token_table *t);

/* 1 if name is a valid tenant name. */
int gr_tenant_valid(const char *name);

/* Read path and make its tokens the ones checked from now on. GR_OK, or GR_EINVAL/GR_EIO with
 * e filled and the tokens in use unchanged. */
int gr_tokens_load(const char *path, struct gr_err *e);

/* How many times a tokens file was made the one in use: what was checked before a change may
 * no longer hold (an open event stream's token). */
unsigned gr_tokens_loads(void);

/* 1 if a tokens file is in use. */
int gr_tokens_enabled(void);

/* The principal of an Authorization header's value ("Bearer TOKEN"): GR_OK, or GR_EUNAUTH
 * with e saying what is missing or wrong (without the token). */
int gr_tokens_check(const char *authorization, struct gr_principal *p, struct gr_err *e);

/* Drop the tokens in use (shutdown). */
void gr_tokens_unload(void);

#endif
