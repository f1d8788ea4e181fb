/* fuzz_tokens.c: libFuzzer target: the input as a --tokens-file (gr_tokens_parse, then
 * gr_tokens_count and gr_tokens_free) and as an Authorization header checked against the tokens
 * of docs/API.md (gr_tokens_check). A refusal never holds a token: no run of 16 or more
 * characters without a space (a token's least length) of the input appears in its message. */
#include "fuzz.h"
#include "server/tokens.h"

#include <string.h>
#include <unistd.h>

static void check_no_token(const char *text, size_t size, const char *msg)
{
    for (size_t i = 0; i < size;) { /* each run of bytes other than space, tab, CR, LF, NUL */
        size_t k = i;
        while (k < size && !memchr(" \t\r\n", text[k], 5))
            k++;
        if (k - i >= 16) {
            char *field = strndup(text + i, k - i);
            FUZZ_CHECK(!strstr(msg, field));
            free(field);
        }
        i = k + 1;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char path[] = "/tmp/gpured-fuzz-tokens-XXXXXX";
    const char *text = "alice 0b9f8c1e7d2a4b6c9e0f1a2b3c4d5e6f\nops d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9 admin\n";
    int fd = mkstemp(path);
    struct gr_err e = {0};
    FUZZ_CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) && close(fd) == 0);
    FUZZ_CHECK(gr_tokens_load(path, &e) == GR_OK);
    unlink(path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct gr_token_table *t = (void *)1;
    struct gr_err e = {0};
    int rc = gr_tokens_parse(text, size, &t, &e);
    if (rc == GR_OK) {
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += text[i] == '\n';
        FUZZ_CHECK(t && gr_tokens_count(t) >= 1 && (size_t)gr_tokens_count(t) <= lines);
        gr_tokens_free(t);
    } else {
        FUZZ_CHECK(rc == GR_EINVAL && !t);
        fuzz_check_refusal(rc, &e);
        check_no_token(text, size, e.msg);
    }

    /* the header as libmicrohttpd hands it over: a C string */
    char *header = strndup(text, size);
    struct gr_principal who;
    e = (struct gr_err){0};
    rc = gr_tokens_check(header, &who, &e);
    if (rc == GR_OK) {
        FUZZ_CHECK(!strcmp(who.tenant, "alice") ? !who.admin : !strcmp(who.tenant, "ops") && who.admin);
    } else {
        FUZZ_CHECK(rc == GR_EUNAUTH);
        fuzz_check_refusal(rc, &e);
        check_no_token(header, strlen(header), e.msg);
    }
    free(header);
    return 0;
}
