/*
 * test_tokenizer.c — the C tokenizer on the real vocabularies and expected
 * ids in ../shared/data/tokenizers/vectors (argv[1] is the data folder; the
 * vector part is skipped when absent), on small vocabularies written here,
 * on malformed metadata, on arbitrary bytes, and from many threads at once.
 *
 * Vocabularies are built the way er_model_open builds them: er_vocab_plan
 * sizes one arena block, er_vocab_build fills it; the test then checks the
 * build used no more than the plan.
 */
#include "error.h"
#include "gguf.h"
#include "test_util.h"
#include "tokenizer/vocab.h"
#include "tokenizer/vocab_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct loaded {
    gguf_file f;
    void *mem;
    er_arena a;
    er_vocab *v;
    uint8_t *image; /* in-memory files */
} loaded;

static int build(loaded *l) {
    int st = 0;
    size_t need = er_vocab_plan(&l->f, &st);
    if (need == (size_t)-1) return st;
    if (need == 0) return 1;
    l->mem = aligned_alloc(64, er_align_up(need));
    er_arena_init(&l->a, l->mem, er_align_up(need));
    int rc = er_vocab_build(&l->f, &l->a, &l->v);
    CHECK(l->a.high <= need, "build used %zu bytes, plan said %zu", l->a.high, need);
    return rc;
}

static int load_file(loaded *l, const char *path) {
    memset(l, 0, sizeof *l);
    int rc = gguf_open(path, &l->f);
    return rc ? rc : build(l);
}

static void unload(loaded *l) {
    gguf_close(&l->f);
    free(l->mem);
    free(l->image);
    memset(l, 0, sizeof *l);
}

/* Encodes with a right-sized scratch; returns the status. */
static int encode(const er_vocab *v, const char *s, size_t n, int flags, int32_t *ids, size_t cap, size_t *n_out) {
    size_t sb = er_tokenize_scratch_bytes(v, n);
    void *scratch = malloc(sb);
    int rc = er_tokenize(v, s, n, flags, ids, cap, n_out, scratch, sb);
    free(scratch);
    return rc;
}

/* ---- vectors --------------------------------------------------------------- */

static char *slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *p = malloc((size_t)sz + 1);
    *n = fread(p, 1, (size_t)sz, fp);
    p[*n] = 0;
    fclose(fp);
    return p;
}

static void test_vectors(const char *dir, const char *family) {
    char path[1024], inp[1100], outp[1100];
    snprintf(path, sizeof path, "%s/tokenizers/vectors/ggml-vocab-%s.gguf", dir, family);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        printf("skip vectors %s: %s absent\n", family, path);
        return;
    }
    loaded l;
    int rc = load_file(&l, path);
    CHECK(rc == 0, "%s: open failed: %s", family, er_last_error());
    if (rc) return;
    size_t ni, no;
    char *in = slurp(inp, &ni), *out = slurp(outp, &no);
    CHECK(in && out, "%s: cannot read the .inp/.out files", family);
    if (!in || !out) return;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = in, *q = out;
    int cases = 0, bad = 0;
    int32_t ids[4096];
    for (;;) {
        char *e = strstr(p, sep);
        if (!e) break;
        char *qe = strchr(q, '\n');
        if (!qe) break;
        *qe = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *t = q; *t;) {
            char *end;
            long x = strtol(t, &end, 10);
            if (end == t) break;
            want[nw++] = (int32_t)x;
            t = end;
        }
        size_t n = 0;
        rc = encode(l.v, p, (size_t)(e - p), 0, ids, 4096, &n);
        int ok = rc == 0 && n == nw && memcmp(ids, want, n * sizeof ids[0]) == 0;
        if (!ok) {
            bad++;
            fprintf(stderr, "%s case %d '%.*s': got", family, cases, (int)(e - p), p);
            for (size_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n   want");
            for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n");
        }
        cases++;
        p = e + sizeof sep - 1;
        q = qe + 1;
    }
    CHECK(cases == 46 && bad == 0, "%s: %d of %d cases differ", family, bad, cases);
    printf("vectors %s: %d cases, %d mismatches\n", family, cases, bad);
    free(in);
    free(out);
    unload(&l);
}

