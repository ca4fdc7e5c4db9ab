/*
 * dotlane_neon.h — "4 rows in 4 lanes" integer dot step for the repacked
 * kernels (internal; include only from files compiled twice like q_neon.c,
 * with ER_NEON_DOTPROD set by kernels/meson.build).
 *
 * DOT4(acc, w0, w1, w2, w3, x): for each row r (32-bit lane r of the w
 * vectors, 4 bytes each) acc[r] += sum over l of w_l[r] . x[4l..4l+3].
 * With SDOT that is four vdotq_laneq_s32. Without it (baseline armv8-a),
 * widening multiplies give each row's products in pair form (p01 holds rows
 * 0-1 as 2 partial sums each, p23 rows 2-3), reduced to one lane per row
 * only once per block by dacc_rows: the same integers, more instructions.
 * Lane indices must be literal constants (the instructions encode them),
 * hence macros rather than a loop over l.
 */
#ifndef ER_KERNELS_DOTLANE_NEON_H
#define ER_KERNELS_DOTLANE_NEON_H

#include <arm_neon.h>

#if !defined(ER_NEON_DOTPROD)
#error "compile with -DER_NEON_DOTPROD=0 (widening multiplies) or =1 (SDOT)"
#endif

#if ER_NEON_DOTPROD
#if !defined(__ARM_FEATURE_DOTPROD)
#error "ER_NEON_DOTPROD=1 needs a dotprod target (-march=armv8.2-a+dotprod)"
#endif
typedef int32x4_t er_dacc;
static inline er_dacc er_dacc_zero(void) { return vdupq_n_s32(0); }
static inline int32x4_t er_dacc_rows(er_dacc a) { return a; }
#define ER_DOT_LANE(acc, w, x, l) vdotq_laneq_s32((acc), (w), (x), l)
#else
typedef struct {
    int32x4_t p01, p23;
} er_dacc;
static inline er_dacc er_dacc_zero(void) {
    er_dacc a = {vdupq_n_s32(0), vdupq_n_s32(0)};
    return a;
}
static inline int32x4_t er_dacc_rows(er_dacc a) { return vpaddq_s32(a.p01, a.p23); }
/* xd: the 4 activation bytes repeated in every lane */
static inline er_dacc er_dacc_step(er_dacc a, int8x16_t w, int8x16_t xd) {
    a.p01 = vpadalq_s16(a.p01, vmull_s8(vget_low_s8(w), vget_low_s8(xd)));
    a.p23 = vpadalq_s16(a.p23, vmull_high_s8(w, xd));
    return a;
}
#define ER_DOT_LANE(acc, w, x, l) \
    er_dacc_step((acc), (w), vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), l)))
#endif

#define ER_DOT4(acc, w0, w1, w2, w3, x) \
    ER_DOT_LANE(ER_DOT_LANE(ER_DOT_LANE(ER_DOT_LANE((acc), (w0), (x), 0), (w1), (x), 1), (w2), (x), 2), (w3), (x), 3)

#endif
