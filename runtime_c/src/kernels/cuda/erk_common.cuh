/*
 * erk_common.cuh — what the CUDA kernel files share (internal): the device
 * row layout, warp reductions, activation-scratch layout and the per-element
 * weight decoder.
 *
 * Device row layout (erk_row_to_device, 16-byte aligned, zero padded): the
 * quants of the whole row come first and the per-block metadata after them,
 * so a warp streams a row with 16-byte loads and no block straddles a load:
 *   F32/F16/BF16  n values
 *   Q8_0          int8 qs[n]          | f16 d[n/32]
 *   Q4_0          u8 qs[n/2]          | f16 d[n/32]        (block i = its GGUF qs[16])
 *   Q4_K          u8 qs[n/2]          | meta[n/256][16]    (meta = d, dmin, scales[12])
 *   Q5_K          u8 qs[n/2] | u8 qh[n/8] | meta[n/256][16]
 *   Q6_K          u8 ql[n/2] | u8 qh[n/4] | i8 scales[n/16] | f16 d[n/256]
 * Within a block/super-block every byte keeps its GGUF meaning, so the
 * element <-> byte mapping documented in kernels.h holds unchanged.
 */
#ifndef ER_CUDA_ERK_COMMON_CUH
#define ER_CUDA_ERK_COMMON_CUH

#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "kernels/kernels.h"
}
#include "kernels/cuda/cuda_kernels.h"

#define ERK_FULL 0xffffffffu

static inline size_t erk_align(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ---- row layout offsets (host and device) ---- */

/* Byte offset of the metadata region that follows the quants (the second
 * region in the table above; for Q6_K the qh region). */
__host__ __device__ static inline size_t erk_meta_off(int wtype, int n) {
    switch (wtype) {
    case ER_W_Q8_0: return (size_t)n;
    case ER_W_Q4_0: case ER_W_Q4_K: case ER_W_Q6_K: return (size_t)n / 2;
    case ER_W_Q5_K: return (size_t)n / 2 + (size_t)n / 8;
    default: return 0;
    }
}

/* ---- warp reductions (full mask: every caller keeps the whole warp in) ---- */

__device__ __forceinline__ float erk_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(ERK_FULL, v, o);
    return v;
}

__device__ __forceinline__ float erk_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(ERK_FULL, v, o));
    return v;
}

__device__ __forceinline__ int erk_warp_sum_int(int v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(ERK_FULL, v, o);
    return v;
}

/* The decoders below are __host__ __device__ so that erk_row_decode_host
 * (layout.cu) runs the kernels' own element decoder on the CPU and the
 * no-GPU layout test checks its offsets against the generic dequantizer. */
__host__ __device__ __forceinline__ float erk_h2f(const void *p) {
    return __half2float(*reinterpret_cast<const __half *>(p));
}

__host__ __device__ __forceinline__ float erk_bf2f(uint16_t b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)b << 16);
#else
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* Products and differences that must round on their own (no FMA
 * contraction): the __f*_rn intrinsics on the device; on the host a
 * separate statement per operation, and the host compiler runs in ISO C++
 * mode (no -ffp-contract=fast). */
__host__ __device__ __forceinline__ float erk_mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    const float r = a * b;
    return r;
#endif
}

__host__ __device__ __forceinline__ float erk_sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    const float r = a - b;
    return r;
#endif
}

/* The eight 6-bit scales/mins of a Q4_K/Q5_K super-block (kquant.h's rule). */
__host__ __device__ __forceinline__ void erk_kq_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/*
 * One element of a device-layout row as float, computed exactly as the
 * generic dequant_row does (erk_mul_rn/erk_sub_rn stop nvcc from fusing a
 * multiply and a subtract into an FMA, which would round differently): the
 * embedding look-up and the tensor-core tile loads use it, and the simple
 * matvec for the types without a dedicated kernel. erk_row_decode_host runs
 * it on the CPU for the layout test.
 */
