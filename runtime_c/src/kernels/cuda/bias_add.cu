/*
 * bias_add.cu — y[b][i] += bias[i] (qwen2's Q/K/V projection biases).
 */
#include "kernels/cuda/erk_common.cuh"

__global__ void k_bias_add(float *__restrict__ y, const float *__restrict__ bias, size_t count, int n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % (size_t)n];
}

extern "C" void erk_bias_add(erk_stream st, float *y, const float *bias, int m, int n) {
    if (m < 1 || n < 1)
        return;
    const size_t count = (size_t)m * (size_t)n;
    const size_t blocks = (count + 255) / 256;
    k_bias_add<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, reinterpret_cast<cudaStream_t>(st)>>>(
        y, bias, count, n);
}
