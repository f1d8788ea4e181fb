/* config.h: the server's settings from flags and GPURED_* environment variables.
 * Filled once by main before any thread starts; read-only afterwards. */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct gr_config {
    int port;
    char bind[64];
    char data_dir[512];
    int threads;        /* HTTP threads */
    int queue_capacity; /* per device queue */
    size_t max_body_bytes;
    size_t max_dataset_bytes; /* one upload to POST /v1/datasets */
    size_t digest_later_bytes; /* uploads this big (Content-Length) without a key: sha256 after the 201 */
    int log_level;
    int streams;             /* CUDA streams per GPU */
    int launch_group;        /* most small like jobs run as one launch (jobs.h); 1: each alone */
    int64_t gpu_cache_bytes; /* datasets kept on each GPU; -1: half the free memory (GR_CACHE_DEFAULT) */
    int64_t pin_bytes;       /* datasets' files kept page-locked on the host; -1: a quarter of RAM (GR_PIN_DEFAULT) */
    char store[4096];        /* "" : sqlite in data_dir; or a postgresql:// URL (it may hold a password) */
    char tokens_file[4096];  /* "" : no tokens (one tenant, "default") */
    int insecure_no_auth;    /* serve on a non-loopback address without tokens */
    int tenant_max_queued;   /* jobs queued or running per tenant; 0: queue_capacity */
    size_t tenant_max_bytes; /* datasets and kept results per tenant; 0: no limit */
    int64_t result_ttl_s;    /* finished jobs and their results are deleted after this; 0: never */
    int64_t idempotency_ttl_s;
    int store_writers;       /* PostgreSQL's writer connections (0: as the cores allow) */
    int64_t lease_s;         /* replicas on PostgreSQL: a job's holder keeps it this long per renewal */
    int offer_after_ms;      /* replicas: a job that would wait this long here is offered to the others; 0: never */
    int max_connections;        /* open at once, in all */
    int max_connections_per_ip; /* open at once from one client address */
    int64_t conn_timeout_s;     /* a connection that sends nothing for this long is closed */
    int64_t header_timeout_s;   /* and one whose request head is not whole this long after it was awaited */
    int min_body_rate;          /* bytes/s a body must average once conn_timeout_s have passed; 0: any */
};

/* 1 if the IPv4 address text is in 127.0.0.0/8. */
int gr_config_loopback(const char *bind);

/* The options of gpured serve (flag, variable, what it does) and their defaults, as --help shows. */
void gr_config_help(FILE *out);

/* Defaults, then environment, then flags (flags win). Returns 0, or prints the problem
 * (or --help) to stderr and returns 2 (bad usage) or 1 (help shown). */
int gr_config_load(struct gr_config *c, int argc, char **argv);

#endif
