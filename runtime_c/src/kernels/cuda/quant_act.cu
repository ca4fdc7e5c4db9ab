/*
 * quant_act.cu — float activations -> int8 blocks in the matmul scratch for
 * the integer matvecs when x is too wide to quantize in shared memory (see
 * erk_common.cuh; the per-block rules are the CPU's, shared with the fused
 * decode path).
 */
#include "kernels/cuda/erk_common.cuh"

/* One warp per Q8_0 block of 32 (rows are contiguous and n % 32 == 0, so
 * block i of the whole batch is elements 32i..32i+31). */
__global__ void k_quant_q8_0(const float *__restrict__ x, size_t n_blocks, int8_t *__restrict__ qs,
                             float *__restrict__ d_out, int32_t *__restrict__ s_out) {
    const size_t blk = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (blk >= n_blocks)
        return; /* whole warps leave together: blk is warp-uniform */
    erk_quant_q8_0_warp(x + blk * 32, threadIdx.x % 32, qs + blk * 32, d_out + blk, s_out + blk);
}

/* One warp per Q8_K super-block of 256. d goes to d_out[row * (n/32) + sb]
 * (the scratch's per-row stride), the eight sums of 32 to
 * s_out[(row * (n/256) + sb) * 8 + j] — block blk's sums at blk * 8. */
__global__ void k_quant_q8_k(const float *__restrict__ x, size_t n_blocks, int n, int8_t *__restrict__ qs,
                             float *__restrict__ d_out, int32_t *__restrict__ s_out) {
    const size_t blk = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (blk >= n_blocks)
        return;
    const size_t per_row = (size_t)n / 256;
    erk_quant_q8_k_warp(x + blk * 256, threadIdx.x % 32, qs + blk * 256,
                        d_out + (blk / per_row) * (size_t)(n / 32) + blk % per_row, s_out + blk * 8);
}

void erk_quantize_act(cudaStream_t st, int wtype, const float *x, int m, int n, erk_act a) {
    const int threads = 256;
    if (wtype == ER_W_Q4_K) {
        const size_t nb = (size_t)m * (size_t)(n / 256);
        const unsigned grid = (unsigned)((nb * 32 + threads - 1) / threads);
        k_quant_q8_k<<<grid, threads, 0, st>>>(x, nb, n, a.qs, a.d, a.s);
    } else {
        const size_t nb = (size_t)m * (size_t)(n / 32);
        const unsigned grid = (unsigned)((nb * 32 + threads - 1) / threads);
        k_quant_q8_0<<<grid, threads, 0, st>>>(x, nb, a.qs, a.d, a.s);
    }
}
