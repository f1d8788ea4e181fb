/* sqlite_floor.c: scratch model (session 18, kept as the record of what it measured) of the
 * least a waited 100k batch costs the one SQLite writer: 100,000 prepared inserts into the jobs
 * table as gpured's schema has it (rowid id, the jobs_tenant_op and partial jobs_tenant_status
 * indexes), one transaction, WAL with synchronous=FULL, a document of argv[1] bytes a row
 * (gpured's succeeded job: 473). No events, no commits of 256, no gpured: SQLite's own share.
 * Three rounds into one file. Build and run: gcc -O2 sqlite_floor.c -lsqlite3 && ./a.out 473 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    int bytes = argc > 1 ? atoi(argv[1]) : 473;
    if (bytes < 1 || bytes > 4096)
        return fprintf(stderr, "usage: %s [doc bytes, 1-4096]\n", argv[0]), 2;
    unlink("floor.db");
    unlink("floor.db-wal");
    sqlite3 *db;
    sqlite3_stmt *st;
    if (sqlite3_open("floor.db", &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE jobs(id INTEGER PRIMARY KEY, status TEXT NOT NULL, op TEXT NOT NULL,"
                     " doc TEXT NOT NULL, created REAL NOT NULL, tenant TEXT NOT NULL DEFAULT 'default', input BLOB);"
                     "CREATE INDEX jobs_tenant_op ON jobs(tenant, op);"
                     "CREATE INDEX jobs_tenant_status ON jobs(tenant, status) WHERE status <> 'succeeded';",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO jobs(id, status, doc, op, created, tenant, input) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                           -1, &st, NULL) != SQLITE_OK)
        return fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db)), 1;
    char *doc = malloc(bytes);
    memset(doc, 'x', bytes);
    for (int round = 0; round < 3; round++) {
        double t0 = now_ms();
        sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        for (int i = 0; i < 100000; i++) {
            sqlite3_bind_int64(st, 1, 1795749958227427LL + round * 1000000LL + i * 3LL);
            sqlite3_bind_text(st, 2, "succeeded", -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 3, doc, bytes, SQLITE_STATIC);
            sqlite3_bind_text(st, 4, "sum", -1, SQLITE_STATIC);
            sqlite3_bind_double(st, 5, 1.7e9);
            sqlite3_bind_text(st, 6, "default", -1, SQLITE_STATIC);
            sqlite3_bind_null(st, 7);
            if (sqlite3_step(st) != SQLITE_DONE)
                return fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db)), 1;
            sqlite3_reset(st);
        }
        double t1 = now_ms();
        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            return fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db)), 1;
        printf("doc %4d bytes: 100k inserts %6.1f ms, commit %6.1f ms\n", bytes, t1 - t0, now_ms() - t1);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(doc);
    return 0;
}
