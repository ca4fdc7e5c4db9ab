/*
 * fuzz_tokenizer.c — libFuzzer entry for the tokenizer: random vocabulary
 * metadata and random text (not built by meson; scripts/fuzz.sh builds it).
 *
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -Iruntime_c/include -Iruntime_c/src runtime_c/tests/fuzz_tokenizer.c \
 *     runtime_c/src/{gguf,gguf_types,error,arena}.c runtime_c/src/tokenizer/[a-z]*.c \
 *     -o /tmp/fuzz_tokenizer
 *   /tmp/fuzz_tokenizer -max_total_time=60 runtime_c/tests/corpus/fuzz_tokenizer
 *
 * The input is read as a recipe: a header byte picks the family (SPM or
 * byte-level BPE), which optional keys appear and whether the 256 byte
 * tokens are included (so merges and byte fallback are reachable); then come
 * the tokens (random strings), their types (mostly valid, sometimes not),
 * scores, merges built from pairs of tokens, special ids (sometimes out of
 * range), a pre-tokenizer name, and finally the text. The recipe becomes a
 * GGUF image in memory that goes through gguf_parse, er_vocab_plan and
 * er_vocab_build exactly as er_model_open does; a vocabulary that builds then
 * tokenizes the text with every flag combination, detokenizes the ids in one
 * call and in a stream, and retries with too-small buffers.
 *
 * Aborts (a finding) when: a failure leaves no message, the build overruns
 * its plan, an id is out of range, a too-small buffer does not report
 * ER_ERANGE with the size needed, or stream and one-shot decoding disagree.
 * tests/fuzz_replay.c runs the corpus in ordinary (and sanitizer) builds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "tokenizer/vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- input reader -------------------------------------------------------------- */

typedef struct src {
    const uint8_t *p;
    size_t n;
} src;

static uint8_t byte(src *s) {
    if (!s->n) return 0;
    s->n--;
    return *s->p++;
}

/* ---- GGUF image writer ------------------------------------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_bytes_str(buf *b, const void *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}
static void put_str(buf *b, const char *s) { put_bytes_str(b, s, strlen(s)); }
static void key(buf *b, const char *k, uint32_t type) {
    put_str(b, k);
    put_u32(b, type);
}

#define MAX_TOK 320
#define TOK_LEN 12

typedef struct recipe {
    int bpe, n;
    char tok[MAX_TOK][TOK_LEN];
    uint8_t len[MAX_TOK];
} recipe;

/* GPT-2's byte-to-unicode map for byte b, UTF-8 encoded into out. */
static size_t gpt2_byte(int b, char *out) {
    uint32_t cp;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) cp = (uint32_t)b;
    else if (b <= 0x20) cp = 0x100 + (uint32_t)b;
    else if (b >= 0x7F && b <= 0xA0) cp = 0x121 + (uint32_t)(b - 0x7F);
    else cp = 0x143;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static const char *const k_pre[] = {"gpt2", "llama3", "qwen2", "deepseek-llm", "deepseek-coder", "falcon",
                                    "starcoder", "poro", "viking", "smollm", "no-such-pre", ""};

static uint8_t *build_image(src *in, size_t *size) {
    static recipe r;
    uint8_t h = byte(in), h2 = byte(in);
    r.bpe = h & 1;
    int with_bytes = (h >> 1) & 1, with_types = (h >> 2) & 1;
    r.n = 0;
    if (with_bytes) {
        for (int b = 0; b < 256; b++) {
            if (r.bpe) r.len[r.n] = (uint8_t)gpt2_byte(b, r.tok[r.n]);
            else r.len[r.n] = (uint8_t)snprintf(r.tok[r.n], TOK_LEN, "<0x%02X>", b);
            r.n++;
        }
    }
    int extra = 1 + byte(in) % 48;
    for (int i = 0; i < extra && r.n < MAX_TOK; i++) {
        int l = byte(in) % TOK_LEN;
        for (int k = 0; k < l; k++) r.tok[r.n][k] = (char)byte(in);
        r.len[r.n++] = (uint8_t)l;
    }

    buf b = {0};
    int n_kv = 3; /* model, tokens, scores */
    int has_merges = r.bpe && (h2 & 1) == 0;
    n_kv += with_types + has_merges + 6 /* flags and ids below */ + ((h2 >> 1) & 1) /* pre */ +
            ((h2 >> 2) & 1) /* normalizer */ + ((h2 >> 4) & 1) /* prepend scheme */;
    put_u32(&b, 0x46554747u);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, (uint64_t)n_kv);

    key(&b, "tokenizer.ggml.model", 8);
    /* now and then a family we do not run, to reach that error */
    put_str(&b, (h & 0xF0) == 0xF0 ? "bert" : r.bpe ? "gpt2" : "llama");
    key(&b, "tokenizer.ggml.tokens", 9);
    put_u32(&b, 8);
    put_u64(&b, (uint64_t)r.n);
    for (int i = 0; i < r.n; i++) put_bytes_str(&b, r.tok[i], r.len[i]);
    key(&b, "tokenizer.ggml.scores", 9);
    put_u32(&b, 6);
    put_u64(&b, (uint64_t)r.n);
    for (int i = 0; i < r.n; i++) {
        float sc = (float)(int8_t)byte(in) / 4.0f;
        put(&b, &sc, 4);
    }
    if (with_types) {
        key(&b, "tokenizer.ggml.token_type", 9);
        put_u32(&b, 5);
        put_u64(&b, (uint64_t)r.n);
        for (int i = 0; i < r.n; i++) {
            uint8_t t = byte(in);
            /* byte tokens keep their type so byte fallback works; 1 in 256 is invalid */
            int32_t ty = with_bytes && i < 256 && !r.bpe ? 6 : t == 255 ? 7 : 1 + t % 6;
            put(&b, &ty, 4);
        }
    }
    if (has_merges) {
        int nm = byte(in) % 64;
        key(&b, "tokenizer.ggml.merges", 9);
        put_u32(&b, 8);
        put_u64(&b, (uint64_t)nm);
        for (int i = 0; i < nm; i++) {
            int a = (byte(in) | byte(in) << 8) % r.n, c = (byte(in) | byte(in) << 8) % r.n;
            char m[2 * TOK_LEN + 2];
            size_t l = 0;
            memcpy(m, r.tok[a], r.len[a]);
            l += r.len[a];
            m[l++] = ' ';
            memcpy(m + l, r.tok[c], r.len[c]);
            l += r.len[c];
            put_bytes_str(&b, m, l);
        }
    }
    static const char *const flags[] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                        "tokenizer.ggml.add_space_prefix"};
    uint8_t fl = byte(in);
    for (int i = 0; i < 3; i++) {
        key(&b, flags[i], 7);
        uint8_t v = (fl >> i) & 1;
        put(&b, &v, 1);
    }
    static const char *const ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.unknown_token_id"};
    for (int i = 0; i < 3; i++) {
        key(&b, ids[i], 4);
        uint8_t v = byte(in);
        /* mostly in range; 0xFF asks for an id past the end */
        uint32_t id = v == 0xFF ? (uint32_t)r.n + v : (uint32_t)(v % r.n);
        put_u32(&b, id);
    }
    if ((h2 >> 1) & 1) {
        key(&b, "tokenizer.ggml.pre", 8);
        put_str(&b, k_pre[byte(in) % (sizeof k_pre / sizeof k_pre[0])]);
    }
    if ((h2 >> 2) & 1) {
        key(&b, "tokenizer.ggml.normalizer", 8);
        put_str(&b, (h2 >> 3) & 1 ? "nfc" : "none");
    }
    if ((h2 >> 4) & 1) {
        key(&b, "edgerun.tokenizer.prepend_scheme", 8);
        put_str(&b, (h2 >> 5) & 1 ? "first" : "always");
    }
    while (b.n % 32) put(&b, "", 1);
    *size = b.n;
    return b.p;
}

