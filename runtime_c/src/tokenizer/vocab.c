/*
 * vocab.c — validates the tokenizer metadata of a GGUF file, sizes its tables
 * (er_vocab_plan) and builds them in the arena (er_vocab_build); plus the
 * public er_vocab_* facts.
 *
 * The plan and the build walk the same metadata; the plan's sizes are upper
 * bounds (decoded text is never longer than the stored text), so the build
 * cannot run out of its section unless the file changed in between.
 */
#include "vocab.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

#include "../error.h"
#include "pretokenize.h"
#include "vocab_internal.h"

/* Offsets are u32 and ids fit int32; 1<<24 tokens is far beyond any model. */
#define MAX_TOKENS (1u << 24)

typedef struct meta {
    int kind, pre;
    int prefix_first;         /* edgerun.tokenizer.prepend_scheme = "first" */
    gguf_kv tokens, types, scores, merges;
    bool has_types, has_scores;
    uint64_t n, n_merges;
    uint64_t text_bytes;      /* sum of token lengths */
    uint64_t ud_spaces;       /* bytes of SPM user-defined all-space tokens (stored as "▁": 2 bytes more each) */
    uint64_t max_merge;       /* longest merge string */
    uint64_t n_special;
    uint64_t n_unknown;       /* UNKNOWN tokens: SPM decodes them as " ⁇ " */
    gguf_kv strip_ids[2];     /* tokenizer.ggml.lstrip_token_ids / rstrip_token_ids */
    bool has_strip[2];
    uint64_t n_splits;        /* SPM: character boundaries inside tokens (pair table entries at most) */
    uint32_t piece_cap, merge_cap, pair_cap;
} meta;

static uint32_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c <<= 1;
    return (uint32_t)c;
}

/* Optional token id key: absent -> dflt; present but not an in-range integer -> error. */
static int get_id(const gguf_file *f, const char *key, uint64_t n, int32_t dflt, int32_t *out) {
    gguf_kv kv;
    *out = dflt;
    if (!gguf_find_kv(f, key, &kv)) return ER_OK;
    uint32_t v;
    if ((kv.type == GGUF_I8 || kv.type == GGUF_I16 || kv.type == GGUF_I32 || kv.type == GGUF_I64) && kv.v.i64 == -1)
        return ER_OK; /* -1: "none" */
    if (!gguf_get_u32(f, key, &v))
        return er_fail(ER_ECORRUPT, "%s is not a non-negative integer", key);
    /* Some converters write -1 as u32 for "none". */
    if (v == 0xFFFFFFFFu) { *out = -1; return ER_OK; }
    if (v >= n)
        return er_fail(ER_ECORRUPT, "%s = %u is out of range (vocabulary has %llu tokens)", key, v,
                       (unsigned long long)n);
    *out = (int32_t)v;
    return ER_OK;
}

static int get_flag(const gguf_file *f, const char *key, int dflt, int *out) {
    gguf_kv kv;
    bool b;
    *out = dflt;
    if (!gguf_find_kv(f, key, &kv)) return ER_OK;
    if (!gguf_get_bool(f, key, &b)) return er_fail(ER_ECORRUPT, "%s is not a boolean", key);
    *out = b ? 1 : 0;
    return ER_OK;
}

/* Hugging Face's AddedToken lstrip / rstrip: the token also takes the
 * whitespace before / after it. GGUF has no standard key; our converter
 * writes these. */
static const char *const strip_keys[2] = {"tokenizer.ggml.lstrip_token_ids", "tokenizer.ggml.rstrip_token_ids"};

static bool all_spaces(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ') return false;
    return n > 0;
}

/* Our converter's keys under "edgerun.tokenizer." change how text is
 * tokenized, so they are an allow-list: one this runtime does not know
 * (written by a newer converter) refuses the file rather than tokenizing
 * differently from the tokenizer the file was converted from.
 *
 * edgerun.tokenizer.prepend_scheme qualifies tokenizer.ggml.add_space_prefix
 * (SentencePiece's dummy "▁"), with Hugging Face's Metaspace names:
 * "always" gives every piece of text between special tokens the prefix, as
 * sentencepiece on each piece and llama.cpp do (the default: llama.cpp's
 * files carry no such key); "first" only the piece at the start of the text,
 * as transformers' LlamaTokenizer does when tokenizer_config.json says
 * legacy=false (Phi-3: "<|user|>\nHi" has "Hi", not "▁Hi"). */
static int read_edgerun_keys(const gguf_file *f, meta *m) {
    static const char ns[] = "edgerun.tokenizer.";
    const size_t nn = sizeof ns - 1;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv kv;
        gguf_kv_at(f, i, &kv);
        if ((size_t)kv.key.len < nn || memcmp(kv.key.ptr, ns, nn) != 0) continue;
        if (!er_str_eq(kv.key, "edgerun.tokenizer.prepend_scheme"))
            return er_fail(ER_EUNSUPPORTED, "key '%.*s' is not understood by this runtime's tokenizer (it may "
                                            "change the token ids), so the file is refused",
                           (int)(kv.key.len > 80 ? 80 : kv.key.len), kv.key.ptr);
    }
    er_str s;
    if (!gguf_find_kv(f, "edgerun.tokenizer.prepend_scheme", &(gguf_kv){0})) return ER_OK;
    if (!gguf_get_str(f, "edgerun.tokenizer.prepend_scheme", &s))
        return er_fail(ER_ECORRUPT, "edgerun.tokenizer.prepend_scheme is not a string");
    if (er_str_eq(s, "first")) m->prefix_first = 1;
    else if (!er_str_eq(s, "always"))
        return er_fail(ER_EUNSUPPORTED, "edgerun.tokenizer.prepend_scheme '%.*s' is not supported (always, first)",
                       (int)(s.len > 32 ? 32 : s.len), s.ptr);
    return ER_OK;
}

