/*
 * matmul_tiles.h — the matmul loop of the row-wise SIMD kernels (internal):
 * float weights on every ISA, and NEON/AVX2 Q8_0/Q4_0 on the file layout.
 *
 * Weight rows go in chunks of about 128 KiB, which stay in L2 while every
 * tile of four activation rows (in L1) meets them, so weights stream from
 * memory once however large m is. Within a chunk the kernel's ROWS takes RW
 * weight rows at a time against the tile's four activation rows, loading
 * and converting each weight vector once for the four and each activation
 * vector once for the RW: a register tile of RW x 4 accumulators. Weight
 * rows left over at a chunk's end take ROWS with 2 (when RW > 2) and then 1;
 * activation rows left over (m mod 4), and the last m_one rows (kernels.h),
 * take the kernel's one-row DOT.
 *
 * Why RW > 1 matters: each accumulator is a chain of dependent FMAs (4
 * cycles each, two issued per cycle on the cores we target), so a 1 x 4 tile
 * keeps at most half the FMA units busy. F32 prefill on a Zen 4 core, 768 x
 * 2304 and 2048 x 768 products, 48 activation rows: 48-59 GFLOP/s with 1 x 4,
 * 87-107 with 3 x 4 (the AVX2 peak there is 117).
 *
 * A macro rather than a function taking ROWS/DOT as pointers: the kernels
 * are always-inline with their type as a constant argument (passed as the
 * trailing arguments here), and the expansion keeps them inlined with it.
 * ROWS(n, w_row, w_row_bytes, R, x, x_stride, out[R][4], ...) with R a
 * constant, and DOT(n, w_row, x_row, ...).
 */
#ifndef ER_KERNELS_MATMUL_TILES_H
#define ER_KERNELS_MATMUL_TILES_H

#include "kernels.h"

/* y[b + k][r + j] = out[j][k] for the R x 4 outputs of one tile */
static inline void er_tile_store(float *y, size_t ys, int b, int r, const float *out, int R) {
    for (int j = 0; j < R; j++)
        for (int k = 0; k < 4; k++) y[(size_t)(b + k) * ys + (size_t)(r + j)] = out[4 * j + k];
}

#define ER_MATMUL_TILES(a, RW, ROWS, DOT, ...)                                                                     \
    do {                                                                                                           \
        const unsigned char *w_ = (const unsigned char *)(a)->w, *x_ = (const unsigned char *)(a)->x;             \
        const size_t rb_ = (a)->w_row_bytes, xs_ = (a)->x_stride, ys_ = (a)->y_stride;                             \
        int chunk_ = rb_ < 131072 ? (int)(131072 / rb_) : 1;                                                       \
        chunk_ = chunk_ < (RW) ? (RW) : chunk_ / (RW) * (RW);                                                      \
        float out_[4 * (RW)];                                                                                      \
        for (int c0_ = (a)->r0; c0_ < (a)->r1; c0_ += chunk_) {                                                    \
            const int c1_ = (a)->r1 - c0_ < chunk_ ? (a)->r1 : c0_ + chunk_;                                       \
            int b_ = 0;                                                                                            \
            for (; b_ + 4 <= (a)->m - (a)->m_one; b_ += 4) {                                                       \
                const unsigned char *xb_ = x_ + (size_t)b_ * xs_;                                                  \
                int r_ = c0_;                                                                                      \
                for (; r_ + (RW) <= c1_; r_ += (RW)) {                                                             \
                    ROWS((a)->n, w_ + (size_t)r_ * rb_, rb_, (RW), xb_, xs_, out_, __VA_ARGS__);                   \
                    er_tile_store((a)->y, ys_, b_, r_, out_, (RW));                                                \
                }                                                                                                  \
                if ((RW) > 2 && r_ + 2 <= c1_) {                                                                   \
                    ROWS((a)->n, w_ + (size_t)r_ * rb_, rb_, 2, xb_, xs_, out_, __VA_ARGS__);                      \
                    er_tile_store((a)->y, ys_, b_, r_, out_, 2);                                                   \
                    r_ += 2;                                                                                       \
                }                                                                                                  \
                for (; r_ < c1_; r_++) {                                                                           \
                    ROWS((a)->n, w_ + (size_t)r_ * rb_, rb_, 1, xb_, xs_, out_, __VA_ARGS__);                      \
                    er_tile_store((a)->y, ys_, b_, r_, out_, 1);                                                   \
                }                                                                                                  \
            }                                                                                                      \
            for (; b_ < (a)->m; b_++)                                                                              \
                for (int r_ = c0_; r_ < c1_; r_++)                                                                 \
                    (a)->y[(size_t)b_ * ys_ + (size_t)r_] =                                                        \
                        DOT((a)->n, w_ + (size_t)r_ * rb_, (const void *)(x_ + (size_t)b_ * xs_), __VA_ARGS__);    \
        }                                                                                                          \
    } while (0)

/* The row-wise kernels' matmul for types without a register tile (NEON and
 * SVE K-quants and the issue-25 types): weight rows in ~128 KiB chunks
 * (kept in L2) against each activation row (in L1), so weights stream from
 * memory once however large m is. Always inlined, so each caller's dot is a
 * direct call. */
typedef float (*er_row_dot_fn)(int n, const void *w_row, const void *x_row);
static inline __attribute__((always_inline)) void er_matmul_rows(const er_matmul_args *a, er_row_dot_fn dot) {
    const unsigned char *w = a->w, *x = a->x;
    const int chunk = a->w_row_bytes < 131072 ? (int)(131072 / a->w_row_bytes) : 1;
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int b = 0; b < a->m; b++)
            for (int r = c0; r < c1; r++)
                a->y[(size_t)b * a->y_stride + (size_t)r] =
                    dot(a->n, w + (size_t)r * a->w_row_bytes, x + (size_t)b * a->x_stride);
    }
}

#endif
