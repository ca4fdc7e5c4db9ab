/*
 * dot_q2_k_q3_k.c — Q2_K and Q3_K weight rows · Q8_K activation rows, and
 * their dequantizers. Both hold 2 low bits per element, four elements to a
 * byte (element e of a super-block: half h = e/128, j = e%128/32, l = e%32,
 * bits 2j of qs[32h + l]) and one scale per sub-block of 16, which meets
 * the Q8_K bsums one to one. Per super-block:
 *  Q2_K: isum = Σ (sc & 15) (q . x), imin = Σ (sc >> 4) bsum, q in 0..3;
 *  Q3_K: isum = Σ (s - 32) (q . x), q in -4..3 (minus 4 where the hmask bit
 *        is clear);
 * then kquant.h's shared float tail, so every ISA's twin matches these bits.
 */
#include "generic.h"
#include "../half.h"
#include "../kquant.h"

static inline int low2(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

static inline int q3(const er_block_q3_k *b, int e) {
    const int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
    return low2(b->qs, e) - (hbit ? 0 : 4);
}

float er_gen_dot_q2_k(int n, const void *w_row, const void *x_row) {
    const er_block_q2_k *w = w_row;
    const er_block_q8_k *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++) s += low2(w[i].qs, 16 * j + l) * x[i].qs[16 * j + l];
            isum += (w[i].scales[j] & 0x0f) * s;
            imin += (w[i].scales[j] >> 4) * x[i].bsums[j];
        }
        sum = er_kq_accum(sum, er_half_to_float(w[i].d), er_half_to_float(w[i].dmin), x[i].d, isum, imin);
    }
    return sum;
}

float er_gen_dot_q3_k(int n, const void *w_row, const void *x_row) {
    const er_block_q3_k *w = w_row;
    const er_block_q8_k *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t sc[16];
        er_q3k_scales(w[i].scales, sc);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++) s += q3(&w[i], 16 * j + l) * x[i].qs[16 * j + l];
            isum += sc[j] * s;
        }
        sum = er_kq_accum(sum, er_half_to_float(w[i].d), 0.0f, x[i].d, isum, 0);
    }
    return sum;
}

/* gguf-py's rounding: dl = d * sc and ml = dmin * mn first, then dl * q - ml
 * (separate statements: no FMA) */
void er_gen_dequant_q2_k(const void *src, float *dst, int n) {
    const er_block_q2_k *b = src;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const float d = er_half_to_float(b[i].d), dmin = er_half_to_float(b[i].dmin);
        for (int e = 0; e < ER_QK_K; e++) {
            const float dl = d * (float)(b[i].scales[e / 16] & 0x0f);
            const float ml = dmin * (float)(b[i].scales[e / 16] >> 4);
            const float v = dl * (float)low2(b[i].qs, e);
            dst[(size_t)i * ER_QK_K + e] = v - ml;
        }
    }
}

void er_gen_dequant_q3_k(const void *src, float *dst, int n) {
    const er_block_q3_k *b = src;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t sc[16];
        er_q3k_scales(b[i].scales, sc);
        const float d = er_half_to_float(b[i].d);
        for (int e = 0; e < ER_QK_K; e++) {
            const float dl = d * (float)sc[e / 16];
            dst[(size_t)i * ER_QK_K + e] = dl * (float)q3(&b[i], e);
        }
    }
}
