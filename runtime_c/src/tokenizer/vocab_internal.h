/*
 * vocab_internal.h — the tokenizer's tables as er_vocab_build lays them out in
 * the arena, and the internal entry points the encode/decode files share.
 *
 * Everything here is read-only after er_vocab_build, which is what makes every
 * tokenizer call safe on any number of threads at once.
 */
#ifndef ER_VOCAB_INTERNAL_H
#define ER_VOCAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgerun.h"

/* GGUF token types (llama.cpp numbering). */
enum {
    ER_TT_UNDEFINED = 0, ER_TT_NORMAL = 1, ER_TT_UNKNOWN = 2, ER_TT_CONTROL = 3,
    ER_TT_USER_DEFINED = 4, ER_TT_UNUSED = 5, ER_TT_BYTE = 6
};

/* Normalizers applied to each piece of text between special tokens before
 * pre-tokenization (Hugging Face `normalizer`). GGUF has no standard key for
 * it: our converter writes `tokenizer.ggml.normalizer`; foreign files get the
 * default of their pre-tokenizer (Qwen2's tokenizer.json asks for NFC). */
enum { ER_NORM_NONE = 0, ER_NORM_NFC = 1 };

#define ER_VOCAB_NO_ID 0xFFFFFFFFu
#define ER_VOCAB_MAX_EOG 16

/* One BPE merge in the pair table: (left, right) -> merged id at `rank`. */
typedef struct er_merge {
    uint32_t left, right, rank, result;
} er_merge;

/* One SPM id pair: the piece whose text is left's text followed by right's,
 * with that piece's merge rank (er_vocab.rank) beside it, so that a pair
 * found costs one cache line. */
typedef struct er_spm_pair {
    uint32_t left, right, result, rank;
} er_spm_pair;

/* The SPM seed table's entry: the piece two adjacent characters make. */
typedef struct er_spm_seed {
    uint32_t id, rank;          /* ER_VOCAB_NO_ID / ER_SPM_NO_RANK when none */
} er_spm_seed;

#define ER_SPM_NO_RANK 0xFFFFFFFFu
/* Seed-table characters: ASCII bytes but the space, which never reaches the
 * encoder as itself; its code stands for "▁". */
#define ER_SPM_SEED_CODES 128
#define ER_SPM_SEED_WS 0x20

struct er_vocab {
    int kind;                   /* ER_VOCAB_SPM / ER_VOCAB_BPE */
    int pre;                    /* enum er_pre */
    int normalizer;             /* ER_NORM_* */
    int ignore_merges;          /* BPE: a pre-token that is a whole token is taken as is (Llama 3) */
    int add_bos, add_eos;       /* tokenizer.ggml.add_bos_token / add_eos_token, with family defaults */
    int add_space_prefix;       /* SPM dummy prefix "▁" at the start of each text fragment */
    int prefix_first;           /* SPM: the dummy prefix only on the fragment that starts the text
                                 * (edgerun.tokenizer.prepend_scheme = "first") */
    int remove_extra_ws;        /* SPM: trim and collapse spaces (sentencepiece's remove_extra_whitespaces) */
    int spm_split_words;        /* SPM: no piece has "▁" after another character, so words merge apart */
    uint32_t n_tokens;
    int32_t bos, eos, unk, pad;
    int32_t eog[ER_VOCAB_MAX_EOG];
    int n_eog;

    /* Token text as stored in the file, NUL-terminated: text + text_off[i]. */
    const char *text;
    const uint32_t *text_off;   /* n_tokens + 1 */
    /* The bytes each token stands for (what decoding emits and what the
     * encoder's look-ups compare against): SPM "▁" -> ' ', "<0xXX>" -> byte;
     * BPE GPT-2 byte map undone. dec + dec_off[i], length dec_off[i+1]-dec_off[i]. */
    const uint8_t *dec;
    const uint32_t *dec_off;    /* n_tokens + 1 */
    const uint8_t *type;        /* ER_TT_* per token */
    /* BPE: 1 when encoding the token's own bytes yields exactly that token
     * (found at open by running the encoder on it). A pre-token that is such
     * a token is then emitted after one look-up, with the very ids merging
     * would give. NULL for SPM. */
    const uint8_t *whole;
    const float *score;         /* SPM scores, NULL for BPE */

