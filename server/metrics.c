/* metrics.c: the service's Prometheus metrics as fixed arrays of relaxed atomics, so the hot
 * paths (every HTTP answer, every job end) never lock or allocate; any thread records, an HTTP
 * thread renders. Counters are read one by one, so a scrape may straddle an update. */
#include "server/metrics.h"

#include "common/buf.h"

#include "gpu/backend.h"
#include "server/jobs.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <sys/statvfs.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Histogram upper bounds in seconds: 10 us (a small kernel) up to 5 min (a long queue). */
static const struct {
    double s;
    const char *le;
} bounds[] = {{1e-5, "1e-05"}, {2.5e-5, "2.5e-05"}, {5e-5, "5e-05"}, {1e-4, "0.0001"}, {2.5e-4, "0.00025"},
              {5e-4, "0.0005"}, {1e-3, "0.001"},    {2.5e-3, "0.0025"}, {5e-3, "0.005"}, {1e-2, "0.01"},
              {2.5e-2, "0.025"}, {5e-2, "0.05"},    {0.1, "0.1"},       {0.25, "0.25"},  {0.5, "0.5"},
              {1, "1"},          {2.5, "2.5"},      {5, "5"},           {10, "10"},      {30, "30"},
              {60, "60"},        {300, "300"}};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

enum { ST_QUEUE, ST_H2D, ST_KERNEL, ST_D2H, ST_TOTAL, NSTAGES };
static const char *const stage_names[NSTAGES] = {"queue", "h2d", "kernel", "d2h", "total"};

/* Status codes the API answers with; anything else lands in the last slot. 0: no answer sent. */
static const unsigned codes[] = {0, 200, 201, 202, 204, 304, 400, 401, 404, 405, 409, 413, 415, 422, 429, 500, 503, 507};
#define NCODES (sizeof codes / sizeof codes[0] + 1)
static const char *const methods[] = {"GET", "HEAD", "POST", "DELETE", "other"};
#define NMETHODS (sizeof methods / sizeof methods[0])

/* Final job statuses, in enum gr_status order from GR_SUCCEEDED. */
#define NFINAL 3
static const char *const final_names[NFINAL] = {"succeeded", "failed", "canceled"};

/* Ops counted: the reductions and the matrix product after them. */
#define NOPS (GR_MATMUL + 1)

typedef _Atomic uint64_t counter;

struct hist {
    counter bucket[NBOUNDS + 1]; /* not cumulative: rendering adds them up */
    counter sum_ns;
};

static counter http_count[GR_METRICS_ROUTES + 1][NMETHODS][NCODES]; /* last route: unmatched */
static struct hist http_time[GR_METRICS_ROUTES + 1];
static struct hist store_commits;
static const char *_Atomic route_path[GR_METRICS_ROUTES];
static counter jobs[GR_METRICS_DEVICES][NOPS][NFINAL];
static struct hist stages[GR_METRICS_DEVICES][NSTAGES];
static counter bytes_done[GR_METRICS_DEVICES];
static _Atomic int64_t queued[GR_METRICS_DEVICES], running[GR_METRICS_DEVICES];
static _Atomic int64_t connections;
static counter refused[2], slow_bodies, slow_heads; /* refused: over the total, over the per-address cap */

static void add(counter *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }
static uint64_t get(counter *c) { return atomic_load_explicit(c, memory_order_relaxed); }

static void observe(struct hist *h, double ms);

void gr_metrics_http(int route, const char *path, const char *method, unsigned status, double ms)
{
    if (route < 0 || route >= GR_METRICS_ROUTES || !path)
        route = GR_METRICS_ROUTES;
    else
        atomic_store_explicit(&route_path[route], path, memory_order_relaxed);
    size_t m = 0;
    while (m < NMETHODS - 1 && strcmp(methods[m], method))
        m++;
    size_t c = 0;
    while (c < NCODES - 1 && codes[c] != status)
        c++;
    add(&http_count[route][m][c], 1);
    observe(&http_time[route], ms);
}

static void observe(struct hist *h, double ms)
{
    double s = ms / 1e3;
    size_t b = 0;
    while (b < NBOUNDS && s > bounds[b].s)
        b++;
    add(&h->bucket[b], 1);
    add(&h->sum_ns, s > 0 ? (uint64_t)(s * 1e9 + 0.5) : 0);
}

