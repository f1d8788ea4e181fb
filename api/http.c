/* http.c: the libmicrohttpd daemon: routing, per-request state, capped body reading, answers,
 * parking and resuming. Requests run on the daemon's pool threads; a parked request is
 * resumed by whichever thread wakes its waiter. */
#include "api/http.h"

#include "api/connections.h"
#include "api/headers.h"
#include "server/config.h"
#include "server/log.h"
#include "server/metrics.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const struct gr_config *gr_api_cfg;
struct gr_store *gr_api_store;
static struct MHD_Daemon *daemon_;
static _Atomic int busy; /* requests begun and not yet done (answered and sent, or abandoned) */

/* A streamed body's rest after a failure is read and dropped, up to this much; past it the
 * client is cut off. */
#define DISCARD_MAX ((size_t)16 << 20)

/* Match url against a route path with an optional {id} segment. */
static int path_match(const char *pat, const char *url, char id[32])
{
    const char *brace = strstr(pat, "{id}");
    if (!brace)
        return !strcmp(pat, url);
    size_t pre = (size_t)(brace - pat);
    if (strncmp(pat, url, pre))
        return 0;
    const char *start = url + pre, *end = strchr(start, '/');
    size_t n = end ? (size_t)(end - start) : strlen(start);
    if (n == 0 || n >= 32 || strcmp(brace + 4, end ? end : ""))
        return 0;
    memcpy(id, start, n);
    id[n] = 0;
    return 1;
}

static const struct gr_route *route_of(const char *url, char id[32])
{
    for (const struct gr_route *r = gr_routes; r->path; r++)
        if (path_match(r->path, url, id))
            return r;
    return NULL;
}

static gr_handler handler_of(const struct gr_route *rt, const char *method)
{
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
        return rt->get;
    if (!strcmp(method, "POST"))
        return rt->post;
    if (!strcmp(method, "DELETE"))
        return rt->del;
    return NULL;
}

static void allow_of(const struct gr_route *rt, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", rt->get ? "GET, HEAD" : "", rt->post ? (rt->get ? ", POST" : "POST") : "",
             rt->del ? ", DELETE" : "");
}

/* Queue resp (NULL: out of memory, and MHD closes the connection) with its headers. */
static void queue(struct gr_req *r, unsigned status, struct MHD_Response *resp, const char *ctype, const char **hdrs)
{
    if (!resp)
        return;
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (; hdrs && hdrs[0]; hdrs += 2)
        MHD_add_response_header(resp, hdrs[0], hdrs[1]);
    if (MHD_queue_response(r->conn, status, resp) == MHD_YES)
        r->status = status;
    MHD_destroy_response(resp);
}

void gr_respond(struct gr_req *r, unsigned status, const char *ctype, char *body, size_t len, const char **hdrs)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        free(body);
    queue(r, status, resp, ctype, hdrs);
}