    /* Open-addressing table: piece bytes -> id. SPM keys are the file text
     * (with "▁"); BPE keys are the decoded bytes. Empty slots hold ER_VOCAB_NO_ID. */
    const uint32_t *piece_tab;
    uint32_t piece_mask;

    /* BPE pair table (empty slots have left == ER_VOCAB_NO_ID). */
    const er_merge *merge_tab;
    uint32_t merge_mask;
    uint32_t n_merges;

    /* SPM pair table (empty slots have left == ER_VOCAB_NO_ID): every split
     * of a piece at a character boundary into two pieces. Once the encoder's
     * symbols are pieces, a merge is one look-up of two ids instead of
     * hashing and comparing their bytes. */
    const er_spm_pair *pair_tab;
    uint32_t pair_mask;
    unsigned pair_shift;        /* 64 - log2(pair_mask + 1) */
    /* SPM: a filter on the pair table (er_vocab_spm_pair): per pair two
     * bits, set in one of its 64-bit words. */
    const uint64_t *pair_filter;
    unsigned filter_shift;      /* 64 - log2 of its words */
    /* SPM: the piece of each ASCII character and of "▁" (ER_VOCAB_NO_ID when
     * none), so that cutting a text into symbols mostly skips the hash. */
    uint32_t spm_ascii[128];
    uint32_t spm_ws;
    /* SPM merge order: rank[id] < rank[other] when id merges first, i.e.
     * higher score (user-defined pieces above all), then lower id. One
     * integer compare instead of a score, a type and an id. */
    const uint32_t *rank;
    /* SPM: the piece each two seed-table characters make (code * 128 +
     * code, see ER_SPM_SEED_WS), so a word's first pairs skip the pair
     * table's cache misses. */
    const er_spm_seed *spm_seed;

    /* Token for each byte value: BPE the GPT-2-mapped single byte, SPM "<0xXX>";
     * ER_VOCAB_NO_ID when the vocabulary has none. */
    uint32_t byte_tok[256];

    /* Tokens matched in the text before splitting (CONTROL, USER_DEFINED,
     * UNKNOWN), sorted by first byte, then longest first; special_first[b] ..
     * special_first[b+1] is the run starting with byte b. */
    const uint32_t *special;
    uint32_t n_special;
    uint32_t special_first[257];

    /* Per token ER_STRIP_* bits (Hugging Face's AddedToken lstrip/rstrip: a
     * matched token also takes the whitespace before/after it); NULL when
     * the file names none. */
    const uint8_t *strip;
};

enum { ER_STRIP_LEFT = 1, ER_STRIP_RIGHT = 2 };

/* Bytes of token `id` as decoded text. */
static inline const uint8_t *er_vocab_dec(const er_vocab *v, uint32_t id, size_t *len) {
    *len = v->dec_off[id + 1] - v->dec_off[id];
    return v->dec + v->dec_off[id];
}

/* 32-bit FNV-1a over two concatenated byte strings (the encoders look up the
 * concatenation of two symbols without copying it). */
static inline uint32_t er_hash2(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < na; i++) h = (h ^ a[i]) * 16777619u;
    for (size_t i = 0; i < nb; i++) h = (h ^ b[i]) * 16777619u;
    /* FNV's low bits are weak for short keys; mix before masking. */
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

