/* events.h: GET /v1/events, the store's job and dataset events and the jobs' running events, as
 * Server-Sent Events. The handler runs on the request's HTTP thread; one thread of this module
 * (gr-events) reads new events and hands them to every subscriber. */
#ifndef GR_EVENTS_H
#define GR_EVENTS_H

#include "api/http.h"

/* Before the HTTP daemon starts: the newest event read, the thread started. GR_OK or GR_EIO. */
int gr_events_start(struct gr_store *store, struct gr_err *e);

/* The store committed something: new events may be there (any thread; cheap, coalesced). */
void gr_events_kick(void);

/* End every stream (each client gets its last events, then the end) and refuse new ones with
 * 503; the thread stops. Before the daemon stops: no stream stays suspended (each ends, and
 * gr_api_busy counts it until it has). */
void gr_events_stop(void);

/* Job id of tenant runs from at (gr_now's clock), on device: a running event for the streams
 * (gr_jobs_on_running; a worker, with the pipeline's lock held: quick, and nothing is kept while
 * no stream is open). */
void gr_events_running(const char *id, const char *tenant, const char *op, const char *device, double at);

void gr_get_events(struct gr_req *r);

#endif
