/*
 * repack_qk23_avx2.c — Q3_K, Q2_K and IQ4_XS matrices in 16-row interleaved
 * super-blocks, AVX2 (and, compiled again, AVX-512 VNNI).
 *
 * Each layout record holds super-block i of 16 weight rows, the same bytes
 * as the file's 16 blocks, regrouped at open (er_avx2_repack_*, and
 * er_avx512vnni_repack_q2_k for the avx512vnni table's Q2_K). Its quants
 * come in 64-byte slots: 4 consecutive elements of each of the 16 rows, row
 * r in 32-bit lane r (rows 0-7 the first 32 bytes, rows 8-15 the second).
 * 4 activation bytes broadcast to every lane meet all the rows at once and
 * each lane's int32 sum is one row's: no horizontal sum, one float tail for
 * the rows, per-row scales as one vector per sub-block. The avx512vnni
 * build takes a slot as one 512-bit vector (16 rows per instruction, half
 * the instructions per weight byte of 8 rows, which at m = 1 ran below the
 * memory's read rate); AVX2 takes each 32-byte half as 8 rows. 16 rows, not
 * 8 rows in two records side by side: from memory, decode over two
 * interleaved 8-row streams ran at ~7 GB/s where one stream ran at ~20 (the
 * hardware prefetchers did not follow them; software prefetch recovered
 * ~25 at a cost in instructions); one 16-row stream needs no prefetch.
 *
 *  Q3_K (1760 bytes): f16 d[16]; u32 sc[3][16] (word k of row r's 12
 *   packed scale bytes); then per pair p of sub-blocks (of 16) three slots
 *   q[p][0..2] holding, in byte 4r + k, the codes c_0..c_7 (q + 4, 0..7,
 *   3 bits) of elements 16t + 4g + k (c_g: t = 2p, c_4+g: t = 2p + 1):
 *     q[p][0] = c0 | c1 << 3 | (c6 & 3) << 6
 *     q[p][1] = c2 | c3 << 3 | (c7 & 3) << 6
 *     q[p][2] = c4 | c5 << 3 | (c6 >> 2) << 6 | (c7 >> 2) << 7
 *   Six codes are one AND (and a shift) away, the last two gather 2 + 1
 *   bits: 17 operations per 8 vectors, where the file's split of two low
 *   bits and an hmask bit took 29; decode is bound by that count.
 *  Q2_K (1344 bytes): f16 d[16], dmin[16]; u8 sc[8][32] (pair p, byte
 *   2r + s: the scale byte of sub-block 2p + s of row r); u8 q[16][64]:
 *   for AVX2, byte 4r + k of q[t] holds in bits 2g..2g+1 the code of
 *   element 16t + 4g + k; for avx512vnni, byte 4r + k of q[2p + e] holds
 *   the codes of elements 8e + k and 8e + 4 + k of sub-block 2p + 1 in
 *   bits 0-1 and 4-5 and those of sub-block 2p in bits 2-3 and 6-7. An
 *   AND takes an odd code as it is and an even one in place, 4 times its
 *   value (one 16-bit shift by 4 serves the upper two): 4 code vectors in
 *   5 operations where the AVX2 layout took 7 (3 shifts); decode from
 *   cache is bound by the count of vector operations.
 *  IQ4_XS (2176 bytes): f16 d[16]; u16 sh[16]; u8 sl[16][4]; u8
 *   q[8][4][64]: byte 4r + k of q[j][v] is the file's qs[16j + 4v + k] of
 *   row r (low nibble element 32j + 4v + k, high nibble 32j + 16 + 4v + k).
 *
 * Arithmetic, per row and super-block, the integers generic computes:
 *  Q3_K: the codes multiply unsigned (q + 4, 0..7), each sub-block's sum
 *   starts at -4 bsum_t, and is then multiplied by its signed scale;
 *  Q2_K: codes 0..3 times the scale per sub-block, imin by madd of the
 *   (min, min) pairs with the bsum pairs; the VNNI build's even sums come 4
 *   times too large, so it takes 4 times the odd scales and shifts the
 *   super-block's sum right by 2 (exact: a multiple of 4);
 *  IQ4_XS: the avx512vnni build takes the grid + 128 (1..241, unsigned) and
 *   starts each sub-block at -128 (bsum pair); the AVX2 build, whose maddubs
 *   would saturate on that, multiplies |grid| by x with grid's sign.
 * In the VNNI build a sub-block's sum is a VPDPBUSD chain (the activation
 * broadcast embedded in the instruction); IQ4_XS's times its scale by
 * VPMULLD, Q3_K's and Q2_K's, which fit int16 (|sum| <= 16 * 4 * 128 and
 * 4 * 16 * 3 * 128), by one VPDPWSSD of the int32 sum as int16 pairs
 * (the sum, its sign) with (scale, 0), which adds too (and so do Q2_K's
 * mins): VPMULLD and an add took two instructions, VPMULLD a slow one; AVX2
 * sums maddubs pairs in int16 (|sum| <= 4 * 2 * 7 * 127 + 4 * 2032 for
 * Q3_K, no saturation) and applies the scale with one madd. All exact, so
 * with kq_x8_avx2.h's float tail, lane by lane and super-block by
 * super-block in order, the results are bit-identical to generic.
 *
 * avx512vnni on Zen 4 (one thread, kernel_stream, best of 3-4 interleaved
 * runs), before -> after the VPDPWSSD scales, Q2_K's own layout, IQ4_XS's
 * scales converted once per super-block, the 16-lane float tail, the
 * start values broadcast from memory and the prefetch policy below:
 *                 m = 1 from L2   DRAM ratio    m = 4          m = 64
 *                 (256 x 2048)    (65536x4096)  (256 x 2048)   (768 x 2048)
 *   IQ4_XS        41.8 -> 48.0    0.57 -> 0.90  154 -> 164     172 -> 180
 *   Q3_K          33.7 -> 39.2    0.57 -> 0.93  137 -> 152     151 -> 165
 *   Q2_K          30.5 -> 37.8    0.60 -> 0.88  146 -> 156     146 -> 160
 * (GB/s of weights; a plain read of the same bytes / the product's time;
 * GMAC/s, the last two). The AVX2 build is unchanged.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[16];
    uint32_t sc[3][16];
    uint8_t q[8][3][64];
} blk_q3_kx16;

typedef struct {
    er_f16 d[16], dmin[16];
    uint8_t sc[8][32];
    uint8_t q[16][64];
} blk_q2_kx16;

typedef struct {
    er_f16 d[16];
    uint16_t sh[16];
    uint8_t sl[16][4];
    uint8_t q[8][4][64];
} blk_iq4_xsx16;

_Static_assert(sizeof(blk_q3_kx16) == 16 * sizeof(er_block_q3_k), "Q3_Kx16 must take 16 blocks' bytes");
_Static_assert(sizeof(blk_q2_kx16) == 16 * sizeof(er_block_q2_k), "Q2_Kx16 must take 16 blocks' bytes");
_Static_assert(sizeof(blk_iq4_xsx16) == 16 * sizeof(er_block_iq4_xs), "IQ4_XSx16 must take 16 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

/* A file block's 256 two-bit codes (Q2_K, Q3_K) in element order. */
static void low2_codes(const uint8_t qs[64], uint8_t q[ER_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = (uint8_t)((qs[32 * h + l] >> (2 * j)) & 3);
}

static const void *src_block(const void *src, size_t row_bytes, int row, size_t bs, int i) {
    return (const uint8_t *)src + (size_t)row * row_bytes + (size_t)i * bs;
}

/* d, dmin and scales of row r of a Q2_K record, both layouts */
static void q2_head(blk_q2_kx16 *out, const er_block_q2_k *in, int r) {
    memcpy(&out->d[r], &in->d, sizeof in->d);
    memcpy(&out->dmin[r], &in->dmin, sizeof in->dmin);
    for (int t = 0; t < 16; t++) out->sc[t / 2][2 * r + t % 2] = in->scales[t];
}

/* Q2_K records of 16 rows, the slot bytes of each row's codes q (element
 * order) for slot t, lane byte k given by slot(q, t, k): both tables'
 * layouts differ only there */
static void repack_q2_k_by(const void *src, void *dst, size_t row_bytes, int n_in, int n_out,
                           uint8_t (*slot)(const uint8_t *q, int t, int k)) {
    const int nb = n_in / ER_QK_K;
    blk_q2_kx16 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g = 0; g < n_out / 16; g++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_q2_k *in = src_block(src, row_bytes, 16 * g + r, sizeof *in, i);
                q2_head(out, in, r);
                low2_codes(in->qs, q);
                for (int t = 0; t < 16; t++)
                    for (int k = 0; k < 4; k++) out->q[t][4 * r + k] = slot(q, t, k);
            }
}