/* ---- in-memory vocabularies ------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* A key/value of the synthetic file. */
typedef struct kv {
    const char *key;
    int type;              /* GGUF_STR, GGUF_U32, GGUF_BOOL, GGUF_ARR */
    const char *s;
    uint32_t u;
    int arr_type;          /* GGUF_STR / GGUF_I32 / GGUF_F32 */
    const char *const *strs;
    const int32_t *i32s;
    const float *f32s;
    size_t n;
} kv;

static uint8_t *make_gguf(const kv *kvs, size_t nkv, size_t *size) {
    buf b = {0};
    put_u32(&b, 0x46554747u); /* "GGUF" */
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, nkv);
    for (size_t i = 0; i < nkv; i++) {
        put_str(&b, kvs[i].key);
        put_u32(&b, (uint32_t)kvs[i].type);
        switch (kvs[i].type) {
        case GGUF_STR: put_str(&b, kvs[i].s); break;
        case GGUF_U32: put_u32(&b, kvs[i].u); break;
        case GGUF_BOOL: { uint8_t x = (uint8_t)kvs[i].u; put(&b, &x, 1); } break;
        case GGUF_ARR:
            put_u32(&b, (uint32_t)kvs[i].arr_type);
            put_u64(&b, kvs[i].n);
            for (size_t k = 0; k < kvs[i].n; k++) {
                if (kvs[i].arr_type == GGUF_STR) put_str(&b, kvs[i].strs[k]);
                else if (kvs[i].arr_type == GGUF_I32) put(&b, &kvs[i].i32s[k], 4);
                else put(&b, &kvs[i].f32s[k], 4);
            }
            break;
        }
    }
    /* pad to the default alignment: an empty data section follows */
    while (b.n % 32) { uint8_t z = 0; put(&b, &z, 1); }
    *size = b.n;
    return b.p;
}

static int load_kvs(loaded *l, const kv *kvs, size_t nkv) {
    memset(l, 0, sizeof *l);
    size_t n;
    l->image = make_gguf(kvs, nkv, &n);
    int rc = gguf_parse(l->image, n, &l->f);
    CHECK(rc == 0, "synthetic GGUF does not parse: %s", er_last_error());
    return rc ? rc : build(l);
}

/* A byte-level vocabulary: the 256 byte pieces (GPT-2 map), "ab", "abc", a
 * control token and a user-defined token. */
static const char *const *bpe_tokens(size_t *n) {
    static char store[256][4];
    static const char *tok[263];
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) cp = (uint32_t)b;
        else if (b <= 0x20) cp = 0x100 + (uint32_t)b;
        else if (b >= 0x7F && b <= 0xA0) cp = 0x121 + (uint32_t)(b - 0x7F);
        else cp = 0x143;
        if (cp < 0x80) { store[b][0] = (char)cp; store[b][1] = 0; }
        else { store[b][0] = (char)(0xC0 | (cp >> 6)); store[b][1] = (char)(0x80 | (cp & 0x3F)); store[b][2] = 0; }
        tok[b] = store[b];
    }
    tok[256] = "ab";
    tok[257] = "abc";
    tok[258] = "<|end|>";
    tok[259] = "<tool>";
    tok[260] = "\xc4\xa0\x61";   /* " a" */
    tok[261] = "bc";
    tok[262] = "\xc4\xa0\x61\x62";  /* " ab" */
    *n = 263;
    return tok;
}

