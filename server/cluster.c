/* cluster.c: replicas on a shared store. The cluster thread owns the renewals and claims (on its
 * own store connection); gr_cluster_join and _stop run on the main thread. */
#include "server/cluster.h"

#include "common/id.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "server/job.h"
#include "server/jobs.h"
#include "server/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct gr_store *store;
static int64_t lease;
/* A new job is offered to any replica rather than queued here once it would wait this long (ms)
 * for its device (--offer-after; 0: never). Its default, 5, is about what the trip through the
 * store costs an offered job (its insert, a claim, its end told back): small jobs on a fast GPU
 * never wait that long, and for them the store is the cost. */
static int offer_after;
static char replica[96]; /* this one's id */
static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER; /* held over a claim; leaving waits for it */
static pthread_cond_t cv; /* on the monotonic clock: a step of the wall clock must not stall renewals */
static int started, stopping, leaving;

/* Replicas started one after another get distinct ids while fewer than this many started since
 * the oldest one still running (id.h). */
#define ID_STRIDE 32

/* Claimed while this replica's queues hold fewer: the others take the rest, so the jobs of a
 * replica gone, and jobs offered, spread over the free devices rather than queue behind one. */
#define CLAIM_AHEAD 8
/* Jobs offered to this replica first (its GPU caches their dataset) are claimed while its queues
 * hold fewer than this, so a replica's cached datasets stay its work unless its queue is this
 * much longer than a free one's. */
#define CLAIM_PREFERRED 32
/* The most recently used datasets of each GPU a replica announces (where affinity looks). */
#define ANNOUNCED_DATASETS 256

/* The kinds of job (GR_JOBS_*) told offered since the last claim of them, and whether any to this
 * replica first (mu). */
static int offers, mine;
static unsigned told; /* offers told so far: a new one ends the cluster thread's wait (mu) */

/* Which replica's GPU caches which dataset, as announced (mu); this one's among them. */
struct home {
    char dataset[24];
    char replica[96];
};
static struct home *homes;
static int nhomes, others; /* and how many other replicas are live: with none, nothing is offered */
/* The other live replica with the most free dataset cache on one GPU, as announced (mu): a job
 * offered for load goes there when its dataset fits, so that a claim evicts no dataset in use. */
static char roomiest[96];
static long long room;

int gr_cluster_join(struct gr_store *s, int64_t lease_s, int offer_after_ms, struct gr_err *e)
{
    store = s;
    lease = lease_s;
    offer_after = offer_after_ms;
    if (!gr_store_shared(s))
        return GR_OK;
    pthread_condattr_t ca; /* before the store's listener may signal it */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    /* host-pid-random: readable in the store's owner column, never reused by a restart */
    char host[64] = "gpured";
    gethostname(host, sizeof host - 1);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned r = (unsigned)t.tv_nsec ^ (unsigned)getpid() * 2654435761u;
    snprintf(replica, sizeof replica, "%s-%d-%04x", host, (int)getpid(), r & 0xffff);
    gr_store_join(s, replica, (double)lease_s);
    gr_jobs_set_replica(replica);
    long long n = 0;
    if (gr_store_slot(s, ID_STRIDE, &n, e) != GR_OK) /* without one, its ids could meet another's */
        return gr_fail(e, e->code, NULL, "replica %s: no id residue from the store: %s", replica, e->msg);
    gr_id_space(ID_STRIDE, (unsigned)n);
    gr_log(GR_LOG_INFO, "replica %s on a shared store: it holds its jobs %lld s at a time; its ids are %lld mod %d",
           replica, (long long)lease_s, n, ID_STRIDE);
    return GR_OK;
}

