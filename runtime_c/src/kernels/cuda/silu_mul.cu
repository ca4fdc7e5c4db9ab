/*
 * silu_mul.cu — the SwiGLU gate g = silu(g) * u, in generic/silu_mul.c's
 * order: g / (1 + e^-g) * u (finite for every finite g: e^-g = inf gives -0).
 */
#include "kernels/cuda/erk_common.cuh"

__global__ void k_silu_mul(float *__restrict__ g, const float *__restrict__ u, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        g[i] = __fmul_rn(v / (1.0f + expf(-v)), u[i]);
    }
}

extern "C" void erk_silu_mul(erk_stream st, float *g, const float *u, size_t n) {
    if (n == 0)
        return;
    const size_t blocks = (n + 255) / 256;
    k_silu_mul<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, reinterpret_cast<cudaStream_t>(st)>>>(g, u, n);
}
