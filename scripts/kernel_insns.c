/*
 * kernel_insns.c — one matrix product of a kernel table, for counting the
 * instructions it executes under qemu (scripts/kernel_insns_qemu.sh; not
 * part of the runtime). Usage:
 *   kernel_insns TABLE TYPE LAYOUT M REPS
 * TABLE a kernel table name ("sve", "neon-dotprod", ...); TYPE q8_0, q4_0,
 * q4_k, q5_k or q6_k; LAYOUT "file" (matmul on the file's rows) or
 * "repacked" (the table's interleaved copy); M activation rows; REPS how many
 * times the product runs. The matrix is 64 rows of 2048 (both divisible by
 * every layout's row group up to SVE 2048 bits and every block size). The
 * set-up (weights, repacking, activations) is the same for every REPS, so
 * the count at REPS = 1 minus the count at REPS = 0 is the product alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "kernels/kernels.h"

static int type_of(const char *s) {
    static const char *const names[ER_W_COUNT] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"};
    for (int t = ER_W_Q8_0; t < ER_W_COUNT; t++)
        if (strcmp(s, names[t]) == 0) return t;
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: kernel_insns TABLE q8_0|q4_0|q4_k|q5_k|q6_k file|repacked M REPS\n");
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
                                                  [ER_W_Q5_K] = 176, [ER_W_Q6_K] = 210};
    const size_t rb = block_bytes[wt] * (size_t)(N / (wt >= ER_W_Q4_K ? ER_QK_K : 32));
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
