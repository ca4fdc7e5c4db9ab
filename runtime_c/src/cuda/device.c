/*
 * device.c — finding the GPU: the public probe (er_cuda_device_count/get)
 * and the wording of CUDA failures.
 *
 * cudart is linked statically, so on a machine without the NVIDIA driver
 * the library still loads and cudaGetDeviceCount reports why there is no
 * device; that reason is what users see, with what to do about it.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "error.h"

int er_cuda_built(void) { return 1; }

int er_cuda_fail(int status, cudaError_t e, const char *what) {
    /* clears a non-sticky error so the next call starts clean */
    (void)cudaGetLastError();
    return er_fail(status, "CUDA error in %s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int no_device(cudaError_t e) {
    (void)cudaGetLastError();
    if (e == cudaSuccess)
        return er_fail(ER_EUNSUPPORTED, "no CUDA device found (the CUDA runtime reports 0 GPUs); use the CPU "
                       "(device \"cpu\", the default) or check the GPU and its driver with nvidia-smi");
    return er_fail(ER_EUNSUPPORTED, "no usable CUDA device: %s (%s); use the CPU (device \"cpu\", the default) "
                   "or check the NVIDIA driver with nvidia-smi", cudaGetErrorString(e), cudaGetErrorName(e));
}

int er_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) return no_device(e);
    return n;
}

int er_cuda_device_get(int32_t i, er_cuda_device *out) {
    if (!out) return er_fail(ER_EINVAL, "er_cuda_device_get: out is NULL");
    memset(out, 0, sizeof *out);
    int n = er_cuda_device_count();
    if (n < 0) return n;
    if (i < 0 || i >= n) return er_fail(ER_EINVAL, "CUDA device %d out of range [0, %d)", i, n);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) return er_cuda_fail(ER_EUNSUPPORTED, e, "cudaGetDeviceProperties");
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->major = p.major;
    out->minor = p.minor;
    out->integrated = p.integrated;
    out->n_sm = p.multiProcessorCount;
    out->total_bytes = (uint64_t)p.totalGlobalMem;
    return ER_OK;
}
