/*
 * attention_neon.c — causal attention over the KV cache, baseline NEON (the
 * sve table uses these too): one query head at a time (decode, attention),
 * and many queries that share a K/V head (grouped-query heads, prefill
 * tokens: attention_multi).
 *
 * The one-query kernel, as its AVX2 twin: scores 8 positions at a time, one
 * accumulator per position, reduced together by pairwise adds (a call and a
 * horizontal sum per position before, 2026-11-29); the weighted sum of V
 * keeps up to 16 output vectors (64 dims) in registers across all positions
 * instead of loading and storing out[] per position, a store-to-load chain;
 * K and V rows prefetched a few positions ahead, the cache being walked one
 * head's slice of every row. Speed on Arm cores is unmeasured (developed
 * under qemu, where instruction counts are the measure).
 *
 * attention_multi (../attention_paths.h picks the path): a decode step's
 * group of query heads, all at one position, shares each converted K and V
 * vector in registers (few_x4); 8 or more queries at different positions (a
 * prefill chunk's tokens) convert a block of ER_ATT_BLOCK rows to floats
 * once and run over that copy. attention_heads takes a decode step's K/V
 * heads row by row across all of them. Every way, the results equal the
 * one-query kernel's bit for bit (the same groups of 8 aligned to position
 * 0, the same tail dots, the same FMA chains in position order).
 */
#include "neon.h"
#include "edgerun.h" /* ER_KV_F16 */
#include "../attention_paths.h"
#include "../generic/generic.h"

#define AI inline __attribute__((always_inline))

#define PF_K_ROWS 8
#define PF_V_ROWS 16

/* [p, p + n) towards L1; a prefetch never faults, so an address past the
 * cache is harmless */
static AI void prefetch_l1(const unsigned char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
}

/* elements j..j+3 of a row of halves (f16) or floats */
static AI float32x4_t load4(const unsigned char *r, int j, const int f16) {
    if (f16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)r + j)));
    return vld1q_f32((const float *)(const void *)r + j);
}

/* s[0..8) = scale * q . k_p for the 8 rows at kb (row_bytes apart) */
static AI void scores8(float *s, const unsigned char *kb, size_t row_bytes, const float *q, int head_dim, float scale,
                       const int f16) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int j = 0; j < head_dim; j += 4) {
        const float32x4_t qv = vld1q_f32(q + j);
        a0 = vfmaq_f32(a0, load4(kb, j, f16), qv);
        a1 = vfmaq_f32(a1, load4(kb + row_bytes, j, f16), qv);
        a2 = vfmaq_f32(a2, load4(kb + 2 * row_bytes, j, f16), qv);
        a3 = vfmaq_f32(a3, load4(kb + 3 * row_bytes, j, f16), qv);
        a4 = vfmaq_f32(a4, load4(kb + 4 * row_bytes, j, f16), qv);
        a5 = vfmaq_f32(a5, load4(kb + 5 * row_bytes, j, f16), qv);
        a6 = vfmaq_f32(a6, load4(kb + 6 * row_bytes, j, f16), qv);
        a7 = vfmaq_f32(a7, load4(kb + 7 * row_bytes, j, f16), qv);
    }
    vst1q_f32(s, vmulq_n_f32(vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3)), scale));
    vst1q_f32(s + 4, vmulq_n_f32(vpaddq_f32(vpaddq_f32(a4, a5), vpaddq_f32(a6, a7)), scale));
}

/* out[j0 .. j0 + 4 * nv) (nv <= 16): the FMA chains of sum_t p[t] v_t over
 * n rows at vb, started from zero (first) or continued from out[] */
static AI void wsum(float *out, const unsigned char *vb, size_t row_bytes, const float *p, int n, int j0, const int nv,
                    const int f16, const int first, const int prefetch) {
    float32x4_t o[16];
    for (int i = 0; i < nv; i++) o[i] = first ? vdupq_n_f32(0.0f) : vld1q_f32(out + j0 + 4 * i);
    for (int t = 0; t < n; t++) {
        const unsigned char *r = vb + (size_t)t * row_bytes;
        if (prefetch && t + PF_V_ROWS < n)
            prefetch_l1(r + PF_V_ROWS * row_bytes + (size_t)j0 * (f16 ? 2 : 4), (size_t)nv * (f16 ? 8 : 16));
        const float w = p[t];
        for (int i = 0; i < nv; i++) o[i] = vfmaq_n_f32(o[i], load4(r, j0 + 4 * i, f16), w);
    }
    for (int i = 0; i < nv; i++) vst1q_f32(out + j0 + 4 * i, o[i]);
}

/* wsum over a whole head (head_dim a multiple of 4): 64-dim chunks, then
 * the remainder with its own register count */
