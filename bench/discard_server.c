/* discard_server.c: the upload benchmark's baseline: a libmicrohttpd server set up as api/http.c's that
 * reads any POST body and drops it, answering 200 with the byte count. Its pool threads own their
 * requests; main only waits for a signal.
 *   discard_server PORT [THREADS [CONNECTION_MEMORY_LIMIT]]   (port 0: any; prints the port bound) */
#include <microhttpd.h>

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    unsigned long long *got = *con_cls;
    if (!got) /* as gpured: nothing is answered on the first call */
        return (*con_cls = calloc(1, sizeof *got)) ? MHD_YES : MHD_NO;
    if (*upload_size) {
        *got += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    char *body = malloc(32);
    if (!body)
        return MHD_NO;
    snprintf(body, 32, "%llu\n", *got);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    free(*con_cls);
    *con_cls = NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [THREADS [CONNECTION_MEMORY_LIMIT]]\n", argv[0]);
        return 2;
    }
    unsigned port = (unsigned)strtoul(argv[1], NULL, 10), threads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 4;
    size_t mem = argc > 3 ? strtoull(argv[3], NULL, 10) : 0; /* 0: libmicrohttpd's default, as gpured */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    /* the pool threads inherit the blocked signals, so that only sigwait below takes them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d =
        MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                         MHD_OPTION_THREAD_POOL_SIZE, threads ? threads : 1u, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_LISTEN_BACKLOG_SIZE,
                         1024u, mem ? MHD_OPTION_CONNECTION_MEMORY_LIMIT : MHD_OPTION_END, mem, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "discard_server: cannot listen on 127.0.0.1:%u\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://127.0.0.1:%u\n", info ? info->port : port);
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
    MHD_stop_daemon(d);
    return 0;
}
