/* pg_schema.c: the PostgreSQL store's SQL: migrations on the gpured_schema table and every
 * statement it prepares, named and numbered as sqlite_schema.c's. Constant data; safe from any
 * thread. */
#include "db/schema.h"

/* Ids are compared as bytes (COLLATE "C"): they are time-ordered, and a list's first page
 * starts below U+10FFFF, which a locale's collation would not put last. */
#define NOW "extract(epoch FROM clock_timestamp())"
/* The condition of the status indexes (they leave succeeded jobs out: the last migration says
 * why). A statement they serve names it: a planner cannot tell that status = ? is not that. */
#define NOT_SUCCEEDED "status <> 'succeeded'"

const char *const gr_pg_schema_steps[] = {
    "CREATE TABLE jobs(id text COLLATE \"C\" PRIMARY KEY, status text NOT NULL, op text NOT NULL,"
    "                  doc text NOT NULL, created double precision NOT NULL, tenant text NOT NULL);"
    "CREATE INDEX jobs_status ON jobs(status, id);"
    "CREATE INDEX jobs_op ON jobs(op, id);"
    "CREATE INDEX jobs_op_status ON jobs(op, status, id);"
    "CREATE INDEX jobs_tenant ON jobs(tenant, id);"
    "CREATE INDEX jobs_tenant_status ON jobs(tenant, status, id);"
    "CREATE INDEX jobs_tenant_op ON jobs(tenant, op, id);"
    "CREATE TABLE job_inputs(id text COLLATE \"C\" PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
    "                        data bytea NOT NULL);"
    /* an input is only needed to run its job again: it goes with the final status, as in SQLite */
    "CREATE FUNCTION gpured_input_done() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN DELETE FROM job_inputs WHERE id = NEW.id; RETURN NULL; END$$;"
    "CREATE TRIGGER job_inputs_done AFTER UPDATE OF status ON jobs FOR EACH ROW"
    " WHEN (NEW.status IN ('succeeded', 'failed', 'canceled')) EXECUTE FUNCTION gpured_input_done();"
    "CREATE TABLE datasets(id text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL, created double precision NOT NULL,"
    "                      tenant text NOT NULL, bytes bigint NOT NULL);"
    "CREATE INDEX datasets_tenant ON datasets(tenant, id);"
    "CREATE TABLE idempotency(tenant text NOT NULL, key text NOT NULL, fingerprint text NOT NULL,"
    "                         resource text NOT NULL, created double precision NOT NULL, PRIMARY KEY(tenant, key));"
    "CREATE INDEX idempotency_created ON idempotency(created);",
    /* Replicas: each queued or running job is held by one (owner) until its lease (the
     * database's epoch seconds) runs out; then another claims it, and the claim's epoch fences
     * the old holder's late final state out. */
    "ALTER TABLE jobs ADD COLUMN owner text NOT NULL DEFAULT '', ADD COLUMN lease double precision NOT NULL DEFAULT 0,"
    "                 ADD COLUMN epoch bigint NOT NULL DEFAULT 1;"
    "CREATE INDEX jobs_held ON jobs(owner) WHERE status IN ('queued', 'running');"
    "CREATE INDEX jobs_lease ON jobs(lease, id) WHERE status IN ('queued', 'running');"
    /* each replica's ids in a residue of its own (common/id.c), taken from this at start */
    "CREATE SEQUENCE gpured_replicas;"
    /* a job's new status, told (at commit) to the replicas whose clients wait on it */
    "CREATE FUNCTION gpured_job_changed() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN PERFORM pg_notify('gpured_jobs', NEW.id); RETURN NULL; END$$;"
    "CREATE TRIGGER jobs_changed AFTER UPDATE OF status ON jobs FOR EACH ROW"
    " WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION gpured_job_changed();"
    /* each live replica and its devices, for GET /v1/devices through any of them */
    "CREATE TABLE replicas(id text PRIMARY KEY, doc text NOT NULL, lease double precision NOT NULL);",
    /* Offers: a job no replica holds yet (owner ''), for whichever has a free device, or first
     * for the one named in prefer (its GPU caches the job's dataset) until its lease passes;
     * told to the replicas, at commit, as is a job let go. */
    "ALTER TABLE jobs ADD COLUMN prefer text NOT NULL DEFAULT '';"
    "CREATE INDEX jobs_offered ON jobs(prefer, id) WHERE owner = '' AND status = 'queued';"
    "CREATE FUNCTION gpured_job_offered() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN PERFORM pg_notify('gpured_offers', CASE WHEN NEW.lease > " NOW " THEN NEW.prefer ELSE '' END);"
    " RETURN NULL; END$$;"
    "CREATE TRIGGER jobs_offered AFTER INSERT ON jobs FOR EACH ROW WHEN (NEW.owner = '')"
    " EXECUTE FUNCTION gpured_job_offered();"
    "CREATE TRIGGER jobs_let_go AFTER UPDATE OF owner ON jobs FOR EACH ROW"
    " WHEN (NEW.owner = '' AND OLD.owner <> '' AND NEW.status = 'queued') EXECUTE FUNCTION gpured_job_offered();",
    /* Events, as in SQLite. Replicas commit side by side, so each event's transaction first
     * takes one transaction-scoped advisory lock: seqs are then handed out in commit order, and
     * a reader that has seen seq n never later finds a smaller one committed. */
    "CREATE TABLE events(seq bigserial PRIMARY KEY, kind text NOT NULL, id text NOT NULL, status text NOT NULL,"
    "                    tenant text NOT NULL, at double precision NOT NULL);"
    "CREATE FUNCTION gpured_event() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
    " PERFORM pg_advisory_xact_lock(747576);" /* any constant: only events take it */
    " IF TG_TABLE_NAME = 'jobs' THEN"
    "  INSERT INTO events(kind, id, status, tenant, at) VALUES ('job', NEW.id, NEW.status, NEW.tenant, " NOW ");"
    " ELSIF TG_OP = 'INSERT' THEN"
    "  INSERT INTO events(kind, id, status, tenant, at) VALUES ('dataset', NEW.id, 'created', NEW.tenant, " NOW ");"
    " ELSE"
    "  INSERT INTO events(kind, id, status, tenant, at) VALUES ('dataset', OLD.id, 'deleted', OLD.tenant, " NOW ");"
    " END IF;"
    " RETURN NULL; END$$;"
    "CREATE TRIGGER events_job_new AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION gpured_event();"
    "CREATE TRIGGER events_job_status AFTER UPDATE OF status ON jobs FOR EACH ROW"
    " WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION gpured_event();"
    "CREATE TRIGGER events_dataset AFTER INSERT OR DELETE ON datasets FOR EACH ROW EXECUTE FUNCTION gpured_event();"
    "CREATE FUNCTION gpured_events_pruned() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN DELETE FROM events WHERE seq <= NEW.seq - 1000000; RETURN NULL; END$$;"
    "CREATE TRIGGER events_pruned AFTER INSERT ON events FOR EACH ROW WHEN (NEW.seq % 1000 = 0)"
    " EXECUTE FUNCTION gpured_events_pruned();",
    /* When a job that read a dataset last ended (its resource's last_used_at), NULL if none has;
     * every doc names it, null, for the reads to fill in. */
    "ALTER TABLE datasets ADD COLUMN last_used double precision;"
    "UPDATE datasets SET doc = left(doc, -1) || ',\"last_used_at\":null}';",
    /* The status indexes leave succeeded jobs out, as in SQLite (sqlite_schema.c says why). */
    "DROP INDEX jobs_status, jobs_op_status, jobs_tenant_status;"
    "CREATE INDEX jobs_status ON jobs(status, id) WHERE " NOT_SUCCEEDED ";"
    "CREATE INDEX jobs_op_status ON jobs(op, status, id) WHERE " NOT_SUCCEEDED ";"
    "CREATE INDEX jobs_tenant_status ON jobs(tenant, status, id) WHERE " NOT_SUCCEEDED ";",
    /* The op indexes are per tenant only, as in SQLite (sqlite_schema.c says why). */
    "DROP INDEX jobs_op, jobs_op_status;",
    /* Every job index leads with the tenant and names an op or a status, as in SQLite. */
    "DROP INDEX jobs_status, jobs_tenant;",
    /* A statement's rows are told once, not a row at a time: the writer stores a batch's jobs in
     * one statement (GR_SQL_INSERT_MANY, _UPDATE_MANY), and per-row triggers had made each job a
     * plpgsql call, an advisory lock request and a NOTIFY of its own. The jobs changed go in a
     * notice's payload, space-separated, at most 300 a notice (a payload is at most 8000 bytes). */
    "DROP TRIGGER job_inputs_done ON jobs; DROP TRIGGER jobs_changed ON jobs; DROP TRIGGER jobs_offered ON jobs;"
    "DROP TRIGGER jobs_let_go ON jobs; DROP TRIGGER events_job_new ON jobs; DROP TRIGGER events_job_status ON jobs;"
    "DROP FUNCTION gpured_input_done(), gpured_job_changed(), gpured_job_offered();"
    "CREATE FUNCTION gpured_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
    " INSERT INTO events(kind, id, status, tenant, at) SELECT 'job', id, status, tenant, " NOW " FROM n ORDER BY id;"
    " PERFORM pg_notify('gpured_offers', p) FROM (SELECT DISTINCT CASE WHEN lease > " NOW " THEN prefer ELSE '' END p"
    "  FROM n WHERE owner = '') o;"
    " RETURN NULL; END$$;"
    "CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs REFERENCING NEW TABLE AS n FOR EACH STATEMENT"
    " EXECUTE FUNCTION gpured_jobs_inserted();"
    "CREATE FUNCTION gpured_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
    " IF EXISTS (SELECT 1 FROM n JOIN o USING (id) WHERE n.status <> o.status) THEN"
    "  INSERT INTO events(kind, id, status, tenant, at) SELECT 'job', n.id, n.status, n.tenant, " NOW
    "   FROM n JOIN o USING (id) WHERE n.status <> o.status ORDER BY n.id;"
    "  DELETE FROM job_inputs i USING n JOIN o USING (id) WHERE i.id = n.id AND n.status <> o.status"
    "   AND n.status IN ('succeeded', 'failed', 'canceled');"
    "  PERFORM pg_notify('gpured_jobs', string_agg(id, ' ')) FROM (SELECT n.id, (row_number() OVER ()) / 300 g"
    "   FROM n JOIN o USING (id) WHERE n.status <> o.status) c GROUP BY g;"
    " END IF;"
    " IF EXISTS (SELECT 1 FROM n JOIN o USING (id) WHERE n.owner = '' AND o.owner <> '' AND n.status = 'queued') THEN"
    "  PERFORM pg_notify('gpured_offers', '');"
    " END IF;"
    " RETURN NULL; END$$;"
    "CREATE TRIGGER jobs_updated AFTER UPDATE ON jobs REFERENCING OLD TABLE AS o NEW TABLE AS n FOR EACH STATEMENT"
    " EXECUTE FUNCTION gpured_jobs_updated();"
    /* Events are numbered after their commit, by whoever reads them (gpured_events_number), no
     * longer by the writers under one advisory lock held to their commit: that lock made every
     * commit of every replica take turns. Numbering under the lock, in one transaction that sees
     * only what is committed, still gives seqs in an order no reader sees go back: a row committed
     * later is numbered later. */
    "ALTER TABLE events DROP CONSTRAINT events_pkey;"
    "ALTER TABLE events ALTER COLUMN seq DROP DEFAULT, ALTER COLUMN seq DROP NOT NULL;"
    "CREATE UNIQUE INDEX events_seq ON events(seq);"
    "CREATE INDEX events_unnumbered ON events(at) WHERE seq IS NULL;"
    "DROP TRIGGER events_pruned ON events; DROP FUNCTION gpured_events_pruned();"
    "CREATE OR REPLACE FUNCTION gpured_event() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
    " IF TG_OP = 'INSERT' THEN"
    "  INSERT INTO events(kind, id, status, tenant, at) VALUES ('dataset', NEW.id, 'created', NEW.tenant, " NOW ");"
    " ELSE"
    "  INSERT INTO events(kind, id, status, tenant, at) VALUES ('dataset', OLD.id, 'deleted', OLD.tenant, " NOW ");"
    "  DELETE FROM dataset_uses WHERE dataset = OLD.id;"
    " END IF;"
    " RETURN NULL; END$$;"
    /* A dataset's last use is a row per writer connection (its backend's pid), the latest of them
     * read: marks of one dataset's use by every writer of every replica had all waited on its one
     * row's lock, each until the commit before it was durable. */
    "CREATE TABLE dataset_uses(dataset text COLLATE \"C\" NOT NULL, writer integer NOT NULL,"
    "                          at double precision NOT NULL, PRIMARY KEY (dataset, writer));"
    "INSERT INTO dataset_uses SELECT id, 0, last_used FROM datasets WHERE last_used IS NOT NULL;"
    "ALTER TABLE datasets DROP COLUMN last_used;"
    /* the oldest first (a job's events in the order they were written), at most 10,000 a call:
     * few enough that the planner walks events_unnumbered in order rather than sorting a bitmap
     * scan of it, which also reads the entries of rows numbered since; the newest 1,000,000 are
     * kept */
    "CREATE FUNCTION gpured_events_number() RETURNS void LANGUAGE plpgsql AS $$"
    "DECLARE first bigint; last bigint; BEGIN"
    " IF NOT EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN RETURN; END IF;"
    " PERFORM pg_advisory_xact_lock(747576);" /* any constant: only the numbering takes it */
    " SELECT last_value INTO first FROM events_seq_seq;"
    " UPDATE events e SET seq = n.s FROM (SELECT c, nextval('events_seq_seq') s FROM"
    "  (SELECT ctid c FROM events WHERE seq IS NULL ORDER BY at LIMIT 10000) p) n WHERE e.ctid = n.c;"
    " SELECT last_value INTO last FROM events_seq_seq;"
    " IF last / 1000 > first / 1000 THEN DELETE FROM events WHERE seq <= last - 1000000; END IF;"
    " END$$;"
    /* Each live replica's id residue (common/id.c), the smallest no other live replica has: a
     * sequence's next value modulo the stride came round to a live replica's after as many
     * starts. Taken under an advisory lock, so replicas starting at once take different ones. */
    "ALTER TABLE replicas ADD COLUMN residue integer;"
    "CREATE FUNCTION gpured_take_residue(me text, secs float8, stride integer) RETURNS integer LANGUAGE plpgsql AS $$"
    "DECLARE r integer; BEGIN"
    " PERFORM pg_advisory_xact_lock(7468207580);" /* any constant: only this takes it */
    " SELECT min(g) INTO r FROM generate_series(0, stride - 1) g WHERE g NOT IN"
    "  (SELECT residue FROM replicas WHERE lease >= " NOW " AND residue IS NOT NULL AND id <> me);"
    " IF r IS NULL THEN RAISE EXCEPTION 'all % id residues are held by live replicas: stop one first', stride; END IF;"
    " INSERT INTO replicas(id, doc, lease, residue) VALUES (me, '', " NOW " + secs, r)"
    "  ON CONFLICT (id) DO UPDATE SET residue = r, lease = EXCLUDED.lease;"
    " RETURN r; END$$;"
    /* An Idempotency-Key's request under way on some replica: a second through another replica
     * must not create a second resource (its key row is written only with what it creates). */
    "CREATE TABLE idempotency_holds(tenant text NOT NULL, key text NOT NULL, replica text NOT NULL,"
    "                               until double precision NOT NULL, PRIMARY KEY (tenant, key));",
    /* A statement's old and new rows are matched by one grouping, never a join: a join of the
     * transition tables (which have no index) can be planned as a nested loop, and a renewal of
     * 100,000 held jobs, where no status changes, then took minutes while it held their rows. */
    "CREATE OR REPLACE FUNCTION gpured_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$"
    "DECLARE ids text[]; sts text[]; tes text[]; let_go boolean; BEGIN"
    " SELECT array_agg(id ORDER BY id) FILTER (WHERE ns <> os), array_agg(ns ORDER BY id) FILTER (WHERE ns <> os),"
    "  array_agg(te ORDER BY id) FILTER (WHERE ns <> os), bool_or(nw = '' AND ow <> '' AND ns = 'queued')"
    "  INTO ids, sts, tes, let_go"
    "  FROM (SELECT id, max(status) FILTER (WHERE side) ns, max(status) FILTER (WHERE NOT side) os,"
    "        max(tenant) FILTER (WHERE side) te, max(owner) FILTER (WHERE side) nw, max(owner) FILTER (WHERE NOT side) ow"
    "        FROM (SELECT id, status, tenant, owner, true side FROM n UNION ALL"
    "              SELECT id, status, tenant, owner, false FROM o) b GROUP BY id) c;"
    " IF ids IS NOT NULL THEN"
    "  INSERT INTO events(kind, id, status, tenant, at) SELECT 'job', u.id, u.st, u.te, " NOW
    "   FROM unnest(ids, sts, tes) WITH ORDINALITY u(id, st, te, k) ORDER BY k;"
    "  DELETE FROM job_inputs i USING unnest(ids, sts) u(id, st) WHERE i.id = u.id"
    "   AND u.st IN ('succeeded', 'failed', 'canceled');"
    "  PERFORM pg_notify('gpured_jobs', string_agg(id, ' ')) FROM unnest(ids) WITH ORDINALITY u(id, k)"
    "   GROUP BY (k - 1) / 300;"
    " END IF;"
    " IF let_go THEN PERFORM pg_notify('gpured_offers', ''); END IF;"
    " RETURN NULL; END$$;",
    /* A job's input goes with its final state (the trigger above) or with its row
     * (GR_SQL_JOB_DELETE), so no foreign key checks each input row: that check was a quarter of a
     * 100,000-job batch's insert. */
    "ALTER TABLE job_inputs DROP CONSTRAINT job_inputs_id_fkey;",
    /* Each tenant's events numbered apart, as in SQLite (sqlite_schema.c says why), when they are
     * numbered: tseq follows the tenant's newest (event_tenants) in seq order. */
    "ALTER TABLE events ADD COLUMN tseq bigint;"
    "UPDATE events e SET tseq = w.t FROM (SELECT ctid c, row_number() OVER (PARTITION BY tenant ORDER BY seq) t"
    " FROM events WHERE seq IS NOT NULL) w WHERE e.ctid = w.c;"
    "CREATE TABLE event_tenants(tenant text PRIMARY KEY, last bigint NOT NULL);"
    "INSERT INTO event_tenants SELECT tenant, max(tseq) FROM events WHERE tseq IS NOT NULL GROUP BY tenant;"
    "CREATE INDEX events_tenant ON events(tenant, tseq);"
    "CREATE OR REPLACE FUNCTION gpured_events_number() RETURNS void LANGUAGE plpgsql AS $$"
    "DECLARE first bigint; last bigint; BEGIN"
    " IF NOT EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN RETURN; END IF;"
    " PERFORM pg_advisory_xact_lock(747576);"
    " SELECT last_value INTO first FROM events_seq_seq;"
    " WITH n AS (SELECT c, tenant, nextval('events_seq_seq') s FROM"
    "  (SELECT ctid c, tenant FROM events WHERE seq IS NULL ORDER BY at LIMIT 10000) p),"
    " t AS (SELECT n.c, n.s, coalesce(et.last, 0) + row_number() OVER (PARTITION BY n.tenant ORDER BY n.s) ts"
    "  FROM n LEFT JOIN event_tenants et ON et.tenant = n.tenant)"
    " UPDATE events e SET seq = t.s, tseq = t.ts FROM t WHERE e.ctid = t.c;"
    " INSERT INTO event_tenants(tenant, last) SELECT tenant, max(tseq) FROM events WHERE seq >= first GROUP BY tenant"
    "  ON CONFLICT (tenant) DO UPDATE SET last = greatest(event_tenants.last, excluded.last);"
    " SELECT last_value INTO last FROM events_seq_seq;"
    " IF last / 1000 > first / 1000 THEN DELETE FROM events WHERE seq <= last - 1000000; END IF;"
    " END$$;",
    /* A small input in its job's row, as in SQLite (store_backend.h says why): NULL once the job
     * has ended, or when the input is in job_inputs. */
    "ALTER TABLE jobs ADD COLUMN input bytea;",
    /* A dataset file being made (an upload, a kept result) by a replica: no replica's cleanup of
     * the shared folder removes it while that replica's lease runs; the dataset's row takes its
     * place. */
    "CREATE TABLE dataset_intents(id text COLLATE \"C\" PRIMARY KEY, owner text NOT NULL);",
    /* Each tenant's newest number from the rows just numbered, in the numbering's statement, and
     * the prune planned for its bound as a literal: with a plpgsql variable's generic plan, each
     * was a scan of every event kept (up to 1,000,000) per call, a quarter of small jobs' rate. */
    "CREATE OR REPLACE FUNCTION gpured_events_number() RETURNS void LANGUAGE plpgsql AS $$"
    "DECLARE first bigint; last bigint; BEGIN"
    " IF NOT EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN RETURN; END IF;"
    " PERFORM pg_advisory_xact_lock(747576);"
    " SELECT last_value INTO first FROM events_seq_seq;"
    " WITH n AS (SELECT c, tenant, nextval('events_seq_seq') s FROM"
    "  (SELECT ctid c, tenant FROM events WHERE seq IS NULL ORDER BY at LIMIT 10000) p),"
    " t AS (SELECT n.c, n.s, n.tenant, coalesce(et.last, 0) + row_number() OVER (PARTITION BY n.tenant ORDER BY n.s) ts"
    "  FROM n LEFT JOIN event_tenants et ON et.tenant = n.tenant),"
    " u AS (UPDATE events e SET seq = t.s, tseq = t.ts FROM t WHERE e.ctid = t.c)"
    " INSERT INTO event_tenants(tenant, last) SELECT tenant, max(ts) FROM t GROUP BY tenant"
    "  ON CONFLICT (tenant) DO UPDATE SET last = greatest(event_tenants.last, excluded.last);"
    " SELECT last_value INTO last FROM events_seq_seq;"
    " IF last / 1000 > first / 1000 AND last > 1000000 THEN"
    "  EXECUTE format('DELETE FROM events WHERE seq <= %s', last - 1000000); END IF;"
    " END$$;",
    /* A statement's like job events are one row, as in SQLite (sqlite_schema.c): one status, one
     * tenant, the ids in order (ids; NULL for one), consecutive seqs and tseqs from the row's,
     * at most GR_SQ_EVENT_RUN a row: a row per job was a share of every small job's commit. */
    "ALTER TABLE events ADD COLUMN ids text[];"
    "CREATE OR REPLACE FUNCTION gpured_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
    " INSERT INTO events(kind, id, ids, status, tenant, at) SELECT 'job', (array_agg(id ORDER BY id))[1],"
    "  CASE WHEN count(*) > 1 THEN array_agg(id ORDER BY id) END, status, tenant, " NOW
    "  FROM (SELECT id, status, tenant, (row_number() OVER (PARTITION BY status, tenant ORDER BY id) - 1) / " GR_STR(GR_SQ_EVENT_RUN) " g"
    "   FROM n) r GROUP BY status, tenant, g ORDER BY min(id);"
    " PERFORM pg_notify('gpured_offers', p) FROM (SELECT DISTINCT CASE WHEN lease > " NOW " THEN prefer ELSE '' END p"
    "  FROM n WHERE owner = '') o;"
    " RETURN NULL; END$$;"
    "CREATE OR REPLACE FUNCTION gpured_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$"
    "DECLARE ids text[]; sts text[]; tes text[]; let_go boolean; BEGIN"
    " SELECT array_agg(id ORDER BY id) FILTER (WHERE ns <> os), array_agg(ns ORDER BY id) FILTER (WHERE ns <> os),"
    "  array_agg(te ORDER BY id) FILTER (WHERE ns <> os), bool_or(nw = '' AND ow <> '' AND ns = 'queued')"
    "  INTO ids, sts, tes, let_go"
    "  FROM (SELECT id, max(status) FILTER (WHERE side) ns, max(status) FILTER (WHERE NOT side) os,"
    "        max(tenant) FILTER (WHERE side) te, max(owner) FILTER (WHERE side) nw, max(owner) FILTER (WHERE NOT side) ow"
    "        FROM (SELECT id, status, tenant, owner, true side FROM n UNION ALL"
    "              SELECT id, status, tenant, owner, false FROM o) b GROUP BY id) c;"
    " IF ids IS NOT NULL THEN"
    "  INSERT INTO events(kind, id, ids, status, tenant, at) SELECT 'job', (array_agg(id ORDER BY k))[1],"
    "   CASE WHEN count(*) > 1 THEN array_agg(id ORDER BY k) END, st, te, " NOW
    "   FROM (SELECT id, st, te, k, (row_number() OVER (PARTITION BY st, te ORDER BY k) - 1) / " GR_STR(GR_SQ_EVENT_RUN) " g"
    "    FROM unnest(ids, sts, tes) WITH ORDINALITY u(id, st, te, k)) r GROUP BY st, te, g ORDER BY min(k);"
    "  DELETE FROM job_inputs i USING unnest(ids, sts) u(id, st) WHERE i.id = u.id"
    "   AND u.st IN ('succeeded', 'failed', 'canceled');"
    "  PERFORM pg_notify('gpured_jobs', string_agg(id, ' ')) FROM unnest(ids) WITH ORDINALITY u(id, k)"
    "   GROUP BY (k - 1) / 300;"
    " END IF;"
    " IF let_go THEN PERFORM pg_notify('gpured_offers', ''); END IF;"
    " RETURN NULL; END$$;"
    /* a row of k events takes k seqs (and k of its tenant's numbers) from where the last ended */
    "CREATE OR REPLACE FUNCTION gpured_events_number() RETURNS void LANGUAGE plpgsql AS $$"
    "DECLARE first bigint; last bigint; BEGIN"
    " IF NOT EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN RETURN; END IF;"
    " PERFORM pg_advisory_xact_lock(747576);"
    " SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO first FROM events_seq_seq;"
    " WITH p AS (SELECT ctid c, tenant, at, coalesce(array_length(ids, 1), 1) k FROM events WHERE seq IS NULL"
    "  ORDER BY at LIMIT 10000),"
    " n AS (SELECT c, tenant, k, first + sum(k) OVER (ORDER BY at ROWS UNBOUNDED PRECEDING) - k + 1 s FROM p),"
    " t AS (SELECT n.c, n.s, n.k, n.tenant, coalesce(et.last, 0) + sum(n.k) OVER (PARTITION BY n.tenant ORDER BY n.s"
    "  ROWS UNBOUNDED PRECEDING) - n.k + 1 ts FROM n LEFT JOIN event_tenants et ON et.tenant = n.tenant),"
    " u AS (UPDATE events e SET seq = t.s, tseq = t.ts FROM t WHERE e.ctid = t.c),"
    " v AS (INSERT INTO event_tenants(tenant, last) SELECT tenant, max(ts + k - 1) FROM t GROUP BY tenant"
    "  ON CONFLICT (tenant) DO UPDATE SET last = greatest(event_tenants.last, excluded.last))"
    " SELECT first + sum(k) INTO last FROM p;" /* not a read of the rows numbered: a generic plan scans */
    " IF last IS NULL THEN RETURN; END IF;"
    " PERFORM setval('events_seq_seq', last);"
    " IF last / 1000 > first / 1000 AND last > 1000000 THEN"
    "  EXECUTE format('DELETE FROM events WHERE seq <= %s', last - 1000000); END IF;"
    " END$$;",
    /* New jobs' events and offers are sent by the writer beside their rows (GR_SQL_EVENTS_NEW,
     * GR_SQL_OFFERED), which it has in hand: the insert trigger copied every row, its document
     * and input too, into a transition table and grouped the rows again, a quarter of
     * PostgreSQL's time on small jobs. */
    "DROP TRIGGER jobs_inserted ON jobs; DROP FUNCTION gpured_jobs_inserted();",
};
const int gr_pg_schema_nsteps = (int)(sizeof gr_pg_schema_steps / sizeof gr_pg_schema_steps[0]);

