/* sqlite_schema.c: the SQLite store's SQL: migrations on PRAGMA user_version and every
 * statement it prepares. Constant data; safe from any thread. */
#include "db/schema.h"

/* jobs holds only small rows (the job's JSON) keyed by a time-ordered id, so it is
 * WITHOUT ROWID: the id is the clustered key, appends go to its right edge and no separate
 * id index has to be kept up. Inputs live apart in job_inputs so that gets and list pages
 * never page through big blobs; that table keeps its rowid since WITHOUT ROWID suits only
 * small rows. An input of at most GR_INLINE_INPUT_BYTES bytes (a batch's jobs) is kept in its
 * job's row instead, until the job ends: a row of its own cost 15% of a 100k batch's commit. */
/* The time now as epoch seconds (SQLite 3.40 has no unixepoch('subsec')). */
#define SQ_NOW "((julianday('now') - 2440587.5) * 86400.0)"
/* The condition of the status indexes (they leave succeeded jobs out: the last migration says
 * why). A statement they serve names it: a planner cannot tell that status = ? is not that. */
#define NOT_SUCCEEDED "status <> 'succeeded'"

/* A job id's number (common/id.c: "j_" and 16 hex digits), in SQL: the last migration's copy of
 * text keys. Bound values are converted in sqlite_store.c (bind_key). */
#define HEX(x, i) "((instr('0123456789abcdef', substr(" x ", " #i ", 1)) - 1) << (4 * (18 - " #i ")))"
#define ID_KEY_OF(x)                                                                                               \
    "(" HEX(x, 3) " | " HEX(x, 4) " | " HEX(x, 5) " | " HEX(x, 6) " | " HEX(x, 7) " | " HEX(x, 8) " | " HEX(x, 9)   \
    " | " HEX(x, 10) " | " HEX(x, 11) " | " HEX(x, 12) " | " HEX(x, 13) " | " HEX(x, 14) " | " HEX(x, 15) " | "     \
    HEX(x, 16) " | " HEX(x, 17) " | " HEX(x, 18) ")"
#define ID_KEY ID_KEY_OF("id")

