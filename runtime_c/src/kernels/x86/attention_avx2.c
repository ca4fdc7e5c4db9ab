/*
 * attention_avx2.c — causal attention over the KV cache, AVX2+FMA+F16C: one
 * query head at a time (attention), many queries that share a K/V head
 * (attention_multi: a group of query heads in registers, few_x8, or prefill
 * tokens over a float copy of each block of rows, multi_x8), and a decode
 * step's K/V heads read row by row across all of them (attention_heads:
 * blocks of 8 rows head by head where query heads share a K/V head, whole
 * rows in address order where each has its own, row_scores_walk and
 * row_sums_walk, which took the 110M model's attention at 400 positions
 * from 1,570-1,800 to 1,160-1,640 us a step with an F32 cache, 1 thread,
 * and 6,000-6,700 to 4,900-5,400 for 4 sessions batched).
 */
#include "avx2.h"
#include "edgerun.h" /* ER_KV_F16 */
#include "../attention_paths.h"
#include "../generic/generic.h"

#define AI inline __attribute__((always_inline))

/* Attention, the blocked path: measured on 12 layers x 12 heads of 64 at 128
 * cached positions (110M shapes), 0.76 -> 0.33 ms per token against the
 * per-position dot and per-position load/store of out it replaces.
 *
 * Decode reads the KV cache from DRAM (the weights streamed since the last
 * token evicted it), one head's 128 bytes out of every 1536-byte row (F16,
 * 12 heads): a strided walk the hardware prefetchers follow poorly, 7 GB/s
 * where the weights stream at 20-30. Software prefetch fixes most of it:
 * K rows PF_K_ROWS positions ahead, V rows PF_V_ROWS ahead in the weighted
 * sum, and the next heads' K and V columns of each row while this head's
 * K pass runs. Measured (F16, 12 x 12 heads, caches flushed by a 96 MiB
 * read between tokens, min of 30, against no prefetch): n_kv 128 0.62 ->
 * 0.29 ms, n_kv 192 0.88 -> 0.43 ms, n_kv 20 0.11 -> 0.07 ms. The price is
 * paid when K and V are already in cache (prefill, tiny models): 0.12 ->
 * 0.145 ms warm, nothing measurable on the 15M model's tokens/s. Next-head
 * prefetch is most of it (0.65 -> 0.42 alone); adding the head after it
 * gave cold -12% and 110M Q4_K decode at 2 threads +3-4% (heads alternate
 * between the threads there); V rows prefetched during the K pass lost 5%. */
#define PF_K_ROWS 8
#define PF_V_ROWS 16

/*
 * Query heads of one K/V head taken together by the decode step's row walk
 * (WALK_HEADS; the grouped models: Llama 3.2 and SmolLM 3-4 per K/V head,
 * Gemma 3 4, Qwen3 2), and the most any kernel here takes (HEADS_MAX).
 * This file is built twice (avx2.h): for the avx2 table, with 16 ymm
 * registers, and for avx512vnni with AVX-512VL's 32. Three queries' scores
 * (12 accumulators, 4 K vectors, a q operand) spill from 16 registers: 2
 * at a time there, the group's rest after; with 32, 4 at a time, each K
 * and V vector converted once for the four. Zen 4, 1 thread, F16, 1,024
 * positions from L2, scores + sums in us (min of 5 rounds; 3 at a time ->
 * this): 8 K/V heads x 3 of 128 210 -> 188 (avx2), 167 (avx512vnni); 8 x 4
 * of 64 153 -> 126, 125; 4 x 4 of 128 145 -> 111, 105; 1 x 4 of 256
 * (Gemma 3 270M) 72 -> 55, 51; 8 x 2 of 128 (Qwen3) unchanged. From DRAM
 * (16 layers, 2,048 positions) 11-25% less, 8 x 3 of 128 7.6 -> 6.8, 6.3
 * ms. A query's result is the same whatever heads share its call.
 */
#define WALK_HEADS (ER_X86_VNNI ? 4 : 2)
#define HEADS_MAX (ER_X86_VNNI ? 4 : 3)
/* the first c (1-4) of four rows stride floats apart; past c the first
 * again, so no pointer leaves its buffer (ER_ATT_FIRST3's rule) */
#define HEADS_FIRST(p, stride, c)                                                                                    \
    {(p), (c) > 1 ? (p) + (stride) : (p), (c) > 2 ? (p) + 2 * (size_t)(stride) : (p),                                \
     (c) > 3 ? (p) + 3 * (size_t)(stride) : (p)}

