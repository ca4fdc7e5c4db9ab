/*
 * matvec_q4_0.cu — Q4_0 weights x Q8_0 activations, one warp per output row.
 * A 16-byte chunk of packed nibbles is exactly one block (element j = low
 * nibble of byte j, element j+16 = high nibble), so each lane owns whole
 * blocks: masks split the nibbles into bytes for __dp4a against the
 * activation's two 16-byte halves, and the +8 offset comes out once per
 * block through the activation block's quant sum: isum = q.x - 8 * sum(x),
 * the CPU's integer exactly. FUSED (decode): x is quantized into shared
 * memory by the block itself.
 */
#include "kernels/cuda/erk_common.cuh"

#define MV_UNROLL 4

template <bool FUSED>
__global__ void __launch_bounds__(32 * ERK_MV_WARPS)
    k_mv_q4_0(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out, int rpw, const float *__restrict__ x,
              const int8_t *__restrict__ xq_g, const float *__restrict__ xd_g, const int32_t *__restrict__ xs_g,
              float *__restrict__ y, int acc) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.y;
    const erk_mv_x xa = erk_mv_x_row<FUSED>(false, n, b, x, xq_g, xd_g, xs_g);
    const int8_t *xq = xa.q;
    const float *dx = xa.d;
    const int32_t *sx = xa.s;
    const int4 *xv = reinterpret_cast<const int4 *>(xq);
    const int nb = n / 32;
    for (int k = 0; k < rpw; k++) {
        const int row = (blockIdx.x * rpw + k) * ERK_MV_WARPS + warp;
        if (row >= n_out)
            break; /* warp-uniform */
        const uint8_t *wr = w + (size_t)row * row_bytes;
        const int4 *wq = reinterpret_cast<const int4 *>(wr);
        const __half *wd = reinterpret_cast<const __half *>(wr + n / 2);
        float sum = 0.0f;
        for (int base = 0; base < nb; base += 32 * MV_UNROLL) {
            int4 wv[MV_UNROLL];
            erk_mv_load(wv, wq, base, lane, nb);
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                const int c = base + 32 * u + lane;
                if (c < nb) {
                    const int4 xl = xv[2 * c], xh = xv[2 * c + 1];
                    const int m = 0x0f0f0f0f;
                    int s = __dp4a(wv[u].x & m, xl.x, 0);
                    s = __dp4a(wv[u].y & m, xl.y, s);
                    s = __dp4a(wv[u].z & m, xl.z, s);
                    s = __dp4a(wv[u].w & m, xl.w, s);
                    s = __dp4a((wv[u].x >> 4) & m, xh.x, s);
                    s = __dp4a((wv[u].y >> 4) & m, xh.y, s);
                    s = __dp4a((wv[u].z >> 4) & m, xh.z, s);
                    s = __dp4a((wv[u].w >> 4) & m, xh.w, s);
                    s -= 8 * sx[c];
                    sum += (float)s * (__half2float(wd[c]) * dx[c]);
                }
            }
        }
        erk_mv_store(sum, lane, y, b, n_out, row, acc);
    }
}

void erk_matvec_q4_0(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc) {
    erk_mv_launch(st, k_mv_q4_0<true>, k_mv_q4_0<false>, ER_W_Q4_0, w, n_in, n_out, x, a, m, y, acc);
}