static inline uint32_t er_hash_pair(uint32_t l, uint32_t r) {
    uint64_t x = ((uint64_t)l << 32) | r;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* The SPM pair tables' hash: one multiply, on the encoder's hottest path
 * (Fibonacci hashing: the product's top bits depend on every bit of both
 * ids, so the slot and the filter bits all come from them). */
static inline uint64_t er_hash_spm_pair(uint32_t l, uint32_t r) {
    return (((uint64_t)l << 32) | r) * 0x9E3779B97F4A7C15ull;
}

/* The SPM pair filter's word and bits for hash h (shift = 64 - log2 of
 * its words; two bits per pair in one word: one cache line per look-up). */
static inline uint64_t er_spm_filter_bits(uint64_t h, unsigned shift) {
    return (1ull << ((h >> (shift - 6)) & 63)) | (1ull << ((h >> (shift - 12)) & 63));
}

/* Looks up the piece a[0..na) ++ b[0..nb) in the piece table (keys: `keys`
 * + off[id], as laid out for the vocab's kind). Returns the id or ER_VOCAB_NO_ID. */
uint32_t er_vocab_find2(const er_vocab *v, const uint8_t *a, size_t na, const uint8_t *b, size_t nb);

static inline uint32_t er_vocab_find(const er_vocab *v, const uint8_t *s, size_t n) {
    return er_vocab_find2(v, s, n, NULL, 0);
}

/* Merge look-up: the merge of (left, right), or NULL. */
static inline const er_merge *er_vocab_merge(const er_vocab *v, uint32_t l, uint32_t r) {
    uint32_t i = er_hash_pair(l, r) & v->merge_mask;
    for (;;) {
        const er_merge *m = &v->merge_tab[i];
        if (m->left == ER_VOCAB_NO_ID) return NULL;
        if (m->left == l && m->right == r) return m;
        i = (i + 1) & v->merge_mask;
    }
}

/* SPM pair look-up: the entry of the piece that is (left, right)
 * concatenated, or NULL. Most pairs of a text make no piece: the filter
 * says so for nearly all of them from a table small enough to stay in
 * cache, where the pair table's slot would be a miss. */
static inline const er_spm_pair *er_vocab_spm_pair(const er_vocab *v, uint32_t l, uint32_t r) {
    uint64_t h = er_hash_spm_pair(l, r);
    uint64_t want = er_spm_filter_bits(h, v->filter_shift);
    if ((v->pair_filter[h >> v->filter_shift] & want) != want) return NULL;
    uint32_t i = (uint32_t)(h >> v->pair_shift);
    for (;;) {
        const er_spm_pair *p = &v->pair_tab[i];
        if (p->left == l && p->right == r) return p;
        if (p->left == ER_VOCAB_NO_ID) return NULL;
        i = (i + 1) & v->pair_mask;
    }
}

/* Bytes of a UTF-8 character from its first byte, llama.cpp's table: a
 * stray continuation byte is a character of its own. The SPM encoder cuts
 * its symbols so, and the pair table splits pieces so: both must agree. */
static inline uint32_t er_utf8_len(uint8_t c) {
    static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[c >> 4];
}

/* Where encoders put ids: counts past `cap` without writing, so the caller
 * can report how many it would have needed. */
typedef struct er_idsink {
    int32_t *ids;
    size_t cap;
    size_t n;
} er_idsink;

static inline void er_sink_push(er_idsink *s, uint32_t id) {
    if (s->n < s->cap) s->ids[s->n] = (int32_t)id;
    s->n++;
}

/* Scratch regions per encoder; both take bytes proportional to the fragment. */
size_t er_spm_scratch_bytes(size_t len);
size_t er_bpe_scratch_bytes(size_t len);

/* Whether encoding token `id`'s bytes on its own gives [id] (used at open). */
int er_bpe_is_whole(const er_vocab *v, uint32_t id);

/* Encode one fragment of text (no special tokens inside). SPM: `prefix`
 * says whether this fragment may get the dummy prefix (add_space_prefix);
 * the caller decides by the prepend scheme (every fragment, or only the one
 * at the start of the text). */
void er_spm_encode(const er_vocab *v, const char *text, size_t len, int prefix,
                   er_idsink *out, void *scratch, size_t scratch_bytes);
void er_bpe_encode(const er_vocab *v, const char *text, size_t len,
                   er_idsink *out, void *scratch, size_t scratch_bytes);

#endif