/* Prefetch the cache lines of [p, p + n) into L1 (t0) or L2 (t1); a
 * prefetch never faults, so an address past the buffer is harmless. Two
 * functions because clang wants the hint a literal constant. */
static AI void prefetch_t0(const char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

static AI void prefetch_t1(const char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
}

/* Eight positions' rows of head_dim (a multiple of 8) against q: eight
 * independent FMA chains (one per position, so the 4-cycle FMA latency is
 * hidden), reduced together by a transposing hadd tree into one vector of
 * eight scores, instead of a call and a horizontal sum per position. */
static AI __m256 scores8(const unsigned char *kb, size_t row_bytes, const float *q, int head_dim, const int f16) {
    __m256 a[8];
    for (int p = 0; p < 8; p++) a[p] = _mm256_setzero_ps();
    for (int j = 0; j < head_dim; j += 8) {
        const __m256 qv = _mm256_loadu_ps(q + j);
        for (int p = 0; p < 8; p++) {
            const unsigned char *r = kb + (size_t)p * row_bytes;
            const __m256 kv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                                  : _mm256_loadu_ps((const float *)(const void *)r + j);
            a[p] = _mm256_fmadd_ps(kv, qv, a[p]);
        }
    }
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* The one-query kernel and, further down, prefill's paths are the avx2
 * build's in both tables (table_avx2.c): built with the VNNI flags,
 * prefill's attention took 992-1079 ms where avx2's took 905-1015 (110M
 * shape, 12 query heads on 4, 1,536 tokens, 1 thread, alternating runs). */
#if !ER_X86_VNNI
/* out[j0 .. j0 + 8 * nv) = sum_t scores[t] v_t, the nv (<= 8) output vectors
 * held in registers across all positions rather than loaded and stored per
 * position (a store-to-load chain through out). */
static AI void weighted_sum(float *out, const unsigned char *vb, size_t row_bytes, const float *scores, int n_kv,
                            int j0, const int nv, const int f16) {
    __m256 o[8];
    for (int i = 0; i < nv; i++) o[i] = _mm256_setzero_ps();
    for (int t = 0; t < n_kv; t++) {
        const __m256 p = _mm256_broadcast_ss(scores + t);
        const unsigned char *r = vb + (size_t)t * row_bytes;
        if (t + PF_V_ROWS < n_kv)
            prefetch_t0((const char *)r + PF_V_ROWS * row_bytes + (size_t)j0 * (f16 ? 2 : 4), (size_t)nv * (f16 ? 16 : 32));
        for (int i = 0; i < nv; i++) {
            const int j = j0 + 8 * i;
            const __m256 vv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                                  : _mm256_loadu_ps((const float *)(const void *)r + j);
            o[i] = _mm256_fmadd_ps(p, vv, o[i]);
        }
    }
    for (int i = 0; i < nv; i++) _mm256_storeu_ps(out + j0 + 8 * i, o[i]);
}

static AI void attention_x8(float *out, const float *q, const unsigned char *kb, const unsigned char *vb,
                            size_t row_bytes, int n_kv, int head_dim, float scale, float *scores, const int f16) {
    const __m256 sv = _mm256_set1_ps(scale);
    int t = 0;
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4); /* one head's bytes in a K or V row */
    for (; t + 8 <= n_kv; t += 8) {
        for (int p = 0; p < 8; p++) {
            const char *kr = (const char *)kb + (size_t)(t + p) * row_bytes;
            if (t + p + PF_K_ROWS < n_kv) prefetch_t0(kr + PF_K_ROWS * row_bytes, hb);
            /* the next two heads' K and V columns of the same row (L2):
             * the caller walks heads in order, one thread taking every head
             * or two alternating; past the last head this reads ahead into
             * the next row, also ours */
            const char *vr = (const char *)vb + (size_t)(t + p) * row_bytes;
            prefetch_t1(kr + hb, 2 * hb);
            prefetch_t1(vr + hb, 2 * hb);
        }
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(sv, scores8(kb + (size_t)t * row_bytes, row_bytes, q, head_dim, f16)));
    }
    for (; t < n_kv; t++) {
        const void *kr = kb + (size_t)t * row_bytes;
        scores[t] = scale * (f16 ? er_avx2_dot_f16(head_dim, kr, q) : er_avx2_dot_f32(head_dim, kr, q));
    }
    er_avx2_softmax(scores, n_kv);
    int j = 0;
    for (; j + 64 <= head_dim; j += 64) weighted_sum(out, vb, row_bytes, scores, n_kv, j, 8, f16);
    switch ((head_dim - j) / 8) {
    case 7: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 7, f16); break;
    case 6: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 6, f16); break;
    case 5: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 5, f16); break;
    case 4: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 4, f16); break;
    case 3: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 3, f16); break;
    case 2: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 2, f16); break;
    case 1: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 1, f16); break;
    default: break;
    }
}

