/*
 * bpe.c — byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * Each pre-token starts as one symbol per byte (the GPT-2 byte map is undone
 * once, at open, so symbols are token ids of single bytes); then the adjacent
 * pair with the lowest merge rank merges, leftmost first, until no pair has
 * a merge — the same order Hugging Face's BPE model applies. Short words use
 * a flat array and rescan (fewer cache misses than a heap); long ones a heap
 * over a linked list so a pathological word stays O(n log n).
 *
 * Scratch (per fragment of len bytes), see er_bpe_scratch_bytes:
 *   spans len pre-tokens   (er_pretokenize_max_spans)
 *   node  len symbols      (long words only)
 *   heap  3*len merges     (n-1 seeds, at most 2 new candidates per merge)
 */
#include <string.h>

#include "pretokenize.h"
#include "vocab_internal.h"

#define SHORT_WORD 48

typedef struct node {
    uint32_t id;         /* DEAD once merged into its left neighbour */
    int32_t prev, next;
} node;

#define DEAD 0xFFFFFFFEu

/* A queued merge. Ranks are unique per pair, so "the pair at pos still has
 * this rank" is exactly "the candidate is not stale". */
typedef struct cand {
    uint32_t rank;
    uint32_t pos;        /* left symbol */
} cand;

size_t er_bpe_scratch_bytes(size_t len) {
    return sizeof(er_span) * (len + 1) + sizeof(node) * (len + 1) + sizeof(cand) * 3 * (len + 1) + 16;
}

static inline int cand_above(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_above(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_above(&h[c + 1], &h[c])) c++;
        if (!cand_above(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static inline void emit(const er_vocab *v, er_idsink *out, uint32_t id) {
    /* A byte with no token (never in GPT-2-style vocabularies): Hugging Face's
     * BPE without an unknown token drops it. */
    if (id != ER_VOCAB_NO_ID) er_sink_push(out, id);
    else if (v->unk >= 0) er_sink_push(out, (uint32_t)v->unk);
}

/* One symbol and the pair it starts: merging removes one element, so a
 * single memmove keeps symbols and pair ranks aligned (three parallel arrays
 * took three libc calls per merge, a fifth of the GPT-2 encode time). */
typedef struct wsym {
    uint32_t id;
    uint32_t rank;       /* merge rank of (this, next); UINT32_MAX: none or no next */
    uint32_t res;        /* the merged token when rank is not UINT32_MAX */
} wsym;

static inline void pair_at(const er_vocab *v, wsym *a, size_t i, size_t n) {
    const er_merge *m = i + 1 < n ? er_vocab_merge(v, a[i].id, a[i + 1].id) : NULL;
    a[i].rank = m ? m->rank : UINT32_MAX;
    a[i].res = m ? m->result : 0;
}

static void word_short(const er_vocab *v, const uint8_t *w, size_t n, er_idsink *out) {
    wsym a[SHORT_WORD];
    for (size_t i = 0; i < n; i++) a[i].id = v->byte_tok[w[i]];
    for (size_t i = 0; i < n; i++) pair_at(v, a, i, n);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (a[i].rank < a[best].rank) best = i;
        if (a[best].rank == UINT32_MAX) break;
        a[best].id = a[best].res;
        memmove(a + best + 1, a + best + 2, (n - best - 2) * sizeof a[0]);
        n--;
        if (best > 0) pair_at(v, a, best - 1, n);
        pair_at(v, a, best, n);
    }
    for (size_t i = 0; i < n; i++) emit(v, out, a[i].id);
}

static void try_cand(const er_vocab *v, const node *s, int32_t l, int32_t r, cand *h, size_t *nh) {
    if (l < 0 || r < 0) return;
    const er_merge *m = er_vocab_merge(v, s[l].id, s[r].id);
    if (!m) return;
    cand c = {m->rank, (uint32_t)l};
    heap_push(h, nh, c);
}

static void word_long(const er_vocab *v, const uint8_t *w, size_t n, er_idsink *out, node *s, cand *h) {
    for (size_t i = 0; i < n; i++) {
        s[i].id = v->byte_tok[w[i]];
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    size_t nh = 0;
    for (size_t i = 0; i + 1 < n; i++) try_cand(v, s, (int32_t)i, (int32_t)i + 1, h, &nh);
    while (nh > 0) {
        cand c = heap_pop(h, &nh);
        node *l = &s[c.pos];
        if (l->id == DEAD || l->next < 0) continue;
        node *r = &s[l->next];
        const er_merge *m = er_vocab_merge(v, l->id, r->id);
        if (!m || m->rank != c.rank) continue;
        l->id = m->result;
        r->id = DEAD;
        l->next = r->next;
        if (l->next >= 0) s[l->next].prev = (int32_t)c.pos;
        try_cand(v, s, l->prev, (int32_t)c.pos, h, &nh);
        try_cand(v, s, (int32_t)c.pos, l->next, h, &nh);
    }
    for (int32_t i = 0; i >= 0; i = s[i].next) emit(v, out, s[i].id);
}

void er_bpe_encode(const er_vocab *v, const char *text, size_t len, er_idsink *out, void *scratch,
                   size_t scratch_bytes) {
    (void)scratch_bytes; /* the caller checked er_bpe_scratch_bytes(len) */
    if (len == 0) return;
    er_span *sp = (er_span *)scratch;
    node *nodes = (node *)(void *)(sp + len + 1);
    cand *heap = (cand *)(void *)(nodes + len + 1);
    size_t nsp = er_pretokenize(v->pre, text, len, sp, er_pretokenize_max_spans(len));
    for (size_t k = 0; k < nsp; k++) {
        const uint8_t *w = (const uint8_t *)text + sp[k].off;
        size_t n = sp[k].len;
        if (n == 1) {
            emit(v, out, v->byte_tok[w[0]]);
            continue;
        }
        uint32_t id = er_vocab_find(v, w, n);
        if (id != ER_VOCAB_NO_ID && (v->ignore_merges || v->whole[id])) {
            er_sink_push(out, id);
            continue;
        }
        if (n <= SHORT_WORD) word_short(v, w, n, out);
        else word_long(v, w, n, out, nodes, heap);
    }
}

int er_bpe_is_whole(const er_vocab *v, uint32_t id) {
    size_t n;
    const uint8_t *w = er_vocab_dec(v, id, &n);
    if (n < 2 || n > SHORT_WORD) return n == 1;
    int32_t ids[2];
    er_idsink out = {ids, 2, 0};
    word_short(v, w, n, &out);
    return out.n == 1 && ids[0] == (int32_t)id;
}