static void test_small_bpe(void) {
    size_t n;
    const char *const *tok = bpe_tokens(&n);
    int32_t types[263];
    for (size_t i = 0; i < n; i++) types[i] = ER_TT_NORMAL;
    types[258] = ER_TT_CONTROL;
    types[259] = ER_TT_USER_DEFINED;
    /* "b c" outranks "a b": "abc" must become a + bc, never ab + c. */
    static const char *const merges[] = {"b c", "a b", "ab c", "\xc4\xa0 a", "\xc4\xa0\x61 b"};
    kv kvs[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.pre", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
        {"tokenizer.ggml.token_type", GGUF_ARR, 0, 0, GGUF_I32, 0, types, 0, n},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 5},
        {"tokenizer.ggml.eos_token_id", GGUF_U32, 0, 258, 0, 0, 0, 0, 0},
    };
    loaded l;
    int rc = load_kvs(&l, kvs, 6);
    CHECK(rc == 0, "small BPE vocab: %s", er_last_error());
    if (rc) return;
    const er_vocab *v = l.v;
    int32_t ids[64];
    size_t k;
    CHECK(er_vocab_kind(v) == ER_VOCAB_BPE, "kind");
    CHECK(er_vocab_is_eog(v, 258) == 1 && er_vocab_is_eog(v, 5) == 0, "eog");
    rc = encode(v, "abc", 3, 0, ids, 64, &k);
    CHECK(rc == 0 && k == 2 && ids[0] == 'a' && ids[1] == 261, "abc -> a bc (rank order), got %zu ids [%d %d]", k,
          ids[0], ids[1]);
    rc = encode(v, "ab ab", 5, 0, ids, 64, &k);
    /* " ab": "a b" (rank 1) beats "Ġ a" (rank 3), and "Ġ ab" is no merge */
    CHECK(rc == 0 && k == 3 && ids[0] == 256 && ids[1] == ' ' && ids[2] == 256, "'ab ab' -> ab, ' ', ab");
    /* special tokens: control only with PARSE_SPECIAL, user-defined always */
    rc = encode(v, "x<|end|>y", 9, 0, ids, 64, &k);
    CHECK(rc == 0 && k == 9, "control token not parsed without the flag (%zu ids)", k);
    rc = encode(v, "x<|end|>y", 9, ER_TOK_PARSE_SPECIAL, ids, 64, &k);
    CHECK(rc == 0 && k == 3 && ids[1] == 258, "control token parsed with the flag");
    rc = encode(v, "x<tool>y", 8, 0, ids, 64, &k);
    CHECK(rc == 0 && k == 3 && ids[1] == 259, "user-defined token always matched");
    /* add_special: gpt2 adds nothing by default */
    rc = encode(v, "a", 1, ER_TOK_ADD_SPECIAL, ids, 64, &k);
    CHECK(rc == 0 && k == 1, "BPE adds no BOS by default");
    /* output too small: ER_ERANGE with the count */
    rc = encode(v, "a b c d", 7, 0, ids, 2, &k);
    CHECK(rc == ER_ERANGE && k == 7, "ERANGE for cap, needed %zu", k);
    /* scratch too small */
    size_t need = er_tokenize_scratch_bytes(v, 7);
    char tiny[16];
    rc = er_tokenize(v, "a b c d", 7, 0, ids, 64, &k, tiny, sizeof tiny);
    CHECK(rc == ER_ERANGE, "tiny scratch -> ER_ERANGE");
    CHECK_CONTAINS(er_last_error(), "scratch");
    CHECK(need < 64 + 200 * 8, "scratch bound is linear and modest: %zu for 7 bytes", need);
    /* decode */
    char out[64];
    int32_t dids[] = {262, 258, 'c'};
    rc = er_detokenize(v, dids, 3, 0, out, sizeof out, &k);
    CHECK(rc == 0 && k == 11 && memcmp(out, " ab<|end|>c", 11) == 0, "decode with specials");
    rc = er_detokenize(v, dids, 3, 1, out, sizeof out, &k);
    CHECK(rc == 0 && k == 4 && memcmp(out, " abc", 4) == 0, "decode skipping specials");
    rc = er_detokenize(v, dids, 3, 0, out, 4, &k);
    CHECK(rc == ER_ERANGE && k == 11, "decode ERANGE reports the size");
    /* streaming: "é" (C3 A9) split over two byte tokens */
    er_detok_state st = {{0}, 0, 0};
    rc = er_detok_step(v, &st, 0xC3, out, sizeof out, &k);
    CHECK(rc == 0 && k == 0, "first half of a character is held");
    rc = er_detok_step(v, &st, 0xA9, out, sizeof out, &k);
    CHECK(rc == 0 && k == 2 && memcmp(out, "\xc3\xa9", 2) == 0, "completed character emitted");
    rc = er_detok_step(v, &st, 0xE2, out, sizeof out, &k);
    rc |= er_detok_step(v, &st, 'x', out, sizeof out, &k);
    CHECK(rc == 0 && k == 4 && memcmp(out, "\xef\xbf\xbdx", 4) == 0, "broken sequence -> U+FFFD then x");
    rc = er_detok_step(v, &st, 0xF0, out, sizeof out, &k);
    rc |= er_detok_flush(v, &st, out, sizeof out, &k);
    CHECK(rc == 0 && k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0, "flush of a held prefix -> U+FFFD");
    rc = er_detok_step(v, &st, 999999, out, sizeof out, &k);
    CHECK(rc == ER_EINVAL, "bad id");
    unload(&l);
}

