/*
 * repack_qk23_avx2.c — Q3_K, Q2_K and IQ4_XS matrices in 8-row interleaved
 * super-blocks, AVX2 (and, compiled again, AVX-512VL VNNI).
 *
 * Each layout record holds super-block i of 8 weight rows, the same bytes
 * as the file's 8 blocks, regrouped at open (er_avx2_repack_*). A 32-byte
 * vector holds 4 consecutive elements of each of the 8 rows (row r in
 * 32-bit lane r), so 4 activation bytes broadcast to every lane meet all 8
 * rows at once and each lane's int32 sum is one row's: no horizontal sum,
 * one float tail for 8 rows, per-row scales as one vector per sub-block.
 *
 *  Q3_K (880 bytes): f16 d[8]; u32 sc[3][8] (word k of row r's 12 packed
 *   scale bytes); then per pair p of sub-blocks (of 16): h[32], l[2][32].
 *   Byte 4r + k of l[s] holds in bits 2i..2i+1 the low bits of element
 *   16t + 4i + k (t = 2p + s), byte 4r + k of h in bit 4s + i its hmask bit.
 *  Q2_K (672 bytes): f16 d[8], dmin[8]; u8 sc[8][8][2] (pair p, row r:
 *   the scale bytes of sub-blocks 2p, 2p + 1); u8 q[16][32] as Q3_K's l.
 *  IQ4_XS (1088 bytes): f16 d[8]; u16 sh[8]; u8 sl[8][4]; u8 q[8][4][32]:
 *   byte 4r + k of q[j][v] is the file's qs[16j + 4v + k] of row r (low
 *   nibble element 32j + 4v + k, high nibble element 32j + 16 + 4v + k).
 *
 * Arithmetic, per row and super-block, the integers generic computes:
 *  Q3_K: the codes multiply unsigned (q + 4, 0..7), each sub-block's sum
 *   starts at -4 bsum_t, and is then multiplied by its signed scale;
 *  Q2_K: codes 0..3 times the scale per sub-block, imin by madd of the
 *   (min, min) pairs with the bsum pairs;
 *  IQ4_XS: the avx512vnni build takes the grid + 128 (1..241, unsigned) and
 *   starts each sub-block at -128 (bsum pair); the AVX2 build, whose maddubs
 *   would saturate on that, multiplies |grid| by x with grid's sign.
 * In the VNNI build a sub-block's sum is a VPDPBUSD chain (the activation
 * broadcast embedded in the instruction) times its scale by VPMULLD; AVX2
 * sums maddubs pairs in int16 (|sum| <= 4 * 2 * 7 * 127 + 4 * 2032 for
 * Q3_K, no saturation) and applies the scale with one madd. All exact, so
 * with kq_x8_avx2.h's float tail, lane by lane and super-block by
 * super-block in order, the results are bit-identical to generic.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[8];
    uint32_t sc[3][8];
    struct {
        uint8_t h[32];
        uint8_t l[2][32];
    } p[8];
} blk_q3_kx8;

typedef struct {
    er_f16 d[8], dmin[8];
    uint8_t sc[8][16];
    uint8_t q[16][32];
} blk_q2_kx8;

typedef struct {
    er_f16 d[8];
    uint16_t sh[8];
    uint8_t sl[8][4];
    uint8_t q[8][4][32];
} blk_iq4_xsx8;

_Static_assert(sizeof(blk_q3_kx8) == 8 * sizeof(er_block_q3_k), "Q3_Kx8 must take 8 blocks' bytes");
_Static_assert(sizeof(blk_q2_kx8) == 8 * sizeof(er_block_q2_k), "Q2_Kx8 must take 8 blocks' bytes");
_Static_assert(sizeof(blk_iq4_xsx8) == 8 * sizeof(er_block_iq4_xs), "IQ4_XSx8 must take 8 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

/* once, in the AVX2 build: the avx512vnni table shares the layouts */
#if !ER_X86_VNNI

