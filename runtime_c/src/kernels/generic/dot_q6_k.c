/*
 * dot_q6_k.c — Q6_K weight row · Q8_K activation row (and the row
 * dequantizer). 16 sub-blocks of 16 with signed 8-bit scales; the integer
 * sum is taken over the signed values q-32 (at most 32*127*16*127*16, well
 * inside int32), then scaled by d * x.d in kquant.h's shared tail.
 */
#include "generic.h"
#include "../half.h"
#include "../kquant.h"

/* Element e (0..255) of a Q6_K super-block as q-32. */
static inline int q6(const er_block_q6_k *b, int e) {
    const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    const int lowbits = quarter & 1 ? ql[l + 32] : ql[l];
    const int nib = quarter < 2 ? lowbits & 0x0f : lowbits >> 4;
    return (nib | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
}

float er_gen_dot_q6_k(int n, const void *w_row, const void *x_row) {
    const er_block_q6_k *w = w_row;
    const er_block_q8_k *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += q6(&w[i], 16 * j + l) * x[i].qs[16 * j + l];
            isum += w[i].scales[j] * s;
        }
        sum = er_kq_accum(sum, er_half_to_float(w[i].d), 0.0f, x[i].d, isum, 0);
    }
    return sum;
}

void er_gen_dequant_q6_k(const void *src, float *dst, int n) {
    const er_block_q6_k *b = src;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const float d = er_half_to_float(b[i].d);
        for (int e = 0; e < ER_QK_K; e++)
            dst[(size_t)i * ER_QK_K + e] = d * (float)b[i].scales[e / 16] * (float)q6(&b[i], e);
    }
}