static int read_meta(const gguf_file *f, meta *m) {
    memset(m, 0, sizeof *m);
    er_str model;
    gguf_kv kv;
    if (!gguf_find_kv(f, "tokenizer.ggml.model", &kv)) return ER_OK; /* no tokenizer */
    if (!gguf_get_str(f, "tokenizer.ggml.model", &model))
        return er_fail(ER_ECORRUPT, "tokenizer.ggml.model is not a string");
    if (er_str_eq(model, "llama")) m->kind = ER_VOCAB_SPM;
    else if (er_str_eq(model, "gpt2")) m->kind = ER_VOCAB_BPE;
    else if (er_str_eq(model, "none") || er_str_eq(model, "no_vocab")) return ER_OK;
    else
        return er_fail(ER_EUNSUPPORTED, "tokenizer.ggml.model '%.*s' is not supported (edgerun runs 'llama' and 'gpt2')",
                       (int)(model.len > 64 ? 64 : model.len), model.ptr);

    if (!gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STR, &m->tokens))
        return er_fail(ER_ECORRUPT, "tokenizer.ggml.tokens is missing or not an array of strings");
    m->n = m->tokens.arr_n;
    if (m->n == 0) return er_fail(ER_ECORRUPT, "tokenizer.ggml.tokens is empty");
    if (m->n > MAX_TOKENS)
        return er_fail(ER_EUNSUPPORTED, "vocabulary of %llu tokens exceeds the supported %u",
                       (unsigned long long)m->n, MAX_TOKENS);
    const uint8_t *cur = m->tokens.arr_data;
    for (uint64_t i = 0; i < m->n; i++) {
        er_str s = gguf_arr_next_str(&cur);
        m->text_bytes += s.len;
        if (m->kind == ER_VOCAB_SPM) /* an all-space token stored as "▁"s keeps its character count */
            for (uint64_t k = s.len ? er_utf8_len((uint8_t)s.ptr[0]) : 0; k < s.len; k += er_utf8_len((uint8_t)s.ptr[k]))
                m->n_splits++;
    }
    if (m->text_bytes + m->n + 8 > 0xFFFFFFF0ull)
        return er_fail(ER_EUNSUPPORTED, "token texts total %llu bytes; at most 4 GiB is supported",
                       (unsigned long long)m->text_bytes);

    if (gguf_find_kv(f, "tokenizer.ggml.token_type", &kv)) {
        if (!gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_I32, &m->types))
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.token_type is not an array of int32");
        if (m->types.arr_n != m->n)
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.token_type has %llu entries for %llu tokens",
                           (unsigned long long)m->types.arr_n, (unsigned long long)m->n);
        m->has_types = true;
        for (uint64_t i = 0; i < m->n; i++) {
            int32_t t;
            memcpy(&t, m->types.arr_data + 4 * i, 4);
            if (t < 0 || t > ER_TT_BYTE)
                return er_fail(ER_ECORRUPT, "token %llu has type %d (valid: 0..6)", (unsigned long long)i, t);
            if (t == ER_TT_CONTROL || t == ER_TT_USER_DEFINED || t == ER_TT_UNKNOWN) m->n_special++;
            if (t == ER_TT_UNKNOWN) m->n_unknown++;
        }
        if (m->kind == ER_VOCAB_SPM) {
            cur = m->tokens.arr_data;
            for (uint64_t i = 0; i < m->n; i++) {
                er_str s = gguf_arr_next_str(&cur);
                int32_t t;
                memcpy(&t, m->types.arr_data + 4 * i, 4);
                if (t == ER_TT_USER_DEFINED && all_spaces(s.ptr, (size_t)s.len)) m->ud_spaces += s.len;
            }
            if (m->text_bytes + 2 * m->ud_spaces + m->n + 8 > 0xFFFFFFF0ull)
                return er_fail(ER_EUNSUPPORTED, "token texts total %llu bytes; at most 4 GiB is supported",
                               (unsigned long long)(m->text_bytes + 2 * m->ud_spaces));
        }
    }

    if (gguf_find_kv(f, "tokenizer.ggml.scores", &kv)) {
        if (!gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_F32, &m->scores))
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.scores is not an array of float32");
        if (m->scores.arr_n != m->n)
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.scores has %llu entries for %llu tokens",
                           (unsigned long long)m->scores.arr_n, (unsigned long long)m->n);
        m->has_scores = true;
    } else if (m->kind == ER_VOCAB_SPM) {
        /* SentencePiece merges by piece score: without scores the ids are arbitrary. */
        return er_fail(ER_ECORRUPT, "tokenizer.ggml.scores is missing (required by tokenizer.ggml.model 'llama')");
    }

    if (m->kind == ER_VOCAB_BPE) {
        if (!gguf_find_kv(f, "tokenizer.ggml.merges", &kv))
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.merges is missing (required by tokenizer.ggml.model 'gpt2')");
        if (!gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STR, &m->merges))
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.merges is not an array of strings");
        m->n_merges = m->merges.arr_n;
        if (m->n_merges >= 0x7FFFFFFFull)
            return er_fail(ER_EUNSUPPORTED, "%llu merges is too many", (unsigned long long)m->n_merges);
        cur = m->merges.arr_data;
        for (uint64_t i = 0; i < m->n_merges; i++) {
            er_str s = gguf_arr_next_str(&cur);
            if (s.len > m->max_merge) m->max_merge = s.len;
        }
        m->merge_cap = pow2_at_least(m->n_merges + m->n_merges / 3 + 1);
    }

    er_str pre;
    m->pre = ER_PRE_NONE;
    if (m->kind == ER_VOCAB_BPE) {
        m->pre = ER_PRE_DEFAULT; /* what llama.cpp assumes for files written before the key existed */
        if (gguf_find_kv(f, "tokenizer.ggml.pre", &kv)) {
            if (!gguf_get_str(f, "tokenizer.ggml.pre", &pre))
                return er_fail(ER_ECORRUPT, "tokenizer.ggml.pre is not a string");
            int p = er_pre_from_name(pre.ptr, (size_t)pre.len);
            if (p < 0)
                return er_fail(ER_EUNSUPPORTED, "pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported",
                               (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
            m->pre = p;
        }
    }
    int rc = read_edgerun_keys(f, m);
    if (rc) return rc;
    for (int k = 0; k < 2; k++) {
        const char *key = strip_keys[k];
        if (!gguf_find_kv(f, key, &kv)) continue;
        if (!gguf_get_arr(f, key, GGUF_I32, &m->strip_ids[k]) && !gguf_get_arr(f, key, GGUF_U32, &m->strip_ids[k]))
            return er_fail(ER_ECORRUPT, "%s is not an array of 32-bit token ids", key);
        for (uint64_t i = 0; i < m->strip_ids[k].arr_n; i++) {
            uint32_t id;
            memcpy(&id, m->strip_ids[k].arr_data + 4 * i, 4);
            int32_t t = ER_TT_NORMAL;
            if (id < m->n && m->has_types) memcpy(&t, m->types.arr_data + 4 * (size_t)id, 4);
            if (id >= m->n)
                return er_fail(ER_ECORRUPT, "%s names token %u; the vocabulary has %llu", key, id,
                               (unsigned long long)m->n);
            /* Only added tokens are matched in the text, so only they can strip. */
            if (t != ER_TT_CONTROL && t != ER_TT_USER_DEFINED && t != ER_TT_UNKNOWN)
                return er_fail(ER_ECORRUPT, "%s names token %u, which is not an added (control or user-defined) token",
                               key, id);
        }
        m->has_strip[k] = true;
    }
    m->piece_cap = pow2_at_least(2 * m->n);
    if (m->kind == ER_VOCAB_SPM) m->pair_cap = pow2_at_least(m->n_splits + m->n_splits / 3 + 1);
    return ER_OK;
}

/* The pair filter: a word (64 bits) per 8 slots of the pair table, about
 * 17 bits per pair, which lets through about 1% of the pairs not there. */
static size_t spm_filter_words(uint32_t pair_cap) { return pair_cap >= 64 ? pair_cap / 8 : 8; }

static size_t plan_bytes(const meta *m) {
    size_t b = 0;
    b += er_align_up(sizeof(er_vocab));
    b += er_align_up((size_t)(m->text_bytes + 2 * m->ud_spaces + m->n)); /* text + NULs */
    b += er_align_up(4 * (size_t)(m->n + 1));                   /* text_off */
    b += er_align_up((size_t)(m->text_bytes + 5 * m->n_unknown) + 1); /* dec */
    b += er_align_up(4 * (size_t)(m->n + 1));                   /* dec_off */
    b += er_align_up((size_t)m->n);                             /* type */
    if (m->kind == ER_VOCAB_BPE) b += er_align_up((size_t)m->n); /* whole (BPE only) */
    if (m->kind == ER_VOCAB_SPM) {
        b += er_align_up(4 * (size_t)m->n);                     /* score */
        b += er_align_up(sizeof(er_spm_pair) * (size_t)m->pair_cap);
        b += er_align_up(spm_filter_words(m->pair_cap) * 8);
        b += er_align_up(4 * (size_t)m->n);                     /* rank */
        b += er_align_up(sizeof(er_spm_seed) * ER_SPM_SEED_CODES * ER_SPM_SEED_CODES);
    }
    b += er_align_up(4 * (size_t)m->piece_cap);
    if (m->kind == ER_VOCAB_BPE) {
        b += er_align_up(sizeof(er_merge) * (size_t)m->merge_cap);
        b += er_align_up((size_t)m->max_merge + 1);             /* decoded merge text */
    }
    b += er_align_up(4 * (size_t)(m->n_special + 1));
    if (m->has_strip[0] || m->has_strip[1]) b += er_align_up((size_t)m->n); /* strip */
    return b;
}

size_t er_vocab_plan(const gguf_file *f, int *status) {
    meta m;
    int rc = read_meta(f, &m);
    if (status) *status = rc;
    if (rc) return (size_t)-1;
    if (m.kind == 0) return 0;
    return plan_bytes(&m);
}

/* ---- the GPT-2 byte map ---------------------------------------------------
 * GPT-2 shows every byte as a printable character: bytes that are printable
 * Latin-1 stand for themselves, the other 68 are numbered from U+0100 in byte
 * order (0x00..0x20, 0x7F..0xA0, 0xAD). Returns the byte for code point cp,
 * or -1 when cp is not in the map's image. */
static int gpt2_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);        /* 0x00..0x20 */
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F); /* 0x7F..0xA0 */
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* Strict decode of one UTF-8 character of token text; -1 when invalid. */
static int32_t utf8_cp(const uint8_t *s, size_t n, size_t *adv) {
    uint32_t c = s[0];
    size_t k;
    uint32_t min;
    if (c < 0x80) { *adv = 1; return (int32_t)c; }
    if (c >= 0xC2 && c <= 0xDF) { k = 2; min = 0x80; c &= 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; min = 0x800; c &= 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; min = 0x10000; c &= 0x07; }
    else return -1;
    if (n < k) return -1;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    *adv = k;
    return (int32_t)c;
}

