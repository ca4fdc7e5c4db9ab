/*
 * repack_neon.h — the Arm 4-row interleaved weight layouts (internal), shared
 * by the "neon", "neon-dotprod" and "neon-i8mm" tables.
 *
 * One layout per type for all three tables (repack_rows = 4, the same bytes
 * as the file's 4 rows; written at open by er_neon_repack_*): for each group
 * of 4 weight rows and each block index, one record in which a 16-byte load
 * gives 4 consecutive bytes of each of the 4 rows, row r in 32-bit lane r.
 * That is what SDOT by element (vdotq_laneq_s32) wants: the activation's 16
 * bytes are loaded once and lane l of them meets every row, so the 4 rows'
 * sums come out in the 4 lanes with no horizontal sum. SMMLA wants 8 bytes
 * of 2 rows instead; one vzip1q_s32/vzip2q_s32 of two neighbouring groups
 * makes that, which costs less than a second layout (and a second decode
 * kernel) for the i8mm table.
 *
 *   Q8_0x4  { f16 d[4]; int8 q[8][4][4] }      q[g][r]: row r's qs[4g..4g+3]
 *   Q4_0x4  { f16 d[4]; u8 q[4][4][4] }        q[c][r]: row r's qs[4c..4c+3]
 *           (low nibbles: elements 4c.., high nibbles: elements 16+4c..)
 *   IQ4_NLx4  Q4_0x4's bytes (the nibbles index the grid instead of q - 8)
 *   Q4_1x4  { f16 d[4]; f16 m[4]; u8 q[4][4][4] }
 *   Q5_0x4  { f16 d[4]; u8 h[4][4]; u8 q[4][4][4] }
 *   Q5_1x4  { f16 d[4]; f16 m[4]; u8 h[4][4]; u8 q[4][4][4] }
 *           q as Q4_0x4's; h[r]: row r's qh regrouped (q5_regroup.h), so
 *           chunk c's fifth bits sit in the bytes of its nibbles. These
 *           four are what llama.cpp's K-quant mixes fall back to on rows
 *           that are not a multiple of 256 (issue 25); their kernels end
 *           each block with generic's float tail lane by lane, so they
 *           return generic's bits (repack_q_neon.c).
 *   Q4_Kx4  { f16 d[4], dmin[4]; u8 sl[32]; u8 sh[16]; u8 qs[4][8][4][4] }
 *           qs[c][g][r]: row r's qs[32c+4g..+3] (low nibbles: sub-block 2c,
 *           high: 2c+1, elements 4g..); sl[4j+r] = sc_j & 15 | (mn_j & 15) << 4
 *           for row r, sub-block j; sh[4jj+r] the top two bits of sc_jj (bits
 *           0-1), mn_jj (2-3), sc_jj+4 (4-5), mn_jj+4 (6-7). The 6-bit
 *           scales are re-encoded, not permuted: a few vector ops per record
 *           give all 4 rows' scales, where the file layout needs
 *           er_kq_scale_min's scalar unpacking per row.
 *   Q5_Kx4  { f16 d[4], dmin[4]; u8 sl[32]; u8 sh[16]; u8 qh[4][2][4][4];
 *           u8 qs[4][8][4][4] }
 *           Q4_Kx4's fields (same offsets), and the fifth bits regrouped
 *           per chunk: qh[c][k][r] byte t holds, for g = 4k + gg (gg =
 *           0..3), the bit of element 64c + 4g + t (file qh[4g + t] bit
 *           2c; qs[c][g]'s low nibble) at bit gg and that of 64c + 32 + 4g
 *           + t (bit 2c + 1; the high nibble) at bit 4 + gg. A chunk then
 *           reads only its own 32 bytes of qh (with the file's order all 4
 *           chunks read the same 8 vectors, live across the whole record:
 *           the compiler spilled them), and one AND or shift (two for
 *           some) puts each bit at bit 4 with bits 5-7 clear, where SRI
 *           (high nibbles) or BSL (low) merges it while extracting the
 *           nibble.
 *   Q6_Kx4  { f16 d[4]; i8 sc[16][4]; u8 ql[4][8][4][4]; u8 qh[2][8][4][4] }
 *           sc[j][r]: row r's scales[j], so one load and two widenings give
 *           sub-blocks 2k, 2k+1 of 4 rows as int16 (for vmlal_laneq_s16)
 *           and one more each as int32; ql[k][g][r]: row r's
 *           ql[32k+4g..+3]; qh[h][g][r]: row r's qh[32h+4g..+3], the
 *           file's bytes. Half h's chunk 2h gives elements 128h+4g.. (low
 *           nibbles, qh bits 0-1) and 128h+64+4g.. (high, bits 4-5), chunk
 *           2h+1 128h+32+4g.. (bits 2-3) and 128h+96+4g.. (bits 6-7); the
 *           file's field order already lets one AND or shift of qh or of
 *           qh << 4 make each field clean at bits 4-5 for SRI or BSL.
 */
#ifndef ER_KERNELS_REPACK_NEON_H
#define ER_KERNELS_REPACK_NEON_H

#include "../kernels.h"

typedef struct {
    er_f16 d[4];
    int8_t q[128];
} er_blk_q8_0x4;

typedef struct {
    er_f16 d[4];
    uint8_t q[64];
} er_blk_q4_0x4;

typedef struct {
    er_f16 d[4];
    er_f16 m[4];
    uint8_t q[64];
} er_blk_q4_1x4;

