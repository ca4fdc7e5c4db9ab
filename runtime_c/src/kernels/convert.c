/*
 * convert.c — scalar half/bfloat conversions, the GGML type map, and
 * activation row sizes. Integer bit manipulation only: _Float16 and F16C
 * are not available on every compiler/CPU we target, and these must give
 * the same bits everywhere because KV-cache and golden tests compare them.
 */
#include "kernels.h"
#include "half.h"

#include <string.h>

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float er_f16_to_f32(er_f16 h) { return er_half_to_float(h); }

er_f16 er_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) {
        if (x == 0x7f800000u)
            return sign | 0x7c00u;
        /* NaN: keep the top payload bits and force quiet, so truncation
         * can never turn a NaN into an infinity. */
        return (er_f16)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    }
    /* 65520 = halfway between 65504 (largest half) and 2^16; the tie goes
     * to the even neighbour, which is infinity. */
    if (x >= 0x477ff000u)
        return sign | 0x7c00u;
    if (x < 0x38800000u) { /* below 2^-14: half subnormal or zero */
        /* <= 2^-25 (half of the smallest subnormal) rounds to zero; the
         * exact tie goes to the even value 0. */
        if (x <= 0x33000000u)
            return sign;
        uint32_t e = x >> 23;                     /* 102..112 */
        uint32_t m = (x & 0x7fffffu) | 0x800000u; /* implicit one */
        uint32_t shift = 126u - e;                /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++; /* may carry into 0x400, the smallest normal: correct */
        return (er_f16)(sign | r);
    }
    uint32_t h = ((x >> 23) - 112u) << 10 | ((x >> 13) & 0x3ffu);
    uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a mantissa carry bumps the exponent, which is the right result */
    return (er_f16)(sign | h);
}

float er_bf16_to_f32(er_bf16 h) { return er_bfloat_to_float(h); }

int er_wtype_from_ggml(uint32_t ggml_type) {
    switch (ggml_type) {
    case 0: return ER_W_F32;
    case 1: return ER_W_F16;
    case 2: return ER_W_Q4_0;
    case 3: return ER_W_Q4_1;
    case 6: return ER_W_Q5_0;
    case 7: return ER_W_Q5_1;
    case 8: return ER_W_Q8_0;
    case 10: return ER_W_Q2_K;
    case 11: return ER_W_Q3_K;
    case 12: return ER_W_Q4_K;
    case 13: return ER_W_Q5_K;
    case 14: return ER_W_Q6_K;
    case 20: return ER_W_IQ4_NL;
    case 23: return ER_W_IQ4_XS;
    case 30: return ER_W_BF16;
    default: return -1;
    }
}

size_t er_act_row_bytes(int act_kind, int n) {
    if (n <= 0)
        return 0;
    switch (act_kind) {
    case ER_ACT_F32: return (size_t)n * sizeof(float);
    /* rounded up so a planner that forgot the multiple-of-32 check still
     * reserves enough room; the kernels themselves require n % 32 == 0 */
    case ER_ACT_Q8_0: return ((size_t)n + ER_QK8_0 - 1) / ER_QK8_0 * sizeof(er_block_q8_0);
    case ER_ACT_Q8_K: return ((size_t)n + ER_QK_K - 1) / ER_QK_K * sizeof(er_block_q8_k);
    default: return 0;
    }
}

/* The kernels index blocks by these sizes; a compiler that padded a block
 * would silently misread every file. */
_Static_assert(sizeof(er_block_q8_0) == 34, "Q8_0 block must be 34 bytes");
_Static_assert(sizeof(er_block_q4_0) == 18, "Q4_0 block must be 18 bytes");
_Static_assert(sizeof(er_block_q4_k) == 144, "Q4_K block must be 144 bytes");
_Static_assert(sizeof(er_block_q5_k) == 176, "Q5_K block must be 176 bytes");
_Static_assert(sizeof(er_block_q6_k) == 210, "Q6_K block must be 210 bytes");
_Static_assert(sizeof(er_block_q8_k) == 292, "Q8_K block must be 292 bytes");
