/*
 * kq_x8_avx2.h — what the x86 interleaved-layout kernels share: the
 * unaligned load, the 4-byte activation broadcast that meets a load of 8
 * (or 16) rows x 4 quants, kquant.h's float tail on 8 lanes, the rows per
 * pass over the activation tiles, and the weight-stream prefetches with
 * their per-CPU policy. Every repack_*.c and qk23_avx2.c under x86/
 * includes it. Include only from files compiled with the AVX2 flags
 * (kernels/meson.build).
 */
#ifndef ER_KERNELS_KQ_X8_AVX2_H
#define ER_KERNELS_KQ_X8_AVX2_H

#include <string.h>

#include "avx2.h"

static inline __attribute__((always_inline)) __m256i er_kq8_ld(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* 4 activation quants in every 32-bit lane: lane r meets row r's 4 quants */
static inline __attribute__((always_inline)) __m256i er_kq8_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* er_kq_accum on 8 lanes, statement for statement: IEEE mul/sub/add give
 * the same bits in a vector lane as in a scalar, and the library is built
 * with -std=c11, where GCC does not contract separate statements into FMA.
 * Fusing any two of these would break the bit-identity with generic that
 * test_repack checks. */
static inline __attribute__((always_inline)) __m256 er_kq8_accum(__m256 sum, __m256 dw, __m256 dmw, float dx,
                                                                 __m256i isum, __m256i imin) {
    const __m256 vdx = _mm256_set1_ps(dx);
    const __m256 dd = _mm256_mul_ps(dw, vdx);
    const __m256 dm = _mm256_mul_ps(dmw, vdx);
    const __m256 a = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum));
    const __m256 b = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(imin));
    return _mm256_add_ps(sum, _mm256_sub_ps(a, b));
}

/* Decode (one activation row) streams each weight record once, and the
 * hardware prefetchers alone keep too few lines in flight for a kernel that
 * spends this many instructions per byte: the loads wait on DRAM while the
 * arithmetic waits on the loads. Each record's decode loop therefore first
 * prefetches the record ER_KQ8_PF_BYTES further on into L1 (the arena's
 * weights sit on 2 MiB pages, so a prefetch crosses no 4 KiB page to walk;
 * a prefetch past the matrix or the thread's rows never faults and costs
 * one wasted line). Measured on this project's Zen 5 VM (one thread, Q6_K
 * 262144 x 768 on 2 MiB pages, median of 11 pairs against a plain AVX2
 * read of the same bytes): no prefetch 0.75-0.84 of the read rate, 1 KiB
 * ahead 0.80-0.89, 4 KiB 0.88, 6-8 KiB 0.90-1.05, 12-16 KiB 0.91-0.95. */
#define ER_KQ8_PF_BYTES 8192

/* Whether this CPU wants that prefetch (dispatch.c: not on Zen 4, where
 * the hardware prefetchers do better alone; the measurements are there). Written once, by the kernel table's selection,
 * before any kernel runs; read-only after. */
extern int er_x86_decode_prefetch;

/* The prefetches go in a loop on purpose: unrolled (or spread one per
 * group beside the group's loads) the avx512vnni Q6_K kernel of 16-row
 * records ran at 0.7-0.88 of the read rate where the loop ran at 0.94-1.0
 * (151936 x 1024, median of 11 pairs, three runs each). */

static inline __attribute__((always_inline)) void er_kq8_prefetch(const void *rec, size_t bytes) {
    if (!er_x86_decode_prefetch) return;
    const char *p = (const char *)rec + ER_KQ8_PF_BYTES;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

/* Several activation rows (a batched decode step's tile of 4) make the
 * kernel compute-bound, and the records prefetched into L1 then evicted the
 * activation rows and the record in use before their turn: on Zen 4 the
 * Q4_0 16-row kernel at 4 rows, 65536 x 2048 from DRAM, took 5.2-5.6 ms
 * with the L1 prefetch 8 KiB ahead, 6.0-6.7 with none, and 3.5-3.7 with
 * this one into L2 8-16 KiB ahead (median of 15, variants interleaved in
 * one process). One row keeps er_kq8_prefetch (L2 here lost 10-30%). */
#define ER_KQ8_PF_L2_BYTES 16384

static inline __attribute__((always_inline)) void er_kq8_prefetch_l2(const void *rec, size_t bytes) {
    const char *p = (const char *)rec + ER_KQ8_PF_L2_BYTES;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
}

/* Rows per pass over the activation tiles: row groups (rows weight rows
 * each, group_bytes of weights) making about 64 KiB, so a prefill reads
 * them from memory once and from L2 for every further tile; forward.c's
 * chunks are about this size already, this keeps a larger [r0, r1) from
 * streaming the weights m / MT times. */
static inline __attribute__((always_inline)) int er_kq8_row_chunk(size_t group_bytes, int rows) {
    const int groups = group_bytes < 65536 ? (int)(65536 / group_bytes) : 1;
    return rows * groups;
}

#endif
