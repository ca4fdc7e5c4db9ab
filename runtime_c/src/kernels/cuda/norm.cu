/*
 * norm.cu — RMSNorm over m rows, one block per row. Like generic/norm.c the
 * sum of squares (of float products) is accumulated in double and the scale
 * is a float; y may alias x (each thread rewrites only elements it read,
 * after the reduction has finished reading all of them).
 */
#include "kernels/cuda/erk_common.cuh"

#define NORM_THREADS 256

__global__ void k_rmsnorm(float *y, const float *x, const float *__restrict__ w, int n, float eps) {
    __shared__ double part[NORM_THREADS / 32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        ss += (double)__fmul_rn(xr[i], xr[i]);
    for (int o = 16; o > 0; o >>= 1)
        ss += __shfl_xor_sync(ERK_FULL, ss, o);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = ss;
    __syncthreads();
    double tot = 0.0;
    for (int i = 0; i < NORM_THREADS / 32; i++)
        tot += part[i];
    const float mean = (float)(tot / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

extern "C" void erk_rmsnorm(erk_stream st, float *y, const float *x, const float *w, int m, int n, float eps) {
    if (m < 1 || n < 1)
        return;
    k_rmsnorm<<<(unsigned)m, NORM_THREADS, 0, reinterpret_cast<cudaStream_t>(st)>>>(y, x, w, n, eps);
}