/* Merge order: higher score first, then the lower id (not the leftmost
 * pair), for words short enough for the encoder's scan and for longer ones
 * (its heap): both must merge alike. */
static void test_spm_merge_order(void) {
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "x", "y", "z", "yz", "xy", "a", "b"};
    /* "yz" and "xy" tie: "yz" has the lower id, so it merges first although
     * "xy" is to its left; "ab" is no piece, so "a b" pairs fall through. */
    static const float score[] = {0, 0, 0, -1, -2, -3, -4, -5, -5, -6, -7};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    kv kvs[] = {
        {"tokenizer.ggml.model", GGUF_STR, "llama", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, 11},
        {"tokenizer.ggml.scores", GGUF_ARR, 0, 0, GGUF_F32, 0, 0, score, 11},
        {"tokenizer.ggml.token_type", GGUF_ARR, 0, 0, GGUF_I32, 0, types, 0, 11},
    };
    loaded l;
    int rc = load_kvs(&l, kvs, 4);
    CHECK(rc == 0, "merge-order SPM vocab: %s", er_last_error());
    if (rc) return;
    char text[400];
    int32_t ids[400];
    size_t k;
    for (int reps = 1; reps <= 120; reps = reps * 3 + 1) { /* 3 .. 360 bytes: scan and heap */
        for (int r = 0; r < reps; r++) memcpy(text + 3 * r, "xyz", 3);
        rc = encode(l.v, text, (size_t)(3 * reps), 0, ids, 400, &k);
        int ok = rc == 0 && k == (size_t)(1 + 2 * reps) && ids[0] == 3;
        for (int r = 0; ok && r < reps; r++) ok = ids[1 + 2 * r] == 4 && ids[2 + 2 * r] == 7;
        CHECK(ok, "%d x \"xyz\": the lower id wins a tie (%zu ids, rc %d)", reps, k, rc);
    }
    /* a word of characters that join nowhere, past the scan's length */
    for (int n = 1; n <= 100; n += 33) {
        for (int i = 0; i < n; i++) text[i] = i % 2 ? 'b' : 'a';
        rc = encode(l.v, text, (size_t)n, 0, ids, 400, &k);
        int ok = rc == 0 && k == (size_t)n + 1 && ids[0] == 3;
        for (int i = 0; ok && i < n; i++) ok = ids[1 + i] == (i % 2 ? 10 : 9);
        CHECK(ok, "%d unmergeable characters stay apart (%zu ids)", n, k);
    }
    unload(&l);
    /* A NaN score has no place in the merge order: the file is refused. */
    float nan_score[11];
    memcpy(nan_score, score, sizeof score);
    nan_score[7] = NAN;
    kvs[2].f32s = nan_score;
    rc = load_kvs(&l, kvs, 4);
    CHECK(rc == ER_ECORRUPT, "NaN score refused: got %d", rc);
    if (rc == ER_ECORRUPT) CHECK_CONTAINS(er_last_error(), "NaN");
    unload(&l);
}