/* Undoes the byte map into out (NULL: only checks); returns the decoded
 * length, or (size_t)-1 when some character is outside the map (the text is
 * then not byte-level). */
static size_t gpt2_decode(const uint8_t *s, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        int32_t cp = utf8_cp(s + i, n - i, &adv);
        if (cp < 0) return (size_t)-1;
        int b = gpt2_cp_to_byte((uint32_t)cp);
        if (b < 0) return (size_t)-1;
        if (out) out[o] = (uint8_t)b;
        o++;
        i += adv;
    }
    return o;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xXX>" -> XX, else -1. */
static int spm_byte_piece(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    return (h < 0 || l < 0) ? -1 : h * 16 + l;
}

/* ---- look-ups ------------------------------------------------------------ */

static inline const uint8_t *key_of(const er_vocab *v, uint32_t id, size_t *len) {
    if (v->kind == ER_VOCAB_SPM) {
        *len = v->text_off[id + 1] - v->text_off[id] - 1; /* minus the NUL */
        return (const uint8_t *)v->text + v->text_off[id];
    }
    return er_vocab_dec(v, id, len);
}

uint32_t er_vocab_find2(const er_vocab *v, const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    uint32_t i = er_hash2(a, na, b, nb) & v->piece_mask;
    for (;;) {
        uint32_t id = v->piece_tab[i];
        if (id == ER_VOCAB_NO_ID) return id;
        size_t kl;
        const uint8_t *k = key_of(v, id, &kl);
        if (kl == na + nb && memcmp(k, a, na) == 0 && (nb == 0 || memcmp(k + na, b, nb) == 0)) return id;
        i = (i + 1) & v->piece_mask;
    }
}

