/*
 * i8mm_neon.c — the 32-element types' prefill (Q8_0, Q4_0 and the issue-25
 * IQ4_NL, Q4_1, Q5_0, Q5_1) with SMMLA (vmmlaq_s32) on the 4-row
 * interleaved layouts (repack_neon.h), for the "neon-i8mm" table. Compiled
 * with -march=armv8.2-a+dotprod+i8mm (what armv8.6-a mandates of these, in
 * a spelling board -mcpu flags do not conflict with) into its own library;
 * the dispatcher picks the table only when HWCAP2 says the CPU has I8MM.
 *
 * SMMLA multiplies a 2x8 int8 matrix by the transpose of another: 2 weight
 * rows x 2 activation rows x 8 elements, 32 multiply-adds in one
 * instruction where SDOT does 16. A tile is one group of 4 weight rows and 4
 * activation rows: per 8-element slice, vzip1q_s32/vzip2q_s32 of the
 * layout's two neighbouring 4-byte groups give weight rows (0,1) and (2,3)
 * with 8 bytes each, the activation rows are interleaved in pairs once per
 * call (prep), and 4 SMMLA produce the 16 products' sums. Decode (m = 1)
 * would waste half of every SMMLA, so it runs the SDOT kernel of
 * repack_q_neon.c on the same layout.
 * Speed on real Arm cores is unmeasured (developed under qemu -cpu max).
 *
 * Arithmetic: as repack_q_neon.c — exact int32 per block and output;
 * Q8_0/Q4_0 FMA-accumulated with d_w * d_x in block order, the issue-25
 * types through generic's float tail lane by lane (generic's bits).
 */
#include "neon.h"
#include "repack_neon.h"
#include "repack_load_neon.h"

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "i8mm_neon.c needs an i8mm target (-march=armv8.2-a+dotprod+i8mm)"
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

#define KB 128 /* activation blocks per stack slice (4096 elements) */
#define NP 2   /* activation row pairs per tile */

/* One activation row pair, prepared per call: per block the two rows'
 * quants interleaved in 8-byte slices (row 0's 8s..8s+7, then row 1's),
 * their scales as (d0, d1, d0, d1) and the offsets er_x4_off * sum(x) and
 * sums the same way, matching SMMLA's output lanes (w0x0, w0x1, w1x0,
 * w1x1). A missing second row is zeros. */
typedef struct {
    int8_t q[KB][64];
    float d[KB][4];
    int32_t off[KB][4];
    float sum[KB][4];
} act_pair;

static ALWAYS_INLINE void prep_pair(const unsigned char *x, size_t xs, int rows, int b0, int b1, act_pair *p,
                                    const int t) {
    const er_block_q8_0 *x0 = (const er_block_q8_0 *)(const void *)x;
    const er_block_q8_0 *x1 = rows > 1 ? (const er_block_q8_0 *)(const void *)(x + xs) : NULL;
    for (int b = b0; b < b1; b++) {
        const int k = b - b0;
        const int8x16_t a0 = vld1q_s8(x0[b].qs), a1 = vld1q_s8(x0[b].qs + 16);
        const int8x16_t c0 = x1 ? vld1q_s8(x1[b].qs) : vdupq_n_s8(0), c1 = x1 ? vld1q_s8(x1[b].qs + 16) : vdupq_n_s8(0);
        const int64x2_t A0 = vreinterpretq_s64_s8(a0), A1 = vreinterpretq_s64_s8(a1);
        const int64x2_t C0 = vreinterpretq_s64_s8(c0), C1 = vreinterpretq_s64_s8(c1);
        vst1q_s8(p->q[k], vreinterpretq_s8_s64(vzip1q_s64(A0, C0)));
        vst1q_s8(p->q[k] + 16, vreinterpretq_s8_s64(vzip2q_s64(A0, C0)));
        vst1q_s8(p->q[k] + 32, vreinterpretq_s8_s64(vzip1q_s64(A1, C1)));
        vst1q_s8(p->q[k] + 48, vreinterpretq_s8_s64(vzip2q_s64(A1, C1)));
        const float d0 = er_neon_h2f(x0[b].d), d1 = x1 ? er_neon_h2f(x1[b].d) : 0.0f;
        p->d[k][0] = p->d[k][2] = d0;
        p->d[k][1] = p->d[k][3] = d1;
        if (!er_x4_off(t) && !er_x4_has_m(t)) continue;
        const int32_t s0 = (int32_t)vaddlvq_s8(a0) + vaddlvq_s8(a1);
        const int32_t s1 = (int32_t)vaddlvq_s8(c0) + vaddlvq_s8(c1);
        p->off[k][0] = p->off[k][2] = er_x4_off(t) * s0;
        p->off[k][1] = p->off[k][3] = er_x4_off(t) * s1;
        p->sum[k][0] = p->sum[k][2] = (float)s0;
        p->sum[k][1] = p->sum[k][3] = (float)s1;
    }
}

