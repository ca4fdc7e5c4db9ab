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
 * K-quant layouts (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and IQ4_XS) re-encode or regroup the scales, so
 * their copy is only the same size; their matmul_repacked must return
 * generic's matmul on the file layout bit for bit (integer sums exact,
 * kquant.h's float tail in the same order), for Q8_K activations, including
 * activation blocks of -127 and 0, every quant at its top value and the
 * extreme scales (what overflows an int16 sum first).
 *
 * The 32-element fallback types (Q5_0, IQ4_NL, Q4_1, Q5_1) are held to the
 * same: generic's matmul bit for bit (check_table_q32, repack_check.h). Which family a type
 * belongs to is asked of er_wtype_block_elems, not of its enum number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPACK_CHECK_SEED 0x9E3779B97F4A7C15ull
#include "repack_check.h"

/* avx512vnni differs from avx2 only in the instructions of its repacked
 * matmuls (VPDPBUSD for the exact block sums, AVX-512VL registers for all)
 * and in the layouts of Q4_0, Q8_0, the K-quants and the 32-element types
 * (16 rows per record for its 512-bit kernels; Q2_K's codes regrouped at
 * 16 rows in both): its results must be avx2's
 * bit for bit, float order included (x86/avx2.h). Where the layouts differ
 * the twin gets the file rows w (row_bytes apart) in its own. y: scratch
 * for n_out * m. */
static void check_twin(const er_kernels *k, int wt, const uint8_t *w, size_t row_bytes, const uint8_t *packed, int n,
                       int n_out, int m, const uint8_t *x, size_t x_stride, float *y) {
    const er_kernels *twin = strcmp(k->name, "avx512vnni") == 0 ? er_kernels_select("avx2", NULL) : NULL;
    if (!twin) return;
    /* a layout of its own is one for 512-bit vectors, 16 rows per record
     * where avx2 has 8, or Q2_K's (16 rows in both, its codes regrouped for
     * VPDPWSSD: repack_qk23_avx2.c); another repack function at the same
     * row count is a slip in table_avx2.c's wiring (a 16-row repack under
     * 8 rows) */
    CHECK(twin->repack[wt] == k->repack[wt] || twin->repack_rows[wt] != k->repack_rows[wt] || wt == ER_W_Q2_K,
          "%s: layout of type %d differs from avx2's at the same row count", k->name, wt);
    uint8_t *own = NULL;
    const uint8_t *tw = packed;
    if (twin->repack[wt] != k->repack[wt]) {
        if (n_out % twin->repack_rows[wt]) return;
        own = malloc(row_bytes * (size_t)n_out);
        twin->repack[wt](w, own, row_bytes, n, n_out);
        tw = own;
    }
    float *yt = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    er_matmul_args a = {.w = packed, .x = x, .x_stride = x_stride, .y = y, .y_stride = (size_t)n_out, .n = n, .m = m,
                        .r0 = 0, .r1 = n_out};
    k->matmul_repacked[wt](&a);
    a.w = tw;
    a.y = yt;
    twin->matmul_repacked[wt](&a);
    CHECK(memcmp(y, yt, sizeof(float) * (size_t)n_out * (size_t)m) == 0, "%s: type %d n %d m %d differs from avx2",
          k->name, wt, n, m);
    free(yt);
    free(own);
}