/* Which tokens encoders may produce from text by merging: SentencePiece keeps
 * control, unknown, unused and byte pieces out of its piece table, and
 * Hugging Face's BPE model never contains added tokens. */
static bool hashed(int kind, int type) {
    if (type == ER_TT_NORMAL || type == ER_TT_UNDEFINED) return true;
    if (kind == ER_VOCAB_SPM) return type == ER_TT_USER_DEFINED;
    return type == ER_TT_BYTE || type == ER_TT_UNUSED;
}

static int insert_piece(er_vocab *v, uint32_t *tab, uint32_t id) {
    size_t kl;
    const uint8_t *k = key_of(v, id, &kl);
    uint32_t i = er_hash2(k, kl, NULL, 0) & v->piece_mask;
    for (;;) {
        uint32_t o = tab[i];
        if (o == ER_VOCAB_NO_ID) { tab[i] = id; return ER_OK; }
        size_t ol;
        const uint8_t *ok = key_of(v, o, &ol);
        if (ol == kl && memcmp(ok, k, kl) == 0)
            return er_fail(ER_ECORRUPT, "duplicate token: ids %u and %u are both '%.*s'", o, id,
                           (int)(v->text_off[id + 1] - v->text_off[id] - 1 > 48 ? 48
                                 : v->text_off[id + 1] - v->text_off[id] - 1), v->text + v->text_off[id]);
        i = (i + 1) & v->piece_mask;
    }
}

/* Counts the splits of pieces at a character boundary into two pieces and,
 * when tab is not NULL, enters each in it and in the filter. */
static uint32_t spm_splits(er_vocab *v, er_spm_pair *tab, uint64_t *filter) {
    uint32_t count = 0;
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        if (!hashed(v->kind, v->type[id])) continue;
        size_t n;
        const uint8_t *k = key_of(v, id, &n);
        for (size_t c = n ? er_utf8_len(k[0]) : 0; c < n; c += er_utf8_len(k[c])) {
            uint32_t l = er_vocab_find(v, k, c), r = er_vocab_find(v, k + c, n - c);
            if (l == ER_VOCAB_NO_ID || r == ER_VOCAB_NO_ID) continue;
            count++;
            if (!tab) continue;
            uint64_t h = er_hash_spm_pair(l, r);
            filter[h >> v->filter_shift] |= er_spm_filter_bits(h, v->filter_shift);
            uint32_t i = (uint32_t)(h >> v->pair_shift);
            while (tab[i].left != ER_VOCAB_NO_ID) i = (i + 1) & v->pair_mask;
            tab[i].left = l;
            tab[i].right = r;
            tab[i].result = id;
            tab[i].rank = v->rank[id];
        }
    }
    return count;
}

/* The score a piece merges by: sentencepiece gives user-defined pieces 0,
 * above every normal piece's negative score, and merges them first; the
 * file's score cannot say it (llama.cpp's converter writes -1000 for them).
 * Pieces no merge can make rank last. */
static float merge_score(const er_vocab *v, uint32_t id) {
    if (!hashed(v->kind, v->type[id])) return -FLT_MAX;
    return v->type[id] == ER_TT_USER_DEFINED ? FLT_MAX : v->score[id];
}

/* Whether a merges before b: higher score, then lower id (Hugging Face's
 * rank order for merges derived from a SentencePiece model; see spm.c). */
static bool merges_before(const er_vocab *v, uint32_t a, uint32_t b) {
    float sa = merge_score(v, a), sb = merge_score(v, b);
    if (sa != sb) return sa > sb;
    return a < b;
}

static void sift_rank(const er_vocab *v, uint32_t *a, uint32_t root, uint32_t end) {
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end && merges_before(v, a[child], a[child + 1])) child++;
        if (!merges_before(v, a[root], a[child])) return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

/* rank[id] = the id's place in merge order. Heapsort (no heap at open)
 * gives the ids in that order; the permutation is then inverted in place,
 * cycle by cycle, with the top bit marking the places already done (ids
 * are below 1 << 24). */
static int build_ranks(const er_vocab *v, uint32_t *rank) {
    uint32_t n = v->n_tokens;
    for (uint32_t i = 0; i < n; i++) {
        /* A NaN compares neither above nor below: no merge order exists. */
        if (hashed(v->kind, v->type[i]) && v->score[i] != v->score[i])
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.scores: piece %u has a NaN score", i);
        rank[i] = i;
    }
    for (uint32_t i = n / 2; i-- > 0;) sift_rank(v, rank, i, n);
    for (uint32_t end = n; end > 1;) {
        end--;
        uint32_t t = rank[0];
        rank[0] = rank[end];
        rank[end] = t;
        sift_rank(v, rank, 0, end);
    }
    /* rank[] now lists the ids in merge order (heapsort ascends by
     * merges_before); invert it. */
    const uint32_t done = 0x80000000u;
    for (uint32_t i = 0; i < n; i++) {
        if (rank[i] & done) continue;
        uint32_t prev = i, j = rank[i];
        while (j != i) {
            uint32_t next = rank[j];
            rank[j] = prev | done;
            prev = j;
            j = next;
        }
        rank[i] = prev | done;
    }
    for (uint32_t i = 0; i < n; i++) rank[i] &= ~done;
    return ER_OK;
}

/* Text of a seed-table character (see ER_SPM_SEED_WS). */
static const uint8_t *seed_text(int c, uint8_t *one, size_t *len) {
    static const uint8_t ws[3] = {0xE2, 0x96, 0x81};
    if (c == ER_SPM_SEED_WS) {
        *len = 3;
        return ws;
    }
    *one = (uint8_t)c;
    *len = 1;
    return one;
}

