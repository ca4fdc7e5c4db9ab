/*
 * dot_iq4.c — IQ4_NL (blocks of 32, · Q8_0) and IQ4_XS (super-blocks of
 * 256, · Q8_K) weight rows, and their dequantizers. Both map each nibble
 * through the same 16-level grid; IQ4_XS adds a signed 6-bit scale per 32.
 * IQ4_XS reduces a super-block to one exact integer and takes kquant.h's
 * float tail, so its SIMD twins match these bits; IQ4_NL sums blocks in
 * float as Q4_0 does.
 */
#include "generic.h"
#include "../half.h"
#include "../kquant.h"

const int8_t er_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Σ grid[q] x over 32 elements: qs holds them as in Q4_0. */
static inline int32_t grid_dot32(const uint8_t qs[16], const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += er_iq4nl_values[qs[j] & 0x0f] * x[j] + er_iq4nl_values[qs[j] >> 4] * x[j + 16];
    return s;
}

float er_gen_dot_iq4_nl(int n, const void *w_row, const void *x_row) {
    const er_block_iq4_nl *w = w_row;
    const er_block_q8_0 *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        /* two statements, as er_gen_dot_q5_0's (no FMA contraction) */
        const float p = (float)grid_dot32(w[i].qs, x[i].qs) * (er_half_to_float(w[i].d) * er_half_to_float(x[i].d));
        sum += p;
    }
    return sum;
}

float er_gen_dot_iq4_xs(int n, const void *w_row, const void *x_row) {
    const er_block_iq4_xs *w = w_row;
    const er_block_q8_k *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t ls[8];
        er_iq4xs_scales(&w[i], ls);
        int32_t isum = 0;
        for (int j = 0; j < 8; j++) isum += ls[j] * grid_dot32(w[i].qs + 16 * j, x[i].qs + 32 * j);
        sum = er_kq_accum(sum, er_half_to_float(w[i].d), 0.0f, x[i].d, isum, 0);
    }
    return sum;
}

void er_gen_dequant_iq4_nl(const void *src, float *dst, int n) {
    const er_block_iq4_nl *b = src;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        const float d = er_half_to_float(b[i].d);
        float *y = dst + (size_t)i * ER_QK4_0;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)er_iq4nl_values[b[i].qs[j] & 0x0f];
            y[j + 16] = d * (float)er_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* gguf-py's rounding: dl = d * (ls - 32) first, then dl * grid value */
void er_gen_dequant_iq4_xs(const void *src, float *dst, int n) {
    const er_block_iq4_xs *b = src;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t ls[8];
        er_iq4xs_scales(&b[i], ls);
        const float d = er_half_to_float(b[i].d);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)ls[j];
            const uint8_t *qs = b[i].qs + 16 * j;
            float *y = dst + (size_t)i * ER_QK_K + 32 * j;
            for (int l = 0; l < 16; l++) {
                y[l] = dl * (float)er_iq4nl_values[qs[l] & 0x0f];
                y[l + 16] = dl * (float)er_iq4nl_values[qs[l] >> 4];
            }
        }
    }
}
