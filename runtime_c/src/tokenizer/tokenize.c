/*
 * tokenize.c — er_tokenize: special tokens first, then the vocabulary's
 * encoder on each piece of text between them.
 *
 * Special tokens are found leftmost-longest, as Hugging Face's added-token
 * matcher does: USER_DEFINED tokens always (HF's non-special added tokens),
 * CONTROL and UNKNOWN ones only with ER_TOK_PARSE_SPECIAL. A token the file
 * marks lstrip / rstrip (tokenizer.ggml.lstrip_token_ids / rstrip_token_ids,
 * HF's AddedToken flags; Phi-3's chat tokens are rstrip) also takes the
 * whitespace before / after it, which then reaches no encoder.
 * SentencePiece's dummy prefix goes on every piece of text, or, with
 * edgerun.tokenizer.prepend_scheme = "first", only on the one at offset 0.
 *
 * Scratch bound (er_tokenize_scratch_bytes), for len bytes of text:
 *   SPM                 er_spm_scratch_bytes(len)            ~ 83*len
 *   BPE                 er_bpe_scratch_bytes(len)            ~ 72*len
 *   BPE + NFC           3*len+8 (the NFC text: at most 3x its input, Unicode's
 *                       bound) + er_nfc_work_bytes(len) ~ 16*len
 *                       + er_bpe_scratch_bytes(3*len+8)
 * plus 64 bytes of alignment slack. Each fragment between special tokens is
 * shorter than the text, so one region serves them all in turn.
 */
#include <stdint.h>
#include <string.h>

#include "../error.h"
#include "normalize.h"
#include "unicode.h"
#include "vocab_internal.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

/* Texts longer than this are refused: every bound below stays far from overflow. */
#define MAX_TEXT ((size_t)1 << 40)

size_t er_tokenize_scratch_bytes(const er_vocab *v, size_t len) {
    if (!v || len > MAX_TEXT) return SIZE_MAX;
    if (v->kind == ER_VOCAB_SPM) return 64 + er_spm_scratch_bytes(len);
    if (v->normalizer == ER_NORM_NFC) {
        size_t nl = 3 * len + 8;
        return 64 + ALIGN8(nl) + ALIGN8(er_nfc_work_bytes(len)) + er_bpe_scratch_bytes(nl);
    }
    return 64 + er_bpe_scratch_bytes(len);
}

/* `at_start`: the fragment begins the text (offset 0). SentencePiece's dummy
 * prefix goes on every fragment, or with prepend scheme "first" only on that
 * one (Hugging Face's Metaspace "first" looks at the same original offset:
 * text after a leading special token gets none). */
static void encode_fragment(const er_vocab *v, const char *t, size_t n, int at_start, er_idsink *out,
                            uint8_t *scratch) {
    if (n == 0) return;
    if (v->kind == ER_VOCAB_SPM) {
        er_spm_encode(v, t, n, at_start || !v->prefix_first, out, scratch, er_spm_scratch_bytes(n));
        return;
    }
    if (v->normalizer == ER_NORM_NFC) {
        size_t cap = ALIGN8(3 * n + 8), work = ALIGN8(er_nfc_work_bytes(n));
        char *norm = (char *)scratch;
        size_t m = er_nfc(t, n, norm, (uint32_t *)(void *)(scratch + cap));
        er_bpe_encode(v, norm, m, out, scratch + cap + work, er_bpe_scratch_bytes(m));
        return;
    }
    er_bpe_encode(v, t, n, out, scratch, er_bpe_scratch_bytes(n));
}

/* Where the whitespace that ends text[a..b) starts (b when none), and where
 * the whitespace that starts text[a..n) ends: an lstrip / rstrip token takes
 * it. Whitespace is Unicode White_Space, what Hugging Face strips (the same
 * set as the pre-tokenizers' \s). */
