/* connections.c: per-address connection counts in a hash table under one mutex, taken by
 * libmicrohttpd's threads as they accept and close connections; a connection's slot rides in its
 * socket context, and a slot goes with its address's last connection. */
#include "api/connections.h"

#include "server/log.h"
#include "server/metrics.h"

#include <netinet/in.h>
#include <pthread.h>
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

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct addr *table[NBUCKETS];
static int total, max_total = 1 << 30, max_per_ip = 1 << 30;
static _Atomic int stopping; /* gr_conn_stop: every new connection is closed at once */

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
    pthread_mutex_lock(&mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        key_of(ci ? ci->client_addr : NULL, key);
        struct addr **p = link_of(key);
        if (!*p && (*p = calloc(1, sizeof **p)))
            memcpy((*p)->key, key, 16);
        if (*p)
            over_ip = ++(*p)->open > max_per_ip;
        *socket_context = *p;
        over_total = ++total > max_total;
    } else if (*socket_context) { /* an address's slot lives while it has connections */
        struct addr *a = *socket_context, **p = link_of(a->key);
        if (--a->open == 0) {
            *p = a->next;
            free(a);
        }
        total--;
    } else {
        total--;
    }
    pthread_mutex_unlock(&mu);
    gr_metrics_connection(code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
    if (over_ip || over_total) { /* past a cap after all: libmicrohttpd reads the EOF and closes it */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            shutdown(ci->connect_fd, SHUT_RDWR);
        refused(over_ip);
    }
}
