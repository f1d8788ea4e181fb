/* spans.h: one piece of work over items [0, n) cut into spans, each run on a thread of its own
 * (a big batch's parsing and rendering). The caller owns the items; each span touches only its
 * own, and every thread is joined before gr_spans returns. */
#ifndef GR_SPANS_H
#define GR_SPANS_H

/* Run fn(ctx, from, to) over [0, n): spans of at least min items, at most 8 of them and no more
 * than the cores. The calling thread runs the first span, and any whose thread could not start. */
void gr_spans(int n, int min, void (*fn)(void *ctx, int from, int to), void *ctx);

#endif