/* A file block's 256 two-bit codes (Q2_K, Q3_K) in element order. */
static void low2_codes(const uint8_t qs[64], uint8_t q[ER_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = (uint8_t)((qs[32 * h + l] >> (2 * j)) & 3);
}

/* Codes q (element order, 2 bits) into 16 vectors of 32 bytes: byte 4r + k
 * of vector t holds element 16t + 4g + k in bits 2g. */
static void pack_low2(const uint8_t q[ER_QK_K], int r, uint8_t *out, size_t vec_stride) {
    for (int t = 0; t < 16; t++)
        for (int k = 0; k < 4; k++) {
            const uint8_t *e = q + 16 * t + k;
            out[(size_t)t * vec_stride + (size_t)(4 * r + k)] = (uint8_t)(e[0] | e[4] << 2 | e[8] << 4 | e[12] << 6);
        }
}

static const void *src_block(const void *src, size_t row_bytes, int row, size_t bs, int i) {
    return (const uint8_t *)src + (size_t)row * row_bytes + (size_t)i * bs;
}

void er_avx2_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q3_kx8 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 8; r++) {
                const er_block_q3_k *in = src_block(src, row_bytes, 8 * g8 + r, sizeof *in, i);
                memcpy(&out->d[r], &in->d, sizeof in->d);
                for (int k = 0; k < 3; k++) memcpy(&out->sc[k][r], in->scales + 4 * k, 4);
                low2_codes(in->qs, q);
                for (int t = 0; t < 16; t++)
                    for (int k = 0; k < 4; k++) {
                        const uint8_t *e = q + 16 * t + k;
                        out->p[t / 2].l[t % 2][4 * r + k] = (uint8_t)(e[0] | e[4] << 2 | e[8] << 4 | e[12] << 6);
                    }
                /* hmask bit of element e: bit e / 32 of hmask[e % 32] */
                for (int p = 0; p < 8; p++)
                    for (int k = 0; k < 4; k++) {
                        uint8_t hb = 0;
                        for (int b = 0; b < 8; b++) {
                            const int e = 32 * p + 16 * (b / 4) + 4 * (b % 4) + k;
                            hb |= (uint8_t)(((in->hmask[e % 32] >> (e / 32)) & 1) << b);
                        }
                        out->p[p].h[4 * r + k] = hb;
                    }
            }
}

void er_avx2_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q2_kx8 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 8; r++) {
                const er_block_q2_k *in = src_block(src, row_bytes, 8 * g8 + r, sizeof *in, i);
                memcpy(&out->d[r], &in->d, sizeof in->d);
                memcpy(&out->dmin[r], &in->dmin, sizeof in->dmin);
                for (int t = 0; t < 16; t++) out->sc[t / 2][2 * r + t % 2] = in->scales[t];
                low2_codes(in->qs, q);
                pack_low2(q, r, &out->q[0][0], 32);
            }
}

void er_avx2_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_iq4_xsx8 *out = dst;
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 8; r++) {
                const er_block_iq4_xs *in = src_block(src, row_bytes, 8 * g8 + r, sizeof *in, i);
                memcpy(&out->d[r], &in->d, sizeof in->d);
                memcpy(&out->sh[r], &in->scales_h, sizeof in->scales_h);
                memcpy(out->sl[r], in->scales_l, 4);
                for (int j = 0; j < 8; j++)
                    for (int v = 0; v < 4; v++) memcpy(&out->q[j][v][4 * r], in->qs + 16 * j + 4 * v, 4);
            }
}
#endif

/* ---- kernels ---------------------------------------------------------------- */

/* A sub-block's multiplier for 8 rows: int32 per lane for VPMULLD (VNNI),
 * (s, s) int16 pairs for madd (AVX2). */
typedef __m256i scale_v;

static ALWAYS_INLINE __m256i ld(const void *p) { return er_kq8_ld(p); }

