/*
 * kernel_stream.c — one kernel table's matmul on a synthetic matrix, timed
 * (a benchmark, not a test; not part of the runtime). Usage:
 *   kernel_stream TABLE TYPE ROWS N M REPS [file]
 * TYPE any quantized weight type (q8_0 ... q2_k, as the usage says); a ROWS x N matrix (ROWS a multiple of
 * the table's repack_rows, N of 256) on 2 MiB pages as the arena's are, in
 * the table's repacked layout (or the file layout with "file"); M
 * activation rows; the minimum thread CPU time of REPS products, as GB/s
 * of weights and GMAC/s. A matrix over 64 MiB streams from DRAM: then each
 * product is paired with a plain AVX2 read of the same bytes, and the
 * median over the pairs of read time / product time is printed ("ratio"),
 * which a busy machine disturbs far less than either rate alone. Build
 * against the static library of a build directory:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iruntime_c/include -Iruntime_c/src scripts/kernel_stream.c \
 *      build/native/runtime_c/libedgerun_internal.a -lm -pthread -o /tmp/kernel_stream
 *   /tmp/kernel_stream avx512vnni q6_k 262144 1024 1 9     # decode from DRAM
 *   /tmp/kernel_stream avx512vnni q6_k 768 2048 64 20      # a prefill tile from cache
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "edgerun.h"
#include "kernels/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *huge(size_t n) {
    const size_t hp = (size_t)1 << 21, sz = (n + hp - 1) / hp * hp;
    void *p = aligned_alloc(hp, sz);
    if (p) (void)madvise(p, sz, MADV_HUGEPAGE);
    return p;
}

/* the reference: 4 independent 32-byte loads per 128 bytes */
__attribute__((target("avx2"))) static int read_all(const unsigned char *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a = _mm256_add_epi8(a, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
        b = _mm256_add_epi8(b, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
        c = _mm256_add_epi8(c, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
        d = _mm256_add_epi8(d, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    a = _mm256_add_epi8(_mm256_add_epi8(a, b), _mm256_add_epi8(c, d));
    return _mm256_extract_epi8(a, 3);
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    /* name, block bytes and the byte offsets of the block's f16 scales (-1: none) */
    static const struct { const char *name; size_t bytes; int d0, d1; } types[ER_W_COUNT] = {
        [ER_W_Q8_0] = {"q8_0", 34, 0, -1},    [ER_W_Q4_0] = {"q4_0", 18, 0, -1},
        [ER_W_Q4_1] = {"q4_1", 20, 0, 2},     [ER_W_Q5_0] = {"q5_0", 22, 0, -1},
        [ER_W_Q5_1] = {"q5_1", 24, 0, 2},     [ER_W_IQ4_NL] = {"iq4_nl", 18, 0, -1},
        [ER_W_Q4_K] = {"q4_k", 144, 0, 2},    [ER_W_Q5_K] = {"q5_k", 176, 0, 2},
        [ER_W_Q6_K] = {"q6_k", 210, 208, -1}, [ER_W_IQ4_XS] = {"iq4_xs", 136, 0, -1},
        [ER_W_Q3_K] = {"q3_k", 110, 108, -1}, [ER_W_Q2_K] = {"q2_k", 84, 80, 82}};
    if (argc < 7) {
        fprintf(stderr, "usage: kernel_stream TABLE q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|q4_k|q5_k|q6_k|iq4_xs|q3_k|q2_k "
                        "ROWS N M REPS [file]\n");
        return 2;
    }
    const er_kernels *k = er_kernels_select(argv[1], NULL);
    int wt = -1;
    for (int t = 0; t < ER_W_COUNT; t++)
        if (types[t].name && strcmp(argv[2], types[t].name) == 0) wt = t;
    const int rows = atoi(argv[3]), n = atoi(argv[4]), m = atoi(argv[5]), reps = atoi(argv[6]), file = argc > 7;
    if (!k || wt < 0 || rows < 1 || n < 256 || n % 256 || m < 1 || reps < 1 || (!file && !k->repack[wt]) ||
        (!file && rows % k->repack_rows[wt])) {
        fprintf(stderr, "kernel_stream: %s\n", !k ? er_last_error() : "bad type, shape or layout");
        return 2;
    }
    const size_t bb = types[wt].bytes, rb = bb * (size_t)(n / er_wtype_block_elems(wt)), total = rb * (size_t)rows;
    unsigned char *w = huge(total), *p = huge(total);
    const size_t xs = er_act_row_bytes(k->act_kind[wt], n);
    unsigned char *x = malloc(xs * (size_t)m);
    float *xf = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)rows * (size_t)m);
    double *ratio = malloc(sizeof(double) * (size_t)reps);
    if (!w || !p || !x || !xf || !y || !ratio) return 1;
    for (size_t i = 0; i < total; i++) w[i] = (unsigned char)((i * 2654435761u) >> 13);
    /* every block's f16 scales (and mins) a normal number */
    for (size_t b = 0; b < total / bb; b++) {
        const uint16_t h = (uint16_t)(0x2000 + b % 256);
        unsigned char *q = w + b * bb;
        memcpy(q + types[wt].d0, &h, 2);
        if (types[wt].d1 >= 0) memcpy(q + types[wt].d1, &h, 2);
    }
    if (file)
        memcpy(p, w, total);
    else
        k->repack[wt](w, p, rb, n, rows);
    for (int i = 0; i < n; i++) xf[i] = (float)(i % 7) - 3.0f;
    for (int j = 0; j < m; j++)
        (k->act_kind[wt] == ER_ACT_Q8_0 ? k->quantize_row_q8_0 : k->quantize_row_q8_k)(xf, x + (size_t)j * xs, n);
    const er_matmul_args a = {.w = p, .w_row_bytes = rb, .x = x, .x_stride = xs, .y = y, .y_stride = (size_t)rows,
                              .n = n, .m = m, .r0 = 0, .r1 = rows};
    const int big = total > ((size_t)64 << 20);
    double best = 1e30, best_read = 1e30;
    int sink = 0;
    for (int r = 0; r < reps; r++) {
        double tr = 0;
        if (big) {
            const double t0 = now();
            sink += read_all(p, total);
            tr = now() - t0;
            best_read = tr < best_read ? tr : best_read;
        }
        const double t0 = now();
        (file ? k->matmul : k->matmul_repacked)[wt](&a);
        const double t = now() - t0;
        best = t < best ? t : best;
        ratio[r] = tr / t;
    }
    qsort(ratio, (size_t)reps, sizeof *ratio, cmp);
    if (big) printf("ratio %.2f (read %.2f GB/s) | ", ratio[reps / 2], (double)total / best_read / 1e9);
    printf("%s %s %dx%d m=%d: %.1f us, %.2f GB/s, %.2f GMAC/s (y0 %g, %d)\n", argv[1], argv[2], rows, n, m, best * 1e6,
           (double)total / best / 1e9, (double)rows * n * m / best / 1e9, (double)y[0], sink & 1);
    return 0;
}
