/* nvml.c: GPU utilisation read through NVML, loaded at run time so that gpured still starts where
 * libnvidia-ml is missing. Any thread: NVML is thread-safe, and loading happens once. */
#include "gpu/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* The three NVML entry points used, as NVML's own nvml.h declares them (the CUDA toolkit here
 * ships no nvml.h): every call answers 0 (NVML_SUCCESS) or an error code. */
struct nvml_utilization {
    unsigned gpu, memory; /* percent of the sample period a kernel ran / device memory was read or written */
};
static int (*init_v2)(void);
static int (*by_bus_id)(const char *bus_id, void **dev);
static int (*utilization)(void *dev, struct nvml_utilization *u);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[160];

static void load(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
    /* POSIX's way to take a function from dlsym without a pointer conversion C leaves undefined */
    *(void **)&init_v2 = dlsym(lib, "nvmlInit_v2");
    *(void **)&by_bus_id = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&utilization = dlsym(lib, "nvmlDeviceGetUtilizationRates");
    int rc = init_v2 && by_bus_id && utilization ? init_v2() : -1;
    if (rc != 0) {
        snprintf(load_error, sizeof load_error, "libnvidia-ml.so.1 %s",
                 rc == -1 ? "lacks nvmlInit_v2 or the device calls" : "did not start (nvmlInit_v2 failed)");
        utilization = NULL;
    }
}

void *gr_nvml_device(const char *bus_id, char *why, int n)
{
    pthread_once(&once, load);
    void *dev = NULL;
    if (!utilization) {
        snprintf(why, (size_t)n, "%s", load_error);
        return NULL;
    }
    if (by_bus_id(bus_id, &dev) != 0 || !dev) {
        snprintf(why, (size_t)n, "NVML does not know the device at PCI %s", bus_id);
        return NULL;
    }
    return dev;
}

int gr_nvml_utilization(void *dev)
{
    struct nvml_utilization u;
    return dev && utilization(dev, &u) == 0 ? (int)u.gpu : -1;
}