/* SentencePiece: pieces with scores, byte fallback off, unknown runs. */
static void test_small_spm(void) {
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c",
                                      "ab", "bc", "\xe2\x96\x81\x61", "abc"};
    static const float score[] = {0, 0, 0, -1, -2, -3, -4, -5, -1.5f, -6, -0.5f};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    kv kvs[] = {
        {"tokenizer.ggml.model", GGUF_STR, "llama", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, 11},
        {"tokenizer.ggml.scores", GGUF_ARR, 0, 0, GGUF_F32, 0, 0, score, 11},
        {"tokenizer.ggml.token_type", GGUF_ARR, 0, 0, GGUF_I32, 0, types, 0, 11},
        {"tokenizer.ggml.unknown_token_id", GGUF_U32, 0, 0, 0, 0, 0, 0, 0},
    };
    loaded l;
    int rc = load_kvs(&l, kvs, 5);
    CHECK(rc == 0, "small SPM vocab: %s", er_last_error());
    if (rc) return;
    int32_t ids[64];
    size_t k;
    /* "▁abc": pairs ▁a(-6) ab(-5) bc(-1.5): bc merges first; then a+bc is
     * the piece "abc" (-0.5), which outscores ▁a: -> ▁ abc (a rank-ordered
     * merge of the left pair first would give ▁a bc). */
    rc = encode(l.v, "abc", 3, ER_TOK_ADD_SPECIAL, ids, 64, &k);
    CHECK(rc == 0 && k == 3 && ids[0] == 1 && ids[1] == 3 && ids[2] == 10, "SPM merges by score: got %zu [%d %d %d]", k,
          ids[0], ids[1], ids[2]);
    /* unknown characters collapse into one <unk> per run */
    rc = encode(l.v, "a\xc3\xa9\xc3\xa9z", 6, 0, ids, 64, &k);
    CHECK(rc == 0 && k == 2 && ids[0] == 9 && ids[1] == 0, "one <unk> for a run of unknowns (%zu ids)", k);
    char out[64];
    int32_t d[] = {1, 9, 8};
    rc = er_detokenize(l.v, d, 3, 1, out, sizeof out, &k);
    CHECK(rc == 0 && k == 3 && memcmp(out, "abc", 3) == 0, "SPM decode drops the dummy space");
    unload(&l);
}

/* edgerun.tokenizer.prepend_scheme "first": the dummy prefix only on text at
 * the start of the input, none after a special token (transformers with
 * legacy=false); "always" (and no key) on every piece, as llama.cpp. */
static void test_spm_prepend_scheme(void) {
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c",
                                      "ab", "bc", "\xe2\x96\x81\x61", "abc"};
    static const float score[] = {0, 0, 0, -1, -2, -3, -4, -5, -1.5f, -6, -0.5f};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    static const char *const schemes[] = {"always", "first"};
    for (int first = 0; first < 2; first++) {
        kv kvs[] = {
            {"tokenizer.ggml.model", GGUF_STR, "llama", 0, 0, 0, 0, 0, 0},
            {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, 11},
            {"tokenizer.ggml.scores", GGUF_ARR, 0, 0, GGUF_F32, 0, 0, score, 11},
            {"tokenizer.ggml.token_type", GGUF_ARR, 0, 0, GGUF_I32, 0, types, 0, 11},
            {"edgerun.tokenizer.prepend_scheme", GGUF_STR, schemes[first], 0, 0, 0, 0, 0, 0},
        };
        loaded l;
        int rc = load_kvs(&l, kvs, 5);
        CHECK(rc == 0, "prepend scheme %s: %s", schemes[first], er_last_error());
        if (rc) continue;
        int32_t ids[16];
        size_t k;
        /* "abc<s>abc<s>": ▁ abc, <s>, then "abc" (first) or ▁ abc (always), <s> */
        rc = encode(l.v, "abc<s>abc<s>", 12, ER_TOK_PARSE_SPECIAL, ids, 16, &k);
        static const int32_t want_always[] = {3, 10, 1, 3, 10, 1}, want_first[] = {3, 10, 1, 10, 1};
        const int32_t *want = first ? want_first : want_always;
        size_t nw = first ? 5 : 6;
        CHECK(rc == 0 && k == nw && memcmp(ids, want, nw * sizeof *ids) == 0,
              "prepend scheme %s after a special token (%zu ids)", schemes[first], k);
        /* a leading special token: the text after it is not at the start either */
        rc = encode(l.v, "<s>abc", 6, ER_TOK_PARSE_SPECIAL | ER_TOK_ADD_SPECIAL, ids, 16, &k);
        CHECK(rc == 0 && k == (first ? 3u : 4u) && ids[0] == 1 && ids[1] == 1 && ids[k - 1] == 10,
              "prepend scheme %s after a leading special token (%zu ids)", schemes[first], k);
        unload(&l);
    }
}

