/* bench_ingest.cu: ways to move a file in the page cache to the GPU, each beside a plain pinned H2D copy
 * measured in the same run: pread into a pinned ring by T threads (piece size P), and a
 * cudaHostRegister'ed mapping of the file copied directly (registration timed apart). The numbers chose
 * gpu/stage.c's design. Single-threaded driver; OpenMP threads only fill. Not a test.
 *   bench_ingest [file or ""] [json out]   ("" or none: a 1 GiB temporary file) */
#include "gpu/kernels/cuda_check.h"

#include <cuda_runtime.h>

#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The file through a ring of 2 * threads pinned pieces: threads fill half while the other half copies. */
static double ring_ms(int fd, size_t bytes, void *dev, int threads, size_t piece, cudaStream_t st)
{
    int nring = 2 * threads;
    char **ring = (char **)calloc(nring, sizeof *ring);
    cudaEvent_t *done = (cudaEvent_t *)calloc(nring, sizeof *done);
    for (int i = 0; i < nring; i++) {
        GR_CUDA_DIE(cudaMallocHost(&ring[i], piece));
        GR_CUDA_DIE(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    double t0 = now_ms();
    size_t k = 0;
    for (size_t off = 0; off < bytes; off += (size_t)threads * piece) {
        size_t first = k;
        int nb = 0;
        for (; nb < threads && off + nb * piece < bytes; nb++, k++)
            if (k >= (size_t)nring)
                GR_CUDA_DIE(cudaEventSynchronize(done[k % nring]));
#pragma omp parallel for num_threads(nb)
        for (int i = 0; i < nb; i++) {
            size_t o = off + i * piece, len = bytes - o < piece ? bytes - o : piece;
            for (size_t got = 0; got < len;) {
                ssize_t r = pread(fd, ring[(first + i) % nring] + got, len - got, (off_t)(o + got));
                if (r <= 0)
                    abort();
                got += (size_t)r;
            }
        }
        for (int i = 0; i < nb; i++) {
            size_t o = off + i * piece, len = bytes - o < piece ? bytes - o : piece;
            GR_CUDA_DIE(cudaMemcpyAsync((char *)dev + o, ring[(first + i) % nring], len, cudaMemcpyHostToDevice, st));
            GR_CUDA_DIE(cudaEventRecord(done[(first + i) % nring], st));
        }
    }
    GR_CUDA_DIE(cudaStreamSynchronize(st));
    double ms = now_ms() - t0;
    for (int i = 0; i < nring; i++) {
        cudaFreeHost(ring[i]);
        cudaEventDestroy(done[i]);
    }
    free(ring);
    free(done);
    return ms;
}

int main(int argc, char **argv)
{
    int made = argc < 2 || !argv[1][0];
    const char *path = made ? "bench_ingest.tmp" : argv[1];
    const char *json = argc > 2 ? argv[2] : NULL;
    size_t bytes = (size_t)1 << 30;
    if (made) { /* a file of 1 GiB, written now so it sits in the page cache */
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        char *buf = (char *)malloc(1 << 24);
        for (int i = 0; i < (1 << 24); i++)
            buf[i] = (char)(i * 7919);
        for (size_t off = 0; off < bytes; off += 1 << 24)
            if (write(fd, buf, 1 << 24) != 1 << 24)
                abort();
        close(fd);
        free(buf);
    }
    int fd = open(path, O_RDONLY);
    bytes = (size_t)lseek(fd, 0, SEEK_END);
    void *dev, *pinned;
    cudaStream_t st;
    GR_CUDA_DIE(cudaStreamCreate(&st));
    GR_CUDA_DIE(cudaMalloc(&dev, bytes));
    GR_CUDA_DIE(cudaMallocHost(&pinned, bytes));
    double best = 1e9;
    for (int k = 0; k < 3; k++) {
        double t0 = now_ms();
        GR_CUDA_DIE(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, st));
        GR_CUDA_DIE(cudaStreamSynchronize(st));
        best = now_ms() - t0 < best ? now_ms() - t0 : best;
    }
    cudaFreeHost(pinned);
    double pinned_gbps = bytes / (best * 1e6);
    printf("file %zu bytes; pinned H2D %.1f GB/s\n%-28s %8s %8s %7s\n", bytes, pinned_gbps, "method", "ms", "GB/s",
           "%pinned");
    FILE *js = json ? fopen(json, "w") : NULL;
    if (js)
        fprintf(js, "{\"bytes\": %zu, \"pinned_h2d_gbps\": %.2f, \"rows\": [", bytes, pinned_gbps);
    int first = 1;
    int threads[] = {4, 8, 16};
    size_t pieces[] = {(size_t)1 << 20, (size_t)2 << 20, (size_t)4 << 20, (size_t)8 << 20};
    for (int t : threads)
        for (size_t p : pieces) {
            double ms = 1e9;
            for (int k = 0; k < 3; k++) {
                double m = ring_ms(fd, bytes, dev, t, p, st);
                ms = m < ms ? m : ms;
            }
            char name[64];
            snprintf(name, sizeof name, "pread ring t=%d piece=%zuMiB", t, p >> 20);
            printf("%-28s %8.2f %8.1f %7.1f\n", name, ms, bytes / (ms * 1e6), 100 * bytes / (ms * 1e6) / pinned_gbps);
            if (js)
                fprintf(js, "%s{\"method\": \"%s\", \"ms\": %.3f}", first ? "" : ", ", name, ms), first = 0;
        }
    /* zero-copy: the mapping itself registered (pinned) and copied by the DMA engine */
    void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    double t0 = now_ms();
    cudaError_t reg = cudaHostRegister(map, bytes, cudaHostRegisterReadOnly);
    double reg_ms = now_ms() - t0;
    if (reg == cudaSuccess) {
        double ms = 1e9;
        for (int k = 0; k < 3; k++) {
            t0 = now_ms();
            GR_CUDA_DIE(cudaMemcpyAsync(dev, map, bytes, cudaMemcpyHostToDevice, st));
            GR_CUDA_DIE(cudaStreamSynchronize(st));
            ms = now_ms() - t0 < ms ? now_ms() - t0 : ms;
        }
        printf("%-28s %8.2f %8.1f %7.1f   (registering took %.1f ms)\n", "registered mapping", ms,
               bytes / (ms * 1e6), 100 * bytes / (ms * 1e6) / pinned_gbps, reg_ms);
        if (js)
            fprintf(js, ", {\"method\": \"registered mapping\", \"ms\": %.3f, \"register_ms\": %.3f}", ms, reg_ms);
        cudaHostUnregister(map);
    } else
        printf("registered mapping: cudaHostRegister failed: %s\n", cudaGetErrorString(reg));
    if (js) {
        fprintf(js, "]}\n");
        fclose(js);
    }
    munmap(map, bytes);
    close(fd);
    if (made)
        unlink(path);
    return 0;
}
