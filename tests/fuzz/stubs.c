/* stubs.c: what the parsers' code links but never calls on a parse path (gpu/bench.c's run needs a
 * backend): it aborts, so a parse path that did reach it would show up as a crash. And the one
 * the parse path does reach, gr_jobs_unpin_dataset (gr_job_unref's gr_job_unpin, set here as the
 * job pipeline sets it), counts the holds given back. */
#include "common/id.h"
#include "fuzz.h"
#include "gpu/backend.h"
#include "server/jobs.h"

int fuzz_pins;

/* gr_job_unref gives back the hold the dataset lookup took (api/datasets.c gr_dataset_for_job):
 * on a valid id, one the fuzz target's lookup pinned. */
void gr_jobs_unpin_dataset(const char *id)
{
    FUZZ_CHECK(gr_id_valid(id, 'd'));
    FUZZ_CHECK(fuzz_pins > 0);
    fuzz_pins--;
}

static void __attribute__((constructor)) pipeline_hooks(void) { gr_job_unpin = gr_jobs_unpin_dataset; }

static _Noreturn void unreachable(const char *name)
{
    fprintf(stderr, "stubs.c: %s called: the parse path reached code that needs a running server\n", name);
    abort();
}

/* gr_bench_run (worker only; the parser calls gr_bench_fits alone) */
int gr_backend_check(const struct gr_backend *b, const char *algorithm, int op, int dtype, int axis, struct gr_err *e)
{
    unreachable(__func__);
}