static void check_table(const er_kernels *k, int wt, int n, int n_out, int m) {
    const int nb = n / 32;
    const size_t bs = wt == ER_W_Q4_0 ? sizeof(er_block_q4_0) : sizeof(er_block_q8_0);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n * (size_t)m);
    er_block_q8_0 *xq = malloc(sizeof(er_block_q8_0) * (size_t)nb * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    set_q_scales(w, n_out, nb, row_bytes, bs, 0);
    for (int i = 0; i < n * m; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
    for (int j = 0; j < m; j++) k->quantize_row_q8_0(xf + (size_t)j * n, xq + (size_t)j * nb, n);

    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);
    if (wt == ER_W_Q8_0 && strcmp(k->name, "avx512vnni") == 0) {
        /* avx512vnni's 16-row Q8_0 records (16 f16 scales, then 512 quants)
         * hold each quant + 128 (repack_q8_0_x16_avx512.c): the file's
         * bytes again once that is undone. Named by table, not by row
         * count: SVE at 512 bits also packs 16 rows, as plain bytes. */
        uint8_t *un = malloc(bytes);
        memcpy(un, packed, bytes);
        for (size_t o = 0; o < bytes; o += 16 * sizeof(er_block_q8_0))
            for (size_t i = 32; i < 16 * sizeof(er_block_q8_0); i++) un[o + i] ^= 0x80;
        check_permutation(k, wt, n, w, un, bytes);
        free(un);
    } else {
        check_permutation(k, wt, n, w, packed, bytes);
    }

    char what[16];
    snprintf(what, sizeof what, "wt %d", wt);
    const rc_mat t = {.k = k, .wt = wt, .n = n, .n_out = n_out, .m = m, .w = w, .packed = packed,
                      .row_bytes = row_bytes, .x = (const uint8_t *)xq, .x_stride = sizeof(er_block_q8_0) * (size_t)nb,
                      .y = y};
    check_ranges(&t, ok_block_sums, what);
    check_twin(k, wt, w, row_bytes, packed, n, n_out, m, (const uint8_t *)xq, sizeof(er_block_q8_0) * (size_t)nb, y);
    free(w);
    free(packed);
    free(xf);
    free(xq);
    free(y);
}

/* Random Q3_K, Q2_K or IQ4_XS rows (every bit pattern is a valid block)
 * with realistic f16 scales; rows r % ext_mod == ext_at get the extremes
 * that reach an int16 or byte limit first: Q3_K every code 3 (hmask set)
 * or -4 (clear) by alternating rows with every scale -32 or 31, Q2_K every
 * code 3 with scale and min 15, IQ4_XS every nibble 0 (grid -127) with
 * scales -32. */
static void random_kq23(int wt, uint8_t *w, int n_out, int nb, size_t row_bytes, int ext_mod, int ext_at) {
    for (size_t i = 0; i < row_bytes * (size_t)n_out; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            const int ext = r % ext_mod == ext_at, hi = r / ext_mod % 2;
            uint8_t *blk = w + (size_t)r * row_bytes;
            if (wt == ER_W_Q3_K) {
                er_block_q3_k *q = (er_block_q3_k *)(void *)blk + b;
                q->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                if (!ext) continue;
                memset(q->hmask, hi ? 0xff : 0x00, sizeof q->hmask);
                memset(q->qs, hi ? 0xff : 0x00, sizeof q->qs);
                memset(q->scales, hi ? 0xff : 0x00, sizeof q->scales); /* 6-bit 63 or 0: 31 or -32 */
            } else if (wt == ER_W_Q2_K) {
                er_block_q2_k *q = (er_block_q2_k *)(void *)blk + b;
                q->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                q->dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                if (!ext) continue;
                memset(q->qs, 0xff, sizeof q->qs);
                memset(q->scales, 0xff, sizeof q->scales);
            } else {
                er_block_iq4_xs *q = (er_block_iq4_xs *)(void *)blk + b;
                q->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
                if (!ext) continue;
                memset(q->qs, 0, sizeof q->qs);
                memset(q->scales_l, 0, sizeof q->scales_l);
                q->scales_h = 0;
            }
        }
}

static size_t kq_block_bytes(int wt) {
    switch (wt) {
    case ER_W_Q4_K: return sizeof(er_block_q4_k);
    case ER_W_Q5_K: return sizeof(er_block_q5_k);
    case ER_W_Q6_K: return sizeof(er_block_q6_k);
    case ER_W_Q3_K: return sizeof(er_block_q3_k);
    case ER_W_Q2_K: return sizeof(er_block_q2_k);
    default: return sizeof(er_block_iq4_xs);
    }
}