void er_avx2_attention(float *out, const float *q, const void *k, const void *v, int kv_type, size_t kv_stride,
                       int n_kv, int head_dim, float scale, float *scores) {
    const int f16 = kv_type == ER_KV_F16;
    const size_t esz = f16 ? 2 : 4;
    const unsigned char *kb = k, *vb = v;
    /* every head size the supported models use (64, 128, ...): the blocked
     * path; anything else the plain loops below */
    if (head_dim > 0 && head_dim % 8 == 0) {
        /* the usual head sizes as constants: the prefetch and dot loops over
         * a head's bytes then unroll (F16, 64 wide, 12 layers x 12 query
         * heads on 4 K/V heads, caches flushed: 2.69 -> 2.50 ms a token at
         * 1,600 positions, 0.21 -> 0.20 ms at 128) */
        if (f16 && head_dim == 64)
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, 64, scale, scores, 1);
        else if (f16 && head_dim == 128)
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, 128, scale, scores, 1);
        else if (f16)
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 1);
        else
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 0);
        return;
    }
    for (int t = 0; t < n_kv; t++) {
        const void *kr = kb + (size_t)t * kv_stride * esz;
        scores[t] = scale * (f16 ? er_avx2_dot_f16(head_dim, kr, q) : er_avx2_dot_f32(head_dim, kr, q));
    }
    er_avx2_softmax(scores, n_kv);
    if (head_dim <= 0)
        return;
    for (int j = 0; j < head_dim; j++)
        out[j] = 0.0f;
    for (int t = 0; t < n_kv; t++) {
        const __m256 p = _mm256_set1_ps(scores[t]);
        const unsigned char *vr = vb + (size_t)t * kv_stride * esz;
        int j = 0;
        if (f16) {
            const er_f16 *h = (const er_f16 *)(const void *)vr;
            for (; j + 8 <= head_dim; j += 8) {
                const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + j)));
                _mm256_storeu_ps(out + j, _mm256_fmadd_ps(p, vv, _mm256_loadu_ps(out + j)));
            }
            for (; j < head_dim; j++)
                out[j] += scores[t] * _cvtsh_ss(h[j]);
        } else {
            const float *f = (const float *)(const void *)vr;
            for (; j + 8 <= head_dim; j += 8)
                _mm256_storeu_ps(out + j, _mm256_fmadd_ps(p, _mm256_loadu_ps(f + j), _mm256_loadu_ps(out + j)));
            for (; j < head_dim; j++)
                out[j] += scores[t] * f[j];
        }
    }
}
#endif

/*
 * A few queries at one position (a grouped-query decode step: the query
 * heads of one K/V head), up to 3 at a time in registers, so that each K and
 * V vector is converted once for the 3 rather than once per query, the
 * conversion being what bounds the one-query kernel. Scores: 4 positions x
 * c queries, each score reduced by scores8's own hadd tree for its position;
 * V: a few output vectors x c queries, each output the same FMA chain in
 * position order. So each query's result is the one-query kernel's, bit for
 * bit. Prefetch as attention_x8: rows ahead, and the next K/V heads'
 * columns for the item after this one.
 */
/* scores of c queries for positions [t, t + 4), stored at s[i] + t: four
 * FMA chains per query over the head, each reduced by scores8's hadd tree */
static AI void few4(float *const *s, const float *const *q, const unsigned char *kb, size_t row_bytes, int t,
                    int head_dim, float scale, const int c, const int f16) {
    __m256 a[HEADS_MAX][4];
    for (int i = 0; i < c; i++)
        for (int p = 0; p < 4; p++) a[i][p] = _mm256_setzero_ps();
    for (int j = 0; j < head_dim; j += 8) {
        __m256 kv[4];
        for (int p = 0; p < 4; p++) {
            const unsigned char *r = kb + (size_t)(t + p) * row_bytes;
            kv[p] = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                        : _mm256_loadu_ps((const float *)(const void *)r + j);
        }
        for (int i = 0; i < c; i++)
            for (int p = 0; p < 4; p++) a[i][p] = _mm256_fmadd_ps(kv[p], _mm256_loadu_ps(q[i] + j), a[i][p]);
    }
    const __m128 sv = _mm_set1_ps(scale);
    for (int i = 0; i < c; i++) {
        const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[i][0], a[i][1]), _mm256_hadd_ps(a[i][2], a[i][3]));
        _mm_storeu_ps(s[i] + t, _mm_mul_ps(sv, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1))));
    }
}

