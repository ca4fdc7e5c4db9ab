/*
 * test_repack_arm.c — the Arm 4-row interleaved layouts (kernels/neon/
 * repack_neon.h) and every Arm table's matmul_repacked on them: "neon"
 * (widening multiplies), "neon-dotprod" (SDOT), "neon-i8mm" (SMMLA prefill),
 * and "sve" if it ever gains a layout. Tables this CPU cannot run are
 * skipped; on a machine with none (x86) the test exits 77 (meson: skipped).
 * Runs under qemu-aarch64 with -cpu cortex-a72 (neon), cortex-a76
 * (+dotprod), max (+i8mm, SVE) and max,sve-default-vector-length=64.
 *
 * What must hold:
 *  - repack_rows is 4 and the Q8_0/Q4_0 copies are byte permutations of the
 *    file's rows (the same size; Q4_K re-encodes its scales, same size);
 *  - integer paths exact: with every weight and activation scale 1.0 and
 *    widths whose partial sums stay below 2^24, each output is the exact
 *    integer dot product (any float order gives the same bits), for the
 *    extreme quants -128/127 (weights) and -127/127 (activations);
 *  - random scales: within 2 * nb * 2^-24 * sum|terms| of the exact double
 *    block sums (the per-block integers are exact; only the float additions
 *    over blocks round), and within the same bound of generic's matmul;
 *  - Q4_K: bit-identical to generic's matmul on the file layout;
 *  - every activation-row count 1..9 (SMMLA pairs padded with a zero row,
 *    tiles of 4), widths spanning more than one stack slice, inner row
 *    ranges [r0, r1), outputs outside them untouched, padded x strides.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "kernels/kernels.h"
#include "kernels/generic/generic.h"
#include "test_util.h"

static uint64_t g_rng = 0x0DDB1A5E5BAD5EEDull;
static uint32_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}
static float rndf(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

static int cmp_u8(const void *a, const void *b) { return *(const uint8_t *)a - *(const uint8_t *)b; }

/* Exact block sums of weight row w_row (Q8_0 or Q4_0) with activation x. */
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

/* unit: every scale 1.0, quants drawn to include the extremes. */
static void check_q(const er_kernels *k, int wt, int n, int n_out, int m, int unit) {
    const int nb = n / 32;
    const size_t bs = wt == ER_W_Q4_0 ? sizeof(er_block_q4_0) : sizeof(er_block_q8_0);
    const size_t row_bytes = (size_t)nb * bs, bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_0) * (size_t)nb + 6; /* padded stride */
    uint8_t *w = malloc(bytes), *packed = malloc(bytes), *s1 = malloc(bytes), *s2 = malloc(bytes);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *xf = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    const er_f16 one = er_f32_to_f16(1.0f);
    for (size_t i = 0; i < bytes; i++) {
        const uint32_t r = rnd();
        /* one byte in 8 an extreme: -128 / 127 as Q8_0 quants, 0x00 / 0xff nibble pairs as Q4_0 */
        w[i] = (uint8_t)(r % 8 == 0 ? ((r >> 8) & 1 ? 0x7f : 0x80) : r >> 16);
    }
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            const er_f16 d = unit ? one : er_f32_to_f16(0.001f + 0.05f * (rndf() + 1.0f));
            memcpy(w + (size_t)r * row_bytes + (size_t)b * bs, &d, sizeof d);
        }
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
    memcpy(s1, w, bytes);
    memcpy(s2, packed, bytes);
    qsort(s1, bytes, 1, cmp_u8);
    qsort(s2, bytes, 1, cmp_u8);
    CHECK(memcmp(s1, s2, bytes) == 0, "%s wt %d: repacked copy is not a permutation of the bytes (n %d)", k->name, wt,
          n);

    const int u = k->repack_rows[wt];
    const int ranges[2][2] = {{0, n_out}, {u, n_out - u > u ? n_out - u : n_out}};
    for (int q = 0; q < 2; q++) {
        const int r0 = ranges[q][0], r1 = ranges[q][1];
        if (r1 <= r0) continue;
        for (size_t i = 0; i < (size_t)n_out * (size_t)m; i++) y[i] = NAN;
        er_matmul_args a = {.w = packed, .w_row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y,
                            .y_stride = (size_t)n_out, .n = n, .m = m, .r0 = r0, .r1 = r1};
        k->matmul_repacked[wt](&a);
        a.w = w;
        a.y = yg;
        er_kernels_generic()->matmul[wt](&a);
        int bad = 0, untouched = 1;
        for (int j = 0; j < m; j++)
            for (int r = 0; r < n_out; r++) {
                const size_t o = (size_t)j * n_out + (size_t)r;
                if (r < r0 || r >= r1) {
                    untouched &= isnan(y[o]);
                    continue;
                }
                double want, mag;
                reference(wt, w + (size_t)r * row_bytes, (const er_block_q8_0 *)(const void *)(xq + (size_t)j * xs),
                          nb, &want, &mag);
                const double tol = unit ? 0.0 : 2.0 * nb * 0x1p-24 * mag + 4.0 * 0x1p-24 * mag + 1e-30;
                const int ok = unit ? (double)y[o] == want : fabs(y[o] - want) <= tol && fabs(y[o] - yg[o]) <= 2 * tol;
                if (!ok && bad++ < 3)
                    fprintf(stderr, "%s wt %d n %d m %d row %d act %d: got %.9g want %.9g generic %.9g (tol %.3g)\n",
                            k->name, wt, n, m, r, j, (double)y[o], want, (double)yg[o], tol);
            }
        CHECK(bad == 0, "%s wt %d%s n %d n_out %d m %d rows [%d,%d): %d outputs off", k->name, wt,
              unit ? " (unit scales, exact)" : "", n, n_out, m, r0, r1, bad);
        CHECK(untouched, "%s wt %d: outputs outside rows [%d,%d) were written", k->name, wt, r0, r1);
    }
    free(w);
    free(packed);
    free(s1);
    free(s2);
    free(xq);
    free(xf);
    free(y);
    free(yg);
}

