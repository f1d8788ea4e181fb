/* npy.c: the .npy preamble: a strict reader of its header (a Python dict literal) and a writer of
 * version 1.0 preambles. Pure functions; safe from any thread. */
#include "api/npy.h"

#include <stdio.h>
#include <string.h>

static const char magic[6] = "\x93NUMPY";
static const char *const codes[GR_BOOL + 1] = {"<i4", "<i8", "<f4", "<f8", "|b1"}; /* bool: written only */
#define SUPPORTED "<i4, <i8, <f4 or <f8 (int32, int64, float32, float64), little-endian, C order"

int gr_npy_need(const void *buf, size_t n, size_t *need, struct gr_err *e)
{
    const unsigned char *b = buf;
    *need = 0;
    if (memcmp(b, magic, n < sizeof magic ? n : sizeof magic))
        return gr_fail(e, GR_EINVAL, NULL, "not a .npy file: it does not start with the bytes \\x93NUMPY");
    if (n < 8)
        return GR_OK;
    if (b[6] < 1 || b[6] > 3 || b[7] != 0)
        return gr_fail(e, GR_EINVAL, NULL, ".npy format version %u.%u: versions 1.0, 2.0 and 3.0 are read", b[6],
                       b[7]);
    size_t lenbytes = b[6] == 1 ? 2 : 4, hlen = 0;
    if (n < 8 + lenbytes)
        return GR_OK;
    for (size_t k = lenbytes; k-- > 0;)
        hlen = hlen << 8 | b[8 + k];
    if (hlen > GR_NPY_MAX_HEADER)
        return gr_fail(e, GR_EINVAL, NULL, "the .npy header is %zu bytes long; at most %d are read", hlen,
                       GR_NPY_MAX_HEADER);
    *need = 8 + lenbytes + hlen;
    return GR_OK;
}

/* --- the header dict literal --- */

struct scan {
    const char *p, *end, *start;
    struct gr_err *e;
};

struct str {
    const char *p;
    size_t n;
};

static void ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n'))
        s->p++;
}

static int eat(struct scan *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

static int not_dict(struct scan *s, const char *why)
{
    return gr_fail(s->e, GR_EINVAL, NULL, "the .npy header is not a dict literal: %s (at byte %td of the header)",
                   why, s->p - s->start);
}

/* A quoted string without escapes (all a header needs); 0 if there is none here. */
static int string(struct scan *s, struct str *out)
{
    ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return 0;
    char q = *s->p++;
    out->p = s->p;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || (unsigned char)*s->p < 0x20)
            return 0;
        s->p++;
    }
    if (s->p >= s->end)
        return 0;
    out->n = (size_t)(s->p++ - out->p);
    return 1;
}

static int is(const struct str *v, const char *text) { return v->n == strlen(text) && !memcmp(v->p, text, v->n); }

/* v for a message: printable ASCII only, so the problem stays valid JSON text. */
static const char *shown(const struct str *v, char *buf, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < v->n && k + 1 < len; i++)
        buf[k++] = v->p[i] >= 0x20 && v->p[i] < 0x7f ? v->p[i] : '?';
    buf[k] = 0;
    return buf;
}

/* A whole number (Python 2's trailing L allowed); *big set when it does not fit in int64. */
static int integer(struct scan *s, uint64_t *v, int *big)
{
    ws(s);
    const char *first = s->p;
    uint64_t x = 0;
    for (; s->p < s->end && *s->p >= '0' && *s->p <= '9'; s->p++)
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(*s->p - '0'), &x))
            *big = 1;
    if (s->p == first || (*first == '0' && s->p - first > 1)) /* Python has no leading zeros */
        return 0;
    if (s->p < s->end && *s->p == 'L')
        s->p++;
    *big |= x > INT64_MAX;
    *v = x;
    return 1;
}

struct dims {
    int ndim, big; /* big: a dimension or the product does not fit */
    uint64_t d[GR_MAX_DIMS];
    size_t count;
};

static int shape(struct scan *s, struct dims *out)
{
    *out = (struct dims){.count = 1};
    if (!eat(s, '('))
        return not_dict(s, "'shape' must be a tuple like (rows, cols)");
    if (eat(s, ')'))
        return GR_OK;
    for (;;) {
        uint64_t v;
        if (!integer(s, &v, &out->big))
            return not_dict(s, "a dimension of 'shape' is not a whole number");
        if (out->ndim < GR_MAX_DIMS)
            out->d[out->ndim] = v;
        if (out->ndim < 64)
            out->ndim++;
        if (gr_mul_size(out->count, (size_t)v, &out->count))
            out->big = 1;
        int comma = eat(s, ',');
        if (eat(s, ')')) {
            if (out->ndim == 1 && !comma)
                return not_dict(s, "'shape' (n) is a number, not a tuple: write (n,)");
            return GR_OK;
        }
        if (!comma)
            return not_dict(s, "expected ',' or ')' in 'shape'");
    }
}

static int boolean(struct scan *s, int *out)
{
    ws(s);
    for (int v = 0; v <= 1; v++) {
        const char *word = v ? "True" : "False";
        size_t n = strlen(word);
        if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, word, n)) {
            s->p += n;
            *out = v;
            return GR_OK;
        }
    }
    return not_dict(s, "'fortran_order' must be True or False");
}

