/* events.c: GET /v1/events (events.h). The subscribers' list and each one's pending text are
 * guarded by mu. A subscriber's connection is suspended, under mu, when it has nothing to send,
 * and resumed, under mu, once it has: a resume never comes before its suspend, and no thread
 * waits per subscriber. The gr-events thread reads the store outside mu: new events once for
 * every subscriber that is up to date, and, for one that fell behind (a resume from an old
 * Last-Event-ID, or a client reading slowly), a page of its own at a time. A tenant's stream
 * numbers events by the tenant's own count (tseq), so its ids move only with its own events; an
 * admin's (or any stream without tokens) by seq, the store's count of all. A job's running event
 * is never stored: the workers tell it (gr_events_running, under mu), and each round hands it
 * to the streams that are up to date, after its job's queued event and never after its end. */
#include "api/events.h"

#include "server/job_doc.h" /* gr_rfc3339 */
#include "server/log.h"
#include "server/tokens.h"
#include "db/store.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define PAGE 1000        /* events per store read */
#define ROOM (256 << 10) /* pending text past which a subscriber is read for later, from the store */
#define CATCH_UP 64      /* subscribers behind, read for per round */
#define HEARTBEAT_S 15   /* ?heartbeat= when not given */
#define ROUND_MS 500     /* a round without a kick: heartbeats, other replicas' events */
#define GAP_MS 5         /* rounds at most this often: under load one read serves many commits */
#define SUBS_PER_MS 100  /* and 1 ms further apart per this many streams: each round walks them all */
#define RUNS_MAX 65536   /* running events told between two rounds, at most: the rest are not told */

enum { K_JOB = 1, K_DATASET = 2 };
static const char *const kinds[] = {"job", "dataset"};
/* what an event's status can be (running: told live, never stored) */
static const char *const states[] = {"queued", "running", "succeeded", "failed", "canceled", "created", "deleted"};
#define RUNNING 0x2u /* the bits of states[]: running */
#define ENDS 0x1cu    /* succeeded, failed, canceled */
#define NSTATES (int)(sizeof states / sizeof states[0])

struct sub {
    struct sub *next;
    struct MHD_Connection *conn;
    int refs;     /* the response's, and the thread's while it reads for this one */
    int gone;     /* the response is freed: out of the list */
    char tenant[65]; /* "": every tenant's (an admin) */
    char job[24];    /* ?job=, or "" */
    unsigned kinds, states; /* bit masks; 0: any */
    int64_t cursor;         /* the last seq weighed for it */
    int64_t pos;            /* a tenant's: its own number (tseq) of the last of its events weighed */
    double heartbeat_ms, last_ms;
    char *text; /* pending SSE text: [off, len) */
    size_t off, len, cap;
    int oom, suspended;
    int ended; /* the client closed its end, or its token no longer holds: the stream ends */
    int fd;    /* the connection's socket, looked at while suspended */
    char *authorization; /* the request's, checked again after a tokens reload; NULL without tokens */
    struct gr_req *req; /* while its opening waits in `opening`: the request, parked */
    uint64_t told_by;   /* until the store's writer has told this many transactions */
};

/* One event, parsed for the filters and rendered once as SSE text. */
struct ev {
    int64_t seq, tseq;
    unsigned kind, state;
    char id[24], tenant[65];
    char *text, *own; /* as an admin's stream tells it (by seq), and as its tenant's (by tseq) */
    size_t len, own_len;
    char *run; /* an end's: its job's running event, told in the round that read the end, sent first */
    size_t run_len;
};

struct evs {
    struct ev *ev;
    int n, cap, oom;
};

/* A job that began running, as the workers told it. */
struct run {
    char id[24], tenant[65], op[16], device[16];
    double at;
};

struct runs {
    struct run *r;
    int n, cap;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static struct sub *subs;
static int nsubs;            /* in subs (atomic: a worker looks without mu) */
static struct runs told, pending; /* running events told since the last round, and those for the next */
static struct sub *opening;  /* streams whose opening waits for the writer (linked by next) */
static int kicked, stopping, started;
static unsigned tokens_seen; /* gr_tokens_loads() when the streams' tokens were last checked */
static int64_t head; /* the newest seq read */
static pthread_t thread;
static struct gr_store *store;

static unsigned bit_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1u << i;
    return 0;
}

