/*
 * test_repack.c — interleaved weight layouts (er_kernels.repack /
 * matmul_repacked), for every table this build and CPU can run that has one.
 *
 * For random weights and Q8_0 activations, matmul_repacked on the repacked
 * copy must equal the exact block sums: each 32-element block's integer dot
 * is exact, so the only error is float accumulation over the n/32 blocks,
 * bounded by 2 * nb * 2^-24 * sum_b |d_w d_x isum_b| (with margin; the
 * scales products themselves round once each). Shapes cover one and several
 * activation tiles (m = 1..13), widths spanning more than one 256-block slice
 * of the kernel's stack arrays (n = 8224), and row ranges [r0, r1) inside the
 * matrix; outputs outside the range must stay untouched. The repacked copy
 * must be the same size and hold the same bytes (a permutation).
 *
 * Q4_K layouts re-encode the 6-bit scales, so their copy is only the same
 * size; their matmul_repacked must return generic's matmul on the file
 * layout bit for bit (integer sums exact, kquant.h's float tail in the same
 * order), for Q8_K activations, including activation blocks of -127 and
 * 0 and the extreme 6-bit scales and mins.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "kernels/kernels.h"
#include "kernels/generic/generic.h"
#include "test_util.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}
static float rndf(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

static int cmp_u8(const void *a, const void *b) { return *(const uint8_t *)a - *(const uint8_t *)b; }

/* Exact reference for row r against activation row x (Q8_0 blocks). */
static void reference(int wt, const uint8_t *w_row, const er_block_q8_0 *x, int nb, double *val, double *mag) {
    double s = 0, a = 0;
    for (int b = 0; b < nb; b++) {
        int32_t isum = 0;
        double dw;
        if (wt == ER_W_Q4_0) {
            const er_block_q4_0 *wb = (const er_block_q4_0 *)(const void *)w_row + b;
            dw = er_f16_to_f32(wb->d);
            for (int j = 0; j < 16; j++) {
                isum += ((wb->qs[j] & 15) - 8) * x[b].qs[j];
                isum += ((wb->qs[j] >> 4) - 8) * x[b].qs[j + 16];
            }
        } else {
            const er_block_q8_0 *wb = (const er_block_q8_0 *)(const void *)w_row + b;
            dw = er_f16_to_f32(wb->d);
            for (int j = 0; j < 32; j++) isum += wb->qs[j] * x[b].qs[j];
        }
        double t = dw * er_f16_to_f32(x[b].d) * isum;
        s += t;
        a += fabs(t);
    }
    *val = s;
    *mag = a;
}

static void check_table(const er_kernels *k, int wt, int n, int n_out, int m) {
    const int nb = n / 32;
    const size_t bs = wt == ER_W_Q4_0 ? sizeof(er_block_q4_0) : sizeof(er_block_q8_0);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    uint8_t *w = malloc(bytes), *packed = malloc(bytes), *s1 = malloc(bytes), *s2 = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n * (size_t)m);
    er_block_q8_0 *xq = malloc(sizeof(er_block_q8_0) * (size_t)nb * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            er_f16 d = er_f32_to_f16(0.001f + 0.05f * (rndf() + 1.0f));
            memcpy(w + (size_t)r * row_bytes + (size_t)b * bs, &d, sizeof d);
        }
    for (int i = 0; i < n * m; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
    for (int j = 0; j < m; j++) k->quantize_row_q8_0(xf + (size_t)j * n, xq + (size_t)j * nb, n);

    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);
    memcpy(s1, w, bytes);
    memcpy(s2, packed, bytes);
    qsort(s1, bytes, 1, cmp_u8);
    qsort(s2, bytes, 1, cmp_u8);
    CHECK(memcmp(s1, s2, bytes) == 0, "%s: repacked copy is not a permutation of the bytes (n %d)", k->name, n);

    const int unit = k->repack_rows[wt];
    /* the whole matrix, then an inner range of row groups */
    const int ranges[2][2] = {{0, n_out}, {unit, n_out - unit > unit ? n_out - unit : n_out}};
    for (int q = 0; q < 2; q++) {
        const int r0 = ranges[q][0], r1 = ranges[q][1];
        if (r1 <= r0) continue;
        for (size_t i = 0; i < (size_t)n_out * (size_t)m; i++) y[i] = NAN;
        er_matmul_args a = {.w = packed, .w_row_bytes = row_bytes, .x = xq, .x_stride = sizeof(er_block_q8_0) * (size_t)nb,
                            .y = y, .y_stride = (size_t)n_out, .n = n, .m = m, .r0 = r0, .r1 = r1};
        k->matmul_repacked[wt](&a);
        int bad = 0, untouched = 1;
        for (int j = 0; j < m; j++)
            for (int r = 0; r < n_out; r++) {
                const float got = y[(size_t)j * n_out + (size_t)r];
                if (r < r0 || r >= r1) {
                    untouched &= isnan(got);
                    continue;
                }
                double want, mag;
                reference(wt, w + (size_t)r * row_bytes, xq + (size_t)j * nb, nb, &want, &mag);
                const double tol = 2.0 * nb * 0x1p-24 * mag + 4.0 * 0x1p-24 * mag + 1e-30;
                if (!(fabs(got - want) <= tol) && bad++ < 3)
                    fprintf(stderr, "%s n %d m %d row %d act %d: got %.9g want %.9g (tol %.3g)\n", k->name, n, m, r,
                            j, (double)got, want, tol);
            }
        CHECK(bad == 0, "%s wt %d n %d n_out %d m %d rows [%d,%d): %d outputs off", k->name, wt, n, n_out, m, r0, r1,
              bad);
        CHECK(untouched, "%s: outputs outside rows [%d,%d) were written", k->name, r0, r1);
    }
    free(w);
    free(packed);
    free(s1);
    free(s2);
    free(xf);
    free(xq);
    free(y);
}

