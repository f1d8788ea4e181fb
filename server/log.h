/* log.h: one-line logs to stderr, any thread (each line is one write, so lines never interleave). */
#ifndef GR_LOG_H
#define GR_LOG_H

enum gr_log_level { GR_LOG_DEBUG, GR_LOG_INFO, GR_LOG_WARN, GR_LOG_ERROR };

extern int gr_log_level;
int gr_log_level_parse(const char *s); /* -1 if unknown */
void gr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
