/* schema.h: the store's statements, named by gr_sql_id for both backends, and their SQL text
 * for each (sqlite_schema.c, pg_schema.c); private to db/ and its tests (which check the plans).
 * Constant data; safe from any thread. */
#ifndef GR_SCHEMA_H
#define GR_SCHEMA_H

/* Migration i takes the database from version i to i + 1: SQLite's PRAGMA user_version,
 * PostgreSQL's gpured_schema table. */
extern const char *const gr_schema_steps[], *const gr_pg_schema_steps[];
extern const int gr_schema_nsteps, gr_pg_schema_nsteps;

/* Every statement the store prepares: a reader connection prepares [0, GR_SQL_NREAD), the
 * writer [GR_SQL_NREAD, GR_SQL_N). The list bits: GR_SQL_LIST_ALL | 1 (status) | 2 (op) |
 * 4 (tenant) | 8 (the status is "succeeded", which the status indexes leave out: with 1 only),
 * one statement for each filter combination that one index serves: every job index leads with
 * the tenant, and a tenant's index names an op or a status other than "succeeded" (store.c merges
 * the tenants' or the ops' pages for the other lists, sqlite_schema.c says why); their
 * parameters are ?1 before (exclusive), ?2 limit, ?3 status, ?4 op, ?5 tenant. The writes
 * number theirs alike, ?1 id, ?2 status, ?3 doc, ?4 op, ?5 created, ?6 tenant, ?7 bytes,
 * ?8 idempotency key, ?9 its fingerprint, ?10 the job's epoch, ?11 the replica, ?12 its lease
 * seconds, ?13 the replica a job is offered to first (store_backend.h), ?14 a small input kept in its
 * job's row (GR_INLINE_INPUT_BYTES), each naming those it needs (GR_SQL_INPUT, bound apart, is the exception). PostgreSQL's text numbers them $1.. alike, every one a text
 * parameter (cast where it is not) but GR_SQL_INPUT's $2 (bytea). */
