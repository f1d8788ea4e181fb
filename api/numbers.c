/* numbers.c: a job body's top-level "data" read straight from its text (numbers.h). Pure
 * functions of their arguments; called on the HTTP thread that read the body.
 *
 * Why: jansson makes a json_t (one malloc) per number and calls localeconv() for each real.
 * For 1,024 floats that was 380 µs of a 900 µs request. Here a short number is read in one pass
 * over its digits (fast_real), any other by strtod or strtoll. Anything this reader is not sure
 * of is left to jansson: the answer is then jansson's, as before. */
#include "api/numbers.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 64 /* longer numbers are jansson's */

static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Past the JSON string opening at p; NULL if it does not end or holds a backslash (a key
 * spelled with escapes may be "data": jansson reads those). */
static const char *plain_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\')
            return NULL;
    }
    return NULL;
}

/* Past the value at p, loosely (jansson checks it): a string, or up to the comma or brace that
 * ends it at this depth; NULL if that cannot be told. */
static const char *skip_value(const char *p, const char *end)
{
    int depth = 0;
    for (; p < end; p++) {
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\')
                    p++;
            if (p >= end)
                return NULL;
        } else if (*p == '[' || *p == '{') {
            depth++;
        } else if (*p == ']' || *p == '}') {
            if (depth == 0)
                return p;
            depth--;
        } else if (*p == ',' && depth == 0) {
            return p;
        }
    }
    return NULL;
}

/* Exact powers of ten as doubles: 10^22 is the largest (5^22 < 2^53). */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* digits * 10^e10 (negative if neg) where both factors are exact doubles: one IEEE multiply or
 * divide of exact operands rounds once, so this is strtod's correctly rounded value (Clinger's
 * fast path). A job's data is mostly short decimals like 12.345, where strtod cost about 100 ns
 * a number. Else, on x86-64, the same in the x87's long double, whose 64-bit significand holds
 * any 19 digits and 10^27 exactly: one rounding there, a second to double, which gives strtod's
 * value unless the long double fell on the point halfway between two doubles (its low 11 bits
 * 0x400, give or take its own rounding). That covers the 17 digits Python writes for a float.
 * 0 where neither applies: strtod reads the number. */
static int fast_real(int neg, uint64_t digits, int ndigits, long e10, double *out)
{
    if (ndigits > 19)
        return 0;
    if (digits <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
        double v = e10 < 0 ? (double)digits / pow10_exact[-e10] : (double)digits * pow10_exact[e10];
        *out = neg ? -v : v;
        return 1;
    }
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
    static const long double pow10_ld[] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                           1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                           1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    if (e10 < -27 || e10 > 27 || digits == 0)
        return 0;
    long double v = e10 < 0 ? (long double)digits / pow10_ld[-e10] : (long double)digits * pow10_ld[e10];
    uint64_t sig; /* the x87 format: the 64-bit significand first, then sign and exponent */
    memcpy(&sig, &v, sizeof sig);
    unsigned low = (unsigned)(sig & 0x7ff);
    if (low >= 0x3ff && low <= 0x401)
        return 0;
    *out = neg ? -(double)v : (double)v;
    return 1;
#else
    return 0;
#endif
}

/* One JSON number at p into x (x->is_int as jansson tells integers from reals); past it, or NULL
 * if it is no number by JSON's grammar or jansson would refuse it (out of range). */
static const char *number(const char *p, const char *end, struct gr_number *x)
{
    const char *s = p;
    int is_int = 1, neg = 0, ndigits = 0, nfrac = 0;
    uint64_t digits = 0;
    long exp = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p < end && *p == '0')
        p++, ndigits = 1;
    else if (p < end && *p >= '1' && *p <= '9')
        for (; p < end && *p >= '0' && *p <= '9'; p++, ndigits++)
            digits = digits * 10 + (uint64_t)(*p - '0'); /* wraps past 19 digits: not used then */
    else
        return NULL;
    if (p < end && *p == '.') {
        is_int = 0;
        if (++p >= end || *p < '0' || *p > '9')
            return NULL;
        for (; p < end && *p >= '0' && *p <= '9'; p++, ndigits++, nfrac++)
            digits = digits * 10 + (uint64_t)(*p - '0');
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        int eneg = 0;
        if (++p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p >= end || *p < '0' || *p > '9')
            return NULL;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (exp < 100000) /* beyond it only strtod's answer (0 or overflow) matters */
                exp = exp * 10 + (*p - '0');
        exp = eneg ? -exp : exp;
    }
    if (p - s >= TOKEN_MAX)
        return NULL;
    x->is_int = is_int;
    if (is_int && ndigits <= 18) {
        x->iv = neg ? -(long long)digits : (long long)digits;
        return p;
    }
    if (!is_int && fast_real(neg, digits, ndigits, exp - nfrac, &x->dv))
        return p;
    char tok[TOKEN_MAX];
    memcpy(tok, s, (size_t)(p - s));
    tok[p - s] = 0;
    errno = 0;
    if (is_int) {
        x->iv = strtoll(tok, NULL, 10);
        if (errno == ERANGE) /* jansson: "too big integer" */
            return NULL;
    } else {
        x->dv = strtod(tok, NULL); /* gpured keeps the C locale: '.' is the decimal point */
        if (errno == ERANGE && isinf(x->dv)) /* jansson: "real number overflow"; underflow is taken */
            return NULL;
    }
    return p;
}