/* The SSE text of event o (its kind k) numbered n, "seq" set to n; *len its length. NULL if memory ran out. */
static char *render(json_t *o, unsigned k, int64_t n, size_t *len)
{
    json_object_set_new(o, "seq", json_integer(n));
    char *data = json_dumps(o, JSON_COMPACT);
    size_t room = (data ? strlen(data) : 0) + 64;
    char *text = data ? malloc(room) : NULL;
    if (text)
        *len = (size_t)snprintf(text, room, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)n, k == K_JOB ? "job" : "dataset",
                                data);
    free(data);
    return text;
}

/* A row of gr_store_events: parsed and rendered onto out. */
static void take_row(void *ctx, const char *seq, const char *doc)
{
    struct evs *out = ctx;
    json_t *o = json_loads(doc, 0, NULL);
    const char *kind = json_string_value(json_object_get(o, "kind")), *id = json_string_value(json_object_get(o, "id"));
    const char *status = json_string_value(json_object_get(o, "status"));
    const char *tenant = json_string_value(json_object_get(o, "tenant"));
    if (out->n == out->cap) {
        int cap = out->cap ? 2 * out->cap : 64;
        struct ev *grown = realloc(out->ev, (size_t)cap * sizeof *grown);
        if (grown)
            out->ev = grown, out->cap = cap;
    }
    if (!o || !kind || !id || !status || !tenant || out->n == out->cap) {
        out->oom |= !o || out->n == out->cap; /* a row that does not parse: memory ran out */
        json_decref(o);
        return;
    }
    struct ev *e = &out->ev[out->n];
    *e = (struct ev){.seq = strtoll(seq, NULL, 10), .tseq = json_integer_value(json_object_get(o, "tseq")),
                     .kind = bit_of(kinds, 2, kind), .state = bit_of(states, NSTATES, status)};
    /* kind, id, status and tenant point into o: copied before it changes */
    snprintf(e->id, sizeof e->id, "%s", id);
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    char at[40];
    gr_rfc3339(json_number_value(json_object_get(o, "at")), at, sizeof at);
    json_object_set_new(o, "at", json_string(at));
    json_object_del(o, "tseq");
    const char *k;
    json_t *v;
    void *next;
    json_object_foreach_safe(o, next, k, v) /* a dataset's, or a job deleted since: no op, device or error */
        if (json_is_null(v))
            json_object_del(o, k);
    e->text = render(o, e->kind, e->seq, &e->len);
    e->own = render(o, e->kind, e->tseq, &e->own_len);
    json_decref(o);
    if (!e->text || !e->own) {
        free(e->text);
        free(e->own);
        out->oom = 1;
        return;
    }
    out->n++;
}

static void evs_free(struct evs *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->ev[i].text), free(v->ev[i].own), free(v->ev[i].run);
    free(v->ev);
}

/* Up to PAGE events after seq, outside mu. */
static int read_page(int64_t after, struct evs *out)
{
    struct gr_err e = {0};
    int rc = gr_store_events(store, after, PAGE, take_row, out, &e);
    if (rc == GR_OK && out->oom)
        rc = gr_fail(&e, GR_ENOMEM, NULL, "out of memory reading events");
    if (rc != GR_OK)
        gr_log(GR_LOG_WARN, "events: reading after %lld: %s", (long long)after, e.msg);
    return rc;
}

static void add(struct sub *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n)
            cap *= 2;
        char *grown = realloc(s->text, cap);
        if (!grown) {
            s->oom = 1; /* the stream ends; the client resumes from its Last-Event-ID */
            return;
        }
        s->text = grown, s->cap = cap;
    }
    memcpy(s->text + s->len, p, n);
    s->len += n;
}

/* Whether s wants e's event of status state (a bit of states). */
static int matches(const struct sub *s, const struct ev *e, unsigned state)
{
    return (!s->tenant[0] || !strcmp(s->tenant, e->tenant)) && (!s->job[0] || !strcmp(s->job, e->id)) &&
           (!s->kinds || (s->kinds & e->kind)) && (!s->states || (s->states & state));
}