/* Fills the SPM pair table: each piece split at each character boundary
 * into two pieces. The text's symbols are cut at the same boundaries and
 * every merged symbol is a piece, so two adjacent symbols whose ids are
 * known join into a piece exactly when this table has their pair; keys
 * are unique (duplicates were refused), so no pair is entered twice.
 * read_meta sized the region for every character boundary; the table
 * takes only what the pairs that exist need (about half of it for
 * Llama 2), because the encoder's time goes into cache misses on it.
 * Also the merge ranks, the seed table and the longest piece. */
static int build_spm_pairs(er_vocab *v, er_spm_pair *tab, uint32_t planned_cap, uint64_t *filter, uint32_t *rank,
                           er_spm_seed *seed) {
    int rc = build_ranks(v, rank);
    if (rc) return rc;
    v->rank = rank;
    uint32_t n = spm_splits(v, NULL, NULL);
    uint32_t cap = pow2_at_least((uint64_t)n + n / 3 + 1);
    if (cap > planned_cap) cap = planned_cap; /* not reached: n <= the boundaries counted */
    memset(tab, 0xFF, sizeof(er_spm_pair) * (size_t)cap);
    v->pair_tab = tab;
    v->pair_mask = cap - 1;
    v->pair_shift = 64;
    for (uint32_t c = cap; c > 1; c >>= 1) v->pair_shift--;
    size_t words = spm_filter_words(cap);
    memset(filter, 0, 8 * words);
    v->pair_filter = filter;
    v->filter_shift = 64;
    for (size_t w = words; w > 1; w >>= 1) v->filter_shift--;
    for (int c = 0; c < 128; c++) {
        uint8_t b = (uint8_t)c;
        v->spm_ascii[c] = er_vocab_find(v, &b, 1);
    }
    static const uint8_t ws[3] = {0xE2, 0x96, 0x81};
    v->spm_ws = er_vocab_find(v, ws, 3);
    spm_splits(v, tab, filter);
    /* By bytes, not by the pair table: a character that is no piece may
     * still begin one, as in the encoder's own fallback. */
    for (int l = 0; l < ER_SPM_SEED_CODES; l++) {
        for (int r = 0; r < ER_SPM_SEED_CODES; r++) {
            uint8_t lb, rb;
            size_t ln, rn;
            const uint8_t *lt = seed_text(l, &lb, &ln), *rt = seed_text(r, &rb, &rn);
            uint32_t id = er_vocab_find2(v, lt, ln, rt, rn);
            er_spm_seed *e = &seed[l * ER_SPM_SEED_CODES + r];
            e->id = id;
            e->rank = id == ER_VOCAB_NO_ID ? ER_SPM_NO_RANK : rank[id];
        }
    }
    v->spm_seed = seed;
    return ER_OK;
}

/* Special tokens sort by first byte, then longest first, so the first match
 * at a position is the longest (Hugging Face's leftmost-longest rule). */
static bool special_before(const er_vocab *v, uint32_t a, uint32_t b) {
    const uint8_t *ta = (const uint8_t *)v->text + v->text_off[a], *tb = (const uint8_t *)v->text + v->text_off[b];
    uint32_t la = v->text_off[a + 1] - v->text_off[a], lb = v->text_off[b + 1] - v->text_off[b];
    if (ta[0] != tb[0]) return ta[0] < tb[0];
    if (la != lb) return la > lb;
    return a < b;
}

/* In-place heapsort: qsort may allocate, and this runs with no heap. */
static void sift(const er_vocab *v, uint32_t *a, uint32_t root, uint32_t end) {
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end && special_before(v, a[child], a[child + 1])) child++;
        if (!special_before(v, a[root], a[child])) return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void sort_specials(const er_vocab *v, uint32_t *a, uint32_t n) {
    for (uint32_t i = n / 2; i-- > 0;) sift(v, a, i, n);
    for (uint32_t end = n; end > 1;) {
        end--;
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(v, a, 0, end);
    }
}

/* Defaults that follow the pre-tokenizer name when the file is silent (the
 * choices llama.cpp makes for these names): Llama 3 and the models that copy
 * its tokenizer add BOS and take whole-token words without merging; Qwen's
 * tokenizer.json (Qwen2 to Qwen3.5) normalizes to NFC, which llama.cpp skips. */