/* A dataset's resource as read: its stored doc with last_used_at, which changes apart from it
 * (text replaced, not jsonb: the members keep their order, as SQLite's json_set keeps them). */
#define DS_DOC                                                                                                     \
    "CASE WHEN lu IS NULL THEN doc ELSE replace(doc, '\"last_used_at\":null', '\"last_used_at\":\"' ||"                \
    " to_char(to_timestamp(lu) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') || '\"') END"
/* lu: the latest of the dataset's uses (NULL: none) */
#define DS_FROM "datasets CROSS JOIN LATERAL (SELECT max(at) lu FROM dataset_uses u WHERE u.dataset = datasets.id) m"
#define LIST_SQL(where) "SELECT id, doc FROM jobs WHERE " where "id < $1 ORDER BY id DESC LIMIT $2::int"
#define FINAL "('succeeded', 'failed', 'canceled')"
/* an intent (dataset_intents i) whose replica's lease runs */
#define LIVE_OWNER "EXISTS (SELECT 1 FROM replicas r WHERE r.id = i.owner AND r.lease >= " NOW ")"

const char *const gr_pg_sql[GR_SQL_N] = {
    [GR_SQL_LIST_ALL] = LIST_SQL(""),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_STATUS] = LIST_SQL("tenant = $5 AND status = $3 AND " NOT_SUCCEEDED " AND "),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_OP] = LIST_SQL("tenant = $5 AND op = $4 AND "),
    [GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS] = LIST_SQL("tenant = $5 AND op = $4 AND status = $3 AND " NOT_SUCCEEDED " AND "),
    /* "succeeded": through the id or a tenant index, past the jobs that ended otherwise */
    [GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_STATUS] = LIST_SQL("status = $3 AND "),
    [GR_SQL_LIST_SUCCEEDED | GR_SQL_LIST_TENANT | GR_SQL_LIST_OP_STATUS] =
        LIST_SQL("tenant = $5 AND op = $4 AND status = $3 AND "),
    [GR_SQL_GET] = "SELECT doc, status FROM jobs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
    /* GR_SQL_PENDING: none; a replica claims what is left (GR_SQL_CLAIM) */
    [GR_SQL_PING] = "SELECT 1",
    [GR_SQL_EVENTS_NUMBER] = "SELECT gpured_events_number()",
    [GR_SQL_DS_LIST] = "SELECT id, " DS_DOC " FROM " DS_FROM " WHERE id < $1 ORDER BY id DESC LIMIT $2::int",
    [GR_SQL_DS_LIST_TENANT] = "SELECT id, " DS_DOC " FROM " DS_FROM " WHERE tenant = $5 AND id < $1 ORDER BY id DESC"
                              " LIMIT $2::int",
    [GR_SQL_DS_GET] = "SELECT " DS_DOC " FROM " DS_FROM " WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
    [GR_SQL_KEY_GET] = "SELECT fingerprint, resource FROM idempotency WHERE tenant = $1 AND key = $2"
                       " AND created >= $3::float8",
    [GR_SQL_TENANT_BYTES] = "SELECT tenant, sum(bytes) FROM datasets GROUP BY tenant",
    /* ORDER BY the table's seq: a bare seq would name the text column, and "10" sorts before "5". A job
     * event's op, device and a failure's problem as in SQLite (sqlite_schema.c's EVENT_JOB). */
    /* the events after $1, each of a row's its own: from the row holding $1 (a run may go on past
     * it), found through the seq index */
    [GR_SQL_EVENTS] = "SELECT (e.seq + u.k - 1)::text, json_build_object('seq', e.seq + u.k - 1, 'kind', e.kind, 'id',"
                      " u.id, 'status', e.status, 'tenant', e.tenant, 'at', e.at, 'tseq', e.tseq + u.k - 1, 'op', jb.op,"
                      " 'device', jb.doc::json->>'device', 'error', CASE WHEN e.status = 'failed' THEN"
                      " jb.doc::json->'error' END)::text FROM events e"
                      " CROSS JOIN LATERAL unnest(coalesce(e.ids, ARRAY[e.id])) WITH ORDINALITY u(id, k)"
                      " LEFT JOIN jobs jb ON e.kind = 'job' AND jb.id = u.id COLLATE \"C\""
                      " WHERE e.seq >= coalesce((SELECT h.seq FROM events h WHERE h.seq <= $1::bigint ORDER BY h.seq DESC"
                      " LIMIT 1), 0) AND e.seq + u.k - 1 > $1::bigint ORDER BY e.seq, u.k LIMIT $2::int",
    /* a row's last seq */
    [GR_SQL_EVENTS_LAST] = "SELECT (seq + coalesce(array_length(ids, 1), 1) - 1)::text, '' FROM events"
                           " WHERE seq > $1::bigint ORDER BY events.seq DESC LIMIT $2::int",
    /* one statement, one snapshot, as in SQLite: the newest seq, the tenant's newest number, and
     * the seq and number of its first event numbered past $1 (its row began at most a run before) */
    [GR_SQL_EVENTS_OWN] = "SELECT '', concat_ws(' ', coalesce((SELECT seq + coalesce(array_length(ids, 1), 1) - 1"
                          " FROM events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1), 0),"
                          " coalesce((SELECT last FROM event_tenants WHERE tenant = $5), 0), coalesce(f.seq, 0),"
                          " coalesce(f.tseq, 0)) FROM (SELECT 1) o LEFT JOIN LATERAL (SELECT"
                          " seq + greatest($1::bigint + 1 - tseq, 0) seq, greatest(tseq, $1::bigint + 1) tseq FROM events"
                          " WHERE tenant = $5 AND tseq > $1::bigint - " GR_STR(GR_SQ_EVENT_RUN) " AND"
                          " tseq + coalesce(array_length(ids, 1), 1) - 1 > $1::bigint ORDER BY tseq LIMIT 1) f ON true",
    [GR_SQL_TENANTS] = GR_SQL_TENANTS_TEXT,
    [GR_SQL_OPS] = GR_SQL_OPS_TEXT("$5"),
    [GR_SQL_EXPIRED] = "SELECT id, doc FROM jobs WHERE id < $1 AND status IN " FINAL " LIMIT $2::int",
    /* SKIP LOCKED: a row the writer is ending waits for no renewal, and one renewal never meets
     * a writer's batch in a deadlock (each holding rows the other wants, until PostgreSQL's
     * deadlock_timeout, a second, ends one); a row skipped is renewed next time, a lease early */
    [GR_SQL_RENEW] = "UPDATE jobs SET lease = " NOW " + $12::float8 WHERE id IN (SELECT id FROM jobs WHERE owner = $11"
                     " AND status IN ('queued', 'running') FOR UPDATE SKIP LOCKED)",
    /* SKIP LOCKED: replicas claiming at once take different jobs, none waits for another. The
     * device is read from the document's compact form: a quote inside a string is escaped there,
     * so no string matches */
    [GR_SQL_CLAIM] = "UPDATE jobs j SET owner = $11, lease = " NOW " + $12::float8, epoch = j.epoch + 1"
                     " FROM (SELECT id FROM jobs WHERE status IN ('queued', 'running') AND (lease < " NOW
                     " OR (owner = '' AND status = 'queued' AND prefer = $11)) AND ($3::text IS NULL OR"
                     " (strpos(doc, '\"device\":\"cpu\"') > 0) = ($3 = 'cpu'))"
                     " ORDER BY lease, id LIMIT $2::int FOR UPDATE SKIP LOCKED) c WHERE j.id = c.id"
                     " RETURNING j.id, j.doc, coalesce(j.input, (SELECT data FROM job_inputs i WHERE i.id = j.id)), j.epoch::text",
    /* no owner either, so that the holder's next renewal does not take them back */
    [GR_SQL_RELEASE] = "UPDATE jobs SET lease = 0, owner = '' WHERE owner = $11 AND status = 'queued'"
                       " AND NOT id = ANY ($2::text[])",
    [GR_SQL_HELD] = "SELECT id, doc FROM jobs WHERE owner = $11 AND status IN ('queued', 'running')",
    [GR_SQL_LET_GO] = "UPDATE jobs SET lease = 0, owner = '' WHERE owner = $11 AND id = ANY ($2::text[])",
    /* a job offered, or whose holder is gone: no replica may be running it (a live holder is asked
     * instead, GR_SQL_CANCEL_ASK: the store cannot tell its queued jobs from the one it runs); a
     * holder that comes back has its final state fenced out (GR_SQL_UPDATE_MANY wants it queued or
     * running) */
    [GR_SQL_CANCEL] = "UPDATE jobs SET status = 'canceled', doc = jsonb_set(jsonb_set(doc::jsonb, '{status}',"
                      " '\"canceled\"'), '{finished_at}', to_jsonb($3::text))::text, input = NULL WHERE id = $1 AND status = 'queued'"
                      " AND ($2::text IS NULL OR tenant = $2) AND (owner = '' OR lease < " NOW ") RETURNING doc",
    [GR_SQL_CANCEL_ASK] = "SELECT pg_notify('gpured_cancel', $3)",
    /* a hold whose replica died ends with its time */
    [GR_SQL_KEY_HOLD] = "INSERT INTO idempotency_holds(tenant, key, replica, until) VALUES ($6, $8, $11, " NOW
                        " + $12::float8) ON CONFLICT (tenant, key) DO UPDATE SET replica = EXCLUDED.replica,"
                        " until = EXCLUDED.until WHERE idempotency_holds.until < " NOW " RETURNING 1",
    /* through the partial index of queued and running jobs (jobs_lease), not every job kept */
    [GR_SQL_DS_JOBS] = "SELECT count(*)::text, '' FROM jobs WHERE status IN ('queued', 'running') AND lease >= 0"
                       " AND strpos(doc, '\"dataset\":\"' || $3 || '\"') > 0",
    [GR_SQL_KEY_UNHOLD] = "DELETE FROM idempotency_holds WHERE tenant = $6 AND key = $8 AND replica = $11",
    [GR_SQL_SLOT] = "SELECT gpured_take_residue($11, $12::float8, $2::int)",
    [GR_SQL_ANNOUNCE] = "INSERT INTO replicas(id, doc, lease) VALUES ($11, $3, " NOW " + $12::float8)"
                        " ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, lease = EXCLUDED.lease",
    /* doc '': a replica that took its residue and has not announced its devices yet */
    [GR_SQL_REPLICAS] = "SELECT id, doc FROM replicas WHERE lease >= " NOW " AND doc <> '' ORDER BY id",
    [GR_SQL_LEAVE] = "DELETE FROM replicas WHERE id = $11",
    [GR_SQL_INTENT] = "INSERT INTO dataset_intents(id, owner) VALUES ($3, $11)",
    [GR_SQL_INTENT_DROP] = "DELETE FROM dataset_intents WHERE id = $3",
    /* the stale intent goes in the same statement that finds the file unnamed: a replica that
     * comes back after its lease then finds its row refused (GR_SQL_DS_INSERT), not a file gone */
    [GR_SQL_FILE_NAMED] = "WITH stale AS (DELETE FROM dataset_intents i WHERE id = $3 AND NOT " LIVE_OWNER ")"
                          " SELECT 'named', '' WHERE EXISTS (SELECT 1 FROM datasets WHERE id = $3) OR EXISTS"
                          " (SELECT 1 FROM dataset_intents i WHERE id = $3 AND " LIVE_OWNER ")",
    [GR_SQL_INTENTS_PURGE] = "DELETE FROM dataset_intents i WHERE NOT " LIVE_OWNER,
    /* GR_SQL_INSERT, _UPDATE and _DS_USED: none; the writer sends a batch's as the _MANY ones */
    [GR_SQL_INPUT] = "INSERT INTO job_inputs(id, data) VALUES ($1, $2)",
    [GR_SQL_KEY_INSERT] = "INSERT INTO idempotency(tenant, key, fingerprint, resource, created)"
                          " VALUES ($6, $8, $9, $1, $5::float8) ON CONFLICT (tenant, key) DO UPDATE SET"
                          " fingerprint = EXCLUDED.fingerprint, resource = EXCLUDED.resource, created = EXCLUDED.created",
    [GR_SQL_DS_INSERT] = "WITH i AS (DELETE FROM dataset_intents WHERE id = $1 RETURNING 1) INSERT INTO"
                         " datasets(id, doc, created, tenant, bytes) SELECT $1, $3, $5::float8, $6, $7::bigint FROM i",
    [GR_SQL_DS_INSERT_KEPT] = "WITH i AS (DELETE FROM dataset_intents WHERE id = $1 RETURNING 1) INSERT INTO"
                              " datasets(id, doc, created, tenant, bytes) SELECT $1, $3, $5::float8, $6,"
                              " $7::bigint FROM i WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = $14 AND NOT"
                              " (epoch = $10::bigint AND status IN ('queued', 'running')))",
    [GR_SQL_DS_DELETE] = "DELETE FROM datasets WHERE id = $1",
    [GR_SQL_JOB_DELETE] = "WITH i AS (DELETE FROM job_inputs WHERE id = $1) DELETE FROM jobs WHERE id = $1",
    [GR_SQL_DS_DIGEST] = "UPDATE datasets SET doc = replace(doc, '\"sha256\":null', '\"sha256\":\"' || $3 || '\"')"
                         " WHERE id = $1",
    [GR_SQL_KEYS_EXPIRE] = "DELETE FROM idempotency WHERE (tenant, key) IN"
                           " (SELECT tenant, key FROM idempotency WHERE created < $5::float8 LIMIT 1000)",
    [GR_SQL_INSERT_MANY] = "INSERT INTO jobs(id, status, doc, op, created, tenant, owner, lease, prefer, input)"
                           " SELECT id, st, doc, op, cr, te, ow, CASE WHEN le < 0 THEN 0 ELSE " NOW " + le END, pr, inp"
                           " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::text[],"
                           " $7::text[], $8::float8[], $9::text[], $10::bytea[]) AS u(id, st, doc, op, cr, te, ow, le, pr, inp)",
    /* fenced: a holder whose job was claimed away (its epoch passed) changes nothing */
    [GR_SQL_UPDATE_MANY] = "UPDATE jobs j SET status = u.st, doc = u.doc, input = CASE WHEN u.st IN " FINAL
                           " THEN NULL ELSE j.input END FROM unnest($1::text[], $2::text[], $3::text[],"
                           " $4::bigint[]) WITH ORDINALITY AS u(id, st, doc, ep, k) WHERE j.id = u.id AND j.epoch = u.ep"
                           " AND j.status IN ('queued', 'running') RETURNING u.k",
    /* this writer's row of each dataset; never back in time */
    [GR_SQL_DS_USED_MANY] = "INSERT INTO dataset_uses(dataset, writer, at) SELECT id, pg_backend_pid(), at"
                            " FROM unnest($1::text[], $2::float8[]) AS u(id, at) ON CONFLICT (dataset, writer)"
                            " DO UPDATE SET at = greatest(dataset_uses.at, EXCLUDED.at)",
    [GR_SQL_EVENTS_NEW] = "INSERT INTO events(kind, id, ids, status, tenant, at) SELECT 'job', ($1::text[])[f::int],"
                          " CASE WHEN c > 1 THEN ($1::text[])[f::int:(f + c - 1)::int] END, st, te, " NOW
                          " FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY"
                          " AS u(f, c, st, te, k) ORDER BY k",
    [GR_SQL_OFFERED] = "SELECT pg_notify('gpured_offers', p) FROM unnest($1::text[]) AS u(p)",
    [GR_SQL_BEGIN] = "BEGIN",
    [GR_SQL_COMMIT] = "COMMIT",
    [GR_SQL_ROLLBACK] = "ROLLBACK",
};