__host__ __device__ __forceinline__ float erk_deq(int wtype, const uint8_t *row, int n, int e) {
    switch (wtype) {
    case ER_W_F32: return reinterpret_cast<const float *>(row)[e];
    case ER_W_F16: return erk_h2f(row + 2 * (size_t)e);
    case ER_W_BF16: return erk_bf2f(reinterpret_cast<const uint16_t *>(row)[e]);
    case ER_W_Q8_0: {
        const float d = erk_h2f(row + n + 2 * (size_t)(e / 32));
        return erk_mul_rn((float)(int8_t)row[e], d);
    }
    case ER_W_Q4_0: {
        const int b = e / 32, j = e % 32;
        const uint8_t q = row[16 * b + (j & 15)];
        const int v = (j < 16 ? (q & 0x0f) : (q >> 4)) - 8;
        return erk_mul_rn((float)v, erk_h2f(row + n / 2 + 2 * (size_t)b));
    }
    case ER_W_Q4_K: case ER_W_Q5_K: {
        const int sb = e / 256, r = e % 256, c = r / 64, hi = (r % 64) >= 32, l = r % 32;
        const uint8_t *meta = row + erk_meta_off(wtype, n) + 16 * (size_t)sb;
        const uint8_t q = row[128 * (size_t)sb + 32 * c + l];
        int v = hi ? q >> 4 : q & 0x0f;
        if (wtype == ER_W_Q5_K)
            v |= ((row[(size_t)n / 2 + 32 * (size_t)sb + l] >> (2 * c + hi)) & 1) << 4;
        int sc, mn;
        erk_kq_scale_min(meta + 4, 2 * c + hi, &sc, &mn);
        const float d1 = erk_mul_rn(erk_h2f(meta), (float)sc);
        const float m1 = erk_mul_rn(erk_h2f(meta + 2), (float)mn);
        return erk_sub_rn(erk_mul_rn(d1, (float)v), m1);
    }
    case ER_W_Q6_K: {
        const int sb = e / 256, r = e % 256, h = r / 128, q4 = (r % 128) / 32, l = r % 32;
        const uint8_t *ql = row + 128 * (size_t)sb + 64 * h;
        const uint8_t *qh = row + (size_t)n / 2 + 64 * (size_t)sb + 32 * h;
        const int8_t *scales = reinterpret_cast<const int8_t *>(row + (size_t)n / 2 + (size_t)n / 4);
        const float d = erk_h2f(row + (size_t)n / 2 + (size_t)n / 4 + (size_t)n / 16 + 2 * (size_t)sb);
        const int low = (q4 & 1) ? ql[l + 32] : ql[l];
        const int nib = q4 < 2 ? (low & 0x0f) : (low >> 4);
        const int v = (nib | (((qh[l] >> (2 * q4)) & 3) << 4)) - 32;
        return erk_mul_rn(erk_mul_rn(d, (float)scales[e / 16]), (float)v);
    }
    default: return 0.0f;
    }
}

/*
 * Quantized activations in the matmul scratch (erk_quantize_act writes them,
 * the integer matvecs read them). Q8_0 blocks of 32 for Q8_0/Q4_0 weights,
 * Q8_K blocks of 256 for Q4_K, each by the CPU's exact rule, so the integer
 * sums equal the CPU's and only float summation order differs:
 *   qs  int8 [m][n]         at 0
 *   d   float [m][n/32]     (Q8_0: per 32, the f16-rounded scale; Q8_K: per 256)
 *   s   int32 [m][n/32]     sum of the 32 quants of each block (Q4_0's -8
 *                           offset, Q4_K's mins)
 */
struct erk_act {
    int8_t *qs;
    float *d;
    int32_t *s;
};

static inline erk_act erk_act_carve(void *scratch, int m, int n) {
    uint8_t *p = static_cast<uint8_t *>(scratch);
    const size_t qs_bytes = erk_align((size_t)m * (size_t)n, 256);
    const size_t d_bytes = erk_align((size_t)m * (size_t)(n / 32) * sizeof(float), 256);
    erk_act a;
    a.qs = reinterpret_cast<int8_t *>(p);
    a.d = reinterpret_cast<float *>(p + qs_bytes);
    a.s = reinterpret_cast<int32_t *>(p + qs_bytes + d_bytes);
    return a;
}

static inline size_t erk_act_bytes(int m, int n) {
    return erk_align((size_t)m * (size_t)n, 256) + 2 * erk_align((size_t)m * (size_t)(n / 32) * 4, 256);
}

/*
 * The CPU's activation quantizers for one block, run by one whole warp (all
 * 32 lanes must call: they shuffle). Q8_0: lane l quantizes xb[l]; writes
 * q[0..31], *d (the f16-rounded scale the CPU multiplies by) and *s (the sum
 * of the quants). Q8_K: lane l quantizes xb[8l..8l+7]; writes q[0..255], *d
 * and s[0..7] (sums of each 32). quant_act.cu's kernels and the fused
 * decode matvecs (which quantize x into shared memory) share them.
 */
