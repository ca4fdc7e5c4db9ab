/*
 * q_more_neon.c — the types of issue 25, NEON: Q4_1, Q5_0, Q5_1, IQ4_NL
 * against Q8_0 activations and Q2_K, Q3_K, IQ4_XS against Q8_K. Compiled
 * twice like q_neon.c (neon.h): SDOT when ER_NEON_DOTPROD=1, widening
 * multiplies when 0.
 *
 * Every weight becomes a signed int8 in element order (the nibbles as
 * q_neon.c's Q4_0; the fifth bit of Q5_0/Q5_1 spread from qh by a table
 * look-up and a bit test; IQ4_NL/IQ4_XS's grid by TBL; Q3_K as low - 4
 * where the hmask bit is clear), so one signed dot serves all: |w| <= 127
 * keeps the widening twin's int16 pairs from overflowing (2 * 127 * 127).
 * The 32-element types accumulate blocks in float as Q4_0 does (Q4_1/Q5_1
 * add their min times Σ x of the block's activation quants); the 256-element
 * ones end each super-block as exact integers fed to kquant.h's float tail,
 * bit-identical to generic.
 */
#include "neon.h"
#include "../kquant.h"
#include "../matmul_tiles.h"

#if !defined(ER_NEON_DOTPROD)
#error "compile q_more_neon.c with -DER_NEON_DOTPROD=0 (widening multiplies) or =1 (SDOT)"
#endif

#if ER_NEON_DOTPROD
#if !defined(__ARM_FEATURE_DOTPROD)
#error "ER_NEON_DOTPROD=1 needs a dotprod target (-march=armv8.2-a+dotprod)"
#endif
#define FN(name) er_neondp_##name
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
#else
#define FN(name) er_neon_##name
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
}
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_Q4_1, T_Q5_0, T_Q5_1, T_IQ4_NL };

/* bit j of the 32-bit little-endian qh as 16 in byte j: *lo elements 0-15,
 * *hi 16-31 */
static ALWAYS_INLINE void fifth_bits(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(h));
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vld1q_u8(bits), b16 = vdupq_n_u8(16);
    *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx_lo)), b), b16);
    *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx_hi)), b), b16);
}

/* Block i as two int8x16 halves in element order; its scale (and min). */
static ALWAYS_INLINE float load_w(const void *w_row, int i, int8x16_t *lo, int8x16_t *hi, float *mw, const int t) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    if (t == T_IQ4_NL) {
        const er_block_iq4_nl *b = (const er_block_iq4_nl *)w_row + i;
        const int8x16_t grid = vld1q_s8(er_iq4nl_values);
        const uint8x16_t q = vld1q_u8(b->qs);
        *lo = vqtbl1q_s8(grid, vandq_u8(q, m4));
        *hi = vqtbl1q_s8(grid, vshrq_n_u8(q, 4));
        return er_neon_h2f(b->d);
    }
    if (t == T_Q4_1) {
        const er_block_q4_1 *b = (const er_block_q4_1 *)w_row + i;
        const uint8x16_t q = vld1q_u8(b->qs);
        *lo = vreinterpretq_s8_u8(vandq_u8(q, m4));
        *hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
        *mw = er_neon_h2f(b->m);
        return er_neon_h2f(b->d);
    }
    const uint8_t *qs, *qh;
    float d;
    if (t == T_Q5_0) {
        const er_block_q5_0 *b = (const er_block_q5_0 *)w_row + i;
        qs = b->qs, qh = b->qh, d = er_neon_h2f(b->d);
    } else {
        const er_block_q5_1 *b = (const er_block_q5_1 *)w_row + i;
        qs = b->qs, qh = b->qh, d = er_neon_h2f(b->d);
        *mw = er_neon_h2f(b->m);
    }
    uint8x16_t h0, h1;
    fifth_bits(qh, &h0, &h1);
    const uint8x16_t q = vld1q_u8(qs);
    int8x16_t l = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), h0));
    int8x16_t u = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), h1));
    if (t == T_Q5_0) {
        l = vsubq_s8(l, vdupq_n_s8(16));
        u = vsubq_s8(u, vdupq_n_s8(16));
    }
    *lo = l;
    *hi = u;
    return d;
}

static ALWAYS_INLINE int has_min(const int t) { return t == T_Q4_1 || t == T_Q5_1; }

/* One block into acc (and its min's term into *mins). */
static ALWAYS_INLINE float32x4_t block_fma(int8x16_t lo, int8x16_t hi, float dw, float mw, const er_block_q8_0 *xb,
                                           float32x4_t acc, float *mins, const int t) {
    const int8x16_t x0 = vld1q_s8(xb->qs), x1 = vld1q_s8(xb->qs + 16);
    const float dx = er_neon_h2f(xb->d);
    const int32x4_t s = dot16(dot16(vdupq_n_s32(0), lo, x0), hi, x1);
    if (has_min(t)) {
        const int32_t xs = vaddlvq_s8(x0) + vaddlvq_s8(x1);
        *mins += (float)xs * (mw * dx);
    }
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), dw * dx);
}

