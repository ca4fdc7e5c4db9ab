/*
 * spm.c — SentencePiece BPE (tokenizer.ggml.model = "llama").
 *
 * The text becomes one symbol per UTF-8 character (spaces as "▁", plus the
 * dummy-prefix "▁" when the file asks for it); then, repeatedly, the adjacent
 * pair whose concatenation is the vocabulary piece with the highest score
 * merges, as sentencepiece's BPE model and llama.cpp do. Where scores tie,
 * and for user-defined pieces (Gemma's whitespace runs), the order is
 * Hugging Face's: see pair_above (and er_vocab.rank, which holds the order
 * as one integer per piece). Symbols that are not pieces fall back to
 * "<0xXX>" byte tokens, or — without byte tokens — to the unknown token, one
 * per run of unknown symbols as sentencepiece emits it.
 *
 * Words of up to SCAN_MAX bytes (nearly all) merge in encode_scan, on the
 * stack, by a scan over one key per adjacent pair; longer ones in
 * encode_segment with a heap. Both take the same merges in the same order.
 *
 * Scratch (per fragment of len bytes), see er_spm_scratch_bytes:
 *   text  3*len + 3 bytes  (every space can grow to "▁", plus the prefix)
 *   sym   (len+1) symbols  (a symbol is at least one byte, plus the prefix)
 *   heap  3*(len+1) pairs  (n-1 seeds, at most 2 new pairs per merge)
 */
#include <string.h>

#include "vocab_internal.h"

typedef struct sym {
    uint32_t off, len;      /* bytes in the prepared text; len 0 = merged away */
    uint32_t id;            /* the piece these bytes are, or ER_VOCAB_NO_ID */
    int32_t prev, next;
} sym;

typedef struct pair {
    uint32_t rank;          /* the merged piece's merge rank (er_vocab.rank) */
    uint32_t id;            /* the merged piece */
    uint32_t left;          /* symbol index */
    uint32_t len;           /* bytes of the merged piece when queued (stale check) */
    uint32_t llen;          /* bytes of its left part */
} pair;

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

size_t er_spm_scratch_bytes(size_t len) {
    return ALIGN8(3 * len + 3) + sizeof(sym) * (len + 1) + sizeof(pair) * 3 * (len + 1) + 16;
}

/* The merge order. Sentencepiece merges the pair whose piece has the
 * highest score, the leftmost among equals. Hugging Face, whose order we
 * keep, ranks the merges it derives from a SentencePiece model by merged
 * id, then by the shorter left part: for distinct scores that is the score
 * order, since sentencepiece numbers pieces by descending score, and only
 * equal scores (sentencepiece gives every user-defined piece 0) tell it
 * from sentencepiece's own: a run of spaces longer than the longest
 * whitespace piece of Gemma's vocabulary splits as Hugging Face splits it.
 * er_vocab.rank folds score and id into one number, so a pair's place is
 * (rank, left length, position), lowest first. */
