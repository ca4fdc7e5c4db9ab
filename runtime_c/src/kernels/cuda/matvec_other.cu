/*
 * matvec_other.cu — every weight type through erk_deq, one warp per output
 * row, lane-strided elements (coalesced for the float types). The path for
 * F32, BF16, Q5_K and Q6_K (Q4_K_M files carry Q6_K tensors), and for F16
 * rows the vector kernel cannot take; correct first — its float products
 * are the CPU dequantizer's bits times x.
 */
#include "kernels/cuda/erk_common.cuh"

template <int WT>
__global__ void k_mv_simple(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out,
                            const float *__restrict__ x, float *__restrict__ y, int acc) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, b = blockIdx.y;
    if (row >= n_out)
        return; /* warp-uniform */
    const uint8_t *wr = w + (size_t)row * row_bytes;
    const float *xr = x + (size_t)b * n;
    float sum = 0.0f;
    for (int e = lane; e < n; e += 32)
        sum += erk_deq(WT, wr, n, e) * xr[e];
    erk_mv_store(sum, lane, y, b, n_out, row, acc);
}

void erk_matvec_simple(cudaStream_t st, int wtype, const void *w, int n_in, int n_out, const float *x, int m,
                       float *y, int acc) {
    const int warps = 4;
    dim3 grid((unsigned)((n_out + warps - 1) / warps), (unsigned)m);
    const uint8_t *wb = static_cast<const uint8_t *>(w);
    const size_t rb = erk_row_bytes(wtype, n_in);
    switch (wtype) {
    case ER_W_F32: k_mv_simple<ER_W_F32><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_F16: k_mv_simple<ER_W_F16><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_BF16: k_mv_simple<ER_W_BF16><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_Q8_0: k_mv_simple<ER_W_Q8_0><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_Q4_0: k_mv_simple<ER_W_Q4_0><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_Q4_K: k_mv_simple<ER_W_Q4_K><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_Q5_K: k_mv_simple<ER_W_Q5_K><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    case ER_W_Q6_K: k_mv_simple<ER_W_Q6_K><<<grid, 32 * warps, 0, st>>>(wb, rb, n_in, n_out, x, y, acc); break;
    default: break;
    }
}