void gr_metrics_job_end(int dev, int op, int status, const struct gr_timings *t, size_t bytes)
{
    int f = status - GR_SUCCEEDED;
    if (dev < 0 || dev >= GR_METRICS_DEVICES || op < 0 || op >= NOPS || f < 0 || f >= NFINAL)
        return;
    add(&jobs[dev][op][f], 1);
    if (status == GR_SUCCEEDED)
        add(&bytes_done[dev], bytes);
    if (!t)
        return;
    /* a backend reports 0 for the stages it does not have (the CPU copies nothing) */
    const double ms[NSTAGES] = {t->queue, t->h2d, t->kernel, t->d2h, t->total};
    for (int s = 0; s < NSTAGES; s++)
        if (ms[s] > 0 || s == ST_QUEUE || s == ST_TOTAL)
            observe(&stages[dev][s], ms[s]);
}

void gr_metrics_store_commit(double ms, int writes)
{
    (void)writes;
    observe(&store_commits, ms);
}

void gr_metrics_queued(int dev, int delta)
{
    if (dev >= 0 && dev < GR_METRICS_DEVICES)
        atomic_fetch_add_explicit(&queued[dev], delta, memory_order_relaxed);
}

void gr_metrics_running(int dev, int delta)
{
    if (dev >= 0 && dev < GR_METRICS_DEVICES)
        atomic_fetch_add_explicit(&running[dev], delta, memory_order_relaxed);
}

/* --- rendering --- */

