/*
 * q_neon.c — quantized dots and matmuls (Q8_0, Q4_0 vs Q8_0; Q4_K, Q5_K,
 * Q6_K vs Q8_K), NEON. Compiled twice (see neon.h): with SDOT when
 * ER_NEON_DOTPROD=1, with widening multiplies when it is 0.
 *
 * Q8_0/Q4_0: exact int32 per block, float FMA-accumulated with the block
 * scales (float order differs from generic; tolerance-tested). K-quants:
 * weights unpacked to signed int8 (Q6_K as q-32), sub-block scales applied
 * in int32, then kquant.h's shared float tail: bit-identical to generic.
 */
#include "../matmul_tiles.h"
#include "neon.h"
#include "../kquant.h"

/* Which twin this compilation is comes from ER_NEON_DOTPROD (set by
 * kernels/meson.build), never from __ARM_FEATURE_DOTPROD: a board build with
 * -mcpu=cortex-a76 enables dotprod for the baseline library too, and deriving
 * the names from the compiler's target would define the er_neondp_* symbols
 * twice and er_neon_* not at all. */
#if !defined(ER_NEON_DOTPROD)
#error "compile q_neon.c with -DER_NEON_DOTPROD=0 (widening multiplies) or =1 (SDOT)"
#endif

#if ER_NEON_DOTPROD
#if !defined(__ARM_FEATURE_DOTPROD)
#error "ER_NEON_DOTPROD=1 needs a dotprod target (-march=armv8.2-a+dotprod)"
#endif
#define FN(name) er_neondp_##name
/* acc + the 16 products a*b, summed in groups of four (SDOT). */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
#else
#define FN(name) er_neon_##name
/* Without SDOT: widening multiplies to int16 (two products per lane, at most
 * 2 * 128 * 127 < 32767 since Q8 activations never hold -128), then a
 * pairwise widening add into int32. Same integer total as SDOT. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
}
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* One weight block as two int8x16 halves in element order, and its scale. */
static ALWAYS_INLINE float load_wblock(const void *w_row, int i, int8x16_t *lo, int8x16_t *hi, const int q4) {
    if (q4) {
        const er_block_q4_0 *b = (const er_block_q4_0 *)w_row + i;
        const uint8x16_t q = vld1q_u8(b->qs);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
        return er_neon_h2f(b->d);
    }
    const er_block_q8_0 *b = (const er_block_q8_0 *)w_row + i;
    *lo = vld1q_s8(b->qs);
    *hi = vld1q_s8(b->qs + 16);
    return er_neon_h2f(b->d);
}

static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int q4) {
    const er_block_q8_0 *x = x_row;
    const int nb = n / ER_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        int8x16_t a0, b0, a1, b1;
        const float d0 = load_wblock(w_row, i, &a0, &b0, q4) * er_neon_h2f(x[i].d);
        const float d1 = load_wblock(w_row, i + 1, &a1, &b1, q4) * er_neon_h2f(x[i + 1].d);
        const int32x4_t s0 = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(x[i].qs)), b0, vld1q_s8(x[i].qs + 16));
        const int32x4_t s1 = dot16(dot16(vdupq_n_s32(0), a1, vld1q_s8(x[i + 1].qs)), b1, vld1q_s8(x[i + 1].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(s0), d0);
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(s1), d1);
    }
    for (; i < nb; i++) {
        int8x16_t a0, b0;
        const float d0 = load_wblock(w_row, i, &a0, &b0, q4) * er_neon_h2f(x[i].d);
        const int32x4_t s0 = dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(x[i].qs)), b0, vld1q_s8(x[i].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(s0), d0);
    }
    return vaddvq_f32(vaddq_f32(acc0, acc1));
}

static ALWAYS_INLINE float32x4_t block_fma(int8x16_t a, int8x16_t b, float dw, const er_block_q8_0 *xb,
                                           float32x4_t acc) {
    const int32x4_t s = dot16(dot16(vdupq_n_s32(0), a, vld1q_s8(xb->qs)), b, vld1q_s8(xb->qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), dw * er_neon_h2f(xb->d));
}

/* Four activation rows against one weight row, sharing the weight unpack.
 * Named accumulators, not an array: an array of vectors may live on the
 * stack and chain the FMAs through memory. */
static ALWAYS_INLINE void row4_q(int n, const void *w_row, const unsigned char *x, size_t xs, float *out,
                                 const int q4) {
    const int nb = n / ER_QK8_0;
    const er_block_q8_0 *x0 = (const er_block_q8_0 *)(const void *)x;
    const er_block_q8_0 *x1 = (const er_block_q8_0 *)(const void *)(x + xs);
    const er_block_q8_0 *x2 = (const er_block_q8_0 *)(const void *)(x + 2 * xs);
    const er_block_q8_0 *x3 = (const er_block_q8_0 *)(const void *)(x + 3 * xs);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < nb; i++) {
        int8x16_t a, b;
        const float dw = load_wblock(w_row, i, &a, &b, q4);
        a0 = block_fma(a, b, dw, x0 + i, a0);
        a1 = block_fma(a, b, dw, x1 + i, a1);
        a2 = block_fma(a, b, dw, x2 + i, a2);
        a3 = block_fma(a, b, dw, x3 + i, a3);
    }
    out[0] = vaddvq_f32(a0);
    out[1] = vaddvq_f32(a1);
    out[2] = vaddvq_f32(a2);
    out[3] = vaddvq_f32(a3);
}

/* R weight rows one after another, and matmul_q asks for one: these
 * file-layout kernels only see matrices the repacked layouts do not take
 * (a row count that is not a multiple of the row group) or a run with
 * EDGERUN_REPACK=0, so they were not given a multi-row register tile */