static void expect_bad(const kv *kvs, size_t n, int want, const char *msg) {
    loaded l;
    int rc = load_kvs(&l, kvs, n);
    CHECK(rc == want, "%s: got %d (%s)", msg, rc, er_last_error());
    if (rc == want) CHECK(er_last_error()[0] != 0, "%s: no message", msg);
    unload(&l);
}

static void test_bad_metadata(void) {
    size_t n;
    const char *const *tok = bpe_tokens(&n);
    static const char *const merges[] = {"a b"};
    static const char *const bad_merges[] = {"a zz"};
    static const char *const dup[] = {"a", "b", "a"};
    static const int32_t bad_type[] = {1, 9, 1};
    kv missing_merges[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
    };
    expect_bad(missing_merges, 2, ER_ECORRUPT, "missing merges");
    CHECK_CONTAINS(er_last_error(), "merges");
    kv empty[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, 0},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 1},
    };
    expect_bad(empty, 3, ER_ECORRUPT, "empty vocab");
    CHECK_CONTAINS(er_last_error(), "empty");
    kv range[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 1},
        {"tokenizer.ggml.bos_token_id", GGUF_U32, 0, 70000, 0, 0, 0, 0, 0},
    };
    expect_bad(range, 4, ER_ECORRUPT, "out-of-range bos");
    CHECK_CONTAINS(er_last_error(), "out of range");
    kv dups[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, dup, 0, 0, 3},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 0},
    };
    expect_bad(dups, 3, ER_ECORRUPT, "duplicate tokens");
    CHECK_CONTAINS(er_last_error(), "duplicate");
    kv types[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, dup, 0, 0, 3},
        {"tokenizer.ggml.token_type", GGUF_ARR, 0, 0, GGUF_I32, 0, bad_type, 0, 3},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 0},
    };
    expect_bad(types, 4, ER_ECORRUPT, "bad token type");
    kv badm[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, bad_merges, 0, 0, 1},
    };
    expect_bad(badm, 3, ER_ECORRUPT, "merge of unknown pieces");
    CHECK_CONTAINS(er_last_error(), "not a token");
    kv unsup[] = {
        {"tokenizer.ggml.model", GGUF_STR, "bert", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
    };
    expect_bad(unsup, 2, ER_EUNSUPPORTED, "unsupported model");
    kv pre[] = {
        {"tokenizer.ggml.model", GGUF_STR, "gpt2", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.pre", GGUF_STR, "no-such-pre", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
        {"tokenizer.ggml.merges", GGUF_ARR, 0, 0, GGUF_STR, merges, 0, 0, 1},
    };
    expect_bad(pre, 4, ER_EUNSUPPORTED, "unknown pre-tokenizer");
    kv spm_noscores[] = {
        {"tokenizer.ggml.model", GGUF_STR, "llama", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, n},
    };
    expect_bad(spm_noscores, 2, ER_ECORRUPT, "SPM without scores");
    static const float score[] = {0, 0, 0};
    kv scheme[] = {
        {"tokenizer.ggml.model", GGUF_STR, "llama", 0, 0, 0, 0, 0, 0},
        {"tokenizer.ggml.tokens", GGUF_ARR, 0, 0, GGUF_STR, tok, 0, 0, 3},
        {"tokenizer.ggml.scores", GGUF_ARR, 0, 0, GGUF_F32, 0, 0, score, 3},
        {"edgerun.tokenizer.prepend_scheme", GGUF_STR, "never", 0, 0, 0, 0, 0, 0},
    };
    expect_bad(scheme, 4, ER_EUNSUPPORTED, "unknown prepend scheme");
    CHECK_CONTAINS(er_last_error(), "never");
    scheme[3].key = "edgerun.tokenizer.future_key";
    expect_bad(scheme, 4, ER_EUNSUPPORTED, "unknown edgerun.tokenizer key");
    CHECK_CONTAINS(er_last_error(), "edgerun.tokenizer.future_key");
}

/* ---- arbitrary bytes and threads -------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fuzz_bytes(const er_vocab *v, const char *name, int rounds) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    char text[300];
    int32_t ids[1200];
    char out[8192];
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        size_t n = rng_next(&s) % sizeof text;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rng_next(&s);
            /* mostly ASCII and UTF-8 lead/continuation bytes, some anything */
            text[i] = (char)((x & 3) == 0 ? (x >> 8) : (x & 3) == 1 ? (0x80 | ((x >> 8) & 0x7F)) : (x >> 8) % 128);
        }
        size_t k = 0, m = 0;
        int rc = encode(v, text, n, ER_TOK_ADD_SPECIAL | ((r & 1) ? ER_TOK_PARSE_SPECIAL : 0), ids, 1200, &k);
        if (rc) bad++;
        else if (er_detokenize(v, ids, k, r & 2, out, sizeof out, &m)) bad++;
    }
    CHECK(bad == 0, "%s: %d of %d random byte strings failed", name, bad, rounds);
}