/* The events of v after s's cursor onto its text, while it has room (mu held). */
static void deliver(struct sub *s, const struct evs *v)
{
    for (int i = 0; i < v->n && s->len - s->off < ROOM && !s->ended; i++) {
        const struct ev *e = &v->ev[i];
        if (e->seq <= s->cursor)
            continue;
        if (e->run && matches(s, e, RUNNING))
            add(s, e->run, e->run_len);
        if (matches(s, e, e->state))
            add(s, s->tenant[0] ? e->own : e->text, s->tenant[0] ? e->own_len : e->len);
        if (s->tenant[0] && !strcmp(s->tenant, e->tenant))
            s->pos = e->tseq;
        s->cursor = e->seq;
    }
}

/* Where s stands, as its ids count: a tenant's own number, else the seq. */
static long long position(const struct sub *s) { return s->tenant[0] ? s->pos : s->cursor; }

static void sub_free(struct sub *s)
{
    free(s->text);
    free(s->authorization);
    free(s);
}

static void release(struct sub *s) /* mu held */
{
    if (--s->refs == 0)
        sub_free(s);
}

/* Read for up to CATCH_UP subscribers that are behind and have room; 1 if more remain. */
static int catch_up(void)
{
    struct sub *behind[CATCH_UP];
    int n = 0, more = 0;
    for (struct sub *s = subs; s; s = s->next)
        if (s->cursor < head && s->len - s->off < ROOM && !s->oom) {
            if (n == CATCH_UP) {
                more = 1;
                break;
            }
            s->refs++;
            behind[n++] = s;
        }
    for (int i = 0; i < n; i++) {
        struct sub *s = behind[i];
        int64_t from = s->cursor;
        pthread_mutex_unlock(&mu);
        struct evs got = {0};
        int rc = read_page(from, &got);
        pthread_mutex_lock(&mu);
        if (rc == GR_OK && s->cursor == from) {
            deliver(s, &got);
            if (!got.n) /* nothing after it is kept any more */
                s->cursor = head;
        }
        more |= s->cursor < head;
        evs_free(&got);
        release(s);
    }
    return more;
}

/* Whether a suspended stream's client has closed its end: libmicrohttpd does not watch a
 * suspended connection, so without this its slot stays taken until the next heartbeat. */
static int client_closed(const struct sub *s)
{
    if (s->fd < 0)
        return 0;
    char c;
    ssize_t n = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Whether s's token still names the one it was opened with (mu held): a token removed or moved
 * to another tenant ends the stream, as it fails every new request. */
static int token_holds(const struct sub *s)
{
    struct gr_principal p;
    if (!s->authorization)
        return 1;
    if (gr_tokens_check(s->authorization, &p, NULL) != GR_OK)
        return 0;
    return !strcmp(p.admin ? "" : p.tenant, s->tenant);
}

/* After a tokens reload, end the streams whose token no longer holds, before anything more is
 * delivered to them (mu held). */
static void end_revoked(void)
{
    unsigned loads = gr_tokens_loads();
    if (loads == tokens_seen)
        return;
    tokens_seen = loads;
    for (struct sub *s = subs; s; s = s->next)
        s->ended |= !token_holds(s);
}

/* Heartbeats for quiet streams, an end for those whose client left, and a resume for each
 * suspended one with something to send or to end (mu held). */
static void wake_ready(void)
{
    double now = gr_mono_ms();
    for (struct sub *s = subs; s; s = s->next) {
        if (s->suspended && client_closed(s))
            s->ended = 1;
        if (s->len == s->off && now - s->last_ms >= s->heartbeat_ms) {
            /* with its position: a filtered or quiet stream resumes from here, not from before */
            char beat[48];
            add(s, beat, (size_t)snprintf(beat, sizeof beat, ": keep-alive\nid: %lld\n\n", position(s)));
            s->last_ms = now;
        }
        if (s->suspended && (s->len > s->off || s->oom || s->ended || stopping)) {
            s->suspended = 0;
            MHD_resume_connection(s->conn);
        }
    }
}

/* Resume each parked opening once the transactions it waits for are told (mu held; released
 * while waiting). */
static void open_ready(void)
{
    while (opening) {
        struct sub *s = opening;
        opening = s->next;
        s->next = NULL;
        pthread_mutex_unlock(&mu);
        gr_store_wait_told(store, s->told_by);
        gr_wake(s->req); /* its thread opens it (open_parked): s is not ours from here */
        pthread_mutex_lock(&mu);
    }
}

/* The SSE text of running event r: no id, since it is not stored and no stream resumes from it. */
static char *render_run(const struct run *r, size_t *len)
{
    char at[40];
    gr_rfc3339(r->at, at, sizeof at);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kind", "job", "id", r->id, "status", "running",
                          "tenant", r->tenant, "at", at, "op", r->op, "device", r->device);
    char *data = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    size_t room = (data ? strlen(data) : 0) + 32;
    char *text = data ? malloc(room) : NULL;
    if (text)
        *len = (size_t)snprintf(text, room, "event: job\ndata: %s\n\n", data);
    free(data);
    return text;
}

