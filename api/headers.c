/* headers.c: parsers of request headers and query values; pure, any thread. */
#include "api/headers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int64_t gr_parse_uint(const char *s, int64_t max)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    return errno || *end || v > max ? -1 : v;
}

int64_t gr_prefer_wait(const char *prefer)
{
    for (const char *s = prefer; s && (s = strstr(s, "wait")); s += 4) {
        if ((s != prefer && s[-1] != ' ' && s[-1] != ',' && s[-1] != ';') || s[4] != '=')
            continue;
        char num[16];
        size_t n = strcspn(s + 5, " ,;");
        if (n == 0 || n >= sizeof num)
            return -1;
        memcpy(num, s + 5, n);
        num[n] = 0;
        int64_t v = gr_parse_uint(num, INT32_MAX);
        return v < 0 ? -1 : v > GR_MAX_WAIT_S ? GR_MAX_WAIT_S : v;
    }
    return -1;
}

void gr_framing_add(struct gr_framing *f, const char *name, const char *value)
{
    if (!strcasecmp(name, "Content-Length")) {
        f->lengths_differ |= f->length && strcmp(f->length, value);
        f->length = f->length ? f->length : value;
    } else if (!strcasecmp(name, "Transfer-Encoding")) {
        f->chunked = 1;
    }
}

int gr_framing_check(const struct gr_framing *f, struct gr_err *e)
{
    if (f->lengths_differ)
        return gr_fail(e, GR_EINVAL, NULL, "Content-Length is given twice with different values: send it once");
    if (f->length && f->chunked)
        return gr_fail(e, GR_EINVAL, NULL, "both Content-Length and Transfer-Encoding are given: send one of them");
    return GR_OK;
}