#define WSUM_CASE(k) \
    case k: wsum(out, vb, row_bytes, p, n, j, k, f16, first, prefetch); break;
static AI void wsum_head(float *out, const unsigned char *vb, size_t row_bytes, const float *p, int n, int head_dim,
                         const int f16, const int first, const int prefetch) {
    int j = 0;
    for (; j + 64 <= head_dim; j += 64) wsum(out, vb, row_bytes, p, n, j, 16, f16, first, prefetch);
    switch ((head_dim - j) / 4) {
        WSUM_CASE(1) WSUM_CASE(2) WSUM_CASE(3) WSUM_CASE(4) WSUM_CASE(5) WSUM_CASE(6) WSUM_CASE(7) WSUM_CASE(8)
        WSUM_CASE(9) WSUM_CASE(10) WSUM_CASE(11) WSUM_CASE(12) WSUM_CASE(13) WSUM_CASE(14) WSUM_CASE(15)
    default: break;
    }
}
#undef WSUM_CASE

static AI float dot1(int head_dim, const void *row, const float *q, const int f16) {
    return f16 ? er_neon_dot_f16(head_dim, row, q) : er_neon_dot_f32(head_dim, row, q);
}

static AI void attention_x4(float *out, const float *q, const unsigned char *kb, const unsigned char *vb,
                            size_t row_bytes, int n_kv, int head_dim, float scale, float *scores, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    int t = 0;
    for (; t + 8 <= n_kv; t += 8) {
        for (int p = 0; p < 8; p++)
            if (t + p + PF_K_ROWS < n_kv) prefetch_l1(kb + (size_t)(t + p + PF_K_ROWS) * row_bytes, hb);
        scores8(scores + t, kb + (size_t)t * row_bytes, row_bytes, q, head_dim, scale, f16);
    }
    for (; t < n_kv; t++) scores[t] = scale * dot1(head_dim, kb + (size_t)t * row_bytes, q, f16);
    er_neon_softmax(scores, n_kv);
    wsum_head(out, vb, row_bytes, scores, n_kv, head_dim, f16, 1, 1);
}

void er_neon_attention(float *out, const float *q, const void *k, const void *v, int kv_type, size_t kv_stride,
                       int n_kv, int head_dim, float scale, float *scores) {
    const int f16 = kv_type == ER_KV_F16;
    const size_t esz = f16 ? 2 : 4;
    const unsigned char *kb = k, *vb = v;
    if (head_dim > 0 && head_dim % 4 == 0) {
        /* the usual head sizes as constants, so the loops over a head unroll */
        if (f16 && head_dim == 64)
            attention_x4(out, q, kb, vb, kv_stride * esz, n_kv, 64, scale, scores, 1);
        else if (f16 && head_dim == 128)
            attention_x4(out, q, kb, vb, kv_stride * esz, n_kv, 128, scale, scores, 1);
        else if (f16)
            attention_x4(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 1);
        else
            attention_x4(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 0);
        return;
    }
    /* a head size that is not a multiple of 4 (none of the supported models) */
    for (int t = 0; t < n_kv; t++) scores[t] = scale * dot1(head_dim, kb + (size_t)t * kv_stride * esz, q, f16);
    er_neon_softmax(scores, n_kv);
    for (int j = 0; j < head_dim; j++) out[j] = 0.0f;
    for (int t = 0; t < n_kv; t++) {
        const unsigned char *vr = vb + (size_t)t * kv_stride * esz;
        for (int j = 0; j < head_dim; j++)
            out[j] += scores[t] * (f16 ? er_neon_h2f(((const uint16_t *)(const void *)vr)[j])
                                       : ((const float *)(const void *)vr)[j]);
    }
}

/* rows [t0, t0 + nb) of one head as floats at buf (head_dim apart), the
 * next block's rows prefetched */
static AI void rows_to_f32(float *buf, const unsigned char *base, size_t row_bytes, int t0, int nb, int n_max,
                           int head_dim, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    for (int r = 0; r < nb; r++) {
        const unsigned char *src = base + (size_t)(t0 + r) * row_bytes;
        if (t0 + ER_ATT_BLOCK + r < n_max) prefetch_l1(src + ER_ATT_BLOCK * row_bytes, hb);
        for (int j = 0; j < head_dim; j += 4) vst1q_f32(buf + (size_t)r * head_dim + j, load4(src, j, f16));
    }
}

/*
 * A decode step's group (the query heads of one K/V head, all at one
 * position), up to 3 at a time in registers, each K and V vector converted
 * once for them (the AVX2 twin, few_x8: 192 -> 233 tok/s there). Scores:
 * 4 positions x c queries, each reduced by scores8's own pairwise adds for
 * its position; V: nv output vectors x c queries, each output the same FMA
 * chain in position order: bit-identical to the one-query kernel.
 */
