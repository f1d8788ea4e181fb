/* config.c: flags and environment into struct gr_config; runs on the main thread at start-up. */
#include "server/config.h"

#include "server/jobs.h"  /* GR_JOBS_GROUP_MAX */
#include "db/store.h" /* GR_STORE_WRITERS_MAX */
#include "server/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_INT, K_SIZE, K_I64, K_STR, K_LEVEL, K_FLAG, K_DURATION };

/* One table drives flags, environment variables and --help. */
static const struct opt {
    const char *flag, *env;
    enum kind kind;
    size_t off, len;
    long long min, max;
    const char *help;
} opts[] = {
    {"--port", "GPURED_PORT", K_INT, offsetof(struct gr_config, port), 0, 0, 65535,
     "TCP port (0 picks a free one and logs it)"},
    {"--bind", "GPURED_BIND", K_STR, offsetof(struct gr_config, bind), sizeof((struct gr_config *)0)->bind, 0, 0,
     "IPv4 address to listen on"},
    {"--data-dir", "GPURED_DATA_DIR", K_STR, offsetof(struct gr_config, data_dir),
     sizeof((struct gr_config *)0)->data_dir, 0, 0, "folder for gpured.db (created if missing)"},
    {"--threads", "GPURED_THREADS", K_INT, offsetof(struct gr_config, threads), 0, 1, 256, "HTTP threads"},
    {"--queue-capacity", "GPURED_QUEUE_CAPACITY", K_INT, offsetof(struct gr_config, queue_capacity), 0, 1,
     10000000, "jobs waiting per device before POST answers 429"},
    {"--max-body-bytes", "GPURED_MAX_BODY_BYTES", K_SIZE, offsetof(struct gr_config, max_body_bytes), 0, 64,
     (long long)1 << 40, "largest request body accepted (413 above)"},
    {"--max-dataset-bytes", "GPURED_MAX_DATASET_BYTES", K_SIZE, offsetof(struct gr_config, max_dataset_bytes), 0, 64,
     (long long)1 << 46, "largest dataset upload accepted (413 above)"},
    {"--digest-later-bytes", "GPURED_DIGEST_LATER_BYTES", K_SIZE, offsetof(struct gr_config, digest_later_bytes), 0,
     0, (long long)1 << 50, "uploads at least this big without an Idempotency-Key are answered once durable, "
     "their sha256 stored after (0: never)"},
    {"--log-level", "GPURED_LOG_LEVEL", K_LEVEL, offsetof(struct gr_config, log_level), 0, 0, 0,
     "debug, info, warn or error"},
    {"--streams", "GPURED_STREAMS", K_INT, offsetof(struct gr_config, streams), 0, 1, 16,
     "CUDA streams per GPU (each runs one job at a time)"},
    {"--launch-group", "GPURED_LAUNCH_GROUP", K_INT, offsetof(struct gr_config, launch_group), 0, 1, GR_JOBS_GROUP_MAX,
     "small like jobs queued together run as one launch of at most this many (1: each alone)"},
    {"--gpu-cache-bytes", "GPURED_GPU_CACHE_BYTES", K_I64, offsetof(struct gr_config, gpu_cache_bytes), 0, -1,
     (long long)1 << 46, "datasets kept on each GPU (LRU); 0 none, -1 half the memory free at start"},
    {"--pinned-bytes", "GPURED_PINNED_BYTES", K_I64, offsetof(struct gr_config, pin_bytes), 0, -1, (long long)1 << 46,
     "datasets' files kept page-locked on the host for DMA from their second read (LRU); 0 none, -1 a quarter of "
     "the memory"},
    {"--store", "GPURED_STORE", K_STR, offsetof(struct gr_config, store), sizeof((struct gr_config *)0)->store, 0, 0,
     "sqlite:DIR (default: the data dir's gpured.db) or postgresql://USER@HOST/DB (PG* variables and "
     "sslmode work as in psql)"},
    {"--store-writers", "GPURED_STORE_WRITERS", K_INT, offsetof(struct gr_config, store_writers), 0, 0,
     GR_STORE_WRITERS_MAX, "PostgreSQL: connections that commit side by side (0: one for each four cores, up to 4)"},
    {"--tokens-file", "GPURED_TOKENS_FILE", K_STR, offsetof(struct gr_config, tokens_file),
     sizeof((struct gr_config *)0)->tokens_file, 0, 0, "bearer tokens, one 'TENANT TOKEN [admin]' per line"},
    {"--insecure-no-auth", "GPURED_INSECURE_NO_AUTH", K_FLAG, offsetof(struct gr_config, insecure_no_auth), 0, 0, 1,
     "serve on a non-loopback address without tokens"},
    {"--tenant-max-queued", "GPURED_TENANT_MAX_QUEUED", K_INT, offsetof(struct gr_config, tenant_max_queued), 0, 0,
     10000000, "jobs one tenant may have queued or running (0: --queue-capacity)"},
    {"--tenant-max-bytes", "GPURED_TENANT_MAX_BYTES", K_SIZE, offsetof(struct gr_config, tenant_max_bytes), 0, 0,
     (long long)1 << 50, "bytes of datasets and kept results per tenant (0: no limit)"},
    {"--lease", "GPURED_LEASE", K_DURATION, offsetof(struct gr_config, lease_s), 0, 1, 3600,
     "replicas on PostgreSQL: a replica's hold on its jobs, renewed every third of it; others run them "
     "once it runs out"},
    {"--offer-after", "GPURED_OFFER_AFTER", K_INT, offsetof(struct gr_config, offer_after_ms), 0, 0, 3600000,
     "replicas on PostgreSQL: a new job that would wait this many ms for its device here is offered to the "
     "others (0: never)"},
    {"--result-ttl", "GPURED_RESULT_TTL", K_DURATION, offsetof(struct gr_config, result_ttl_s), 0, 0,
     (long long)1 << 40, "delete finished jobs and their results after this (e.g. 7d; 0: never)"},
    {"--max-connections", "GPURED_MAX_CONNECTIONS", K_INT, offsetof(struct gr_config, max_connections), 0, 16, 1000000,
     "client connections open at once (the file limit is raised to fit, or this fitted to it)"},
    {"--max-connections-per-ip", "GPURED_MAX_CONNECTIONS_PER_IP", K_INT,
     offsetof(struct gr_config, max_connections_per_ip), 0, 1, 1000000, "client connections open at once from one address"},
    {"--conn-timeout", "GPURED_CONN_TIMEOUT", K_DURATION, offsetof(struct gr_config, conn_timeout_s), 0, 1, 86400,
     "close a connection that sends nothing for this long (waiting requests excepted)"},
    {"--header-timeout", "GPURED_HEADER_TIMEOUT", K_DURATION, offsetof(struct gr_config, header_timeout_s), 0, 1,
     86400, "close a connection whose request head is not complete this long after it opened or its last answer"},
    {"--min-body-rate", "GPURED_MIN_BODY_RATE", K_INT, offsetof(struct gr_config, min_body_rate), 0, 0, 1 << 30,
     "bytes/s a request body must average after --conn-timeout (0: no minimum)"},
    {"--idempotency-ttl", "GPURED_IDEMPOTENCY_TTL", K_DURATION, offsetof(struct gr_config, idempotency_ttl_s), 0, 1,
     (long long)1 << 40, "how long an Idempotency-Key is remembered"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static int set(struct gr_config *c, const struct opt *o, const char *val, const char *from)
{
    char *p = (char *)c + o->off;
    if (o->kind == K_STR) {
        if (strlen(val) >= o->len) {
            fprintf(stderr, "gpured: %s is too long (at most %zu characters)\n", from, o->len - 1);
            return 2;
        }
        memcpy(p, val, strlen(val) + 1);
        return 0;
    }
    if (o->kind == K_LEVEL) {
        int l = gr_log_level_parse(val);
        if (l < 0) {
            fprintf(stderr, "gpured: %s must be debug, info, warn or error, not '%s'\n", from, val);
            return 2;
        }
        *(int *)p = l;
        return 0;
    }
    if (o->kind == K_FLAG) {
        int on = !strcmp(val, "1") || !strcmp(val, "true"), off = !strcmp(val, "0") || !strcmp(val, "false");
        if (!on && !off) {
            fprintf(stderr, "gpured: %s must be 1 or 0 (true or false), not '%s'\n", from, val);
            return 2;
        }
        *(int *)p = on;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    /* a duration may carry one unit: s, m, h or d */
    static const struct { char unit; long long s; } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
    for (size_t u = 0; o->kind == K_DURATION && end != val && *end && !end[1] && u < 4; u++)
        if (*end == units[u].unit) {
            end++;
            v = __builtin_mul_overflow(v, units[u].s, &v) ? o->max + 1 : v;
        }
    if (errno || end == val || *end || v < o->min || v > o->max) {
        fprintf(stderr, "gpured: %s must be %s from %lld to %lld, not '%s'\n", from,
                o->kind == K_DURATION ? "seconds (or with a unit: 90m, 12h, 7d)" : "an integer", o->min, o->max, val);
        return 2;
    }
    if (o->kind == K_SIZE)
        *(size_t *)p = (size_t)v;
    else if (o->kind == K_I64 || o->kind == K_DURATION)
        *(int64_t *)p = v;
    else
        *(int *)p = (int)v;
    return 0;
}

static void usage(FILE *out, const struct gr_config *d)
{
    for (size_t i = 0; i < NOPTS; i++)
        fprintf(out, "  %-20s %-25s %s\n", opts[i].flag, opts[i].env, opts[i].help);
    fprintf(out, "\ndefaults: --port %d --bind %s --data-dir %s --threads %d --queue-capacity %d "
                    "--max-body-bytes %zu --max-dataset-bytes %zu --digest-later-bytes %zu --log-level info\n"
                    "          --streams %d --launch-group %d --gpu-cache-bytes %lld --pinned-bytes %lld",
            d->port, d->bind, d->data_dir, d->threads, d->queue_capacity, d->max_body_bytes, d->max_dataset_bytes,
            d->digest_later_bytes, d->streams, d->launch_group, (long long)d->gpu_cache_bytes, (long long)d->pin_bytes);
    fprintf(out, " --tokens-file '' --tenant-max-queued 0 --tenant-max-bytes 0 --result-ttl 0 "
                    "--idempotency-ttl %llds\n",
            (long long)d->idempotency_ttl_s);
}

int gr_config_loopback(const char *bind) { return !strncmp(bind, "127.", 4); }

static void defaults(struct gr_config *c)
{
    *c = (struct gr_config){.port = 8080,
                            .bind = "127.0.0.1",
                            .data_dir = "./gpured-data",
                            .threads = 4,
                            .queue_capacity = 4096,
                            .max_body_bytes = 8u << 20,
                            .max_dataset_bytes = (size_t)4 << 30,
                            .digest_later_bytes = (size_t)64 << 20,
                            .log_level = GR_LOG_INFO,
                            .streams = 4,
                            .launch_group = GR_JOBS_GROUP_MAX,
                            .gpu_cache_bytes = -1,
                            .pin_bytes = -1,
                            .idempotency_ttl_s = 86400,
                            .lease_s = 10,
                            .offer_after_ms = 5,
                            .max_connections = 10000,
                            .max_connections_per_ip = 256,
                            .conn_timeout_s = 30,
                            .header_timeout_s = 20,
                            .min_body_rate = 1024};
}

void gr_config_help(FILE *out)
{
    struct gr_config d;
    defaults(&d);
    usage(out, &d);
}

int gr_config_load(struct gr_config *c, int argc, char **argv)
{
    defaults(c);
    for (size_t i = 0; i < NOPTS; i++) {
        const char *v = getenv(opts[i].env);
        if (v && *v && set(c, &opts[i], v, opts[i].env))
            return 2;
    }
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            fprintf(stderr, "usage: gpured serve [options]\n\n");
            gr_config_help(stderr);
            return 1;
        }
        const struct opt *o = NULL;
        const char *val = NULL;
        for (size_t i = 0; i < NOPTS && !o; i++) {
            size_t n = strlen(opts[i].flag);
            if (!strncmp(argv[a], opts[i].flag, n) && (argv[a][n] == '=' || !argv[a][n])) {
                o = &opts[i];
                val = argv[a][n] == '=' ? argv[a] + n + 1 : NULL;
            }
        }
        if (!o) {
            fprintf(stderr, "gpured: unknown option '%s' (see gpured serve --help)\n", argv[a]);
            return 2;
        }
        if (!val && o->kind == K_FLAG) {
            val = "1";
        } else if (!val) {
            if (a + 1 >= argc) {
                fprintf(stderr, "gpured: %s needs a value\n", o->flag);
                return 2;
            }
            val = argv[++a];
        }
        if (set(c, o, val, o->flag))
            return 2;
    }
    if (!c->tenant_max_queued)
        c->tenant_max_queued = c->queue_capacity;
    return 0;
}
