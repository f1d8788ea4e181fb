/* test_gpu_cache.c: the GPU backend's dataset path on GPU 0: inputs read from files, the dataset
 * cache (miss, hit, LRU eviction, DELETE, too big to keep), files kept page-locked from their
 * second read (gpu/pinned.h) and lanes running jobs at once.
 * The main thread owns everything except during lanes(), where each thread owns one lane;
 * exit 77 (skipped) where there is no GPU. */
#include "gpu/backend.h"
#include "gr_testdata.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define CAP ((int64_t)64 << 20)
#define PIN ((int64_t)128 << 20) /* page-locked files: ds[7] (just over CAP) and a few more */
#define NDS 8
#define DS_N 3000017 /* float32 values per dataset: 12 MB, so 5 fit under CAP */
#define LANES 4
#define PER_LANE 60


static struct gr_backend *gpu, *cpu;
static char dir[] = "/tmp/gr_cacheXXXXXX";

/* A dataset: its values in memory (for the reference) and in a file (for the GPU). */
struct ds {
    char id[24], path[64];
    float *v;
    int64_t n;
    struct gr_result want; /* cpu_seq's sum */
};
static struct ds ds[NDS];

static void make_ds(struct ds *d, int k, int64_t n, struct gr_rng *rng)
{
    snprintf(d->id, sizeof d->id, "d_test%02d", k);
    snprintf(d->path, sizeof d->path, "%s/%d.bin", dir, k);
    d->n = n;
    d->v = malloc((size_t)n * sizeof(float));
    gr_fill(d->v, GR_FLOAT32, GR_SUM, n, GR_FILL_EXACT, GR_SPECIAL_NONE, rng); /* exact: any order, same bits */
    FILE *f = fopen(d->path, "wb");
    CHECK(f && fwrite(d->v, sizeof(float), (size_t)n, f) == (size_t)n && fclose(f) == 0, "writing %s", d->path);
    struct gr_reduce_req q = {.op = GR_SUM, .dtype = GR_FLOAT32, .axis = GR_AXIS_ALL, .rows = 1, .cols = n,
                              .data = d->v, .algorithm = "cpu_seq"};
    struct gr_timings t = {0};
    struct gr_err e = {0};
    char used[32];
    CHECK(cpu->reduce(cpu, &q, &d->want, &t, used, &e) == GR_OK, "reference: %s", e.msg);
}

/* Sum dataset d on lane `lane`, reading its file; returns the cache outcome (-1: failed). */
static int run_ds(const struct ds *d, int lane, const char *id, double *h2d)
{
    int fd = open(d->path, O_RDONLY);
    CHECK(fd > 0, "open %s", d->path);
    struct gr_reduce_req q = {.op = GR_SUM, .dtype = GR_FLOAT32, .axis = GR_AXIS_ALL, .rows = 1, .cols = d->n,
                              .fd = fd, .dataset = id, .algorithm = "auto", .lane = lane};
    struct gr_result r = {0};
    struct gr_timings t = {0};
    struct gr_err e = {0};
    char used[32];
    int rc = gpu->reduce(gpu, &q, &r, &t, used, &e);
    close(fd);
    CHECK(rc == GR_OK, "%s on lane %d: %s", d->id, lane, e.msg);
    if (rc != GR_OK)
        return -1;
    CHECK(gr_result_diff(&r, &d->want, NULL) < 0, "%s on lane %d: %.17g, want %.17g", d->id, lane, r.f[0],
          d->want.f[0]);
    CHECK(t.kernel > 0 && t.d2h > 0, "timings %g %g", t.kernel, t.d2h);
    if (h2d)
        *h2d = t.h2d;
    gr_result_free(&r);
    return t.cache;
}

static struct gr_cache_stats stats(void)
{
    struct gr_cache_stats s;
    gpu->cache_stats(gpu, &s);
    return s;
}