#if ER_X86_VNNI
/* slot 2p + e: the odd and even sub-blocks of pair p alternate in each
 * byte, the even in bits 2-3 and 6-7 (taken in place as 4x their value) */
static uint8_t q2_slot_vnni(const uint8_t *q, int t, int k) {
    const uint8_t *ev = q + 32 * (t / 2) + 8 * (t % 2) + k, *od = ev + 16;
    return (uint8_t)(od[0] | ev[0] << 2 | od[4] << 4 | ev[4] << 6);
}

void er_avx512vnni_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    repack_q2_k_by(src, dst, row_bytes, n_in, n_out, q2_slot_vnni);
}
#else
/* once, in the AVX2 build: the avx512vnni table shares the other layouts */

/* the slot byte of codes q (element order) for sub-block t, lane byte k */
static uint8_t pack4(const uint8_t *q, int t, int k) {
    const uint8_t *e = q + 16 * t + k;
    return (uint8_t)(e[0] | e[4] << 2 | e[8] << 4 | e[12] << 6);
}

void er_avx2_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q3_kx16 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g = 0; g < n_out / 16; g++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_q3_k *in = src_block(src, row_bytes, 16 * g + r, sizeof *in, i);
                memcpy(&out->d[r], &in->d, sizeof in->d);
                for (int k = 0; k < 3; k++) memcpy(&out->sc[k][r], in->scales + 4 * k, 4);
                /* element 128h + 32j + l's code q + 4: its low bits, 4 where
                 * its hmask bit (bit 4h + j of hmask[l]) is set */
                for (int h = 0; h < 2; h++)
                    for (int j = 0; j < 4; j++)
                        for (int l = 0; l < 32; l++)
                            q[128 * h + 32 * j + l] = (uint8_t)(((in->qs[32 * h + l] >> (2 * j)) & 3) |
                                                                ((in->hmask[l] >> (4 * h + j)) & 1) << 2);
                for (int p = 0; p < 8; p++)
                    for (int k = 0; k < 4; k++) {
                        uint8_t c[8];
                        for (int b = 0; b < 8; b++) c[b] = q[32 * p + 16 * (b / 4) + 4 * (b % 4) + k];
                        out->q[p][0][4 * r + k] = (uint8_t)(c[0] | c[1] << 3 | (c[6] & 3) << 6);
                        out->q[p][1][4 * r + k] = (uint8_t)(c[2] | c[3] << 3 | (c[7] & 3) << 6);
                        out->q[p][2][4 * r + k] = (uint8_t)(c[4] | c[5] << 3 | (c[6] >> 2) << 6 | (c[7] >> 2) << 7);
                    }
            }
}