/* One "key: value" of the dict into whichever of descr, fortran, dims it names. */
static int entry(struct scan *s, struct str *descr, int *fortran, struct dims *dims)
{
    struct str key;
    char buf[48];
    if (!string(s, &key))
        return not_dict(s, "expected a quoted key");
    if (!eat(s, ':'))
        return not_dict(s, "expected ':' after a key");
    if ((is(&key, "descr") && descr->p) || (is(&key, "fortran_order") && *fortran >= 0) ||
        (is(&key, "shape") && dims->ndim >= 0))
        return not_dict(s, "a key appears twice");
    if (is(&key, "descr")) {
        ws(s);
        if (s->p < s->end && *s->p == '[')
            return gr_fail(s->e, GR_EMEDIA, NULL, "structured dtypes are not supported: send " SUPPORTED);
        return string(s, descr) ? GR_OK : not_dict(s, "'descr' must be a string like '<f4'");
    }
    if (is(&key, "fortran_order"))
        return boolean(s, fortran);
    if (is(&key, "shape"))
        return shape(s, dims);
    char why[160];
    snprintf(why, sizeof why, "unknown key '%s' (only 'descr', 'fortran_order' and 'shape')",
             shown(&key, buf, sizeof buf));
    return not_dict(s, why);
}

static int dtype_of(const struct str *descr, int *dtype, struct gr_err *e)
{
    char buf[48];
    struct str code = *descr;
    if (code.n && strchr("<|=", code.p[0]))
        code.p++, code.n--;
    for (*dtype = 0; *dtype < GR_NDTYPES; ++*dtype)
        if (is(&code, codes[*dtype] + 1)) /* past its byte order */
            return GR_OK;
    return gr_fail(e, GR_EMEDIA, NULL, "%sdtype '%s' is not supported: send " SUPPORTED,
                   descr->n && (descr->p[0] == '>' || descr->p[0] == '!') ? "big-endian " : "",
                   shown(descr, buf, sizeof buf));
}

int gr_npy_parse(const void *buf, size_t n, struct gr_npy *h, struct gr_err *e)
{
    size_t need;
    int rc = gr_npy_need(buf, n, &need, e);
    if (rc)
        return rc;
    if (!need || n < need)
        return gr_fail(e, GR_EINVAL, NULL, "the .npy ends inside its header (after %zu bytes)", n);
    size_t at = ((const unsigned char *)buf)[6] == 1 ? 10 : 12;
    const char *text = (const char *)buf + at;
    struct scan s = {text, text + (need - at), text, e};
    struct str descr = {0};
    int fortran = -1;
    struct dims dims = {.ndim = -1};
    if (!eat(&s, '{'))
        return not_dict(&s, "it does not start with '{'");
    while (!eat(&s, '}')) {
        if ((rc = entry(&s, &descr, &fortran, &dims)))
            return rc;
        if (!eat(&s, ',')) {
            if (!eat(&s, '}'))
                return not_dict(&s, "expected ',' or '}'");
            break;
        }
    }
    ws(&s);
    if (s.p != s.end)
        return not_dict(&s, "something follows the closing '}'");
    if (!descr.p || fortran < 0 || dims.ndim < 0)
        return not_dict(&s, !descr.p ? "no 'descr'" : fortran < 0 ? "no 'fortran_order'" : "no 'shape'");
    if ((rc = dtype_of(&descr, &h->dtype, e)))
        return rc;
    if (fortran)
        return gr_fail(e, GR_EUNPROC, NULL,
                       "Fortran-order arrays are not supported: send the array in C order "
                       "(numpy.ascontiguousarray)");
    if (dims.ndim > GR_MAX_DIMS)
        return gr_fail(e, GR_EUNPROC, NULL, "the array has %d dimensions; up to %d are supported", dims.ndim,
                       GR_MAX_DIMS);
    if (dims.big || gr_mul_size(dims.count, gr_dtype_size(h->dtype), &h->bytes))
        return gr_fail(e, GR_EUNPROC, NULL, "the .npy's shape holds more bytes than can be addressed");
    h->ndim = dims.ndim;
    for (int d = 0; d < GR_MAX_DIMS; d++)
        h->shape[d] = d < dims.ndim ? (int64_t)dims.d[d] : 1;
    h->count = dims.count;
    h->data_at = need;
    return GR_OK;
}

size_t gr_npy_header(int dtype, int ndim, const int64_t *shape, char *buf, size_t len)
{
    char dims[GR_MAX_DIMS * 22 + 4];
    if (dtype < 0 || dtype > GR_BOOL || ndim < 0 || ndim > GR_MAX_DIMS || len < GR_NPY_HEADER_MAX)
        return 0;
    size_t at = (size_t)snprintf(dims, sizeof dims, "(");
    for (int d = 0; d < ndim; d++)
        at += (size_t)snprintf(dims + at, sizeof dims - at, d ? ", %lld" : "%lld", (long long)shape[d]);
    snprintf(dims + at, sizeof dims - at, ndim == 1 ? ",)" : ")");
    int n = snprintf(buf + 10, len - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", codes[dtype],
                     dims);
    size_t total = n < 0 ? len + 1 : (10 + (size_t)n + 1 + 63) / 64 * 64; /* + 1: the closing newline */
    if (total > len)
        return 0;
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    memcpy(buf, magic, sizeof magic);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    return total;
}