void gr_respond_reader(struct gr_req *r, unsigned status, const char *ctype, uint64_t size,
                       MHD_ContentReaderCallback reader, void *cls, MHD_ContentReaderFreeCallback free_cb,
                       const char **hdrs)
{
    if (size == MHD_SIZE_UNKNOWN && !strcmp(r->method, "HEAD")) {
        /* the headers alone: libmicrohttpd would end a stream's chunked body even for HEAD */
        free_cb(cls);
        gr_respond(r, status, ctype, NULL, 0, hdrs);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(size, 256 * 1024, reader, cls, free_cb);
    if (!resp)
        free_cb(cls);
    queue(r, status, resp, ctype, hdrs);
}

void gr_respond_json(struct gr_req *r, unsigned status, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (!s) {
        gr_respond_problem(r, &(struct gr_err){.code = GR_ENOMEM, .msg = "out of memory rendering the answer"});
        return;
    }
    gr_respond(r, status, "application/json", s, strlen(s), NULL);
}

/* s as a JSON string; bytes that are not UTF-8 (a decoded URL can hold any) become '?'. */
static json_t *text(const char *s)
{
    json_t *v = json_string(s);
    if (v)
        return v;
    char buf[512];
    size_t k = 0;
    for (; *s && k + 1 < sizeof buf; s++)
        buf[k++] = (unsigned char)*s < 0x80 ? *s : '?';
    buf[k] = 0;
    return json_string(buf);
}

void gr_respond_problem(struct gr_req *r, const struct gr_err *e)
{
    int code = e->code ? e->code : GR_EINTERNAL;
    unsigned status = (unsigned)gr_http_status(code);
    json_t *p = json_pack("{s:s+, s:s, s:i, s:o, s:o}", "type", "https://gpured.dev/problems/", gr_code_slug(code),
                          "title", gr_code_title(code), "status", status, "detail",
                          text(e->msg[0] ? e->msg : gr_code_title(code)), "instance", text(r->url));
    if (p && e->field[0])
        json_object_set_new(p, "field", json_string(e->field));
    char *s = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!s)
        return;
    char allow[64] = "";
    const char *hdrs[7] = {NULL}, **h = hdrs;
    if (r->closing) {
        *h++ = MHD_HTTP_HEADER_CONNECTION;
        *h++ = "close";
    }
    if (code == GR_EFULL || code == GR_EUNAVAIL) {
        *h++ = "Retry-After";
        *h++ = "1";
    }
    if (code == GR_EUNAUTH) {
        *h++ = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
        *h++ = "Bearer realm=\"gpured\"";
    }
    if (code == GR_EMETHOD && r->route) {
        allow_of(r->route, allow, sizeof allow);
        *h++ = MHD_HTTP_HEADER_ALLOW;
        *h++ = allow;
    }
    gr_respond(r, status, "application/problem+json", s, strlen(s), hdrs);
    gr_log(status >= 500 ? GR_LOG_ERROR : GR_LOG_DEBUG, "%s %s -> %u: %s", r->method, r->url, status, e->msg);
}

void gr_suspend(struct gr_req *r, void (*resume)(struct gr_req *r))
{
    MHD_suspend_connection(r->conn);
    r->resume = resume;
}

void gr_wake(struct gr_req *r) { MHD_resume_connection(r->conn); }

int gr_api_busy(void) { return atomic_load(&busy); }

static void wake(struct gr_waiter *w)
{
    struct gr_req *r = (struct gr_req *)((char *)w - offsetof(struct gr_req, w));
    if (!r->marks[GR_MARK_WOKEN]) /* the connection's thread reads it once resumed */
        r->marks[GR_MARK_WOKEN] = gr_mono_ms();
    gr_wake(r);
}

void gr_park(struct gr_req *r, void (*resume)(struct gr_req *r))
{
    /* suspend before the waiter is registered, so a wake can never come first */
    gr_suspend(r, resume);
    r->w.wake = wake;
    gr_jobs_wait(&r->w);
}

const char *gr_scope(const struct gr_req *r) { return r->who.admin ? NULL : r->who.tenant; }