const char *const gr_schema_steps[] = {
    "CREATE TABLE jobs(id TEXT PRIMARY KEY NOT NULL, status TEXT NOT NULL, op TEXT NOT NULL,"
    "                  doc TEXT NOT NULL, created REAL NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX jobs_status ON jobs(status, id);"
    "CREATE INDEX jobs_op ON jobs(op, id);"
    "CREATE INDEX jobs_op_status ON jobs(op, status, id);"
    "CREATE TABLE job_inputs(id TEXT PRIMARY KEY NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "                        data BLOB NOT NULL);",
    /* An input is only needed to run its job again after a crash: once the job has ended
     * it is dead weight, so it goes in the same transaction as the final status. */
    "CREATE TRIGGER job_inputs_done AFTER UPDATE OF status ON jobs"
    " WHEN NEW.status IN ('succeeded', 'failed', 'canceled')"
    " BEGIN DELETE FROM job_inputs WHERE id = NEW.id; END;",
    /* Datasets: like jobs, each row is its rendered resource under a time-ordered id; the values
     * live in <data_dir>/datasets/<id>.bin (db/dsfile.c), too big for rows. */
    "CREATE TABLE datasets(id TEXT PRIMARY KEY NOT NULL, doc TEXT NOT NULL, created REAL NOT NULL) WITHOUT ROWID;",
    /* Tenants: every row belongs to one; rows from before tokens to "default" (their docs say
     * so too, as new ones do). A tenant's lists are served by their own indexes. A dataset's
     * size is a column so that start-up can sum each tenant's bytes for its quota. */
    "ALTER TABLE jobs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';"
    "UPDATE jobs SET doc = json_set(doc, '$.tenant', 'default');"
    "CREATE INDEX jobs_tenant ON jobs(tenant, id);"
    "CREATE INDEX jobs_tenant_status ON jobs(tenant, status, id);"
    "CREATE INDEX jobs_tenant_op ON jobs(tenant, op, id);"
    "ALTER TABLE datasets ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';"
    "ALTER TABLE datasets ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
    "UPDATE datasets SET doc = json_set(doc, '$.tenant', 'default'), bytes = json_extract(doc, '$.bytes');"
    "CREATE INDEX datasets_tenant ON datasets(tenant, id);"
    /* Idempotency-Key: stored in the transaction that stores what the key created. */
    "CREATE TABLE idempotency(tenant TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
    "                         resource TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY(tenant, key)) WITHOUT ROWID;"
    "CREATE INDEX idempotency_created ON idempotency(created);",
    /* Events (GET /v1/events): each job's stored status and each dataset made or deleted, in
     * commit order (one writer), written by the writer in the transaction that makes the change
     * (GR_SQL_EVENT_*: a trigger per row cost 2.5 times the row's insert, measured; a 100k batch
     * took twice as long to commit). A seq is the rowid: one more than the largest, which is
     * never deleted (the pruning keeps the newest 1,000,000), so seqs only rise and a client's
     * Last-Event-ID stays meaningful. */
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, id TEXT NOT NULL,"
    "                    status TEXT NOT NULL, tenant TEXT NOT NULL, at REAL NOT NULL);"
    /* The same for an ended job's input: the writer deletes it (GR_SQL_INPUT_DONE) in the final
     * state's transaction; the trigger made 100k final states take 3.35 s instead of 1.1 s. */
    "DROP TRIGGER job_inputs_done;",
    /* When a job that read a dataset last ended (its resource's last_used_at), NULL if none has. */
    "ALTER TABLE datasets ADD COLUMN last_used REAL;"
    "UPDATE datasets SET doc = json_set(doc, '$.last_used_at', json('null'));",
    /* A small input in its job's row (NULL once the job has ended, or kept in job_inputs). */
    "ALTER TABLE jobs ADD COLUMN input BLOB;",
    /* The status indexes leave succeeded jobs out: most jobs end so, and a waited job is
     * written once, succeeded, so its row costs three index entries, not six; one that ends
     * later leaves three, where it moved three. A list of succeeded jobs goes through the id, op
     * or tenant index instead, past the jobs that ended otherwise. */
    "DROP INDEX jobs_status; DROP INDEX jobs_op_status; DROP INDEX jobs_tenant_status;"
    "CREATE INDEX jobs_status ON jobs(status, id) WHERE " NOT_SUCCEEDED ";"
    "CREATE INDEX jobs_op_status ON jobs(op, status, id) WHERE " NOT_SUCCEEDED ";"
    "CREATE INDEX jobs_tenant_status ON jobs(tenant, status, id) WHERE " NOT_SUCCEEDED ";",
    /* The op indexes are per tenant only: jobs_op and jobs_op_status were an index entry in
     * every job's row (two in a queued one's) for lists that name an op and no tenant, which
     * store.c now merges from each tenant's page; a 100k batch's store phase was 17% shorter. */
    "DROP INDEX jobs_op; DROP INDEX jobs_op_status;",
    /* Every job index leads with the tenant and names an op or a status: jobs_status and
     * jobs_tenant were an index entry in every queued job's row, and jobs_tenant in every
     * waited one's, for lists that store.c now merges from the tenants' (or a tenant's ops')
     * pages. A 100k batch's store phase on the dev machine: 20% shorter (bench notes in
     * PERFORMANCE.md). */
    "DROP INDEX jobs_status; DROP INDEX jobs_tenant;",
    /* A commit's like job events (one status, one tenant, in a row) are one row of consecutive
     * seqs: seq is the first, ids (a JSON array; NULL for one event) every job's id in order, and
     * the next row's seq follows the last. A waited job's event was a third of its b-tree
     * entries; one row per launch group's commit cut 15% from 100k jobs' writes (a C model of
     * the writer on the dev machine, bench notes in PERFORMANCE.md). */
    "ALTER TABLE events ADD COLUMN ids TEXT;",
    /* Jobs (and their inputs) are keyed by their id's number, the rowid: a rowid table takes an
     * append at its right edge without rebalancing its neighbours, where the WITHOUT ROWID
     * b-tree of text keys did (a C model of the writer: 11% of 100k jobs' writes; bench notes in
     * PERFORMANCE.md). Reads give the number, and sqlite_store.c writes its text. Inputs
     * first: dropping jobs would cascade into them. */
    "CREATE TABLE jobs_k(id INTEGER PRIMARY KEY, status TEXT NOT NULL, op TEXT NOT NULL, doc TEXT NOT NULL,"
    "                    created REAL NOT NULL, tenant TEXT NOT NULL DEFAULT 'default', input BLOB);"
    "INSERT INTO jobs_k SELECT " ID_KEY ", status, op, doc, created, tenant, input FROM jobs;"
    "CREATE TABLE job_inputs_k(id INTEGER PRIMARY KEY REFERENCES jobs_k(id) ON DELETE CASCADE, data BLOB NOT NULL);"
    "INSERT INTO job_inputs_k SELECT " ID_KEY ", data FROM job_inputs;"
    "DROP TABLE job_inputs; DROP TABLE jobs;"
    "ALTER TABLE jobs_k RENAME TO jobs; ALTER TABLE job_inputs_k RENAME TO job_inputs;"
    "CREATE INDEX jobs_tenant_op ON jobs(tenant, op);" /* each entry ends with the rowid, the id */
    "CREATE INDEX jobs_tenant_status ON jobs(tenant, status) WHERE " NOT_SUCCEEDED ";",
    /* Each tenant's events numbered apart (tseq: 1, 2, ... in seq order; a run's consecutive), so
     * that a tenant's stream gives ids that move only with its own events: seqs, shared by all
     * tenants, told each one how busy the others were. A tenant's next number follows its newest
     * event's (events_tenant), or, once all of its events are pruned, the newest number pruned
     * (event_tenants, written by the pruning: a table or trigger written with every commit cost a
     * single job's commit a third more, measured). */
    "ALTER TABLE events ADD COLUMN tseq INTEGER;"
    "UPDATE events SET tseq = w.t FROM (SELECT seq, sum(coalesce(json_array_length(ids), 1)) OVER"
    " (PARTITION BY tenant ORDER BY seq) - coalesce(json_array_length(ids), 1) + 1 t FROM events) w"
    " WHERE w.seq = events.seq;"
    "CREATE TABLE event_tenants(tenant TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX events_tenant ON events(tenant, tseq);",
};
const int gr_schema_nsteps = (int)(sizeof gr_schema_steps / sizeof gr_schema_steps[0]);