static void miss_hit_evict(void)
{
    double h2d = -1;
    CHECK(run_ds(&ds[0], 0, ds[0].id, &h2d) == GR_CACHE_MISS && h2d > 0, "first use is a miss with a copy");
    CHECK(run_ds(&ds[0], 1, ds[0].id, &h2d) == GR_CACHE_HIT && h2d == 0, "second use (another lane) hits, no copy");
    struct gr_cache_stats s = stats();
    CHECK(s.hits == 1 && s.misses == 1 && s.entries == 1 && s.bytes == DS_N * 4, "stats %lld %lld %lld %lld",
          (long long)s.hits, (long long)s.misses, (long long)s.entries, (long long)s.bytes);

    /* 5 datasets fit; the 6th drops the least recently used (ds[1], as ds[0] is used again) */
    for (int k = 1; k <= 4; k++)
        CHECK(run_ds(&ds[k], 0, ds[k].id, NULL) == GR_CACHE_MISS, "ds %d miss", k);
    CHECK(run_ds(&ds[0], 2, ds[0].id, NULL) == GR_CACHE_HIT, "ds 0 still cached");
    CHECK(run_ds(&ds[5], 3, ds[5].id, NULL) == GR_CACHE_MISS, "ds 5 miss");
    s = stats();
    CHECK(s.entries == 5 && s.bytes <= CAP && s.evictions == 1, "after eviction: %lld entries, %lld bytes, %lld evicted",
          (long long)s.entries, (long long)s.bytes, (long long)s.evictions);
    CHECK(run_ds(&ds[0], 0, ds[0].id, NULL) == GR_CACHE_HIT, "ds 0 kept (recently used)");
    CHECK(run_ds(&ds[2], 0, ds[2].id, NULL) == GR_CACHE_HIT, "ds 2 kept");

    /* DELETE evicts */
    gpu->evict(gpu, ds[2].id);
    CHECK(stats().entries == 4, "evict drops the entry");
    CHECK(run_ds(&ds[2], 1, ds[2].id, NULL) == GR_CACHE_MISS, "after evict: a miss");
    gpu->evict(gpu, "d_never_seen"); /* nothing to drop: harmless */

    /* a dataset larger than the whole cache runs from the lane's buffer and is not kept */
    CHECK(run_ds(&ds[7], 2, ds[7].id, NULL) == GR_CACHE_MISS, "too big: miss");
    CHECK(run_ds(&ds[7], 2, ds[7].id, NULL) == GR_CACHE_MISS, "too big: miss again");
    CHECK(stats().bytes <= CAP, "never above the cap");

    /* a file without a dataset id: read, not cached */
    CHECK(run_ds(&ds[6], 3, NULL, NULL) == GR_CACHE_NONE, "no id: no cache");
}

static void short_file(void)
{
    /* the file holds fewer bytes than the job claims: a clear error, and the lane still works */
    struct gr_cache_stats before = stats(); /* making room for the job may evict others */
    int fd = open(ds[6].path, O_RDONLY);
    struct gr_reduce_req q = {.op = GR_SUM, .dtype = GR_FLOAT32, .axis = GR_AXIS_ALL, .rows = 1, .cols = ds[6].n + 1000,
                              .fd = fd, .dataset = "d_short", .algorithm = "auto", .lane = 1};
    struct gr_result r = {0};
    struct gr_timings t = {0};
    struct gr_err e = {0};
    char used[32];
    int rc = gpu->reduce(gpu, &q, &r, &t, used, &e);
    close(fd);
    CHECK(rc == GR_EIO && strstr(e.msg, "shorter"), "short file: rc %d, %s", rc, e.msg);
    CHECK(!r.f && !r.i, "no result on failure");
    struct gr_cache_stats after = stats();
    CHECK(after.entries == before.entries - (after.evictions - before.evictions),
          "a failed upload leaves nothing in the cache: %lld entries, were %lld, %lld evicted", (long long)after.entries,
          (long long)before.entries, (long long)(after.evictions - before.evictions));
    CHECK(run_ds(&ds[6], 1, ds[6].id, NULL) >= 0, "lane 1 works after the failure");
}

/* ds[7] is too big for the cache, so every job reads it from the host; its second read (in
 * miss_hit_evict) registered its file. A job copies from the registration, with the right sum;
 * DELETE lets it go, and the next read is a first read again (the ring). A file shorter than a
 * job claims is never registered: its second read fails as the first did. */
