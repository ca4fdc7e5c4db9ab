/*
 * spm.c — SentencePiece BPE (tokenizer.ggml.model = "llama").
 *
 * The text becomes one symbol per UTF-8 character (spaces as "▁", plus the
 * dummy-prefix "▁" when the file asks for it); then, repeatedly, the adjacent
 * pair whose concatenation is the vocabulary piece with the highest score
 * merges, as sentencepiece's BPE model and llama.cpp do. Where scores tie,
 * and for user-defined pieces (Gemma's whitespace runs), the order is
 * Hugging Face's: see pair_above and try_pair. Symbols that are not
 * pieces fall back to "<0xXX>" byte tokens, or — without byte tokens — to the
 * unknown token, one per run of unknown symbols as sentencepiece emits it.
 *
 * Scratch (per fragment of len bytes), see er_spm_scratch_bytes:
 *   text  3*len + 3 bytes  (every space can grow to "▁", plus the prefix)
 *   sym   (len+1) symbols  (a symbol is at least one byte, plus the prefix)
 *   heap  3*(len+1) pairs  (n-1 seeds, at most 2 new pairs per merge)
 */
#include <float.h>
#include <string.h>

#include "vocab_internal.h"

typedef struct sym {
    uint32_t off, len;      /* bytes in the prepared text; len 0 = merged away */
    uint32_t id;            /* the piece these bytes are, or ER_VOCAB_NO_ID */
    int32_t prev, next;
} sym;

typedef struct pair {
    float score;
    uint32_t id;            /* the merged piece */
    uint32_t left;          /* symbol index */
    uint32_t len;           /* bytes of the merged piece when queued (stale check) */
    uint32_t llen;          /* bytes of its left part */
} pair;

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

size_t er_spm_scratch_bytes(size_t len) {
    return ALIGN8(3 * len + 3) + sizeof(sym) * (len + 1) + sizeof(pair) * 3 * (len + 1) + 16;
}

/* Max-heap on score. Equal scores (sentencepiece gives every user-defined
 * piece 0) go by the merged piece's id, then the shorter left part, then the
 * leftmost pair: the rank order transformers gives the merges it derives
 * from a SentencePiece model (merged id, then left length), which for distinct
 * scores is the score order, since sentencepiece numbers pieces by
 * descending score. Only equal scores tell it from sentencepiece's own
 * order (leftmost first): a run of spaces longer than the longest
 * whitespace piece of Gemma's vocabulary splits as Hugging Face splits it. */
static inline int pair_above(const pair *a, const pair *b) {
    if (a->score != b->score) return a->score > b->score;
    if (a->id != b->id) return a->id < b->id;
    if (a->llen != b->llen) return a->llen < b->llen;
    return a->left < b->left;
}