static inline int pair_above(const pair *a, const pair *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
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

/* The piece two adjacent symbols make, or ER_VOCAB_NO_ID; *rank its rank.
 * Two pieces: the id-pair table says all (see build_spm_pairs). A symbol
 * that is no piece (a character outside the vocabulary) may still be part
 * of one: only then are the bytes looked up. */
static inline uint32_t join(const er_vocab *v, const uint8_t *t, uint32_t lid, uint32_t loff, uint32_t llen,
                            uint32_t rid, uint32_t roff, uint32_t rlen, uint32_t *rank) {
    if (lid != ER_VOCAB_NO_ID && rid != ER_VOCAB_NO_ID) {
        const er_spm_pair *p = er_vocab_spm_pair(v, lid, rid);
        if (!p) return ER_VOCAB_NO_ID;
        *rank = p->rank;
        return p->result;
    }
    uint32_t id = er_vocab_find2(v, t + loff, llen, t + roff, rlen);
    if (id != ER_VOCAB_NO_ID) *rank = v->rank[id];
    return id;
}

static void try_pair(const er_vocab *v, const uint8_t *t, const sym *s, int32_t l, int32_t r, pair *h, size_t *nh) {
    if (l < 0 || r < 0) return;
    uint32_t rank = 0;
    uint32_t id = join(v, t, s[l].id, s[l].off, s[l].len, s[r].id, s[r].off, s[r].len, &rank);
    if (id == ER_VOCAB_NO_ID) return;
    pair p = {rank, id, (uint32_t)l, s[l].len + s[r].len, s[l].len};
    heap_push(h, nh, p);
}

/* Pushes the ids of a merged symbol: its piece, or its bytes as "<0xXX>"
 * tokens, or one unknown token per run of unknown symbols. */
static inline void emit(const er_vocab *v, const uint8_t *t, uint32_t id, uint32_t off, uint32_t len,
                        er_idsink *out, int *last_unk) {
    if (id != ER_VOCAB_NO_ID) {
        er_sink_push(out, id);
        *last_unk = 0;
        return;
    }
    for (uint32_t k = 0; k < len; k++) {
        uint32_t bt = v->byte_tok[t[off + k]];
        if (bt != ER_VOCAB_NO_ID) {
            er_sink_push(out, bt);
            *last_unk = 0;
        } else if (v->unk >= 0 && !*last_unk) {
            er_sink_push(out, (uint32_t)v->unk);
            *last_unk = 1;
        }
    }
}

/* The symbol (one character) at t[off..b): its length, piece and seed code
 * (ER_SPM_SEED_CODES when it has none). */
static inline uint32_t cut(const er_vocab *v, const uint8_t *t, size_t off, size_t b, uint32_t *id, uint32_t *code) {
    uint8_t c = t[off];
    if (c < 0x80) {
        *id = v->spm_ascii[c];
        *code = c == ' ' ? ER_SPM_SEED_CODES : c; /* a space itself (in a piece's text at open) is not "▁" */
        return 1;
    }
    uint32_t l = er_utf8_len(c);
    if (l > b - off) l = (uint32_t)(b - off);
    if (l == 3 && c == 0xE2 && t[off + 1] == 0x96 && t[off + 2] == 0x81) {
        *id = v->spm_ws;
        *code = ER_SPM_SEED_WS;
        return 3;
    }
    *id = er_vocab_find(v, t + off, l);
    *code = ER_SPM_SEED_CODES;
    return l;
}

/* Words up to this many bytes merge by a scan of their pairs instead of a
 * heap: at most that many symbols, so the scan's quadratic worst case stays
 * small, and most words are a few symbols, where the scan is cheaper. */
#define SCAN_MAX 64
#define NO_PAIR UINT64_MAX

typedef struct wsym {
    uint32_t off, len, id;
    uint32_t cid;           /* the piece this symbol and the next make */
} wsym;

/* A pair's place in the merge order as one integer, lowest first:
 * pair_above's (rank, left length, position), so the scan's minimum is the
 * heap's top and names its position. Lengths and positions are below
 * SCAN_MAX here. */
static inline uint64_t scan_key(uint32_t rank, uint32_t llen, int pos) {
    return (uint64_t)rank << 32 | (uint64_t)llen << 16 | (uint64_t)pos;
}

static inline uint64_t scan_pair(const er_vocab *v, const uint8_t *t, wsym *s, int l, int r) {
    uint32_t rank = 0;
    uint32_t id = join(v, t, s[l].id, s[l].off, s[l].len, s[r].id, s[r].off, s[r].len, &rank);
    if (id == ER_VOCAB_NO_ID) return NO_PAIR;
    s[l].cid = id;
    return scan_key(rank, s[l].len, l);
}

/* encode_segment for a short word: the same merges in the same order. The
 * symbols stay at their places, linked; one merged away has no pair. */
static void encode_scan(const er_vocab *v, const uint8_t *t, size_t a, size_t b, er_idsink *out, int *last_unk) {
    wsym s[SCAN_MAX];
    uint64_t key[SCAN_MAX + 1];
    int8_t next[SCAN_MAX], prev[SCAN_MAX];
    uint32_t prev_code = ER_SPM_SEED_CODES;
    int ns = 0;
    for (size_t off = a; off < b; ns++) {
        uint32_t code;
        s[ns].off = (uint32_t)off;
        s[ns].len = cut(v, t, off, b, &s[ns].id, &code);
        off += s[ns].len;
        next[ns] = (int8_t)(ns + 1);
        prev[ns] = (int8_t)(ns - 1);
        if (ns == 0) {
            prev_code = code;
            continue;
        }
        if (prev_code < ER_SPM_SEED_CODES && code < ER_SPM_SEED_CODES) {
            /* two characters: the seed table, not the pair table */
            const er_spm_seed *e = &v->spm_seed[prev_code * ER_SPM_SEED_CODES + code];
            s[ns - 1].cid = e->id;
            key[ns - 1] = e->id == ER_VOCAB_NO_ID ? NO_PAIR : scan_key(e->rank, s[ns - 1].len, ns - 1);
        } else {
            key[ns - 1] = scan_pair(v, t, s, ns - 1, ns);
        }
        prev_code = code;
    }
    key[ns - 1] = key[ns] = NO_PAIR; /* the scan reads pairs of keys */
    next[ns - 1] = -1;

    for (;;) {
        /* Two running minima: the compare-and-select chains overlap. Keys
         * are unique (they hold the position), so the minimum is exact. */
        uint64_t b0 = NO_PAIR, b1 = NO_PAIR;
        for (int k = 0; k < ns - 1; k += 2) {
            b0 = key[k] < b0 ? key[k] : b0;
            b1 = key[k + 1] < b1 ? key[k + 1] : b1;
        }
        uint64_t best = b0 < b1 ? b0 : b1;
        if (best == NO_PAIR) break;
        int i = (int)(best & 0xFFFF), j = next[i];
        s[i].len += s[j].len;
        s[i].id = s[i].cid;
        key[j] = NO_PAIR;
        next[i] = next[j];
        if (next[i] >= 0) {
            prev[next[i]] = (int8_t)i;
            key[i] = scan_pair(v, t, s, i, next[i]);
        } else {
            key[i] = NO_PAIR;
        }
        if (prev[i] >= 0) key[prev[i]] = scan_pair(v, t, s, prev[i], i);
    }
    for (int k = 0; k >= 0; k = next[k]) emit(v, t, s[k].id, s[k].off, s[k].len, out, last_unk);
}

/* Merges one segment t[a..b) and emits its ids; *last_unk carries the
 * "previous id was an unknown run" state across segments. */
static void encode_segment(const er_vocab *v, const uint8_t *t, size_t a, size_t b, sym *s, pair *h,
                           er_idsink *out, int *last_unk) {
    if (b - a <= SCAN_MAX) {
        encode_scan(v, t, a, b, out, last_unk);
        return;
    }
    int32_t ns = 0;
    for (size_t off = a; off < b; ns++) {
        uint32_t code;
        s[ns].off = (uint32_t)off;
        s[ns].len = cut(v, t, off, b, &s[ns].id, &code);
        s[ns].prev = ns - 1;
        s[ns].next = ns + 1;
        off += s[ns].len;
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

    for (int32_t i = 0; i >= 0; i = s[i].next) emit(v, t, s[i].id, s[i].off, s[i].len, out, last_unk);
}

static inline int is_ws(const uint8_t *t, size_t i) {
    return t[i] == 0xE2 && t[i + 1] == 0x96 && t[i + 2] == 0x81;
}

static inline size_t put_ws(uint8_t *t, size_t n) {
    t[n] = 0xE2;
    t[n + 1] = 0x96;
    t[n + 2] = 0x81;
    return n + 3;
}

/* The text is prepared (optional trimming, the dummy prefix, spaces as
 * "▁") and, when no piece holds a "▁" right after another character (true
 * of sentencepiece vocabularies trained with split_by_whitespace), cut into
 * words: no merge crosses the start of a word, so each word merges on its
 * own and the ids are the same as merging the whole text at once. A word
 * starts at each "▁" that does not follow a "▁", counting characters as
 * the symbols will be cut. The words of the text's ASCII head are cut as
 * it is prepared; from the first other byte on, the rest is prepared, then
 * walked by characters. `prefix` says whether this fragment gets the dummy
 * prefix (when the vocabulary uses one). */
void er_spm_encode(const er_vocab *v, const char *text, size_t len, int prefix, er_idsink *out,
                   void *scratch, size_t scratch_bytes) {
    (void)scratch_bytes; /* the caller checked er_spm_scratch_bytes(len) */
    const uint8_t *in = (const uint8_t *)text;
    uint8_t *t = (uint8_t *)scratch;
    sym *s = (sym *)(void *)(t + ALIGN8(3 * len + 3));
    pair *h = (pair *)(void *)(s + len + 1);

    size_t b = 0, e = len, n = 0;
    const int trim = v->remove_extra_ws, split = v->spm_split_words;
    if (trim) {
        while (b < e && in[b] == ' ') b++;
        while (e > b && in[e - 1] == ' ') e--;
    }
    if (b == e) return; /* nothing to encode: no prefix either (sentencepiece gives []) */
    int last_unk = 0, after_ws = 0; /* whether the last character prepared is "▁" */
    if (prefix && v->add_space_prefix) {
        n = put_ws(t, n);
        after_ws = 1;
    }
    size_t a = 0, i = b;
    for (; i < e; i++) {
        uint8_t c = in[i];
        if (c == ' ') {
            if (trim && in[i - 1] == ' ') continue; /* i > b here: in[b] is not a space */
            if (split && !after_ws && n > 0) {
                encode_segment(v, t, a, n, s, h, out, &last_unk);
                a = n;
            }
            n = put_ws(t, n);
            after_ws = 1;
        } else if (c < 0x80) {
            t[n++] = c;
            after_ws = 0;
        } else {
            break;
        }
    }
    if (i < e) {
        size_t p = n; /* a character start: all before it were whole */
        for (; i < e; i++) {
            if (in[i] == ' ') {
                if (trim && in[i - 1] == ' ') continue;
                n = put_ws(t, n);
            } else {
                t[n++] = in[i];
            }
        }
        for (; split && p + 3 <= n; p += er_utf8_len(t[p])) {
            int ws = is_ws(t, p);
            if (ws && !after_ws && p > 0) {
                encode_segment(v, t, a, p, s, h, out, &last_unk);
                a = p;
            }
            after_ws = ws;
        }
    }
    encode_segment(v, t, a, n, s, h, out, &last_unk);
}
