/*
 * repack_check.h — what test_repack.c and test_repack_arm.c share: their
 * random source, the exact block-sum reference for Q8_0/Q4_0 rows, the
 * weight makers, the byte-permutation check, the run over row ranges
 * that compares matmul_repacked with the reference or with generic, and
 * the whole check of the 32-element fallback types (check_table_q32).
 *
 * Include once per test, after test_util.h, with REPACK_CHECK_SEED defined:
 * each test keeps its own seed, so its random cases stay what they were.
 */
#ifndef ER_TEST_REPACK_CHECK_H
#define ER_TEST_REPACK_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "kernels/kernels.h"
#include "kernels/generic/generic.h"
#include "test_util.h"

#ifndef REPACK_CHECK_SEED
#error "define REPACK_CHECK_SEED before including repack_check.h"
#endif

static uint64_t g_rng = REPACK_CHECK_SEED;
static uint32_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}
static float rndf(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

static int cmp_u8(const void *a, const void *b) { return *(const uint8_t *)a - *(const uint8_t *)b; }

/* Exact block sums of weight row w_row (Q8_0 or Q4_0) with activation x:
 * *val the sum, *mag the sum of the terms' magnitudes (for tolerances). */
static void reference(int wt, const uint8_t *w_row, const er_block_q8_0 *x, int nb, double *val, double *mag) {
    double s = 0, a = 0;
    for (int b = 0; b < nb; b++) {
        int32_t isum = 0;
        double dw;
        if (wt == ER_W_Q4_0) {
            const er_block_q4_0 *wb = (const er_block_q4_0 *)(const void *)w_row + b;
            dw = er_f16_to_f32(wb->d);
            for (int j = 0; j < 16; j++)
                isum += ((wb->qs[j] & 15) - 8) * x[b].qs[j] + ((wb->qs[j] >> 4) - 8) * x[b].qs[j + 16];
        } else {
            const er_block_q8_0 *wb = (const er_block_q8_0 *)(const void *)w_row + b;
            dw = er_f16_to_f32(wb->d);
            for (int j = 0; j < 32; j++) isum += wb->qs[j] * x[b].qs[j];
        }
        const double t = dw * er_f16_to_f32(x[b].d) * isum;
        s += t;
        a += fabs(t);
    }
    *val = s;
    *mag = a;
}

/* Overwrites the f16 scale that starts each Q8_0/Q4_0 block (bs bytes) of
 * n_out rows: 1.0 when unit (no random draw), else random in [0.001, 0.101). */
static void set_q_scales(uint8_t *w, int n_out, int nb, size_t row_bytes, size_t bs, int unit) {
    const er_f16 one = er_f32_to_f16(1.0f);
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            const er_f16 d = unit ? one : er_f32_to_f16(0.001f + 0.05f * (rndf() + 1.0f));
            memcpy(w + (size_t)r * row_bytes + (size_t)b * bs, &d, sizeof d);
        }
}

/* Random Q4_K rows with realistic d/dmin; rows r % scales_mod == scales_at
 * get every 6-bit scale and min 63, and (qs_mod > 0) rows r % qs_mod ==
 * qs_at every nibble 15. */
static void random_q4_k(uint8_t *w, int n_out, int nb, size_t row_bytes, int scales_mod, int scales_at, int qs_mod,
                        int qs_at) {
    for (size_t i = 0; i < row_bytes * (size_t)n_out; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            er_block_q4_k *blk = (er_block_q4_k *)(void *)(w + (size_t)r * row_bytes) + b;
            blk->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            blk->dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            if (r % scales_mod == scales_at) memset(blk->scales, 0xff, sizeof blk->scales);
            if (qs_mod > 0 && r % qs_mod == qs_at) memset(blk->qs, 0xff, sizeof blk->qs);
        }
}

/* Random Q5_K or Q6_K rows with realistic scales d (and dmin); rows
 * r % ext_mod == ext_at get the extremes the kernels' integer sums must
 * hold: every quant at its top value (Q5_K 31, Q6_K 63) and every scale at
 * its limit (Q5_K's 6-bit scales and mins 63; Q6_K's int8 scales
 * alternating -128 and 127). */
