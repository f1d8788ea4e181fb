/* fuzz_job_json.c: libFuzzer target: the input as the JSON body of POST /v1/jobs (gr_parse_job,
 * datasets looked up by a fake of api/datasets.c gr_dataset_for_job), as a batch (gr_parse_batch:
 * its items found in the text, each read alone) and of POST /v1/benchmarks (gr_parse_benchmark);
 * every job freed by gr_job_unref, every dataset hold given back. An input
 * with a key "data" is also parsed with that key spelled "d\u0061ta", which api/numbers.c leaves
 * to jansson: both paths must give the same job or the same refusal. */
#include "api/numbers.h"
#include "api/parse.h"
#include "common/id.h"
#include "fuzz.h"
#include "server/jobs.h"

#include <string.h>

static int hex(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* A dataset for every valid id, what it holds read from the id's 16 hex digits h[0..15]:
 * h0 'f' none (404), h1 the dtype, h2 the dimensions (0, 1, 2), rows (h4..h7 + 1) << h3,
 * cols (h9..h12 + 1) << h8. As gr_dataset_for_job: pinned first, given back on failure; a dataset
 * over 2^40 bytes is refused as unreadable (none that large can be stored). */
static int lookup(void *ctx, struct gr_job *j, const char *id, struct gr_source *src, struct gr_err *e)
{
    if (!gr_id_valid(id, 'd'))
        return gr_fail(e, GR_ENOTFOUND, "dataset", "no dataset with that id (ids look like d_0123456789abcdef)");
    fuzz_pins++;
    const char *h = id + 2;
    int64_t rows = (int64_t)((hex(h[4]) << 12 | hex(h[5]) << 8 | hex(h[6]) << 4 | hex(h[7])) + 1) << hex(h[3]);
    int64_t cols = (int64_t)((hex(h[9]) << 12 | hex(h[10]) << 8 | hex(h[11]) << 4 | hex(h[12])) + 1) << hex(h[8]);
    int ndim = hex(h[2]) % 3;
    *src = (struct gr_source){.dtype = hex(h[1]) % GR_NDTYPES, .ndim = ndim,
                              .shape = {ndim > 0 ? rows : 1, ndim > 1 ? cols : 1, 1, 1, 1, 1, 1, 1}};
    src->count = src->shape[0] * src->shape[1];
    int rc = GR_OK;
    if (h[0] == 'f')
        rc = gr_fail(e, GR_ENOTFOUND, "dataset", "no dataset %s (GET /v1/datasets lists them)", id);
    else if ((double)src->count * (double)gr_dtype_size(src->dtype) > 0x1p40)
        rc = gr_fail(e, GR_EIO, NULL, "a stored dataset's record is unreadable");
    if (rc) {
        gr_jobs_unpin_dataset(id);
        return rc;
    }
    snprintf(j->dataset, sizeof j->dataset, "%s", id);
    j->dataset_pinned = 1;
    return GR_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1); /* the same member order every run: reproducible coverage */
    return 0;
}

/* The input with 5 spaces before its first "data" (spaced) or that key as "d\u0061ta": one
 * length, every later byte where it was. NULL if it has no such key. */
static char *respelled(const uint8_t *data, size_t size, int spaced)
{
    const char *at = memmem(data, size, "\"data\"", 6);
    char *out = at ? malloc(size + 5) : NULL;
    if (!out)
        return NULL;
    size_t head = (size_t)(at - (const char *)data);
    memcpy(out, data, head);
    memcpy(out + head, spaced ? "     \"data\"" : "\"d\\u0061ta\"", 11);
    memcpy(out + head + 11, at + 6, size - head - 6);
    return out;
}

/* Where the input is JSON (the first "data" then a key or a string, alike either way) and
 * api/numbers.c reads the numbers itself, the two spellings parse alike: the same code, field
 * and message, or the same job and values. (A malformed input may be malformed at the key
 * respelled, and jansson's message quotes it as spelled.) */
static void same_both_ways(const uint8_t *data, size_t size)
{
    char *a = respelled(data, size, 1), *b = respelled(data, size, 0);
    struct gr_numbers read = {0};
    json_t *doc = a ? json_loadb(a, size + 5, JSON_REJECT_DUPLICATES, NULL) : NULL;
    size_t rest_len;
    char *rest = doc ? gr_numbers_take(a, size + 5, &read, &rest_len) : NULL;
    json_decref(doc);
    gr_numbers_free(&read);
    if (rest && b) {
        struct gr_err ea = {0}, eb = {0};
        struct gr_job *ja = gr_job_new(), *jb = gr_job_new();
        int ra = gr_parse_job(a, size + 5, lookup, NULL, ja, &ea);
        int rb = gr_parse_job(b, size + 5, lookup, NULL, jb, &eb);
        FUZZ_CHECK(ra == rb && !strcmp(ea.msg, eb.msg) && !strcmp(ea.field, eb.field));
        if (ra == GR_OK)
            FUZZ_CHECK(ja->ndim == jb->ndim && !memcmp(ja->shape, jb->shape, sizeof ja->shape) && ja->axes == jb->axes &&
                       ja->dtype == jb->dtype && ja->input_bytes == jb->input_bytes &&
                       (!ja->input_bytes || !memcmp(ja->input, jb->input, ja->input_bytes)));
        gr_job_unref(ja);
        gr_job_unref(jb);
        FUZZ_CHECK(fuzz_pins == 0);
    }
    free(rest);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    int rc = gr_parse_job((const char *)data, size, lookup, NULL, j, &e);
    if (rc)
        fuzz_check_refusal(rc, &e);
    else
        fuzz_check_job(j);
    gr_job_unref(j);
    FUZZ_CHECK(fuzz_pins == 0);
    same_both_ways(data, size);

    struct gr_job **js = NULL;
    int n = 0;
    e = (struct gr_err){0};
    rc = gr_parse_batch((const char *)data, size, 64, lookup, NULL, &js, &n, &e);
    if (rc)
        fuzz_check_refusal(rc, &e);
    FUZZ_CHECK(rc ? !js && !n : js && n >= 1 && n <= 64);
    for (int k = 0; k < n; k++) {
        fuzz_check_job(js[k]);
        gr_job_unref(js[k]);
    }
    free(js);
    FUZZ_CHECK(fuzz_pins == 0);

    e = (struct gr_err){0};
    j = gr_job_new();
    rc = gr_parse_benchmark((const char *)data, size, j, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
    } else {
        FUZZ_CHECK(j->kind == GR_JOB_BENCH && j->shape[0] >= 1 && j->repeats >= 1 && j->dtype >= 0);
        FUZZ_CHECK(j->nalgos >= 0 && j->nalgos <= 64 && !j->algos == !j->nalgos);
        for (int k = 0; k < j->nalgos; k++)
            FUZZ_CHECK(j->algos[k][0] && memchr(j->algos[k], 0, sizeof j->algos[k]));
        fuzz_check_render(j);
    }
    gr_job_unref(j);
    return 0;
}
