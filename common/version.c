/* version.c: what this build is (version, git commit, CUDA toolkit), from gr_version.h, which
 * the build writes (cmake/version.cmake). Constants: any thread reads them. */
#include "common/gr.h"

#include "gr_version.h"

const char gr_version[] = GR_VERSION, gr_commit[] = GR_COMMIT, gr_cuda_version[] = GR_CUDA_VERSION;