#if ER_X86_VNNI
/* acc of one sub-block: VPDPBUSD chain */
typedef __m256i sub_acc;
static ALWAYS_INLINE sub_acc sub_start(int32_t off) { return _mm256_set1_epi32(off); }
static ALWAYS_INLINE sub_acc sub_add(sub_acc a, __m256i u, const int8_t *x) { return er_x86_dpbusd_bcast4(a, u, x); }
static ALWAYS_INLINE __m256i sub_end(__m256i isum, sub_acc a, scale_v s) {
    return _mm256_add_epi32(isum, _mm256_mullo_epi32(a, s));
}
/* the int32 scale from a dword lane's sign-extended ... value t (any width) */
static ALWAYS_INLINE scale_v scale_from_i32(__m256i v) { return v; }
#else
/* int16 pairs, summed without saturation (see the top comment) */
typedef __m256i sub_acc;
static ALWAYS_INLINE sub_acc sub_start(int32_t off) { return _mm256_set1_epi32((int32_t)(uint16_t)off); }
static ALWAYS_INLINE sub_acc sub_add(sub_acc a, __m256i u, const int8_t *x) {
    return _mm256_add_epi16(a, _mm256_maddubs_epi16(u, er_kq8_bcast4(x)));
}
static ALWAYS_INLINE __m256i sub_end(__m256i isum, sub_acc a, scale_v s) {
    return _mm256_add_epi32(isum, _mm256_madd_epi16(a, s));
}
/* (v, v) int16 from an int32 lane v in -32768..32767 */
static ALWAYS_INLINE scale_v scale_from_i32(__m256i v) {
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16));
}
#endif

/* Activation rows per tile: the VNNI build's 32 registers hold 8 rows'
 * sums beside the unpacked vectors, AVX2's 16 hold 4. */
#if ER_X86_VNNI
#define MT 8
#else
#define MT 4
#endif

/* ---- Q3_K ---- */

/* The four vectors of a record's scales (after er_q3k_scales): lane r,
 * byte b of o[c] is row r's scale 4c + b, less 32 (signed). */
static ALWAYS_INLINE void q3_scales(const blk_q3_kx8 *w, __m256i o[4]) {
    const __m256i a0 = ld(w->sc[0]), a1 = ld(w->sc[1]), a2 = ld(w->sc[2]);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), k32 = _mm256_set1_epi8(32);
    o[0] = _mm256_or_si256(_mm256_and_si256(a0, m4), _mm256_slli_epi32(_mm256_and_si256(a2, m2), 4));
    o[1] = _mm256_or_si256(_mm256_and_si256(a1, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 2), m2), 4));
    o[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a0, 4), m4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 4), m2), 4));
    o[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a1, 4), m4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 6), m2), 4));
    for (int c = 0; c < 4; c++) o[c] = _mm256_sub_epi8(o[c], k32);
}

/* sub-block t's scale, from byte t % 4 of o[t / 4], sign-extended */
static ALWAYS_INLINE scale_v q3_scale(const __m256i o[4], const int t) {
    const int b = t % 4;
    return scale_from_i32(_mm256_srai_epi32(_mm256_slli_epi32(o[t / 4], 24 - 8 * b), 24));
}

/* group g (0..3) of sub-block t's codes q + 4 (0..7) */
static ALWAYS_INLINE __m256i q3_codes(__m256i l, __m256i h, const int s, const int g) {
    const int b = 4 * s + g;
    const __m256i hs = b >= 2 ? _mm256_srli_epi16(h, b - 2) : _mm256_slli_epi16(h, 2 - b);
    const __m256i lo = g ? _mm256_srli_epi16(l, 2 * g) : l;
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(3)), _mm256_and_si256(hs, _mm256_set1_epi8(4)));
}

/* -4 bsums[t] of an activation super-block, for sub_start */
static ALWAYS_INLINE void q3_offsets(const er_block_q8_k *x, int32_t off[16]) {
    const __m256i b = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)x->bsums));
    const __m256i c = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(x->bsums + 8)));
    _mm256_storeu_si256((__m256i *)(void *)off, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(b, 2)));
    _mm256_storeu_si256((__m256i *)(void *)(off + 8), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 2)));
}

/* One group of 8 weight rows against mt (1..MT) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void q3_group(const blk_q3_kx8 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                   __m256 acc[MT]) {
    for (int i = 0; i < nb; i++) {
        const blk_q3_kx8 *w = wg + i;
        const er_block_q8_k *xb[MT];
        int32_t off[MT][16];
        __m256i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            q3_offsets(xb[j], off[j]);
            isum[j] = _mm256_setzero_si256();
        }
        __m256i o[4];
        q3_scales(w, o);
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            const __m256i h = ld(w->p[p].h);
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * p + s;
                const __m256i l = ld(w->p[p].l[s]);
                __m256i u[4];
                for (int g = 0; g < 4; g++) u[g] = q3_codes(l, h, s, g);
                const scale_v sv = q3_scale(o, t);
                for (int j = 0; j < mt; j++) {
                    const int8_t *xq = xb[j]->qs + 16 * t;
                    sub_acc a = sub_start(off[j][t]);
                    for (int g = 0; g < 4; g++) a = sub_add(a, u[g], xq + 4 * g);
                    isum[j] = sub_end(isum[j], a, sv);
                }
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        /* generic passes dmin 0 and imin 0: the same statements, the same bits */
        for (int j = 0; j < mt; j++)
            acc[j] = er_kq8_accum(acc[j], dw, _mm256_setzero_ps(), xb[j]->d, isum[j], _mm256_setzero_si256());
    }
}