typedef struct job {
    const er_vocab *v;
    const char *text;
    size_t n;
    int32_t ids[2048];
    size_t k;
    int rc;
} job;

static void *run_job(void *p) {
    job *j = p;
    for (int r = 0; r < 20 && j->rc == 0; r++) {
        int32_t ids[2048];
        size_t k;
        j->rc = encode(j->v, j->text, j->n, ER_TOK_ADD_SPECIAL, ids, 2048, &k);
        if (r == 0) {
            memcpy(j->ids, ids, k * sizeof ids[0]);
            j->k = k;
        } else if (k != j->k || memcmp(ids, j->ids, k * sizeof ids[0]) != 0) {
            j->rc = -100;
        }
    }
    return NULL;
}

static void test_threads(const er_vocab *v, const char *name) {
    static const char text[] = "Hello, world! Ünïcödé 日本語のテキスト 1234567 ... \n\n  tabs\tand   spaces 🤖🚀 "
                               "The quick brown fox jumps over the lazy dog, again and again and again.";
    job *jobs = calloc(8, sizeof *jobs);
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        jobs[i].v = v;
        jobs[i].text = text;
        jobs[i].n = sizeof text - 1;
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    int same = 1;
    for (int i = 0; i < 8; i++) {
        CHECK(jobs[i].rc == 0, "%s thread %d failed: %d", name, i, jobs[i].rc);
        same &= jobs[i].k == jobs[0].k && memcmp(jobs[i].ids, jobs[0].ids, jobs[0].k * 4) == 0;
    }
    CHECK(same && jobs[0].k > 10, "%s: 8 threads agree", name);
    free(jobs);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../shared/data";
    test_small_bpe();
    test_small_spm();
    test_spm_prepend_scheme();
    test_bad_metadata();
    static const char *const fams[] = {"llama-spm", "gpt-2", "llama-bpe", "qwen2"};
    for (int i = 0; i < 4; i++) {
        test_vectors(dir, fams[i]);
        char path[1024];
        snprintf(path, sizeof path, "%s/tokenizers/vectors/ggml-vocab-%s.gguf", dir, fams[i]);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        loaded l;
        if (load_file(&l, path) == 0) {
            fuzz_bytes(l.v, fams[i], 400);
            test_threads(l.v, fams[i]);
        }
        unload(&l);
    }
    test_spm_merge_order();
    return test_summary();
}