void er_avx2_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    repack_q2_k_by(src, dst, row_bytes, n_in, n_out, pack4);
}

void er_avx2_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_iq4_xsx16 *out = dst;
    for (int g = 0; g < n_out / 16; g++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_iq4_xs *in = src_block(src, row_bytes, 16 * g + r, sizeof *in, i);
                memcpy(&out->d[r], &in->d, sizeof in->d);
                memcpy(&out->sh[r], &in->scales_h, sizeof in->scales_h);
                memcpy(out->sl[r], in->scales_l, 4);
                for (int j = 0; j < 8; j++)
                    for (int v = 0; v < 4; v++) memcpy(&out->q[j][v][4 * r], in->qs + 16 * j + 4 * v, 4);
            }
}
#endif

/* ---- kernels ---------------------------------------------------------------- */

/* -4 bsums[t] of an activation super-block (Q3_K's sub-block starts) */
static ALWAYS_INLINE void q3_offsets(const er_block_q8_k *x, int32_t off[16]) {
    const __m256i b = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)x->bsums));
    const __m256i c = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(x->bsums + 8)));
    _mm256_storeu_si256((__m256i *)(void *)off, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(b, 2)));
    _mm256_storeu_si256((__m256i *)(void *)(off + 8), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 2)));
}

enum { KQ3, KQ2, IQ4XS };

#if ER_X86_VNNI
/* ---- avx512vnni: a slot is one 512-bit vector, 16 rows per instruction ---- */

/* Activation rows per tile: their int32 sums and the unpacked vectors fill
 * AVX-512's 32 registers (the float sums, touched once per super-block,
 * may wait on the stack). 8 against 6, m = 64 from cache: Q3_K 211 -> 219,
 * IQ4_XS 227-256 -> 271-277 GMAC/s, Q2_K within noise. */
#define MT 8

static ALWAYS_INLINE __m512i ld5(const void *p) { return _mm512_loadu_si512(p); }

/* A sub-block's start value in every lane, broadcast from memory: from
 * set1, GCC and clang kept the super-block's 16 (or 8) starts in
 * registers and took each out with a shuffle before a register broadcast,
 * 30 shuffles per Q3_K record where a broadcast load costs none (m = 1
 * Q3_K 36.6 -> 39.1, IQ4_XS 46.1 -> 47.9 GB/s). */
static ALWAYS_INLINE __m512i bcast_mem(const int32_t *p) {
    __m512i r;
    __asm__("vpbroadcastd %1, %0" : "=v"(r) : "m"(*p));
    return r;
}

/* er_kq8_accum on all 16 rows at once, statement for statement (the same
 * bits lane by lane); two 256-bit halves took twice the instructions
 * (m = 64 Q2_K 152 -> 160 GMAC/s, m = 1 within 1%) */
static ALWAYS_INLINE __m512 tail16(__m512 sum, const er_f16 *d, const er_f16 *dmin, float dx, __m512i isum,
                                   __m512i imin) {
    const __m512 vdx = _mm512_set1_ps(dx);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)d));
    const __m512 dmw =
        dmin ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)dmin)) : _mm512_setzero_ps();
    const __m512 dd = _mm512_mul_ps(dw, vdx);
    const __m512 dm = _mm512_mul_ps(dmw, vdx);
    const __m512 a = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum));
    const __m512 b = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(imin));
    return _mm512_add_ps(sum, _mm512_sub_ps(a, b));
}

/* Decode (one activation row) follows the CPU's prefetch policy
 * (er_kq8_prefetch: nothing on Zen 4, whose hardware prefetchers follow
 * this one sequential stream alone); a tile of several rows is
 * compute-bound and prefetches into L2 (er_kq8_prefetch_l2), only in the
 * first tile, the one that reads the group from memory. Before, every CPU
 * prefetched 4 records ahead into L1, which on Zen 4 (one thread,
 * kernel_stream, 65536 x 4096 from DRAM, ratio to a plain read, m = 1 / m
 * = 4) left IQ4_XS at 0.48 / 0.38 (now 0.87 / 0.58), Q3_K 0.51 / 0.32
 * (0.65 / 0.45), Q2_K 21.7 GB/s / 0.27 (27.2 GB/s / 0.38). */