static void family_defaults(const gguf_file *f, er_vocab *v) {
    static const char *const llama3_like[] = {"llama3", "llama-v3", "llama-bpe", "falcon3",
                                              "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
    v->add_bos = v->kind == ER_VOCAB_SPM;
    v->add_space_prefix = v->kind == ER_VOCAB_SPM;
    er_str pre;
    if (v->kind == ER_VOCAB_BPE && gguf_get_str(f, "tokenizer.ggml.pre", &pre)) {
        for (size_t i = 0; i < sizeof llama3_like / sizeof llama3_like[0]; i++)
            if (er_str_eq(pre, llama3_like[i])) v->add_bos = v->ignore_merges = 1;
    }
    v->normalizer = (v->kind == ER_VOCAB_BPE && (v->pre == ER_PRE_QWEN2 || v->pre == ER_PRE_QWEN35))
                        ? ER_NORM_NFC : ER_NORM_NONE;
}

static int read_options(const gguf_file *f, er_vocab *v) {
    int rc;
    family_defaults(f, v);
    if ((rc = get_flag(f, "tokenizer.ggml.add_bos_token", v->add_bos, &v->add_bos))) return rc;
    if ((rc = get_flag(f, "tokenizer.ggml.add_eos_token", 0, &v->add_eos))) return rc;
    if ((rc = get_flag(f, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, &v->add_space_prefix))) return rc;
    if ((rc = get_flag(f, "tokenizer.ggml.remove_extra_whitespaces", 0, &v->remove_extra_ws))) return rc;
    if ((rc = get_flag(f, "tokenizer.ggml.ignore_merges", v->ignore_merges, &v->ignore_merges))) return rc;
    gguf_kv kv;
    if (gguf_find_kv(f, "tokenizer.ggml.normalizer", &kv)) {
        er_str s;
        if (!gguf_get_str(f, "tokenizer.ggml.normalizer", &s))
            return er_fail(ER_ECORRUPT, "tokenizer.ggml.normalizer is not a string");
        if (er_str_eq(s, "nfc") || er_str_eq(s, "NFC")) v->normalizer = ER_NORM_NFC;
        else if (er_str_eq(s, "none") || s.len == 0) v->normalizer = ER_NORM_NONE;
        else
            return er_fail(ER_EUNSUPPORTED, "tokenizer.ggml.normalizer '%.*s' is not supported (none, nfc)",
                           (int)(s.len > 32 ? 32 : s.len), s.ptr);
    }
    uint64_t n = v->n_tokens;
    int spm = v->kind == ER_VOCAB_SPM;
    if ((rc = get_id(f, "tokenizer.ggml.bos_token_id", n, spm && n > 1 ? 1 : -1, &v->bos))) return rc;
    if ((rc = get_id(f, "tokenizer.ggml.eos_token_id", n, spm && n > 2 ? 2 : -1, &v->eos))) return rc;
    if ((rc = get_id(f, "tokenizer.ggml.unknown_token_id", n, -1, &v->unk))) return rc;
    if ((rc = get_id(f, "tokenizer.ggml.padding_token_id", n, -1, &v->pad))) return rc;
    int32_t eot, eom;
    if ((rc = get_id(f, "tokenizer.ggml.eot_token_id", n, -1, &eot))) return rc;
    if ((rc = get_id(f, "tokenizer.ggml.eom_token_id", n, -1, &eom))) return rc;
    if (v->unk < 0 && spm) {
        /* sentencepiece models always have one; llama.cpp's SPM default is id 0 */
        for (uint32_t i = 0; i < v->n_tokens; i++)
            if (v->type[i] == ER_TT_UNKNOWN) { v->unk = (int32_t)i; break; }
    }
    if (v->add_bos && v->bos < 0) v->add_bos = 0;
    if (v->add_eos && v->eos < 0) v->add_eos = 0;

    /* End-of-generation: EOS/EOT/EOM plus the chat-turn terminators models
     * use without naming them in the metadata. */
    int32_t cand[3] = {v->eos, eot, eom};
    for (int i = 0; i < 3; i++)
        if (cand[i] >= 0 && v->n_eog < ER_VOCAB_MAX_EOG) v->eog[v->n_eog++] = cand[i];
    static const char *const names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|eom_id|>", "<EOT>", "<|end_of_text|>", "</s>"};
    for (uint32_t i = 0; i < v->n_special; i++) {
        uint32_t id = v->special[i];
        if (v->type[id] != ER_TT_CONTROL) continue;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            if (strcmp(v->text + v->text_off[id], names[k]) != 0) continue;
            int dup = 0;
            for (int e = 0; e < v->n_eog; e++) dup |= v->eog[e] == (int32_t)id;
            if (!dup && v->n_eog < ER_VOCAB_MAX_EOG) v->eog[v->n_eog++] = (int32_t)id;
        }
    }
    return ER_OK;
}

static void *take(er_arena *a, size_t bytes) { return er_arena_alloc(a, bytes ? bytes : 1); }

