/* main.c: gpured's entry point: settings, start-up order, signals and the orderly stop.
 * The main thread only starts things and then waits for SIGINT/SIGTERM. */
#include "api/events.h"
#include "api/http.h"
#include "db/store.h"
#include "gpu/backend.h"
#include "server/cluster.h"
#include "server/config.h"
#include "server/digests.h"
#include "server/jobs.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/sweep.h"
#include "server/tenants.h"
#include "server/tokens.h"

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_GPUS 16

static int die(const char *what, const struct gr_err *e)
{
    gr_log(GR_LOG_ERROR, "%s: %s", what, e->msg);
    return 1;
}

/* Who may call: the tokens file read, or (none) a refusal to serve beyond loopback unless asked. */
static int trust(const struct gr_config *cfg)
{
    struct gr_err e = {0};
    if (cfg->tokens_file[0]) {
        if (gr_tokens_load(cfg->tokens_file, &e) != GR_OK)
            return die("cannot use the tokens file", &e);
        return 0;
    }
    if (gr_config_loopback(cfg->bind))
        return 0;
    if (!cfg->insecure_no_auth) {
        gr_log(GR_LOG_ERROR, "refusing to serve on %s without tokens: anyone who can reach it could read and delete "
                             "every job. Give --tokens-file PATH (GPURED_TOKENS_FILE; lines 'TENANT TOKEN [admin]'), "
                             "bind to 127.0.0.1, or pass --insecure-no-auth (GPURED_INSECURE_NO_AUTH=1) if something "
                             "in front of gpured checks who calls",
               cfg->bind);
        return 1;
    }
    gr_log(GR_LOG_WARN, "--insecure-no-auth: serving on %s with no tokens; every caller can see and delete everything",
           cfg->bind);
    return 0;
}

/* Room for --max-connections: the open-file limit raised to its hard ceiling, or the cap lowered
 * to what fits under it (logged), keeping some descriptors for the store, datasets and GPUs. */
static void fit_connections(struct gr_config *cfg)
{
    const rlim_t spare = 256;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)cfg->max_connections + spare;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want) {
        int fit = rl.rlim_cur > spare + 16 ? (int)(rl.rlim_cur - spare) : 16;
        gr_log(GR_LOG_WARN, "--max-connections %d does not fit the open-file limit %llu: serving at most %d "
                            "(raise the limit, e.g. ulimit -n or LimitNOFILE=)",
               cfg->max_connections, (unsigned long long)rl.rlim_cur, fit);
        cfg->max_connections = fit;
    }
}

static void count_bytes(void *ctx, const char *tenant, uint64_t bytes) { gr_tenant_add_bytes(tenant, bytes, 0, 1, NULL); }

/* Each store commit (the writer thread): timed for /metrics, told to the event streams. */
static void committed(double ms, int writes)
{
    gr_metrics_store_commit(ms, writes);
    gr_events_kick();
}