const char *gr_query(struct gr_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *gr_header(struct gr_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

int gr_ctype_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct && !strncasecmp(ct, want, n) && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

static int body_accepted(int body, const char *ct)
{
    return ((body & GR_BODY_JSON) && gr_ctype_is(ct, "application/json")) ||
           ((body & GR_BODY_BINARY) &&
            (gr_ctype_is(ct, "application/octet-stream") || gr_ctype_is(ct, "application/x-npy")));
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    gr_framing_add(cls, key, value);
    return MHD_YES;
}

/* gr_framing_check over the request's headers */
static int framing_ok(struct gr_req *r, struct gr_err *e)
{
    struct gr_framing f = {0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_header, &f);
    return gr_framing_check(&f, e);
}

/* First call for a request: route it and refuse what can be refused before the body. */
static void begin(struct gr_req *r)
{
    struct gr_err e = {0};
    if (framing_ok(r, &e) != GR_OK) {
        r->closing = 1;
        gr_respond_problem(r, &e);
        return;
    }
    r->route = route_of(r->url, r->id);
    if (!r->route) {
        gr_fail(&e, GR_ENOTFOUND, NULL, "no such path: %.200s (see GET /openapi.json)", r->url);
        gr_respond_problem(r, &e);
        return;
    }
    /* without tokens everyone is the one tenant, and may see everything */
    if (r->route->open || !gr_tokens_enabled())
        r->who = (struct gr_principal){.tenant = "default", .admin = 1};
    else if (gr_tokens_check(gr_header(r, MHD_HTTP_HEADER_AUTHORIZATION), &r->who, &e) != GR_OK) {
        gr_respond_problem(r, &e);
        return;
    }
    if (!handler_of(r->route, r->method)) {
        gr_fail(&e, GR_EMETHOD, NULL, "%s is not allowed on %s", r->method, r->route->path);
        gr_respond_problem(r, &e);
        return;
    }
    if (strcmp(r->method, "POST"))
        return;
    if (r->route->stream) {
        if (r->route->stream->open(r, &e) == GR_OK)
            r->streaming = 1;
        else
            gr_respond_problem(r, &e);
        return;
    }
    if (!r->route->body)
        return;
    const char *ct = gr_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!body_accepted(r->route->body, ct)) {
        gr_fail(&e, GR_EMEDIA, NULL, "the body must be JSON: send it with -H 'Content-Type: application/json'%s (got %.100s)",
                r->route->body & GR_BODY_BINARY
                    ? ", or values as application/octet-stream (raw little-endian) or application/x-npy"
                    : "",
                ct ? ct : "no Content-Type");
        gr_respond_problem(r, &e);
        return;
    }
    const char *cl = gr_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > gr_api_cfg->max_body_bytes) {
        gr_fail(&e, GR_ETOOBIG, NULL, "the body is %s bytes; this server accepts at most %zu (--max-body-bytes)", cl,
                gr_api_cfg->max_body_bytes);
        gr_respond_problem(r, &e);
    }
}