/* K-quants (and IQ4_XS): matmul_repacked on the repacked copy against
 * generic's matmul on the file layout, bit for bit. */
static void check_table_kq(const er_kernels *k, int wt, int n, int n_out, int m) {
    const int nb = n / ER_QK_K;
    const size_t bs = kq_block_bytes(wt);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_k) * (size_t)nb + 12; /* padded: stride != row size */
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n * (size_t)m);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    if (wt == ER_W_Q4_K)
        random_q4_k(w, n_out, nb, row_bytes, 7, 3, 0, 0);
    else if (wt == ER_W_Q3_K || wt == ER_W_Q2_K || wt == ER_W_IQ4_XS)
        random_kq23(wt, w, n_out, nb, row_bytes, 7, 3);
    else
        random_kq(wt, w, n_out, nb, row_bytes, 7, 3);
    for (int i = 0; i < n * m; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
    /* one activation super-block of -127 throughout (the extreme Q8_K holds), one all 0 */
    for (int i = 0; i < ER_QK_K && m > 1; i++) xf[(size_t)n + (size_t)i] = -3.0f;
    for (int i = 0; i < ER_QK_K && m > 2; i++) xf[2 * (size_t)n + (size_t)(n - ER_QK_K) + (size_t)i] = 0.0f;
    for (int j = 0; j < m; j++) er_gen_quantize_row_q8_k(xf + (size_t)j * n, xq + (size_t)j * xs, n);

    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);

    char what[16];
    snprintf(what, sizeof what, "wt %d", wt);
    const rc_mat t = {.k = k, .wt = wt, .n = n, .n_out = n_out, .m = m, .w = w, .packed = packed,
                      .row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y, .yg = yg};
    check_ranges(&t, ok_generic_bits, what);
    check_twin(k, wt, w, row_bytes, packed, n, n_out, m, xq, xs, y);
    free(w);
    free(packed);
    free(xf);
    free(xq);
    free(y);
    free(yg);
}

int main(void) {
    static const char *const names[] = {"generic", "avx2", "avx512vnni", "neon", "neon-dotprod", "sve"};
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
            const int q32 = wt == ER_W_Q5_0 || wt == ER_W_IQ4_NL || wt == ER_W_Q4_1 || wt == ER_W_Q5_1;
            const int kq = wt == ER_W_Q4_K || wt == ER_W_Q5_K || wt == ER_W_Q6_K || wt == ER_W_Q3_K ||
                           wt == ER_W_Q2_K || wt == ER_W_IQ4_XS;
            CHECK(wt == ER_W_Q4_0 || wt == ER_W_Q8_0 || q32 || kq,
                  "%s: this test knows no layout of type %d", k->name, wt);
            if (!k->repack[wt] || !k->matmul_repacked[wt]) continue;
            const int unit = k->repack_rows[wt];
            if (q32) {
                const int ns[] = {32, 96, 768, 8224};
                const int ms[] = {1, 2, 3, 4, 5, 6, 7, 9, 13};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                        check_table_q32(k, wt, ns[a], unit, ms[b], check_twin);
                        check_table_q32(k, wt, ns[a], 5 * unit, ms[b], check_twin);
                    }
                printf("table %-12s type %d: repacked matmul bit-identical to generic (%d-row groups)\n", k->name, wt,
                       unit);
                tested++;
                continue;
            }
            if (er_wtype_block_elems(wt) == ER_QK_K) {
                /* 16640 = 65 super-blocks: more than one 64-block slice */
                const int ns[] = {256, 768, 2048, 16640};
                const int ms[] = {1, 2, 3, 4, 5, 6, 7, 9, 13};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                        check_table_kq(k, wt, ns[a], unit, ms[b]);
                        check_table_kq(k, wt, ns[a], 5 * unit, ms[b]);
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
