/* connections.c: per-address connection counts in a hash table, and the open connections with
 * when each began to wait for a request head, under one mutex, taken by libmicrohttpd's threads
 * as they accept, serve and close connections and by the gr-heads thread that cuts heads past
 * --header-timeout. A connection's record rides in its socket context; an address's slot goes
 * with its last connection. */
#include "api/connections.h"

#include "server/log.h"
#include "server/metrics.h"

#include <netinet/in.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NBUCKETS 4096

struct addr {
    struct addr *next;
    unsigned char key[16]; /* IPv4 in the first 4 bytes, or IPv6 */
    int open;
};

/* An open connection: its address's slot, its socket, and since when it awaits a request head. */
struct conn {
    struct conn *prev, *next;
    struct addr *addr; /* NULL if memory ran out for the address */
    int fd;
    double head_since; /* gr_mono_ms() at its open or its last answer; 0 while a request is handled */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct addr *table[NBUCKETS];
static struct conn conns = {.prev = &conns, .next = &conns}; /* the open connections, a ring */
static int total, max_total = 1 << 30, max_per_ip = 1 << 30;
static _Atomic int stopping; /* gr_conn_stop: every new connection is closed at once */

/* the gr-heads thread */
static pthread_t heads;
static pthread_cond_t heads_cv = PTHREAD_COND_INITIALIZER;
static int heads_started, heads_stopping;
static double header_timeout_ms;

void gr_conn_stop(void) { atomic_store(&stopping, 1); }

void gr_conn_limits(int total_cap, int per_ip_cap)
{
    max_total = total_cap;
    max_per_ip = per_ip_cap;
}

static void key_of(const struct sockaddr *sa, unsigned char key[16])
{
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET)
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else if (sa && sa->sa_family == AF_INET6)
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/* Where the address's slot is linked: *result is it, or NULL (the end of its bucket); mu held. */
static struct addr **link_of(const unsigned char key[16])
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    struct addr **p = &table[h % NBUCKETS];
    while (*p && memcmp((*p)->key, key, 16))
        p = &(*p)->next;
    return p;
}

void gr_conn_log_limited(const char *why)
{
    static _Atomic long last_s;
    static _Atomic int since;
    long now = (long)(gr_mono_ms() / 1000);
    int n = atomic_fetch_add(&since, 1) + 1;
    long last = atomic_load(&last_s);
    if (now != last && atomic_compare_exchange_strong(&last_s, &last, now)) {
        atomic_fetch_sub(&since, n);
        gr_log(GR_LOG_WARN, "%s (%d such in the last second or more; counted in /metrics)", why, n);
    }
}

static void refused(int over_ip)
{
    gr_metrics_refused(over_ip);
    gr_conn_log_limited(over_ip ? "connection refused: its address holds --max-connections-per-ip already"
                                : "connection refused: --max-connections are open");
}

/* The fast refusal, before libmicrohttpd sets the connection up. Connections accepted at once on
 * other threads can all pass it: gr_conn_notify counts them and closes those past a cap. */
enum MHD_Result gr_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    if (atomic_load(&stopping))
        return MHD_NO;
    unsigned char key[16];
    key_of(addr, key);
    pthread_mutex_lock(&mu);
    const struct addr *a = *link_of(key);
    int over_total = total >= max_total, over_ip = a && a->open >= max_per_ip;
    pthread_mutex_unlock(&mu);
    if (!over_total && !over_ip)
        return MHD_YES;
    refused(over_ip);
    return MHD_NO;
}

void gr_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    unsigned char key[16];
    int over_ip = 0, over_total = 0;
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        key_of(ci ? ci->client_addr : NULL, key);
        struct addr **p = link_of(key);
        if (!*p && (*p = calloc(1, sizeof **p)))
            memcpy((*p)->key, key, 16);
        if (*p)
            over_ip = ++(*p)->open > max_per_ip;
        struct conn *k = calloc(1, sizeof *k);
        if (k) {
            *k = (struct conn){&conns, conns.next, *p, fd ? fd->connect_fd : -1, gr_mono_ms()};
            conns.next->prev = k;
            conns.next = k;
        } else if (*p) { /* no record: counted as an address's connection no more */
            (*p)->open--;
        }
        *socket_context = k;
        over_total = ++total > max_total;
    } else if (*socket_context) {
        struct conn *k = *socket_context;
        k->prev->next = k->next;
        k->next->prev = k->prev;
        struct addr *a = k->addr;
        if (a && --a->open == 0) { /* an address's slot lives while it has connections */
            *link_of(a->key) = a->next;
            free(a);
        }
        free(k);
        total--;
    } else {
        total--;
    }
    pthread_mutex_unlock(&mu);
    gr_metrics_connection(code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
    if (over_ip || over_total) { /* past a cap after all: libmicrohttpd reads the EOF and closes it */
        if (fd)
            shutdown(fd->connect_fd, SHUT_RDWR);
        refused(over_ip);
    }
}

/* Mark c's head as awaited since now (at) or whole (0). */
static void head_mark(struct MHD_Connection *c, double at)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock(&mu);
    if (ci && ci->socket_context)
        ((struct conn *)ci->socket_context)->head_since = at;
    pthread_mutex_unlock(&mu);
}

void gr_conn_head_done(struct MHD_Connection *c) { head_mark(c, 0); }
void gr_conn_head_awaited(struct MHD_Connection *c) { head_mark(c, gr_mono_ms()); }

/* Twice a second: connections whose head is awaited past the deadline are shut down, and
 * libmicrohttpd, reading the EOF, closes them. A trickled head counts as activity for its idle
 * timeout, so only this ends one. */
static void *heads_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!heads_stopping) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += 500000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&heads_cv, &mu, &t);
        double now = gr_mono_ms();
        int cut = 0;
        for (struct conn *k = conns.next; k != &conns; k = k->next)
            if (k->head_since > 0 && now - k->head_since > header_timeout_ms && k->fd >= 0) {
                shutdown(k->fd, SHUT_RDWR);
                k->head_since = 0; /* once */
                cut++;
            }
        pthread_mutex_unlock(&mu);
        while (cut-- > 0) {
            gr_metrics_slow_head();
            gr_conn_log_limited("a connection whose request head took longer than --header-timeout was cut off");
        }
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int gr_conn_deadlines_start(int64_t header_timeout_s)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&heads_cv, &ca);
    pthread_condattr_destroy(&ca);
    header_timeout_ms = 1000.0 * (double)header_timeout_s;
    heads_stopping = 0;
    heads_started = pthread_create(&heads, NULL, heads_main, NULL) == 0;
    if (heads_started)
        pthread_setname_np(heads, "gr-heads");
    return heads_started;
}

void gr_conn_deadlines_stop(void)
{
    if (!heads_started)
        return;
    pthread_mutex_lock(&mu);
    heads_stopping = 1;
    pthread_cond_signal(&heads_cv);
    pthread_mutex_unlock(&mu);
    pthread_join(heads, NULL);
    heads_started = 0;
}
