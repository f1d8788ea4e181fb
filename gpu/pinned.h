/* pinned.h: datasets' files kept mapped and page-locked (cudaHostRegister), so that a job reading
 * one from the host copies it by DMA straight out of the page cache at the bus's speed instead of
 * through a lane's staging ring. One registry for every GPU (registrations are portable), under
 * its own mutex: lane threads take and give, any thread drops (DELETE) or reads the counters. */
#ifndef GR_PINNED_H
#define GR_PINNED_H

#include <stddef.h>
#include <stdint.h>

struct gr_pin;

/* Keep at most cap bytes registered (least recently used let go first); 0 none. Once, before
 * any take. */
void gr_pin_init(int64_t cap);

/* Dataset id's first bytes, registered, read from fd (its file): the mapping to copy from, with
 * *pin to give back once the copy has finished; NULL (use the ring) when it is not registered
 * yet. A dataset is registered the second time a job reads it from the host, by that job's lane
 * (about 29 ms a GiB, measured on the H200): one read alone never pays for it. */
const void *gr_pin_take(const char *id, int fd, size_t bytes, struct gr_pin **pin);
void gr_pin_give(struct gr_pin *pin);

/* Let dataset id's registration go (now, or when its last copy gives it back). */
void gr_pin_drop(const char *id);

/* Let every registration go (at shutdown, when no job runs; more takes may follow). */
void gr_pin_end(void);

/* Bytes registered now, and copies served from registrations so far. */
void gr_pin_stats(int64_t *bytes, int64_t *hits);

#endif