static int by_id(const void *a, const void *b)
{
    return strcmp((*(struct ev *const *)a)->id, (*(struct ev *const *)b)->id);
}

/* Each running event of list whose job's end is in page v goes with that end, to be sent just
 * before it (mu held). The page's ends are sorted by id, for a search per running event. */
static void attach_running(struct runs *list, struct evs *v)
{
    struct ev **ends = list->n ? malloc((size_t)v->n * sizeof *ends + 1) : NULL;
    int nends = 0, kept = 0;
    for (int k = 0; ends && k < v->n; k++)
        if ((v->ev[k].state & ENDS) && v->ev[k].kind == K_JOB)
            ends[nends++] = &v->ev[k];
    if (nends)
        qsort(ends, (size_t)nends, sizeof *ends, by_id);
    for (int i = 0; i < list->n; i++) {
        struct ev key, *want = &key, **end;
        snprintf(key.id, sizeof key.id, "%s", list->r[i].id);
        end = nends ? bsearch(&want, ends, (size_t)nends, sizeof *ends, by_id) : NULL;
        if (!end)
            list->r[kept++] = list->r[i];
        else if (!(*end)->run)
            (*end)->run = render_run(&list->r[i], &(*end)->run_len);
    }
    list->n = kept;
    free(ends);
}

/* The running events still pending to the streams that are up to date, once the round's read
 * reached the newest event (complete); else they wait for the next round, since the queued events
 * they follow may be past what it read (mu held). */
static void tell_running(int complete)
{
    for (int i = 0; complete && i < pending.n; i++) {
        const struct run *r = &pending.r[i];
        struct ev e = {.kind = K_JOB};
        snprintf(e.id, sizeof e.id, "%s", r->id);
        snprintf(e.tenant, sizeof e.tenant, "%s", r->tenant);
        char *text = NULL;
        size_t len = 0;
        for (struct sub *s = subs; s; s = s->next)
            if (s->cursor >= head && s->len - s->off < ROOM && !s->ended && matches(s, &e, RUNNING) &&
                (text || (text = render_run(r, &len))))
                add(s, text, len);
        free(text);
    }
    if (complete)
        pending.n = 0;
}

/* Append the running events told since the last round to those pending, as many as fit (mu held). */
static void take_told(void)
{
    int n = told.n < RUNS_MAX - pending.n ? told.n : RUNS_MAX - pending.n;
    if (pending.cap < pending.n + n) {
        struct run *grown = realloc(pending.r, (size_t)(pending.n + n) * sizeof *grown);
        if (!grown)
            n = 0;
        else
            pending.r = grown, pending.cap = pending.n + n;
    }
    if (n)
        memcpy(pending.r + pending.n, told.r, (size_t)n * sizeof *told.r);
    pending.n += n;
    told.n = 0;
}

void gr_events_running(const char *id, const char *tenant, const char *op, const char *device, double at)
{
    if (!__atomic_load_n(&nsubs, __ATOMIC_RELAXED)) /* no one listens: nothing kept */
        return;
    pthread_mutex_lock(&mu);
    if (told.n == told.cap && told.cap < RUNS_MAX) {
        int cap = told.cap ? 2 * told.cap : 256;
        struct run *grown = realloc(told.r, (size_t)cap * sizeof *grown);
        if (grown)
            told.r = grown, told.cap = cap;
    }
    if (told.n < told.cap) {
        struct run *r = &told.r[told.n++];
        snprintf(r->id, sizeof r->id, "%s", id);
        snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
        snprintf(r->op, sizeof r->op, "%s", op);
        snprintf(r->device, sizeof r->device, "%s", device);
        r->at = at;
    }
    pthread_mutex_unlock(&mu);
}