/* ---- Q2_K ---- */

static ALWAYS_INLINE void q2_group(const blk_q2_kx8 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                   __m256 acc[MT]) {
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi16(0x0f);
    for (int i = 0; i < nb; i++) {
        const blk_q2_kx8 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m256i isum[MT], imin[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = imin[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            /* lane r: (sc_2p, sc_2p+1) as int16 */
            const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)w->sc[p]));
            const __m256i sc = _mm256_and_si256(v, m4), mn = _mm256_srli_epi16(v, 4);
            for (int j = 0; j < mt; j++) {
                int32_t bs;
                memcpy(&bs, xb[j]->bsums + 2 * p, sizeof bs);
                imin[j] = _mm256_add_epi32(imin[j], _mm256_madd_epi16(mn, _mm256_set1_epi32(bs)));
            }
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * p + s;
                const __m256i q = ld(w->q[t]);
                __m256i u[4];
                for (int g = 0; g < 4; g++) u[g] = _mm256_and_si256(g ? _mm256_srli_epi16(q, 2 * g) : q, m3);
                const scale_v sv = scale_from_i32(s ? _mm256_srli_epi32(sc, 16) : _mm256_and_si256(sc, _mm256_set1_epi32(0xffff)));
                for (int j = 0; j < mt; j++) {
                    const int8_t *xq = xb[j]->qs + 16 * t;
                    sub_acc a = sub_start(0);
                    for (int g = 0; g < 4; g++) a = sub_add(a, u[g], xq + 4 * g);
                    isum[j] = sub_end(isum[j], a, sv);
                }
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->dmin));
        for (int j = 0; j < mt; j++) acc[j] = er_kq8_accum(acc[j], dw, dmw, xb[j]->d, isum[j], imin[j]);
    }
}

/* ---- IQ4_XS ---- */

#if ER_X86_VNNI
/* the grid + 128: unsigned for VPDPBUSD */
static ALWAYS_INLINE __m256i iq4_grid(void) {
    const __m128i g = _mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values);
    return _mm256_broadcastsi128_si256(_mm_xor_si128(g, _mm_set1_epi8((char)0x80)));
}
#endif

static ALWAYS_INLINE void iq4_group(const blk_iq4_xsx8 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                    __m256 acc[MT]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
#if ER_X86_VNNI
    const __m256i grid = iq4_grid();
#else
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values));
#endif
    for (int i = 0; i < nb; i++) {
        const blk_iq4_xsx8 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m256i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = _mm256_setzero_si256();
        }
        const __m256i sl = ld(w->sl);
        const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)w->sh));
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            /* ls - 32 per lane, int32 */
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sl, 4 * sb), _mm256_set1_epi32(0x0f));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * sb), _mm256_set1_epi32(0x03));
            const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
            const scale_v sv = scale_from_i32(ls);
            __m256i v[8];
            for (int k = 0; k < 4; k++) {
                const __m256i q = ld(w->q[sb][k]);
                v[k] = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, m4));
                v[k + 4] = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            }
#if ER_X86_VNNI
            for (int j = 0; j < mt; j++) {
                const int8_t *xq = xb[j]->qs + 32 * sb;
                /* -128 times the sub-block's activation sum: the offset of the grid + 128 */
                sub_acc a = sub_start(-128 * ((int32_t)xb[j]->bsums[2 * sb] + xb[j]->bsums[2 * sb + 1]));
                for (int k = 0; k < 8; k++) a = sub_add(a, v[k], xq + 4 * k);
                isum[j] = sub_end(isum[j], a, sv);
            }