/* Append a body chunk, keeping at most max_body_bytes; past that, count and discard. */
static int take_body(struct gr_req *r, const char *data, size_t n)
{
    size_t max = gr_api_cfg->max_body_bytes;
    if (r->over || n > max - r->len) {
        r->over = 1;
        free(r->body);
        r->body = NULL;
        r->len = r->len > max ? r->len : max;
        /* a client that goes on sending far past the limit is cut off */
        return (r->len += n) <= 4 * max;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return 0;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
    return 1;
}

/* Hand a body chunk to the route's stream; after its first failure, count and drop. */
static int take_stream(struct gr_req *r, const char *data, size_t n)
{
    if (!r->err.code && r->route->stream->chunk(r, data, n, &r->err) == GR_OK)
        return 1;
    if (!r->err.code)
        gr_fail(&r->err, GR_EINTERNAL, NULL, "the upload failed without a reason");
    return (r->len += n) <= DISCARD_MAX;
}

/* libmicrohttpd 0.9.75's epoll mode takes a short read as "drained", so it never sees a close
 * that came with a body's last bytes: while a body is still owed, look for that close here. */
static int gone(struct gr_req *r)
{
    if (!r->clen || r->got >= r->clen)
        return 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char c;
    return ci && recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A body still arriving more slowly than --min-body-rate on average, once --conn-timeout has
 * passed since the request began: a client that holds a connection by trickling bytes. */
static int too_slow(const struct gr_req *r)
{
    double s = (gr_mono_ms() - r->t0) / 1000;
    return gr_api_cfg->min_body_rate && s > (double)gr_api_cfg->conn_timeout_s &&
           (double)r->got < (double)gr_api_cfg->min_body_rate * s;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    struct gr_req *r = *con_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        *con_cls = r;
        atomic_fetch_add(&busy, 1);
        r->conn = conn;
        r->url = url;
        r->method = method;
        r->t0 = gr_mono_ms();
        gr_conn_head_done(conn);
        const char *cl = gr_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
        r->clen = cl ? strtoull(cl, NULL, 10) : 0;
        begin(r);
        return MHD_YES;
    }
    if (*upload_size) {
        r->got += *upload_size;
        if (gone(r))
            return MHD_NO;
        if (too_slow(r)) {
            gr_metrics_slow_body();
            gr_conn_log_limited("a request body slower than --min-body-rate was cut off");
            return MHD_NO;
        }
        int ok = r->status || (r->streaming ? take_stream(r, upload, *upload_size) : take_body(r, upload, *upload_size));
        *upload_size = 0;
        return ok ? MHD_YES : MHD_NO;
    }
    if (r->status)
        return MHD_YES;
    if (r->resume) {
        void (*resume)(struct gr_req *) = r->resume;
        r->resume = NULL;
        resume(r);
        return MHD_YES;
    }
    if (r->err.code) {
        gr_respond_problem(r, &r->err);
        return MHD_YES;
    }
    if (r->over) {
        struct gr_err e;
        gr_fail(&e, GR_ETOOBIG, NULL, "the body is over the limit of %zu bytes (--max-body-bytes)",
                gr_api_cfg->max_body_bytes);
        gr_respond_problem(r, &e);
        return MHD_YES;
    }
    handler_of(r->route, method)(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct gr_req *r = *con_cls;
    if (!r)
        return;
    double ms = gr_mono_ms() - r->t0;
    gr_log(GR_LOG_INFO, "%s %s %u %.3fms%s", r->method, r->url, r->status, ms,
           toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    gr_metrics_http(r->route ? (int)(r->route - gr_routes) : -1, r->route ? r->route->path : NULL, r->method, r->status,
                    ms);
    if (r->streaming && r->route->stream->close)
        r->route->stream->close(r);
    if (r->w.job)
        gr_job_unref(r->w.job);
    for (int k = 0; k < r->nbatch; k++)
        gr_job_unref(r->batch[k]);
    free(r->batch);
    free(r->accepted.p);
    if (r->done)
        r->done(r);
    free(r->body);
    free(r);
    *con_cls = NULL;
    gr_conn_head_awaited(conn); /* the next request's, on a connection kept alive */
    atomic_fetch_sub(&busy, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    gr_log(GR_LOG_DEBUG, "libmicrohttpd: %s", msg);
}

int gr_api_start(const struct gr_config *cfg, struct gr_store *store, int *port, struct gr_err *e)
{
    gr_api_cfg = cfg;
    gr_api_store = store;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, cfg->bind, &sa.sin_addr) != 1)
        return gr_fail(e, GR_EINVAL, "bind", "--bind '%s' is not an IPv4 address", cfg->bind);
    /* epoll: one thread's wait costs the same with ten thousand idle connections as with ten,
     * where poll(2) rebuilt and scanned them all each time round (gone() covers epoll's one gap) */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    /* The caps are ours (gr_conn_accept: counted, logged); libmicrohttpd's own limit, which it
     * splits between its threads, sits above them as a backstop. Its timeout closes a connection
     * idle that long; a parked (suspended) one never times out: its wait has its own deadline. */
    gr_conn_limits(cfg->max_connections, cfg->max_connections_per_ip);
    daemon_ = MHD_start_daemon(flags, (uint16_t)cfg->port, gr_conn_accept, NULL, on_request, NULL,
                               MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                               MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads, MHD_OPTION_NOTIFY_COMPLETED,
                               on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, gr_conn_notify, NULL,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections + 64u * (unsigned)cfg->threads,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->conn_timeout_s,
                               MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_END);
    if (!daemon_)
        return gr_fail(e, GR_EIO, "port", "cannot listen on %s:%d (in use, or not allowed)", cfg->bind, cfg->port);
    if (!gr_conn_deadlines_start(cfg->header_timeout_s)) {
        gr_api_stop();
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the request-head deadline thread");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : cfg->port;
    return GR_OK;
}

void gr_api_quiesce(void)
{
    /* New connections are closed as they come; the listening socket stays until the daemon
     * stops. MHD_quiesce_daemon would take it away, but in libmicrohttpd 0.9.75 it races the
     * epoll threads, which drop the socket from their sets as it does, and the second drop aborts
     * the process ("Failed to remove listen FD from epoll set": once at SIGTERM, 16-core host). */
    gr_conn_stop();
}

void gr_api_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
    gr_conn_deadlines_stop();
}
