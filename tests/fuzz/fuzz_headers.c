/* fuzz_headers.c: libFuzzer target: the input (up to a NUL, as libmicrohttpd hands over a header
 * or a query value) as a Prefer header (gr_prefer_wait) and as a whole number such as ?limit= or
 * ?wait= (gr_parse_uint, under several caps). A number is accepted only when it is all digits and
 * within its cap, and then it is their value. */
#include "fuzz.h"
#include "headers.h"

#include <string.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size);
    int64_t wait = gr_prefer_wait(text);
    FUZZ_CHECK(wait >= -1 && wait <= GR_MAX_WAIT_S);
    static const int64_t caps[] = {0, 1, 100, 1000, INT32_MAX, INT64_MAX};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++)
        FUZZ_CHECK(gr_parse_uint(text, caps[k]) == reference(text, caps[k]));
    free(text);
    return 0;
}
