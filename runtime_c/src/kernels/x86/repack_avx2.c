/*
 * repack_avx2.c — Q4_0 matrices in 8-row interleaved blocks, AVX2.
 *
 * Layout (repack_rows = 8; the same bytes as the file, rearranged at open by
 * er_avx2_repack_q4_0 into the arena's "repacked" section): for each group
 * of 8 weight rows and each 32-element block index b, one record
 *   { f16 d[8]; uint8 q[4 chunks][8 rows][4] }                144 = 8 x 18 bytes
 * with the 8 rows' scales side by side, and chunk c byte t of row r holding
 * element 4c+t in its low nibble and element 16+4c+t in its high nibble
 * (unsigned 0..15, value nibble - 8): one 32-byte load and two masks give
 * 4 consecutive elements of each of the 8 rows, row r in 32-bit lane r.
 *
 * Why it pays: with rows in lanes, the activation's 4 bytes are broadcast
 * and one maddubs gives all 8 rows' partial sums; the 8 scales load and
 * convert as one vector; no horizontal sum per row and block; the unsigned
 * nibbles need no sign trick (the -8 offset comes off once per block as
 * 8 * sum(x)). Per block of 8 rows ~45 vector ops where the row-wise kernel
 * (q_avx2.c) spends ~110. Measured on a Zen 4 core (768 x 2048 and
 * 768 x 131072 matrices): decode 21 -> 48 GMAC/s from cache, 6 -> 20 GB/s
 * streaming from DRAM (row-wise Q4_0 decode was compute-bound), prefill
 * tiles of 4 activation rows 32 -> 55 GMAC/s. Second round (110M shapes,
 * m = 64, min of 7, A/B in one process): tiles of 6 activation rows, chunks
 * unpacked per use and the chunk loop unrolled by 2, 97 -> 110 GMAC/s
 * (MT = 4 and 8, and unrolling by 4, measured slower); decode unchanged.
 *
 * The avx512vnni table takes 16 rows per record instead (repack_rows 16,
 * er_avx512vnni_repack_q4_0): per group of 16 rows and block index,
 *   { f16 d[16]; uint8 q[4 chunks][16 rows][4] }              288 = 16 x 18 bytes
 * so one 512-bit load gives a chunk of 16 rows and every instruction of the
 * body (group_tile16) serves twice group_tile's rows. Each lane takes
 * group_tile's integer sums and float operations in group_tile's order: the
 * results are the 8-row kernel's bit for bit, in half the instructions.
 * That counts where the kernel is compute-bound: several activation rows
 * (er_decode_batch's decode step, prefill) or weights in cache. Measured
 * on this project's Zen 5 VM (768-wide rows, thread CPU time, A/B pairs,
 * median): from L2, 1 row 5.5 -> 3.2 us and 4 rows 32.8 -> 18.9 us per
 * 768 outputs; streaming 98,304 outputs from DRAM, 1 row unchanged and 4
 * rows 1.3-1.6x faster. Reading the 16 rows from two 8-row records
 * instead (two streams 3.4 KB apart) streamed at half the speed. A matrix
 * whose n_out is not a multiple of 16 keeps the file layout there.
 *
 * Both kernels prefetch 8 KiB ahead of each record in their first pass
 * over a chunk's rows (er_kq8_prefetch, kq_x8_avx2.h, which says why); a
 * prefill's later activation tiles find the chunk in L2. Measured on the
 * 110M Q4_0 model, one thread, quiet moments, medians: avx512vnni decode
 * 2.37 -> 1.9-2.05 ms a token and a 4-session batched step 3.34 -> 2.8
 * (A/B in one process, shuffled, 21 rounds); avx2 decode 2.6 -> 2.1-2.5 ms.
 *
 * Q8_0 has its own layouts (repack_q8_0_avx2.c, repack_q8_0_x16_avx512.c);
 * Q4_K too (repack_q4_k_q5_k_avx2.c, with Q5_K), Q6_K too
 * (repack_q6_k_avx2.c); Q5_0, IQ4_NL, Q4_1 and Q5_1 take this one's 8-row
 * shape on avx2 (repack_q32_avx2.c) and their own 16-row records on
 * avx512vnni (repack_q32_x16_avx512.c).
 *
 * Arithmetic: each block's int32 sum per row is exact (maddubs of the
 * unsigned nibbles, int16 sums of 8 groups <= 8 * 2 * 15 * 127 = 30480, then
 * minus 8 * sum(x)), converted and FMA-accumulated with d_w * d_x — the same
 * integers as generic, summed in another float order.
 */