static ALWAYS_INLINE void prefetch_rec(const void *w, size_t rec, int mt) {
    if (mt == 1) er_kq8_prefetch(w, rec);
    else er_kq8_prefetch_l2(w, rec);
}

/* One group of 16 weight rows against mt (1..MT) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void q3_rows(const blk_q3_kx16 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                  __m512 acc[MT], int pf) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03), k32 = _mm512_set1_epi8(32);
    const __m512i m3 = _mm512_set1_epi8(3), m7 = _mm512_set1_epi8(7), lo16 = _mm512_set1_epi32(0xffff);
    for (int i = 0; i < nb; i++) {
        const blk_q3_kx16 *w = wg + i;
        if (pf) prefetch_rec(w, sizeof *w, mt);
        const er_block_q8_k *xb[MT];
        int32_t off[MT][16];
        __m512i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            q3_offsets(xb[j], off[j]);
            isum[j] = _mm512_setzero_si512();
        }
        /* er_q3k_scales on 32-bit words: byte b of o[c] is scale 4c + b, less 32 */
        const __m512i a0 = ld5(w->sc[0]), a1 = ld5(w->sc[1]), a2 = ld5(w->sc[2]);
        __m512i o[4];
        o[0] = _mm512_or_si512(_mm512_and_si512(a0, m4), _mm512_slli_epi32(_mm512_and_si512(a2, m2), 4));
        o[1] = _mm512_or_si512(_mm512_and_si512(a1, m4),
                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 2), m2), 4));
        o[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), m4),
                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m2), 4));
        o[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), m4),
                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 6), m2), 4));
        /* scale 4c + b as int16 in half b / 2 of lane r of s16[c][b % 2] */
        __m512i s16[4][2];
        for (int c = 0; c < 4; c++) {
            o[c] = _mm512_sub_epi8(o[c], k32);
            s16[c][0] = _mm512_srai_epi16(_mm512_slli_epi16(o[c], 8), 8);
            s16[c][1] = _mm512_srai_epi16(o[c], 8);
        }
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            const __m512i qa = ld5(w->q[p][0]), qb = ld5(w->q[p][1]), qc = ld5(w->q[p][2]);
            /* u[4s + g]: group g of sub-block 2p + s (16-bit shifts: each
             * field's bits come from within its byte) */
            __m512i u[8];
            u[0] = _mm512_and_si512(qa, m7);
            u[1] = _mm512_and_si512(_mm512_srli_epi16(qa, 3), m7);
            u[2] = _mm512_and_si512(qb, m7);
            u[3] = _mm512_and_si512(_mm512_srli_epi16(qb, 3), m7);
            u[4] = _mm512_and_si512(qc, m7);
            u[5] = _mm512_and_si512(_mm512_srli_epi16(qc, 3), m7);
            /* bits 0-1 from the first operand, bit 2 from the second (m3 ? a : b) */
            u[6] = _mm512_and_si512(
                _mm512_ternarylogic_epi32(_mm512_srli_epi16(qa, 6), _mm512_srli_epi16(qc, 4), m3, 0xE4), m7);
            u[7] = _mm512_and_si512(
                _mm512_ternarylogic_epi32(_mm512_srli_epi16(qb, 6), _mm512_srli_epi16(qc, 5), m3, 0xE4), m7);
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * p + s;
                /* (scale t, 0) as int16: the sub-block's sum a fits int16
                 * (|a| <= 16 * 4 * 128), so VPDPWSSD takes a times the scale
                 * plus a's sign half times 0, in one instruction where
                 * VPMULLD and the add took two (and VPMULLD is slow) */
                const __m512i sp = s16[t / 4][t % 2];
                const __m512i sv = t % 4 < 2 ? _mm512_and_si512(sp, lo16) : _mm512_srli_epi32(sp, 16);
                for (int j = 0; j < mt; j++) {
                    const int8_t *xq = xb[j]->qs + 16 * t;
                    __m512i a = bcast_mem(&off[j][t]);
                    for (int g = 0; g < 4; g++) a = er_x86_dpbusd512_bcast4(a, u[4 * s + g], xq + 4 * g);
                    isum[j] = _mm512_dpwssd_epi32(isum[j], a, sv);
                }
            }
        }
        /* generic passes dmin 0 and imin 0: the same statements, the same bits */
        for (int j = 0; j < mt; j++) acc[j] = tail16(acc[j], w->d, NULL, xb[j]->d, isum[j], _mm512_setzero_si512());
    }
}

