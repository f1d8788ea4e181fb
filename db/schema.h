/* schema.h: the store's SQL text, private to db/ and its tests (which check the plans).
 * Constant data; safe from any thread. */
#ifndef GR_SCHEMA_H
#define GR_SCHEMA_H

/* Migration i takes the database from PRAGMA user_version i to i + 1. */
extern const char *const gr_schema_steps[];
extern const int gr_schema_nsteps;

/* Every statement the store prepares: a reader connection prepares [0, GR_SQL_NREAD), the
 * writer [GR_SQL_NREAD, GR_SQL_N). The list bits: GR_SQL_LIST_ALL | 1 (status) | 2 (op),
 * one statement per filter combination so each is served by its own index; their
 * parameters are ?1 before (exclusive), ?2 limit, ?3 status, ?4 op. The row writes number
 * theirs alike, ?1 id, ?2 status, ?3 doc, ?4 op, ?5 created, each naming those it needs
 * (GR_SQL_INPUT, bound apart, is the exception). */
enum gr_sql_id {
    GR_SQL_LIST_ALL = 0,
    GR_SQL_LIST_STATUS = 1,
    GR_SQL_LIST_OP = 2,
    GR_SQL_LIST_OP_STATUS = 3,
    GR_SQL_GET,     /* ?1 id -> doc, status */
    GR_SQL_PENDING, /* -> id, doc, input */
    GR_SQL_PING,
    GR_SQL_DS_LIST, /* ?1 before, ?2 limit -> id, doc */
    GR_SQL_DS_GET,  /* ?1 id -> doc */
    GR_SQL_NREAD,
    GR_SQL_INSERT = GR_SQL_NREAD, /* ?1 id, ?2 status, ?3 doc, ?4 op, ?5 created */
    GR_SQL_INPUT,                 /* ?1 id, ?2 data */
    GR_SQL_UPDATE,                /* ?1 id, ?2 status, ?3 doc */
    GR_SQL_DS_INSERT,             /* ?1 id, ?3 doc, ?5 created */
    GR_SQL_DS_DELETE,             /* ?1 id */
    GR_SQL_BEGIN,
    GR_SQL_COMMIT,
    GR_SQL_ROLLBACK,
    GR_SQL_N
};
extern const char *const gr_sql[GR_SQL_N];

#endif
