/* schema.c: the store's SQL: migrations on PRAGMA user_version and every statement it
 * prepares. Constant data; safe from any thread. */
#include "schema.h"

/* jobs holds only small rows (the job's JSON) keyed by a time-ordered id, so it is
 * WITHOUT ROWID: the id is the clustered key, appends go to its right edge and no separate
 * id index has to be kept up. Inputs live apart in job_inputs so that gets and list pages
 * never page through big blobs; that table keeps its rowid since WITHOUT ROWID suits only
 * small rows. */
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
};
const int gr_schema_nsteps = (int)(sizeof gr_schema_steps / sizeof gr_schema_steps[0]);

#define LIST_SQL(where) "SELECT id, doc FROM jobs WHERE " where "id < ?1 ORDER BY id DESC LIMIT ?2"

const char *const gr_sql[GR_SQL_N] = {
    [GR_SQL_LIST_ALL] = LIST_SQL(""),
    [GR_SQL_LIST_STATUS] = LIST_SQL("status = ?3 AND "),
    [GR_SQL_LIST_OP] = LIST_SQL("op = ?4 AND "),
    [GR_SQL_LIST_OP_STATUS] = LIST_SQL("op = ?4 AND status = ?3 AND "),
    [GR_SQL_GET] = "SELECT doc, status FROM jobs WHERE id = ?1",
    /* Read once at start-up over few rows, so sorting jobs_status's two ranges is cheap. */
    [GR_SQL_PENDING] = "SELECT j.id, j.doc, i.data FROM jobs j LEFT JOIN job_inputs i ON i.id = j.id"
                       " WHERE j.status IN ('queued', 'running') ORDER BY j.id",
    /* Reads the database header, so it fails when the file cannot be read. */
    [GR_SQL_PING] = "PRAGMA user_version",
    [GR_SQL_DS_LIST] = "SELECT id, doc FROM datasets WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
    [GR_SQL_DS_GET] = "SELECT doc FROM datasets WHERE id = ?1",
    [GR_SQL_INSERT] = "INSERT INTO jobs(id, status, doc, op, created) VALUES (?1, ?2, ?3, ?4, ?5)",
    [GR_SQL_INPUT] = "INSERT INTO job_inputs(id, data) VALUES (?1, ?2)",
    [GR_SQL_UPDATE] = "UPDATE jobs SET status = ?2, doc = ?3 WHERE id = ?1",
    [GR_SQL_DS_INSERT] = "INSERT INTO datasets(id, doc, created) VALUES (?1, ?3, ?5)",
    [GR_SQL_DS_DELETE] = "DELETE FROM datasets WHERE id = ?1",
    [GR_SQL_BEGIN] = "BEGIN IMMEDIATE",
    [GR_SQL_COMMIT] = "COMMIT",
    [GR_SQL_ROLLBACK] = "ROLLBACK",
};
