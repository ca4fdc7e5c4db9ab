/*
 * test_repack_arm.c — the Arm interleaved layouts (kernels/neon/
 * repack_neon.h: groups of G rows) and every Arm table's matmul_repacked on
 * them: "neon" (widening multiplies), "neon-dotprod" (SDOT), "neon-i8mm"
 * (SMMLA prefill), all G = 4, and "sve" (G = the vector's 32-bit lanes,
 * kernels/sve/repack_sve.h). Tables this CPU cannot run are skipped; on a
 * machine with none (x86) the test exits 77 (meson: skipped). Runs under
 * qemu-aarch64 with -cpu cortex-a72 (neon), cortex-a76 (+dotprod), max
 * (+i8mm, SVE) at 128, 256, 512 and 2048 bits.
 *
 * What must hold:
 *  - repack_rows is 4 (NEON tables) or the SVE vector's 32-bit lane count
 *    (sve), and the Q8_0/Q4_0/IQ4_NL/Q4_1/Q6_K/Q2_K/IQ4_XS copies are byte
 *    permutations of the file's rows (the same size; Q4_K, Q5_K and Q3_K
 *    re-encode their scales, Q5_K, Q5_0 and Q5_1 their qh bits, Q3_K
 *    complements its hmask, same size);
 *  - integer paths exact: with every weight and activation scale 1.0 and
 *    widths whose partial sums stay below 2^24, each output is the exact
 *    integer dot product (any float order gives the same bits), for the
 *    extreme quants -128/127 (weights) and -127/127 (activations);
 *  - random scales: within 2 * nb * 2^-24 * sum|terms| of the exact double
 *    block sums (the per-block integers are exact; only the float additions
 *    over blocks round), and within the same bound of generic's matmul;
 *  - IQ4_NL, Q4_1, Q5_0, Q5_1 (the issue-25 fallbacks; repack_check.h's
 *    check_table_q32): bit-identical to generic's matmul on the file
 *    layout, every quant at its top in some rows, a block of -127;
 *  - Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS: bit-identical to generic's
 *    matmul on the file layout, with every scale and quant at its limit
 *    (both ends for the last three) in some rows and super-blocks of -127
 *    and of zero activations;
 *  - every activation-row count 1..9 (SMMLA pairs padded with a zero row,
 *    tiles of 4), widths spanning more than one stack slice, 1, 3 and 5 row
 *    groups, inner row ranges [r0, r1), outputs outside them untouched,
 *    padded x strides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPACK_CHECK_SEED 0x0DDB1A5E5BAD5EEDull
#include "repack_check.h"

/* unit: every scale 1.0, quants drawn to include the extremes. */
static void check_q(const er_kernels *k, int wt, int n, int n_out, int m, int unit) {
    const int nb = n / 32;
    const size_t bs = wt == ER_W_Q4_0 ? sizeof(er_block_q4_0) : sizeof(er_block_q8_0);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_0) * (size_t)nb + 6; /* padded stride */
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *xf = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    const er_f16 one = er_f32_to_f16(1.0f);
    for (size_t i = 0; i < bytes; i++) {
        const uint32_t r = rnd();
        /* one byte in 8 an extreme: -128 / 127 as Q8_0 quants, 0x00 / 0xff nibble pairs as Q4_0 */
        w[i] = (uint8_t)(r % 8 == 0 ? ((r >> 8) & 1 ? 0x7f : 0x80) : r >> 16);
    }
    set_q_scales(w, n_out, nb, row_bytes, bs, unit);
    for (int j = 0; j < m; j++) {
        er_block_q8_0 *xb = (er_block_q8_0 *)(void *)(xq + (size_t)j * xs);
        if (unit) {
            for (int b = 0; b < nb; b++) {
                xb[b].d = one;
                for (int e = 0; e < 32; e++) {
                    const uint32_t r = rnd();
                    xb[b].qs[e] = (int8_t)(r % 5 == 0 ? ((r >> 8) & 1 ? 127 : -127) : (int)(r >> 16) % 255 - 127);
                }
            }
        } else {
            for (int i = 0; i < n; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
            k->quantize_row_q8_0(xf, xb, n);
        }
    }

    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);
    check_permutation(k, wt, n, w, packed, bytes);

    char what[40];
    snprintf(what, sizeof what, "wt %d%s", wt, unit ? " (unit scales, exact)" : "");
    const rc_mat t = {.k = k, .wt = wt, .n = n, .n_out = n_out, .m = m, .unit = unit, .w = w, .packed = packed,
                      .row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y, .yg = yg};
    check_ranges(&t, ok_block_sums, what);
    free(w);
    free(packed);
    free(xq);
    free(xf);
    free(y);
    free(yg);
}

static size_t kq_block_bytes(int wt) {
    switch (wt) {
    case ER_W_Q4_K: return sizeof(er_block_q4_k);
    case ER_W_Q5_K: return sizeof(er_block_q5_k);
    case ER_W_Q6_K: return sizeof(er_block_q6_k);
    case ER_W_Q2_K: return sizeof(er_block_q2_k);
    case ER_W_Q3_K: return sizeof(er_block_q3_k);
    default: return sizeof(er_block_iq4_xs);
    }
}