#if !ER_X86_VNNI
static AI void few_scores(float *const *s, const float *const *q, const unsigned char *kb, const unsigned char *vb,
                          size_t row_bytes, int n_kv, int head_dim, float scale, const int c, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    const int full = n_kv / 8 * 8; /* scores8's groups; the rest are dots */
    int t = 0;
    for (; t < full; t += 4) {
        for (int p = 0; p < 4; p++) {
            const char *kr = (const char *)kb + (size_t)(t + p) * row_bytes;
            if (t + p + PF_K_ROWS < n_kv) prefetch_t0(kr + PF_K_ROWS * row_bytes, hb);
            prefetch_t1(kr + hb, 2 * hb);
            prefetch_t1((const char *)vb + (size_t)(t + p) * row_bytes + hb, 2 * hb);
        }
        few4(s, q, kb, row_bytes, t, head_dim, scale, c, f16);
    }
    for (; t < n_kv; t++) {
        const void *kr = kb + (size_t)t * row_bytes;
        for (int i = 0; i < c; i++)
            s[i][t] = scale * (f16 ? er_avx2_dot_f16(head_dim, kr, q[i]) : er_avx2_dot_f32(head_dim, kr, q[i]));
    }
}
#endif

/* out[i][j0 .. j0 + 8 * nv) = sum_t p[i][t] v_t for c queries over rows
 * [t0, t1), started from zero when first or continued from out[]; rows
 * prefetched ahead when prefetch (the per-head walk; the row walk and the
 * copy path fetch whole blocks themselves) */
static AI void few_wsum(float *const *out, const float *const *p, const unsigned char *vb, size_t row_bytes, int t0,
                        int t1, int j0, const int nv, const int c, const int f16, const int prefetch,
                        const int first) {
    __m256 o[HEADS_MAX][8];
    for (int i = 0; i < c; i++)
        for (int k = 0; k < nv; k++) o[i][k] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out[i] + j0 + 8 * k);
    for (int t = t0; t < t1; t++) {
        const unsigned char *r = vb + (size_t)t * row_bytes;
        if (prefetch && t + PF_V_ROWS < t1)
            prefetch_t0((const char *)r + PF_V_ROWS * row_bytes + (size_t)j0 * (f16 ? 2 : 4),
                        (size_t)nv * (f16 ? 16 : 32));
        __m256 vv[8];
        for (int k = 0; k < nv; k++) {
            const int j = j0 + 8 * k;
            vv[k] = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                        : _mm256_loadu_ps((const float *)(const void *)r + j);
        }
        for (int i = 0; i < c; i++) {
            const __m256 w = _mm256_broadcast_ss(p[i] + t);
            for (int k = 0; k < nv; k++) o[i][k] = _mm256_fmadd_ps(w, vv[k], o[i][k]);
        }
    }
    for (int i = 0; i < c; i++)
        for (int k = 0; k < nv; k++) _mm256_storeu_ps(out[i] + j0 + 8 * k, o[i][k]);
}

/* few_wsum over a whole head for c (1 to HEADS_MAX) queries, rows [t0, t1),
 * started when first. Output vectors per pass: c x nv sums, nv V vectors
 * and a weight in the 16 registers (as few_x8), except 3 queries over float
 * rows (the copy path's, an F32 cache) take 4: a float V vector can stay an
 * FMA memory operand where a half's must be converted into a register. That
 * took the copy path's 15 queries over 1,400 rows from 387 to 357 us. In
 * the VNNI build's 32 registers 3 queries take 4 over halves too, and 4
 * queries 2 (4 x 4 sums gained nothing over 4 x 2 in attention_stream). */