__device__ __forceinline__ void erk_quant_q8_0_warp(const float *xb, int lane, int8_t *q, float *d, int32_t *s) {
    const float v = xb[lane];
    /* fmaxf skips NaN like the CPU's `a > amax` does; starting each lane
     * from 0 (as the CPU starts amax) keeps an all-NaN block at amax 0 and
     * d 0 like the CPU's, instead of a NaN scale */
    const float amax = erk_warp_max(fmaxf(fabsf(v), 0.0f));
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    float qf = roundf(v * id);
    if (!(qf >= -127.0f && qf <= 127.0f))
        qf = qf > 0.0f ? 127.0f : (qf < 0.0f ? -127.0f : 0.0f);
    q[lane] = (int8_t)qf;
    const int sum = erk_warp_sum_int((int)qf);
    if (lane == 0) {
        *d = __half2float(__float2half_rn(dd));
        *s = sum;
    }
}

__device__ __forceinline__ void erk_quant_q8_k_warp(const float *xb, int lane, int8_t *q, float *d, int32_t *s) {
    float v[8];
    float amax = 0.0f;
    for (int j = 0; j < 8; j++) {
        v[j] = xb[8 * lane + j];
        const float a = fabsf(v[j]);
        amax = a > amax ? a : amax;
    }
    amax = erk_warp_max(amax);
    /* the CPU takes the signed value at the FIRST index of largest magnitude */
    int first = 0x7fffffff;
    for (int j = 7; j >= 0; j--)
        if (amax != 0.0f && fabsf(v[j]) == amax)
            first = 8 * lane + j;
    for (int o = 16; o > 0; o >>= 1)
        first = min(first, __shfl_xor_sync(ERK_FULL, first, o));
    const float mx = first == 0x7fffffff ? 0.0f : xb[first];
    const float iscale = amax != 0.0f ? -127.0f / mx : 0.0f;
    const bool zero = iscale == 0.0f || !isfinite(iscale);
    int sum = 0;
    for (int j = 0; j < 8; j++) {
        int qi = 0;
        if (!zero) {
            const float t = iscale * v[j];
            /* rintf: nearest even, as the CPU's magic-number rounding for |t| <= 127 */
            qi = t == t ? (int)rintf(t) : 0;
            qi = qi > 127 ? 127 : (qi < -127 ? -127 : qi);
        }
        q[8 * lane + j] = (int8_t)qi;
        sum += qi;
    }
    sum += __shfl_xor_sync(ERK_FULL, sum, 1);
    sum += __shfl_xor_sync(ERK_FULL, sum, 2);
    if (lane % 4 == 0)
        s[lane / 4] = sum;
    if (lane == 0)
        *d = zero ? 0.0f : 1.0f / iscale;
}

/* Decode (m = 1) quantizes x inside each matvec block, into dynamic shared
 * memory laid out like one row of erk_act: qs[n] | d[n/32] | s[n/32]. Up to
 * this width (40 KiB of the default 48 KiB); wider rows use the separate
 * quantize kernel. */
#define ERK_FUSED_MAX_N 32768
static inline size_t erk_fused_smem(int n) { return (size_t)n + (size_t)(n / 32) * 8; }

/* Every warp of the block quantizes blocks w, w + warps, ... of x into the
 * shared row; the caller syncs the block afterwards. */
__device__ __forceinline__ void erk_quant_row_block(bool q8k, const float *x, int n, int8_t *q, float *d,
                                                    int32_t *s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (q8k) {
        for (int b = warp; b < n / 256; b += nw)
            erk_quant_q8_k_warp(x + 256 * (size_t)b, lane, q + 256 * (size_t)b, d + b, s + 8 * b);
    } else {
        for (int b = warp; b < n / 32; b += nw)
            erk_quant_q8_0_warp(x + 32 * (size_t)b, lane, q + 32 * (size_t)b, d + b, s + b);
    }
}

/* Launch shape of the integer matvecs: 4-warp blocks (768 rows still make
 * more blocks than an H200 has SMs), each warp taking rows_per_warp rows on
 * tall matrices so a block's x quantization is shared by up to 16 rows
 * (32000 x 768: 2000 blocks re-reading 3 KB of x, 6 MB of L2 traffic
 * against 26 MB of weights). */
#define ERK_MV_WARPS 4
static inline int erk_mv_rows_per_warp(int n_out) { return n_out >= 16384 ? 4 : (n_out >= 4096 ? 2 : 1); }

/* The quantized activation row (erk_act's layout) one decode-matvec block
 * reads: FUSED, the block quantizes x into dynamic shared memory itself
 * (erk_fused_smem(n) bytes; Q8_K blocks when q8k, else Q8_0) and syncs
 * before any warp reads it, so every thread of the block must call this,
 * before any early exit; otherwise activation row b (blockIdx.y) of the
 * pre-quantized global arrays. */