static inline void random_kq(int wt, uint8_t *w, int n_out, int nb, size_t row_bytes, int ext_mod, int ext_at) {
    for (size_t i = 0; i < row_bytes * (size_t)n_out; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            const int ext = r % ext_mod == ext_at;
            if (wt == ER_W_Q6_K) {
                er_block_q6_k *blk = (er_block_q6_k *)(void *)(w + (size_t)r * row_bytes) + b;
                blk->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                if (!ext) continue;
                memset(blk->ql, 0xff, sizeof blk->ql);
                memset(blk->qh, 0xff, sizeof blk->qh);
                for (int j = 0; j < 16; j++) blk->scales[j] = (int8_t)(j % 2 ? 127 : -128);
            } else {
                er_block_q5_k *blk = (er_block_q5_k *)(void *)(w + (size_t)r * row_bytes) + b;
                blk->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                blk->dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                if (!ext) continue;
                memset(blk->scales, 0xff, sizeof blk->scales);
                memset(blk->qh, 0xff, sizeof blk->qh);
                memset(blk->qs, 0xff, sizeof blk->qs);
            }
        }
}

/* The Q8_0/Q4_0 copies only reorder bytes: same multiset as the file's. */
static void check_permutation(const er_kernels *k, int wt, int n, const uint8_t *w, const uint8_t *packed,
                              size_t bytes) {
    uint8_t *s1 = malloc(bytes), *s2 = malloc(bytes);
    memcpy(s1, w, bytes);
    memcpy(s2, packed, bytes);
    qsort(s1, bytes, 1, cmp_u8);
    qsort(s2, bytes, 1, cmp_u8);
    CHECK(memcmp(s1, s2, bytes) == 0, "%s wt %d: repacked copy is not a permutation of the bytes (n %d)", k->name, wt,
          n);
    free(s1);
    free(s2);
}

/* One matrix under test: the file rows w, their repacked copy, m activation
 * rows x_stride bytes apart, and the outputs y (repacked) and yg (generic's
 * matmul on w; NULL: not run). unit: every scale 1.0, the sums exact. */
typedef struct rc_mat {
    const er_kernels *k;
    int wt, n, n_out, m, unit;
    const uint8_t *w, *packed;
    size_t row_bytes;
    const uint8_t *x;
    size_t x_stride;
    float *y, *yg;
} rc_mat;

/* Whether output (row r, activation j) is right; prints the miss when loud. */
typedef int (*rc_output_ok)(const rc_mat *t, int r, int j, float got, float gen, int loud);

/* Q8_0/Q4_0: against the exact block sums, bit for bit when unit, else
 * within 2 * nb * 2^-24 * sum|terms| (plus a margin for the rounded scale
 * products) and, when generic ran, within twice that of generic. */
static int ok_block_sums(const rc_mat *t, int r, int j, float got, float gen, int loud) {
    const int nb = t->n / 32;
    double want, mag;
    reference(t->wt, t->w + (size_t)r * t->row_bytes, (const er_block_q8_0 *)(const void *)(t->x + (size_t)j * t->x_stride),
              nb, &want, &mag);
    const double tol = t->unit ? 0.0 : 2.0 * nb * 0x1p-24 * mag + 4.0 * 0x1p-24 * mag + 1e-30;
    const int ok = t->unit ? (double)got == want : fabs(got - want) <= tol && (!t->yg || fabs(got - gen) <= 2 * tol);
    if (!ok && loud)
        fprintf(stderr, "%s wt %d n %d m %d row %d act %d: got %.9g want %.9g generic %.9g (tol %.3g)\n", t->k->name,
                t->wt, t->n, t->m, r, j, (double)got, want, t->yg ? (double)gen : NAN, tol);
    return ok;
}

/* K-quants: generic's bits exactly. */
static int ok_generic_bits(const rc_mat *t, int r, int j, float got, float gen, int loud) {
    const int ok = memcmp(&got, &gen, sizeof(float)) == 0;
    if (!ok && loud)
        fprintf(stderr, "%s wt %d n %d m %d row %d act %d: got %.9g generic %.9g\n", t->k->name, t->wt, t->n, t->m, r,
                j, (double)got, (double)gen);
    return ok;
}

/* matmul_repacked over the whole matrix, then over an inner range of row
 * groups; every output in range must pass ok, every one outside must stay
 * the NaN it was set to. */
