/* spans.c: work over items cut into spans on threads of their own (spans.h). Plain pthreads,
 * not OpenMP, so that ThreadSanitizer sees the joins. */
#include "common/spans.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#define SPANS_MAX 8

struct span {
    void (*fn)(void *ctx, int from, int to);
    void *ctx;
    int from, to;
};

static void *run_span(void *arg)
{
    struct span *s = arg;
    s->fn(s->ctx, s->from, s->to);
    return NULL;
}

void gr_spans(int n, int min, void (*fn)(void *ctx, int from, int to), void *ctx)
{
    struct span s[SPANS_MAX];
    pthread_t t[SPANS_MAX];
    int threaded[SPANS_MAX] = {0};
    int spans = min < 1 || n / min < 1 ? 1 : n / min > SPANS_MAX ? SPANS_MAX : n / min;
    long cores = spans > 1 ? sysconf(_SC_NPROCESSORS_ONLN) : 1; /* it reads a file: not per small job */
    if (cores >= 1 && spans > cores)
        spans = (int)cores;
    for (int i = 0; i < spans; i++) {
        s[i] = (struct span){fn, ctx, (int)((int64_t)n * i / spans), (int)((int64_t)n * (i + 1) / spans)};
        threaded[i] = i && pthread_create(&t[i], NULL, run_span, &s[i]) == 0;
    }
    for (int i = 0; i < spans; i++) { /* a span without a thread runs here */
        if (threaded[i])
            pthread_join(t[i], NULL);
        else
            run_span(&s[i]);
    }
}
