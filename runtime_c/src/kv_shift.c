/*
 * kv_shift.c — the sliding context (er_options.ctx_strategy): when a decode
 * would pass n_ctx, forget the middle of the session and move the rest down.
 *
 * Kept: the first ctx_keep tokens and the most recent half of the others.
 * The kept recent rows move down by `drop` positions; RoPE is a rotation by
 * an angle linear in the position, so each K row is rotated by -drop with
 * its layer's own angles (the ones forward.c used: scaled frequencies and
 * factors for rope 1, gemma3's local base for rope 2) and lands where a
 * row computed at the new position would be. V rows and NoPE layers' K rows
 * only move. Caches where this is not exact are prefilled again (see
 * er_kv_slide_exact; edgerun.h, ER_CTX_SLIDE).
 */
#include <string.h>

#include "error.h"
#include "model.h"

/* 1 when every layer's rows can be moved and rotated in place. A ring row
 * is the position modulo the ring, LFM2's convolution ring too: moving every
 * position by `drop` would need the rows permuted. LongRoPE multiplies cos
 * and sin by its attention factor, so rotating by the delta with those
 * values would scale the row a second time. CUDA keeps its cache on the
 * device, where this file cannot reach. */
static int er_kv_slide_exact(const er_model *m) {
    if (m->cuda || m->d.conv_l || m->hp.rope_longrope || m->hp.rope_attn_factor != 1.0f) return 0;
    for (int l = 0; l < m->d.n_layer; l++)
        if (m->layers[l].ring || m->layers[l].conv) return 0;
    return 1;
}

/* The (cos, sin) pairs of a rotation by `delta` positions in a layer of
 * kind rope (1 or 2), computed as forward.c computes a position's angles. */
static void delta_angles(const er_model *m, int rope, int delta, float *cs) {
    const er_dims *d = &m->d;
    const er_hparams *hp = &m->hp;
    if (rope == 2)
        er_rope_angles(cs, d->head_dim, delta, hp->rope_freq_base_swa);
    else if (d->n_rot == d->head_dim && hp->rope_scale == 1.0f && !m->rope_freqs)
        er_rope_angles(cs, d->head_dim, delta, hp->rope_freq_base);
    else
        er_rope_angles_scaled(cs, d->n_rot, delta, hp->rope_freq_base, hp->rope_scale, m->rope_freqs);
}

/* Rows [keep + drop, pos) of every layer to [keep, pos - drop), K rotated.
 * Scratch: act.q (a K row of one cache block, as floats) and act.rope_cs
 * and act.rope_cs_swa (one position's angles); the caller holds step_lock. */
static void shift_rows(er_session *s, int keep, int drop) {
    er_model *m = s->model;
    const er_dims *d = &m->d;
    const int hd = d->head_dim, n_new = s->pos - drop;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    float *cs1 = m->act.rope_cs, *cs2 = m->act.rope_cs_swa, *row = m->act.q;
    delta_angles(m, 1, -drop, cs1);
    if (cs2) delta_angles(m, 2, -drop, cs2);
    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &m->layers[l];
        if (!L->kv_rows) continue;
        const float *cs = L->rope == 2 ? cs2 : cs1;
        for (int h = 0; h < d->n_head_kv; h += d->kv_blk) {
            size_t stride;
            const size_t first = er_kv_col_rows(d, L->kv_rows, h, 0, &stride);
            const int nh = (int)(stride / (size_t)hd);
            for (int v = 0; v < 2; v++) {
                uint8_t *base = er_kv_base(s, L, v, elem) + first * elem;
                for (int p = keep; p < n_new; p++) {
                    uint8_t *dst = base + (size_t)p * stride * elem;
                    const uint8_t *src = base + (size_t)(p + drop) * stride * elem;
                    if (v || !L->rope) {
                        memmove(dst, src, stride * elem);
                        continue;
                    }
                    if (d->kv_type == ER_KV_F16)
                        m->k->f16_to_f32((const er_f16 *)(const void *)src, row, (int)stride);
                    else
                        memcpy(row, src, stride * sizeof(float));
                    if (d->n_rot == hd)
                        m->k->rope_cs(row, nh, hd, cs, m->rope_neox);
                    else
                        for (int k = 0; k < nh; k++) m->k->rope_cs(row + (size_t)k * hd, 1, d->n_rot, cs, m->rope_neox);
                    if (d->kv_type == ER_KV_F16)
                        m->k->f32_to_f16(row, (er_f16 *)(void *)dst, (int)stride);
                    else
                        memcpy(dst, row, stride * sizeof(float));
                }
            }
        }
    }
}

int er_kv_slide(er_session *s) {
    er_model *m = s->model;
    const er_dims *d = &m->d;
    const int keep = m->ctx_keep < s->pos ? m->ctx_keep : s->pos;
    const int rest = s->pos - keep, drop = rest - rest / 2;
    if (drop < 1)
        return er_fail(ER_ECONTEXT, "context full: the session holds only the %d tokens ctx_keep keeps", keep);
    const int n_new = s->pos - drop;
    memmove(s->history + keep, s->history + keep + drop, (size_t)(n_new - keep) * sizeof(int32_t));
    s->has_logits = 0;
    if (m->ctx_strategy == ER_CTX_SLIDE && er_kv_slide_exact(m)) {
        shift_rows(s, keep, drop);
        s->pos = n_new;
        return ER_OK;
    }
    /* prefilled again from position 0: history[0, n_new) is read by the
     * embedding before each chunk's rows are written, and never overwritten */
    s->pos = 0;
    while (s->pos < n_new) {
        const int chunk = n_new - s->pos < d->n_batch ? n_new - s->pos : d->n_batch;
        int rc = er_forward(s, s->history + s->pos, chunk, NULL);
        if (rc) return rc;
        s->pos += chunk;
    }
    s->has_logits = 1;
    return ER_OK;
}

int er_session_history(const er_session *s, const int32_t **ids) {
    if (!s || !ids) return er_fail(ER_EINVAL, "er_session_history: NULL argument");
    *ids = s->history;
    return s->pos;
}