static ALWAYS_INLINE void q2_rows(const blk_q2_kx16 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                  __m512 acc[MT], int pf) {
    const __m512i m3 = _mm512_set1_epi8(3), mc = _mm512_set1_epi8(0x0c), m4 = _mm512_set1_epi16(0x0f);
    const __m512i lo16 = _mm512_set1_epi32(0xffff);
    for (int i = 0; i < nb; i++) {
        const blk_q2_kx16 *w = wg + i;
        if (pf) prefetch_rec(w, sizeof *w, mt);
        const er_block_q8_k *xb[MT];
        /* 4 times the integer sums: the even sub-blocks' codes are taken
         * in place, 4 times their value (see the layout) */
        __m512i isum4[MT], imin[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum4[j] = imin[j] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            /* lane r: (sc_2p, sc_2p+1) as int16; scales low nibbles, mins high */
            const __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)w->sc[p]));
            const __m512i sc = _mm512_and_si512(v, m4), mn = _mm512_srli_epi16(v, 4);
            for (int j = 0; j < mt; j++) {
                int32_t bs;
                memcpy(&bs, xb[j]->bsums + 2 * p, sizeof bs);
                imin[j] = _mm512_dpwssd_epi32(imin[j], mn, _mm512_set1_epi32(bs));
            }
            /* (sc_2p, 0) for the even sum (already 4 times), (4 sc_2p+1, 0)
             * for the odd: bits 14-15 of sc's low int16 are clear */
            const __m512i sv_e = _mm512_and_si512(sc, lo16), sv_o = _mm512_srli_epi32(sc, 14);
            const __m512i q0 = ld5(w->q[2 * p]), q1 = ld5(w->q[2 * p + 1]);
            const __m512i h0 = _mm512_srli_epi16(q0, 4), h1 = _mm512_srli_epi16(q1, 4);
            const __m512i od[4] = {_mm512_and_si512(q0, m3), _mm512_and_si512(h0, m3), _mm512_and_si512(q1, m3),
                                   _mm512_and_si512(h1, m3)};
            const __m512i ev[4] = {_mm512_and_si512(q0, mc), _mm512_and_si512(h0, mc), _mm512_and_si512(q1, mc),
                                   _mm512_and_si512(h1, mc)};
            for (int j = 0; j < mt; j++) {
                const int8_t *xe = xb[j]->qs + 32 * p, *xo = xe + 16;
                __m512i ae = _mm512_setzero_si512(), ao = _mm512_setzero_si512();
                for (int g = 0; g < 4; g++) {
                    ae = er_x86_dpbusd512_bcast4(ae, ev[g], xe + 4 * g);
                    ao = er_x86_dpbusd512_bcast4(ao, od[g], xo + 4 * g);
                }
                /* |ae| <= 4 * 16 * 3 * 128 and |ao| fit int16: a times (s, 0) */
                isum4[j] = _mm512_dpwssd_epi32(isum4[j], ae, sv_e);
                isum4[j] = _mm512_dpwssd_epi32(isum4[j], ao, sv_o);
            }
        }
        for (int j = 0; j < mt; j++)
            acc[j] = tail16(acc[j], w->d, w->dmin, xb[j]->d, _mm512_srai_epi32(isum4[j], 2), imin[j]);
    }
}

static ALWAYS_INLINE void iq4_rows(const blk_iq4_xsx16 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                   __m512 acc[MT], int pf) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    /* the grid + 128: unsigned for VPDPBUSD */
    const __m512i grid = _mm512_broadcast_i32x4(
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values), _mm_set1_epi8((char)0x80)));
    for (int i = 0; i < nb; i++) {
        const blk_iq4_xsx16 *w = wg + i;
        if (pf) prefetch_rec(w, sizeof *w, mt);
        const er_block_q8_k *xb[MT];
        /* -128 times each sub-block's activation sum (the offset of the
         * grid + 128), one madd for all 8: broadcast from memory below,
         * where scalar arithmetic per sub-block was the decode loop's
         * hottest line */
        int32_t off[MT][8];
        __m512i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            _mm256_storeu_si256((__m256i *)(void *)off[j],
                                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)xb[j]->bsums),
                                                  _mm256_set1_epi16(-128)));
            isum[j] = _mm512_setzero_si512();
        }
        /* The 6-bit scales as signed bytes, once per super-block: byte b of
         * lane r of sc[s] is row r's scale 2b + s, less 32. Assembled per
         * sub-block they cost 7 operations each, a sixth of the loop (m = 1
         * 43.5 -> 45.7 GB/s). */
        __m512i sc[2];
        {
            const __m512i sl = ld5(w->sl), m2 = _mm512_set1_epi8(3), mc = _mm512_set1_epi8(0x0c);
            const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)w->sh));
            /* lane bytes (h0, h0, h1, h1) of row r's scales_h (h0, h1), then
             * nibble b of scales_h in byte b: its bits are scale 2b's and
             * 2b + 1's high two */
            const __m512i hh = _mm512_shuffle_epi8(
                sh, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13)));
            const __m512i nib =
                _mm512_and_si512(_mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, hh, _mm512_srli_epi16(hh, 4)), m4);
            const __m512i lo0 = _mm512_and_si512(sl, m4), lo1 = _mm512_and_si512(_mm512_srli_epi16(sl, 4), m4);
            const __m512i hi0 = _mm512_slli_epi16(_mm512_and_si512(nib, m2), 4);
            const __m512i hi1 = _mm512_slli_epi16(_mm512_and_si512(nib, mc), 2);
            sc[0] = _mm512_sub_epi8(_mm512_or_si512(lo0, hi0), _mm512_set1_epi8(32));
            sc[1] = _mm512_sub_epi8(_mm512_or_si512(lo1, hi1), _mm512_set1_epi8(32));
        }
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            const __m512i ls = _mm512_srai_epi32(_mm512_slli_epi32(sc[sb % 2], (unsigned)(24 - 8 * (sb / 2))), 24);
            __m512i v[8];
            for (int k = 0; k < 4; k++) {
                const __m512i q = ld5(w->q[sb][k]);
                v[k] = _mm512_shuffle_epi8(grid, _mm512_and_si512(q, m4));
                v[k + 4] = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
            }
            for (int j = 0; j < mt; j++) {
                const int8_t *xq = xb[j]->qs + 32 * sb;
                __m512i a = bcast_mem(&off[j][sb]);
                for (int k = 0; k < 8; k++) a = er_x86_dpbusd512_bcast4(a, v[k], xq + 4 * k);
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(a, ls));
            }
        }
        for (int j = 0; j < mt; j++) acc[j] = tail16(acc[j], w->d, NULL, xb[j]->d, isum[j], _mm512_setzero_si512());
    }
}