#else
            __m256i av[8];
            for (int k = 0; k < 8; k++) av[k] = _mm256_sign_epi8(v[k], v[k]);
            for (int j = 0; j < mt; j++) {
                const int8_t *xq = xb[j]->qs + 32 * sb;
                for (int k = 0; k < 8; k++) {
                    const __m256i p = _mm256_maddubs_epi16(av[k], _mm256_sign_epi8(er_kq8_bcast4(xq + 4 * k), v[k]));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, sv));
                }
            }
#endif
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        for (int j = 0; j < mt; j++)
            acc[j] = er_kq8_accum(acc[j], dw, _mm256_setzero_ps(), xb[j]->d, isum[j], _mm256_setzero_si256());
    }
}

enum { KQ3, KQ2, IQ4XS };

#if ER_X86_VNNI
/* ---- decode, two row groups per 512-bit vector (VNNI build) ----
 * One activation row against groups g and g + 1: each vector joins the
 * two records' 32-byte halves (rows 0-7 low, rows 8-15 high), so every
 * unpacking step, VPDPBUSD and scale multiply covers 16 rows: half the
 * instructions per weight byte of the 8-row path, which at m = 1 runs
 * below the memory's read rate. The integer steps are the 8-row path's,
 * lane by lane; each half's float tail is kq_x8_avx2.h's, so the bits are
 * the same. */

static ALWAYS_INLINE __m512i ld2(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(ld(a)), ld(b), 1);
}

/* Software prefetch of what the pair will read PF records on, in each of
 * its two streams: past the end of a group, the next pair's same group
 * (two groups on). Without it, from memory, the two interleaved streams
 * ran at ~7 GB/s where one 8-row stream ran at ~20: the hardware
 * prefetchers did not follow them. */
enum { PF = 4 };
static ALWAYS_INLINE void prefetch2(const unsigned char *a, const unsigned char *b, int i, int nb, size_t rec) {
    const int j = i + PF;
    const size_t o = j < nb ? (size_t)j * rec : 2 * (size_t)nb * rec + (size_t)(j - nb) * rec;
    for (size_t c = 0; c < rec; c += 64) {
        _mm_prefetch((const char *)(a + o + c), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + o + c), _MM_HINT_T0);
    }
}

static ALWAYS_INLINE void tail2(__m256 acc[2], const er_f16 *d0, const er_f16 *d1, const er_f16 *m0,
                                const er_f16 *m1, float dx, __m512i isum, __m512i imin) {
    const __m256 z = _mm256_setzero_ps();
    const __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)d0));
    const __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)d1));
    const __m256 dm0 = m0 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)m0)) : z;
    const __m256 dm1 = m1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)m1)) : z;
    acc[0] = er_kq8_accum(acc[0], dw0, dm0, dx, _mm512_castsi512_si256(isum), _mm512_castsi512_si256(imin));
    acc[1] = er_kq8_accum(acc[1], dw1, dm1, dx, _mm512_extracti64x4_epi64(isum, 1), _mm512_extracti64x4_epi64(imin, 1));
}

static void q3_pair(const blk_q3_kx8 *wa, const blk_q3_kx8 *wb, int nb, const er_block_q8_k *x, __m256 acc[2]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03), k32 = _mm512_set1_epi8(32);
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    for (int i = 0; i < nb; i++) {
        const blk_q3_kx8 *a = wa + i, *b = wb + i;
        const er_block_q8_k *xb = x + i;
        prefetch2((const unsigned char *)wa, (const unsigned char *)wb, i, nb, sizeof *a);
        int32_t off[16];
        q3_offsets(xb, off);
        const __m512i a0 = ld2(a->sc[0], b->sc[0]), a1 = ld2(a->sc[1], b->sc[1]), a2 = ld2(a->sc[2], b->sc[2]);
        __m512i o[4];
        o[0] = _mm512_or_si512(_mm512_and_si512(a0, m4), _mm512_slli_epi32(_mm512_and_si512(a2, m2), 4));
        o[1] = _mm512_or_si512(_mm512_and_si512(a1, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 2), m2), 4));
        o[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), m4),
                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m2), 4));
        o[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), m4),
                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 6), m2), 4));
        for (int c = 0; c < 4; c++) o[c] = _mm512_sub_epi8(o[c], k32);
        __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            const __m512i h = ld2(a->p[p].h, b->p[p].h);
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * p + s;
                const __m512i l = ld2(a->p[p].l[s], b->p[p].l[s]);
                __m512i acc_t = _mm512_set1_epi32(off[t]);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    const int bit = 4 * s + g;
                    const __m512i hs = bit >= 2 ? _mm512_srli_epi16(h, (unsigned)(bit - 2)) : _mm512_slli_epi16(h, (unsigned)(2 - bit));
                    const __m512i lo = g ? _mm512_srli_epi16(l, (unsigned)(2 * g)) : l;
                    /* (lo & 3) | (hs & 4) */
                    const __m512i u = _mm512_ternarylogic_epi32(lo, m3, _mm512_and_si512(hs, four), 0xEA);
                    acc_t = er_x86_dpbusd512_bcast4(acc_t, u, xb->qs + 16 * t + 4 * g);
                }
                const __m512i sv = _mm512_srai_epi32(_mm512_slli_epi32(o[t / 4], (unsigned)(24 - 8 * (t % 4))), 24);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(acc_t, sv));
            }
        }
        tail2(acc, a->d, b->d, NULL, NULL, xb->d, isum, _mm512_setzero_si512());
    }
}

