/*
 * kernel_insns.c — one matrix product of a kernel table, for counting the
 * instructions it executes under qemu (scripts/kernel_insns_qemu.sh; not
 * part of the runtime). Usage:
 *   kernel_insns TABLE TYPE LAYOUT M REPS
 * TABLE a kernel table name ("sve", "neon-dotprod", ...); TYPE q8_0, q4_0,
 * q4_k, q5_k, q6_k, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q3_k or q2_k; LAYOUT "file" (matmul on the file's rows) or
 * "repacked" (the table's interleaved copy); M activation rows; REPS how many
 * times the product runs. The matrix is 64 rows of 2048 (both divisible by
 * every layout's row group up to SVE 2048 bits and every block size). The
 * set-up (weights, repacking, activations) is the same for every REPS, so
 * the count at REPS = 1 minus the count at REPS = 0 is the product alone.
 *
 *   kernel_insns TABLE quantize q8_0|q8_k N REPS
 * instead quantizes one activation row of N floats (a multiple of 256) REPS
 * times with the table's Q8_0 or Q8_K quantizer, the work the caller does
 * before every product.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "kernels/kernels.h"

static int type_of(const char *s) {
    static const char *const names[ER_W_COUNT] = {"f32",  "f16",  "bf16", "q8_0", "q4_0",   "q4_k",   "q5_k",
                                                  "q6_k", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q3_k",
                                                  "q2_k"};
    for (int t = ER_W_Q8_0; t < ER_W_COUNT; t++)
        if (names[t] && strcmp(s, names[t]) == 0) return t;
    return -1;
}

/* kernel_insns TABLE quantize q8_0|q8_k N REPS */
static int quantize(const er_kernels *k, const char *kind, int n, int reps) {
    const int q8k = strcmp(kind, "q8_k") == 0;
    if ((!q8k && strcmp(kind, "q8_0") != 0) || n < 256 || n % 256 || reps < 0) {
        fprintf(stderr, "kernel_insns: quantize wants q8_0 or q8_k, N a multiple of 256, REPS >= 0\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)n);
    unsigned char *q = calloc(1, er_act_row_bytes(q8k ? ER_ACT_Q8_K : ER_ACT_Q8_0, n)); /* read at REPS = 0 too */
    if (!x || !q) return 1;
    for (int i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    for (int r = 0; r < reps; r++) (q8k ? k->quantize_row_q8_k : k->quantize_row_q8_0)(x, q, n);
    printf("%d\n", q[7]); /* keeps the quantizer live */
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[2], "quantize") == 0) {
        const er_kernels *k = er_kernels_select(argv[1], NULL);
        if (!k) {
            fprintf(stderr, "kernel_insns: %s\n", er_last_error());
            return 2;
        }
        return quantize(k, argv[3], atoi(argv[4]), atoi(argv[5]));
    }
    if (argc != 6) {
        fprintf(stderr, "usage: kernel_insns TABLE q8_0|q4_0|q4_k|q5_k|q6_k|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q3_k|q2_k "
                        "file|repacked M REPS\n"
                        "       kernel_insns TABLE quantize q8_0|q8_k N REPS\n");
        return 2;
    }
    const er_kernels *k = er_kernels_select(argv[1], NULL);
    const int wt = type_of(argv[2]), packed = strcmp(argv[3], "repacked") == 0, m = atoi(argv[4]);
    const int reps = atoi(argv[5]);
    if (!k || wt < 0 || m < 1 || reps < 0 || (packed && !k->repack[wt])) {
        fprintf(stderr, "kernel_insns: %s\n", !k ? er_last_error() : "bad type, layout, M or REPS");
        return 2;
    }
    enum { ROWS = 64, N = 2048 };
    static const size_t block_bytes[ER_W_COUNT] = {[ER_W_Q8_0] = 34, [ER_W_Q4_0] = 18, [ER_W_Q4_K] = 144,
                                                  [ER_W_Q5_K] = 176, [ER_W_Q6_K] = 210, [ER_W_Q4_1] = 20,
                                                  [ER_W_Q5_0] = 22, [ER_W_Q5_1] = 24, [ER_W_IQ4_NL] = 18,
                                                  [ER_W_IQ4_XS] = 136, [ER_W_Q3_K] = 110, [ER_W_Q2_K] = 84};
    const size_t rb = block_bytes[wt] * (size_t)(N / er_wtype_block_elems(wt));
    unsigned char *w = malloc(rb * ROWS), *p = malloc(rb * ROWS);
    const size_t xs = er_act_row_bytes(k->act_kind[wt], N);
    unsigned char *x = malloc(xs * (size_t)m);
    float *xf = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * ROWS * (size_t)m);
    if (!w || !p || !x || !xf || !y) return 1;
    /* the count depends on the shapes, not the values; any bytes will do */
    for (size_t i = 0; i < rb * ROWS; i++) w[i] = (unsigned char)((i * 2654435761u) >> 13);
    if (packed) k->repack[wt](w, p, rb, N, ROWS);
    for (int i = 0; i < N; i++) xf[i] = (float)(i % 7) - 3.0f;
    for (int j = 0; j < m; j++)
        (k->act_kind[wt] == ER_ACT_Q8_0 ? k->quantize_row_q8_0 : k->quantize_row_q8_k)(xf, x + (size_t)j * xs, N);
    er_matmul_args a = {.w = packed ? p : w, .w_row_bytes = rb, .x = x, .x_stride = xs, .y = y,
                        .y_stride = ROWS, .n = N, .m = m, .r0 = 0, .r1 = ROWS};
    for (int r = 0; r < reps; r++) (packed ? k->matmul_repacked : k->matmul)[wt](&a);
    printf("%g\n", (double)y[0]); /* keeps the product live */
    return 0;
}
