/*
 * attention_paths.h — which path the SIMD tables' attention_multi takes for
 * a call (internal; attention_avx2.c, attention_neon.c). All three give
 * each query the one-query kernel's result bit for bit; they differ in how
 * often a K/V row is converted from the cache's type.
 *
 *   ER_ATT_FEW   2 or more queries at one position (a decode step's group
 *                of query heads): up to 3 at a time in registers, each K and
 *                V vector converted once for them.
 *   ER_ATT_COPY  8 or more queries at different positions (the tokens of a
 *                prefill chunk): each block of ER_ATT_BLOCK rows converted
 *                once into floats, the queries run over the copy three at
 *                a time (ER_ATTENTION_COPY_WALK).
 *   ER_ATT_ONE   anything else: the one-query kernel per query.
 *
 * Measured on the AVX2 table (Zen 4), 12 layers, 4 K/V heads, F16, caches
 * flushed between tokens, ms per token at 1,600 positions:
 *   3 heads per K/V head: one-query 2.34, copy 3.66, few 2.19 (warm: 2.25,
 *     2.65, 1.78); 110M decode 192 -> 233 tok/s with few (1 thread).
 *   8 heads (TinyLlama's group): copy 5.4-5.6, few 3.9-4.0.
 *   16 heads: copy 8.6-8.8, few 7.7-7.8.
 * The copy costs a load, a conversion and a store per element, which only
 * many queries repay: against the one-query kernel it ran 0.7x with 3
 * queries (cold) and 1.4x with 16 (warm; break-even about 4): hence 8.
 */
#ifndef ER_KERNELS_ATTENTION_PATHS_H
#define ER_KERNELS_ATTENTION_PATHS_H

#include <stddef.h>

#include "edgerun.h" /* ER_KV_F16 */

enum { ER_ATT_ONE, ER_ATT_FEW, ER_ATT_COPY };

#define ER_ATT_COPY_MIN 8

/* lanes: the table's float vector width; its blocked kernels need head_dim
 * a multiple of it */
static inline int er_att_path(const int *n_kv, int nq, int head_dim, int lanes) {
    if (head_dim <= 0 || head_dim % lanes) return ER_ATT_ONE;
    int same = nq >= 2;
    for (int i = 1; i < nq; i++) same &= n_kv[i] == n_kv[0];
    if (same) return ER_ATT_FEW;
    return nq >= ER_ATT_COPY_MIN ? ER_ATT_COPY : ER_ATT_ONE;
}

/*
 * The body of a table's attention_multi, whose parameters it names (out, q,
 * n_kv, nq, k, v, kv_type, kv_stride, head_dim, scale, scratch). The table
 * supplies its kernels, each always-inline with f16 a constant argument:
 *   FEW(out, q, kb, vb, row_bytes, n_kv, head_dim, scale, scores, c, f16)
 *       c (1-3, a constant) queries that all see n_kv positions;
 *   COPY(out, q, n_kv, nq, kb, vb, row_bytes, head_dim, scale, scratch, f16);
 *   ONE, the table's one-query attention.
 */
#define ER_ATT_FEW_GROUPS_(FEW, f16c)                                                                              \
    for (int i_ = 0; i_ < nq; i_ += 3) {                                                                           \
        const unsigned char *kb_ = k, *vb_ = v;                                                                    \
        switch (nq - i_ < 3 ? nq - i_ : 3) {                                                                       \
        case 1: FEW(out + i_, q + i_, kb_, vb_, rb_, n_kv[0], head_dim, scale, scratch, 1, f16c); break;           \
        case 2: FEW(out + i_, q + i_, kb_, vb_, rb_, n_kv[0], head_dim, scale, scratch, 2, f16c); break;           \
        default: FEW(out + i_, q + i_, kb_, vb_, rb_, n_kv[0], head_dim, scale, scratch, 3, f16c); break;          \
        }                                                                                                          \
    }