static AI void rows_sums(float *const *o, const float *const *p, const unsigned char *vb, size_t row_bytes, int t0,
                         int t1, int head_dim, const int c, const int f16, const int first) {
    const int nv = c == 1 ? 8 : c == 4 ? 2 : c == 2 || !f16 || ER_X86_VNNI ? 4 : 2;
    int j = 0;
    for (; j + 8 * nv <= head_dim; j += 8 * nv) few_wsum(o, p, vb, row_bytes, t0, t1, j, nv, c, f16, 0, first);
    if (c > 1) {
        for (; j < head_dim; j += 8) few_wsum(o, p, vb, row_bytes, t0, t1, j, 1, c, f16, 0, first);
        return;
    }
    /* one query: the rest in one pass, as attention_x8 (48-wide heads: 6) */
    switch ((head_dim - j) / 8) {
    case 7: few_wsum(o, p, vb, row_bytes, t0, t1, j, 7, 1, f16, 0, first); break;
    case 6: few_wsum(o, p, vb, row_bytes, t0, t1, j, 6, 1, f16, 0, first); break;
    case 5: few_wsum(o, p, vb, row_bytes, t0, t1, j, 5, 1, f16, 0, first); break;
    case 4: few_wsum(o, p, vb, row_bytes, t0, t1, j, 4, 1, f16, 0, first); break;
    case 3: few_wsum(o, p, vb, row_bytes, t0, t1, j, 3, 1, f16, 0, first); break;
    case 2: few_wsum(o, p, vb, row_bytes, t0, t1, j, 2, 1, f16, 0, first); break;
    case 1: few_wsum(o, p, vb, row_bytes, t0, t1, j, 1, 1, f16, 0, first); break;
    default: break;
    }
}

#if !ER_X86_VNNI
/* c (1-3) queries that all see n_kv positions; scores: c * n_kv floats */
static AI void few_x8(float *const *out, const float *const *q, const unsigned char *kb, const unsigned char *vb,
                      size_t row_bytes, int n_kv, int head_dim, float scale, float *scores, const int c,
                      const int f16) {
    float *s[3];
    for (int i = 0; i < c; i++) s[i] = scores + (size_t)i * n_kv;
    few_scores(s, q, kb, vb, row_bytes, n_kv, head_dim, scale, c, f16);
    for (int i = 0; i < c; i++) er_avx2_softmax(s[i], n_kv);
    /* 4 output vectors per pass (2 for 3 queries: 6 sums, 2 V vectors and
     * the weight in registers) */
    const int nv = c == 3 ? 2 : 4;
    int j = 0;
    const float *const *ps = (const float *const *)s;
    for (; j + 8 * nv <= head_dim; j += 8 * nv) few_wsum(out, ps, vb, row_bytes, 0, n_kv, j, nv, c, f16, 1, 1);
    for (; j < head_dim; j += 8) few_wsum(out, ps, vb, row_bytes, 0, n_kv, j, 1, c, f16, 1, 1);
}

/*
 * The copy path (attention_multi for the tokens of a prefill chunk):
 * ER_ATTENTION_COPY_WALK (attention_paths.h) over a float copy of each
 * block of rows, three queries at a time.
 */

/* rows [t0, t0 + nb) of one head (head_dim elements, row_bytes apart) as
 * floats at buf, head_dim apart; the next block's rows prefetched into L1 */
static AI void rows_to_f32(float *buf, const unsigned char *base, size_t row_bytes, int t0, int nb, int n_max,
                           int head_dim, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    for (int r = 0; r < nb; r++) {
        const unsigned char *src = base + (size_t)(t0 + r) * row_bytes;
        if (t0 + ER_ATT_BLOCK + r < n_max) prefetch_t0((const char *)src + ER_ATT_BLOCK * row_bytes, hb);
        float *dst = buf + (size_t)r * head_dim;
        for (int j = 0; j < head_dim; j += 8) {
            const void *e = src + (size_t)j * (f16 ? 2 : 4);
            const __m256 v =
                f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e)) : _mm256_loadu_ps((const float *)e);
            _mm256_storeu_ps(dst + j, v);
        }
    }
}
#endif

/* the 8 rows at kb against q, scaled, stored at s */
static AI void scores8_at(float *s, const unsigned char *kb, size_t row_bytes, const float *q, int head_dim,
                          float scale, const int f16) {
    _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(scale), scores8(kb, row_bytes, q, head_dim, f16)));
}

static AI float dot1(int head_dim, const void *row, const float *q, const int f16) {
    return f16 ? er_avx2_dot_f16(head_dim, row, q) : er_avx2_dot_f32(head_dim, row, q);
}

#if !ER_X86_VNNI
static AI void multi_x8(float *const *out, const float *const *q, const int *n_kv, int nq, const unsigned char *kb,
                        const unsigned char *vb, size_t row_bytes, int head_dim, float scale, float *scratch,
                        const int f16) {
    ER_ATTENTION_COPY_WALK(rows_to_f32, few4, scores8_at, dot1, er_avx2_softmax, rows_sums);
}

