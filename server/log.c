/* log.c: one-line logs to stderr, safe from any thread. The level is set once at start-up. */
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int gr_log_level = GR_LOG_INFO;
static const char *names[] = {"debug", "info", "warn", "error"};

int gr_log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void gr_log(int level, const char *fmt, ...)
{
    if (level < gr_log_level)
        return;
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03dZ %-5s ", (int)(tv.tv_usec / 1000), names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : n + m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* one write(2) per line: concurrent threads' lines never mix */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
