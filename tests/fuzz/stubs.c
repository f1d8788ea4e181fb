/* stubs.c: the few functions server/job.c and gpu/bench.c call that the parsers never reach
 * (they need a running server: the store, dataset files, tenants' quotas, the log, a backend).
 * Each aborts, so a parse path that did reach one would show up as a crash; the one the parse
 * path does reach, gr_jobs_unpin_dataset (gr_job_unref's gr_job_unpin, set as the job pipeline
 * sets it), counts the holds given back. */
#include "common/id.h"
#include "db/dsfile.h"
#include "db/store.h"
#include "fuzz.h"
#include "gpu/backend.h"
#include "server/jobs.h"
#include "server/log.h"
#include "server/tenants.h"

int fuzz_pins;

static void __attribute__((constructor)) pipeline_hooks(void) { gr_job_unpin = gr_jobs_unpin_dataset; }

/* gr_job_unref gives back the hold the dataset lookup took (api/datasets.c gr_dataset_for_job):
 * on a valid id, one the fuzz target's lookup pinned. */
void gr_jobs_unpin_dataset(const char *id)
{
    FUZZ_CHECK(gr_id_valid(id, 'd'));
    FUZZ_CHECK(fuzz_pins > 0);
    fuzz_pins--;
}

static _Noreturn void unreachable(const char *name)
{
    fprintf(stderr, "stubs.c: %s called: the parse path reached code that needs a running server\n", name);
    abort();
}

/* gr_job_keep_result / gr_job_keep_product (worker only): the store, dataset files, quotas, log */
const char *gr_store_data_dir(struct gr_store *s) { unreachable(__func__); }
int gr_store_insert_dataset(struct gr_store *s, const char *id, const struct gr_owner *own, uint64_t bytes,
                            char *doc, gr_store_done done, void *ctx) { unreachable(__func__); }
int gr_store_delete_dataset(struct gr_store *s, const char *id, gr_store_done done, void *ctx) { unreachable(__func__); }
void gr_store_wait_done(void *waiter, int code) { unreachable(__func__); }
void gr_store_wait_add(struct gr_store_wait *w, int rc) { unreachable(__func__); }
int gr_store_wait_all(struct gr_store_wait *w) { unreachable(__func__); }
int gr_dsfile_create(struct gr_dsfile **f, const char *data_dir, const char *id, gr_dsfile_tap tap, void *ctx,
                     struct gr_err *e) { unreachable(__func__); }
int gr_dsfile_write(struct gr_dsfile *f, const void *data, size_t n, struct gr_err *e) { unreachable(__func__); }
int gr_dsfile_commit(struct gr_dsfile *f, struct gr_err *e) { unreachable(__func__); }
void gr_dsfile_close(struct gr_dsfile *f) { unreachable(__func__); }
int gr_dsfile_remove(const char *data_dir, const char *id, struct gr_err *e) { unreachable(__func__); }
int gr_tenant_add_bytes(const char *tenant, uint64_t n, int refuse, int force, struct gr_err *e) { unreachable(__func__); }
void gr_tenant_drop_bytes(const char *tenant, uint64_t n) { unreachable(__func__); }
void gr_log(int level, const char *fmt, ...) { unreachable(__func__); }

/* gr_bench_run (worker only; the parser calls gr_bench_fits alone) */
int gr_backend_check(const struct gr_backend *b, const char *algorithm, int op, int dtype, int axis, struct gr_err *e)
{
    unreachable(__func__);
}