static void heap_push(pair *h, size_t *n, pair p) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_above(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static pair heap_pop(pair *h, size_t *n) {
    pair top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && pair_above(&h[c + 1], &h[c])) c++;
        if (!pair_above(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void try_pair(const er_vocab *v, const uint8_t *t, const sym *s, int32_t l, int32_t r, pair *h, size_t *nh) {
    if (l < 0 || r < 0) return;
    /* Two pieces: the id-pair table says all (see build_spm_pairs). A symbol
     * that is no piece (a character outside the vocabulary) may still be
     * part of one: only then are the bytes looked up. */
    uint32_t id = s[l].id != ER_VOCAB_NO_ID && s[r].id != ER_VOCAB_NO_ID
                      ? er_vocab_spm_pair(v, s[l].id, s[r].id)
                      : er_vocab_find2(v, t + s[l].off, s[l].len, t + s[r].off, s[r].len);
    if (id == ER_VOCAB_NO_ID) return;
    /* User-defined pieces merge before every normal one, among themselves by
     * id: Hugging Face ranks them so (they come first in a SentencePiece
     * model, score 0 above the normal pieces' negative scores). The file's
     * score cannot say it: llama.cpp's converter writes -1000 for them. */
    float score = v->type[id] == ER_TT_USER_DEFINED ? FLT_MAX : v->score[id];
    pair p = {score, id, (uint32_t)l, s[l].len + s[r].len, s[l].len};
    heap_push(h, nh, p);
}

/* Merges one segment t[a..b) and emits its ids; *last_unk carries the
 * "previous id was an unknown run" state across segments. */
static void encode_segment(const er_vocab *v, const uint8_t *t, size_t a, size_t b, sym *s, pair *h,
                           er_idsink *out, int *last_unk) {
    if (v->whole) {
        uint32_t id = er_vocab_find(v, t + a, b - a);
        if (id != ER_VOCAB_NO_ID && v->whole[id]) {
            er_sink_push(out, id);
            *last_unk = 0;
            return;
        }
    }
    int32_t ns = 0;
    for (size_t off = a; off < b;) {
        uint32_t l = er_utf8_len(t[off]);
        if (l > b - off) l = (uint32_t)(b - off);
        s[ns].off = (uint32_t)off;
        s[ns].len = l;
        s[ns].id = t[off] < 0x80 ? v->spm_ascii[t[off]]
                   : l == 3 && t[off] == 0xE2 && t[off + 1] == 0x96 && t[off + 2] == 0x81
                       ? v->spm_ws
                       : er_vocab_find(v, t + off, l);
        s[ns].prev = ns - 1;
        s[ns].next = ns + 1;
        ns++;
        off += l;
    }
    s[ns - 1].next = -1;

    size_t nh = 0;
    for (int32_t i = 1; i < ns; i++) try_pair(v, t, s, i - 1, i, h, &nh);
    while (nh > 0) {
        pair p = heap_pop(h, &nh);
        sym *l = &s[p.left];
        if (l->len == 0 || l->next < 0) continue;
        sym *r = &s[l->next];
        /* A pair queued before one of its symbols grew is stale. */
        if (r->len == 0 || l->len + r->len != p.len) continue;
        l->len += r->len;
        l->id = p.id;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0) s[l->next].prev = (int32_t)p.left;
        try_pair(v, t, s, l->prev, (int32_t)p.left, h, &nh);
        try_pair(v, t, s, (int32_t)p.left, l->next, h, &nh);
    }

    for (int32_t i = 0; i >= 0; i = s[i].next) {
        uint32_t id = s[i].id;
        if (id != ER_VOCAB_NO_ID) {
            er_sink_push(out, id);
            *last_unk = 0;
            continue;
        }
        for (uint32_t k = 0; k < s[i].len; k++) {
            uint32_t bt = v->byte_tok[t[s[i].off + k]];
            if (bt != ER_VOCAB_NO_ID) {
                er_sink_push(out, bt);
                *last_unk = 0;
            } else if (v->unk >= 0 && !*last_unk) {
                er_sink_push(out, (uint32_t)v->unk);
                *last_unk = 1;
            }
        }
    }
}

static inline int is_ws(const uint8_t *t, size_t i) {
    return t[i] == 0xE2 && t[i + 1] == 0x96 && t[i + 2] == 0x81;
}

void er_spm_encode(const er_vocab *v, const char *in, size_t len, int prefix, er_idsink *out,
                   void *scratch, size_t scratch_bytes) {
    (void)scratch_bytes; /* the caller checked er_spm_scratch_bytes(len) */
    uint8_t *t = (uint8_t *)scratch;
    sym *s = (sym *)(void *)(t + ALIGN8(3 * len + 3));
    pair *h = (pair *)(void *)(s + len + 1);

    /* Prepare the text: optional trimming, the dummy prefix, spaces as "▁". */
    size_t b = 0, e = len, n = 0;
    if (v->remove_extra_ws) {
        while (b < e && in[b] == ' ') b++;
        while (e > b && in[e - 1] == ' ') e--;
    }
    if (b == e) return; /* nothing to encode: no prefix either (sentencepiece gives []) */
    if (prefix && v->add_space_prefix) {
        t[n++] = 0xE2; t[n++] = 0x96; t[n++] = 0x81;
    }
    for (size_t i = b; i < e; i++) {
        if (in[i] == ' ') {
            if (v->remove_extra_ws && in[i - 1] == ' ') continue; /* i > b here: in[b] is not a space */
            t[n++] = 0xE2; t[n++] = 0x96; t[n++] = 0x81;
        } else {
            t[n++] = (uint8_t)in[i];
        }
    }

    /* When no piece holds a "▁" right after another character (true of
     * sentencepiece vocabularies trained with split_by_whitespace), no merge
     * crosses the start of a word: each word merges on its own, with a small
     * heap, and the ids are the same as merging the whole text at once. */
    int last_unk = 0;
    size_t a = 0;
    if (v->spm_split_words) {
        /* walk character starts, as the symbols will be cut */
        size_t prev = 0;
        for (size_t i = er_utf8_len(t[0]); i + 3 <= n; prev = i, i += er_utf8_len(t[i])) {
            if (is_ws(t, i) && !(i - prev == 3 && is_ws(t, prev))) {
                encode_segment(v, t, a, i, s, h, out, &last_unk);
                a = i;
            }
        }
    }
    encode_segment(v, t, a, n, s, h, out, &last_unk);
}

#define WHOLE_MAX 64

int er_spm_is_whole(const er_vocab *v, uint32_t id) {
    const uint8_t *t = (const uint8_t *)v->text + v->text_off[id];
    size_t n = v->text_off[id + 1] - v->text_off[id] - 1;
    if (n == 0 || n > WHOLE_MAX) return 0;
    sym s[WHOLE_MAX];
    pair h[3 * WHOLE_MAX];
    int32_t ids[2];
    er_idsink out = {ids, 2, 0};
    int last_unk = 0;
    encode_segment(v, t, 0, n, s, h, &out, &last_unk);
    return out.n == 1 && ids[0] == (int32_t)id;
}
