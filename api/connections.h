/* connections.h: caps on open client connections, in all and per client address, applied as
 * libmicrohttpd accepts each one (any of its threads), with refusals counted and logged at most
 * once a second. */
#ifndef GR_CONNECTIONS_H
#define GR_CONNECTIONS_H

#include <microhttpd.h>
#include <stdint.h>

/* The caps (set before the daemon starts). */
void gr_conn_limits(int max_total, int max_per_ip);

/* From now on every new connection is closed at once (shutdown: http.c's gr_api_quiesce). */
void gr_conn_stop(void);

/* MHD_AcceptPolicyCallback: MHD_NO for a connection over a cap, or any once stopping. */
enum MHD_Result gr_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);

/* MHD_NotifyConnectionCallback: counts connections as they start and close. */
void gr_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);

/* Request heads: a connection awaits one from its open (gr_conn_notify) and from each answer
 * (head_awaited), until the head is whole (head_done); awaited longer than --header-timeout, it
 * is cut off by the gr-heads thread, which deadlines_start starts (0 if it could not) and
 * deadlines_stop ends. */
void gr_conn_head_done(struct MHD_Connection *c);
void gr_conn_head_awaited(struct MHD_Connection *c);
int gr_conn_deadlines_start(int64_t header_timeout_s);
void gr_conn_deadlines_stop(void);

/* A once-a-second log of what was refused or cut since the last one (why: what happened). */
void gr_conn_log_limited(const char *why);

#endif