static ALWAYS_INLINE void rows_t(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                 __m512 acc[MT], const int t, int pf) {
    if (t == KQ3) q3_rows(wg, nb, x, xs, mt, acc, pf);
    else if (t == KQ2) q2_rows(wg, nb, x, xs, mt, acc, pf);
    else iq4_rows(wg, nb, x, xs, mt, acc, pf);
}

/* one 16-row group against activation rows [j0, j0 + mt) */
static ALWAYS_INLINE void group16(const er_matmul_args *a, const void *wg, int nb, int j0, int r, const int mt,
                                  const int t) {
    __m512 acc[MT];
    for (int j = 0; j < MT; j++) acc[j] = _mm512_setzero_ps();
    /* only the first tile of activation rows reads the group from memory */
    rows_t(wg, nb, (const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, acc, t, j0 == 0);
    for (int j = 0; j < mt; j++) {
        float *y = a->y + (size_t)(j0 + j) * a->y_stride + (size_t)r;
        _mm512_storeu_ps(y, acc[j]);
    }
}
#else
/* ---- AVX2: each 32-byte half of a slot as 8 rows ---- */

/* Activation rows per tile: AVX2's 16 registers hold 4 rows' sums beside
 * the unpacked vectors. */
#define MT 4

static ALWAYS_INLINE __m256i ld(const void *p) { return er_kq8_ld(p); }

static ALWAYS_INLINE __m256 ld_f16x8(const er_f16 *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* A sub-block's sum: maddubs pairs in int16, from off in the low int16 of
 * each lane (see the top comment for why nothing saturates) */
static ALWAYS_INLINE __m256i sub_start(int32_t off) { return _mm256_set1_epi32((int32_t)(uint16_t)off); }
static ALWAYS_INLINE __m256i sub_add(__m256i a, __m256i u, const int8_t *x) {
    return _mm256_add_epi16(a, _mm256_maddubs_epi16(u, er_kq8_bcast4(x)));
}
/* isum + the sub-block's sum times (s, s) */
static ALWAYS_INLINE __m256i sub_end(__m256i isum, __m256i a, __m256i s) {
    return _mm256_add_epi32(isum, _mm256_madd_epi16(a, s));
}
/* (v, v) int16 from an int32 lane v in -32768..32767 */
static ALWAYS_INLINE __m256i scale16(__m256i v) {
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16));
}

/* Q3_K scales of half hf: byte b of o[c] is row 8hf + r's scale 4c + b,
 * less 32 (er_q3k_scales with 32-bit word operations) */
static ALWAYS_INLINE void q3_scales(const blk_q3_kx16 *w, int hf, __m256i o[4]) {
    const __m256i a0 = ld(&w->sc[0][8 * hf]), a1 = ld(&w->sc[1][8 * hf]), a2 = ld(&w->sc[2][8 * hf]);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), k32 = _mm256_set1_epi8(32);
    o[0] = _mm256_or_si256(_mm256_and_si256(a0, m4), _mm256_slli_epi32(_mm256_and_si256(a2, m2), 4));
    o[1] = _mm256_or_si256(_mm256_and_si256(a1, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 2), m2), 4));
    o[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a0, 4), m4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 4), m2), 4));
    o[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a1, 4), m4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 6), m2), 4));
    for (int c = 0; c < 4; c++) o[c] = _mm256_sub_epi8(o[c], k32);
}

/* the 8 code vectors of pair p, half hf: u[4s + g] is group g of
 * sub-block 2p + s (the layout's comment) */
static ALWAYS_INLINE void q3_codes(const blk_q3_kx16 *w, int p, int hf, __m256i u[8]) {
    const __m256i m3 = _mm256_set1_epi8(3), m7 = _mm256_set1_epi8(7), four = _mm256_set1_epi8(4);
    const __m256i qa = ld(w->q[p][0] + 32 * hf), qb = ld(w->q[p][1] + 32 * hf), qc = ld(w->q[p][2] + 32 * hf);
    u[0] = _mm256_and_si256(qa, m7);
    u[1] = _mm256_and_si256(_mm256_srli_epi16(qa, 3), m7);
    u[2] = _mm256_and_si256(qb, m7);
    u[3] = _mm256_and_si256(_mm256_srli_epi16(qb, 3), m7);
    u[4] = _mm256_and_si256(qc, m7);
    u[5] = _mm256_and_si256(_mm256_srli_epi16(qc, 3), m7);
    u[6] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 6), m3), _mm256_and_si256(_mm256_srli_epi16(qc, 4), four));
    u[7] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 6), m3), _mm256_and_si256(_mm256_srli_epi16(qc, 5), four));
}