static void check_ranges(const rc_mat *t, rc_output_ok ok, const char *what) {
    const er_kernels *k = t->k;
    const int u = k->repack_rows[t->wt], n_out = t->n_out, m = t->m;
    const int ranges[2][2] = {{0, n_out}, {u, n_out - u > u ? n_out - u : n_out}};
    for (int q = 0; q < 2; q++) {
        const int r0 = ranges[q][0], r1 = ranges[q][1];
        if (r1 <= r0) continue;
        for (size_t i = 0; i < (size_t)n_out * (size_t)m; i++) t->y[i] = NAN;
        er_matmul_args a = {.w = t->packed, .w_row_bytes = t->row_bytes, .x = t->x, .x_stride = t->x_stride,
                            .y = t->y, .y_stride = (size_t)n_out, .n = t->n, .m = m, .r0 = r0, .r1 = r1};
        k->matmul_repacked[t->wt](&a);
        if (t->yg) {
            a.w = t->w;
            a.y = t->yg;
            er_kernels_generic()->matmul[t->wt](&a);
        }
        int bad = 0, untouched = 1;
        for (int j = 0; j < m; j++)
            for (int r = 0; r < n_out; r++) {
                const size_t o = (size_t)j * n_out + (size_t)r;
                if (r < r0 || r >= r1) {
                    untouched &= isnan(t->y[o]);
                    continue;
                }
                if (!ok(t, r, j, t->y[o], t->yg ? t->yg[o] : NAN, bad < 3)) bad++;
            }
        CHECK(bad == 0, "%s %s n %d n_out %d m %d rows [%d,%d): %d outputs off", k->name, what, t->n, n_out, m, r0, r1,
              bad);
        CHECK(untouched, "%s %s: outputs outside rows [%d,%d) were written", k->name, what, r0, r1);
    }
}

/* The 32-element fallback types (Q5_0, IQ4_NL, Q4_1, Q5_1): matmul_repacked
 * on the repacked copy against generic's matmul on the file layout, bit for
 * bit, for Q8_0 activations. Rows r % 7 == 3 have every quant at its top
 * (nibbles 15, fifth bits set) and activation row 1 a block of -127
 * throughout: the largest int16 sums the kernels' bounds allow. */
static size_t q32_block_bytes(int wt) {
    switch (wt) {
    case ER_W_Q5_0: return sizeof(er_block_q5_0);
    case ER_W_IQ4_NL: return sizeof(er_block_iq4_nl);
    case ER_W_Q4_1: return sizeof(er_block_q4_1);
    default: return sizeof(er_block_q5_1);
    }
}

/* after: a further check of the same matrix (test_repack.c: the avx512vnni
 * table against avx2's bits), or NULL; w is the file layout (row_bytes
 * apart), packed the table's; y holds nothing it needs. */
typedef void (*rc_q32_after)(const er_kernels *k, int wt, const uint8_t *w, size_t row_bytes, const uint8_t *packed,
                             int n, int n_out, int m, const uint8_t *x, size_t x_stride, float *y);

static void check_table_q32(const er_kernels *k, int wt, int n, int n_out, int m, rc_q32_after after) {
    const int nb = n / 32;
    const size_t bs = q32_block_bytes(wt), row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    const int has_m = wt == ER_W_Q4_1 || wt == ER_W_Q5_1;
    const size_t xs = sizeof(er_block_q8_0) * (size_t)nb + 6; /* padded: stride != row size */
    uint8_t *w = malloc(bytes), *packed = malloc(bytes), *xq = malloc(xs * (size_t)m);
    float *xf = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = w + (size_t)r * row_bytes + (size_t)b * bs;
            const er_f16 d = er_f32_to_f16(0.001f + 0.05f * (rndf() + 1.0f)), mn = er_f32_to_f16(-0.1f * (rndf() + 1.0f));
            memcpy(blk, &d, sizeof d);
            if (has_m) memcpy(blk + 2, &mn, sizeof mn);
            if (r % 7 == 3) memset(blk + 2 + (has_m ? 2 : 0), 0xff, bs - 2 - (has_m ? 2u : 0u));
        }
    for (int j = 0; j < m; j++) {
        for (int i = 0; i < n; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
        if (j == 1)
            for (int i = 0; i < 32; i++) xf[i] = -3.0f;
        er_kernels_generic()->quantize_row_q8_0(xf, xq + (size_t)j * xs, n);
    }

    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);
    /* Q4_1 and IQ4_NL move bytes only; Q5_0/Q5_1 regroup their qh bits */
    if (wt == ER_W_Q4_1 || wt == ER_W_IQ4_NL) check_permutation(k, wt, n, w, packed, bytes);
    char what[16];
    snprintf(what, sizeof what, "wt %d", wt);
    const rc_mat t = {.k = k, .wt = wt, .n = n, .n_out = n_out, .m = m, .w = w, .packed = packed,
                      .row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y, .yg = yg};
    check_ranges(&t, ok_generic_bits, what);
    if (after) after(k, wt, w, row_bytes, packed, n, n_out, m, xq, xs, y);
    free(w);
    free(packed);
    free(xq);
    free(xf);
    free(y);
    free(yg);
}

#endif