enum gr_sql_id {
    GR_SQL_LIST_ALL = 0,
    GR_SQL_LIST_STATUS = 1,
    GR_SQL_LIST_OP = 2,
    GR_SQL_LIST_OP_STATUS = 3,
    GR_SQL_LIST_TENANT = 4,    /* 4 to 7: the same with ?5 tenant */
    GR_SQL_LIST_SUCCEEDED = 8, /* 9, 11, 13, 15: a status filter of "succeeded" */
    GR_SQL_GET = 16,           /* ?1 id, ?2 tenant or NULL -> doc, status */
    GR_SQL_PENDING,         /* -> id, doc, input */
    GR_SQL_PING,
    GR_SQL_DS_LIST,        /* ?1 before, ?2 limit -> id, doc */
    GR_SQL_DS_LIST_TENANT, /* the same, ?5 tenant */
    GR_SQL_DS_GET,         /* ?1 id, ?2 tenant or NULL -> doc */
    GR_SQL_KEY_GET,        /* ?1 tenant, ?2 key, ?3 oldest created -> fingerprint, resource */
    GR_SQL_TENANT_BYTES,   /* -> tenant, bytes */
    GR_SQL_EXPIRED,        /* ?1 before id, ?2 limit -> id, doc */
    GR_SQL_EVENTS,         /* ?1 after seq (text), ?2 limit -> seq, the event as JSON, oldest first */
    GR_SQL_EVENTS_LAST,    /* the same, newest first, the event "" (SQLite: a row's last seq; ?2 1 reads the newest) */
    GR_SQL_EVENTS_OWN,     /* ?5 tenant, ?1 one of its own event numbers (text) -> "", "newest last seq tseq"
                            * (gr_store_events_own) */
    GR_SQL_TENANTS,        /* every tenant that has jobs -> tenant, tenant */
    GR_SQL_OPS,            /* ?5 tenant: every op it has jobs of -> op, op */
    /* shared stores (PostgreSQL) only, on the cluster thread's connection: $11 owner, $12 lease
     * seconds (from the database's clock), $2 limit */
    GR_SQL_RENEW,   /* the owner's queued and running jobs held for another lease */
    GR_SQL_CLAIM,   /* at most $2 jobs whose lease ran out, or offered the owner first, now the owner's;
                     * $3 'cpu': only those asking for the CPU, 'gpu': only the others, NULL: any
                     * -> id, doc, input, epoch */
    GR_SQL_RELEASE, /* the owner's queued jobs but those of array $2 let go now */
    GR_SQL_HELD,    /* the owner's queued and running jobs, as the store has them -> id, doc */
    GR_SQL_LET_GO,  /* the owner's jobs of array $2 let go now */
    GR_SQL_CANCEL,  /* ?1 id, ?2 tenant or NULL, ?3 the time: a queued job no live replica holds -> doc */
    GR_SQL_CANCEL_ASK, /* $3 a job's id: its holder is asked to cancel it */
    GR_SQL_KEY_HOLD,   /* $6 tenant, $8 key, $11 the replica, $12 seconds: held for it, unless a live hold is
                        * another's -> a row if held */
    GR_SQL_KEY_UNHOLD, /* $6 tenant, $8 key, $11 the replica */
    GR_SQL_DS_JOBS,    /* $3 a dataset's id -> how many stored queued or running jobs name it, "" */
    GR_SQL_SLOT,    /* $11 the replica, $12 lease seconds, $2 the stride: an id residue no other live replica has -> n */
    GR_SQL_ANNOUNCE, /* $11 the replica, $3 its devices (JSON), $12 lease seconds: kept until then */
    GR_SQL_REPLICAS, /* the replicas whose lease runs -> id, doc */
    GR_SQL_LEAVE,    /* $11 the replica gone */
    GR_SQL_INTENT,      /* $3 a dataset's id, $11 the replica: its file is about to be made there */
    GR_SQL_INTENT_DROP, /* $3 a dataset's id: its file was removed unkept */
    GR_SQL_FILE_NAMED,  /* $3 a dataset's id: a row, or a live replica's intent, names its file -> a row
                         * if one does (an intent whose replica's lease ran out goes) */
    GR_SQL_INTENTS_PURGE, /* every intent whose replica's lease ran out goes */
    GR_SQL_EVENTS_NUMBER, /* PostgreSQL: number the events committed since the last call (NULL in SQLite) */
    GR_SQL_NREAD,
    GR_SQL_INSERT = GR_SQL_NREAD, /* ?1 id, ?2 status, ?3 doc, ?4 op, ?5 created, ?6 tenant
                                   * (PostgreSQL: $11 owner, $12 lease, $13 prefer) */
    GR_SQL_INPUT,                 /* ?1 id, ?2 data */
    GR_SQL_KEY_INSERT,            /* ?1 resource id, ?5 created, ?6 tenant, ?8 key, ?9 fingerprint */
    GR_SQL_UPDATE,                /* ?1 id, ?2 status, ?3 doc */
    GR_SQL_DS_INSERT,             /* ?1 id, ?3 doc, ?5 created, ?6 tenant, ?7 bytes (PostgreSQL: in its
                                   * intent's place, GR_SQL_INTENT; no row without one) */
    GR_SQL_DS_INSERT_KEPT,        /* as GR_SQL_DS_INSERT, a job's kept result (PostgreSQL: fenced, as the
                                   * job's final state is: stored only while $14 the job is not stored
                                   * yet or still held under $10 its epoch; else no row) */
    GR_SQL_DS_DELETE,             /* ?1 id */
    GR_SQL_JOB_DELETE,            /* ?1 id */
    GR_SQL_KEYS_EXPIRE,           /* ?5 created before */
    GR_SQL_DS_USED,               /* ?1 dataset id, ?5 when a job that read it ended */
    GR_SQL_DS_DIGEST,             /* ?1 dataset id, ?3 the sha256 (hex) of values stored before it */
    /* SQLite's writer writes the events itself (PostgreSQL's triggers do; NULL there): */
    GR_SQL_EVENT_JOB,             /* ?1 a job's id, ?2 its status as stored now, ?6 its tenant: as an event
                                   * (SQLite: ?15 a run of such jobs' ids, a JSON array, or NULL) */
    GR_SQL_EVENT_DS,              /* ?1 dataset id, ?2 created or deleted (before the delete) */
    GR_SQL_EVENTS_PRUNE_KEEP,     /* SQLite: each tenant's newest number among the events GR_SQL_EVENTS_PRUNE drops */
    GR_SQL_EVENTS_PRUNE,          /* all but the newest 1,000,000 */
    GR_SQL_INPUT_DONE,            /* ?1 a job stored as ended: its input goes */
    /* PostgreSQL's writer stores a batch's like writes in one statement each (NULL in SQLite),
     * its parameters arrays (in binary), one element a write: */
    GR_SQL_INSERT_MANY,           /* $1 ids, $2 statuses, $3 docs, $4 ops, $5 created, $6 tenants,
                                   * $7 owners, $8 lease seconds, $9 prefers, $10 small inputs (bytea;
                                   * NULL where none, or where GR_SQL_INPUT stores it) */
    GR_SQL_UPDATE_MANY,           /* $1 ids, $2 statuses, $3 docs, $4 epochs -> the place in them of
                                   * each job changed (from 1) */
    GR_SQL_DS_USED_MANY,          /* $1 dataset ids, $2 when a job that read each last ended */
    GR_SQL_EVENTS_NEW,            /* $1 new jobs' ids; each run of like ones (one status, one tenant):
                                   * $2 its first's place in $1 (from 1), $3 its length, $4 status,
                                   * $5 tenant -> an events row a run */
    GR_SQL_OFFERED,               /* $1 each replica new jobs are offered to first ('': any): told */
    GR_SQL_BEGIN,
    GR_SQL_COMMIT,
    GR_SQL_ROLLBACK,
    GR_SQL_N
};
extern const char *const gr_sql[GR_SQL_N], *const gr_pg_sql[GR_SQL_N];

