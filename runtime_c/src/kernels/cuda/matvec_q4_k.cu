/*
 * matvec_q4_k.cu — Q4_K weights x Q8_K activations, one warp per output row.
 * A super-block's 128 bytes of nibbles are 8 chunks of 16 bytes, so eight
 * consecutive lanes hold one super-block: chunk k = 2c + h covers elements
 * 64c+16h.. (low nibbles, sub-block 2c) and 64c+32+16h.. (high nibbles,
 * sub-block 2c+1). Each lane's share of isum = sum sc[j] * (q_j . x_j) and
 * of imin = sum mn[j] * xsum_j is an exact integer; three shuffles give the
 * super-block's totals, and kquant.h's float tail (kept free of FMA) turns
 * them into exactly the CPU's per-super-block term. FUSED (decode): x is
 * quantized into shared memory by the block itself.
 */
#include "kernels/cuda/erk_common.cuh"

#define MV_UNROLL 2

template <bool FUSED>
__global__ void __launch_bounds__(32 * ERK_MV_WARPS)
    k_mv_q4_k(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out, int rpw, const float *__restrict__ x,
              const int8_t *__restrict__ xq_g, const float *__restrict__ xd_g, const int32_t *__restrict__ xs_g,
              float *__restrict__ y, int acc) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.y;
    const erk_mv_x xa = erk_mv_x_row<FUSED>(true, n, b, x, xq_g, xd_g, xs_g);
    const int8_t *xr = xa.q;
    const float *dx = xa.d;
    const int32_t *sx = xa.s;
    const int nch = n / 32; /* a multiple of 8: groups of 8 lanes are all in or all out */
    const int k = lane & 7, c = k >> 1, h = k & 1;
    for (int rr = 0; rr < rpw; rr++) {
        const int row = (blockIdx.x * rpw + rr) * ERK_MV_WARPS + warp;
        if (row >= n_out)
            break; /* warp-uniform */
        const uint8_t *wr = w + (size_t)row * row_bytes;
        const int4 *wq = reinterpret_cast<const int4 *>(wr);
        const uint8_t *meta0 = wr + n / 2;
        float sum = 0.0f;
        for (int base = 0; base < nch; base += 32 * MV_UNROLL) {
            int4 wv[MV_UNROLL];
            erk_mv_load(wv, wq, base, lane, nch);
#pragma unroll
            for (int u = 0; u < MV_UNROLL; u++) {
                const int ch = base + 32 * u + lane;
                const int sb = ch >> 3;
                int isum = 0, imin = 0;
                if (ch < nch) {
                    const int8_t *xe = xr + 256 * (size_t)sb + 64 * c + 16 * h;
                    const int4 xl = *reinterpret_cast<const int4 *>(xe);
                    const int4 xh = *reinterpret_cast<const int4 *>(xe + 32);
                    const uint8_t *meta = meta0 + 16 * (size_t)sb;
                    const int m = 0x0f0f0f0f;
                    int lo = __dp4a(wv[u].x & m, xl.x, 0);
                    lo = __dp4a(wv[u].y & m, xl.y, lo);
                    lo = __dp4a(wv[u].z & m, xl.z, lo);
                    lo = __dp4a(wv[u].w & m, xl.w, lo);
                    int hi = __dp4a((wv[u].x >> 4) & m, xh.x, 0);
                    hi = __dp4a((wv[u].y >> 4) & m, xh.y, hi);
                    hi = __dp4a((wv[u].z >> 4) & m, xh.z, hi);
                    hi = __dp4a((wv[u].w >> 4) & m, xh.w, hi);
                    int sc_lo, mn_lo, sc_hi, mn_hi, sc_k, mn_k;
                    erk_kq_scale_min(meta + 4, 2 * c, &sc_lo, &mn_lo);
                    erk_kq_scale_min(meta + 4, 2 * c + 1, &sc_hi, &mn_hi);
                    /* lane k of the group also carries sub-block k's min term */
                    erk_kq_scale_min(meta + 4, k, &sc_k, &mn_k);
                    isum = sc_lo * lo + sc_hi * hi;
                    imin = mn_k * sx[8 * sb + k];
                }
                for (int o = 1; o < 8; o <<= 1) {
                    isum += __shfl_xor_sync(ERK_FULL, isum, o);
                    imin += __shfl_xor_sync(ERK_FULL, imin, o);
                }
                if (ch < nch && k == 0) {
                    const uint8_t *meta = meta0 + 16 * (size_t)sb;
                    const float dxs = dx[sb];
                    const float dd = __fmul_rn(erk_h2f(meta), dxs);
                    const float dm = __fmul_rn(erk_h2f(meta + 2), dxs);
                    const float t1 = __fmul_rn(dd, (float)isum);
                    const float t2 = __fmul_rn(dm, (float)imin);
                    sum += t1 - t2;
                }
            }
        }
        erk_mv_store(sum, lane, y, b, n_out, row, acc);
    }
}

void erk_matvec_q4_k(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc) {
    erk_mv_launch(st, k_mv_q4_k<true>, k_mv_q4_k<false>, ER_W_Q4_K, w, n_in, n_out, x, a, m, y, acc);
}