static void q2_pair(const blk_q2_kx8 *wa, const blk_q2_kx8 *wb, int nb, const er_block_q8_k *x, __m256 acc[2]) {
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi16(0x0f), lo16 = _mm512_set1_epi32(0xffff);
    for (int i = 0; i < nb; i++) {
        const blk_q2_kx8 *a = wa + i, *b = wb + i;
        const er_block_q8_k *xb = x + i;
        prefetch2((const unsigned char *)wa, (const unsigned char *)wb, i, nb, sizeof *a);
        __m512i isum = _mm512_setzero_si512(), imin = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            const __m512i v = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a->sc[p])),
                _mm_loadu_si128((const __m128i *)(const void *)b->sc[p]), 1));
            const __m512i sc = _mm512_and_si512(v, m4);
            int32_t bs;
            memcpy(&bs, xb->bsums + 2 * p, sizeof bs);
            imin = _mm512_add_epi32(imin, _mm512_madd_epi16(_mm512_srli_epi16(v, 4), _mm512_set1_epi32(bs)));
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * p + s;
                const __m512i q = ld2(a->q[t], b->q[t]);
                __m512i acc_t = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++)
                    acc_t = er_x86_dpbusd512_bcast4(acc_t, _mm512_and_si512(g ? _mm512_srli_epi16(q, (unsigned)(2 * g)) : q, m3),
                                                    xb->qs + 16 * t + 4 * g);
                const __m512i sv = s ? _mm512_srli_epi32(sc, 16) : _mm512_and_si512(sc, lo16);
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(acc_t, sv));
            }
        }
        tail2(acc, a->d, b->d, a->dmin, b->dmin, xb->d, isum, imin);
    }
}

static void iq4_pair(const blk_iq4_xsx8 *wa, const blk_iq4_xsx8 *wb, int nb, const er_block_q8_k *x, __m256 acc[2]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i grid = _mm512_broadcast_i32x4(_mm_xor_si128(
        _mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values), _mm_set1_epi8((char)0x80)));
    for (int i = 0; i < nb; i++) {
        const blk_iq4_xsx8 *a = wa + i, *b = wb + i;
        const er_block_q8_k *xb = x + i;
        prefetch2((const unsigned char *)wa, (const unsigned char *)wb, i, nb, sizeof *a);
        const __m512i sl = ld2(a->sl, b->sl);
        const __m512i sh = _mm512_cvtepu16_epi32(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a->sh)),
            _mm_loadu_si128((const __m128i *)(const void *)b->sh), 1));
        __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, (unsigned)(4 * sb)), _mm512_set1_epi32(0x0f));
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, (unsigned)(2 * sb)), _mm512_set1_epi32(0x03));
            const __m512i ls = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
            const int8_t *xq = xb->qs + 32 * sb;
            __m512i acc_t = _mm512_set1_epi32(-128 * ((int32_t)xb->bsums[2 * sb] + xb->bsums[2 * sb + 1]));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i q = ld2(a->q[sb][k], b->q[sb][k]);
                acc_t = er_x86_dpbusd512_bcast4(acc_t, _mm512_shuffle_epi8(grid, _mm512_and_si512(q, m4)), xq + 4 * k);
                acc_t = er_x86_dpbusd512_bcast4(acc_t, _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)),
                                                xq + 16 + 4 * k);
            }
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(acc_t, ls));
        }
        tail2(acc, a->d, b->d, NULL, NULL, xb->d, isum, _mm512_setzero_si512());
    }
}