#include <string.h>

#include "kq_x8_avx2.h" /* er_kq8_prefetch */

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[8];
    uint8_t q[128];
} blk_q4_0x8;

_Static_assert(sizeof(blk_q4_0x8) == 8 * sizeof(er_block_q4_0), "Q4_0x8 must be 8 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

/* the 8-row layout, once, in the AVX2 build (Q8_0 shares its writer) */
#if !ER_X86_VNNI

void er_avx2_interleave_x8(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int qs_bytes) {
    const size_t in_block = sizeof(er_f16) + (size_t)qs_bytes; /* 32 elements per block for both types */
    const int nb = n_in / 32;
    uint8_t *out = dst;
    for (int g = 0; g < n_out / 8; g++)
        for (int b = 0; b < nb; b++) {
            er_f16 *d = (er_f16 *)(void *)out;
            uint8_t *q = out + 8 * sizeof(er_f16);
            for (int r = 0; r < 8; r++) {
                const uint8_t *in = (const uint8_t *)src + (size_t)(8 * g + r) * row_bytes + (size_t)b * in_block;
                memcpy(&d[r], in, sizeof(er_f16));
                for (int c = 0; c < qs_bytes / 4; c++) memcpy(&q[32 * c + 4 * r], in + sizeof(er_f16) + 4 * c, 4);
            }
            out += 8 * in_block;
        }
}

/* qs[j] already pairs element j (low) with j+16 (high), so its bytes move as they are */
void er_avx2_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_avx2_interleave_x8(src, dst, row_bytes, n_in, n_out, ER_QK4_0 / 2);
}
#else

typedef struct {
    er_f16 d[16];
    uint8_t q[256];
} blk_q4_0x16;

_Static_assert(sizeof(blk_q4_0x16) == 16 * sizeof(er_block_q4_0), "Q4_0x16 must be 16 blocks' bytes");

/* the 16-row layout (top of file); n_out a multiple of 16 */
void er_avx512vnni_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK4_0;
    blk_q4_0x16 *out = dst;
    for (int g = 0; g < n_out / 16; g++)
        for (int b = 0; b < nb; b++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_q4_0 *in =
                    (const er_block_q4_0 *)(const void *)((const uint8_t *)src + (size_t)(16 * g + r) * row_bytes) + b;
                out->d[r] = in->d;
                for (int c = 0; c < 4; c++) memcpy(&out->q[64 * c + 4 * r], in->qs + 4 * c, 4);
            }
}
#endif

/* ---- kernels ---------------------------------------------------------------- */

/* What the kernel needs of one activation block besides its quants: its
 * scale as float and 8 * the sum of its quants, prepared once per block and
 * activation row rather than once per weight row group. */
typedef struct act_blk {
    float d;
    int32_t sum8;
} act_blk;

#if !ER_X86_VNNI /* the VNNI kernel broadcasts inside VPDPBUSD (avx2.h) */
static ALWAYS_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
#endif

static ALWAYS_INLINE int32_t sum_i8_32(const int8_t *q) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)q);
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
    return er_avx2_hsum_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

/* Activation blocks prepared per call in slices of at most KB blocks (the
 * arrays live on the stack); a matrix wider than that accumulates the slices
 * into y. KB * 32 = 8192 elements covers every layer of models up to ~7B in
 * one slice. */
#define KB 256
#define MT 6 /* activation rows per tile (see group_tile) */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, act_blk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            a[j][b - b0].d = _cvtsh_ss(xb[b].d);
            a[j][b - b0].sum8 = 8 * sum_i8_32(xb[b].qs);
        }
    }
}

