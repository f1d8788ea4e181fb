/* readers.h: each reading thread's own connection to a store (a thread-specific), and the list
 * of them all so that close can end them: the same for the SQLite and PostgreSQL backends. A
 * connection is the backend's (void *); its thread alone uses it. */
#ifndef GR_READERS_H
#define GR_READERS_H

#include "common/gr.h"

#include <pthread.h>

struct gr_reader;

struct gr_readers {
    pthread_key_t key;
    int have_key;
    pthread_mutex_t mu; /* the list: taken only when a thread adds or drops its connection */
    struct gr_reader *list;
    void (*close)(void *conn);
};

/* Ready rs, whose connections close(conn) ends (at a thread's exit, or gr_readers_end). GR_OK or
 * GR_EIO with e filled. */
int gr_readers_init(struct gr_readers *rs, void (*close)(void *conn), struct gr_err *e);

/* The calling thread's connection, or NULL before it added one. */
void *gr_readers_mine(struct gr_readers *rs);

/* Make conn the calling thread's. GR_OK, or GR_EIO (conn is then closed). */
int gr_readers_add(struct gr_readers *rs, void *conn, struct gr_err *e);

/* Close every connection, and rs with them. Not while a thread that read is exiting. */
void gr_readers_end(struct gr_readers *rs);

#endif