/* Q4_K against generic's matmul on the file layout, bit for bit. */
static void check_q4_k(const er_kernels *k, int n, int n_out, int m) {
    const int nb = n / ER_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(er_block_q4_k), bytes = row_bytes * (size_t)n_out;
    const size_t xs = sizeof(er_block_q8_k) * (size_t)nb + 12;
    uint8_t *w = malloc(bytes), *packed = malloc(bytes);
    float *xf = malloc(sizeof(float) * (size_t)n);
    uint8_t *xq = malloc(xs * (size_t)m);
    float *y = malloc(sizeof(float) * (size_t)n_out * (size_t)m), *yg = malloc(sizeof(float) * (size_t)n_out * (size_t)m);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (int r = 0; r < n_out; r++)
        for (int b = 0; b < nb; b++) {
            er_block_q4_k *blk = (er_block_q4_k *)(void *)(w + (size_t)r * row_bytes) + b;
            blk->d = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            blk->dmin = er_f32_to_f16(0.0005f + 0.01f * (rndf() + 1.0f));
            if (r % 5 == 2) memset(blk->scales, 0xff, sizeof blk->scales); /* every scale and min 63 */
            if (r % 7 == 4) memset(blk->qs, 0xff, sizeof blk->qs);         /* every nibble 15 */
        }
    for (int j = 0; j < m; j++) {
        for (int i = 0; i < n; i++) xf[i] = rndf() * (i % 97 == 0 ? 20.0f : 1.0f);
        if (j == 1)
            for (int i = 0; i < ER_QK_K; i++) xf[i] = -3.0f; /* a super-block of -127 */
        if (j == 2)
            for (int i = n - ER_QK_K; i < n; i++) xf[i] = 0.0f;
        er_gen_quantize_row_q8_k(xf, xq + (size_t)j * xs, n);
    }
    memset(packed, 0xA5, bytes);
    k->repack[ER_W_Q4_K](w, packed, row_bytes, n, n_out);

    const int u = k->repack_rows[ER_W_Q4_K];
    const int ranges[2][2] = {{0, n_out}, {u, n_out - u > u ? n_out - u : n_out}};
    for (int q = 0; q < 2; q++) {
        const int r0 = ranges[q][0], r1 = ranges[q][1];
        if (r1 <= r0) continue;
        for (size_t i = 0; i < (size_t)n_out * (size_t)m; i++) y[i] = NAN;
        er_matmul_args a = {.w = packed, .w_row_bytes = row_bytes, .x = xq, .x_stride = xs, .y = y,
                            .y_stride = (size_t)n_out, .n = n, .m = m, .r0 = r0, .r1 = r1};
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
        CHECK(untouched, "%s q4_k: outputs outside rows [%d,%d) were written", k->name, r0, r1);
    }
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
        const int fails_before = g_test_fail;
        int layouts = 0;
        for (int wt = 0; wt < ER_W_COUNT; wt++) {
            if (k->repack_rows[wt] <= 0) continue;
            layouts++;
            CHECK(k->repack[wt] && k->matmul_repacked[wt], "%s: repack_rows without functions", k->name);
            CHECK(k->repack_rows[wt] == 4, "%s wt %d: repack_rows %d, the Arm layouts interleave 4", k->name, wt,
                  k->repack_rows[wt]);
            if (!k->repack[wt] || !k->matmul_repacked[wt] || k->repack_rows[wt] != 4) continue;
            if (wt == ER_W_Q4_K) {
                const int ns[] = {256, 768, 2048, 4352};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_q4_k(k, ns[a], 4, m);
                        if (m % 2 || a < 2) check_q4_k(k, ns[a], 12, m);
                    }
            } else {
                CHECK(wt == ER_W_Q8_0 || wt == ER_W_Q4_0, "%s: unexpected layout for type %d", k->name, wt);
                /* unit scales: exact integers (n <= 768 keeps sums below 2^24) */
                const int nu[] = {32, 64, 768};
                for (size_t a = 0; a < sizeof nu / sizeof nu[0]; a++)
                    for (int m = 1; m <= 9; m++) check_q(k, wt, nu[a], 12, m, 1);
                /* 8224: more than one stack slice of activation blocks (128 and 256) */
                const int ns[] = {96, 768, 8224};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                    for (int m = 1; m <= 9; m++) {
                        check_q(k, wt, ns[a], 4, m, 0);
                        if (m % 2 || a < 2) check_q(k, wt, ns[a], 20, m, 0);
                    }
            }
        }
        if (strcmp(k->name, "sve") != 0)
            CHECK(layouts == 3, "%s: %d repacked layouts, want Q8_0, Q4_0 and Q4_K", k->name, layouts);
        printf("table %-13s %d layouts %s\n", k->name, layouts, g_test_fail == fails_before ? "ok" : "FAILED");
    }
    if (!ran) {
        printf("no Arm table runs here: skipped\n");
        return 77;
    }
    check_auto_choice();
    return test_summary();
}
