/*
 * attention_stream.c — one kernel table's decode-step attention (the two
 * halves forward.c runs, attention_scores then attention_sums) over a
 * synthetic F16 or F32 cache, timed (a benchmark, not a test; not part of
 * the runtime). Usage:
 *   attention_stream TABLE NKV GROUP HEAD_DIM N_KV LAYERS REPS [f32]
 * NKV K/V heads of HEAD_DIM, GROUP query heads each, N_KV cached positions,
 * LAYERS caches side by side on 2 MiB pages, walked in turn as a decode
 * step walks its layers: one layer stays in L2 or L3, enough of them come
 * from DRAM. Prints the minimum over REPS of the thread CPU time of the
 * scores and of the sums over all layers, as GB/s of cache read, and a hash
 * of the last layer's outputs: the same on every table that computes the
 * same floats. Build against the static library of a build directory:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iruntime_c/include -Iruntime_c/src scripts/attention_stream.c \
 *      build/native/runtime_c/libedgerun_internal.a -lm -pthread -o /tmp/attention_stream
 *   /tmp/attention_stream avx512vnni 8 4 64 1024 1 30     # Llama 3.2 1B's heads, from L2
 *   /tmp/attention_stream avx2 1 4 256 2048 16 3          # Gemma 3 270M's, from DRAM
 */
#include <stdint.h>
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

static int arg(const char *s, int lo, int hi) {
    char *end;
    const long v = strtol(s, &end, 10);
    return *end || v < lo || v > hi ? -1 : (int)v;
}

int main(int argc, char **argv) {
    const int f32 = argc == 9 && !strcmp(argv[8], "f32");
    if (argc != 8 && !f32) {
        fprintf(stderr, "usage: attention_stream TABLE NKV GROUP HEAD_DIM N_KV LAYERS REPS [f32]\n");
        return 2;
    }
    const er_kernels *k = er_kernels_select(argv[1], NULL);
    const int nkv = arg(argv[2], 1, 64), group = arg(argv[3], 1, 16), hd = arg(argv[4], 8, 512);
    const int n = arg(argv[5], 1, 1 << 17), layers = arg(argv[6], 1, 256), reps = arg(argv[7], 1, 1000);
    if (!k || nkv < 0 || group < 0 || hd < 0 || n < 0 || layers < 0 || reps < 0) {
        fprintf(stderr, "attention_stream: %s\n", k ? "bad shape" : er_last_error());
        return 2;
    }
    const size_t esz = f32 ? 4 : 2, stride = (size_t)nkv * hd, half = (size_t)n * stride * esz;
    const size_t hp = (size_t)1 << 21, bytes = (2 * half * layers + hp - 1) / hp * hp;
    unsigned char *kv = aligned_alloc(hp, bytes);
    const size_t nq = (size_t)nkv * group * hd;
    float *q = malloc(nq * sizeof(float)), *out = malloc(nq * sizeof(float));
    float *sc = malloc((size_t)nkv * group * n * sizeof(float));
    if (!kv || !q || !out || !sc) {
        fprintf(stderr, "attention_stream: out of memory for %zu bytes of cache\n", bytes);
        return 1;
    }
    (void)madvise(kv, bytes, MADV_HUGEPAGE);
    /* values of magnitude 0.5-4, both signs: every sum stays well inside range */
    uint32_t st = 12345;
    for (size_t i = 0; i < 2 * half * layers / esz; i++) {
        st = st * 1664525u + 1013904223u;
        const float v = (0.5f + (float)(st >> 9) * (1.5f / 8388608.0f)) * ((st & 1) ? -1.0f : 1.0f);
        if (f32)
            memcpy(kv + 4 * i, &v, 4);
        else
            ((er_f16 *)(void *)kv)[i] = (er_f16)(0x3800 + (st >> 16) % 0x0c00) | (er_f16)((st & 1) << 15);
    }
    for (size_t i = 0; i < nq; i++) q[i] = (float)((int)(i * 37 % 17) - 8) / 16.0f;
    const int kvt = f32 ? ER_KV_F32 : ER_KV_F16;
    const float scale = 0.125f;
    double best_s = 1e30, best_v = 1e30;
    for (int r = 0; r < reps; r++) {
        double ts = 0, tv = 0;
        for (int l = 0; l < layers; l++) {
            const unsigned char *kc = kv + 2 * half * l, *vc = kc + half;
            const double t0 = now();
            k->attention_scores(sc, q, n, 0, n, kc, kvt, stride, nkv, group, hd, scale);
            const double t1 = now();
            k->attention_sums(out, sc, n, vc, kvt, stride, nkv, group, hd);
            ts += t1 - t0;
            tv += now() - t1;
        }
        best_s = ts < best_s ? ts : best_s;
        best_v = tv < best_v ? tv : best_v;
    }
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < nq; i++) {
        uint32_t u;
        memcpy(&u, out + i, 4);
        h = (h ^ u) * 16777619u;
    }
    const double gb = (double)half * layers / 1e9;
    printf("%s %s nkv %d group %d head_dim %d n_kv %d layers %d: scores %.1f us (%.2f GB/s), sums %.1f us (%.2f "
           "GB/s), outputs %08x\n",
           k->name, f32 ? "f32" : "f16", nkv, group, hd, n, layers, best_s * 1e6, gb / best_s, best_v * 1e6,
           gb / best_v, h);
    free(sc);
    free(out);
    free(q);
    free(kv);
    return 0;
}