/* Wait on cv until ms from now have passed (kicked: until then, or a kick; mu held). */
static void sleep_for(long ms, int kickable)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    while (!stopping && !(kickable && kicked) && pthread_cond_timedwait(&cv, &mu, &t) == 0)
        ;
}

static void *events_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        /* a round's walks over the streams cost the same each second however many there are */
        sleep_for(GAP_MS + nsubs / SUBS_PER_MS, 0);
        sleep_for(ROUND_MS, 1);
        kicked = 0;
        if (stopping)
            break;
        open_ready();
        int64_t from = head, oldest, newest = 0;
        int any = subs != NULL;
        take_told(); /* before the read: each one's queued event was committed before it was told */
        pthread_mutex_unlock(&mu);
        struct evs got = {0};
        struct gr_err e = {0};
        /* without subscribers only the newest seq is read: where the next one starts */
        int rc = any ? read_page(from, &got) : gr_store_events_span(store, &oldest, &newest, &e);
        pthread_mutex_lock(&mu);
        if (rc == GR_OK && newest > head)
            head = newest;
        end_revoked();
        /* told while the read ran: those whose end it read go with that end, never after it;
         * the rest wait for the next round, their queued event perhaps past the read */
        if (rc == GR_OK)
            attach_running(&pending, &got), attach_running(&told, &got);
        if (rc == GR_OK && got.n) {
            for (struct sub *s = subs; s; s = s->next) /* up to date, or started past from */
                if (s->cursor >= from)
                    deliver(s, &got);
            head = got.ev[got.n - 1].seq;
            kicked |= got.n == PAGE;
        }
        tell_running(rc == GR_OK && got.n < PAGE);
        evs_free(&got);
        kicked |= catch_up();
        wake_ready();
    }
    open_ready(); /* stopping: each opens to be refused */
    wake_ready(); /* stopping: every suspended stream is resumed to end */
    pthread_mutex_unlock(&mu);
    return NULL;
}

int gr_events_start(struct gr_store *s, struct gr_err *e)
{
    int64_t oldest;
    store = s;
    if (gr_store_events_span(s, &oldest, &head, e) != GR_OK)
        return GR_EIO;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&mu);
    stopping = 0;
    int rc = pthread_create(&thread, NULL, events_main, NULL);
    started = rc == 0;
    pthread_mutex_unlock(&mu);
    if (rc) {
        pthread_cond_destroy(&cv);
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the events thread");
    }
    pthread_setname_np(thread, "gr-events");
    return GR_OK;
}

void gr_events_kick(void)
{
    pthread_mutex_lock(&mu);
    /* Without streams a commit needs no round: the round every ROUND_MS keeps head near the
     * newest, and each read of it numbers events on PostgreSQL, a transaction with an fsync of its
     * own (a round after every commit was a third of PostgreSQL's time for small jobs). The store's
     * writer commits past the stop: cv may be gone. */
    if (started && !stopping && (subs || opening)) {
        kicked = 1;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
}

void gr_events_stop(void)
{
    pthread_mutex_lock(&mu);
    int running = started && !stopping;
    stopping = 1;
    if (running)
        pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    if (!running)
        return;
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    started = 0;
    free(told.r), free(pending.r);
    told = pending = (struct runs){0};
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv); /* no kick signals it now: started is 0 */
}

/* MHD asks for the next bytes: pending text, the end once stopping, else the stream sleeps. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct sub *s = cls;
    (void)pos;
    ssize_t n = 0;
    pthread_mutex_lock(&mu);
    if (s->ended) {
        n = MHD_CONTENT_READER_END_WITH_ERROR; /* closed at once, nothing more sent */
    } else if (s->off < s->len) {
        n = (ssize_t)(s->len - s->off < max ? s->len - s->off : max);
        memcpy(buf, s->text + s->off, (size_t)n);
        s->off += (size_t)n;
        if (s->off == s->len)
            s->off = s->len = 0;
        s->last_ms = gr_mono_ms();
    } else if (stopping || s->oom) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        s->suspended = 1;
        MHD_suspend_connection(s->conn);
    }
    pthread_mutex_unlock(&mu);
    return n;
}

