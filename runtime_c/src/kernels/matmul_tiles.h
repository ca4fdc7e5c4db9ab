/*
 * matmul_tiles.h — the matmul loop of the row-wise SIMD kernels (internal):
 * float weights on every ISA, and NEON/AVX2 Q8_0/Q4_0 on the file layout.
 *
 * Weight rows go in chunks of about 128 KiB, which stay in L2 while every
 * tile of four activation rows (in L1) meets them, so weights stream from
 * memory once however large m is; within a tile the kernel's ROWS4 loads and
 * converts each weight vector once for all four rows. Activation rows left
 * over (m mod 4) take the kernel's one-row DOT.
 *
 * A macro rather than a function taking ROWS4/DOT as pointers: the kernels
 * are always-inline with their type as a constant argument (passed as the
 * trailing arguments here), and the expansion keeps them inlined with it.
 * ROWS4(n, w_row, x, x_stride, out[4], ...) and DOT(n, w_row, x_row, ...).
 */
#ifndef ER_KERNELS_MATMUL_TILES_H
#define ER_KERNELS_MATMUL_TILES_H

#include "kernels.h"

#define ER_MATMUL_TILES4(a, ROWS4, DOT, ...)                                                                       \
    do {                                                                                                           \
        const unsigned char *w_ = (const unsigned char *)(a)->w, *x_ = (const unsigned char *)(a)->x;             \
        const size_t rb_ = (a)->w_row_bytes, xs_ = (a)->x_stride, ys_ = (a)->y_stride;                             \
        const int chunk_ = rb_ < 131072 ? (int)(131072 / rb_) : 1;                                                 \
        float out_[4];                                                                                             \
        for (int c0_ = (a)->r0; c0_ < (a)->r1; c0_ += chunk_) {                                                    \
            const int c1_ = (a)->r1 - c0_ < chunk_ ? (a)->r1 : c0_ + chunk_;                                       \
            int b_ = 0;                                                                                            \
            for (; b_ + 4 <= (a)->m; b_ += 4)                                                                      \
                for (int r_ = c0_; r_ < c1_; r_++) {                                                               \
                    ROWS4((a)->n, w_ + (size_t)r_ * rb_, x_ + (size_t)b_ * xs_, xs_, out_, __VA_ARGS__);           \
                    for (int k_ = 0; k_ < 4; k_++) (a)->y[(size_t)(b_ + k_) * ys_ + (size_t)r_] = out_[k_];        \
                }                                                                                                  \
            for (; b_ < (a)->m; b_++)                                                                              \
                for (int r_ = c0_; r_ < c1_; r_++)                                                                 \
                    (a)->y[(size_t)b_ * ys_ + (size_t)r_] =                                                        \
                        DOT((a)->n, w_ + (size_t)r_ * rb_, (const void *)(x_ + (size_t)b_ * xs_), __VA_ARGS__);    \
        }                                                                                                          \
    } while (0)

#endif