static ALWAYS_INLINE void rows_q(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int q4) {
    for (int j = 0; j < R; j++) row4_q(n, (const unsigned char *)w + (size_t)j * rb, x, xs, out + 4 * j, q4);
}

/* chunks of weight rows x tiles of four activation rows (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_q(const er_matmul_args *a, const int q4) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, q4); }

float FN(dot_q8_0)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 0); }
float FN(dot_q4_0)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 1); }
void FN(matmul_q8_0)(const er_matmul_args *a) { matmul_q(a, 0); }
void FN(matmul_q4_0)(const er_matmul_args *a) { matmul_q(a, 1); }

/* ---- K-quants ---- */

/* Q4_K (q5 = 0) or Q5_K (q5 = 1): both have the same scales and layout of
 * nibbles; Q5_K ORs in 16 where its qh bit is set. */
static ALWAYS_INLINE float dot_q45k(int n, const void *w_row, const void *x_row, const int q5) {
    const er_block_q8_k *x = x_row;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b16 = vdupq_n_u8(16);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const uint8_t *scales, *qs;
        float d, dmin;
        uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
        if (q5) {
            const er_block_q5_k *b = (const er_block_q5_k *)w_row + i;
            scales = b->scales;
            qs = b->qs;
            d = er_neon_h2f(b->d);
            dmin = er_neon_h2f(b->dmin);
            qh0 = vld1q_u8(b->qh);
            qh1 = vld1q_u8(b->qh + 16);
        } else {
            const er_block_q4_k *b = (const er_block_q4_k *)w_row + i;
            scales = b->scales;
            qs = b->qs;
            d = er_neon_h2f(b->d);
            dmin = er_neon_h2f(b->dmin);
        }
        uint8_t sc[8], mn[8];
        er_kq_scale_min(scales, sc, mn);
        const int8_t *xq = x[i].qs;
        int32x4_t acc = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
            uint8x16_t l0 = vandq_u8(q0, m4), l1 = vandq_u8(q1, m4);
            uint8x16_t h0 = vshrq_n_u8(q0, 4), h1 = vshrq_n_u8(q1, 4);
            if (q5) {
                const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * c)));
                const uint8x16_t bh = vdupq_n_u8((uint8_t)(1u << (2 * c + 1)));
                l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(qh0, bl), b16));
                l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(qh1, bl), b16));
                h0 = vorrq_u8(h0, vandq_u8(vtstq_u8(qh0, bh), b16));
                h1 = vorrq_u8(h1, vandq_u8(vtstq_u8(qh1, bh), b16));
            }
            const int8_t *xl = xq + 64 * c;
            int32x4_t sl = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(xl));
            sl = dot16(sl, vreinterpretq_s8_u8(l1), vld1q_s8(xl + 16));
            int32x4_t sh = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(h0), vld1q_s8(xl + 32));
            sh = dot16(sh, vreinterpretq_s8_u8(h1), vld1q_s8(xl + 48));
            acc = vmlaq_n_s32(acc, sl, sc[2 * c]);
            acc = vmlaq_n_s32(acc, sh, sc[2 * c + 1]);
        }
        sum = er_kq_accum(sum, d, dmin, x[i].d, vaddvq_s32(acc), er_kq_min_sum(mn, x[i].bsums));
    }
    return sum;
}

float FN(dot_q4_k)(int n, const void *w_row, const void *x_row) { return dot_q45k(n, w_row, x_row, 0); }
float FN(dot_q5_k)(int n, const void *w_row, const void *x_row) { return dot_q45k(n, w_row, x_row, 1); }

float FN(dot_q6_k)(int n, const void *w_row, const void *x_row) {
    const er_block_q6_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *sc = w[i].scales + 8 * h;
            const int8_t *xq = x[i].qs + 128 * h;
            for (int half = 0; half < 2; half++) { /* elements l = 16*half .. +15 of each quarter */
                const uint8x16_t a = vld1q_u8(ql + 16 * half), b = vld1q_u8(ql + 32 + 16 * half);
                const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                const uint8x16_t u0 = vorrq_u8(vandq_u8(a, m4), vshlq_n_u8(vandq_u8(hb, m3), 4));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(b, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4));
                const uint8x16_t u2 = vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4));
                const uint8x16_t u3 = vorrq_u8(vshrq_n_u8(b, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
                const int8x16_t s0 = vsubq_s8(vreinterpretq_s8_u8(u0), off);
                const int8x16_t s1 = vsubq_s8(vreinterpretq_s8_u8(u1), off);
                const int8x16_t s2 = vsubq_s8(vreinterpretq_s8_u8(u2), off);
                const int8x16_t s3 = vsubq_s8(vreinterpretq_s8_u8(u3), off);
                /* quarter k covers elements 32k..32k+31; this half of it is
                 * sub-block 2k + half */
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), s0, vld1q_s8(xq + 16 * half)), sc[0 + half]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), s1, vld1q_s8(xq + 32 + 16 * half)), sc[2 + half]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), s2, vld1q_s8(xq + 64 + 16 * half)), sc[4 + half]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), s3, vld1q_s8(xq + 96 + 16 * half)), sc[6 + half]);
            }
        }
        sum = er_kq_accum(sum, er_neon_h2f(w[i].d), 0.0f, x[i].d, vaddvq_s32(acc), 0);
    }
    return sum;
}

void FN(matmul_q4_k)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q4_k)); }
void FN(matmul_q5_k)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q5_k)); }
void FN(matmul_q6_k)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q6_k)); }