static void unsubscribe(void *cls)
{
    struct sub *s = cls;
    pthread_mutex_lock(&mu);
    for (struct sub **p = &subs; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            __atomic_fetch_sub(&nsubs, 1, __ATOMIC_RELAXED);
            break;
        }
    s->gone = 1;
    release(s);
    pthread_mutex_unlock(&mu);
}

/* The filters of the query into s: GR_OK, or the problem in e. */
static int filters(struct gr_req *r, struct sub *s, struct gr_err *e)
{
    const char *job = gr_query(r, "job"), *kind = gr_query(r, "kind"), *status = gr_query(r, "status");
    const char *beat = gr_query(r, "heartbeat");
    if (job && (strlen(job) >= sizeof s->job || strncmp(job, "j_", 2)))
        return gr_fail(e, GR_EINVAL, "job", "job must be a job id (j_...), not '%s'", job);
    snprintf(s->job, sizeof s->job, "%s", job ? job : "");
    if (kind && !(s->kinds = bit_of(kinds, 2, kind)))
        return gr_fail(e, GR_EINVAL, "kind", "kind must be job or dataset, not '%s'", kind);
    for (const char *p = status; p && *p;) {
        size_t n = strcspn(p, ",");
        char name[16] = "";
        unsigned bit = n < sizeof name ? (memcpy(name, p, n), bit_of(states, NSTATES, name)) : 0;
        if (!bit)
            return gr_fail(e, GR_EINVAL, "status",
                           "status must list queued, running, succeeded, failed, canceled, created or deleted, "
                           "comma-separated; not '%.*s'", (int)n, p);
        s->states |= bit;
        p += n + (p[n] == ',');
    }
    char *end;
    long long secs = beat ? strtoll(beat, &end, 10) : HEARTBEAT_S;
    if (beat && (*end || end == beat || secs < 1 || secs > 300))
        return gr_fail(e, GR_EINVAL, "heartbeat", "heartbeat must be 1 to 300 seconds, not '%s'", beat);
    s->heartbeat_ms = 1000.0 * (double)secs;
    return GR_OK;
}

/* The stream's opening: the reconnect delay and its position as an id (EventSource reconnects
 * after 2 s, sending the last id it saw), and where events were pruned past the id it resumes
 * from (after), a gap up to the oldest kept. */
static void say_start(struct sub *s, int gap, long long after, long long oldest)
{
    char text[160];
    add(s, text, (size_t)snprintf(text, sizeof text, "retry: 2000\nid: %lld\n\n", position(s)));
    if (gap)
        add(s, text, (size_t)snprintf(text, sizeof text, "id: %lld\nevent: gap\ndata: {\"after\":%lld,\"oldest\":%lld}\n\n",
                                      position(s), after, oldest));
}

/* A tenant's stream's start, in its own numbers: after its number seq when from, else after its
 * newest. Its events past that are read from the seq before the first of them; a resume from a
 * number whose successors were pruned starts at the first kept, after a gap said as in start_at. */
static int start_own(struct sub *s, int from, long long seq, struct gr_err *e)
{
    struct gr_events_own o;
    if (gr_store_events_own(store, s->tenant, from ? seq : -1, &o, e) != GR_OK)
        return GR_EIO;
    int64_t first = o.tseq ? o.tseq : o.last + 1; /* its first event kept past seq, or its next to come */
    s->cursor = from && o.tseq ? o.seq - 1 : o.newest;
    s->pos = from ? first - 1 : o.last;
    say_start(s, from && seq < first - 1, seq, first);
    return GR_OK;
}

/* Where the stream starts: after Last-Event-ID (or ?after=), else after the newest event. Its
 * opening says so: the reconnect delay and that position as an id, so that a stream which sees
 * no event before it drops still resumes from here. */