/* One group of 4 weight rows against np (1..2) activation row pairs over
 * blocks [b0, b1). acc[p][0]: (w0x0, w0x1, w1x0, w1x1), acc[p][1] the same
 * for weight rows 2 and 3. */
static ALWAYS_INLINE void group_tile(const void *wg, const int np, int b0, int b1, const act_pair *ap,
                                     float32x4_t acc[NP][2], const int t) {
    for (int b = b0; b < b1; b++) {
        const int k = b - b0;
        int8x16_t v[8]; /* the layout's 4-byte groups in element order */
        float32x4_t mw = vdupq_n_f32(0.0f);
        const float32x4_t dw = er_neon_load_x4(wg, b, v, t, &mw);
        int32x4_t s[NP][2];
        for (int p = 0; p < np; p++) s[p][0] = s[p][1] = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int sl = 0; sl < 4; sl++) {
            const int32x4_t ga = vreinterpretq_s32_s8(v[2 * sl]), gb = vreinterpretq_s32_s8(v[2 * sl + 1]);
            const int8x16_t w01 = vreinterpretq_s8_s32(vzip1q_s32(ga, gb));
            const int8x16_t w23 = vreinterpretq_s8_s32(vzip2q_s32(ga, gb));
            for (int p = 0; p < np; p++) {
                const int8x16_t xv = vld1q_s8(ap[p].q[k] + 16 * sl);
                s[p][0] = vmmlaq_s32(s[p][0], w01, xv);
                s[p][1] = vmmlaq_s32(s[p][1], w23, xv);
            }
        }
        const float32x4_t dw2[2] = {vzip1q_f32(dw, dw), vzip2q_f32(dw, dw)};
        const float32x4_t mw2[2] = {vzip1q_f32(mw, mw), vzip2q_f32(mw, mw)};
        for (int p = 0; p < np; p++) {
            const float32x4_t dx = vld1q_f32(ap[p].d[k]);
            for (int h = 0; h < 2; h++) {
                if (er_x4_off(t)) s[p][h] = vsubq_s32(s[p][h], vld1q_s32(ap[p].off[k]));
                if (!er_x4_exact(t)) {
                    acc[p][h] = vfmaq_f32(acc[p][h], vcvtq_f32_s32(s[p][h]), vmulq_f32(dw2[h], dx));
                    continue;
                }
                /* generic's float tail, lane by lane (repack_q_neon.c) */
                const float32x4_t pr = vmulq_f32(vcvtq_f32_s32(s[p][h]), vmulq_f32(dw2[h], dx));
                if (er_x4_has_m(t)) {
                    const float32x4_t q = vmulq_f32(vld1q_f32(ap[p].sum[k]), vmulq_f32(mw2[h], dx));
                    acc[p][h] = vaddq_f32(acc[p][h], vaddq_f32(pr, q));
                } else {
                    acc[p][h] = vaddq_f32(acc[p][h], pr);
                }
            }
        }
    }
}

static ALWAYS_INLINE int row_chunk(size_t group_bytes) {
    const int groups = group_bytes < 65536 ? (int)(65536 / group_bytes) : 1;
    return 4 * groups;
}

/* acc from y rows j (0..rows-1) of the tile at weight rows r..r+3 (zeros
 * for the first slice of blocks and for a pair's missing row), and back:
 * a later slice continues each output, so every lane sums its blocks in
 * generic's order. */
