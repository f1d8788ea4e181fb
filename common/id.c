/* id.c: time-ordered resource ids; one atomic counter shared by every thread and every prefix. */
#include "common/id.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Ids are microseconds since the epoch, made strictly increasing: time-ordered, so the store
 * lists newest first by id alone, and unique across restarts of one server. Replicas sharing a
 * store each take the ids of one residue modulo the stride, so none makes another's. */
static _Atomic uint64_t last_id;
static uint64_t stride = 1, slot;

void gr_id_space(unsigned n, unsigned k)
{
    stride = n ? n : 1;
    slot = k % stride;
}

static uint64_t next_id(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    uint64_t prev = atomic_load(&last_id), want;
    do {
        want = now > prev ? now : prev + 1;
        want += (slot + stride - want % stride) % stride; /* the next of this replica's residue */
    } while (!atomic_compare_exchange_weak(&last_id, &prev, want));
    return want;
}

void gr_id_text(char prefix, uint64_t n, char out[GR_ID_LEN + 1])
{
    out[0] = prefix, out[1] = '_', out[GR_ID_LEN] = '\0';
    for (int k = GR_ID_LEN - 1; k >= 2; k--, n >>= 4)
        out[k] = "0123456789abcdef"[n & 15];
}

void gr_id_new(char prefix, char *buf, size_t len)
{
    if (len > GR_ID_LEN)
        gr_id_text(prefix, next_id(), buf);
    else if (len)
        buf[0] = '\0';
}

int gr_id_valid(const char *id, char prefix)
{
    if (id[0] != prefix || id[1] != '_' || strlen(id) != GR_ID_LEN)
        return 0;
    for (const char *c = id + 2; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return 0;
    return 1;
}