void er_avx2_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                             const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch) {
    ER_ATTENTION_MULTI(8, few_x8, multi_x8, er_avx2_attention);
}
#endif

/*
 * attention_heads: a decode step's K/V heads row by row (where query heads
 * share a K/V head; with one each, the address-order walk further down).
 * The one-query
 * kernel walks one head's column down the cache, then the next head's:
 * 128 bytes of every 1,536-byte row for 12 heads of 64, a stride at which
 * the rows land in 8 of L1's 64 sets and the prefetchers see 12 strided
 * walks a layer instead of one stream. Here each block of 8 rows is taken
 * across all the heads before the next block, K for the scores, then V for
 * the sums, each output's FMA chain carried from block to block through
 * out[] (a float stored and loaded back is exact). Per query it is the
 * one-query kernel's arithmetic: scores8's groups (few4's where query heads
 * share a K/V head, as in the few path), the same tail dots and softmax,
 * and each output the same chain in position order: bit for bit.
 *
 * Measured, 12 layers x 12 heads of 64, F16, one token, 1 thread, caches
 * flushed by a 96 MiB read between tokens (min of 35 against the per-head
 * loop): 128 positions 0.35 -> 0.31 ms (warm 0.18 -> 0.10), 512 positions
 * 1.32 -> 1.11, 1,000 positions 2.61 -> 2.04. The walk itself, shared
 * with NEON, is ER_ATTENTION_SCORES_WALK then ER_ATTENTION_SUMS_WALK in
 * attention_paths.h; attention_scores and attention_sums are its halves.
 */

/* c (1 to WALK_HEADS) query heads of one K/V head: scores of rows
 * [t, t + 8), or their sums over V rows [t0, t1); q, out and sc at the
 * first of the c */
static AI void heads_scores(float *sc, int n_kv, const float *q, const unsigned char *kh, size_t row_bytes, int t,
                            int head_dim, float scale, const int c, const int f16) {
    if (c == 1) {
        scores8_at(sc + t, kh + (size_t)t * row_bytes, row_bytes, q, head_dim, scale, f16);
        return;
    }
    float *const s[4] = HEADS_FIRST(sc, n_kv, c);
    const float *const qs[4] = HEADS_FIRST(q, head_dim, c);
    few4(s, qs, kh, row_bytes, t, head_dim, scale, c, f16);
    few4(s, qs, kh, row_bytes, t + 4, head_dim, scale, c, f16);
}

static AI void heads_sums(float *out, const float *sc, int n_kv, const unsigned char *vh, size_t row_bytes, int t0,
                          int t1, int head_dim, const int c, const int f16) {
    float *const o[4] = HEADS_FIRST(out, head_dim, c);
    const float *const p[4] = HEADS_FIRST(sc, n_kv, c);
    rows_sums(o, p, vh, row_bytes, t0, t1, head_dim, c, f16, t0 == 0);
}

static AI void prefetch_l2(const unsigned char *p, size_t n) { prefetch_t1((const char *)p, n); }