static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int t) {
    const er_block_q8_0 *x = x_row;
    const int nb = n / ER_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float mins0 = 0.0f, mins1 = 0.0f;
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        int8x16_t a0, b0, a1, b1;
        float m0 = 0.0f, m1 = 0.0f;
        const float d0 = load_w(w_row, i, &a0, &b0, &m0, t), d1 = load_w(w_row, i + 1, &a1, &b1, &m1, t);
        acc0 = block_fma(a0, b0, d0, m0, x + i, acc0, &mins0, t);
        acc1 = block_fma(a1, b1, d1, m1, x + i + 1, acc1, &mins1, t);
    }
    for (; i < nb; i++) {
        int8x16_t a0, b0;
        float m0 = 0.0f;
        const float d0 = load_w(w_row, i, &a0, &b0, &m0, t);
        acc0 = block_fma(a0, b0, d0, m0, x + i, acc0, &mins0, t);
    }
    return vaddvq_f32(vaddq_f32(acc0, acc1)) + (mins0 + mins1);
}

float FN(dot_q4_1)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q4_1); }
float FN(dot_q5_0)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_0); }
float FN(dot_q5_1)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_1); }
float FN(dot_iq4_nl)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_IQ4_NL); }

/* ---- super-blocks of 256 ---- */

float FN(dot_q2_k)(int n, const void *w_row, const void *x_row) {
    const er_block_q2_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const uint8_t *sc = w[i].scales;
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            const int8_t *xq = x[i].qs + 128 * h;
            for (int j = 0; j < 4; j++) {
                const int8x16_t u0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, vdupq_n_s8((int8_t)(-2 * j))), m3));
                const int8x16_t u1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, vdupq_n_s8((int8_t)(-2 * j))), m3));
                const int sa = sc[8 * h + 2 * j] & 15, sb = sc[8 * h + 2 * j + 1] & 15;
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), u0, vld1q_s8(xq + 32 * j)), sa);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), u1, vld1q_s8(xq + 32 * j + 16)), sb);
            }
        }
        /* the mins: the high nibbles of the scale bytes against the bsums */
        const uint8x16_t s = vld1q_u8(sc);
        const int16x8_t mlo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(s, 4))));
        const int16x8_t mhi = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(s, 4)));
        int32x4_t mn = vmull_s16(vget_low_s16(mlo), vld1_s16(x[i].bsums));
        mn = vmlal_high_s16(mn, mlo, vld1q_s16(x[i].bsums));
        mn = vmlal_s16(mn, vget_low_s16(mhi), vld1_s16(x[i].bsums + 8));
        mn = vmlal_high_s16(mn, mhi, vld1q_s16(x[i].bsums + 8));
        sum = er_kq_accum(sum, er_neon_h2f(w[i].d), er_neon_h2f(w[i].dmin), x[i].d, vaddvq_s32(acc), vaddvq_s32(mn));
    }
    return sum;
}

float FN(dot_q3_k)(int n, const void *w_row, const void *x_row) {
    const er_block_q3_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t s[16];
        er_q3k_scales(w[i].scales, s);
        const uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            const int8_t *xq = x[i].qs + 128 * h;
            for (int j = 0; j < 4; j++) {
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j)));
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * j));
                /* low - 4 where the hmask bit is clear: (low | 4 if set) - 4 */
                const int8x16_t u0 = vsubq_s8(
                    vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q0, sh), m3), vandq_u8(vtstq_u8(hm0, bit), four))),
                    vreinterpretq_s8_u8(four));
                const int8x16_t u1 = vsubq_s8(
                    vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q1, sh), m3), vandq_u8(vtstq_u8(hm1, bit), four))),
                    vreinterpretq_s8_u8(four));
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), u0, vld1q_s8(xq + 32 * j)), s[8 * h + 2 * j]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), u1, vld1q_s8(xq + 32 * j + 16)), s[8 * h + 2 * j + 1]);
            }
        }
        sum = er_kq_accum(sum, er_neon_h2f(w[i].d), 0.0f, x[i].d, vaddvq_s32(acc), 0);
    }
    return sum;
}

float FN(dot_iq4_xs)(int n, const void *w_row, const void *x_row) {
    const er_block_iq4_xs *w = w_row;
    const er_block_q8_k *x = x_row;
    const int8x16_t grid = vld1q_s8(er_iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t ls[8];
        er_iq4xs_scales(&w[i], ls);
        int32x4_t acc = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const uint8x16_t q = vld1q_u8(w[i].qs + 16 * j);
            const int8_t *xq = x[i].qs + 32 * j;
            const int32x4_t s = dot16(dot16(vdupq_n_s32(0), vqtbl1q_s8(grid, vandq_u8(q, m4)), vld1q_s8(xq)),
                                      vqtbl1q_s8(grid, vshrq_n_u8(q, 4)), vld1q_s8(xq + 16));
            acc = vmlaq_n_s32(acc, s, ls[j]);
        }
        sum = er_kq_accum(sum, er_neon_h2f(w[i].d), 0.0f, x[i].d, vaddvq_s32(acc), 0);
    }
    return sum;
}

void FN(matmul_q4_1)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q4_1)); }
void FN(matmul_q5_0)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q5_0)); }
void FN(matmul_q5_1)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q5_1)); }
void FN(matmul_iq4_nl)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_iq4_nl)); }
void FN(matmul_q2_k)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q2_k)); }
void FN(matmul_q3_k)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_q3_k)); }
void FN(matmul_iq4_xs)(const er_matmul_args *a) { er_matmul_rows(a, FN(dot_iq4_xs)); }