static int start_at(struct gr_req *r, struct sub *s, struct gr_err *e)
{
    const char *last = gr_header(r, "Last-Event-ID"), *after = gr_query(r, "after");
    const char *from = last && *last ? last : after;
    long long seq = -1;
    if (from) {
        char *end;
        seq = strtoll(from, &end, 10);
        if (*end || end == from || seq < 0)
            return gr_fail(e, GR_EINVAL, last && *last ? "Last-Event-ID" : "after",
                           "an event id is a number from 0 (the id: of an event), not '%s'", from);
    }
    if (s->tenant[0])
        return start_own(s, from != NULL, seq, e);
    int64_t oldest, newest;
    if (gr_store_events_span(store, &oldest, &newest, e) != GR_OK)
        return GR_EIO;
    /* now is the store's newest event: the thread's head may not have read the latest commits yet,
     * and a stream that starts now must not replay them */
    pthread_mutex_lock(&mu);
    s->cursor = newest > head ? newest : head;
    pthread_mutex_unlock(&mu);
    if (from) {
        if (seq < oldest - 1) /* pruned since: the gap is said below, and the stream goes on from the oldest */
            s->cursor = oldest - 1;
        else if (seq < s->cursor)
            s->cursor = seq;
    }
    say_start(s, from && seq < oldest - 1, seq, oldest);
    return GR_OK;
}

/* Subscribe s (ours) and answer with its stream; or with 503 while gpured stops. */
static void open_stream(struct gr_req *r, struct sub *s)
{
    struct gr_err e = {0};
    int rc = GR_OK;
    pthread_mutex_lock(&mu);
    if (stopping || !started)
        rc = gr_fail(&e, GR_EUNAVAIL, NULL, "gpured is stopping: reconnect to another replica or later");
    else if (s->oom)
        rc = gr_fail(&e, GR_ENOMEM, NULL, "out of memory for a subscriber");
    if (rc == GR_OK) {
        s->next = subs;
        subs = s;
        __atomic_fetch_add(&nsubs, 1, __ATOMIC_RELAXED);
        s->refs++; /* this handler's, until the response holds s (refs 1: unsubscribe's) */
        kicked = 1;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (rc != GR_OK) {
        sub_free(s);
        gr_respond_problem(r, &e);
        return;
    }
    const char *hdrs[] = {MHD_HTTP_HEADER_CACHE_CONTROL, "no-store", "X-Accel-Buffering", "no", NULL};
    gr_respond_reader(r, 200, "text/event-stream", MHD_SIZE_UNKNOWN, reader, s, unsubscribe, hdrs);
    pthread_mutex_lock(&mu);
    release(s); /* the response holds it now, or (not created) has freed it through unsubscribe */
    pthread_mutex_unlock(&mu);
}

static void open_parked(struct gr_req *r)
{
    struct sub *s = r->state;
    r->state = NULL;
    open_stream(r, s);
}

void gr_get_events(struct gr_req *r)
{
    struct gr_err e = {0};
    struct sub *s = calloc(1, sizeof *s);
    if (!s) {
        gr_respond_problem(r, &(struct gr_err){.code = GR_ENOMEM, .msg = "out of memory for a subscriber"});
        return;
    }
    s->conn = r->conn;
    s->refs = 1;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    const char *auth = gr_tokens_enabled() ? gr_header(r, MHD_HTTP_HEADER_AUTHORIZATION) : NULL;
    s->oom = auth && !(s->authorization = strdup(auth)); /* refused when it opens */
    s->last_ms = gr_mono_ms();
    snprintf(s->tenant, sizeof s->tenant, "%s", gr_scope(r) ? gr_scope(r) : "");
    int rc = filters(r, s, &e);
    if (rc == GR_OK)
        rc = start_at(r, s, &e);
    if (rc != GR_OK) {
        sub_free(s);
        gr_respond_problem(r, &e);
        return;
    }
    /* The start is the newest event stored, but a read shows a change only once its commit's
     * callbacks have run: the stream opens after that, so that a client which subscribes and
     * then reads sees every change before the start in its read. Waiting is the events
     * thread's (a commit of a big batch takes seconds), with this request parked. */
    s->told_by = gr_store_begun(store);
    pthread_mutex_lock(&mu);
    int park = started && !stopping && !gr_store_settled(store, s->told_by);
    if (park) {
        s->req = r;
        r->state = s;
        gr_suspend(r, open_parked); /* before the events thread can see it: no wake comes first */
        s->next = opening;
        opening = s;
        kicked = 1;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (!park)
        open_stream(r, s);
}