json_t *gr_cluster_devices(void)
{
    json_t *gpus = json_array();
    for (int i = 1; i < gr_jobs_nbackends(); i++) {
        const struct gr_backend *b = gr_jobs_backend(i);
        struct gr_cache_stats cs = {0};
        if (b->cache_stats)
            b->cache_stats((struct gr_backend *)b, &cs);
        static char ids[ANNOUNCED_DATASETS][24]; /* announce and GET /v1/devices may run at once: */
        static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER; /* too big for a stack */
        json_t *cached = json_array();
        pthread_mutex_lock(&ids_mu);
        int n = b->cached ? b->cached((struct gr_backend *)b, ids, ANNOUNCED_DATASETS) : 0;
        for (int k = 0; k < n; k++)
            json_array_append_new(cached, json_string(ids[k]));
        pthread_mutex_unlock(&ids_mu);
        json_array_append_new(
            gpus, json_pack("{s:s, s:s, s:I, s:i, s:i, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}}", "id", b->name, "name",
                            b->info.name, "memory_bytes", (json_int_t)b->info.memory_bytes, "sms", b->info.sms,
                            "streams", b->info.streams, "ceiling_gbps",
                            b->info.ceiling_gbps > 0 ? json_real(b->info.ceiling_gbps) : json_null(), "h2d_gbps",
                            b->info.h2d_gbps > 0 ? json_real(b->info.h2d_gbps) : json_null(), "cache", "cap_bytes",
                            (json_int_t)b->info.cache_bytes, "bytes", (json_int_t)cs.bytes, "entries",
                            (json_int_t)cs.entries, "hits", (json_int_t)cs.hits, "misses", (json_int_t)cs.misses,
                            "pinned_bytes", (json_int_t)cs.pinned_bytes, "pinned_hits", (json_int_t)cs.pinned_hits,
                            "datasets", cached));
    }
    const struct gr_backend *cpu = gr_jobs_backend(0);
    json_t *o = json_pack("{s:o, s:{s:s, s:s, s:i, s:I}, s:{s:s, s:s, s:s}}", "gpus", gpus, "cpu", "id", cpu->name,
                          "name", cpu->info.name, "threads", cpu->info.sms, "memory_bytes",
                          (json_int_t)cpu->info.memory_bytes, "build", "version", gr_version, "commit", gr_commit,
                          "cuda", gr_cuda_version);
    if (o && store && gr_store_shared(store))
        json_object_set_new(o, "replica", json_string(replica));
    return o;
}

/* Tell the others this replica lives, and what it offers, until its lease runs out. */
static void announce(void)
{
    json_t *o = gr_cluster_devices();
    char *doc = o ? json_dumps(o, JSON_COMPACT) : NULL;
    struct gr_err e = {0};
    if (doc && gr_store_announce(store, doc, &e) != GR_OK)
        gr_log(GR_LOG_WARN, "announcing replica %s: %s", replica, e.msg);
    free(doc);
    json_decref(o);
}

static int by_dataset(const void *a, const void *b)
{
    return strcmp(((const struct home *)a)->dataset, ((const struct home *)b)->dataset);
}

struct homes {
    struct home *v;
    int n, cap, others;
    char roomiest[96];
    long long room;
};

/* Each dataset a live replica's GPU caches, from its announcement (a GR_SQL_REPLICAS row). */
static void home_row(void *ctx, const char *id, const char *doc)
{
    struct homes *h = ctx;
    h->others += strcmp(id, replica) != 0;
    json_t *o = json_loads(doc, 0, NULL), *gpu, *ds;
    size_t i, k;
    json_array_foreach(json_object_get(o, "gpus"), i, gpu)
    {
        json_t *c = json_object_get(gpu, "cache");
        long long spare =
            json_integer_value(json_object_get(c, "cap_bytes")) - json_integer_value(json_object_get(c, "bytes"));
        if (strcmp(id, replica) && strlen(id) < sizeof h->roomiest && spare > h->room) {
            h->room = spare;
            memcpy(h->roomiest, id, strlen(id) + 1);
        }
        json_array_foreach(json_object_get(c, "datasets"), k, ds)
        {
            if (!json_is_string(ds) || strlen(json_string_value(ds)) >= 24 || strlen(id) >= 96)
                continue;
            if (h->n == h->cap) {
                struct home *v = realloc(h->v, sizeof *v * (size_t)(h->cap = h->cap ? 2 * h->cap : 64));
                if (!v)
                    break;
                h->v = v;
            }
            snprintf(h->v[h->n].dataset, sizeof h->v[0].dataset, "%s", json_string_value(ds));
            snprintf(h->v[h->n++].replica, sizeof h->v[0].replica, "%s", id);
        }
    }
    json_decref(o);
}

/* Learn anew where datasets are cached (after this replica announced its own). */
static void find_homes(void)
{
    struct homes h = {0};
    struct gr_err e = {0};
    if (gr_store_replicas(store, home_row, &h, &e) != GR_OK) {
        gr_log(GR_LOG_WARN, "reading the replicas' caches: %s", e.msg);
        free(h.v);
        return;
    }
    if (h.n) /* qsort wants an array, even of none */
        qsort(h.v, (size_t)h.n, sizeof *h.v, by_dataset);
    pthread_mutex_lock(&mu);
    free(homes);
    homes = h.v;
    nhomes = h.n;
    others = h.others;
    room = h.room;
    memcpy(roomiest, h.roomiest, sizeof roomiest);
    pthread_mutex_unlock(&mu);
}

