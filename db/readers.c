/* readers.c: per-thread store connections (readers.h). Each is its thread's; the list, under
 * the set's mutex, is for closing what threads still hold at the end. */
#include "db/readers.h"

#include <stdlib.h>

struct gr_reader {
    struct gr_reader *prev, *next;
    struct gr_readers *rs;
    void *conn;
};

/* Thread-exit destructor. */
static void drop(void *arg)
{
    struct gr_reader *r = arg;
    struct gr_readers *rs = r->rs;
    pthread_mutex_lock(&rs->mu);
    if (r->prev)
        r->prev->next = r->next;
    else
        rs->list = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&rs->mu);
    rs->close(r->conn);
    free(r);
}

int gr_readers_init(struct gr_readers *rs, void (*close)(void *conn), struct gr_err *e)
{
    rs->list = NULL;
    rs->close = close;
    pthread_mutex_init(&rs->mu, NULL);
    if (!(rs->have_key = pthread_key_create(&rs->key, drop) == 0))
        return gr_fail(e, GR_EIO, NULL, "store: out of thread-specific keys");
    return GR_OK;
}

void *gr_readers_mine(struct gr_readers *rs)
{
    struct gr_reader *r = rs->have_key ? pthread_getspecific(rs->key) : NULL;
    return r ? r->conn : NULL;
}

int gr_readers_add(struct gr_readers *rs, void *conn, struct gr_err *e)
{
    struct gr_reader *r = calloc(1, sizeof *r);
    if (!r || pthread_setspecific(rs->key, r) != 0) {
        free(r);
        rs->close(conn);
        return gr_fail(e, GR_EIO, NULL, "store: cannot keep a read connection for this thread");
    }
    r->rs = rs;
    r->conn = conn;
    pthread_mutex_lock(&rs->mu);
    r->next = rs->list;
    if (r->next)
        r->next->prev = r;
    rs->list = r;
    pthread_mutex_unlock(&rs->mu);
    return GR_OK;
}

void gr_readers_end(struct gr_readers *rs)
{
    while (rs->list) {
        struct gr_reader *r = rs->list;
        rs->list = r->next;
        rs->close(r->conn);
        free(r);
    }
    if (rs->have_key)
        pthread_key_delete(rs->key);
    rs->have_key = 0;
    pthread_mutex_destroy(&rs->mu);
}
