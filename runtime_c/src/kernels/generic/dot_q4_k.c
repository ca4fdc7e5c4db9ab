/*
 * dot_q4_k.c — Q4_K weight row · Q8_K activation row (and the row
 * dequantizer). Per super-block: isum = sum_j sc[j] * (q_j . x_j) over the
 * eight sub-blocks of 32 and imin = sum_j mn[j] * bsum_j, then kquant.h's
 * shared float tail, so every ISA's twin matches these bits exactly.
 */
#include "generic.h"
#include "../half.h"
#include "../kquant.h"

float er_gen_dot_q4_k(int n, const void *w_row, const void *x_row) {
    const er_block_q4_k *w = w_row;
    const er_block_q8_k *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        uint8_t sc[8], mn[8];
        er_kq_scale_min(w[i].scales, sc, mn);
        int32_t isum = 0;
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = w[i].qs + 32 * c;
            const int8_t *xl = x[i].qs + 64 * c;
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q[l] & 0x0f) * xl[l];
                hi += (q[l] >> 4) * xl[l + 32];
            }
            isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
        }
        sum = er_kq_accum(sum, er_half_to_float(w[i].d), er_half_to_float(w[i].dmin), x[i].d, isum,
                          er_kq_min_sum(mn, x[i].bsums));
    }
    return sum;
}

void er_gen_dequant_q4_k(const void *src, float *dst, int n) {
    const er_block_q4_k *b = src;
    for (int i = 0; i < n / ER_QK_K; i++) {
        uint8_t sc[8], mn[8];
        er_kq_scale_min(b[i].scales, sc, mn);
        const float d = er_half_to_float(b[i].d), dmin = er_half_to_float(b[i].dmin);
        float *y = dst + (size_t)i * ER_QK_K;
        for (int c = 0; c < 4; c++) {
            const float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
            for (int l = 0; l < 32; l++) {
                y[64 * c + l] = d1 * (float)(b[i].qs[32 * c + l] & 0x0f) - m1;
                y[64 * c + 32 + l] = d2 * (float)(b[i].qs[32 * c + l] >> 4) - m2;
            }
        }
    }
}
