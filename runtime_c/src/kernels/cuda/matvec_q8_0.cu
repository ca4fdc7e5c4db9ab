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
              const int8_t *__restrict__ xq_g, const float *__restrict__ xd_g, const int32_t *__restrict__ xs_g,
              float *__restrict__ y, int acc) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.y;
    const erk_mv_x xa = erk_mv_x_row<FUSED>(false, n, b, x, xq_g, xd_g, xs_g);
    const int8_t *xq = xa.q;
    const float *dx = xa.d;
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
            erk_mv_load(wv, wq, base, lane, nch);
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
        erk_mv_store(sum, lane, y, b, n_out, row, acc);
    }
}

void erk_matvec_q8_0(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc) {
    erk_mv_launch(st, k_mv_q8_0<true>, k_mv_q8_0<false>, ER_W_Q8_0, w, n_in, n_out, x, a, m, y, acc);
}
