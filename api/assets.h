/* assets.h: files embedded in the binary at build time (api/assets.cmake writes the table):
 * the dashboard, Chart.js and the OpenAPI spec as JSON. Read-only; any thread. */
#ifndef GR_ASSETS_H
#define GR_ASSETS_H

#include <stddef.h>

struct gr_asset {
    const char *name, *ctype, *etag;
    const unsigned char *data;
    size_t len;
};

/* Ends with an entry whose name is NULL. */
extern const struct gr_asset gr_assets[];

#endif