/* The tenants (GR_SQL_TENANTS) and a tenant's ops (GR_SQL_OPS, T: the dialect's ?5 or $5) that
 * have jobs, in both dialects: a skip over jobs_tenant_op, one seek a tenant (or op) however many
 * jobs each has (SELECT DISTINCT would read the whole index). */
/* SQLite stores a commit's like job events as one row of at most this many consecutive seqs
 * (sqlite_schema.c says why), so its reads look back this far for the row holding a seq. */
#define GR_SQ_EVENT_RUN 1024
#define GR_STR_(x) #x
#define GR_STR(x) GR_STR_(x)

#define GR_SQL_TENANT_SKIP                                                                                         \
    "WITH RECURSIVE t(x) AS (SELECT min(tenant) FROM jobs UNION ALL"                                                \
    " SELECT (SELECT min(tenant) FROM jobs WHERE tenant > t.x) FROM t WHERE t.x IS NOT NULL)"
#define GR_SQL_TENANTS_TEXT GR_SQL_TENANT_SKIP " SELECT x, x FROM t WHERE x IS NOT NULL"
#define GR_SQL_OPS_TEXT(T)                                                                                         \
    "WITH RECURSIVE o(x) AS (SELECT min(op) FROM jobs WHERE tenant = " T " UNION ALL"                              \
    " SELECT (SELECT min(op) FROM jobs WHERE tenant = " T " AND op > o.x) FROM o WHERE o.x IS NOT NULL)"            \
    " SELECT x, x FROM o WHERE x IS NOT NULL"

#endif