/* A dataset's resource as read: its stored doc with last_used_at, which changes apart from it
 * (every doc names it, null, for this to fill in; text replaced as in PostgreSQL's). */
#define DS_DOC                                                                                                     \
    "CASE WHEN last_used IS NULL THEN doc ELSE replace(doc, '\"last_used_at\":null', '\"last_used_at\":\"' ||"          \
    " strftime('%Y-%m-%dT%H:%M:%fZ', last_used, 'unixepoch') || '\"') END"
/* A job's id is read as its key, the number (sqlite_store.c writes its text). */
#define LIST_SQL(where) "SELECT id, doc FROM jobs WHERE " where "id < ?1 ORDER BY id DESC LIMIT ?2"
#define FINAL "('succeeded', 'failed', 'canceled')"
/* An event row's seq: the one after the newest row's last (rows of a run hold several). */
#define NEXT_SEQ                                                                                                   \
    "coalesce((SELECT seq + coalesce(json_array_length(ids), 1) FROM events"                                        \
    " WHERE seq = (SELECT max(seq) FROM events)), 1)"
/* The events after ?1, each of a run's its own: the row holding seq ?1 + 1 began at most a run
 * before it. json_each yields a run's ids in order, so rows in seq order need no sort. */
#define EVENT_SEQ "e.seq + coalesce(j.key, 0)"
#define EVENT_ID "coalesce(j.value, e.id)"
/* A job event's op and device, and a failure's problem, as its job (jb) has them when read:
 * reading them costs the event stream, where storing them would cost every job's commit. */
#define EVENT_JOB                                                                                                  \
    "'op', jb.op, 'device', json_extract(jb.doc, '$.device'),"                                                     \
    " 'error', json(CASE WHEN e.status = 'failed' THEN json_extract(jb.doc, '$.error') END)"
/* A tenant's newest event number (t: the tenant, as SQL), 0 if it has none */
#define LAST_TSEQ(t)                                                                                               \
    "coalesce((SELECT c.tseq + coalesce(json_array_length(c.ids), 1) - 1 FROM events c WHERE c.tenant = " t          \
    " ORDER BY c.tseq DESC LIMIT 1), (SELECT k.last FROM event_tenants k WHERE k.tenant = " t "), 0)"
#define AFTER "CAST(?1 AS INTEGER)"
/* what of the ?5 tenant's first event numbered past ?1 (the row holding it began at most a run
 * before), 0 if none is kept */