typedef struct {
    er_f16 d[4];
    uint8_t h[16];
    uint8_t q[64];
} er_blk_q5_0x4;

typedef struct {
    er_f16 d[4];
    er_f16 m[4];
    uint8_t h[16];
    uint8_t q[64];
} er_blk_q5_1x4;

typedef struct {
    er_f16 d[4];
    er_f16 dmin[4];
    uint8_t sl[32];
    uint8_t sh[16];
    uint8_t qs[512];
} er_blk_q4_kx4;

typedef struct {
    er_f16 d[4];
    er_f16 dmin[4];
    uint8_t sl[32];
    uint8_t sh[16];
    uint8_t qh[128];
    uint8_t qs[512];
} er_blk_q5_kx4;

typedef struct {
    er_f16 d[4];
    int8_t sc[64];
    uint8_t ql[512];
    uint8_t qh[256];
} er_blk_q6_kx4;

_Static_assert(sizeof(er_blk_q8_0x4) == 4 * sizeof(er_block_q8_0), "Q8_0x4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q4_0x4) == 4 * sizeof(er_block_q4_0), "Q4_0x4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q4_0x4) == 4 * sizeof(er_block_iq4_nl), "IQ4_NLx4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q4_1x4) == 4 * sizeof(er_block_q4_1), "Q4_1x4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q5_0x4) == 4 * sizeof(er_block_q5_0), "Q5_0x4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q5_1x4) == 4 * sizeof(er_block_q5_1), "Q5_1x4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q4_kx4) == 4 * sizeof(er_block_q4_k), "Q4_Kx4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q5_kx4) == 4 * sizeof(er_block_q5_k), "Q5_Kx4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q6_kx4) == 4 * sizeof(er_block_q6_k), "Q6_Kx4 must be 4 blocks' bytes");

/* repack_layout_neon.c (plain C, baseline): each layout for groups of G
 * rows, every [4] above a [G] (the row index r < G), so G = 4 writes the
 * structs here and G = svcntw() the "sve" table's layouts (sve/repack_sve.h);
 * n_out must be a multiple of G. The er_neon_* writers are G = 4. */
void er_arm_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_neon_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);

/* repack_q_neon.c, repack_q4_k_q5_k_neon.c and repack_q6_k_neon.c,
 * compiled twice like q_neon.c:
 * er_neon_* with widening multiplies, er_neondp_* with SDOT */
#define ER_NEON_REPACK_DECL(p)                                                                                     \
    void p##_matmul_q8_0x4(const er_matmul_args *a);                                                               \
    void p##_matmul_q4_0x4(const er_matmul_args *a);                                                               \
    void p##_matmul_iq4_nlx4(const er_matmul_args *a);                                                             \
    void p##_matmul_q4_1x4(const er_matmul_args *a);                                                               \
    void p##_matmul_q5_0x4(const er_matmul_args *a);                                                               \
    void p##_matmul_q5_1x4(const er_matmul_args *a);                                                               \
    void p##_matmul_q4_kx4(const er_matmul_args *a);                                                               \
    void p##_matmul_q5_kx4(const er_matmul_args *a);                                                               \
    void p##_matmul_q6_kx4(const er_matmul_args *a);
ER_NEON_REPACK_DECL(er_neon)
ER_NEON_REPACK_DECL(er_neondp)

/* i8mm_neon.c (-march=armv8.6-a+i8mm): SMMLA prefill, SDOT decode (m = 1) */
void er_neoni8_matmul_q8_0x4(const er_matmul_args *a);
void er_neoni8_matmul_q4_0x4(const er_matmul_args *a);
void er_neoni8_matmul_iq4_nlx4(const er_matmul_args *a);
void er_neoni8_matmul_q4_1x4(const er_matmul_args *a);
void er_neoni8_matmul_q5_0x4(const er_matmul_args *a);
void er_neoni8_matmul_q5_1x4(const er_matmul_args *a);
/* i8mm_kq_neon.c: the same for the K-quants */
void er_neoni8_matmul_q4_kx4(const er_matmul_args *a);
void er_neoni8_matmul_q5_kx4(const er_matmul_args *a);
void er_neoni8_matmul_q6_kx4(const er_matmul_args *a);

/* The 32-element records by kind (repack_load_neon.h loads them; the SVE
 * layouts are the same fields with G rows): the integer each weight becomes,
 * the offset taken off as off * sum(x) (Q4_0 8, Q5_0 16: their quants stay
 * unsigned) and whether a min term d_x m_w sum(x) is added. */
enum { ER_X4_Q8_0, ER_X4_Q4_0, ER_X4_IQ4_NL, ER_X4_Q4_1, ER_X4_Q5_0, ER_X4_Q5_1 };
static inline int er_x4_off(int t) { return t == ER_X4_Q4_0 ? 8 : t == ER_X4_Q5_0 ? 16 : 0; }
static inline int er_x4_has_m(int t) { return t == ER_X4_Q4_1 || t == ER_X4_Q5_1; }
static inline int er_x4_has_h(int t) { return t == ER_X4_Q5_0 || t == ER_X4_Q5_1; }
/* generic's float tail per block (the issue-25 types) rather than one FMA */
static inline int er_x4_exact(int t) { return t >= ER_X4_IQ4_NL; }
/* bytes per row and block: a record of G rows is G times this */
static inline size_t er_x4_block_bytes(int t) {
    return t == ER_X4_Q8_0 ? 34 : 18 + (er_x4_has_m(t) ? 2u : 0u) + (er_x4_has_h(t) ? 4u : 0u);
}

#endif
