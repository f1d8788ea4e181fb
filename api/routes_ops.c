/* routes_ops.c: GET /metrics, /openapi.json, / and /assets/{id}. Handlers run on the request's
 * HTTP thread; embedded assets are immutable, metrics are read from atomics. */
#include "api/routes_ops.h"

#include "api/assets.h"
#include "api/http.h"
#include "db/store.h"
#include "server/metrics.h"

#include <stdlib.h>
#include <string.h>

static const struct gr_asset *asset(const char *name)
{
    for (const struct gr_asset *a = gr_assets; a->name; a++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}

/* An embedded file, or 304 when the client has this build's copy already. */
static void send_asset(struct gr_req *r, const char *name)
{
    struct gr_err e;
    const struct gr_asset *a = asset(name);
    if (!a) {
        gr_fail(&e, GR_ENOTFOUND, NULL, "no dashboard file named %.64s", name);
        gr_respond_problem(r, &e);
        return;
    }
    const char *hdrs[] = {MHD_HTTP_HEADER_ETAG, a->etag, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache",
                          "X-Content-Type-Options", "nosniff", NULL};
    const char *inm = gr_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (inm && strstr(inm, a->etag)) {
        gr_respond(r, 304, NULL, NULL, 0, hdrs);
        return;
    }
    char *body = malloc(a->len ? a->len : 1);
    if (!body) {
        gr_fail(&e, GR_ENOMEM, NULL, "out of memory answering with %s", name);
        gr_respond_problem(r, &e);
        return;
    }
    memcpy(body, a->data, a->len);
    gr_respond(r, 200, a->ctype, body, a->len, hdrs);
}

void gr_get_metrics(struct gr_req *r)
{
    struct gr_err e = {0};
    char *text;
    size_t len;
    if (gr_metrics_render(gr_store_data_dir(gr_api_store), &text, &len, &e) != GR_OK) {
        gr_respond_problem(r, &e);
        return;
    }
    gr_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL);
}

void gr_get_openapi(struct gr_req *r) { send_asset(r, "openapi.json"); }
void gr_get_dashboard(struct gr_req *r) { send_asset(r, "index.html"); }
void gr_get_asset(struct gr_req *r) { send_asset(r, r->id); }
