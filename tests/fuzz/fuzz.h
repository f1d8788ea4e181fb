/* fuzz.h: what the libFuzzer targets share: the dataset pin counter of stubs.c and the checks
 * every parse result must pass (a failed check aborts: libFuzzer keeps the input as a crash). */
#ifndef GR_FUZZ_H
#define GR_FUZZ_H

#include "server/job_doc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Holds on datasets taken (by a target's dataset lookup) and not yet given back (by
 * gr_jobs_unpin_dataset, from gr_job_unref); 0 after every input. */
extern int fuzz_pins;

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A refusal: its code in e, a message, and a field the problem's JSON can carry. */
static inline void fuzz_check_refusal(int rc, const struct gr_err *e)
{
#ifdef FUZZ_VERBOSE /* -DFUZZ_VERBOSE: say why each input was refused */
    fprintf(stderr, "refused (%d, field \"%s\"): %s\n", rc, e->field, e->msg);
#endif
    FUZZ_CHECK(rc > GR_OK && rc < GR_NCODES && e->code == rc && e->msg[0]);
    json_t *field = json_string(e->field); /* NULL: not UTF-8, and http.c would drop it */
    FUZZ_CHECK(field);
    json_decref(field);
}

/* n x es without overflow (the checks below would not hold otherwise). */
static inline size_t fuzz_bytes(int64_t rows, int64_t cols, size_t es)
{
    size_t n;
    FUZZ_CHECK(rows >= 1 && cols >= 1 && !gr_mul_size((size_t)rows, (size_t)cols, &n) && !gr_mul_size(n, es, &n));
    return n;
}

/* An accepted reduction or product: what the worker and the store will rely on; it renders. */
/* j's resource is JSON exactly as jansson writes it (job.c writes it without jansson): read
 * back and written again, the same text. */
static inline void fuzz_check_render(const struct gr_job *j)
{
    char *doc = gr_job_render(j);
    json_t *o = doc ? json_loads(doc, 0, NULL) : NULL;
    char *again = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (doc && again && strcmp(doc, again))
        fprintf(stderr, "rendered: %s\njansson:  %s\n", doc, again);
    FUZZ_CHECK(again && !strcmp(doc, again));
    json_decref(o);
    free(again);
    free(doc);
}

static inline void fuzz_check_job(const struct gr_job *j)
{
    FUZZ_CHECK(j->dtype >= 0 && j->dtype < GR_NDTYPES && j->op >= 0 && j->op <= GR_MATMUL);
    FUZZ_CHECK(j->ndim >= 1 && j->ndim <= GR_MAX_DIMS);
    size_t es = gr_dtype_size(j->dtype), bytes = fuzz_bytes(gr_job_rows(j), gr_job_cols(j), es);
    if (j->kind == GR_JOB_MATMUL) {
        const struct gr_operand *a = &j->mm[0], *b = &j->mm[1], *c = &j->mm[2];
        FUZZ_CHECK(j->op == GR_MATMUL && j->ndim == 2 && gr_dtype_is_float(j->dtype));
        FUZZ_CHECK(a->present && b->present && a->cols == b->rows && j->shape[0] == a->rows && j->shape[1] == b->cols);
        FUZZ_CHECK(!c->present || (c->rows == a->rows && c->cols == b->cols));
        FUZZ_CHECK(j->beta == 0 || c->present);
        size_t inline_bytes = 0;
        for (int k = 0; k < GR_MM_OPERANDS; k++) {
            const struct gr_operand *o = &j->mm[k];
            if (!o->present)
                continue;
            size_t n = fuzz_bytes(o->rows, o->cols, es);
            FUZZ_CHECK(o->dataset[0] ? o->pinned : !o->pinned && o->off == inline_bytes);
            inline_bytes += o->dataset[0] ? 0 : n;
        }
        FUZZ_CHECK(j->input_bytes == inline_bytes && !j->input == !inline_bytes);
        FUZZ_CHECK(!j->dataset[0] && !j->dataset_pinned);
    } else {
        FUZZ_CHECK(j->kind == GR_JOB_REDUCE && j->op < GR_NOPS && j->input_bytes == bytes);
        FUZZ_CHECK(j->ndim >= 1 && j->ndim <= GR_MAX_DIMS && j->axes && j->axes < 1u << j->ndim);
        FUZZ_CHECK(!gr_op_is_arg(j->op) || gr_job_whole(j) || __builtin_popcount(j->axes) == 1);
        FUZZ_CHECK(j->ddof >= 0 && (!j->ddof || gr_op_takes_ddof(j->op)));
        for (int d = 0; d < GR_MAX_DIMS; d++)
            FUZZ_CHECK(d < j->ndim ? j->shape[d] >= 1 : j->shape[d] == 1);
        FUZZ_CHECK(j->dataset[0] ? j->dataset_pinned && !j->input : !j->dataset_pinned && j->input);
    }
    fuzz_check_render(j);
}

#endif