/* Random Q2_K, Q3_K or IQ4_XS rows with realistic d (and dmin); rows r % 5
 * == 2 hold every field at its low end (Q2_K: scales and mins 0, quants 0;
 * Q3_K: every scale -32 and quant -4; IQ4_XS: every scale -32 and grid
 * value -127) and rows r % 5 == 4 at its top (Q2_K: scales and mins 15,
 * quants 3; Q3_K: scales 31, quants 3; IQ4_XS: scales 31, grid 113): the
 * largest sums the kernels' integer bounds must hold, of either sign. */
static void random_k23(int wt, uint8_t *w, int n_out, int nb, size_t row_bytes) {
    const size_t bs = kq_block_bytes(wt);
    for (size_t i = 0; i < row_bytes * (size_t)n_out; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            uint8_t *blk = w + (size_t)r * row_bytes + (size_t)b * bs;
            const er_f16 d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            const er_f16 dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            const int ext = r % 5 == 2 ? 0x00 : r % 5 == 4 ? 0xff : -1;
            if (wt == ER_W_Q2_K) {
                er_block_q2_k *q = (er_block_q2_k *)(void *)blk;
                q->d = d, q->dmin = dmin;
                if (ext >= 0) memset(q->scales, ext, sizeof q->scales), memset(q->qs, ext, sizeof q->qs);
            } else if (wt == ER_W_Q3_K) {
                er_block_q3_k *q = (er_block_q3_k *)(void *)blk;
                q->d = d;
                if (ext >= 0) memset(blk, ext, bs - sizeof(er_f16));
            } else {
                er_block_iq4_xs *q = (er_block_iq4_xs *)(void *)blk;
                q->d = d;
                if (ext >= 0) memset(blk + sizeof(er_f16), ext, bs - sizeof(er_f16));
            }
        }
}

/* A K-quant layout (Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS) against generic's
 * matmul on the file layout, bit for bit: random rows with the extremes
 * (every scale and quant at its limit) in some, activation row 1 starting
 * with a super-block of -127 and row 2 ending with a zero one (zero
 * products reach the float tail; outputs are compared as bits, signs of
 * zero included). */
static void check_kq(const er_kernels *k, int wt, int n, int n_out, int m) {
    const int nb = n / ER_QK_K;
    const size_t bs = kq_block_bytes(wt);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_k) * (size_t)nb + 12;
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    if (wt == ER_W_Q4_K)
        random_q4_k(w, n_out, nb, row_bytes, 5, 2, 7, 4);
    else if (wt == ER_W_Q5_K || wt == ER_W_Q6_K)
        random_kq(wt, w, n_out, nb, row_bytes, 5, 2);
    else
        random_k23(wt, w, n_out, nb, row_bytes);
    for (int j = 0; j < m; j++) {
        for (int i = 0; i < n; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
        if (j == 1)
            for (int i = 0; i < ER_QK_K; i++) xf[i] = -3.0f; /* a super-block of -127 */
        if (j == 2)
            for (int i = n - ER_QK_K; i < n; i++) xf[i] = 0.0f;
        er_gen_quantize_row_q8_k(xf, xq + (size_t)j * xs, n);
    }
    memset(packed, 0xA5, bytes);
    k->repack[wt](w, packed, row_bytes, n, n_out);
    /* Q6_K, Q2_K and IQ4_XS move bytes only; Q4_K/Q5_K/Q3_K re-encode
     * scales (and qh or hmask bits) */
    if (wt == ER_W_Q6_K || wt == ER_W_Q2_K || wt == ER_W_IQ4_XS) check_permutation(k, wt, n, w, packed, bytes);

    char what[16];
    snprintf(what, sizeof what, "wt %d", wt);
    const rc_mat t = {.k = k, .wt = wt, .n = n, .n_out = n_out, .m = m, .w = w, .packed = packed,
                      .row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y, .yg = yg};
    check_ranges(&t, ok_generic_bits, what);
    free(w);
    free(packed);
    free(xf);
    free(xq);
    free(y);
    free(yg);
}

/* The automatic choice follows dispatch.c's order: sve at >= 256 bits, then
 * neon-i8mm, neon-dotprod, neon. */
static void check_auto_choice(void) {
    const char *feat = er_cpu_features(), *why = NULL;
    const er_kernels *k = er_kernels_select(NULL, &why);
    const char *want = "neon";
    if (strstr(feat, "sve>=256")) want = "sve";
    else if (strstr(feat, "asimddp") && strstr(feat, "i8mm")) want = "neon-i8mm";
    else if (strstr(feat, "asimddp")) want = "neon-dotprod";
    CHECK(k && strcmp(k->name, want) == 0, "automatic choice on '%s' is %s, want %s", feat, k ? k->name : "NULL", want);
    printf("cpu features: %s\nautomatic choice: %s\n", feat, why ? why : "?");
}