#define ER_ATTENTION_MULTI(LANES, FEW, COPY, ONE)                                                                  \
    do {                                                                                                           \
        const int f16_ = kv_type == ER_KV_F16;                                                                     \
        const size_t rb_ = kv_stride * (f16_ ? 2 : 4);                                                             \
        switch (er_att_path(n_kv, nq, head_dim, LANES)) {                                                          \
        case ER_ATT_FEW:                                                                                           \
            if (f16_) {                                                                                            \
                ER_ATT_FEW_GROUPS_(FEW, 1)                                                                         \
            } else {                                                                                               \
                ER_ATT_FEW_GROUPS_(FEW, 0)                                                                         \
            }                                                                                                      \
            break;                                                                                                 \
        case ER_ATT_COPY:                                                                                          \
            if (f16_)                                                                                              \
                COPY(out, q, n_kv, nq, k, v, rb_, head_dim, scale, scratch, 1);                                    \
            else                                                                                                   \
                COPY(out, q, n_kv, nq, k, v, rb_, head_dim, scale, scratch, 0);                                    \
            break;                                                                                                 \
        default:                                                                                                   \
            for (int i_ = 0; i_ < nq; i_++)                                                                        \
                ONE(out[i_], q[i_], k, v, kv_type, kv_stride, n_kv[i_], head_dim, scale, scratch);                 \
            break;                                                                                                 \
        }                                                                                                          \
    } while (0)

/*
 * The copy path's walk (ER_ATT_COPY), the body of a table's always-inline
 * COPY, whose parameters it names (out, q, n_kv, nq, kb, vb, row_bytes,
 * head_dim, scale, scratch, f16). Each block of ER_ATT_BLOCK rows is
 * converted once into floats at the scratch (in L1), and the queries take
 * their scores, later their weighted sums, from that copy three at a time
 * as the few path does from the cache: each K vector loaded once for three
 * queries' FMAs, each V vector once for three outputs. The rows all three
 * see go together; the rows only some see (the causal diagonal) go query
 * by query. Bit-identical to the one-query kernel per query: the same
 * groups of 8 rows (FEW4 reduces each position as ONE8 does; blocks start
 * at multiples of 8), DOT for the rows after the last group, the same
 * softmax, and each output vector one chain of FMAs in position order,
 * carried across blocks through out[] (a float stored and loaded back is
 * exact). The table supplies, always-inline, with c (1-3) and f16 constant
 * arguments:
 *   ROWS(buf, base, row_bytes, t0, nb, n_max, head_dim, f16)  rows
 *       [t0, t0 + nb) as floats at buf, head_dim apart;
 *   FEW4(s, q, kb, row_bytes, t, head_dim, scale, c, f16)  c queries'
 *       scores of rows [t, t + 4), at s[i] + t;
 *   ONE8(s, kb, row_bytes, q, head_dim, scale, f16)  one query's scores
 *       of the 8 rows at kb, at s;
 *   DOT, SOFTMAX as for the row walk;
 *   SUMS(out, p, vb, row_bytes, t0, t1, head_dim, c, f16, first)  c
 *       queries' output chains over rows [t0, t1), started when first.
 * Against one query at a time over the copy (Zen 4, 1 thread): attention
 * in the 1,536-token prefill of `make bench-long` 779 -> 736 ms (traced,
 * medians of 8 alternating runs); 15 queries of 64 over 1,400 F16 rows in
 * a standalone loop 458 -> 357 us (min of 200), a gain the model does not
 * see: there the one-query loop already ran at ~29 GMAC/s, this at ~31.
 */
#define ER_ATT_COPY_LIMS_(PTRS)                                                                                    \
    const int c_ = nq - i_ < 3 ? nq - i_ : 3;                                                                      \
    int lim_[3], both_ = nb_;                                                                                      \
    for (int u_ = 0; u_ < c_; u_++) {                                                                              \
        PTRS[u_] = sc_ + (size_t)(i_ + u_) * n_max_ + t0_;                                                         \
        lim_[u_] = n_kv[i_ + u_] - t0_ < nb_ ? n_kv[i_ + u_] - t0_ : nb_;                                          \
        both_ = lim_[u_] < both_ ? lim_[u_] : both_;                                                               \
    }                                                                                                              \
    both_ = both_ > 0 ? both_ : 0;