int er_vocab_build(const gguf_file *f, er_arena *a, er_vocab **out) {
    meta m;
    int rc = read_meta(f, &m);
    *out = NULL;
    if (rc) return rc;
    if (m.kind == 0) return er_fail(ER_EINVAL, "er_vocab_build: the file has no tokenizer");
    size_t need = plan_bytes(&m);
    if (need > a->size - a->off)
        return er_fail(ER_ENOMEM_ARENA, "tokenizer section holds %zu bytes, needs %zu", a->size - a->off, need);

    er_vocab *v = take(a, sizeof *v);
    char *text = take(a, (size_t)(m.text_bytes + 2 * m.ud_spaces + m.n));
    uint32_t *text_off = take(a, 4 * (size_t)(m.n + 1));
    uint8_t *dec = take(a, (size_t)(m.text_bytes + 5 * m.n_unknown) + 1);
    uint32_t *dec_off = take(a, 4 * (size_t)(m.n + 1));
    uint8_t *type = take(a, (size_t)m.n);
    uint8_t *whole = m.kind == ER_VOCAB_BPE ? take(a, (size_t)m.n) : NULL;
    float *score = m.kind == ER_VOCAB_SPM ? take(a, 4 * (size_t)m.n) : NULL;
    er_spm_pair *pair_tab = m.kind == ER_VOCAB_SPM ? take(a, sizeof(er_spm_pair) * (size_t)m.pair_cap) : NULL;
    uint64_t *filter = m.kind == ER_VOCAB_SPM ? take(a, spm_filter_words(m.pair_cap) * 8) : NULL;
    uint32_t *rank = m.kind == ER_VOCAB_SPM ? take(a, 4 * (size_t)m.n) : NULL;
    er_spm_seed *seed = m.kind == ER_VOCAB_SPM
                            ? take(a, sizeof(er_spm_seed) * ER_SPM_SEED_CODES * ER_SPM_SEED_CODES) : NULL;
    uint32_t *piece_tab = take(a, 4 * (size_t)m.piece_cap);
    er_merge *merge_tab = m.kind == ER_VOCAB_BPE ? take(a, sizeof(er_merge) * (size_t)m.merge_cap) : NULL;
    uint8_t *mbuf = m.kind == ER_VOCAB_BPE ? take(a, (size_t)m.max_merge + 1) : NULL;
    uint32_t *special = take(a, 4 * (size_t)(m.n_special + 1));
    uint8_t *strip = (m.has_strip[0] || m.has_strip[1]) ? take(a, (size_t)m.n) : NULL;
    if (!v || !text || !text_off || !dec || !dec_off || !type || (m.kind == ER_VOCAB_BPE && !whole) ||
        (m.kind == ER_VOCAB_SPM && (!score || !pair_tab || !filter || !rank || !seed)) || !piece_tab ||
        (m.kind == ER_VOCAB_BPE && (!merge_tab || !mbuf)) || !special ||
        ((m.has_strip[0] || m.has_strip[1]) && !strip))
        return er_fail(ER_ENOMEM_ARENA, "tokenizer section is smaller than er_vocab_plan said");

    memset(v, 0, sizeof *v);
    v->kind = m.kind;
    v->pre = m.pre;
    v->n_tokens = (uint32_t)m.n;
    v->unk = v->bos = v->eos = v->pad = -1;

    /* Types first: decoding depends on them. */
    for (uint64_t i = 0; i < m.n; i++) {
        int32_t t = ER_TT_NORMAL;
        if (m.has_types) memcpy(&t, m.types.arr_data + 4 * i, 4);
        type[i] = (uint8_t)t;
    }
    if (score) memcpy(score, m.scores.arr_data, 4 * (size_t)m.n);

    for (int b = 0; b < 256; b++) v->byte_tok[b] = ER_VOCAB_NO_ID;

    const uint8_t *cur = m.tokens.arr_data;
    uint32_t to = 0, dof = 0;
    for (uint64_t i = 0; i < m.n; i++) {
        er_str s = gguf_arr_next_str(&cur);
        const uint8_t *p = (const uint8_t *)s.ptr;
        size_t n = (size_t)s.len;
        text_off[i] = to;
        int t = type[i];
        if (m.kind == ER_VOCAB_SPM && t == ER_TT_USER_DEFINED && all_spaces(s.ptr, n)) {
            /* Gemma's user-defined whitespace pieces "▁▁" ... are written by
             * llama.cpp's converter as runs of spaces. Hugging Face keeps them
             * as "▁▁" (not normalized): it matches them literally in the
             * text, and reaches them from spaces only by merging, ranked
             * with the other pieces, which is not always the longest run
             * (more spaces than the longest piece). Storing the "▁" form
             * gives both: the piece table holds it and tokenize.c matches
             * it literally. Only all-space tokens: one such as "a b" may be
             * a normalized added token whose spaces are meant as spaces. */
            for (size_t k = 0; k < n; k++) {
                text[to++] = (char)0xE2; text[to++] = (char)0x96; text[to++] = (char)0x81;
            }
        } else {
            memcpy(text + to, p, n);
            to += (uint32_t)n;
        }
        text[to++] = '\0';
        dec_off[i] = dof;
        if (t == ER_TT_UNKNOWN && m.kind == ER_VOCAB_SPM) {
            /* sentencepiece renders the unknown piece as " ⁇ " (U+2047), whatever its text */
            static const uint8_t unk_surface[5] = {' ', 0xE2, 0x81, 0x87, ' '};
            memcpy(dec + dof, unk_surface, 5);
            dof += 5;
            continue;
        }
        if (t == ER_TT_CONTROL || t == ER_TT_USER_DEFINED || t == ER_TT_UNKNOWN) {
            /* Added tokens are written out verbatim (byte map and "▁" apply only to model pieces). */
            if (t != ER_TT_USER_DEFINED || m.kind == ER_VOCAB_BPE) {
                memcpy(dec + dof, p, n);
                dof += (uint32_t)n;
                continue;
            }
        }
        if (m.kind == ER_VOCAB_SPM) {
            int byte = t == ER_TT_BYTE ? spm_byte_piece(s.ptr, n) : -1;
            if (byte >= 0) {
                dec[dof++] = (uint8_t)byte;
                if (v->byte_tok[byte] == ER_VOCAB_NO_ID) v->byte_tok[byte] = (uint32_t)i;
                continue;
            }
            for (size_t k = 0; k < n; k++) {
                if (k + 2 < n && p[k] == 0xE2 && p[k + 1] == 0x96 && p[k + 2] == 0x81) {
                    dec[dof++] = ' ';
                    k += 2;
                } else {
                    dec[dof++] = p[k];
                }
            }
        } else {
            size_t d = gpt2_decode(p, n, dec + dof);
            if (d == (size_t)-1) {
                /* Not byte-level text: Hugging Face's ByteLevel decoder emits it as is. */
                memcpy(dec + dof, p, n);
                d = n;
            }
            dof += (uint32_t)d;
        }
    }
    text_off[m.n] = to;
    dec_off[m.n] = dof;

    v->text = text;
    v->text_off = text_off;
    v->dec = dec;
    v->dec_off = dec_off;
    v->type = type;
    v->score = score;
    v->piece_tab = piece_tab;
    v->piece_mask = m.piece_cap - 1;

    memset(piece_tab, 0xFF, 4 * (size_t)m.piece_cap);
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        if (!hashed(m.kind, type[i])) continue;
        /* Byte-level vocabularies may hold pieces that are not byte-level text
         * (no encoder can produce them): they must not shadow real pieces. */
        if (m.kind == ER_VOCAB_BPE && gpt2_decode((const uint8_t *)text + text_off[i],
                                                  text_off[i + 1] - text_off[i] - 1, NULL) == (size_t)-1) {
            continue;
        }
        if ((rc = insert_piece(v, piece_tab, i))) return rc;
    }

    if (m.kind == ER_VOCAB_SPM && (rc = build_spm_pairs(v, pair_tab, m.pair_cap, filter, rank, seed))) return rc;

    if (m.kind == ER_VOCAB_SPM) {
        v->spm_split_words = 1;
        for (uint32_t i = 0; i < v->n_tokens && v->spm_split_words; i++) {
            if (!hashed(m.kind, type[i])) continue;
            const uint8_t *p = (const uint8_t *)text + text_off[i];
            size_t n = text_off[i + 1] - text_off[i] - 1;
            for (size_t k = 1; k + 3 <= n; k++) {
                int ws = p[k] == 0xE2 && p[k + 1] == 0x96 && p[k + 2] == 0x81;
                int after_ws = k >= 3 && p[k - 3] == 0xE2 && p[k - 2] == 0x96 && p[k - 1] == 0x81;
                if (ws && !after_ws) {
                    v->spm_split_words = 0;
                    break;
                }
            }
        }
    }

    if (m.kind == ER_VOCAB_BPE) {
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)b;
            v->byte_tok[b] = er_vocab_find(v, &c, 1);
        }
        memset(merge_tab, 0xFF, sizeof(er_merge) * (size_t)m.merge_cap);
        v->merge_tab = merge_tab;
        v->merge_mask = m.merge_cap - 1;
        cur = m.merges.arr_data;
        for (uint64_t r = 0; r < m.n_merges; r++) {
            er_str s = gguf_arr_next_str(&cur);
            size_t sp = 1;
            while (sp < s.len && s.ptr[sp] != ' ') sp++;
            if (s.len < 3 || sp >= s.len - 1)
                return er_fail(ER_ECORRUPT, "merge %llu ('%.*s') is not two pieces separated by a space",
                               (unsigned long long)r, (int)(s.len > 48 ? 48 : s.len), s.ptr);
            size_t nl = gpt2_decode((const uint8_t *)s.ptr, sp, mbuf);
            size_t nr = nl == (size_t)-1 ? (size_t)-1
                                         : gpt2_decode((const uint8_t *)s.ptr + sp + 1, (size_t)s.len - sp - 1, mbuf + nl);
            uint32_t l = nl == (size_t)-1 ? ER_VOCAB_NO_ID : er_vocab_find(v, mbuf, nl);
            uint32_t rr = nr == (size_t)-1 ? ER_VOCAB_NO_ID : er_vocab_find(v, mbuf + nl, nr);
            if (l == ER_VOCAB_NO_ID || rr == ER_VOCAB_NO_ID)
                return er_fail(ER_ECORRUPT, "merge %llu ('%.*s'): %s piece is not a token", (unsigned long long)r,
                               (int)(s.len > 48 ? 48 : s.len), s.ptr, l == ER_VOCAB_NO_ID ? "its left" : "its right");
            uint32_t res = er_vocab_find(v, mbuf, nl + nr);
            if (res == ER_VOCAB_NO_ID)
                return er_fail(ER_ECORRUPT, "merge %llu ('%.*s'): the merged piece is not a token",
                               (unsigned long long)r, (int)(s.len > 48 ? 48 : s.len), s.ptr);
            uint32_t i = er_hash_pair(l, rr) & v->merge_mask;
            while (merge_tab[i].left != ER_VOCAB_NO_ID && !(merge_tab[i].left == l && merge_tab[i].right == rr))
                i = (i + 1) & v->merge_mask;
            if (merge_tab[i].left == ER_VOCAB_NO_ID) { /* a repeated pair keeps its first (best) rank */
                merge_tab[i].left = l;
                merge_tab[i].right = rr;
                merge_tab[i].rank = (uint32_t)r;
                merge_tab[i].result = res;
                v->n_merges++;
            }
        }
    }

    uint32_t ns = 0;
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        int t = type[i];
        if ((t == ER_TT_CONTROL || t == ER_TT_USER_DEFINED || t == ER_TT_UNKNOWN) && text_off[i + 1] - text_off[i] > 1)
            special[ns++] = i;
    }
    sort_specials(v, special, ns);
    v->special = special;
    v->n_special = ns;
    uint32_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < ns && (uint8_t)text[text_off[special[k]]] < b) k++;
        v->special_first[b] = k;
    }
    v->special_first[256] = ns;

    if (strip) {
        memset(strip, 0, (size_t)m.n);
        for (int k = 0; k < 2; k++) {
            for (uint64_t i = 0; m.has_strip[k] && i < m.strip_ids[k].arr_n; i++) {
                uint32_t id;
                memcpy(&id, m.strip_ids[k].arr_data + 4 * i, 4);
                strip[id] |= (uint8_t)(k == 0 ? ER_STRIP_LEFT : ER_STRIP_RIGHT);
            }
        }
        v->strip = strip;
    }

    if ((rc = read_options(f, v))) return rc;
    v->prefix_first = m.prefix_first;

    /* Last: the encoder below must see the finished tables (and no
     * whole-token shortcut while the flags are being computed). Llama 3
     * style vocabularies take whole tokens anyway (ignore_merges). SPM has
     * no such shortcut: its words merge on the stack, cheaper than the
     * look-up that would skip it. */
    if (whole) {
        memset(whole, 0, (size_t)m.n);
        for (uint32_t i = 0; i < v->n_tokens && !v->ignore_merges; i++)
            if (hashed(m.kind, type[i])) whole[i] = (uint8_t)er_bpe_is_whole(v, i);
    }
    v->whole = whole;
    *out = v;
    return ER_OK;
}