/* Rows 8hf..8hf + 7 of a 16-row group (hf = hf0 .. hf0 + nh - 1) against
 * mt (1..MT) activation rows over all super-blocks: acc[j][hf] += ...
 * (decode takes both halves in one pass, nh = 2, a prefill tile one) */
static ALWAYS_INLINE void q3_group(const blk_q3_kx16 *wg, int nb, const unsigned char *x, size_t xs, const int hf0,
                                   const int nh, const int mt, __m256 acc[MT][2]) {
    for (int i = 0; i < nb; i++) {
        const blk_q3_kx16 *w = wg + i;
        const er_block_q8_k *xb[MT];
        int32_t off[MT][16];
        __m256i isum[MT][2], o[2][4];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            q3_offsets(xb[j], off[j]);
            isum[j][0] = isum[j][1] = _mm256_setzero_si256();
        }
        for (int hh = 0; hh < nh; hh++) q3_scales(w, hf0 + hh, o[hh]);
        for (int p = 0; p < 8; p++)
            for (int hh = 0; hh < nh; hh++) {
                __m256i u[8];
                q3_codes(w, p, hf0 + hh, u);
                for (int s = 0; s < 2; s++) {
                    const int t = 2 * p + s;
                    const __m256i sv = scale16(_mm256_srai_epi32(_mm256_slli_epi32(o[hh][t / 4], 24 - 8 * (t % 4)), 24));
                    for (int j = 0; j < mt; j++) {
                        const int8_t *xq = xb[j]->qs + 16 * t;
                        __m256i a = sub_start(off[j][t]);
                        for (int g = 0; g < 4; g++) a = sub_add(a, u[4 * s + g], xq + 4 * g);
                        isum[j][hh] = sub_end(isum[j][hh], a, sv);
                    }
                }
            }
        for (int hh = 0; hh < nh; hh++) {
            const int hf = hf0 + hh;
            const __m256 dw = ld_f16x8(w->d + 8 * hf);
            /* generic passes dmin 0 and imin 0: the same statements, the same bits */
            for (int j = 0; j < mt; j++)
                acc[j][hf] = er_kq8_accum(acc[j][hf], dw, _mm256_setzero_ps(), xb[j]->d, isum[j][hh], _mm256_setzero_si256());
        }
    }
}

static ALWAYS_INLINE void q2_group(const blk_q2_kx16 *wg, int nb, const unsigned char *x, size_t xs, const int hf0,
                                   const int nh, const int mt, __m256 acc[MT][2]) {
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi16(0x0f), lo16 = _mm256_set1_epi32(0xffff);
    for (int i = 0; i < nb; i++) {
        const blk_q2_kx16 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m256i isum[MT][2], imin[MT][2];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j][0] = isum[j][1] = imin[j][0] = imin[j][1] = _mm256_setzero_si256();
        }
        for (int p = 0; p < 8; p++)
            for (int hh = 0; hh < nh; hh++) {
                const int hf = hf0 + hh;
                /* lane r: (sc_2p, sc_2p+1) as int16; scales low nibbles, mins high */
                const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w->sc[p] + 16 * hf)));
                const __m256i sc = _mm256_and_si256(v, m4), mn = _mm256_srli_epi16(v, 4);
                for (int j = 0; j < mt; j++) {
                    int32_t bs;
                    memcpy(&bs, xb[j]->bsums + 2 * p, sizeof bs);
                    imin[j][hh] = _mm256_add_epi32(imin[j][hh], _mm256_madd_epi16(mn, _mm256_set1_epi32(bs)));
                }
                for (int s = 0; s < 2; s++) {
                    const int t = 2 * p + s;
                    const __m256i q = ld(w->q[t] + 32 * hf);
                    __m256i u[4];
                    for (int g = 0; g < 4; g++) u[g] = _mm256_and_si256(g ? _mm256_srli_epi16(q, 2 * g) : q, m3);
                    const __m256i sv = scale16(s ? _mm256_srli_epi32(sc, 16) : _mm256_and_si256(sc, lo16));
                    for (int j = 0; j < mt; j++) {
                        const int8_t *xq = xb[j]->qs + 16 * t;
                        __m256i a = sub_start(0);
                        for (int g = 0; g < 4; g++) a = sub_add(a, u[g], xq + 4 * g);
                        isum[j][hh] = sub_end(isum[j][hh], a, sv);
                    }
                }
            }
        for (int hh = 0; hh < nh; hh++) {
            const int hf = hf0 + hh;
            const __m256 dw = ld_f16x8(w->d + 8 * hf), dmw = ld_f16x8(w->dmin + 8 * hf);
            for (int j = 0; j < mt; j++) acc[j][hf] = er_kq8_accum(acc[j][hf], dw, dmw, xb[j]->d, isum[j][hh], imin[j][hh]);
        }
    }
}