/* Rows per group the table should interleave: 4 for the NEON tables, one
 * per 32-bit lane of the SVE vector for sve. */
#if defined(__aarch64__)
unsigned er_sve_vector_bytes(void); /* kernels/sve/q_sve.c; call only where the sve table runs */
#endif
static int want_rows(const er_kernels *k) {
    if (strcmp(k->name, "sve") != 0) return 4;
#if defined(__aarch64__)
    return (int)(er_sve_vector_bytes() / 4);
#else
    return 0; /* no sve table is built off aarch64 */
#endif
}

int main(void) {
    static const char *const names[] = {"neon", "neon-dotprod", "neon-i8mm", "sve"};
    int ran = 0;
    unsetenv("EDGERUN_ISA");
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        const er_kernels *k = er_kernels_select(names[t], NULL);
        if (!k) {
            printf("table %-13s skipped: %s\n", names[t], er_last_error());
            continue;
        }
        ran++;
        const int fails_before = g_test_fail, G = want_rows(k);
        int layouts = 0;
        for (int wt = 0; wt < ER_W_COUNT; wt++) {
            if (k->repack_rows[wt] <= 0) continue;
            layouts++;
            CHECK(k->repack[wt] && k->matmul_repacked[wt], "%s: repack_rows without functions", k->name);
            CHECK(k->repack_rows[wt] == G, "%s wt %d: repack_rows %d, want %d", k->name, wt, k->repack_rows[wt], G);
            if (!k->repack[wt] || !k->matmul_repacked[wt] || k->repack_rows[wt] != G) continue;
            if (wt == ER_W_Q4_K || wt == ER_W_Q5_K || wt == ER_W_Q6_K) {
                const int ns[] = {256, 768, 2048, 4352};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_kq(k, wt, ns[a], G, m);
                        if (m % 2 || a < 2) check_kq(k, wt, ns[a], 3 * G, m);
                    }
                /* 64 rows: more than one pass of rows per slice of
                 * activations (24 rows for the SDOT kernels at n = 4352, 28
                 * for SMMLA's), in SMMLA's tiles of 6 rows, of 8 and 1 and
                 * of 8 and 4 (3, 4 + 1 and 4 + 2 row pairs) */
                if (G <= 16)
                    for (int m = 6; m <= 12; m += 3) check_kq(k, wt, 4352, 64, m);
            } else if (wt == ER_W_Q2_K || wt == ER_W_Q3_K || wt == ER_W_IQ4_XS) {
                /* every tile height (NEON 4, SVE 2) and remainder */
                const int ns[] = {256, 1024};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_kq(k, wt, ns[a], G, m);
                        if (m == 1 || m == 2 || m == 5) check_kq(k, wt, ns[a], 3 * G, m);
                    }
            } else if (wt == ER_W_IQ4_NL || wt == ER_W_Q4_1 || wt == ER_W_Q5_0 || wt == ER_W_Q5_1) {
                /* 8224: more than one stack slice of activation blocks (128
                 * and 256), at the tile shapes that matter there (one row, an
                 * SMMLA pair, a tile of 4 and one, two and one): the generic
                 * reference at 2048 bits (G = 64) is what the qemu run's time
                 * goes to */
                const int ns[] = {32, 96, 768};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_table_q32(k, wt, ns[a], G, m, NULL);
                        if (a < 2) check_table_q32(k, wt, ns[a], 3 * G, m, NULL);
                    }
                const int ms[] = {1, 2, 5, 9};
                for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) check_table_q32(k, wt, 8224, G, ms[b], NULL);
            } else {
                CHECK(wt == ER_W_Q8_0 || wt == ER_W_Q4_0, "%s: unexpected layout for type %d", k->name, wt);
                /* unit scales: exact integers (n <= 768 keeps sums below 2^24) */
                const int nu[] = {32, 64, 768};
                for (size_t a = 0; a < sizeof nu / sizeof nu[0]; a++)
                    for (int m = 1; m <= 9; m++) check_q(k, wt, nu[a], 3 * G, m, 1);
                /* 8224: more than one stack slice of activation blocks (128 and 256) */
                const int ns[] = {96, 768, 8224};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_q(k, wt, ns[a], G, m, 0);
                        if (m % 2 || a < 2) check_q(k, wt, ns[a], 5 * G, m, 0);
                    }
            }
        }
        /* IQ4_XS's layout only where SDOT makes it pay (not "neon") */
        const int want = strcmp(k->name, "neon") == 0 ? 11 : 12;
        CHECK(layouts == want && (want == 12) == (k->repack_rows[ER_W_IQ4_XS] > 0),
              "%s: %d repacked layouts, want Q8_0, Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K%s",
              k->name, layouts, want == 12 ? ", IQ4_XS" : "");
        printf("table %-13s %d layouts, %d rows each %s\n", k->name, layouts, G,
               g_test_fail == fails_before ? "ok" : "FAILED");
    }
    if (!ran) {
        printf("no Arm table runs here: skipped\n");
        return 77;
    }
    check_auto_choice();
    return test_summary();
}