/* A job on a dataset cached elsewhere, none of this replica's GPUs caching it, is offered to the
 * replica that does. A job that would wait here past --offer-after is offered for load: to another
 * replica caching its dataset, or else to one with room for it; one on a dataset cached here and
 * nowhere else stays, since a claim elsewhere would evict a dataset in use there and the caches
 * would take turns missing. Other jobs are offered to any replica. */
void gr_cluster_place(struct gr_job *j)
{
    if (!store || !gr_store_shared(store)) /* SQLite's one gpured: no lock taken per job */
        return;
    char to[sizeof j->offer] = "";
    int cached_here = 0, on_dataset = j->dataset[0] && strcmp(j->device, "cpu");
    pthread_mutex_lock(&mu);
    int here = !started || leaving || !others;
    if (!here && on_dataset) {
        struct home key, *h;
        snprintf(key.dataset, sizeof key.dataset, "%s", j->dataset);
        h = bsearch(&key, homes, (size_t)nhomes, sizeof *homes, by_dataset);
        while (h && h > homes && !by_dataset(h - 1, &key))
            h--; /* the first of its homes */
        for (; h && h < homes + nhomes && !by_dataset(h, &key); h++)
            if (!strcmp(h->replica, replica))
                cached_here = 1;
            else if (!to[0])
                memcpy(to, h->replica, sizeof to);
    }
    pthread_mutex_unlock(&mu);
    if (!here && to[0] && !cached_here) {
        j->offered = 1;
        memcpy(j->offer, to, sizeof j->offer);
        return;
    }
    if (here || !offer_after || gr_jobs_backlog_ms(j->backend) < offer_after)
        return;
    pthread_mutex_lock(&mu);
    if (on_dataset && !to[0] && room >= (long long)j->input_bytes)
        memcpy(to, roomiest, sizeof to);
    pthread_mutex_unlock(&mu);
    if (cached_here && !to[0])
        return;
    j->offered = 1;
    memcpy(j->offer, to, sizeof j->offer);
}

