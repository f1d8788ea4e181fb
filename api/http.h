/* http.h: the HTTP layer's per-request state and the helpers route handlers answer with.
 * A request belongs to the libmicrohttpd thread serving its connection, except while parked:
 * then only the waiter's wake (any thread) touches it, to resume the connection. */
#ifndef GR_HTTP_H
#define GR_HTTP_H

#include "jobs.h"

#include <microhttpd.h>

struct gr_config;
struct gr_store;

struct gr_req {
    struct MHD_Connection *conn;
    const char *url, *method;
    const struct gr_route *route;
    char id[32];   /* {id} from the path */
    char *body;    /* request body, NUL-terminated */
    size_t len, cap;
    int over;      /* body passed the limit: answered 413 once it ends */
    double t0;     /* gr_mono_ms() at arrival, for the request log */
    unsigned status;
    struct gr_waiter w;
    void (*resume)(struct gr_req *r); /* set while parked: answers once woken */
    int64_t wait_s;
};

typedef void (*gr_handler)(struct gr_req *r);

struct gr_route {
    const char *path; /* with {id} where an id goes */
    gr_handler get, post, del;
    int body;         /* accepts a JSON body */
};

/* Globals the handlers read (set before the daemon starts, read-only after). */
extern const struct gr_config *gr_api_cfg;
extern struct gr_store *gr_api_store;

/* Answer with body (malloc'd, taken) of content type ctype; hdrs: NULL, or name, value
 * pairs ending in NULL. */
void gr_respond(struct gr_req *r, unsigned status, const char *ctype, char *body, size_t len, const char **hdrs);
void gr_respond_json(struct gr_req *r, unsigned status, json_t *o); /* takes o */
/* application/problem+json from e (status from its code). */
void gr_respond_problem(struct gr_req *r, const struct gr_err *e);
/* Park the request until w fires; then resume(r) runs on the request's thread to answer. */
void gr_park(struct gr_req *r, void (*resume)(struct gr_req *r));
/* A query argument, or NULL. */
const char *gr_query(struct gr_req *r, const char *name);
const char *gr_header(struct gr_req *r, const char *name);

/* routes.c */
extern const struct gr_route gr_routes[];

/* Start and stop the daemon. start returns GR_OK and the bound port, or GR_EINVAL/EIO. */
int gr_api_start(const struct gr_config *cfg, struct gr_store *store, int *port, struct gr_err *e);
void gr_api_quiesce(void);
void gr_api_stop(void);

#endif