static int serve(struct gr_config *cfg)
{
    /* signals are taken by sigwait below; every thread started from here inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (trust(cfg))
        return 1;
    fit_connections(cfg);
    struct gr_err e = {0};
    struct gr_store *store;
    if (gr_store_open_with(&store, cfg->store, cfg->data_dir, cfg->store_writers, &e) != GR_OK)
        return die("cannot open the store", &e);
    gr_tenants_limits(cfg->tenant_max_queued, (int64_t)cfg->tenant_max_bytes);
    if (gr_store_tenant_bytes(store, count_bytes, NULL, &e) != GR_OK) {
        gr_store_close(store);
        return die("cannot sum the datasets per tenant", &e);
    }

    struct gr_backend *backends[1 + MAX_GPUS];
    int nb = 0;
    if (!(backends[nb++] = gr_cpu_backend_new())) {
        gr_store_close(store);
        return die("cannot start the CPU backend", &(struct gr_err){.msg = "out of memory"});
    }
    int ngpus = gr_gpu_discover(backends + nb, MAX_GPUS, cfg->streams, cfg->gpu_cache_bytes, cfg->pin_bytes, &e);
    if (ngpus == 0)
        gr_log(GR_LOG_INFO, "no GPU in use (%s): jobs run on the CPU", e.msg[0] ? e.msg : "none found");
    nb += ngpus;
    for (int i = 0; i < nb; i++) {
        gr_log(GR_LOG_INFO, "device %s: %s", backends[i]->name, backends[i]->info.name);
        if (backends[i]->no_utilization_why[0]) /* the metric goes missing, nothing else */
            gr_log(GR_LOG_INFO, "device %s: no utilisation metric: %s", backends[i]->name, backends[i]->no_utilization_why);
    }

    int port = 0, rc = 1;
    if (gr_cluster_join(store, cfg->lease_s, cfg->offer_after_ms, &e) != GR_OK) {
        die("cannot join the replicas", &e);
        goto out;
    }
    gr_jobs_set_launch_group(cfg->launch_group);
    gr_store_observe_commits(store, committed);
    gr_jobs_on_running(gr_events_running);
    if (gr_jobs_start(store, backends, nb, cfg->queue_capacity, &e) != GR_OK) {
        die("cannot start the workers", &e);
        goto out;
    }
    if (gr_store_listen(store, gr_jobs_changed, gr_cluster_offered, gr_jobs_cancel_asked, NULL, &e) != GR_OK) {
        die("cannot listen to the store", &e);
        goto out;
    }
    /* A shared store's backlog is claimed by the cluster thread a few jobs at a time, each renewed
     * from its claim on: claimed here all at once, its first jobs' leases could run out before the
     * last were read, and another replica would run them too. */
    int recovered = gr_store_shared(store) ? 0 : gr_jobs_recover(0, GR_JOBS_ANY, &e);
    if (recovered < 0) {
        die("cannot read unfinished jobs", &e);
        goto out;
    }
    if (recovered)
        gr_log(GR_LOG_INFO, "re-queued %d unfinished job(s) from the store", recovered);
    if (gr_sweep_start(store, cfg->result_ttl_s, cfg->idempotency_ttl_s, &e) != GR_OK) {
        die("cannot start the retention sweep", &e);
        goto out;
    }
    if (gr_digests_start(store, &e) != GR_OK) {
        die("cannot start the digest thread", &e);
        goto out;
    }
    if (gr_cluster_start(&e) != GR_OK) {
        die("cannot start the cluster thread", &e);
        goto out;
    }
    if (gr_events_start(store, &e) != GR_OK) {
        die("cannot start the event streams", &e);
        goto out;
    }
    if (gr_api_start(cfg, store, &port, &e) != GR_OK) {
        die("cannot start the HTTP server", &e);
        goto out;
    }
    /* at warn too when the port was picked (--port 0): whoever started it must read it to connect */
    gr_log(cfg->port ? GR_LOG_INFO : GR_LOG_WARN, "listening on http://%s:%d (data in %s)", cfg->bind, port,
           cfg->data_dir);

    int sig;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) {
        if (!cfg->tokens_file[0])
            gr_log(GR_LOG_WARN, "SIGHUP: no --tokens-file to read again");
        else if (gr_tokens_load(cfg->tokens_file, &e) != GR_OK)
            gr_log(GR_LOG_ERROR, "SIGHUP: %s; the tokens in use stay", e.msg);
        else
            gr_log(GR_LOG_WARN, "SIGHUP: tokens read again from %s", cfg->tokens_file);
    }
    gr_log(GR_LOG_WARN, "%s: stopping (the running job finishes; queued jobs stay queued)", strsignal(sig));
    gr_api_quiesce();
    gr_events_stop(); /* event streams end now: their clients reconnect elsewhere */
    gr_jobs_pause();
    gr_cluster_leave(); /* the workers are paused: the queued jobs are the other replicas' to claim */
    rc = 0;
out:
    gr_sweep_stop();
    gr_jobs_stop_workers();
    gr_jobs_wake_all();
    /* requests in flight finish: parked ones answer as soon as their job is durable (a suspended
     * upload or delete once its row is), answers under way are sent, event streams end; give
     * them a moment before the daemon stops and cuts what is left */
    for (int i = 0; i < 500 && (gr_jobs_parked() > 0 || gr_api_busy() > 0); i++)
        usleep(10000);
    gr_events_stop();
    gr_api_stop();
    gr_digests_stop(); /* after the uploads that queue digests, before the store they write to */
    gr_cluster_stop(); /* the running job's lease held until here: its final state is queued */
    gr_store_close(store); /* commits what is pending; its callbacks still reach the job table */
    gr_jobs_stop();
    for (int i = 0; i < nb; i++)
        backends[i]->destroy(backends[i]);
    gr_tokens_unload();
    gr_tenants_reset();
    gr_log(GR_LOG_INFO, "stopped");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("gpured %s (commit %s, CUDA %s)\n", gr_version, gr_commit, gr_cuda_version);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "serve")) {
        int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        FILE *out = help ? stdout : stderr;
        if (argc >= 2 && !help)
            fprintf(stderr, "gpured: unknown command '%s'\n\n", argv[1]);
        fprintf(out, "usage: gpured COMMAND [options]\n"
                     "gpured runs reductions and matrix products on NVIDIA GPUs (or the CPU) as jobs over HTTP; "
                     "see README.md\n\n"
                     "commands:\n"
                     "  serve [options]      start the service (options below; each also as its variable)\n"
                     "  serve --help         the options alone\n"
                     "  --version            the version, commit and CUDA toolkit of this build\n"
                     "  --help               this\n\n"
                     "options of serve:\n");
        gr_config_help(out);
        return help ? 0 : 2;
    }
    struct gr_config cfg;
    int rc = gr_config_load(&cfg, argc - 1, argv + 1);
    if (rc)
        return rc == 1 ? 0 : rc;
    gr_log_level = cfg.log_level;
    /* An axis reduction's results (millions of values) are allocated and freed job after job. glibc
     * maps each one above 32 MiB afresh and faults it in page by page (a 32 MiB result: 10 ms of a
     * 13 ms finish on the dev machine); from the heap it reuses pages already mapped. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return serve(&cfg);
}
