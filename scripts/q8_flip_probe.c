/*
 * q8_flip_probe.c — why two kernel tables' logits differ on a Q8_0 file:
 * records every activation row the generic table quantizes to Q8_0 in one
 * forward pass (er_decode_all over the given ids, 1 thread), runs the same
 * pass on another table, and prints the first element whose 8-bit code
 * differs: both tables' inputs, their block's largest |x|, and x / d.
 * (tests/test_quant_tables.py quotes its output.) A diagnostic, not part
 * of the build; it reaches into er_model to wrap the table's quantizer:
 *
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -Iruntime_c/include -Iruntime_c/src scripts/q8_flip_probe.c \
 *       build/native/runtime_c/libedgerun_internal.a -lm -pthread -o /tmp/q8_flip_probe
 *   /tmp/q8_flip_probe MODEL.gguf avx2 ID ID ID ...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "model.h"

#define MAX_VALUES (64u << 20)
#define MAX_ROWS (1u << 20)
#define MAX_IDS 256

static float *rec_x;     /* generic's inputs, row after row */
static int8_t *rec_q;    /* its codes */
static size_t *row_off;  /* where row r starts in rec_x */
static size_t n_values, n_rows;
static int replay, found;
static void (*inner)(const float *, void *, int);

static float block_amax(const float *x) {
    float a = 0.0f;
    for (int t = 0; t < ER_QK8_0; t++) a = fmaxf(a, fabsf(x[t]));
    return a;
}

static void compare(const float *x, const er_block_q8_0 *y, int n) {
    const size_t r = n_rows, off = row_off[r];
    for (int b = 0; b < n / ER_QK8_0 && !found; b++)
        for (int j = 0; j < ER_QK8_0; j++) {
            const size_t i = off + (size_t)b * ER_QK8_0 + j;
            if (y[b].qs[j] == rec_q[i]) continue;
            const float ag = block_amax(rec_x + off + (size_t)b * ER_QK8_0);
            const float ao = block_amax(x + (size_t)b * ER_QK8_0);
            printf("row %zu (%d wide), block %d, element %d:\n", r, n, b, j);
            printf("  generic x %.9g, block max %.9g, x * (1/d) %.7f -> %d\n", rec_x[i], ag,
                   rec_x[i] * (1.0f / (ag / 127.0f)), rec_q[i]);
            printf("  other   x %.9g, block max %.9g, x * (1/d) %.7f -> %d\n", x[(size_t)b * ER_QK8_0 + j], ao,
                   x[(size_t)b * ER_QK8_0 + j] * (1.0f / (ao / 127.0f)), y[b].qs[j]);
            found = 1;
            break;
        }
}

static void wrapped(const float *x, void *dst, int n) {
    inner(x, dst, n);
    if (n_rows >= MAX_ROWS || n_values + (size_t)n > MAX_VALUES) return;
    const er_block_q8_0 *y = dst;
    if (replay) {
        if (!found) compare(x, y, n);
    } else {
        row_off[n_rows] = n_values;
        memcpy(rec_x + n_values, x, (size_t)n * sizeof(float));
        for (int b = 0; b < n / ER_QK8_0; b++) memcpy(rec_q + n_values + (size_t)b * ER_QK8_0, y[b].qs, ER_QK8_0);
        n_values += (size_t)n;
    }
    n_rows++;
}

static int pass(const char *path, const char *isa, const int32_t *ids, int n) {
    er_options o;
    er_options_default(&o);
    o.n_threads = 1;
    o.isa = isa;
    o.n_ctx = n;
    er_model *m;
    er_session *s;
    if (er_model_open(path, &o, &m) != ER_OK) return fprintf(stderr, "%s\n", er_last_error()), 1;
    static er_kernels table;
    table = *m->k;
    inner = table.quantize_row_q8_0;
    table.quantize_row_q8_0 = wrapped;
    m->k = &table;
    er_hparams hp;
    er_model_hparams(m, &hp);
    float *out = malloc((size_t)n * (size_t)hp.n_vocab * sizeof(float));
    n_rows = 0;
    int rc = out ? er_session_new(m, &s) : ER_ENOMEM;
    if (rc == ER_OK) {
        rc = er_decode_all(s, ids, (size_t)n, out, (size_t)n * (size_t)hp.n_vocab);
        er_session_free(s);
    }
    if (rc != ER_OK) fprintf(stderr, "%s: %s\n", isa, er_last_error());
    printf("%s: %zu activation rows quantized to Q8_0\n", isa, n_rows);
    free(out);
    er_model_close(m);
    return rc != ER_OK;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc - 3 > MAX_IDS) {
        fprintf(stderr, "usage: %s MODEL.gguf TABLE ID... (at most %d ids)\n", argv[0], MAX_IDS);
        return 2;
    }
    int32_t ids[MAX_IDS];
    const int n = argc - 3;
    for (int i = 0; i < n; i++) ids[i] = (int32_t)atoi(argv[3 + i]);
    rec_x = malloc(MAX_VALUES * sizeof(float));
    rec_q = malloc(MAX_VALUES);
    row_off = malloc(MAX_ROWS * sizeof(size_t));
    if (!rec_x || !rec_q || !row_off) return fprintf(stderr, "out of memory\n"), 1;
    if (pass(argv[1], "generic", ids, n)) return 1;
    replay = 1;
    if (pass(argv[1], argv[2], ids, n)) return 1;
    if (!found) printf("every code equal\n");
    return 0;
}