/* ---- checks -------------------------------------------------------------------------- */

static void must(int cond) {
    if (!cond) abort();
}

/* A failure must explain itself. */
static void failed_cleanly(int rc) { must(rc < 0 && er_last_error()[0] != '\0'); }

static void exercise(const er_vocab *v, const char *text, size_t len) {
    int n_tok = er_vocab_n_tokens(v);
    size_t sb = er_tokenize_scratch_bytes(v, len);
    must(sb != SIZE_MAX);
    uint8_t *scratch = malloc(sb);
    size_t cap = 4 * len + 8;
    int32_t *ids = malloc(cap * sizeof(int32_t));
    for (int flags = 0; flags < 4; flags++) {
        size_t n = 0;
        er_clear_error();
        int rc = er_tokenize(v, text, len, flags, ids, cap, &n, scratch, sb);
        if (rc) {
            failed_cleanly(rc);
            continue;
        }
        must(n <= cap);
        for (size_t i = 0; i < n; i++) must(ids[i] >= 0 && ids[i] < n_tok);
        if (n > 0) {
            size_t n2 = 0;
            int rc2 = er_tokenize(v, text, len, flags, ids, n - 1, &n2, scratch, sb);
            must(rc2 == ER_ERANGE && n2 == n);
        }
        /* one-shot and streaming decode agree byte for byte */
        size_t need = 0;
        int rc3 = er_detokenize(v, ids, n, 0, NULL, 0, &need);
        must(rc3 == ER_OK || rc3 == ER_ERANGE);
        char *txt = malloc(need + 1), *stream = malloc(need + 16);
        size_t got = 0;
        must(er_detokenize(v, ids, n, 0, txt, need + 1, &got) == ER_OK && got == need);
        er_detok_state st;
        memset(&st, 0, sizeof st);
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) {
            size_t w = 0;
            char piece[256];
            int rs = er_detok_step(v, &st, ids[i], piece, sizeof piece, &w);
            if (rs == ER_ERANGE) break; /* a token longer than 256 bytes: cannot happen here */
            must(rs == ER_OK && pos + w <= need + 16);
            memcpy(stream + pos, piece, w);
            pos += w;
        }
        size_t w = 0;
        must(er_detok_flush(v, &st, stream + pos, need + 16 - pos, &w) == ER_OK);
        pos += w;
        must(pos == need && memcmp(stream, txt, need) == 0);
        free(txt);
        free(stream);
    }
    free(ids);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    src in = {data, size};
    size_t img_n = 0;
    uint8_t *img = build_image(&in, &img_n);
    gguf_file f;
    er_clear_error();
    int rc = gguf_parse(img, img_n, &f);
    if (rc) {
        failed_cleanly(rc);
        free(img);
        return 0;
    }
    int st = 0;
    er_clear_error();
    size_t need = er_vocab_plan(&f, &st);
    if (need == (size_t)-1) {
        failed_cleanly(st);
        free(img);
        return 0;
    }
    must(need > 0);
    void *mem = aligned_alloc(64, er_align_up(need));
    er_arena a;
    er_arena_init(&a, mem, er_align_up(need));
    er_vocab *v = NULL;
    er_clear_error();
    rc = er_vocab_build(&f, &a, &v);
    must(a.high <= need);
    if (rc) {
        failed_cleanly(rc);
    } else {
        exercise(v, (const char *)in.p, in.n);
    }
    free(mem);
    free(img);
    return 0;
}
