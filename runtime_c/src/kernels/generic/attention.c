/*
 * attention.c — one query head against n_kv cached key/value rows.
 *
 * Two passes (scores, then the weighted sum of V) instead of an online
 * softmax: the caller supplies n_kv floats of scratch, and the plain order
 * is the readable reference the SIMD and flash-style variants are tested
 * against.
 */
#include "generic.h"
#include "../attention_paths.h"
#include "../half.h"
#include "edgerun.h" /* ER_KV_F16 */

#include <string.h>

void er_gen_attention(float *out, const float *q, const void *k, const void *v, int kv_type,
                      size_t kv_stride, int n_kv, int head_dim, float scale, float *scores) {
    er_gen_attention_scores(scores, q, n_kv, 0, n_kv, k, kv_type, kv_stride, 1, 1, head_dim, scale);
    er_gen_attention_sums(out, scores, n_kv, v, kv_type, kv_stride, 1, 1, head_dim);
}

/* The reference for attention_multi: the one-query kernel per query, which
 * the SIMD tables' blocked versions must match bit for bit. */
void er_gen_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                            const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch) {
    for (int i = 0; i < nq; i++)
        er_gen_attention(out[i], q[i], k, v, kv_type, kv_stride, n_kv[i], head_dim, scale, scratch);
}

/* The reference for attention_heads: the one-query kernel per query head. */
void er_gen_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                            size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch) {
    ER_ATTENTION_HEADS_LOOP(er_gen_attention);
}

/* attention_heads' halves, and the two passes of er_gen_attention above
 * (one query: nkv = group = 1): the generic table's entries, and what the
 * SIMD tables fall back to for head sizes their walk does not take. */
void er_gen_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale) {
    const int f16 = kv_type == ER_KV_F16;
    const size_t esz = f16 ? sizeof(er_f16) : sizeof(float);
    for (int i = 0; i < nkv * group; i++) {
        const unsigned char *kb = (const unsigned char *)k + (size_t)(i / group) * head_dim * esz;
        const float *qi = q + (size_t)i * head_dim;
        for (int t = t0; t < t1; t++) {
            const void *kr = kb + (size_t)t * kv_stride * esz;
            float d = f16 ? er_gen_dot_f16(head_dim, kr, qi) : er_gen_dot_f32(head_dim, kr, qi);
            sc[(size_t)i * n_kv + t] = scale * d;
        }
    }
}

void er_gen_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                           int group, int head_dim) {
    const int f16 = kv_type == ER_KV_F16;
    const size_t esz = f16 ? sizeof(er_f16) : sizeof(float);
    for (int i = 0; i < nkv * group; i++) {
        const unsigned char *vb = (const unsigned char *)v + (size_t)(i / group) * head_dim * esz;
        float *scores = sc + (size_t)i * n_kv, *o = out + (size_t)i * head_dim;
        er_gen_softmax(scores, n_kv);
        memset(o, 0, (size_t)(head_dim > 0 ? head_dim : 0) * sizeof(float));
        for (int t = 0; t < n_kv; t++) {
            const float p = scores[t];
            if (f16) {
                const er_f16 *vr = (const er_f16 *)(const void *)(vb + (size_t)t * kv_stride * esz);
                for (int j = 0; j < head_dim; j++) o[j] += p * er_half_to_float(vr[j]);
            } else {
                const float *vr = (const float *)(const void *)(vb + (size_t)t * kv_stride * esz);
                for (int j = 0; j < head_dim; j++) o[j] += p * vr[j];
            }
        }
    }
}