struct erk_mv_x {
    const int8_t *q;
    const float *d;
    const int32_t *s;
};

template <bool FUSED>
__device__ __forceinline__ erk_mv_x erk_mv_x_row(bool q8k, int n, int b, const float *x, const int8_t *xq_g,
                                                 const float *xd_g, const int32_t *xs_g) {
    extern __shared__ int4 erk_smem[];
    erk_mv_x r;
    if (FUSED) {
        int8_t *q = reinterpret_cast<int8_t *>(erk_smem);
        float *d = reinterpret_cast<float *>(q + n);
        int32_t *s = reinterpret_cast<int32_t *>(d + n / 32);
        erk_quant_row_block(q8k, x, n, q, d, s);
        __syncthreads();
        r.q = q;
        r.d = d;
        r.s = s;
    } else {
        r.q = xq_g + (size_t)b * n;
        r.d = xd_g + (size_t)b * (n / 32);
        r.s = xs_g + (size_t)b * (n / 32);
    }
    return r;
}

/* The U 16-byte weight chunks base + 32u + lane (zero past nch) a lane
 * issues together before using any, so U loads are in flight at once. */
template <int U>
__device__ __forceinline__ void erk_mv_load(int4 (&wv)[U], const int4 *wq, int base, int lane, int nch) {
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int c = base + 32 * u + lane;
        wv[u] = c < nch ? __ldg(wq + c) : make_int4(0, 0, 0, 0);
    }
}

/* A warp's partial sums to y[b][row] (added to it when acc); the whole warp
 * must call (it shuffles). */
__device__ __forceinline__ void erk_mv_store(float sum, int lane, float *y, int b, int n_out, int row, int acc) {
    sum = erk_warp_sum(sum);
    if (lane == 0) {
        float *yo = y + (size_t)b * n_out + row;
        *yo = acc ? *yo + sum : sum;
    }
}

/* The integer matvec kernels' common signature (Q8_0 takes xs_g only to
 * share it), and their launch: FUSED when the caller has no pre-quantized
 * activations (a.qs == NULL, m == 1). */
typedef void (*erk_mv_kernel)(const uint8_t *w, size_t row_bytes, int n, int n_out, int rpw, const float *x,
                              const int8_t *xq_g, const float *xd_g, const int32_t *xs_g, float *y, int acc);

static inline void erk_mv_launch(cudaStream_t st, erk_mv_kernel fused, erk_mv_kernel pre, int wtype, const void *w,
                                 int n_in, int n_out, const float *x, erk_act a, int m, float *y, int acc) {
    const int rpw = erk_mv_rows_per_warp(n_out), rows = rpw * ERK_MV_WARPS;
    dim3 grid((unsigned)((n_out + rows - 1) / rows), (unsigned)m);
    const uint8_t *wb = static_cast<const uint8_t *>(w);
    const size_t rb = erk_row_bytes(wtype, n_in);
    if (!a.qs)
        fused<<<grid, 32 * ERK_MV_WARPS, erk_fused_smem(n_in), st>>>(wb, rb, n_in, n_out, rpw, x, nullptr, nullptr,
                                                                      nullptr, y, acc);
    else
        pre<<<grid, 32 * ERK_MV_WARPS, 0, st>>>(wb, rb, n_in, n_out, rpw, nullptr, a.qs, a.d, a.s, y, acc);
}

/* Launchers shared between the matmul files (erk_matmul is in matmul.cu).
 * x is the float input (used when fused, i.e. a.qs == NULL and m == 1). */
void erk_quantize_act(cudaStream_t st, int wtype, const float *x, int m, int n, erk_act a);
void erk_matvec_q8_0(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc);
void erk_matvec_q4_0(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc);
void erk_matvec_q4_k(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, erk_act a, int m, float *y,
                     int acc);
void erk_matvec_f16(cudaStream_t st, const void *w, int n_in, int n_out, const float *x, int m, float *y, int acc);
void erk_matvec_simple(cudaStream_t st, int wtype, const void *w, int n_in, int n_out, const float *x, int m,
                       float *y, int acc);
/* Tensor-core prefill; returns 0 when it does not take this shape (the
 * caller falls back to the matvec over m rows). */
int erk_matmul_tc(cudaStream_t st, int wtype, const void *w, int n_in, int n_out, const float *x, int m, float *y,
                  int acc, void *scratch);
size_t erk_matmul_tc_scratch_bytes(int m_max, int n_in_max);

#endif