#define FIRST_OWN(what)                                                                                            \
    "coalesce((SELECT " what " FROM events WHERE tenant = ?5 AND tseq > " AFTER " - " GR_STR(GR_SQ_EVENT_RUN)      \
    " AND tseq + coalesce(json_array_length(ids), 1) - 1 > " AFTER " ORDER BY tseq LIMIT 1), 0)"

const char *const gr_sql[GR_SQL_N] = {
    [GR_SQL_LIST_ALL] = LIST_SQL(""),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_STATUS] = LIST_SQL("tenant = ?5 AND status = ?3 AND " NOT_SUCCEEDED " AND "),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_OP] = LIST_SQL("tenant = ?5 AND op = ?4 AND "),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS] = LIST_SQL("tenant = ?5 AND op = ?4 AND status = ?3 AND " NOT_SUCCEEDED " AND "),
    /* "succeeded": through the id or a tenant's op index, past the jobs that ended otherwise */
    [GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_STATUS] = LIST_SQL("status = ?3 AND "),
    [GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS] =
        LIST_SQL("tenant = ?5 AND op = ?4 AND status = ?3 AND "),
    /* ?2 NULL: any tenant's (an admin, or no tokens) */
    [GR_SQL_GET] = "SELECT doc, status FROM jobs WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    /* Read once at start-up over few rows: each tenant's two ranges of jobs_tenant_status, sorted. */
    [GR_SQL_PENDING] = GR_SQL_TENANT_SKIP " SELECT j.id, j.doc, coalesce(j.input, i.data) FROM t JOIN jobs j"
                       " ON j.tenant = t.x LEFT JOIN job_inputs i ON i.id = j.id"
                       " WHERE j.status IN ('queued', 'running') AND j." NOT_SUCCEEDED " ORDER BY j.id",
    /* Reads the database header, so it fails when the file cannot be read. */
    [GR_SQL_PING] = "PRAGMA user_version",
    [GR_SQL_DS_LIST] = "SELECT id, " DS_DOC " FROM datasets WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
    [GR_SQL_DS_LIST_TENANT] = "SELECT id, " DS_DOC " FROM datasets WHERE tenant = ?5 AND id < ?1 ORDER BY id DESC LIMIT ?2",
    [GR_SQL_DS_GET] = "SELECT " DS_DOC " FROM datasets WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
    [GR_SQL_KEY_GET] = "SELECT fingerprint, resource FROM idempotency WHERE tenant = ?1 AND key = ?2 AND created >= ?3",
    /* Start-up only: one pass over the datasets. */
    [GR_SQL_TENANT_BYTES] = "SELECT tenant, sum(bytes) FROM datasets GROUP BY tenant",
    [GR_SQL_EVENTS] = "SELECT " EVENT_SEQ ", json_object('seq', " EVENT_SEQ ", 'kind', e.kind, 'id', " EVENT_ID ","
                      " 'status', e.status, 'tenant', e.tenant, 'at', e.at, 'tseq', e.tseq + coalesce(j.key, 0),"
                      " " EVENT_JOB ") FROM events e LEFT JOIN json_each(e.ids) j"
                      " LEFT JOIN jobs jb ON e.kind = 'job' AND jb.id = " ID_KEY_OF(EVENT_ID)
                      " WHERE e.seq > CAST(?1 AS INTEGER) - " GR_STR(GR_SQ_EVENT_RUN) " AND " EVENT_SEQ
                      " > CAST(?1 AS INTEGER) ORDER BY e.seq LIMIT ?2",
    /* a row's last seq */
    [GR_SQL_EVENTS_LAST] = "SELECT seq + coalesce(json_array_length(ids), 1) - 1, '' FROM events"
                           " WHERE seq > CAST(?1 AS INTEGER) - " GR_STR(GR_SQ_EVENT_RUN) " ORDER BY seq DESC LIMIT ?2",
    /* one statement, one snapshot: the newest seq and the tenant's newest number agree */
    [GR_SQL_EVENTS_OWN] = "SELECT '', coalesce((SELECT seq + coalesce(json_array_length(ids), 1) - 1 FROM events"
                          " WHERE seq = (SELECT max(seq) FROM events)), 0) || ' ' || " LAST_TSEQ("?5") " || ' ' || "
                          FIRST_OWN("seq + max(" AFTER " + 1 - tseq, 0)") " || ' ' || " FIRST_OWN("max(tseq, " AFTER " + 1)"),
    [GR_SQL_TENANTS] = GR_SQL_TENANTS_TEXT,
    [GR_SQL_OPS] = GR_SQL_OPS_TEXT("?5"),
    /* The retention sweep: finished jobs submitted before ?1 (ids are creation times), in no
     * particular order, so that each batch is an index range read, not a sort of every old job. */
    [GR_SQL_EXPIRED] = "SELECT id, doc FROM jobs WHERE id < ?1 AND status IN " FINAL " LIMIT ?2",
    /* GR_SQL_RENEW, _CLAIM, _RELEASE, _HELD, _LET_GO, _CANCEL, _SLOT, _ANNOUNCE, _REPLICAS and _LEAVE: none; one
     * SQLite file has one gpured, which holds every queued job itself */
    [GR_SQL_INSERT] = "INSERT INTO jobs(id, status, doc, op, created, tenant, input) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?14)",
    [GR_SQL_INPUT] = "INSERT INTO job_inputs(id, data) VALUES (?1, ?2)",
    /* an expired key's row is replaced; a live one was checked (and held) by the request */
    [GR_SQL_KEY_INSERT] = "INSERT OR REPLACE INTO idempotency(tenant, key, fingerprint, resource, created)"
                          " VALUES (?6, ?8, ?9, ?1, ?5)",
    [GR_SQL_UPDATE] = "UPDATE jobs SET status = ?2, doc = ?3, input = CASE WHEN ?2 IN " FINAL " THEN NULL ELSE input END"
                      " WHERE id = ?1",
    [GR_SQL_DS_INSERT] = "INSERT INTO datasets(id, doc, created, tenant, bytes) VALUES (?1, ?3, ?5, ?6, ?7)",
    [GR_SQL_DS_INSERT_KEPT] = "INSERT INTO datasets(id, doc, created, tenant, bytes) VALUES (?1, ?3, ?5, ?6, ?7)",
    [GR_SQL_DS_DELETE] = "DELETE FROM datasets WHERE id = ?1",
    [GR_SQL_JOB_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    /* never back in time: two jobs' ends may be stored out of order */
    [GR_SQL_DS_USED] = "UPDATE datasets SET last_used = max(coalesce(last_used, 0), ?5) WHERE id = ?1",
    /* the doc, as rendered, names the digest null until it is known (API.md) */
    [GR_SQL_DS_DIGEST] = "UPDATE datasets SET doc = replace(doc, '\"sha256\":null', '\"sha256\":\"' || ?3 || '\"')"
                         " WHERE id = ?1",
    /* a job's event from the write's values, not read back from its row: 10% of a 100k batch's store */
    [GR_SQL_EVENT_JOB] = "INSERT INTO events(seq, tseq, kind, id, ids, status, tenant, at) VALUES (" NEXT_SEQ ", "
                         LAST_TSEQ("?6") " + 1, 'job', ?1, ?15, ?2, ?6, " SQ_NOW ")",
    [GR_SQL_EVENT_DS] = "INSERT INTO events(seq, tseq, kind, id, status, tenant, at) SELECT " NEXT_SEQ ", "
                        LAST_TSEQ("datasets.tenant") " + 1, 'dataset', id, ?2, tenant, " SQ_NOW " FROM datasets WHERE id = ?1",
    [GR_SQL_INPUT_DONE] = "DELETE FROM job_inputs WHERE id = ?1",
    /* NOT INDEXED: the rows pruned by their seq (the oldest), not events_tenant walked whole */
    [GR_SQL_EVENTS_PRUNE_KEEP] = "INSERT INTO event_tenants(tenant, last) SELECT tenant, max(tseq + coalesce("
                                 "json_array_length(ids), 1) - 1) FROM events NOT INDEXED WHERE seq <= (SELECT max(seq) FROM events)"
                                 " - 1000000 GROUP BY tenant ON CONFLICT(tenant) DO UPDATE SET last = excluded.last",
    [GR_SQL_EVENTS_PRUNE] = "DELETE FROM events WHERE seq <= (SELECT max(seq) FROM events) - 1000000",
    /* at most a thousand at a time, so that a sweep never holds the writer for long */
    [GR_SQL_KEYS_EXPIRE] = "DELETE FROM idempotency WHERE (tenant, key) IN"
                           " (SELECT tenant, key FROM idempotency WHERE created < ?5 LIMIT 1000)",
    [GR_SQL_BEGIN] = "BEGIN IMMEDIATE",
    [GR_SQL_COMMIT] = "COMMIT",
    [GR_SQL_ROLLBACK] = "ROLLBACK",
};
