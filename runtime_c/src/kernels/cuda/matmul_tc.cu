/*
 * matmul_tc.cu — prefill (m > 1) on tensor cores: WMMA 16x16x16 with f16
 * inputs and f32 accumulation. A block computes a 64 (activation rows) x 64
 * (weight rows) tile of y; for each 32-wide slice of the shared dimension it
 * converts the activations' slice (pre-converted to f16 in scratch) and the
 * weights' slice (dequantized by erk_deq, the CPU's values, then rounded to
 * f16) into shared memory. Each weight element is decoded once per 64
 * activation rows instead of once per row as in the matvec loop.
 *
 * Precision: f16 keeps 11 significant bits of every weight and activation
 * (tests hold it to 2e-3 of sum |w x|); F32 weights are not taken (see
 * erk_matmul_tc); activations beyond 65504 would turn
 * to inf, which Llama-family residual streams stay far below.
 */
#include "kernels/cuda/erk_common.cuh"

#include <mma.h>

#define TC_BM 64 /* activation rows per block */
#define TC_BN 64 /* weight rows (outputs) per block */
#define TC_BK 32
#define TC_LDS (TC_BK + 8)  /* padded smem row: a multiple of 8 halves, as WMMA needs */
#define TC_LDC (TC_BN + 4)

/* Saturates rather than overflows: one activation past f16's range (possible
 * at ffn_down's input on models with outlier features) would turn a whole row
 * of the product into inf/NaN. A NaN input fails both tests and stays NaN. */
__global__ void k_to_half(const float *__restrict__ x, __half *__restrict__ xh, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        xh[i] = __float2half_rn(v > 65504.0f ? 65504.0f : v < -65504.0f ? -65504.0f : v);
    }
}

template <int WT>
__global__ void __launch_bounds__(128) k_mm_tc(const uint8_t *__restrict__ w, size_t row_bytes, int n, int n_out,
                                               const __half *__restrict__ xh, int m, float *__restrict__ y,
                                               int acc) {
    using namespace nvcuda;
    __shared__ __align__(32) __half sa[TC_BM][TC_LDS];
    __shared__ __align__(32) __half sb[TC_BN][TC_LDS];
    __shared__ __align__(32) float sc[TC_BM][TC_LDC];
    const int tid = threadIdx.x, warp = tid / 32;
    const int r0 = blockIdx.x * TC_BN, b0 = blockIdx.y * TC_BM;
    const int wm = warp / 2, wn = warp % 2; /* each warp: 32 x 32 of the tile */

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(c[i][j], 0.0f);

    for (int k0 = 0; k0 < n; k0 += TC_BK) {
        for (int i = tid; i < TC_BM * TC_BK; i += blockDim.x) {
            const int rr = i / TC_BK, kk = i % TC_BK, b = b0 + rr, k = k0 + kk;
            sa[rr][kk] = (b < m && k < n) ? xh[(size_t)b * n + k] : __float2half_rn(0.0f);
        }
        for (int i = tid; i < TC_BN * TC_BK; i += blockDim.x) {
            const int rr = i / TC_BK, kk = i % TC_BK, r = r0 + rr, k = k0 + kk;
            const float v = (r < n_out && k < n) ? erk_deq(WT, w + (size_t)r * row_bytes, n, k) : 0.0f;
            sb[rr][kk] = __float2half_rn(v);
        }
        __syncthreads();
        for (int kk = 0; kk < TC_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bf[2];
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], &sa[wm * 32 + 16 * i][kk], TC_LDS);
            /* W rows are the columns of B = W^T: column-major with ld = row stride */
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(bf[j], &sb[wn * 32 + 16 * j][kk], TC_LDS);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(c[i][j], a[i], bf[j], c[i][j]);
        }
        __syncthreads(); /* the next slice overwrites sa/sb */
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(&sc[wm * 32 + 16 * i][wn * 32 + 16 * j], c[i][j], TC_LDC, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < TC_BM * TC_BN; i += blockDim.x) {
        const int rr = i / TC_BN, cc = i % TC_BN, b = b0 + rr, r = r0 + cc;
        if (b < m && r < n_out) {
            float *yo = y + (size_t)b * n_out + r;
            *yo = acc ? *yo + sc[rr][cc] : sc[rr][cc];
        }
    }
}

size_t erk_matmul_tc_scratch_bytes(int m_max, int n_in_max) {
    return erk_align((size_t)m_max * (size_t)n_in_max * sizeof(__half), 256);
}

int erk_matmul_tc(cudaStream_t st, int wtype, const void *w, int n_in, int n_out, const float *x, int m, float *y,
                  int acc, void *scratch) {
    /* F32 weights stay in f32 (the simple kernel over m rows): f16 would
     * round every weight the CPU backend uses exactly, and the F32 models
     * are the small reference ones whose logits the GPU must match tightly */
    if (m < 2 || wtype == ER_W_F32)
        return 0;
    const size_t rb = erk_row_bytes(wtype, n_in);
    if (!rb)
        return 0;
    __half *xh = static_cast<__half *>(scratch);
    const size_t count = (size_t)m * (size_t)n_in;
    const unsigned cgrid = (unsigned)((count + 255) / 256 < 4096 ? (count + 255) / 256 : 4096);
    k_to_half<<<cgrid, 256, 0, st>>>(x, xh, count);
    dim3 grid((unsigned)((n_out + TC_BN - 1) / TC_BN), (unsigned)((m + TC_BM - 1) / TC_BM));
    const uint8_t *wb = static_cast<const uint8_t *>(w);
    switch (wtype) {
    case ER_W_F16: k_mm_tc<ER_W_F16><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_BF16: k_mm_tc<ER_W_BF16><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_Q8_0: k_mm_tc<ER_W_Q8_0><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_Q4_0: k_mm_tc<ER_W_Q4_0><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_Q4_K: k_mm_tc<ER_W_Q4_K><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_Q5_K: k_mm_tc<ER_W_Q5_K><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    case ER_W_Q6_K: k_mm_tc<ER_W_Q6_K><<<grid, 128, 0, st>>>(wb, rb, n_in, n_out, xh, m, y, acc); break;
    default: return 0;
    }
    return 1;
}
