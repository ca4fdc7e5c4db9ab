/*
 * dot_q4_1_q5.c — Q4_1, Q5_1 (value d * q + m) and Q5_0 (d * (q - 16))
 * weight rows · Q8_0 activation rows, and their dequantizers.
 *
 * Per Q4_1/Q5_1 block the dot is d_w d_x Σ q x + m_w d_x Σ x: two exact integer sums
 * and one float tail. llama.cpp pairs these types with Q8_1 activations,
 * which carry d_x Σ x rounded to f16; taking Σ x from the int8 quants here
 * is the same quantity without that rounding, so Q8_0 activations serve.
 * The dequantizers round as gguf-py's (d * q, then + m: two statements, so
 * no compiler fuses them into one FMA).
 */
#include "generic.h"
#include "../half.h"

/* 5-bit element j (0..31) of a Q5_0/Q5_1 block: the nibble and bit j of qh. */
static inline int q5_at(const uint8_t qh[4], const uint8_t qs[16], int j) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    const int nib = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return nib | (int)((h >> j) & 1) << 4;
}

static inline float tail(float sum, float dw, float mw, float dx, int32_t isum, int32_t xsum) {
    const float a = (float)isum * (dw * dx);
    const float b = (float)xsum * (mw * dx);
    return sum + (a + b);
}

float er_gen_dot_q4_1(int n, const void *w_row, const void *x_row) {
    const er_block_q4_1 *w = w_row;
    const er_block_q8_0 *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        int32_t s = 0, xs = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[i].qs[j] & 0x0f) * x[i].qs[j] + (w[i].qs[j] >> 4) * x[i].qs[j + 16];
            xs += x[i].qs[j] + x[i].qs[j + 16];
        }
        sum = tail(sum, er_half_to_float(w[i].d), er_half_to_float(w[i].m), er_half_to_float(x[i].d), s, xs);
    }
    return sum;
}

float er_gen_dot_q5_1(int n, const void *w_row, const void *x_row) {
    const er_block_q5_1 *w = w_row;
    const er_block_q8_0 *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        int32_t s = 0, xs = 0;
        for (int j = 0; j < 32; j++) {
            s += q5_at(w[i].qh, w[i].qs, j) * x[i].qs[j];
            xs += x[i].qs[j];
        }
        sum = tail(sum, er_half_to_float(w[i].d), er_half_to_float(w[i].m), er_half_to_float(x[i].d), s, xs);
    }
    return sum;
}

/* Q5_0: value d * (q - 16), no min: one integer sum. */
float er_gen_dot_q5_0(int n, const void *w_row, const void *x_row) {
    const er_block_q5_0 *w = w_row;
    const er_block_q8_0 *x = x_row;
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += (q5_at(w[i].qh, w[i].qs, j) - 16) * x[i].qs[j];
        /* two statements: clang contracts a * b + c within one into an FMA
         * where the target has it (aarch64), which the SIMD twins'
         * separate multiply and add would not match */
        const float p = (float)s * (er_half_to_float(w[i].d) * er_half_to_float(x[i].d));
        sum += p;
    }
    return sum;
}

void er_gen_dequant_q4_1(const void *src, float *dst, int n) {
    const er_block_q4_1 *b = src;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        const float d = er_half_to_float(b[i].d), m = er_half_to_float(b[i].m);
        float *y = dst + (size_t)i * ER_QK4_0;
        for (int j = 0; j < 16; j++) {
            const float lo = d * (float)(b[i].qs[j] & 0x0f);
            const float hi = d * (float)(b[i].qs[j] >> 4);
            y[j] = lo + m;
            y[j + 16] = hi + m;
        }
    }
}

void er_gen_dequant_q5_1(const void *src, float *dst, int n) {
    const er_block_q5_1 *b = src;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        const float d = er_half_to_float(b[i].d), m = er_half_to_float(b[i].m);
        for (int j = 0; j < 32; j++) {
            const float v = d * (float)q5_at(b[i].qh, b[i].qs, j);
            dst[(size_t)i * ER_QK4_0 + j] = v + m;
        }
    }
}

void er_gen_dequant_q5_0(const void *src, float *dst, int n) {
    const er_block_q5_0 *b = src;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        const float d = er_half_to_float(b[i].d);
        for (int j = 0; j < 32; j++) dst[(size_t)i * ER_QK4_0 + j] = d * (float)(q5_at(b[i].qh, b[i].qs, j) - 16);
    }
}
