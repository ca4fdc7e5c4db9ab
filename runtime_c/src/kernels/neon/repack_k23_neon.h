/*
 * repack_k23_neon.h — the Arm interleaved layouts of Q2_K, Q3_K and IQ4_XS
 * (internal), beside repack_neon.h's and written like them: for each group
 * of G weight rows and each super-block, one record whose every field is an
 * array [...][G] (rows innermost) or [...][G][4] (4 bytes per row), so a
 * vector load gives 4 consecutive bytes of every row, row r in 32-bit lane
 * r, as SDOT by element wants. G = 4 for the NEON tables (the structs
 * below), G = svcntw() for "sve" (sve/repack_sve.h). Each record is exactly
 * the G file blocks' bytes, so the plan's repacked section (repack.c)
 * counts them as it counts the other layouts.
 *
 *   Q2_Kx4   { f16 d[4], dmin[4]; u8 sc[16][4]; u8 qs[2][8][4][4] }
 *            the file's fields in the file's bytes: sc[j][r] row r's
 *            scales[j] (scale low nibble, min high), qs[h][g][r] row r's
 *            qs[32h+4g..+3]; field j (bits 2j) of byte t of qs[h][g] is
 *            element 128h + 32j + 4g + t, of sub-block 8h + 2j + g/4.
 *   Q3_Kx4   { f16 d[4]; u8 sl[8][4]; u8 sh[4][4]; u8 hm[8][4][4];
 *            u8 qs[2][8][4][4] }
 *            qs as Q2_K's; hm[g][r] NOT row r's hmask[4g..+3] (bit 4h + j
 *            set where the element's q is low - 4: one CMTST makes the
 *            -4's bits and one SLI puts the low bits under them, giving
 *            the signed quant); the sixteen 6-bit scales re-encoded as
 *            Q4_Kx4's: sl[j][r] = s_j & 15 | (s_j+8 & 15) << 4 (j < 8),
 *            sh[jj][r] the top two bits of s_jj (bits 0-1), s_jj+4 (2-3),
 *            s_jj+8 (4-5), s_jj+12 (6-7), so a few vector operations give
 *            the 4 rows' scales where the file needs er_q3k_scales' scalar
 *            code per row.
 *   IQ4_XSx4 { f16 d[4]; u16 sh[4]; u8 sl[4][4]; u8 qs[8][4][4][4] }
 *            the file's fields in the file's order: sh[r] row r's
 *            scales_h, sl[k][r] its scales_l[k], qs[j][c][r] its
 *            qs[16j+4c..+3] (sub-block j as IQ4_NLx4's block: low nibbles
 *            elements 32j+4c.., high 32j+16+4c..).
 */
#ifndef ER_KERNELS_REPACK_K23_NEON_H
#define ER_KERNELS_REPACK_K23_NEON_H

#include "../kernels.h"

typedef struct {
    er_f16 d[4];
    er_f16 dmin[4];
    uint8_t sc[64];
    uint8_t qs[256];
} er_blk_q2_kx4;

typedef struct {
    er_f16 d[4];
    uint8_t sl[32];
    uint8_t sh[16];
    uint8_t hm[128];
    uint8_t qs[256];
} er_blk_q3_kx4;

typedef struct {
    er_f16 d[4];
    uint16_t sh[4];
    uint8_t sl[16];
    uint8_t qs[512];
} er_blk_iq4_xsx4;

_Static_assert(sizeof(er_blk_q2_kx4) == 4 * sizeof(er_block_q2_k), "Q2_Kx4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_q3_kx4) == 4 * sizeof(er_block_q3_k), "Q3_Kx4 must be 4 blocks' bytes");
_Static_assert(sizeof(er_blk_iq4_xsx4) == 4 * sizeof(er_block_iq4_xs), "IQ4_XSx4 must be 4 blocks' bytes");

/* Field offsets in a record of G rows, in bytes (the structs above at G = 4) */
#define ER_Q2KX_DMIN(G) (2 * (size_t)(G))
#define ER_Q2KX_SC(G) (4 * (size_t)(G))
#define ER_Q2KX_QS(G) (20 * (size_t)(G))
#define ER_Q3KX_SL(G) (2 * (size_t)(G))
#define ER_Q3KX_SH(G) (10 * (size_t)(G))
#define ER_Q3KX_HM(G) (14 * (size_t)(G))
#define ER_Q3KX_QS(G) (46 * (size_t)(G))
#define ER_IQ4XSX_SH(G) (2 * (size_t)(G))
#define ER_IQ4XSX_SL(G) (4 * (size_t)(G))
#define ER_IQ4XSX_QS(G) (8 * (size_t)(G))

/* repack_layout_k23_neon.c (plain C, baseline): G rows per group, n_out a
 * multiple of G; the er_neon_* writers are G = 4 */
void er_arm_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_arm_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G);
void er_neon_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_neon_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);

/* repack_q2_k_q3_k_neon.c, compiled twice like q_neon.c: er_neon_* with
 * widening multiplies, er_neondp_* with SDOT; repack_iq4_xs_neon.c with
 * SDOT only (without it the layout does not pay: the "neon" table keeps
 * IQ4_XS's file layout) */
void er_neon_matmul_q2_kx4(const er_matmul_args *a);
void er_neon_matmul_q3_kx4(const er_matmul_args *a);
void er_neondp_matmul_q2_kx4(const er_matmul_args *a);
void er_neondp_matmul_q3_kx4(const er_matmul_args *a);
void er_neondp_matmul_iq4_xsx4(const er_matmul_args *a);

#endif