static ALWAYS_INLINE void pair_t(const void *wa, const void *wb, int nb, const er_block_q8_k *x, __m256 acc[2],
                                 const int t) {
    if (t == KQ3) q3_pair(wa, wb, nb, x, acc);
    else if (t == KQ2) q2_pair(wa, wb, nb, x, acc);
    else iq4_pair(wa, wb, nb, x, acc);
}
#endif

/* ---- the matmuls ---- */

static ALWAYS_INLINE void group_t(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                  __m256 acc[MT], const int t) {
    if (t == KQ3) q3_group(wg, nb, x, xs, mt, acc);
    else if (t == KQ2) q2_group(wg, nb, x, xs, mt, acc);
    else iq4_group(wg, nb, x, xs, mt, acc);
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 8 (forward.c chunks so). Row groups of about 64 KiB are read once from
 * memory and from L2 for every further tile of activation rows. */
static ALWAYS_INLINE void matmul_x8_256(const er_matmul_args *a, const size_t rec, const int t) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * rec;
    const int chunk = er_kq8_row_chunk(group_bytes);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += 8) {
                const void *wg = (const unsigned char *)a->w + (size_t)(r / 8) * group_bytes;
                float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                __m256 acc[MT];
                for (int j = 0; j < MT; j++) acc[j] = _mm256_setzero_ps();
                /* one call per tile height, so each inlined copy keeps its
                 * accumulators in registers */
                switch (mt) {
                case 1: group_t(wg, nb, xj, a->x_stride, 1, acc, t); break;
                case 2: group_t(wg, nb, xj, a->x_stride, 2, acc, t); break;
                case 3: group_t(wg, nb, xj, a->x_stride, 3, acc, t); break;
#if MT > 4
                case 4: group_t(wg, nb, xj, a->x_stride, 4, acc, t); break;
                case 5: group_t(wg, nb, xj, a->x_stride, 5, acc, t); break;
                case 6: group_t(wg, nb, xj, a->x_stride, 6, acc, t); break;
                case 7: group_t(wg, nb, xj, a->x_stride, 7, acc, t); break;
#endif
                default: group_t(wg, nb, xj, a->x_stride, MT, acc, t); break;
                }
                for (int j = 0; j < mt; j++) _mm256_storeu_ps(y + (size_t)j * a->y_stride, acc[j]);
            }
        }
    }
}

static ALWAYS_INLINE void matmul_x8(const er_matmul_args *a, const size_t rec, const int t) {
#if ER_X86_VNNI
    if (a->m == 1) {
        const int nb = a->n / ER_QK_K;
        const size_t group_bytes = (size_t)nb * rec;
        int r = a->r0;
        for (; r + 16 <= a->r1; r += 16) {
            const unsigned char *wg = (const unsigned char *)a->w + (size_t)(r / 8) * group_bytes;
            __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
            pair_t(wg, wg + group_bytes, nb, a->x, acc, t);
            _mm256_storeu_ps(a->y + r, acc[0]);
            _mm256_storeu_ps(a->y + r + 8, acc[1]);
        }
        if (r == a->r1) return;
        er_matmul_args rest = *a;
        rest.r0 = r;
        matmul_x8_256(&rest, rec, t);
        return;
    }
#endif
    matmul_x8_256(a, rec, t);
}

void ER_X86_FN(matmul_q3_kx8)(const er_matmul_args *a) { matmul_x8(a, sizeof(blk_q3_kx8), KQ3); }
void ER_X86_FN(matmul_q2_kx8)(const er_matmul_args *a) { matmul_x8(a, sizeof(blk_q2_kx8), KQ2); }
void ER_X86_FN(matmul_iq4_xsx8)(const er_matmul_args *a) { matmul_x8(a, sizeof(blk_iq4_xsx8), IQ4XS); }