/* scores of c queries for positions [t, t + 4), stored at s[i] + t */
static AI void few4(float *const *s, const float *const *q, const unsigned char *kb, size_t row_bytes, int t,
                    int head_dim, float scale, const int c, const int f16) {
    float32x4_t a[3][4];
    for (int i = 0; i < c; i++)
        for (int p = 0; p < 4; p++) a[i][p] = vdupq_n_f32(0.0f);
    for (int j = 0; j < head_dim; j += 4) {
        float32x4_t kv[4];
        for (int p = 0; p < 4; p++) kv[p] = load4(kb + (size_t)(t + p) * row_bytes, j, f16);
        for (int i = 0; i < c; i++) {
            const float32x4_t qv = vld1q_f32(q[i] + j);
            for (int p = 0; p < 4; p++) a[i][p] = vfmaq_f32(a[i][p], kv[p], qv);
        }
    }
    for (int i = 0; i < c; i++)
        vst1q_f32(s[i] + t,
                  vmulq_n_f32(vpaddq_f32(vpaddq_f32(a[i][0], a[i][1]), vpaddq_f32(a[i][2], a[i][3])), scale));
}

static AI void few_scores(float *const *s, const float *const *q, const unsigned char *kb, size_t row_bytes, int n_kv,
                          int head_dim, float scale, const int c, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    const int full = n_kv / 8 * 8; /* scores8's groups; the rest are dots */
    int t = 0;
    for (; t < full; t += 4) {
        for (int p = 0; p < 4; p++)
            if (t + p + PF_K_ROWS < n_kv) prefetch_l1(kb + (size_t)(t + p + PF_K_ROWS) * row_bytes, hb);
        few4(s, q, kb, row_bytes, t, head_dim, scale, c, f16);
    }
    for (; t < n_kv; t++)
        for (int i = 0; i < c; i++) s[i][t] = scale * dot1(head_dim, kb + (size_t)t * row_bytes, q[i], f16);
}

/* out[i][j0 .. j0 + 4 * nv) = sum_t p[i][t] v_t for c queries over rows
 * [t0, t1), started from zero when first or continued from out[]; rows
 * prefetched ahead when prefetch */
static AI void few_wsum(float *const *out, const float *const *p, const unsigned char *vb, size_t row_bytes, int t0,
                        int t1, int j0, const int nv, const int c, const int f16, const int prefetch,
                        const int first) {
    float32x4_t o[3][8];
    for (int i = 0; i < c; i++)
        for (int k = 0; k < nv; k++) o[i][k] = first ? vdupq_n_f32(0.0f) : vld1q_f32(out[i] + j0 + 4 * k);
    for (int t = t0; t < t1; t++) {
        const unsigned char *r = vb + (size_t)t * row_bytes;
        if (prefetch && t + PF_V_ROWS < t1)
            prefetch_l1(r + PF_V_ROWS * row_bytes + (size_t)j0 * (f16 ? 2 : 4), (size_t)nv * (f16 ? 8 : 16));
        float32x4_t vv[8];
        for (int k = 0; k < nv; k++) vv[k] = load4(r, j0 + 4 * k, f16);
        for (int i = 0; i < c; i++) {
            const float w = p[i][t];
            for (int k = 0; k < nv; k++) o[i][k] = vfmaq_n_f32(o[i][k], vv[k], w);
        }
    }
    for (int i = 0; i < c; i++)
        for (int k = 0; k < nv; k++) vst1q_f32(out[i] + j0 + 4 * k, o[i][k]);
}

/* few_wsum over a whole head: 8 output vectors per pass (4 for 3 queries:
 * 12 sums and 4 V vectors in registers) */
static AI void few_wsum_head(float *const *out, const float *const *p, const unsigned char *vb, size_t row_bytes,
                             int t0, int t1, int head_dim, const int c, const int f16, const int prefetch,
                             const int first) {
    const int nv = c == 3 ? 4 : 8;
    int j = 0;
    for (; j + 4 * nv <= head_dim; j += 4 * nv)
        few_wsum(out, p, vb, row_bytes, t0, t1, j, nv, c, f16, prefetch, first);
    for (; j < head_dim; j += 4) few_wsum(out, p, vb, row_bytes, t0, t1, j, 1, c, f16, prefetch, first);
}

/* c (1-3) queries' output chains over rows [t0, t1), started when first */
static AI void rows_sums(float *const *out, const float *const *p, const unsigned char *vb, size_t row_bytes, int t0,
                         int t1, int head_dim, const int c, const int f16, const int first) {
    if (c == 1)
        wsum_head(out[0], vb + (size_t)t0 * row_bytes, row_bytes, p[0] + t0, t1 - t0, head_dim, f16, first, 0);
    else
        few_wsum_head(out, p, vb, row_bytes, t0, t1, head_dim, c, f16, 0, first);
}

