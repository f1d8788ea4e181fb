/* headers.c: parsers of request headers and query values; pure, any thread. */
#include "api/headers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