static void pinned(void)
{
    struct gr_cache_stats s0 = stats(), s1, s2;
    double h2d = 0;
    CHECK(run_ds(&ds[7], 0, ds[7].id, &h2d) == GR_CACHE_MISS && h2d > 0, "too big for the cache: copied");
    s1 = stats();
    CHECK(s1.pinned_hits == s0.pinned_hits + 1 && s0.pinned_bytes >= ds[7].n * 4 && s1.pinned_bytes == s0.pinned_bytes,
          "copied from its registration: %lld hits (were %lld), %lld bytes registered", (long long)s1.pinned_hits,
          (long long)s0.pinned_hits, (long long)s1.pinned_bytes);
    gpu->evict(gpu, ds[7].id);
    s2 = stats();
    CHECK(s2.pinned_bytes == s1.pinned_bytes - ds[7].n * 4, "DELETE lets its registration go: %lld bytes, were %lld",
          (long long)s2.pinned_bytes, (long long)s1.pinned_bytes);
    CHECK(run_ds(&ds[7], 1, ds[7].id, NULL) == GR_CACHE_MISS, "after DELETE: read again");
    s1 = stats();
    CHECK(s1.pinned_hits == s2.pinned_hits && s1.pinned_bytes == s2.pinned_bytes,
          "a first read again: through the ring, nothing registered");
    short_file(); /* d_short's second read: the registration refuses the short file */
}

/* Each lane's thread: sums over the datasets (hits from several lanes at once) and in-memory
 * inputs of random sizes, each against the reference. */
static void *lane_main(void *arg)
{
    int lane = (int)(intptr_t)arg;
    struct gr_rng rng = {gr_test_seed() + (uint64_t)lane};
    for (int k = 0; k < PER_LANE; k++) {
        if (k % 2) {
            const struct ds *d = &ds[gr_rng_range(&rng, 0, 5)];
            run_ds(d, lane, d->id, NULL); /* hits, misses and evictions on several lanes at once */
            continue;
        }
        const struct ds *d = &ds[gr_rng_range(&rng, 0, 5)];
        int64_t n = gr_rng_range(&rng, 1, d->n);
        struct gr_reduce_req q = {.op = GR_MAX, .dtype = GR_FLOAT32, .axis = GR_AXIS_ALL, .rows = 1, .cols = n,
                                  .data = d->v, .algorithm = "auto", .lane = lane};
        struct gr_result r = {0};
        struct gr_timings t = {0};
        struct gr_err e = {0};
        char used[32];
        int rc = gpu->reduce(gpu, &q, &r, &t, used, &e);
        float m = d->v[0];
        for (int64_t i = 1; i < n; i++)
            m = d->v[i] > m ? d->v[i] : m;
        CHECK(rc == GR_OK && r.f && r.f[0] == (double)m, "lane %d max of %lld: %s", lane, (long long)n, e.msg);
        gr_result_free(&r);
    }
    return NULL;
}

static void lanes(void)
{
    pthread_t th[LANES];
    for (int l = 0; l < LANES; l++)
        CHECK(pthread_create(&th[l], NULL, lane_main, (void *)(intptr_t)l) == 0, "thread %d", l);
    for (int l = 0; l < LANES; l++)
        pthread_join(th[l], NULL);
    struct gr_cache_stats s = stats();
    CHECK(s.bytes <= CAP && s.hits + s.misses > LANES * PER_LANE / 2, "after the lanes: %lld bytes, %lld uses",
          (long long)s.bytes, (long long)(s.hits + s.misses));
}

int main(void)
{
    struct gr_backend *gpus[16];
    struct gr_err e = {0};
    int n = gr_gpu_discover(gpus, 16, LANES, CAP, PIN, &e);
    if (n < 1) {
        printf("SKIP: %s\n", e.msg);
        return 77;
    }
    gpu = gpus[0];
    cpu = gr_cpu_backend_new();
    struct gr_rng rng = {gr_test_seed()};
    printf("seed %llu (GR_TEST_SEED reproduces); %s: %d lanes, cache %lld MiB, pinned H2D %.1f GB/s\n",
           (unsigned long long)rng.s, gpu->name, gpu->info.lanes, (long long)(gpu->info.cache_bytes >> 20),
           gpu->info.h2d_gbps);
    CHECK(gpu->info.lanes == LANES && gpu->info.cache_bytes == CAP && gpu->takes_fd && gpu->evict &&
              gpu->cache_stats && gpu->info.h2d_gbps > 0,
          "device info");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    for (int k = 0; k < NDS; k++)
        make_ds(&ds[k], k, k == 7 ? (CAP / 4) + 12345 : DS_N - k, &rng);

    miss_hit_evict();
    short_file();
    pinned();
    lanes();

    for (int k = 0; k < NDS; k++) {
        unlink(ds[k].path);
        free(ds[k].v);
        gr_result_free(&ds[k].want);
    }
    rmdir(dir);
    for (int k = 0; k < n; k++)
        gpus[k]->destroy(gpus[k]);
    cpu->destroy(cpu);
    printf("%d checks, %d failed\n", gr_checks, gr_fails);
    return gr_fails ? 1 : 0;
}