/* ---- public facts -------------------------------------------------------- */

/* NULL vocab: ER_EINVAL (-1) with a message; for bos/eos that is also "none". */
int er_vocab_kind(const er_vocab *v) { return v ? v->kind : er_fail(ER_EINVAL, "er_vocab_kind: vocab is NULL"); }
int er_vocab_n_tokens(const er_vocab *v) {
    return v ? (int)v->n_tokens : er_fail(ER_EINVAL, "er_vocab_n_tokens: vocab is NULL");
}
int er_vocab_bos(const er_vocab *v) { return v ? v->bos : er_fail(ER_EINVAL, "er_vocab_bos: vocab is NULL"); }
int er_vocab_eos(const er_vocab *v) { return v ? v->eos : er_fail(ER_EINVAL, "er_vocab_eos: vocab is NULL"); }

int er_vocab_is_eog(const er_vocab *v, int32_t id) {
    if (!v) return er_fail(ER_EINVAL, "er_vocab_is_eog: vocab is NULL");
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

const char *er_vocab_pre(const er_vocab *v) {
    if (!v) {
        er_fail(ER_EINVAL, "er_vocab_pre: vocab is NULL");
        return "none";
    }
    const char *s = er_pre_name(v->pre);
    return s ? s : "none";
}

const char *er_vocab_token_text(const er_vocab *v, int32_t id) {
    if (!v || id < 0 || (uint32_t)id >= v->n_tokens) {
        er_fail(ER_EINVAL, "er_vocab_token_text: %s", v ? "id out of range" : "vocab is NULL");
        return NULL;
    }
    return v->text + v->text_off[id];
}