/*
 * With one query head per K/V head (group 1: the 110M model's 12 heads of
 * 64), both halves walk the cache one row at a time, every head of a row,
 * and every load in address order: the hardware prefetchers then see one
 * forward stream and keep it coming while the FMAs run. The per-head walk
 * above (8 rows of one head, then the next head) reads the same 24 KB
 * blocks out of order, and from DRAM ran about as if every load waited for
 * memory and the arithmetic after it: 18-20 GB/s where a plain read gets
 * 31, and the same kernels from L2 ran at 50-66. A row walk that took the
 * heads' first vectors, then their second ones... (8 loads 256 bytes apart)
 * got 11-13 GB/s without software prefetch; in address order, 31-34.
 * Software prefetch stays, spread over the loads: each line PF_ROW_ROWS
 * rows ahead as its counterpart here is read (a whole row's 48 lines at
 * once was slower).
 *
 * Bit for bit as the per-head walk: a score is the same FMA chain over the
 * head and the same hadd tree (scores8's, a lane of which depends on its
 * own accumulator only), scaled the same; the rows after the last whole
 * block of 8 take dot1 as before; each output is the same chain of FMAs in
 * position order, carried through out[] (a float stored and loaded back is
 * exact), from zero as few_wsum starts it.
 *
 * Measured (Zen 4 VM, 1 thread, 12 layers x 12 heads of 64, the cache on
 * 2 MiB pages, caches flushed by a 64 MiB read before each token, medians
 * of 60, two alternating rounds), us a token, scores + sums:
 *   400 positions F32 655 + 733, 613 + 758 -> 468 + 542, 433 + 508;
 *                 F16 279 + 343, 260 + 335 -> 225 + 284, 221 + 284;
 *   40 positions  F32 74 + 89, 65 + 84 -> 65 + 80, 60 + 77;
 *                 F16 41 + 47, 40 + 47 -> 33 + 42, 32 + 41;
 *   16 positions  F32 31 + 38 -> 19 + 29, F16 21 + 28 -> 16 + 22.
 * The price is paid where the cache is already in L3 (128 positions, no
 * flush): F32 79 + 95 -> 118 + 126, F16 52 + 65 -> 58 + 84: the sums carry
 * every output through memory, and one head's chain runs 8 FMAs deep
 * before the next head's loads. Sums over two rows at a time (each output
 * vector loaded and stored once for both, the rows' slices interleaved)
 * won that back warm (F32 119 -> 88 us, F16 84 -> 65) and lost 7-13% cold
 * (F32 653-693 -> 738-751 us at 400 positions). Query heads that share a
 * K/V head keep the per-head walk: a row walk for them, one K or V vector
 * loaded for all the group's queries, ran the sums 2.5x slower (8 outputs
 * through memory per V vector) and the scores within 10% either way. A decode step reads its cache from DRAM. In the 110M model (Q4_0, one
 * token after 400, median of alternating runs, us of attention a step;
 * 1 thread: 1 slot, 4 slots batched): F32 cache 1,689 -> 1,286 and
 * 6,218 -> 5,090; F16 658 -> 540 and 2,722 -> 2,429; 16 positions F32
 * 164 -> 144 and 691 -> 582. 2 threads (the split of forward.c), 4 slots:
 * F32 6,817 -> 5,398 at 400 positions, 845 -> 666 at 16.
 */
#define PF_ROW_ROWS 16

/* c (1-8) query heads (q head_dim apart) against their slices of one K row
 * (hb bytes apart), scaled, stored at sc + i * n_kv; each line pfo bytes
 * ahead prefetched towards L2 as its counterpart is read (none at 0) */
static AI void row_scores(float *sc, int n_kv, const float *q, const unsigned char *row, size_t hb, int head_dim,
                          float scale, const int c, const int f16, size_t pfo) {
    const size_t esz = f16 ? 2 : 4;
    __m256 a[8];
    for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
    for (int i = 0; i < c; i++)
        for (int j = 0; j < head_dim; j += 8) {
            const unsigned char *r = row + (size_t)i * hb + (size_t)j * esz;
            if (pfo && (size_t)j * esz % 64 == 0) _mm_prefetch((const char *)r + pfo, _MM_HINT_T1);
            const __m256 kv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)r))
                                  : _mm256_loadu_ps((const float *)(const void *)r);
            a[i] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + (size_t)i * head_dim + j), a[i]);
        }
    /* scores8's tree; past c the accumulators are zeros and their lanes unused */
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    const __m256 x = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    float s[8];
    _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(scale), x));
    for (int i = 0; i < c; i++) sc[(size_t)i * n_kv] = s[i];
}

/* ER_ATTENTION_SCORES_WALK's contract (attention_paths.h), group 1 */
static AI void row_scores_walk(float *sc, const float *q, int n_kv, int t0, int t1, const unsigned char *kb, int nh,
                               float scale, size_t row_bytes, int head_dim, const int f16) {
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4);
    const int full = n_kv / 8 * 8 < t1 ? n_kv / 8 * 8 : t1;
    for (int t = t0; t < full; t++) {
        const unsigned char *row = kb + (size_t)t * row_bytes;
        const size_t pfo = t + PF_ROW_ROWS < t1 ? PF_ROW_ROWS * row_bytes : 0;
        int h = 0;
        for (; h + 8 <= nh; h += 8)
            row_scores(sc + (size_t)h * n_kv + t, n_kv, q + (size_t)h * head_dim, row + h * hb, hb, head_dim, scale, 8,
                       f16, pfo);
        float *const s = sc + (size_t)h * n_kv + t;
        const float *const qh = q + (size_t)h * head_dim;
        const unsigned char *const rh = row + h * hb;
        switch (nh - h) {
        case 7: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 7, f16, pfo); break;
        case 6: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 6, f16, pfo); break;
        case 5: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 5, f16, pfo); break;
        case 4: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 4, f16, pfo); break;
        case 3: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 3, f16, pfo); break;
        case 2: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 2, f16, pfo); break;
        case 1: row_scores(s, n_kv, qh, rh, hb, head_dim, scale, 1, f16, pfo); break;
        default: break;
        }
    }
    for (int t = full > t0 ? full : t0; t < t1; t++)
        for (int i = 0; i < nh; i++)
            sc[(size_t)i * n_kv + t] =
                scale * dot1(head_dim, kb + (size_t)i * hb + (size_t)t * row_bytes, q + (size_t)i * head_dim, f16);
}