/* Q4_K: matmul_repacked on the repacked copy against generic's matmul on the
 * file layout, bit for bit. */
static void check_table_q4_k(const er_kernels *k, int n, int n_out, int m) {
    const int nb = n / ER_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(er_block_q4_k), bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_k) * (size_t)nb + 12; /* padded: stride != row size */
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n * (size_t)m);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            er_block_q4_k *blk = (er_block_q4_k *)(void *)(w + (size_t)r * row_bytes) + b;
            blk->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            blk->dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            if (r % 7 == 3) memset(blk->scales, 0xff, sizeof blk->scales); /* every scale and min 63 */
        }
    for (int i = 0; i < n * m; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
    /* one activation super-block of -127 throughout (the extreme Q8_K holds), one all 0 */
    for (int i = 0; i < ER_QK_K && m > 1; i++) xf[(size_t)n + (size_t)i] = -3.0f;
    for (int i = 0; i < ER_QK_K && m > 2; i++) xf[2 * (size_t)n + (size_t)(n - ER_QK_K) + (size_t)i] = 0.0f;
    for (int j = 0; j < m; j++) er_gen_quantize_row_q8_k(xf + (size_t)j * n, xq + (size_t)j * xs, n);

    memset(packed, 0xA5, bytes);
    k->repack[ER_W_Q4_K](w, packed, row_bytes, n, n_out);

    const int unit = k->repack_rows[ER_W_Q4_K];
    const int ranges[2][2] = {{0, n_out}, {unit, n_out - unit > unit ? n_out - unit : n_out}};
    for (int q = 0; q < 2; q++) {
        const int r0 = ranges[q][0], r1 = ranges[q][1];
        if (r1 <= r0) continue;
        for (size_t i = 0; i < (size_t)n_out * (size_t)m; i++) y[i] = NAN;
        er_matmul_args a = {.w = packed, .w_row_bytes = row_bytes, .x = xq, .x_stride = xs,
                            .y = y, .y_stride = (size_t)n_out, .n = n, .m = m, .r0 = r0, .r1 = r1};
        k->matmul_repacked[ER_W_Q4_K](&a);
        a.w = w;
        a.y = yg;
        er_gen_matmul_q4_k(&a);
        int bad = 0, untouched = 1;
        for (int j = 0; j < m; j++)
            for (int r = 0; r < n_out; r++) {
                const size_t o = (size_t)j * n_out + (size_t)r;
                if (r < r0 || r >= r1) {
                    untouched &= isnan(y[o]);
                    continue;
                }
                if (memcmp(&y[o], &yg[o], sizeof(float)) != 0 && bad++ < 3)
                    fprintf(stderr, "%s q4_k n %d m %d row %d act %d: got %.9g generic %.9g\n", k->name, n, m, r, j,
                            (double)y[o], (double)yg[o]);
            }
        CHECK(bad == 0, "%s q4_k n %d n_out %d m %d rows [%d,%d): %d outputs differ from generic", k->name, n, n_out,
              m, r0, r1, bad);
        CHECK(untouched, "%s: q4_k outputs outside rows [%d,%d) were written", k->name, r0, r1);
    }
    free(w);
    free(packed);
    free(xf);
    free(xq);
    free(y);
    free(yg);
}

int main(void) {
    static const char *const names[] = {"generic", "avx2", "neon", "neon-dotprod", "sve"};
    int tested = 0;
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        const char *why;
        const er_kernels *k = er_kernels_select(names[t], &why);
        if (!k) {
            printf("table %-12s skipped: not in this build or CPU\n", names[t]);
            continue;
        }
        for (int wt = 0; wt < ER_W_COUNT; wt++) {
            if (k->repack_rows[wt] <= 0) continue;
            CHECK(k->repack[wt] && k->matmul_repacked[wt], "%s: repack_rows without functions", k->name);
            CHECK(wt == ER_W_Q4_0 || wt == ER_W_Q8_0 || wt == ER_W_Q4_K,
                  "%s: this test knows only Q4_0/Q8_0/Q4_K layouts", k->name);
            if (!k->repack[wt] || !k->matmul_repacked[wt]) continue;
            const int unit = k->repack_rows[wt];
            if (wt == ER_W_Q4_K) {
                /* 16640 = 65 super-blocks: more than one 64-block slice */
                const int ns[] = {256, 768, 2048, 16640};
                const int ms[] = {1, 2, 3, 4, 5, 6, 7, 9, 13};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                        check_table_q4_k(k, ns[a], unit, ms[b]);
                        check_table_q4_k(k, ns[a], 5 * unit, ms[b]);
                    }
                printf("table %-12s type %d: repacked matmul bit-identical to generic (%d-row groups)\n", k->name, wt,
                       unit);
                tested++;
                continue;
            }
            if (wt != ER_W_Q4_0 && wt != ER_W_Q8_0) continue;
            const int ns[] = {32, 96, 768, 8224};
            /* 6, 7 and 13: one full 6-row prefill tile, one and a row, two and a row */
            const int ms[] = {1, 2, 3, 4, 5, 6, 7, 9, 13};
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                    check_table(k, wt, ns[a], unit, ms[b]);
                    check_table(k, wt, ns[a], 5 * unit, ms[b]);
                }
            printf("table %-12s type %d: repacked matmul checked (%d-row groups)\n", k->name, wt, unit);
            tested++;
        }
    }
    if (!tested) printf("no table of this build and CPU repacks anything\n");
    return test_summary();
}