static void family(struct gr_buf *b, const char *name, const char *type, const char *help)
{
    gr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newline escaped as the text format requires. */
static void put_escaped(struct gr_buf *b, const char *s)
{
    char out[2 * sizeof((struct gr_device_info *)0)->name], *o = out;
    for (; *s && o < out + sizeof out - 2; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            *o++ = '\\';
        *o++ = *s == '\n' ? 'n' : *s;
    }
    *o = 0;
    gr_buf_printf(b, "%s", out);
}

/* Histogram h as series of family name with the labels given (text such as
 * `device="cpu",stage="h2d"`, or "" for none). */
static void render_hist(struct gr_buf *b, const char *name, const char *labels, struct hist *h)
{
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i <= NBOUNDS; i++) {
        cum += get(&h->bucket[i]);
        gr_buf_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, labels, sep, i < NBOUNDS ? bounds[i].le : "+Inf",
                      (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    gr_buf_printf(b, "%s_sum%s%s%s %.9f\n", name, open, labels, close, (double)get(&h->sum_ns) / 1e9);
    gr_buf_printf(b, "%s_count%s%s%s %llu\n", name, open, labels, close, (unsigned long long)cum);
}

void gr_metrics_connection(int delta) { atomic_fetch_add_explicit(&connections, delta, memory_order_relaxed); }
void gr_metrics_refused(int per_ip) { add(&refused[per_ip != 0], 1); }
void gr_metrics_slow_body(void) { add(&slow_bodies, 1); }
void gr_metrics_slow_head(void) { add(&slow_heads, 1); }

int gr_metrics_render(const char *data_dir, char **out, size_t *len, struct gr_err *e)
{
    struct gr_buf b = {0};
    int ndev = gr_jobs_nbackends();
    if (ndev > GR_METRICS_DEVICES)
        ndev = GR_METRICS_DEVICES;

    family(&b, "gpured_http_requests_total", "counter", "HTTP requests answered, by route pattern, method and status code (0: none sent).");
    for (int r = 0; r <= GR_METRICS_ROUTES; r++) {
        const char *path = r < GR_METRICS_ROUTES ? atomic_load_explicit(&route_path[r], memory_order_relaxed) : "unmatched";
        for (size_t m = 0; path && m < NMETHODS; m++)
            for (size_t c = 0; c < NCODES; c++) {
                uint64_t n = get(&http_count[r][m][c]);
                if (!n)
                    continue;
                char code[16] = "other";
                if (c < NCODES - 1)
                    snprintf(code, sizeof code, "%u", codes[c]);
                gr_buf_printf(&b, "gpured_http_requests_total{route=\"%s\",method=\"%s\",code=\"%s\"} %llu\n", path, methods[m],
                    code, (unsigned long long)n);
            }
    }

    family(&b, "gpured_http_request_duration_seconds", "histogram",
           "Time from a request's first byte to its answer being queued, by route pattern (parked waits included).");
    for (int r = 0; r <= GR_METRICS_ROUTES; r++) {
        const char *path = r < GR_METRICS_ROUTES ? atomic_load_explicit(&route_path[r], memory_order_relaxed) : "unmatched";
        char labels[160];
        snprintf(labels, sizeof labels, "route=\"%s\"", path ? path : "");
        if (path) /* a route seen once at least */
            render_hist(&b, "gpured_http_request_duration_seconds", labels, &http_time[r]);
    }

    family(&b, "gpured_jobs_total", "counter", "Jobs that reached a final status, by device, op and status.");
    for (int d = 0; d < ndev; d++)
        for (int op = 0; op < NOPS; op++)
            for (int f = 0; f < NFINAL; f++)
                gr_buf_printf(&b, "gpured_jobs_total{device=\"%s\",op=\"%s\",status=\"%s\"} %llu\n", gr_jobs_backend(d)->name,
                    gr_op_name(op), final_names[f], (unsigned long long)get(&jobs[d][op][f]));

    family(&b, "gpured_job_stage_seconds", "histogram",
           "Time of each stage of the jobs that ran (not benchmarks): queue, h2d, kernel, d2h (stages a device has) and total.");
    for (int d = 0; d < ndev; d++)
        for (int s = 0; s < NSTAGES; s++) {
            char labels[160];
            snprintf(labels, sizeof labels, "device=\"%s\",stage=\"%s\"", gr_jobs_backend(d)->name, stage_names[s]);
            render_hist(&b, "gpured_job_stage_seconds", labels, &stages[d][s]);
        }

    family(&b, "gpured_processed_bytes_total", "counter", "Input bytes of the jobs that succeeded, by device.");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_processed_bytes_total{device=\"%s\"} %llu\n", gr_jobs_backend(d)->name,
            (unsigned long long)get(&bytes_done[d]));

    family(&b, "gpured_jobs_queued", "gauge", "Jobs waiting in each device's queue (canceled ones until skipped).");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_jobs_queued{device=\"%s\"} %lld\n", gr_jobs_backend(d)->name,
            (long long)atomic_load_explicit(&queued[d], memory_order_relaxed));
    family(&b, "gpured_queue_capacity", "gauge", "Jobs each device's queue holds before POST answers 429 (--queue-capacity).");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_queue_capacity{device=\"%s\"} %d\n", gr_jobs_backend(d)->name, gr_jobs_capacity());
    family(&b, "gpured_jobs_running", "gauge", "Jobs running on each device.");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_jobs_running{device=\"%s\"} %lld\n", gr_jobs_backend(d)->name,
            (long long)atomic_load_explicit(&running[d], memory_order_relaxed));
    family(&b, "gpured_parked_requests", "gauge", "HTTP requests held open waiting for a job (Prefer: wait, ?wait=).");
    gr_buf_printf(&b, "gpured_parked_requests %d\n", gr_jobs_parked());

    family(&b, "gpured_store_commit_seconds", "histogram",
           "Time of each transaction of the store's writer (a group commit of every write queued meanwhile), "
           "begin to durable.");
    render_hist(&b, "gpured_store_commit_seconds", "", &store_commits);
    struct statvfs sv;
    if (data_dir && statvfs(data_dir, &sv) == 0) {
        family(&b, "gpured_data_dir_free_bytes", "gauge",
               "Bytes free to gpured on the disk of its data directory (datasets, SQLite), read at scrape time.");
        gr_buf_printf(&b, "gpured_data_dir_free_bytes %llu\n", (unsigned long long)sv.f_bavail * sv.f_frsize);
    }
    family(&b, "gpured_build_info", "gauge",
           "The running build: version, git commit and the CUDA toolkit it was built with (none: CPU only); always 1.");
    gr_buf_printf(&b, "gpured_build_info{version=\"%s\",commit=\"%s\",cuda=\"%s\"} 1\n", gr_version, gr_commit,
                  gr_cuda_version);

    family(&b, "gpured_connections_open", "gauge", "Client connections open (parked ones included).");
    gr_buf_printf(&b, "gpured_connections_open %lld\n", (long long)atomic_load_explicit(&connections, memory_order_relaxed));
    family(&b, "gpured_connections_refused_total", "counter",
           "Connections closed as they were accepted: over --max-connections (total) or --max-connections-per-ip (per_ip).");
    gr_buf_printf(&b, "gpured_connections_refused_total{reason=\"total\"} %llu\n", (unsigned long long)get(&refused[0]));
    gr_buf_printf(&b, "gpured_connections_refused_total{reason=\"per_ip\"} %llu\n", (unsigned long long)get(&refused[1]));
    family(&b, "gpured_slow_bodies_cut_total", "counter", "Requests cut off for sending their body slower than --min-body-rate.");
    gr_buf_printf(&b, "gpured_slow_bodies_cut_total %llu\n", (unsigned long long)get(&slow_bodies));
    family(&b, "gpured_slow_heads_cut_total", "counter",
           "Connections cut off for not completing a request head within --header-timeout.");
    gr_buf_printf(&b, "gpured_slow_heads_cut_total %llu\n", (unsigned long long)get(&slow_heads));

    family(&b, "gpured_device_info", "gauge", "Each device in use, with its name; always 1.");
    for (int d = 0; d < ndev; d++) {
        gr_buf_printf(&b, "gpured_device_info{device=\"%s\",name=\"", gr_jobs_backend(d)->name);
        put_escaped(&b, gr_jobs_backend(d)->info.name);
        gr_buf_printf(&b, "\"} 1\n");
    }
    family(&b, "gpured_device_up", "gauge",
           "1 while a device runs jobs; 0 once it broke (a lost CUDA context: /readyz answers 503, restart gpured).");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_device_up{device=\"%s\"} %d\n", gr_jobs_backend(d)->name,
                      !__atomic_load_n(&gr_jobs_backend(d)->broken, __ATOMIC_ACQUIRE));
    family(&b, "gpured_device_memory_total_bytes", "gauge", "Memory of each device (host memory for the CPU).");
    for (int d = 0; d < ndev; d++)
        gr_buf_printf(&b, "gpured_device_memory_total_bytes{device=\"%s\"} %lld\n", gr_jobs_backend(d)->name,
            (long long)gr_jobs_backend(d)->info.memory_bytes);
    family(&b, "gpured_device_memory_used_bytes", "gauge", "Memory in use on each GPU (all processes), read at scrape time.");
    for (int d = 0; d < ndev; d++) {
        struct gr_backend *dev = gr_jobs_backend(d);
        int64_t used = dev->memory_used ? dev->memory_used(dev) : -1;
        if (used >= 0)
            gr_buf_printf(&b, "gpured_device_memory_used_bytes{device=\"%s\"} %lld\n", dev->name, (long long)used);
    }

    family(&b, "gpured_device_utilization_ratio", "gauge",
           "Share of NVML's last sample period (1/6 s to 1 s) in which a kernel ran on each GPU, read at scrape time.");
    for (int d = 0; d < ndev; d++) {
        struct gr_backend *dev = gr_jobs_backend(d);
        int pct = dev->utilization ? dev->utilization(dev) : -1;
        if (pct >= 0)
            gr_buf_printf(&b, "gpured_device_utilization_ratio{device=\"%s\"} %.2f\n", dev->name, pct / 100.0);
    }

    /* the GPUs' dataset caches: one family per counter, each labelled by device */
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } cache[] = {
        {"gpured_cache_hits_total", "counter", "Dataset jobs whose values were on the GPU already.",
         offsetof(struct gr_cache_stats, hits)},
        {"gpured_cache_misses_total", "counter", "Dataset jobs whose values were copied to the GPU.",
         offsetof(struct gr_cache_stats, misses)},
        {"gpured_cache_evictions_total", "counter", "Datasets dropped from a GPU (room, DELETE).",
         offsetof(struct gr_cache_stats, evictions)},
        {"gpured_cache_bytes", "gauge", "Bytes of datasets kept on each GPU.", offsetof(struct gr_cache_stats, bytes)},
        {"gpured_cache_entries", "gauge", "Datasets kept on each GPU.", offsetof(struct gr_cache_stats, entries)},
    };
    struct gr_cache_stats cs[ndev];
    for (int d = 0; d < ndev; d++)
        if (gr_jobs_backend(d)->cache_stats)
            gr_jobs_backend(d)->cache_stats(gr_jobs_backend(d), &cs[d]);
    for (size_t k = 0; k < sizeof cache / sizeof cache[0]; k++) {
        family(&b, cache[k].name, cache[k].type, cache[k].help);
        for (int d = 0; d < ndev; d++)
            if (gr_jobs_backend(d)->cache_stats)
                gr_buf_printf(&b, "%s{device=\"%s\"} %lld\n", cache[k].name, gr_jobs_backend(d)->name,
                              (long long)*(const int64_t *)((const char *)&cs[d] + cache[k].off));
    }

    if (b.oom) {
        free(b.p);
        return gr_fail(e, GR_ENOMEM, NULL, "out of memory rendering the metrics");
    }
    *out = b.p;
    *len = b.len;
    return GR_OK;
}