static size_t ws_run_start(const char *text, size_t a, size_t b) {
    size_t start = b;
    for (size_t p = a; p < b;) {
        size_t adv;
        uint32_t cp = er_utf8_decode(text + p, b - p, &adv);
        if (er_unicode_is_whitespace(cp)) {
            if (start == b) start = p;
        } else {
            start = b;
        }
        p += adv;
    }
    return start;
}

static size_t ws_run_end(const char *text, size_t a, size_t n) {
    while (a < n) {
        size_t adv;
        uint32_t cp = er_utf8_decode(text + a, n - a, &adv);
        if (!er_unicode_is_whitespace(cp)) break;
        a += adv;
    }
    return a;
}

/* Length of the special token starting at t[0..n), or 0; *id receives it. */
static size_t match_special(const er_vocab *v, const uint8_t *t, size_t n, int parse_special, uint32_t *id) {
    uint32_t a = v->special_first[t[0]], b = v->special_first[t[0] + 1];
    for (uint32_t k = a; k < b; k++) {
        uint32_t s = v->special[k];
        if (!parse_special && v->type[s] != ER_TT_USER_DEFINED) continue;
        size_t l = v->text_off[s + 1] - v->text_off[s] - 1;
        if (l <= n && memcmp(v->text + v->text_off[s], t, l) == 0) {
            *id = s;
            return l;
        }
    }
    return 0;
}

int er_tokenize(const er_vocab *v, const char *text, size_t len, int flags, int32_t *ids, size_t cap,
                size_t *n_out, void *scratch, size_t scratch_bytes) {
    if (n_out) *n_out = 0;
    if (!v || !n_out || (!text && len > 0) || (!ids && cap > 0))
        return er_fail(ER_EINVAL, "er_tokenize: NULL vocab, text, ids or n_out");
    if (flags & ~(ER_TOK_ADD_SPECIAL | ER_TOK_PARSE_SPECIAL))
        return er_fail(ER_EINVAL, "er_tokenize: unknown flags 0x%x", (unsigned)flags);
    size_t need = er_tokenize_scratch_bytes(v, len);
    if (need == SIZE_MAX)
        return er_fail(ER_EINVAL, "er_tokenize: text of %zu bytes is too long", len);
    if (!scratch || scratch_bytes < need)
        return er_fail(ER_ERANGE, "er_tokenize: scratch of %zu bytes is too small for %zu bytes of text "
                                  "(er_tokenize_scratch_bytes says %zu)", scratch ? scratch_bytes : 0, len, need);
    uint8_t *sc = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);

    er_idsink out = {ids, cap, 0};
    int add = (flags & ER_TOK_ADD_SPECIAL) != 0, parse = (flags & ER_TOK_PARSE_SPECIAL) != 0;
    if (add && v->add_bos) er_sink_push(&out, (uint32_t)v->bos);

    const uint8_t *t = (const uint8_t *)text;
    size_t frag = 0;
    if (v->n_special > 0) {
        for (size_t i = 0; i < len;) {
            uint32_t id;
            size_t l = v->special_first[t[i]] == v->special_first[t[i] + 1]
                           ? 0 : match_special(v, t + i, len - i, parse, &id);
            if (l == 0) {
                i++;
                continue;
            }
            size_t cut = i;
            if (v->strip && (v->strip[id] & ER_STRIP_LEFT)) cut = ws_run_start(text, frag, i);
            encode_fragment(v, text + frag, cut - frag, frag == 0, &out, sc);
            er_sink_push(&out, id);
            i += l;
            if (v->strip && (v->strip[id] & ER_STRIP_RIGHT)) i = ws_run_end(text, i, len);
            frag = i;
        }
    }
    encode_fragment(v, text + frag, len - frag, frag == 0, &out, sc);

    if (add && v->add_eos) er_sink_push(&out, (uint32_t)v->eos);
    *n_out = out.n;
    if (out.n > cap)
        return er_fail(ER_ERANGE, "er_tokenize: %zu ids do not fit in %zu", out.n, cap);
    return ER_OK;
}
