/* http.h: the HTTP layer's per-request state and the helpers route handlers answer with.
 * A request belongs to the libmicrohttpd thread serving its connection, except while parked:
 * then only the waiter's wake (any thread) touches it, to resume the connection. */
#ifndef GR_HTTP_H
#define GR_HTTP_H

#include "common/buf.h"
#include "db/store.h"
#include "server/jobs.h"
#include "server/tokens.h"

#include <microhttpd.h>

struct gr_config;
struct gr_store;

/* A submission's moments: its body read, made into jobs, queued for the store, first woken (on
 * the waking thread: its job durable, or ended with Prefer: wait), its answer begun (resumed on
 * the connection's thread). */
enum { GR_MARK_BODY, GR_MARK_PARSED, GR_MARK_QUEUED, GR_MARK_WOKEN, GR_MARK_RESUMED, GR_MARKS };

struct gr_req {
    struct MHD_Connection *conn;
    const char *url, *method;
    const struct gr_route *route;
    char id[32];   /* {id} from the path */
    char *body;    /* request body, NUL-terminated */
    size_t len, cap;
    int over;      /* body passed the limit: answered 413 once it ends */
    int closing;   /* its answer ends the connection (framing a proxy could read another way) */
    int streaming; /* the route's stream takes the body (its open succeeded) */
    void *state;   /* the stream's, released by its close */
    struct gr_err err; /* the stream's first failure: answered once the body ends */
    int store_code;    /* outcome of a store write the request was suspended for */
    double t0;     /* gr_mono_ms() at arrival, for the request log */
    uint64_t got;  /* body bytes received, for --min-body-rate */
    uint64_t clen; /* Content-Length, 0 when not sent */
    struct gr_principal who; /* the token's tenant; without tokens "default", admin */
    char *idem;    /* the Idempotency-Key this request holds in flight (idempotency.h), or NULL */
    void (*done)(struct gr_req *r); /* lets go of what a handler holds past its answer (that key) */
    int replayed;  /* the answer is an earlier request's resource (Idempotent-Replayed: true) */
    unsigned status;
    struct gr_waiter w;
    struct gr_job **batch; /* a batch's jobs, each referenced (released when the request ends) */
    int nbatch, batch_at;  /* how many; the first one a Prefer: wait may still wait for */
    struct gr_buf accepted; /* a batch not waited for: its jobs as accepted, its 202's body */
    double marks[GR_MARKS]; /* a submission's moments (gr_mono_ms), told in its answer's Server-Timing */
    void (*resume)(struct gr_req *r); /* set while parked: answers once woken */
    int64_t wait_s;
};

typedef void (*gr_handler)(struct gr_req *r);

/* A POST body taken as it arrives instead of buffered (an upload). open runs once the headers
 * are in and may refuse at once (e filled: answered before the body is read); chunk takes each
 * piece (a failure is answered once the body ends, the rest read and dropped); then the route's
 * post handler answers. close runs when the request ends, however it ends (a client gone half
 * way included), and releases what open set up. */
struct gr_stream {
    int (*open)(struct gr_req *r, struct gr_err *e);
    int (*chunk)(struct gr_req *r, const char *data, size_t n, struct gr_err *e);
    void (*close)(struct gr_req *r);
};

enum { GR_BODY_JSON = 1, GR_BODY_BINARY = 2 }; /* buffered bodies: application/json; octet-stream or x-npy */

struct gr_route {
    const char *path; /* with {id} where an id goes */
    gr_handler get, post, del;
    int body;                     /* GR_BODY_* a POST may carry, buffered up to --max-body-bytes */
    const struct gr_stream *stream; /* or: the POST body is streamed */
    int open;                     /* answered without a token (probes, the dashboard's page) */
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
/* Answer with size bytes that reader produces as they are sent (free_cb(cls) when done). */
void gr_respond_reader(struct gr_req *r, unsigned status, const char *ctype, uint64_t size,
                       MHD_ContentReaderCallback reader, void *cls, MHD_ContentReaderFreeCallback free_cb,
                       const char **hdrs);
/* Suspend the request; once gr_wake(r) is called (from any thread, once), resume(r) runs on
 * the request's thread to answer. */
void gr_suspend(struct gr_req *r, void (*resume)(struct gr_req *r));
void gr_wake(struct gr_req *r);
/* Requests begun and not yet done: answered and sent, or abandoned by their client (shutdown
 * waits for them before stopping the daemon, which would cut an answer half sent). */
int gr_api_busy(void);
/* Park the request until w fires (gr_suspend until a job's waiter wakes it). */
void gr_park(struct gr_req *r, void (*resume)(struct gr_req *r));
/* The tenant whose resources the request may see: NULL for an admin (every tenant's). */
const char *gr_scope(const struct gr_req *r);

/* A query argument, or NULL. */
const char *gr_query(struct gr_req *r, const char *name);
const char *gr_header(struct gr_req *r, const char *name);
/* 1 if Content-Type ct is the media type want (parameters such as charset allowed). */
int gr_ctype_is(const char *ct, const char *want);

/* routes.c */
extern const struct gr_route gr_routes[];
/* Answer a list page {"<key>": [docs], "next_cursor": id or null} from fetch's rows, after
 * ?cursor= (an id with this prefix letter), at most ?limit= (default 50, 1 to 1000); ETag from
 * the store's version, so an unchanged page is a 304. */
typedef int (*gr_page_fetch)(void *args, const char *before, int limit, gr_store_row row, void *ctx,
                             struct gr_err *e);
void gr_respond_page(struct gr_req *r, const char *key, char prefix, gr_page_fetch fetch, void *args);
/* A list's tenant filter into *tenant (NULL: every tenant's, for an admin): GR_OK, or answered
 * (a bad ?tenant=) and GR_EINVAL. */
int gr_list_tenant(struct gr_req *r, const char **tenant);

/* Start and stop the daemon. start returns GR_OK and the bound port, or GR_EINVAL/EIO. */
int gr_api_start(const struct gr_config *cfg, struct gr_store *store, int *port, struct gr_err *e);
void gr_api_quiesce(void);
void gr_api_stop(void);

#endif