/* c (1-3) queries that all see n_kv positions; scores: c * n_kv floats */
static AI void few_x4(float *const *out, const float *const *q, const unsigned char *kb, const unsigned char *vb,
                      size_t row_bytes, int n_kv, int head_dim, float scale, float *scores, const int c,
                      const int f16) {
    float *s[3];
    for (int i = 0; i < c; i++) s[i] = scores + (size_t)i * n_kv;
    few_scores(s, q, kb, row_bytes, n_kv, head_dim, scale, c, f16);
    for (int i = 0; i < c; i++) er_neon_softmax(s[i], n_kv);
    few_wsum_head(out, (const float *const *)s, vb, row_bytes, 0, n_kv, head_dim, c, f16, 1, 1);
}

/* The copy path (prefill tokens): ER_ATTENTION_COPY_WALK (attention_paths.h)
 * over a float copy of each block of rows, three queries at a time. */
static AI void multi_x4(float *const *out, const float *const *q, const int *n_kv, int nq, const unsigned char *kb,
                        const unsigned char *vb, size_t row_bytes, int head_dim, float scale, float *scratch,
                        const int f16) {
    ER_ATTENTION_COPY_WALK(rows_to_f32, few4, scores8, dot1, er_neon_softmax, rows_sums);
}

void er_neon_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                             const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch) {
    ER_ATTENTION_MULTI(4, few_x4, multi_x4, er_neon_attention);
}

/*
 * attention_heads: a decode step's K/V heads row by row, as attention_avx2.c
 * does where query heads share a K/V head (which says why: one head's
 * column of every row is a strided walk, and on the Zen 4 it was measured
 * on, reading each block of 8 rows across all the heads made attention
 * 11-22% faster cold, 29-44% warm). With one query head per K/V head the
 * AVX2 table now reads whole rows in address order (row_scores_walk, 25-30%
 * faster from DRAM, slower warm); not tried on Arm. Per query the
 * one-query kernel's arithmetic: scores8 (few4 for a group of query heads),
 * the same tail dots and softmax, each output's FMA chain carried from
 * block to block through out[]. Speed on Arm cores is unmeasured.
 */
static AI void prefetch_l2(const unsigned char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 2);
}

/* c (1-3) query heads of one K/V head (q, out and sc at the first): scores
 * of rows [t, t + 8), or the sums over rows [t0, t1) */
static AI void heads_scores(float *sc, int n_kv, const float *q, const unsigned char *kh, size_t row_bytes, int t,
                            int head_dim, float scale, const int c, const int f16) {
    if (c == 1) {
        scores8(sc + t, kh + (size_t)t * row_bytes, row_bytes, q, head_dim, scale, f16);
        return;
    }
    float *const s[3] = ER_ATT_FIRST3(sc, n_kv, c);
    const float *const qs[3] = ER_ATT_FIRST3(q, head_dim, c);
    few4(s, qs, kh, row_bytes, t, head_dim, scale, c, f16);
    few4(s, qs, kh, row_bytes, t + 4, head_dim, scale, c, f16);
}

static AI void heads_sums(float *out, const float *sc, int n_kv, const unsigned char *vh, size_t row_bytes, int t0,
                          int t1, int head_dim, const int c, const int f16) {
    float *const o[3] = ER_ATT_FIRST3(out, head_dim, c);
    const float *const p[3] = ER_ATT_FIRST3(sc, n_kv, c);
    rows_sums(o, p, vh, row_bytes, t0, t1, head_dim, c, f16, t0 == 0);
}

static AI void scores_x4(float *sc, const float *q, int n_kv, int t0, int t1, const unsigned char *kb, int nkv,
                         int group, float scale, size_t row_bytes, int head_dim, const int f16) {
    ER_ATTENTION_SCORES_WALK(3, heads_scores, dot1, prefetch_l2);
}

static AI void sums_x4(float *out, float *sc, int n_kv, const unsigned char *vb, int nkv, int group, size_t row_bytes,
                       int head_dim, const int f16) {
    ER_ATTENTION_SUMS_WALK(3, heads_sums, er_neon_softmax, prefetch_l2);
}

void er_neon_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch) {
    ER_ATTENTION_HEADS(4, scores_x4, sums_x4, er_neon_attention);
}

void er_neon_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                              size_t kv_stride, int nkv, int group, int head_dim, float scale) {
    ER_ATTENTION_SCORES(4, scores_x4);
}

void er_neon_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                            int group, int head_dim) {
    ER_ATTENTION_SUMS(4, sums_x4);
}