static ALWAYS_INLINE void load_tile(const float *y, size_t ys, int rows, float32x4_t acc[NP][2], int from_y) {
    for (int p = 0; p < NP; p++) {
        const float32x4_t y0 = from_y && 2 * p < rows ? vld1q_f32(y + (size_t)(2 * p) * ys) : vdupq_n_f32(0.0f);
        const float32x4_t y1 = from_y && 2 * p + 1 < rows ? vld1q_f32(y + (size_t)(2 * p + 1) * ys) : vdupq_n_f32(0.0f);
        acc[p][0] = vzip1q_f32(y0, y1);
        acc[p][1] = vzip2q_f32(y0, y1);
    }
}

static ALWAYS_INLINE void store_tile(float *y, size_t ys, int rows, float32x4_t acc[NP][2]) {
    for (int j = 0; j < rows; j++) {
        const int p = j / 2;
        const float32x4_t v = j & 1 ? vuzp2q_f32(acc[p][0], acc[p][1]) : vuzp1q_f32(acc[p][0], acc[p][1]);
        vst1q_f32(y + (size_t)j * ys, v);
    }
}

static ALWAYS_INLINE void matmul_mm(const er_matmul_args *a, const int t) {
    const int nb = a->n / ER_QK8_0;
    const size_t group_bytes = (size_t)nb * 4 * er_x4_block_bytes(t);
    const int chunk = row_chunk(group_bytes);
    act_pair ap[NP];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += 2 * NP) {
                const int rows = a->m - j0 < 2 * NP ? a->m - j0 : 2 * NP;
                const int np = (rows + 1) / 2;
                const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
                for (int p = 0; p < np; p++)
                    prep_pair(xj + (size_t)(2 * p) * a->x_stride, a->x_stride, rows - 2 * p, b0, b1, &ap[p], t);
                for (int r = c0; r < c1; r += 4) {
                    const void *wg = (const unsigned char *)a->w + (size_t)(r / 4) * group_bytes;
                    float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                    float32x4_t acc[NP][2];
                    load_tile(y, a->y_stride, rows, acc, b0 != 0);
                    if (np == 1)
                        group_tile(wg, 1, b0, b1, ap, acc, t);
                    else
                        group_tile(wg, 2, b0, b1, ap, acc, t);
                    store_tile(y, a->y_stride, rows, acc);
                }
            }
        }
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 4. One activation row goes to the SDOT kernel (sdot: the same layout's),
 * and so do a batched step's m_one rows (kernels.h). */
static ALWAYS_INLINE void matmul_i8(const er_matmul_args *a, const int t, void (*sdot)(const er_matmul_args *)) {
    const int m_mm = a->m - a->m_one;
    if (a->m < 2 || m_mm < 2) {
        sdot(a);
    } else if (!a->m_one) {
        matmul_mm(a, t);
    } else {
        er_matmul_args head = *a, tail = *a;
        head.m = m_mm;
        head.m_one = 0;
        tail.x = (const unsigned char *)a->x + (size_t)m_mm * a->x_stride;
        tail.y = a->y + (size_t)m_mm * a->y_stride;
        tail.m = a->m_one;
        matmul_mm(&head, t);
        sdot(&tail);
    }
}

void er_neoni8_matmul_q8_0x4(const er_matmul_args *a) { matmul_i8(a, ER_X4_Q8_0, er_neondp_matmul_q8_0x4); }
void er_neoni8_matmul_q4_0x4(const er_matmul_args *a) { matmul_i8(a, ER_X4_Q4_0, er_neondp_matmul_q4_0x4); }
void er_neoni8_matmul_iq4_nlx4(const er_matmul_args *a) { matmul_i8(a, ER_X4_IQ4_NL, er_neondp_matmul_iq4_nlx4); }
void er_neoni8_matmul_q4_1x4(const er_matmul_args *a) { matmul_i8(a, ER_X4_Q4_1, er_neondp_matmul_q4_1x4); }
void er_neoni8_matmul_q5_0x4(const er_matmul_args *a) { matmul_i8(a, ER_X4_Q5_0, er_neondp_matmul_q5_0x4); }
void er_neoni8_matmul_q5_1x4(const er_matmul_args *a) { matmul_i8(a, ER_X4_Q5_1, er_neondp_matmul_q5_1x4); }
