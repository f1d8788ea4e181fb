/* fuzz_npy.c: libFuzzer target: the input as a .npy upload (POST /v1/datasets): its preamble
 * gathered as api/datasets.c take_header does (gr_npy_need on the first 10 or 12 bytes, then
 * gr_npy_parse on exactly the preamble), and as a one-shot job body (gr_npy_parse on all of it).
 * An accepted header is written back with gr_npy_header and must read the same. */
#include "api/npy.h"
#include "fuzz.h"

#include <string.h>

static void check_header(const struct gr_npy *h, size_t n)
{
    FUZZ_CHECK(h->dtype >= 0 && h->dtype < GR_NDTYPES && h->ndim >= 0 && h->ndim <= GR_MAX_DIMS && h->data_at <= n);
    size_t count = 1;
    for (int d = 0; d < GR_MAX_DIMS; d++) {
        FUZZ_CHECK(d < h->ndim ? h->shape[d] >= 0 : h->shape[d] == 1);
        count *= (size_t)h->shape[d];
    }
    FUZZ_CHECK(h->count == count && h->bytes == h->count * gr_dtype_size(h->dtype));
    char buf[GR_NPY_HEADER_MAX];
    struct gr_npy back;
    struct gr_err e = {0};
    size_t len = gr_npy_header(h->dtype, h->ndim, h->shape, buf, sizeof buf);
    FUZZ_CHECK(len && len % 64 == 0 && gr_npy_parse(buf, len, &back, &e) == GR_OK);
    FUZZ_CHECK(back.dtype == h->dtype && back.ndim == h->ndim && !memcmp(back.shape, h->shape, sizeof h->shape) &&
               back.count == h->count && back.data_at == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* take_header: a buffer of GR_NPY_MAX_HEADER + 12, filled to 10 bytes (version 1 says its
     * length there), 12 (versions 2, 3), then to what gr_npy_need said */
    static unsigned char head[GR_NPY_MAX_HEADER + 12];
    size_t have = 0, need = 0, at = 0;
    struct gr_err e = {0};
    int rc = GR_OK;
    while (at < size) {
        size_t want = need ? need : have < 10 ? 10 : 12;
        size_t k = want - have < size - at ? want - have : size - at;
        memcpy(head + have, data + at, k);
        have += k;
        at += k;
        if (!need && (rc = gr_npy_need(head, have, &need, &e)))
            break;
        FUZZ_CHECK(!need || (need >= have && need <= sizeof head));
        if (!need || have < need)
            continue;
        struct gr_npy h;
        if ((rc = gr_npy_parse(head, need, &h, &e)) == GR_OK) {
            FUZZ_CHECK(h.data_at == need);
            check_header(&h, need);
        }
        break;
    }
    if (rc)
        fuzz_check_refusal(rc, &e);

    /* a one-shot job's body: the whole input, values after the preamble */
    struct gr_npy h;
    e = (struct gr_err){0};
    rc = gr_npy_parse(data, size, &h, &e);
    if (rc)
        fuzz_check_refusal(rc, &e);
    else
        check_header(&h, size);
    return 0;
}