#if !ER_X86_VNNI
/* One group of 8 weight rows against mt activation rows over blocks
 * [b0, b1), lane r = weight row r, stored to y (added to it when add: a
 * later slice). Each 32-byte chunk is unpacked and used at once for every
 * activation row instead of all 8 unpacked vectors held across the rows,
 * so 6 rows' int16 sums and float accumulators fit the 16 registers; the
 * accumulators are locals of this body, inlined with a constant mt. The
 * int16 sums take 8 maddubs per block, as before: <= 30480. */
static ALWAYS_INLINE void group_tile(const blk_q4_0x8 *wg, const unsigned char *x, size_t xs, const int mt, int b0,
                                     int b1, act_blk a[MT][KB], float *y, size_t ys, int add, int pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = _mm256_setzero_ps();
    for (int b = b0; b < b1; b++) {
        const blk_q4_0x8 *w = wg + b;
        if (pf) er_kq8_prefetch(w, sizeof *w);
        const int8_t *xq[MT];
        __m256i s[MT];
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            s[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 2
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w->q + 32 * c));
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
#pragma GCC unroll 8
            for (int j = 0; j < mt; j++)
                s[j] = _mm256_add_epi16(s[j], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xq[j] + 4 * c)),
                                                               _mm256_maddubs_epi16(hi, bcast4(xq[j] + 16 + 4 * c))));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        for (int j = 0; j < mt; j++) {
            const act_blk *ab = &a[j][b - b0];
            const __m256i isum = _mm256_madd_epi16(s[j], _mm256_set1_epi16(1));
            const __m256i d = _mm256_sub_epi32(isum, _mm256_set1_epi32(ab->sum8));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), acc[j]);
        }
    }
    for (int j = 0; j < mt; j++) {
        float *yj = y + (size_t)j * ys;
        _mm256_storeu_ps(yj, add ? _mm256_add_ps(_mm256_loadu_ps(yj), acc[j]) : acc[j]);
    }
}
#endif

#if ER_X86_VNNI
/* group_tile on a group of 16 rows (lane r = row r), with VPDPBUSD: each
 * lane's int32 block sum is group_tile's (exact both ways), and its float
 * operations are group_tile's in group_tile's order. With one activation
 * row (decode) the high nibbles multiply in place (masked, not shifted:
 * 16x their value, up to 240 x 127 x 4 per lane product sum, no int16 step
 * to overflow) into their own int32 sums, shifted down by 4 once per block,
 * exactly (a multiple of 16): one operation fewer per chunk, and two
 * independent chains. With several rows (a batched decode step, prefill)
 * the chunk is shifted once for all of them instead, which saves a shift
 * and an add per row and block; with the -8 offset taken off as the sums'
 * start, 4 rows from DRAM went from ~1.3x one row's time to ~1.2x (all
 * of a 110M decode step's Q4_0 matrices in a C loop, best of 40). The
 * integers are the same either way, so a row's bits do not depend on how
 * many rows share the call (er_decode_batch relies on it). 4 rows' sums
 * and accumulators stay in registers (MT16). */
static ALWAYS_INLINE void group_tile16(const blk_q4_0x16 *wg, const unsigned char *x, size_t xs, const int mt, int b0,
                                       int b1, act_blk a[MT][KB], float *y, size_t ys, int add, int pf) {
    /* several activation rows share each unpacked chunk: shifting the high
     * nibbles down once per chunk then costs less than a shift and an add
     * per row and block (one chain per row) */
    const int shared = mt > 1;
    const __m512i m4 = _mm512_set1_epi8(0x0f), mh = _mm512_set1_epi8((char)0xf0);
    __m512 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = _mm512_setzero_ps();
    for (int b = b0; b < b1; b++) {
        const blk_q4_0x16 *w = wg + b;
        if (pf && shared)
            er_kq8_prefetch_l2(w, sizeof *w);
        else if (pf)
            er_kq8_prefetch(w, sizeof *w);
        const int8_t *xq[MT];
        __m512i s[MT], h[MT];
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            /* the -8 offset's 8 * sum(x) taken off up front: same integer */
            s[j] = _mm512_set1_epi32(-a[j][b - b0].sum8);
            h[j] = _mm512_setzero_si512();
        }
#pragma GCC unroll 2
        for (int c = 0; c < 4; c++) {
            const __m512i q = _mm512_loadu_si512((const void *)(w->q + 64 * c));
            const __m512i lo = _mm512_and_si512(q, m4);
            const __m512i hi = shared ? _mm512_and_si512(_mm512_srli_epi16(q, 4), m4) : _mm512_and_si512(q, mh);
#pragma GCC unroll 8
            for (int j = 0; j < mt; j++) {
                s[j] = er_x86_dpbusd512_bcast4(s[j], lo, xq[j] + 4 * c);
                if (shared)
                    s[j] = er_x86_dpbusd512_bcast4(s[j], hi, xq[j] + 16 + 4 * c);
                else
                    h[j] = er_x86_dpbusd512_bcast4(h[j], hi, xq[j] + 16 + 4 * c);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->d));
        for (int j = 0; j < mt; j++) {
            const __m512i d = shared ? s[j] : _mm512_add_epi32(s[j], _mm512_srai_epi32(h[j], 4));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(dw, _mm512_set1_ps(a[j][b - b0].d)), acc[j]);
        }
    }
    for (int j = 0; j < mt; j++) {
        float *yj = y + (size_t)j * ys;
        _mm512_storeu_ps(yj, add ? _mm512_add_ps(_mm512_loadu_ps(yj), acc[j]) : acc[j]);
    }
}