void gr_cluster_offered(void *ctx, const char *to)
{
    if (to[0] && strcmp(to, replica))
        return;
    pthread_mutex_lock(&mu);
    offers = GR_JOBS_ANY;
    mine |= to[0] != '\0';
    told++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

/* What the store has this replica holding: every id (held), and those it does not have (strays:
 * a claim that committed but whose answer the connection lost), up to 256 a round. */
struct strays {
    int n, nheld, cap, oom;
    char id[256][24];
    char (*held)[24];
};

static void stray(void *ctx, const char *id, const char *doc)
{
    struct strays *s = ctx;
    if (s->nheld == s->cap) {
        char(*v)[24] = realloc(s->held, sizeof *v * (size_t)(s->cap = s->cap ? 2 * s->cap : 256));
        s->oom |= !v;
        s->held = v ? v : s->held;
    }
    if (s->nheld < s->cap)
        snprintf(s->held[s->nheld++], sizeof s->held[0], "%s", id);
    struct gr_job *j = gr_jobs_find(id, NULL);
    if (j)
        gr_job_unref(j);
    else if (s->n < 256)
        snprintf(s->id[s->n++], sizeof s->id[0], "%s", id);
}

/* Both ways. Strays go, so that a replica claims them (this one too): held here in the store
 * only, they would be renewed and never run. Jobs queued here that the store no longer has this
 * replica holding are dropped: another replica claimed them while this one's lease had run out
 * (a pause), and runs them. 1 if the store was read. */
static int reconcile(void)
{
    struct strays *s = calloc(1, sizeof *s);
    struct gr_err e = {0};
    double since = gr_mono_ms(); /* jobs stored before this are in what the store says */
    int read = s && gr_store_held(store, stray, s, &e) == GR_OK && !s->oom;
    if (read && s->n && gr_store_let_go(store, s->id, s->n, &e) == GR_OK)
        gr_log(GR_LOG_WARN, "%d job(s) the store had this replica holding, unknown here, let go to be claimed", s->n);
    int dropped = read ? gr_jobs_drop_unheld(s->held, s->nheld, since) : 0;
    if (dropped)
        gr_log(GR_LOG_WARN, "%d queued job(s) another replica claimed while this one's lease had run out: not run here",
               dropped);
    if (e.msg[0])
        gr_log(GR_LOG_WARN, "checking this replica's jobs against the store: %s", e.msg);
    if (s)
        free(s->held);
    free(s);
    return read;
}

static void *cluster_main(void *arg)
{
    double renew_every = (double)lease * 1000 / 3, renewed = gr_mono_ms();
    double claim_every = renew_every < 1000 ? renew_every : 1000, looked = 0;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        pthread_mutex_unlock(&mu);
        struct gr_err e = {0};
        if (gr_mono_ms() - renewed >= renew_every) {
            double began = gr_mono_ms();
            int ok = gr_store_renew(store, &e) == GR_OK;
            if (!ok)
                gr_log(GR_LOG_WARN, "renewing this replica's leases: %s", e.msg);
            else
                renewed = gr_mono_ms();
            announce();
            find_homes();
            pthread_mutex_lock(&claim_mu); /* no claim of this thread's own in between */
            ok = reconcile() && ok;
            pthread_mutex_unlock(&claim_mu);
            if (ok) /* what is still held here is so until a lease from the renewal's start */
                gr_jobs_hold_until(began + (double)lease * 1000);
        }
        pthread_mutex_lock(&mu);
        int was_mine = mine, was = offers, want = (mine ? CLAIM_PREFERRED : CLAIM_AHEAD) - gr_jobs_queued();
        /* offering for load, a replica takes others' work only of the kinds its devices would
         * start sooner than that: else what it claimed would wait here, and a replica whose CPU
         * is busy would claim back the CPU jobs it had just offered because a GPU is free */
        int ready = mine || !offer_after ? GR_JOBS_ANY : gr_jobs_starting_within(offer_after);
        /* told of offers, it looks for the kinds told, and for every free kind (a replica gone
         * leaves jobs of any) as often as with none told */
        int every = gr_mono_ms() - looked >= claim_every;
        int kinds = mine || !was || every ? ready : ready & was;
        if (!kinds)
            want = 0;
        if (want > 0) /* told again while the claim runs, if more come */
            offers = mine = 0;
        pthread_mutex_unlock(&mu);
        if (want > 0 && kinds == ready)
            looked = gr_mono_ms();
        pthread_mutex_lock(&claim_mu);
        int n = want > 0 && !leaving ? gr_jobs_recover(want, kinds, &e) : 0;
        pthread_mutex_unlock(&claim_mu);
        if (n < 0)
            gr_log(GR_LOG_WARN, "claiming offered jobs and those of replicas gone: %s", e.msg);
        else if (n)
            gr_log(GR_LOG_INFO, "claimed %d job(s), offered or left by a replica gone", n);
        pthread_mutex_lock(&mu);
        /* perhaps more to claim once the queues are shorter, or of the kinds not looked for */
        if (want > 0)
            offers |= n == want ? was | kinds : was & ~kinds;
        if (want > 0 && n == want)
            mine |= was_mine;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* while offers wait, look at the queues often (no store round trip unless they are short) */
        long ns = ts.tv_nsec + (long)((offers ? 5 : claim_every) * 1e6);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        for (unsigned seen = told; !stopping && told == seen && pthread_cond_timedwait(&cv, &mu, &ts) == 0;)
            ;
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int gr_cluster_start(struct gr_err *e)
{
    if (!store || !gr_store_shared(store))
        return GR_OK;
    stopping = leaving = 0;
    gr_jobs_hold_until(gr_mono_ms() + (double)lease * 1000); /* every job held now has at least that */
    announce(); /* listed by GET /v1/devices everywhere from now on */
    if (pthread_create(&thread, NULL, cluster_main, NULL))
        return gr_fail(e, GR_EINTERNAL, NULL, "cannot start the cluster thread");
    pthread_setname_np(thread, "gr-cluster");
    pthread_mutex_lock(&mu);
    started = 1;
    pthread_mutex_unlock(&mu);
    return GR_OK;
}

void gr_cluster_leave(void)
{
    if (!started)
        return;
    pthread_mutex_lock(&claim_mu);
    pthread_mutex_lock(&mu);
    leaving = 1; /* after the claim under way, if any: what it took is let go below too */
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&claim_mu);
    struct gr_err e = {0};
    char(*running)[24]; /* the store has them as queued: they stay this replica's */
    int n = gr_jobs_taken(&running);
    int rc = gr_store_release(store, running, n, &e);
    free(running);
    if (rc != GR_OK)
        gr_log(GR_LOG_WARN, "handing this replica's queued jobs back: %s (they wait for the lease to run out)", e.msg);
    else
        gr_log(GR_LOG_INFO, "this replica's queued jobs are handed back to the others");
}

void gr_cluster_stop(void)
{
    if (!started)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    started = 0;
    free(homes);
    homes = NULL;
    nhomes = 0;
    pthread_mutex_unlock(&mu);
    struct gr_err e = {0};
    if (gr_store_leave(store, &e) != GR_OK) /* else it drops out of the list once its lease runs out */
        gr_log(GR_LOG_WARN, "leaving the replicas' list: %s", e.msg);
}