/* ER_ATTENTION_SUMS_WALK's contract, group 1 */
static AI void row_sums_walk(float *out, float *sc, int n_kv, const unsigned char *vb, int nh, size_t row_bytes,
                             int head_dim, const int f16) {
    const size_t esz = f16 ? 2 : 4, hb = (size_t)head_dim * esz;
    for (int i = 0; i < nh; i++) er_avx2_softmax(sc + (size_t)i * n_kv, n_kv);
    for (int i = 0; i < nh * head_dim; i++) out[i] = 0.0f;
    for (int t = 0; t < n_kv; t++) {
        const unsigned char *row = vb + (size_t)t * row_bytes;
        const size_t pfo = t + PF_ROW_ROWS < n_kv ? PF_ROW_ROWS * row_bytes : 0;
        for (int h = 0; h < nh; h++) {
            const __m256 w = _mm256_broadcast_ss(sc + (size_t)h * n_kv + t);
            float *const o = out + (size_t)h * head_dim;
            for (int j = 0; j < head_dim; j += 8) {
                const unsigned char *r = row + h * hb + (size_t)j * esz;
                if (pfo && (size_t)j * esz % 64 == 0) _mm_prefetch((const char *)r + pfo, _MM_HINT_T1);
                const __m256 vv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)r))
                                      : _mm256_loadu_ps((const float *)(const void *)r);
                _mm256_storeu_ps(o + j, _mm256_fmadd_ps(w, vv, _mm256_loadu_ps(o + j)));
            }
        }
    }
}

static AI void scores_x8(float *sc, const float *q, int n_kv, int t0, int t1, const unsigned char *kb, int nkv,
                         int group, float scale, size_t row_bytes, int head_dim, const int f16) {
    if (group == 1) {
        row_scores_walk(sc, q, n_kv, t0, t1, kb, nkv, scale, row_bytes, head_dim, f16);
        return;
    }
    ER_ATTENTION_SCORES_WALK(WALK_HEADS, heads_scores, dot1, prefetch_l2);
}

static AI void sums_x8(float *out, float *sc, int n_kv, const unsigned char *vb, int nkv, int group, size_t row_bytes,
                       int head_dim, const int f16) {
    if (group == 1) {
        row_sums_walk(out, sc, n_kv, vb, nkv, row_bytes, head_dim, f16);
        return;
    }
    ER_ATTENTION_SUMS_WALK(WALK_HEADS, heads_sums, er_avx2_softmax, prefetch_l2);
}

/* The VNNI build's registers pay from 3 query heads per K/V head; with 1 or
 * 2 it hands over to the avx2 build, whose code they ran before (110M, Qwen3:
 * the same speed either way within this VM's noise, 6 alternating runs). */
#if ER_X86_VNNI
#define FEW_HEADS_TO_AVX2(call)                                                                                        \
    if (group < 3) {                                                                                                   \
        call;                                                                                                          \
        return;                                                                                                        \
    }
#else
#define FEW_HEADS_TO_AVX2(call)
#endif

void ER_X86_FN(attention_heads)(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                                size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch) {
    FEW_HEADS_TO_AVX2(er_avx2_attention_heads(out, q, n_kv, k, v, kv_type, kv_stride, nkv, group, head_dim, scale,
                                              scratch))
    ER_ATTENTION_HEADS(8, scores_x8, sums_x8, er_avx2_attention);
}

void ER_X86_FN(attention_scores)(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                                 size_t kv_stride, int nkv, int group, int head_dim, float scale) {
    FEW_HEADS_TO_AVX2(er_avx2_attention_scores(sc, q, n_kv, t0, t1, k, kv_type, kv_stride, nkv, group, head_dim, scale))
    ER_ATTENTION_SCORES(8, scores_x8);
}

void ER_X86_FN(attention_sums)(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                               int group, int head_dim) {
    FEW_HEADS_TO_AVX2(er_avx2_attention_sums(out, sc, n_kv, v, kv_type, kv_stride, nkv, group, head_dim))
    ER_ATTENTION_SUMS(8, sums_x8);
}
