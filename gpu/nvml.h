/* nvml.h: a GPU's utilisation through NVML, the driver's management library (any thread). */
#ifndef GR_NVML_H
#define GR_NVML_H

#ifdef __cplusplus
extern "C" {
#endif

/* NVML's handle of the GPU at PCI address bus_id (as cudaDeviceGetPCIBusId writes it), or NULL
 * where NVML is missing (no driver library, e.g. a container without the NVIDIA toolkit's
 * utility capability) or does not know the device; why goes in why[0..n). */
void *gr_nvml_device(const char *bus_id, char *why, int n);

/* Percent of the last sample period (1/6 s to 1 s, the driver's choice) in which a kernel ran
 * on dev, or -1 if NVML cannot tell. */
int gr_nvml_utilization(void *dev);

#ifdef __cplusplus
}
#endif
#endif
