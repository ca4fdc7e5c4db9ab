/*
 * matvec_f16.cu — F16 weights x float activations, one warp per output row:
 * 16-byte loads of eight halves, float accumulation. Needs n % 8 == 0 and a
 * 16-byte aligned x; erk_matmul sends anything else to the simple kernel.
 */
#include "kernels/cuda/erk_common.cuh"

#define MV_UNROLL 4

__global__ void k_mv_f16(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out,
                         const float *__restrict__ x, float *__restrict__ y, int acc) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32, b = blockIdx.y;
    if (row >= n_out)
        return; /* warp-uniform */
    const int4 *wq = reinterpret_cast<const int4 *>(w + (size_t)row * row_bytes);
    const float4 *xv = reinterpret_cast<const float4 *>(x + (size_t)b * n);
    const int nch = n / 8;
    float sum = 0.0f;
    for (int base = 0; base < nch; base += 32 * MV_UNROLL) {
        int4 wv[MV_UNROLL];
        erk_mv_load(wv, wq, base, lane, nch);
#pragma unroll
        for (int u = 0; u < MV_UNROLL; u++) {
            const int c = base + 32 * u + lane;
            if (c < nch) {
                const float4 x0 = __ldg(xv + 2 * c), x1 = __ldg(xv + 2 * c + 1);
                const __half2 *h = reinterpret_cast<const __half2 *>(&wv[u]);
                const float2 a = __half22float2(h[0]), bb = __half22float2(h[1]);
                const float2 cc = __half22float2(h[2]), d = __half22float2(h[3]);
                sum += a.x * x0.x + a.y * x0.y + bb.x * x0.z + bb.y * x0.w;
                sum += cc.x * x1.x + cc.y * x1.y + d.x * x1.z + d.y * x1.w;
            }
        }
    }
    erk_mv_store(sum, lane, y, b, n_out, row, acc);
}

void erk_matvec_f16(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, int m, float *y, int acc) {
    const int warps = 4;
    dim3 grid((unsigned)((n_out + warps - 1) / warps), (unsigned)m);
    k_mv_f16<<<grid, 32 * warps, 0, st>>>(static_cast<const uint8_t *>(w), erk_row_bytes(ER_W_F16, n_in), n_in,
                                          n_out, x, y, acc);
}
