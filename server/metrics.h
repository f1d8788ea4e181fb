/* metrics.h: Prometheus counters, gauges and histograms of the service. Any thread records
 * (lock-free atomics, no allocation); GET /metrics renders a consistent-enough snapshot. */
#ifndef GR_METRICS_H
#define GR_METRICS_H

#include "common/gr.h"

#define GR_METRICS_DEVICES 17 /* the CPU and up to 16 GPUs, indexed like gr_jobs_backend() */
#define GR_METRICS_ROUTES 32  /* routing table entries; index -1 counts unmatched paths */

/* One answered (or abandoned: status 0) HTTP request that took ms. path is the route's static
 * pattern. */
void gr_metrics_http(int route, const char *path, const char *method, unsigned status, double ms);

/* One transaction of the store's writer: ms from begin to durable, for writes writes. */
void gr_metrics_store_commit(double ms, int writes);

/* A job reached final status (GR_SUCCEEDED, GR_FAILED, GR_CANCELED) on device dev. t: its
 * stage timings for the histograms, or NULL; bytes: its input, counted if it succeeded. */
void gr_metrics_job_end(int dev, int op, int status, const struct gr_timings *t, size_t bytes);

/* Gauges moved by the pipeline: jobs waiting in dev's queue, jobs running on dev. */
void gr_metrics_queued(int dev, int delta);
void gr_metrics_running(int dev, int delta);

/* Connections: one opened (+1) or closed (-1); one refused at accept (per_ip: over
 * --max-connections-per-ip, else over --max-connections); one cut for a body slower than
 * --min-body-rate, or for a request head not whole within --header-timeout. */
void gr_metrics_connection(int delta);
void gr_metrics_refused(int per_ip);
void gr_metrics_slow_body(void);
void gr_metrics_slow_head(void);

/* The text exposition (format 0.0.4) into *out (malloc'd, *len bytes); data_dir's disk is
 * measured for the free-bytes gauge. GR_OK or GR_ENOMEM. */
int gr_metrics_render(const char *data_dir, char **out, size_t *len, struct gr_err *e);

#endif