static int grow(struct gr_numbers *out, size_t *cap)
{
    if (out->n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 1024;
    struct gr_number *v = realloc(out->v, c * sizeof *v);
    if (!v)
        return -1;
    out->v = v;
    *cap = c;
    return 0;
}

/* The numbers of the row at p ('['), appended to out; past its ']', or NULL. */
static const char *row(const char *p, const char *end, struct gr_numbers *out, size_t *cap)
{
    p = ws(p + 1, end);
    for (;;) {
        if (grow(out, cap) || !(p = number(p, end, &out->v[out->n])))
            return NULL;
        out->n++;
        p = ws(p, end);
        if (p < end && *p == ']')
            return p + 1;
        if (p >= end || *p != ',')
            return NULL;
        p = ws(p + 1, end);
    }
}

/* The array at p: numbers, or rows of numbers all as long as the first; past it, or NULL. */
static const char *array(const char *p, const char *end, struct gr_numbers *out)
{
    size_t cap = 0;
    const char *q = ws(p + 1, end);
    if (q >= end || *q != '[') {
        out->ndim = 1;
        if (!(p = row(p, end, out, &cap)))
            return NULL;
        out->shape[0] = (int64_t)out->n;
        out->shape[1] = 1;
        return p;
    }
    out->ndim = 2;
    for (int64_t rows = 1;; rows++) {
        size_t before = out->n;
        if (!(q = row(q, end, out, &cap)))
            return NULL;
        if (rows == 1)
            out->shape[1] = (int64_t)(out->n - before);
        else if ((int64_t)(out->n - before) != out->shape[1]) /* ragged: jansson's path says so */
            return NULL;
        q = ws(q, end);
        if (q < end && *q == ']') {
            out->shape[0] = rows;
            return q + 1;
        }
        if (q >= end || *q != ',')
            return NULL;
        q = ws(q + 1, end);
        if (q >= end || *q != '[')
            return NULL;
    }
}

/* Where the top-level member "data" of the object at body begins; NULL if there is none or it
 * cannot be told. */
static const char *find_data(const char *p, const char *end)
{
    p = ws(p, end);
    if (p >= end || *p != '{')
        return NULL;
    p = ws(p + 1, end);
    while (p < end && *p == '"') {
        const char *key = p + 1, *k_end = plain_string(p, end);
        if (!k_end)
            return NULL;
        p = ws(k_end, end);
        if (p >= end || *p != ':')
            return NULL;
        p = ws(p + 1, end);
        if (k_end - 1 - key == 4 && !memcmp(key, "data", 4))
            return p;
        if (!(p = skip_value(p, end)))
            return NULL;
        p = ws(p, end);
        if (p >= end || *p != ',')
            return NULL;
        p = ws(p + 1, end);
    }
    return NULL;
}

char *gr_numbers_take(const char *body, size_t len, struct gr_numbers *out, size_t *rest_len)
{
    *out = (struct gr_numbers){0};
    const char *end = body + len, *at = find_data(body, end);
    const char *past = at && at < end && *at == '[' ? array(at, end, out) : NULL;
    size_t head = past ? (size_t)(at - body) : 0, tail = past ? (size_t)(end - past) : 0;
    char *rest = past ? malloc(head + 1 + tail) : NULL;
    if (!rest) {
        gr_numbers_free(out);
        return NULL;
    }
    memcpy(rest, body, head);
    rest[head] = '0';
    memcpy(rest + head + 1, past, tail);
    *rest_len = head + 1 + tail;
    return rest;
}

void gr_numbers_free(struct gr_numbers *x)
{
    free(x->v);
    *x = (struct gr_numbers){0};
}