#define ER_ATTENTION_COPY_WALK(ROWS, FEW4, ONE8, DOT, SOFTMAX, SUMS)                                               \
    do {                                                                                                           \
        int n_max_ = 0;                                                                                            \
        for (int i_ = 0; i_ < nq; i_++) n_max_ = n_kv[i_] > n_max_ ? n_kv[i_] : n_max_;                            \
        float *const buf_ = scratch, *const sc_ = scratch + (size_t)ER_ATT_BLOCK * head_dim;                       \
        const unsigned char *const cb_ = (const unsigned char *)buf_;                                              \
        const size_t fb_ = (size_t)head_dim * 4; /* a copied row's bytes */                                        \
        for (int t0_ = 0; t0_ < n_max_; t0_ += ER_ATT_BLOCK) {                                                     \
            const int nb_ = n_max_ - t0_ < ER_ATT_BLOCK ? n_max_ - t0_ : ER_ATT_BLOCK;                             \
            ROWS(buf_, kb, row_bytes, t0_, nb_, n_max_, head_dim, f16);                                            \
            for (int i_ = 0; i_ < nq; i_ += 3) {                                                                   \
                float *s_[3];                                                                                      \
                ER_ATT_COPY_LIMS_(s_)                                                                              \
                const int groups_ = c_ > 1 ? both_ / 8 * 8 : 0; /* one query: ONE8's 8 chains */                  \
                for (int t_ = 0; t_ < groups_; t_ += 4)                                                            \
                    if (c_ == 2)                                                                                   \
                        FEW4(s_, q + i_, cb_, fb_, t_, head_dim, scale, 2, 0);                                     \
                    else                                                                                           \
                        FEW4(s_, q + i_, cb_, fb_, t_, head_dim, scale, 3, 0);                                     \
                for (int u_ = 0; u_ < c_; u_++) {                                                                  \
                    int t_ = groups_;                                                                              \
                    for (; t_ + 8 <= lim_[u_]; t_ += 8)                                                            \
                        ONE8(s_[u_] + t_, cb_ + t_ * fb_, fb_, q[i_ + u_], head_dim, scale, 0);                    \
                    for (; t_ < lim_[u_]; t_++) s_[u_][t_] = scale * DOT(head_dim, cb_ + t_ * fb_, q[i_ + u_], 0); \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
        for (int i_ = 0; i_ < nq; i_++) SOFTMAX(sc_ + (size_t)i_ * n_max_, n_kv[i_]);                              \
        for (int t0_ = 0; t0_ < n_max_; t0_ += ER_ATT_BLOCK) {                                                     \
            const int nb_ = n_max_ - t0_ < ER_ATT_BLOCK ? n_max_ - t0_ : ER_ATT_BLOCK;                             \
            ROWS(buf_, vb, row_bytes, t0_, nb_, n_max_, head_dim, f16);                                            \
            for (int i_ = 0; i_ < nq; i_ += 3) {                                                                   \
                const float *p_[3];                                                                                \
                ER_ATT_COPY_LIMS_(p_)                                                                              \
                switch (both_ ? c_ : 0) {                                                                          \
                case 1: SUMS(out + i_, p_, cb_, fb_, 0, both_, head_dim, 1, 0, t0_ == 0); break;                   \
                case 2: SUMS(out + i_, p_, cb_, fb_, 0, both_, head_dim, 2, 0, t0_ == 0); break;                   \
                case 3: SUMS(out + i_, p_, cb_, fb_, 0, both_, head_dim, 3, 0, t0_ == 0); break;                   \
                default: break;                                                                                    \
                }                                                                                                  \
                for (int u_ = 0; u_ < c_; u_++)                                                                    \
                    if (lim_[u_] > both_)                                                                          \
                        SUMS(out + i_ + u_, p_ + u_, cb_, fb_, both_, lim_[u_], head_dim, 1, 0, t0_ == 0 && !both_); \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

/*
 * attention_heads as the loop over the table's one-query attention (ONE),
 * whose parameters it names (out, q, n_kv, k, v, kv_type, kv_stride, nkv,
 * group, head_dim, scale, scratch): the body where a table has no
 * row-by-row kernel, or the head size does not suit it.
 */
#define ER_ATTENTION_HEADS_LOOP(ONE)                                                                               \
    do {                                                                                                           \
        const size_t col_ = (size_t)head_dim * (kv_type == ER_KV_F16 ? 2 : 4);                                     \
        for (int i_ = 0; i_ < nkv * group; i_++)                                                                   \
            ONE(out + (size_t)i_ * head_dim, q + (size_t)i_ * head_dim,                                            \
                (const unsigned char *)k + (size_t)(i_ / group) * col_,                                            \
                (const unsigned char *)v + (size_t)(i_ / group) * col_, kv_type, kv_stride, n_kv, head_dim, scale, \
                scratch);                                                                                          \
    } while (0)

/*
 * The row walk of attention_heads (kernels.h), in its two halves, each the
 * body of a table's always-inline function whose parameters it names (the
 * NEON table's, and the AVX2 table's where query heads share a K/V head:
 * with one each it reads whole rows in address order instead,
 * attention_avx2.c's row_scores_walk, which says why):
 *   ER_ATTENTION_SCORES_WALK  (sc, q, n_kv, t0, t1, kb, nkv, group, scale,
 *       row_bytes, head_dim, f16): the scores of rows [t0, t1), t0 a
 *       multiple of 8 and t1 one or n_kv, for every query (sc + i * n_kv);
 *   ER_ATTENTION_SUMS_WALK  (out, sc, n_kv, vb, nkv, group, row_bytes,
 *       head_dim, f16): each query's softmax, then its sums over every V row.
 * kb and vb are unsigned char pointers. The table supplies, always-inline,
 * with c (1 to MAXC) and f16 constant arguments:
 *   SCORES(sc, n_kv, q, kh, row_bytes, t, head_dim, scale, c, f16)
 *       the scores of c query heads (sc and q at the first) for rows
 *       [t, t + 8) of K/V head kh;
 *   SUMS(out, sc, n_kv, vh, row_bytes, t0, t1, head_dim, c, f16)
 *       their outputs' FMA chains continued over rows [t0, t1);
 *   DOT(head_dim, row, q, f16)  one score's dot, for the rows after the
 *       last block of 8;
 *   SOFTMAX(x, n);
 *   PREFETCH_L2(p, n)  [p, p + n) towards L2.
 * MAXC (2-4), the most query heads of one K/V head per SCORES or SUMS
 * call, is what the table's registers hold: the group goes MAXC at a time,
 * then the rest. A query's result does not depend on the queries beside
 * it, so every MAXC gives the same floats.
 * Blocks of 8 rows start at multiples of 8 whatever t0 is, and the rows
 * after the last whole block take DOT, so scores over [0, n_kv) in one call
 * or in several ranges are the same floats: forward.c splits a decode
 * step's rows over threads that way, and then its K/V heads for the sums.
 * Rows ER_ATT_HEADS_PF_BLOCKS blocks ahead (within the range) are
 * prefetched head by head: all 192 lines of a block at once, into L1, made
 * the AVX2 walk slower than the per-head one (0.46 against 0.35 ms, 12
 * layers at 128 positions). The first blocks of a range, and of V, are
 * requested towards L2 as the walk starts: 2 threads splitting the grouped
 * model's steps (ranges of 256 rows) decoded at 390-464 tok/s with that,
 * 379-433 without, in alternating runs; 1 thread is unchanged.
 */
#define ER_ATT_HEADS_PF_BLOCKS 2

/* The first c (1-3) of three rows stride floats apart, as an initializer:
 * the SCORES and SUMS kernels' pointer sets. Set, not looped (a loop cost
 * the AVX2 walk 2-3% warm), and past c the first row again, so no pointer
 * leaves its buffer. */
#define ER_ATT_FIRST3(p, stride, c) {(p), (c) > 1 ? (p) + (stride) : (p), (c) > 2 ? (p) + 2 * (size_t)(stride) : (p)}

/* F for the next min(group - i_, MAXC) query heads, that count a constant */
#define ER_ATT_BY_GROUPS_(MAXC, F, ...)                                                                            \
    switch (group - i_ < (MAXC) ? group - i_ : (MAXC)) {                                                           \
    case 1: F(__VA_ARGS__, 1, f16); break;                                                                         \
    case 2: F(__VA_ARGS__, 2, f16); break;                                                                         \
    case 3: F(__VA_ARGS__, (MAXC) > 2 ? 3 : 2, f16); break;                                                        \
    default: F(__VA_ARGS__, (MAXC) > 3 ? 4 : (MAXC) > 2 ? 3 : 2, f16); break;                                      \
    }

#define ER_ATTENTION_SCORES_WALK(MAXC, SCORES, DOT, PREFETCH_L2)                                                   \
    do {                                                                                                           \
        const size_t hb_ = (size_t)head_dim * (f16 ? 2 : 4); /* a head's bytes in a row */                         \
        const size_t hq_ = (size_t)group * head_dim, hs_ = (size_t)group * n_kv; /* a K/V head's queries, scores */ \
        const int full_ = n_kv / 8 * 8 < t1 ? n_kv / 8 * 8 : t1, ahead_ = 8 * ER_ATT_HEADS_PF_BLOCKS;              \
        for (int t_ = t0; t_ < t0 + ahead_ && t_ < t1; t_++) PREFETCH_L2(kb + (size_t)t_ * row_bytes, nkv * hb_);  \
        for (int t_ = t0; t_ < full_; t_ += 8)                                                                     \
            for (int h_ = 0; h_ < nkv; h_++) {                                                                     \
                const unsigned char *kh_ = kb + (size_t)h_ * hb_;                                                  \
                if (t_ + ahead_ < t1)                                                                              \
                    for (int r_ = 0; r_ < 8; r_++) PREFETCH_L2(kh_ + (size_t)(t_ + ahead_ + r_) * row_bytes, hb_); \
                for (int i_ = 0; i_ < group; i_ += (MAXC)) {                                                       \
                    ER_ATT_BY_GROUPS_(MAXC, SCORES, sc + h_ * hs_ + (size_t)i_ * n_kv, n_kv,                       \
                                      q + h_ * hq_ + (size_t)i_ * head_dim, kh_, row_bytes, t_, head_dim, scale)   \
                }                                                                                                  \
            }                                                                                                      \
        for (int t_ = full_ > t0 ? full_ : t0; t_ < t1; t_++)                                                      \
            for (int i_ = 0; i_ < nkv * group; i_++)                                                               \
                sc[(size_t)i_ * n_kv + t_] =                                                                       \
                    scale * DOT(head_dim, kb + (size_t)(i_ / group) * hb_ + (size_t)t_ * row_bytes,                \
                                q + (size_t)i_ * head_dim, f16);                                                   \
    } while (0)

#define ER_ATTENTION_SUMS_WALK(MAXC, SUMS, SOFTMAX, PREFETCH_L2)                                                   \
    do {                                                                                                           \
        const size_t hb_ = (size_t)head_dim * (f16 ? 2 : 4);                                                       \
        const size_t hq_ = (size_t)group * head_dim, hs_ = (size_t)group * n_kv;                                   \
        const int ahead_ = 8 * ER_ATT_HEADS_PF_BLOCKS;                                                             \
        for (int t_ = 0; t_ < ahead_ && t_ < n_kv; t_++) PREFETCH_L2(vb + (size_t)t_ * row_bytes, nkv * hb_);      \
        for (int i_ = 0; i_ < nkv * group; i_++) SOFTMAX(sc + (size_t)i_ * n_kv, n_kv);                            \
        for (int t0_ = 0; t0_ < n_kv; t0_ += 8) {                                                                  \
            const int t1_ = n_kv - t0_ < 8 ? n_kv : t0_ + 8;                                                       \
            for (int h_ = 0; h_ < nkv; h_++) {                                                                     \
                const unsigned char *vh_ = vb + (size_t)h_ * hb_;                                                  \
                if (t0_ + ahead_ < n_kv)                                                                           \
                    for (int r_ = 0; r_ < 8; r_++) PREFETCH_L2(vh_ + (size_t)(t0_ + ahead_ + r_) * row_bytes, hb_); \
                for (int i_ = 0; i_ < group; i_ += (MAXC)) {                                                       \
                    ER_ATT_BY_GROUPS_(MAXC, SUMS, out + h_ * hq_ + (size_t)i_ * head_dim,                          \
                                      sc + h_ * hs_ + (size_t)i_ * n_kv,                                           \
                                      n_kv, vh_, row_bytes, t0_, t1_, head_dim)                                    \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

/*
 * Calls WALK(args..., row_bytes, head_dim, f16) for the cache's type, with
 * the usual head sizes (64, 128) as constants so that the loops over a head
 * unroll. Names kv_type, kv_stride and head_dim.
 */
#define ER_ATT_KV_CASES_(WALK, ...)                                                                                \
    do {                                                                                                           \
        if (kv_type != ER_KV_F16)                                                                                  \
            WALK(__VA_ARGS__, kv_stride * 4, head_dim, 0);                                                         \
        else if (head_dim == 64)                                                                                   \
            WALK(__VA_ARGS__, kv_stride * 2, 64, 1);                                                               \
        else if (head_dim == 128)                                                                                  \
            WALK(__VA_ARGS__, kv_stride * 2, 128, 1);                                                              \
        else                                                                                                       \
            WALK(__VA_ARGS__, kv_stride * 2, head_dim, 1);                                                         \
    } while (0)

/*
 * The bodies of a table's attention_heads, attention_scores and
 * attention_sums (kernels.h), whose parameters they name. SCORES_FN and
 * SUMS_FN are the table's functions around the two walks above; head sizes
 * not a multiple of LANES take ONE per query (attention_heads) or the
 * generic split (ER_ATTENTION_SCORES / ER_ATTENTION_SUMS, which forward.c
 * does not use for such sizes: kernels.h).
 */
#define ER_ATTENTION_HEADS(LANES, SCORES_FN, SUMS_FN, ONE)                                                         \
    do {                                                                                                           \
        if (head_dim <= 0 || head_dim % (LANES) || n_kv < 1) {                                                     \
            ER_ATTENTION_HEADS_LOOP(ONE);                                                                          \
            break;                                                                                                 \
        }                                                                                                          \
        ER_ATT_KV_CASES_(SCORES_FN, scratch, q, n_kv, 0, n_kv, (const unsigned char *)k, nkv, group, scale);       \
        ER_ATT_KV_CASES_(SUMS_FN, out, scratch, n_kv, (const unsigned char *)v, nkv, group);                       \
    } while (0)

#define ER_ATTENTION_SCORES(LANES, SCORES_FN)                                                                      \
    do {                                                                                                           \
        if (head_dim <= 0 || head_dim % (LANES) || t0 >= t1)                                                       \
            er_gen_attention_scores(sc, q, n_kv, t0, t1, k, kv_type, kv_stride, nkv, group, head_dim, scale);      \
        else                                                                                                       \
            ER_ATT_KV_CASES_(SCORES_FN, sc, q, n_kv, t0, t1, (const unsigned char *)k, nkv, group, scale);         \
    } while (0)

#define ER_ATTENTION_SUMS(LANES, SUMS_FN)                                                                          \
    do {                                                                                                           \
        if (head_dim <= 0 || head_dim % (LANES) || n_kv < 1)                                                       \
            er_gen_attention_sums(out, sc, n_kv, v, kv_type, kv_stride, nkv, group, head_dim);                     \
        else                                                                                                       \
            ER_ATT_KV_CASES_(SUMS_FN, out, sc, n_kv, (const unsigned char *)v, nkv, group);                        \
    } while (0)

#endif
