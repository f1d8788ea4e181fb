/* fuzz_headers.c: libFuzzer target: the input (up to a NUL, as libmicrohttpd hands over a header
 * or a query value) as a Prefer header (gr_prefer_wait), as a whole number such as ?limit= or
 * ?wait= (gr_parse_uint, under several caps), and as a ?cursor= or a path's id (gr_id_valid). A
 * number is accepted only when it is all digits and within its cap, and then it is their value;
 * an id only when it is its letter, '_' and 16 lowercase hex digits. Then the whole input as a
 * request's header lines ("Name: value", split at '\n' as libmicrohttpd hands them over one by
 * one) weighed for framing (gr_framing_add, _check): refused exactly when Content-Length comes
 * twice with different values or beside Transfer-Encoding, and then with a message. */
#include "api/headers.h"
#include "common/id.h"
#include "fuzz.h"

#include <string.h>
#include <strings.h>

/* The digits of s as a number, or -1 when s is not all digits or over max: said plainly. */
static int64_t reference(const char *s, int64_t max)
{
    int64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        int d = *s - '0';
        if (d < 0 || d > 9 || d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    return v;
}

/* What an id is, said plainly: x_ and 16 lowercase hex digits. */
static int id_reference(const char *s, char prefix)
{
    if (strlen(s) != 18 || s[0] != prefix || s[1] != '_')
        return 0;
    for (s += 2; *s; s++)
        if (!strchr("0123456789abcdef", *s))
            return 0;
    return 1;
}

/* The input's lines as headers: each "Name: value" line (others skipped, as libmicrohttpd
 * refuses them) into gr_framing_add, and the verdict checked against one said plainly. */
static void framing(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *lines[64];
    if (!text)
        return;
    memcpy(text, data, size);
    text[size] = 0;
    struct gr_framing f = {0};
    int n = 0, lengths = 0, differ = 0, te = 0;
    for (char *line = text, *next; line && n < 64; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = 0;
        char *value = colon + 1 + (colon[1] == ' ');
        lines[n++] = value;
        gr_framing_add(&f, line, value);
        if (!strcasecmp(line, "Content-Length")) {
            for (int k = 0; k < n - 1; k++) /* against every earlier length: the first is enough */
                if (lines[k] && strcmp(lines[k], value)) {
                    differ = 1;
                    break;
                }
            lengths++;
        } else {
            te |= !strcasecmp(line, "Transfer-Encoding");
            lines[n - 1] = NULL; /* not a length */
        }
    }
    struct gr_err e = {0};
    int rc = gr_framing_check(&f, &e);
    FUZZ_CHECK(rc == ((differ || (lengths && te)) ? GR_EINVAL : GR_OK));
    FUZZ_CHECK(rc == GR_OK || e.msg[0]);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    framing(data, size);
    char *text = strndup((const char *)data, size);
    int64_t wait = gr_prefer_wait(text);
    FUZZ_CHECK(wait >= -1 && wait <= GR_MAX_WAIT_S);
    static const int64_t caps[] = {0, 1, 100, 1000, INT32_MAX, INT64_MAX};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++)
        FUZZ_CHECK(gr_parse_uint(text, caps[k]) == reference(text, caps[k]));
    FUZZ_CHECK(gr_id_valid(text, 'j') == id_reference(text, 'j'));
    FUZZ_CHECK(gr_id_valid(text, 'd') == id_reference(text, 'd'));
    free(text);
    return 0;
}
