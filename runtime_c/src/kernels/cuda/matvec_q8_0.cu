/*
 * matvec_q8_0.cu — Q8_0 weights x Q8_0 activations, one warp per output row
 * (grid.y = activation row). Lane l reads 16-byte chunks l, l+32, ... of the
 * row's int8 quants (four chunks in flight per lane to cover DRAM latency),
 * __dp4a against the matching activation bytes; lanes 2j and 2j+1 hold the
 * two halves of one block, so one shuffle gives the block's exact integer
 * sum and the float scaling matches the CPU's (float)isum * (dw * dx).
 * FUSED (decode): the block first quantizes x into shared memory, which
 * saves the separate quantize launch.
 */
#include "kernels/cuda/erk_common.cuh"

#define MV_UNROLL 4

__device__ __forceinline__ int dot16(int4 a, int4 b) {
    int s = __dp4a(a.x, b.x, 0);
    s = __dp4a(a.y, b.y, s);
    s = __dp4a(a.z, b.z, s);
    return __dp4a(a.w, b.w, s);
}

template <bool FUSED>
__global__ void __launch_bounds__(32 * ERK_MV_WARPS)
    k_mv_q8_0(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out, int rpw, const float *__restrict__ x,
              const int8_t *__restrict__ xq_g, const float *__restrict__ xd_g, float *__restrict__ y, int acc) {
    extern __shared__ int4 erk_smem[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.y;
    const int8_t *xq;
    const float *dx;
    if (FUSED) {
        int8_t *q = reinterpret_cast<int8_t *>(erk_smem);
        float *d = reinterpret_cast<float *>(q + n);
        int32_t *s = reinterpret_cast<int32_t *>(d + n / 32);
        erk_quant_row_block(false, x, n, q, d, s);
        __syncthreads();
        xq = q;
        dx = d;
    } else {
        xq = xq_g + (size_t)b * n;
        dx = xd_g + (size_t)b * (n / 32);
    }
    const int4 *xv = reinterpret_cast<const int4 *>(xq);
    const int nch = n / 16;
    for (int k = 0; k < rpw; k++) {
        const int row = (blockIdx.x * rpw + k) * ERK_MV_WARPS + warp;
        if (row >= n_out)
            break; /* warp-uniform */
        const uint8_t *wr = w + (size_t)row * row_bytes;
        const int4 *wq = reinterpret_cast<const int4 *>(wr);
        const __half *wd = reinterpret_cast<const __half *>(wr + n);
        float sum = 0.0f;
        for (int base = 0; base < nch; base += 32 * MV_UNROLL) {
            int4 wv[MV_UNROLL];
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                const int c = base + 32 * u + lane;
                wv[u] = c < nch ? __ldg(wq + c) : make_int4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                const int c = base + 32 * u + lane;
                int s = c < nch ? dot16(wv[u], xv[c]) : 0;
                s += __shfl_xor_sync(ERK_FULL, s, 1);
                /* nch is even, so both lanes of a pair are in or out together */
                if (c < nch && !(lane & 1))
                    sum += (float)s * (__half2float(wd[c / 2]) * dx[c / 2]);
            }
        }
        sum = erk_warp_sum(sum);
        if (lane == 0) {
            float *yo = y + (size_t)b * n_out + row;
            *yo = acc ? *yo + sum : sum;
        }
    }
}

void erk_matvec_q8_0(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc) {
    const int rpw = erk_mv_rows_per_warp(n_out), rows = rpw * ERK_MV_WARPS;
    dim3 grid((unsigned)((n_out + rows - 1) / rows), (unsigned)m);
    const uint8_t *wb = static_cast<const uint8_t *>(w);
    const size_t rb = erk_row_bytes(ER_W_Q8_0, n_in);
    if (!a.qs)
        k_mv_q8_0<true><<<grid, 32 * ERK_MV_WARPS, erk_fused_smem(n_in), st>>>(wb, rb, n_in, n_out, rpw, x, nullptr,
                                                                              nullptr, y, acc);
    else
        k_mv_q8_0<false><<<grid, 32 * ERK_MV_WARPS, 0, st>>>(wb, rb, n_in, n_out, rpw, nullptr, a.qs, a.d, y, acc);
}
