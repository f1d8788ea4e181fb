/* fuzz_binary_job.c: libFuzzer target: the one-shot POST /v1/jobs?op=..&dtype=.. form. Input:
 * one byte (bit 0: the body is a .npy, else raw values), the query "k=v&k=v" up to the first
 * '\n', then the body. The query becomes the JSON object of strings api/routes.c builds (a key
 * twice, or a value not UTF-8, is refused there before parsing: skipped here); then
 * gr_parse_dims on ?shape= and gr_parse_binary_job. */
#include "api/parse.h"
#include "fuzz.h"

#include <string.h>

/* "k=v&k2&..." (a NUL ends a key or value, as in the C strings libmicrohttpd hands over) into
 * an object of strings; NULL where routes.c would answer 400 itself. */
static json_t *query_of(const char *q, size_t n)
{
    json_t *args = json_object();
    char *text = strndup(q, n); /* stops at a NUL */
    for (char *save = NULL, *kv = strtok_r(text, "&", &save); kv && args; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq)
            *eq = 0;
        json_t *v = json_string(eq ? eq + 1 : "");
        int twice = v && json_object_get(args, kv);
        if (twice)
            json_decref(v);
        if (!v || twice || json_object_set_new(args, kv, v)) { /* routes.c answers 400 itself */
            json_decref(args);
            args = NULL;
        }
    }
    free(text);
    return args;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int npy = data[0] & 1;
    const char *q = (const char *)data + 1, *nl = memchr(q, '\n', size - 1);
    size_t qlen = nl ? (size_t)(nl - q) : size - 1, len = nl ? size - 2 - qlen : 0;
    json_t *query = query_of(q, qlen);
    if (!query)
        return 0;

    const char *shape = json_string_value(json_object_get(query, "shape"));
    if (shape) {
        struct gr_err e = {0};
        int ndim;
        int64_t dims[GR_MAX_DIMS];
        int rc = gr_parse_dims(shape, &ndim, dims, &e);
        if (rc)
            fuzz_check_refusal(rc, &e);
        for (int d = 0; !rc && d < GR_MAX_DIMS; d++)
            FUZZ_CHECK(ndim >= 1 && ndim <= GR_MAX_DIMS && (d < ndim ? dims[d] >= 1 : dims[d] == 1));
    }

    /* the body as http.c keeps it: NULL when empty, else exactly its bytes (no spare NUL) */
    char *body = len ? malloc(len) : NULL;
    if (len)
        memcpy(body, nl + 1, len);
    struct gr_err e = {0};
    struct gr_job *j = gr_job_new();
    int rc = gr_parse_binary_job(query, npy, &body, len, j, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
    } else {
        FUZZ_CHECK(!body && j->input && j->input_bytes <= len && !j->dataset[0]);
        fuzz_check_job(j);
    }
    free(body);
    gr_job_unref(j);
    json_decref(query);
    FUZZ_CHECK(fuzz_pins == 0);
    return 0;
}