/* Activation rows per tile of the 16-row kernel: 4, not MT. Measured on one
 * core (768 x 768 from L2), per activation row: tiles of 6 1.77 us against
 * 4's 2.1 in a quiet moment (best of 300), but 8.1 against 4.9 as thread
 * CPU time beside the other jobs on this VM's sibling vCPU (the 6-row body
 * keeps its row pointers on the stack); 4 beats the 8-row kernel's tiles
 * of 6 (3.5 and 8) either way, by 1.6x or more. */
#define MT16 4

/* a->w: the 16-row layout; rows [r0, r1) multiples of 16 (forward.c cuts
 * at multiples of repack_rows). matmul_q4_0x8's loops, a group of 16 rows
 * per step. */
void er_avx512vnni_matmul_q4_0x16(const er_matmul_args *a) {
    const int nb = a->n / ER_QK4_0;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q4_0x16);
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int j0 = 0; j0 < a->m; j0 += MT16) {
            const int mt = a->m - j0 < MT16 ? a->m - j0 : MT16;
            const unsigned char *xj = x + (size_t)j0 * a->x_stride;
            prep(xj, a->x_stride, mt, b0, b1, ab);
            for (int r = a->r0; r < a->r1; r += 16) {
                const blk_q4_0x16 *wg = (const blk_q4_0x16 *)(const void *)((const unsigned char *)a->w +
                                                                            (size_t)(r / 16) * group_bytes);
                float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                switch (mt) {
                case 1: group_tile16(wg, xj, a->x_stride, 1, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 2: group_tile16(wg, xj, a->x_stride, 2, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 3: group_tile16(wg, xj, a->x_stride, 3, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                default: group_tile16(wg, xj, a->x_stride, 4, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                }
            }
        }
    }
}

#else

/* a->w: the repacked matrix; rows [r0, r1) with r0 a multiple of 8 and
 * r1 - r0 a multiple of 8 (forward.c chunks so). */
void ER_X86_FN(matmul_q4_0x8)(const er_matmul_args *a) {
    const int nb = a->n / ER_QK4_0;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q4_0x8);
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = x + (size_t)j0 * a->x_stride;
            prep(xj, a->x_stride, mt, b0, b1, ab);
            for (int r = a->r0; r < a->r1; r += 8) {
                const blk_q4_0x8 *wg = (const blk_q4_0x8 *)(const void *)((const unsigned char *)a->w +
                                                                          (size_t)(r / 8) * group_bytes);
                float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                /* one call per tile height: each inlined copy has its own constant mt */
                switch (mt) {
                case 1: group_tile(wg, xj, a->x_stride, 1, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 2: group_tile(wg, xj, a->x_stride, 2, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 3: group_tile(wg, xj, a->x_stride, 3, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 4: group_tile(wg, xj, a->x_stride, 4, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 5: group_tile(wg, xj, a->x_stride, 5, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                default: group_tile(wg, xj, a->x_stride, 6, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                }
            }
        }
    }
}
#endif
