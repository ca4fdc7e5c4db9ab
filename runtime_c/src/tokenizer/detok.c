/*
 * detok.c — ids back to text, whole or streamed token by token.
 *
 * Every token's bytes were decoded at open (vocab.c), so decoding is copying
 * plus two rules:
 *  - UTF-8 repair: bytes pass through a validator; an incomplete sequence is
 *    held in the caller's state until it completes, and an invalid one
 *    becomes U+FFFD per maximal ill-formed subpart — what Python's
 *    decode("utf-8", "replace") and Rust's from_utf8_lossy (so Hugging Face)
 *    produce.
 *  - SentencePiece's dummy prefix: the first token of a stream loses the
 *    leading space its "▁" stands for (sentencepiece strips it from the first
 *    piece only; "▁" alone first decodes to nothing). Byte, control and
 *    unknown pieces keep theirs, as in sentencepiece.
 */
#include <string.h>

#include "../error.h"
#include "vocab_internal.h"

/* Bytes go through `w`, which counts past cap so callers learn the size they need. */
typedef struct writer {
    char *out;
    size_t cap, n;
} writer;

static inline void put(writer *w, const void *p, size_t n) {
    if (w->n < w->cap) {
        size_t k = w->cap - w->n < n ? w->cap - w->n : n;
        memcpy(w->out + w->n, p, k);
    }
    w->n += n;
}

static const char FFFD[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Bytes a lead byte announces (0: not a lead byte). */
static inline int seq_len(uint8_t c) {
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether c can follow the pending bytes p[0..n) (n >= 1). */
static inline int continues(const uint8_t *p, int n, uint8_t c) {
    if (n == 1) {
        switch (p[0]) {
        case 0xE0: return c >= 0xA0 && c <= 0xBF; /* no overlongs */
        case 0xED: return c >= 0x80 && c <= 0x9F; /* no surrogates */
        case 0xF0: return c >= 0x90 && c <= 0xBF;
        case 0xF4: return c >= 0x80 && c <= 0x8F; /* nothing past U+10FFFF */
        default: break;
        }
    }
    return c >= 0x80 && c <= 0xBF;
}

static void feed(er_detok_state *st, writer *w, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        if (st->n_pending > 0) {
            if (continues(st->pending, st->n_pending, c)) {
                st->pending[st->n_pending++] = c;
                if (st->n_pending == seq_len(st->pending[0])) {
                    put(w, st->pending, (size_t)st->n_pending);
                    st->n_pending = 0;
                }
                continue;
            }
            /* The held bytes were a maximal ill-formed subpart: one U+FFFD,
             * then c starts afresh. */
            put(w, FFFD, 3);
            st->n_pending = 0;
        }
        if (c < 0x80) put(w, &c, 1);
        else if (seq_len(c)) st->pending[st->n_pending++] = c;
        else put(w, FFFD, 3);
    }
}

static int bad_id(const er_vocab *v, int32_t id) {
    return er_fail(ER_EINVAL, "token id %d is out of range (vocabulary has %u tokens)", id, v->n_tokens);
}

/* One token into the stream. */
static void step(const er_vocab *v, er_detok_state *st, uint32_t id, writer *w) {
    size_t n;
    const uint8_t *p = er_vocab_dec(v, id, &n);
    if (v->kind == ER_VOCAB_SPM && v->add_space_prefix && st->n_emitted == 0 && n > 0 && p[0] == ' ' &&
        v->type[id] != ER_TT_BYTE && v->type[id] != ER_TT_CONTROL && v->type[id] != ER_TT_UNKNOWN) {
        p++;
        n--;
    }
    feed(st, w, p, n);
    if (st->n_emitted < INT32_MAX) st->n_emitted++; /* only "zero or not" matters */
}

static int check_state(const er_detok_state *st) {
    if (st->n_pending < 0 || st->n_pending > 3 || st->n_emitted < 0)
        return er_fail(ER_EINVAL, "er_detok_state is corrupt (zero-initialise it before the first call)");
    return ER_OK;
}

int er_detok_step(const er_vocab *v, er_detok_state *st, int32_t id, char *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || !st || !n_out || (!out && cap > 0)) return er_fail(ER_EINVAL, "er_detok_step: NULL argument");
    if (id < 0 || (uint32_t)id >= v->n_tokens) return bad_id(v, id);
    int rc = check_state(st);
    if (rc) return rc;
    /* Work on a copy so a too-small buffer leaves the stream where it was. */
    er_detok_state s = *st;
    writer w = {out, cap, 0};
    step(v, &s, (uint32_t)id, &w);
    *n_out = w.n;
    if (w.n > cap) return er_fail(ER_ERANGE, "er_detok_step: token %d needs %zu bytes, buffer has %zu", id, w.n, cap);
    *st = s;
    return ER_OK;
}

int er_detok_flush(const er_vocab *v, er_detok_state *st, char *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || !st || !n_out || (!out && cap > 0)) return er_fail(ER_EINVAL, "er_detok_flush: NULL argument");
    int rc = check_state(st);
    if (rc) return rc;
    size_t need = st->n_pending > 0 ? 3 : 0;
    *n_out = need;
    if (need > cap) return er_fail(ER_ERANGE, "er_detok_flush: needs %zu bytes, buffer has %zu", need, cap);
    if (need) memcpy(out, FFFD, 3);
    st->n_pending = 0;
    return ER_OK;
}

int er_detokenize(const er_vocab *v, const int32_t *ids, size_t n, int skip_special, char *out, size_t cap,
                  size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || !n_out || (!ids && n > 0) || (!out && cap > 0))
        return er_fail(ER_EINVAL, "er_detokenize: NULL argument");
    er_detok_state st = {{0}, 0, 0};
    writer w = {out, cap, 0};
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= v->n_tokens) return bad_id(v, ids[i]);
        int t = v->type[ids[i]];
        /* Hugging Face drops special added tokens; sentencepiece always shows
         * its unknown piece (" ⁇ "), so SPM keeps UNKNOWN. */
        if (skip_special && (t == ER_TT_CONTROL || (t == ER_TT_UNKNOWN && v->kind == ER_VOCAB_BPE))) continue;
        step(v, &st, (uint32_t)ids[i], &w);
    }
    if (st.n_pending > 0) put(&w, FFFD, 3);
    *n_out = w.n;
    if (w.n > cap) return er_fail(ER_ERANGE, "er_detokenize: text needs %zu bytes, buffer has %zu", w.n, cap);
    if (w.n < cap) out[w.n] = '\0';
    return ER_OK;
}