static ALWAYS_INLINE void iq4_group(const blk_iq4_xsx16 *wg, int nb, const unsigned char *x, size_t xs, const int hf0,
                                    const int nh, const int mt, __m256 acc[MT][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values));
    for (int i = 0; i < nb; i++) {
        const blk_iq4_xsx16 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m256i isum[MT][2];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j][0] = isum[j][1] = _mm256_setzero_si256();
        }
        for (int sb = 0; sb < 8; sb++)
            for (int hh = 0; hh < nh; hh++) {
                const int hf = hf0 + hh;
                const __m256i sl = ld(w->sl[8 * hf]);
                const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(w->sh + 8 * hf)));
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sl, 4 * sb), _mm256_set1_epi32(0x0f));
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * sb), _mm256_set1_epi32(0x03));
                const __m256i sv = scale16(_mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)));
                for (int k = 0; k < 8; k++) {
                    const __m256i q = ld(w->q[sb][k % 4] + 32 * hf);
                    const __m256i v = _mm256_shuffle_epi8(grid, _mm256_and_si256(k < 4 ? q : _mm256_srli_epi16(q, 4), m4));
                    const __m256i av = _mm256_sign_epi8(v, v);
                    /* |grid| times x with grid's sign: |pair| <= 2 * 127 * 127, one madd each */
                    for (int j = 0; j < mt; j++) {
                        const int8_t *xq = xb[j]->qs + 32 * sb + 16 * (k / 4) + 4 * (k % 4);
                        const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(er_kq8_bcast4(xq), v));
                        isum[j][hh] = _mm256_add_epi32(isum[j][hh], _mm256_madd_epi16(p, sv));
                    }
                }
            }
        for (int hh = 0; hh < nh; hh++) {
            const int hf = hf0 + hh;
            const __m256 dw = ld_f16x8(w->d + 8 * hf);
            for (int j = 0; j < mt; j++)
                acc[j][hf] = er_kq8_accum(acc[j][hf], dw, _mm256_setzero_ps(), xb[j]->d, isum[j][hh], _mm256_setzero_si256());
        }
    }
}

static ALWAYS_INLINE void rows_half(const void *wg, int nb, const unsigned char *x, size_t xs, const int hf0,
                                    const int nh, const int mt, __m256 acc[MT][2], const int t) {
    if (t == KQ3) q3_group(wg, nb, x, xs, hf0, nh, mt, acc);
    else if (t == KQ2) q2_group(wg, nb, x, xs, hf0, nh, mt, acc);
    else iq4_group(wg, nb, x, xs, hf0, nh, mt, acc);
}

static ALWAYS_INLINE void group16(const er_matmul_args *a, const void *wg, int nb, int j0, int r, const int mt,
                                  const int t) {
    __m256 acc[MT][2];
    for (int j = 0; j < MT; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    const unsigned char *x = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
    if (mt == 1) {
        rows_half(wg, nb, x, a->x_stride, 0, 2, 1, acc, t);
    } else {
        rows_half(wg, nb, x, a->x_stride, 0, 1, mt, acc, t);
        rows_half(wg, nb, x, a->x_stride, 1, 1, mt, acc, t);
    }
    for (int j = 0; j < mt; j++) {
        float *y = a->y + (size_t)(j0 + j) * a->y_stride + (size_t)r;
        _mm256_storeu_ps(y, acc[j][0]);
        _mm256_storeu_ps(y + 8, acc[j][1]);
    }
}
#endif

/* ---- the matmuls ---- */

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 16 (forward.c chunks by repack_rows). Row groups of about 64 KiB are read
 * once from memory and from L2 for every further tile of activation rows. */
static ALWAYS_INLINE void matmul_x16(const er_matmul_args *a, const size_t rec, const int t) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * rec;
    const int chunk = er_kq8_row_chunk(group_bytes, 16);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            for (int r = c0; r < c1; r += 16) {
                const void *wg = (const unsigned char *)a->w + (size_t)(r / 16) * group_bytes;
                /* one call per tile height, so each inlined copy keeps its
                 * accumulators in registers */
                switch (mt) {
                case 1: group16(a, wg, nb, j0, r, 1, t); break;
                case 2: group16(a, wg, nb, j0, r, 2, t); break;
                case 3: group16(a, wg, nb, j0, r, 3, t); break;
#if MT > 4
                case 4: group16(a, wg, nb, j0, r, 4, t); break;
                case 5: group16(a, wg, nb, j0, r, 5, t); break;
#endif
#if MT > 6
                case 6: group16(a, wg, nb, j0, r, 6, t); break;
                case 7: group16(a, wg, nb, j0, r, 7, t); break;
#endif
                default: group16(a, wg, nb, j0, r, MT, t); break;
                }
            }
        }
    }
}

void ER_X86_FN(matmul_q3_kx16)(const er_matmul_args *a) { matmul_x16(a, sizeof(blk_q3_kx16), KQ3); }
void ER_X86_FN(matmul_q2_kx16)(const er_matmul_args *a) { matmul_x16(a, sizeof(blk_q2_kx16), KQ2); }
void ER_X86_FN(matmul_iq4_xsx16)(const er_matmul_args *a) { matmul_x16(a, sizeof(blk_iq4_xsx16), IQ4XS); }
