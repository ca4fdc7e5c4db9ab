/*
 * test_gguf.c — the GGUF reader against images written here, their broken
 * variants, and the real files in ../shared/data (argv[1]).
 *
 * Every parsed image is an exact-size heap copy so AddressSanitizer catches a
 * read even one byte past the end.
 */
#include "error.h"
#include "gguf.h"
#include "test_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a small GGUF writer ---------------------------------------------------- */

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
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf *b, uint16_t v) { put(b, &v, 2); }
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_f32(buf *b, float v) { put(b, &v, 4); }
static void put_f64(buf *b, double v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_hdr(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void kv_head(buf *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
}
static void put_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) put_u64(b, ne[i]);
    put_u32(b, type);
    put_u64(b, off);
}
static void pad_to(buf *b, size_t align) {
    while (b->n % align) put_u8(b, 0);
}
static void patch_u32(buf *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }
static void patch_u64(buf *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }
static void buf_free(buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + 3); }

/* ---- the standard image ------------------------------------------------------ */

#define STD_NT 5
#define STD_NKV 22
#define STD_ALIGN 64

/* Offsets of fields inside the standard image, for the corruption cases. */
typedef struct marks {
    size_t version, n_tensors, n_kv;
    size_t key0_len, arch_type, arch_len, align_type, align_val, bool_val;
    size_t au32_etype, au32_count, astr_count, astr_e1_len, abool_e0;
    size_t t_namelen[STD_NT], t_ndims[STD_NT], t_ne0[STD_NT], t_type[STD_NT], t_off[STD_NT];
    size_t desc_end, data_off;
} marks;

static const char *const kStdNames[STD_NT] = {"tok.f32", "w.q8", "w.q4", "w.f16", "w.bf16"};
static const uint32_t kStdTypes[STD_NT] = {GGML_F32, GGML_Q8_0, GGML_Q4_0, GGML_F16, GGML_BF16};
static const uint32_t kStdDims[STD_NT] = {2, 2, 1, 4, 1};
static const uint64_t kStdNe[STD_NT][4] = {{4, 3, 1, 1}, {64, 2, 1, 1}, {32, 1, 1, 1}, {8, 2, 2, 2}, {2, 1, 1, 1}};
static const uint64_t kStdBytes[STD_NT] = {48, 136, 18, 128, 4};
static const uint64_t kStdOff[STD_NT] = {0, 64, 256, 320, 448};

/* Builds the standard image: one kv of every type, arrays, five tensors with
 * general.alignment = 64; the file ends exactly at the last tensor's end so
 * that every truncation is an error. */
static void build_std(buf *b, marks *m, uint32_t version) {
    memset(m, 0, sizeof *m);
    m->version = 4;
    m->n_tensors = 8;
    m->n_kv = 16;
    put_hdr(b, version, STD_NT, STD_NKV);
    m->key0_len = b->n;
    kv_head(b, "general.architecture", GGUF_STR);
    m->arch_type = b->n - 4;
    m->arch_len = b->n;
    put_str(b, "llama");
    kv_head(b, "general.alignment", GGUF_U32);
    m->align_type = b->n - 4;
    m->align_val = b->n;
    put_u32(b, STD_ALIGN);
    kv_head(b, "t.u8", GGUF_U8); put_u8(b, 200);
    kv_head(b, "t.i8", GGUF_I8); put_u8(b, (uint8_t)-5);
    kv_head(b, "t.u16", GGUF_U16); put_u16(b, 60000);
    kv_head(b, "t.i16", GGUF_I16); put_u16(b, (uint16_t)-30000);
    kv_head(b, "t.u32", GGUF_U32); put_u32(b, 4000000000u);
    kv_head(b, "t.i32", GGUF_I32); put_u32(b, (uint32_t)-2);
    kv_head(b, "t.f32", GGUF_F32); put_f32(b, 0.25f);
    kv_head(b, "t.bool", GGUF_BOOL);
    m->bool_val = b->n;
    put_u8(b, 1);
    kv_head(b, "t.str", GGUF_STR); put_str(b, "h\xc3\xa9llo");
    kv_head(b, "t.u64", GGUF_U64); put_u64(b, 5000000000ull);
    kv_head(b, "t.i64", GGUF_I64); put_u64(b, (uint64_t)-7);
    kv_head(b, "t.f64", GGUF_F64); put_f64(b, 1e-6);
    kv_head(b, "t.arr_u32", GGUF_ARR);
    m->au32_etype = b->n;
    put_u32(b, GGUF_U32);
    m->au32_count = b->n;
    put_u64(b, 3);
    put_u32(b, 1); put_u32(b, 2); put_u32(b, 3);
    kv_head(b, "t.arr_str", GGUF_ARR);
    put_u32(b, GGUF_STR);
    m->astr_count = b->n;
    put_u64(b, 3);
    put_str(b, "a");
    m->astr_e1_len = b->n;
    put_str(b, "");
    put_str(b, "xyz");
    kv_head(b, "t.arr_f32", GGUF_ARR); put_u32(b, GGUF_F32); put_u64(b, 2); put_f32(b, 0.5f); put_f32(b, -1.0f);
    kv_head(b, "t.arr_empty", GGUF_ARR); put_u32(b, GGUF_I8); put_u64(b, 0);
    kv_head(b, "t.i32_pos", GGUF_I32); put_u32(b, 7);
    kv_head(b, "t.u8_one", GGUF_U8); put_u8(b, 1);
    kv_head(b, "t.arr_bool", GGUF_ARR); put_u32(b, GGUF_BOOL); put_u64(b, 2);
    m->abool_e0 = b->n;
    put_u8(b, 1); put_u8(b, 0);
    kv_head(b, "llama.block_count", GGUF_U32); put_u32(b, 5);
    for (int i = 0; i < STD_NT; i++) {
        m->t_namelen[i] = b->n;
        put_str(b, kStdNames[i]);
        m->t_ndims[i] = b->n;
        put_u32(b, kStdDims[i]);
        m->t_ne0[i] = b->n;
        for (uint32_t d = 0; d < kStdDims[i]; d++) put_u64(b, kStdNe[i][d]);
        m->t_type[i] = b->n;
        put_u32(b, kStdTypes[i]);
        m->t_off[i] = b->n;
        put_u64(b, kStdOff[i]);
    }
    m->desc_end = b->n;
    pad_to(b, STD_ALIGN);
    m->data_off = b->n;
    uint64_t end = kStdOff[STD_NT - 1] + kStdBytes[STD_NT - 1];
    for (uint64_t i = 0; i < end; i++) put_u8(b, pattern((size_t)i));
}

/* Parses an exact-size copy of `p[0..n)`; the copy is kept in *copy. */
static int parse_copy(const uint8_t *p, size_t n, gguf_file *f, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    if (!*copy) abort();
    if (n) memcpy(*copy, p, n);
    return gguf_parse(*copy, n, f);
}

/* Walks everything a consumer may walk: all kvs (string arrays element by
 * element), all tensors and their data. Returns a checksum so the reads are
 * not optimized away. */
static uint64_t walk_all(const gguf_file *f) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv kv;
        gguf_kv_at(f, i, &kv);
        acc += kv.key.len + (kv.key.len ? (uint8_t)kv.key.ptr[kv.key.len - 1] : 0);
        if (kv.type == GGUF_STR && kv.v.str.len) acc += (uint8_t)kv.v.str.ptr[kv.v.str.len - 1];
        if (kv.type == GGUF_ARR && kv.arr_type == GGUF_STR) {
            const uint8_t *cur = kv.arr_data;
            for (uint64_t j = 0; j < kv.arr_n; j++) {
                er_str s = gguf_arr_next_str(&cur);
                if (s.len) acc += (uint8_t)s.ptr[s.len - 1];
            }
        } else if (kv.type == GGUF_ARR && kv.arr_n) {
            size_t es = gguf_vtype_size(kv.arr_type);
            acc += kv.arr_data[kv.arr_n * es - 1];
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor t;
        gguf_tensor_at(f, i, &t);
        acc += t.nbytes + t.data[0] + t.data[t.nbytes - 1];
    }
    return acc;
}

/* Expects gguf_parse(img) to fail with `status` and a message containing `needle`. */
static void expect_fail(const char *what, const uint8_t *p, size_t n, int status, const char *needle) {
    gguf_file f;
    uint8_t *copy;
    er_clear_error();
    int st = parse_copy(p, n, &f, &copy);
    const char *msg = er_last_error();
    CHECK(st == status, "%s: got %s (%s), expected %s", what, er_status_name(st), msg, er_status_name(status));
    CHECK(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, msg, needle);
    CHECK(f.base == NULL && f.n_kv == 0, "%s: failed parse left the descriptor filled", what);
    free(copy);
}

/* ---- valid images -------------------------------------------------------- */

static void test_std_image(uint32_t version) {
    buf b = {0};
    marks m;
    build_std(&b, &m, version);
    gguf_file f;
    uint8_t *img;
    int st = parse_copy(b.p, b.n, &f, &img);
    CHECK(st == ER_OK, "std v%u: %s %s", version, er_status_name(st), er_last_error());
    if (st != ER_OK) {
        free(img);
        buf_free(&b);
        return;
    }
    CHECK_EQ_U64(f.version, version);
    CHECK_EQ_U64(f.n_kv, STD_NKV);
    CHECK_EQ_U64(f.n_tensors, STD_NT);
    CHECK_EQ_U64(f.alignment, STD_ALIGN);
    CHECK_EQ_U64(f.kv_off, 24);
    CHECK_EQ_U64(f.tensors_off, m.t_namelen[0]);
    CHECK_EQ_U64(f.data_off, m.data_off);
    CHECK(f.data_off % STD_ALIGN == 0 && f.data_off >= m.desc_end, "data_off %zu", f.data_off);
    CHECK(!f.mapped, "a parsed image is not ours to unmap");

    /* every kv, decoded */
    gguf_kv kv;
    CHECK(gguf_find_kv(&f, "general.architecture", &kv) && kv.type == GGUF_STR && er_str_eq(kv.v.str, "llama"),
          "architecture");
    er_str s;
    CHECK(gguf_get_str(&f, "general.architecture", &s) && er_str_eq(s, "llama"), "get_str architecture");
    CHECK(gguf_get_str(&f, "t.str", &s) && s.len == 6 && memcmp(s.ptr, "h\xc3\xa9llo", 6) == 0, "t.str");
    CHECK(!gguf_get_str(&f, "t.u32", &s), "get_str on a u32");
    CHECK(!gguf_find_kv(&f, "general.architectur", &kv), "prefix of a key is not the key");
    CHECK(!gguf_find_kv(&f, "general.architecturex", &kv), "extension of a key is not the key");
    CHECK(!gguf_find_kv(&f, "", &kv), "empty key");
    CHECK(gguf_find_kv(&f, "t.u8", NULL), "find_kv with NULL out");

    uint32_t u;
    CHECK(gguf_get_u32(&f, "t.u8", &u) && u == 200, "u8 -> %u", u);
    CHECK(gguf_get_u32(&f, "t.u16", &u) && u == 60000, "u16 -> %u", u);
    CHECK(gguf_get_u32(&f, "t.u32", &u) && u == 4000000000u, "u32 -> %u", u);
    CHECK(gguf_get_u32(&f, "t.i32_pos", &u) && u == 7, "positive i32 -> %u", u);
    CHECK(gguf_get_u32(&f, "llama.block_count", &u) && u == 5, "block_count -> %u", u);
    CHECK(!gguf_get_u32(&f, "t.i8", &u), "negative i8 is not a u32");
    CHECK(!gguf_get_u32(&f, "t.i16", &u), "negative i16 is not a u32");
    CHECK(!gguf_get_u32(&f, "t.i32", &u), "negative i32 is not a u32");
    CHECK(!gguf_get_u32(&f, "t.i64", &u), "negative i64 is not a u32");
    CHECK(!gguf_get_u32(&f, "t.u64", &u), "5e9 does not fit a u32");
    CHECK(!gguf_get_u32(&f, "t.f32", &u), "a float is not a u32");
    CHECK(!gguf_get_u32(&f, "t.str", &u), "a string is not a u32");
    CHECK(!gguf_get_u32(&f, "t.bool", &u), "a bool is not a u32");
    CHECK(!gguf_get_u32(&f, "missing", &u), "missing key");

    CHECK(gguf_find_kv(&f, "t.i8", &kv) && kv.type == GGUF_I8 && kv.v.i64 == -5, "i8");
    CHECK(gguf_find_kv(&f, "t.i16", &kv) && kv.type == GGUF_I16 && kv.v.i64 == -30000, "i16");
    CHECK(gguf_find_kv(&f, "t.i32", &kv) && kv.type == GGUF_I32 && kv.v.i64 == -2, "i32");
    CHECK(gguf_find_kv(&f, "t.i64", &kv) && kv.type == GGUF_I64 && kv.v.i64 == -7, "i64");
    CHECK(gguf_find_kv(&f, "t.u64", &kv) && kv.type == GGUF_U64 && kv.v.u64 == 5000000000ull, "u64");
    CHECK(gguf_find_kv(&f, "t.f64", &kv) && kv.type == GGUF_F64 && kv.v.f64 == 1e-6, "f64");

    float x = 0;
    CHECK(gguf_get_f32(&f, "t.f32", &x) && x == 0.25f, "f32 -> %g", x);
    CHECK(gguf_get_f32(&f, "t.f64", &x) && x == (float)1e-6, "f64 -> %g", x);
    CHECK(gguf_get_f32(&f, "t.i32", &x) && x == -2.0f, "i32 -> %g", x);
    CHECK(gguf_get_f32(&f, "t.u32", &x) && x == 4000000000.0f, "u32 4e9 is exact in float (%g)", x);
    CHECK(gguf_get_f32(&f, "llama.block_count", &x) && x == 5.0f, "u32 -> %g", x);
    CHECK(!gguf_get_f32(&f, "t.str", &x), "string is not a float");
    CHECK(!gguf_get_f32(&f, "t.arr_f32", &x), "array is not a float");

    bool bo = false;
    CHECK(gguf_get_bool(&f, "t.bool", &bo) && bo, "bool");
    CHECK(gguf_get_bool(&f, "t.u8_one", &bo) && bo, "u8 1 as bool");
    CHECK(!gguf_get_bool(&f, "t.u8", &bo), "u8 200 is not a bool");
    CHECK(!gguf_get_bool(&f, "t.i8", &bo), "i8 -5 is not a bool");
    CHECK(!gguf_get_bool(&f, "t.str", &bo), "string is not a bool");

    CHECK(gguf_get_arr(&f, "t.arr_u32", GGUF_U32, &kv) && kv.arr_n == 3, "arr u32");
    if (kv.arr_n == 3) {
        uint32_t v[3];
        memcpy(v, kv.arr_data, sizeof v);
        CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3, "arr u32 values %u %u %u", v[0], v[1], v[2]);
    }
    CHECK(!gguf_get_arr(&f, "t.arr_u32", GGUF_I32, &kv), "element type must match");
    CHECK(!gguf_get_arr(&f, "t.u32", GGUF_U32, &kv), "a scalar is not an array");
    CHECK(gguf_get_arr(&f, "t.arr_f32", GGUF_F32, &kv) && kv.arr_n == 2, "arr f32");
    if (kv.arr_n == 2) {
        float v[2];
        memcpy(v, kv.arr_data, sizeof v);
        CHECK(v[0] == 0.5f && v[1] == -1.0f, "arr f32 values");
    }
    CHECK(gguf_get_arr(&f, "t.arr_empty", GGUF_I8, &kv) && kv.arr_n == 0, "empty array");
    CHECK(gguf_get_arr(&f, "t.arr_bool", GGUF_BOOL, &kv) && kv.arr_n == 2 && kv.arr_data[0] == 1 &&
              kv.arr_data[1] == 0, "arr bool");
    CHECK(gguf_get_arr(&f, "t.arr_str", GGUF_STR, &kv) && kv.arr_n == 3, "arr str");
    if (kv.arr_n == 3 && kv.arr_type == GGUF_STR) {
        const uint8_t *cur = kv.arr_data;
        er_str a = gguf_arr_next_str(&cur), e = gguf_arr_next_str(&cur), z = gguf_arr_next_str(&cur);
        CHECK(er_str_eq(a, "a") && er_str_eq(e, "") && er_str_eq(z, "xyz"), "string elements");
        gguf_kv next;
        gguf_kv_at(&f, 16, &next);
        CHECK(cur == (const uint8_t *)next.key.ptr - 8, "cursor ends where the next kv starts");
    }

    /* kv_at agrees with file order */
    gguf_kv_at(&f, 0, &kv);
    CHECK(er_str_eq(kv.key, "general.architecture"), "kv_at 0");
    gguf_kv_at(&f, STD_NKV - 1, &kv);
    CHECK(er_str_eq(kv.key, "llama.block_count") && kv.type == GGUF_U32 && kv.v.u64 == 5, "kv_at last");
    gguf_kv_at(&f, STD_NKV, &kv);
    CHECK(kv.key.ptr == NULL && kv.key.len == 0, "kv_at out of range yields a zeroed kv");

    /* tensors */
    for (int i = 0; i < STD_NT; i++) {
        gguf_tensor t, t2;
        gguf_tensor_at(&f, (uint64_t)i, &t);
        CHECK(er_str_eq(t.name, kStdNames[i]), "tensor %d name", i);
        CHECK(gguf_find_tensor(&f, kStdNames[i], &t2) && memcmp(&t, &t2, sizeof t) == 0, "find_tensor %d", i);
        CHECK_EQ_U64(t.n_dims, kStdDims[i]);
        for (int d = 0; d < 4; d++) CHECK_EQ_U64(t.ne[d], kStdNe[i][d]);
        CHECK_EQ_U64(t.type, kStdTypes[i]);
        CHECK_EQ_U64(t.offset, kStdOff[i]);
        CHECK_EQ_U64(t.nbytes, kStdBytes[i]);
        CHECK(t.data == img + m.data_off + kStdOff[i], "tensor %d data pointer", i);
        CHECK(t.data[0] == pattern((size_t)kStdOff[i]) &&
                  t.data[t.nbytes - 1] == pattern((size_t)(kStdOff[i] + kStdBytes[i] - 1)),
              "tensor %d data bytes", i);
        CHECK_EQ_U64(ggml_row_bytes(t.type, t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3], t.nbytes);
    }
    gguf_tensor t;
    CHECK(!gguf_find_tensor(&f, "w.q", &t), "prefix of a tensor name");
    CHECK(!gguf_find_tensor(&f, "missing", &t), "missing tensor");
    gguf_tensor_at(&f, STD_NT, &t);
    CHECK(t.data == NULL && t.nbytes == 0, "tensor_at out of range yields a zeroed tensor");
    (void)walk_all(&f);

    gguf_close(&f); /* must not munmap a heap image */
    CHECK(f.base == NULL && f.size == 0, "close zeroes");
    gguf_close(&f);
    free(img);
    buf_free(&b);
}

static void test_type_facts(void) {
    static const struct { uint32_t t; uint32_t e, b; const char *name; } facts[] = {
        {GGML_F32, 1, 4, "F32"},       {GGML_F16, 1, 2, "F16"},        {GGML_BF16, 1, 2, "BF16"},
        {GGML_Q4_0, 32, 18, "Q4_0"},   {GGML_Q4_1, 32, 20, "Q4_1"},    {GGML_Q5_0, 32, 22, "Q5_0"},
        {GGML_Q5_1, 32, 24, "Q5_1"},   {GGML_Q8_0, 32, 34, "Q8_0"},    {GGML_Q8_1, 32, 36, "Q8_1"},
        {GGML_Q2_K, 256, 84, "Q2_K"},  {GGML_Q3_K, 256, 110, "Q3_K"},  {GGML_Q4_K, 256, 144, "Q4_K"},
        {GGML_Q5_K, 256, 176, "Q5_K"}, {GGML_Q6_K, 256, 210, "Q6_K"},  {GGML_Q8_K, 256, 292, "Q8_K"},
        {GGML_IQ4_NL, 32, 18, "IQ4_NL"}, {GGML_IQ4_XS, 256, 136, "IQ4_XS"},
    };
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        uint32_t e = 0, bb = 0;
        CHECK(ggml_type_block(facts[i].t, &e, &bb) && e == facts[i].e && bb == facts[i].b, "%s block %u/%u",
              facts[i].name, e, bb);
        CHECK(strcmp(ggml_type_name(facts[i].t), facts[i].name) == 0, "name of %u: %s", facts[i].t,
              ggml_type_name(facts[i].t));
        CHECK_EQ_U64(ggml_row_bytes(facts[i].t, 4096), 4096 / facts[i].e * facts[i].b);
    }
    static const uint32_t unknown[] = {4, 5, 16, 24, 28, 31, 99, 0xffffffffu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        uint32_t e = 7, bb = 7;
        CHECK(!ggml_type_block(unknown[i], &e, &bb) && e == 0 && bb == 0, "type %u has no block", unknown[i]);
        CHECK_EQ_U64(ggml_row_bytes(unknown[i], 256), 0);
    }
    CHECK(strcmp(ggml_type_name(16), "IQ2_XXS") == 0, "named but unparsable id");
    CHECK(strcmp(ggml_type_name(4), "unknown") == 0 && strcmp(ggml_type_name(1000), "unknown") == 0, "unknown");
    CHECK_EQ_U64(ggml_row_bytes(GGML_Q8_0, 48), 0); /* not a whole block */
    static const size_t vsz[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint32_t i = 0; i < GGUF_VTYPE_COUNT; i++) CHECK_EQ_U64(gguf_vtype_size(i), vsz[i]);
    CHECK_EQ_U64(gguf_vtype_size(GGUF_VTYPE_COUNT), 0);
    er_str s = {"abc", 3};
    CHECK(er_str_eq(s, "abc") && !er_str_eq(s, "ab") && !er_str_eq(s, "abcd"), "er_str_eq");
    er_str e = {NULL, 0};
    CHECK(er_str_eq(e, "") && !er_str_eq(e, "a"), "er_str_eq empty");
}

/* A file with no tensors may end before its padded data offset (llama.cpp's
 * vocab files do); one with v2 reads like v3. */
static void test_small_valid(void) {
    buf b = {0};
    put_hdr(&b, 3, 0, 1);
    kv_head(&b, "k", GGUF_U8);
    put_u8(&b, 9);
    gguf_file f;
    uint8_t *img;
    int st = parse_copy(b.p, b.n, &f, &img);
    CHECK(st == ER_OK && f.data_off == b.n && f.n_tensors == 0, "unpadded vocab-only file: %s", er_last_error());
    free(img);
    buf_free(&b);

    put_hdr(&b, 3, 0, 0); /* header only */
    st = parse_copy(b.p, b.n, &f, &img);
    CHECK(st == ER_OK && f.n_kv == 0 && f.data_off == 24, "header-only file: %s", er_last_error());
    free(img);
    buf_free(&b);

    /* alignment 1 and a tensor right after the descriptors, no padding */
    put_hdr(&b, 3, 1, 1);
    kv_head(&b, "general.alignment", GGUF_U32);
    put_u32(&b, 1);
    put_tensor(&b, "x", 1, (const uint64_t[]){3}, GGML_F16, 0);
    size_t d0 = b.n;
    put_u16(&b, 1); put_u16(&b, 2); put_u16(&b, 3);
    st = parse_copy(b.p, b.n, &f, &img);
    CHECK(st == ER_OK && f.alignment == 1 && f.data_off == d0, "alignment 1: %s", er_last_error());
    free(img);
    buf_free(&b);

    /* a 255-byte tensor name is accepted */
    char name[256];
    memset(name, 'n', 255);
    name[255] = '\0';
    put_hdr(&b, 3, 1, 0);
    put_tensor(&b, name, 1, (const uint64_t[]){1}, GGML_F32, 0);
    pad_to(&b, 32);
    put_f32(&b, 1.0f);
    st = parse_copy(b.p, b.n, &f, &img);
    gguf_tensor t;
    CHECK(st == ER_OK && gguf_find_tensor(&f, name, &t) && t.nbytes == 4, "255-byte name: %s", er_last_error());
    free(img);
    buf_free(&b);
}

/* ---- broken images ------------------------------------------------------- */

static void test_broken_header(void) {
    buf b = {0};
    marks m;
    build_std(&b, &m, 3);
    uint8_t empty = 0;
    expect_fail("empty", &empty, 0, ER_ECORRUPT, "file is empty/too small");
    expect_fail("23 bytes", b.p, 23, ER_ECORRUPT, "file is empty/too small (23 bytes");
    expect_fail("NULL base", NULL, 0, ER_ECORRUPT, "empty/too small");

    memcpy(b.p, "GGUX", 4);
    expect_fail("magic GGUX", b.p, b.n, ER_ECORRUPT, "bad magic 'GGUX' (not a GGUF file)");
    memcpy(b.p, "gguf", 4);
    expect_fail("magic gguf", b.p, b.n, ER_ECORRUPT, "bad magic 'gguf'");
    memcpy(b.p, "\x7f" "ELF", 4);
    expect_fail("ELF file", b.p, b.n, ER_ECORRUPT, "bad magic '?ELF'");
    memcpy(b.p, "GGUF", 4);

    patch_u32(&b, m.version, 4);
    expect_fail("version 4", b.p, b.n, ER_EUNSUPPORTED, "unsupported GGUF version 4 (this runtime reads v3)");
    patch_u32(&b, m.version, 1);
    expect_fail("version 1", b.p, b.n, ER_EUNSUPPORTED, "unsupported GGUF version 1");
    patch_u32(&b, m.version, 0);
    expect_fail("version 0", b.p, b.n, ER_EUNSUPPORTED, "unsupported GGUF version 0");
    patch_u32(&b, m.version, 0x03000000u);
    expect_fail("big-endian", b.p, b.n, ER_EUNSUPPORTED, "big-endian GGUF files are not supported");
    patch_u32(&b, m.version, 3);

    patch_u64(&b, m.n_kv, 1ull << 63);
    expect_fail("n_kv 2^63", b.p, b.n, ER_ECORRUPT, "header claims 9223372036854775808 kvs");
    patch_u64(&b, m.n_kv, UINT64_MAX);
    expect_fail("n_kv 2^64-1", b.p, b.n, ER_ECORRUPT, "header claims 18446744073709551615 kvs");
    patch_u64(&b, m.n_kv, 30000);
    expect_fail("n_kv 30000", b.p, b.n, ER_ECORRUPT, "header claims 30000 kvs and 5 tensors, more than the file");
    patch_u64(&b, m.n_kv, 40000);
    expect_fail("n_kv over cap", b.p, b.n, ER_ECORRUPT, "40000 kvs; this reader accepts at most 32768");
    patch_u64(&b, m.n_kv, STD_NKV);
    patch_u64(&b, m.n_tensors, 1ull << 63);
    expect_fail("n_tensors 2^63", b.p, b.n, ER_ECORRUPT, "header claims 9223372036854775808 tensors");
    patch_u64(&b, m.n_tensors, 1000);
    expect_fail("n_tensors 1000", b.p, b.n, ER_ECORRUPT, "1000 tensors, more than the file");
    patch_u64(&b, m.n_tensors, STD_NT + 1);
    expect_fail("one tensor too many", b.p, b.n, ER_ECORRUPT, "tensor #5");
    patch_u64(&b, m.n_tensors, STD_NT);
    buf_free(&b);
}

static void test_broken_kv(void) {
    buf b = {0};
    marks m;
    build_std(&b, &m, 3);
    patch_u64(&b, m.key0_len, 0);
    expect_fail("empty key", b.p, b.n, ER_ECORRUPT, "kv #0: empty key");
    patch_u64(&b, m.key0_len, 70000);
    expect_fail("key 70000", b.p, b.n, ER_ECORRUPT, "kv #0: key length 70000 exceeds the limit of 65535");
    patch_u64(&b, m.key0_len, 60000);
    expect_fail("key past end", b.p, b.n, ER_ECORRUPT, "kv #0: key length 60000 exceeds file");
    patch_u64(&b, m.key0_len, 20);

    patch_u64(&b, m.arch_len, 4294967295ull);
    expect_fail("string 2^32-1", b.p, b.n, ER_ECORRUPT,
                "kv #0 'general.architecture': string length 4294967295 exceeds file");
    patch_u64(&b, m.arch_len, UINT64_MAX);
    expect_fail("string 2^64-1", b.p, b.n, ER_ECORRUPT, "string length 18446744073709551615 exceeds file");
    patch_u64(&b, m.arch_len, 5);

    patch_u32(&b, m.arch_type, 13);
    expect_fail("value type 13", b.p, b.n, ER_ECORRUPT, "kv #0 'general.architecture': invalid value type 13");
    patch_u32(&b, m.arch_type, 0xffffffffu);
    expect_fail("value type ~0", b.p, b.n, ER_ECORRUPT, "invalid value type 4294967295");
    patch_u32(&b, m.arch_type, GGUF_STR);

    patch_u64(&b, m.au32_count, (1ull << 62) + 1); /* x4 wraps to 4 */
    expect_fail("u32 array count wraps", b.p, b.n, ER_ECORRUPT,
                "kv #14 't.arr_u32': array count 4611686018427387905 of u32 exceeds file");
    patch_u32(&b, m.au32_etype, GGUF_U64);
    patch_u64(&b, m.au32_count, 1ull << 61); /* x8 wraps to 0 */
    expect_fail("u64 array count wraps", b.p, b.n, ER_ECORRUPT, "array count 2305843009213693952 of u64");
    patch_u64(&b, m.au32_count, 3);
    patch_u32(&b, m.au32_etype, GGUF_ARR);
    expect_fail("nested array", b.p, b.n, ER_EUNSUPPORTED, "kv #14 't.arr_u32': nested arrays are not supported");
    patch_u32(&b, m.au32_etype, 13);
    expect_fail("array elem type 13", b.p, b.n, ER_ECORRUPT, "invalid array element type 13");
    patch_u32(&b, m.au32_etype, GGUF_U32);

    patch_u64(&b, m.astr_count, 1ull << 63);
    expect_fail("string array 2^63", b.p, b.n, ER_ECORRUPT, "array count 9223372036854775808 of strings exceeds");
    patch_u64(&b, m.astr_count, 3);
    patch_u64(&b, m.astr_e1_len, 1ull << 40);
    expect_fail("string element past end", b.p, b.n, ER_ECORRUPT,
                "'t.arr_str': array element #1: string length 1099511627776 exceeds file");
    patch_u64(&b, m.astr_e1_len, 0);

    patch_u32(&b, m.align_val, 0);
    expect_fail("alignment 0", b.p, b.n, ER_ECORRUPT, "general.alignment 0 is not a nonzero power of two");
    patch_u32(&b, m.align_val, 3);
    expect_fail("alignment 3", b.p, b.n, ER_ECORRUPT, "general.alignment 3 is not");
    patch_u32(&b, m.align_val, 48);
    expect_fail("alignment 48", b.p, b.n, ER_ECORRUPT, "general.alignment 48 is not");
    patch_u32(&b, m.align_val, STD_ALIGN);
    patch_u32(&b, m.align_type, GGUF_I32);
    expect_fail("alignment i32", b.p, b.n, ER_ECORRUPT, "general.alignment has type i32 (must be u32)");
    patch_u32(&b, m.align_type, GGUF_U32);

    b.p[m.bool_val] = 2;
    expect_fail("bool 2", b.p, b.n, ER_ECORRUPT, "kv #9 't.bool': bool value 2 is not 0 or 1");
    b.p[m.bool_val] = 1;
    b.p[m.abool_e0] = 5;
    expect_fail("bool array 5", b.p, b.n, ER_ECORRUPT, "array element #0: bool value 5");
    b.p[m.abool_e0] = 1;

    /* sanity: restored image parses again */
    gguf_file f;
    uint8_t *img;
    CHECK(parse_copy(b.p, b.n, &f, &img) == ER_OK, "restored std image: %s", er_last_error());
    free(img);
    buf_free(&b);

    /* duplicate keys, including unprintable bytes in the message */
    put_hdr(&b, 3, 0, 3);
    kv_head(&b, "t.x", GGUF_U8); put_u8(&b, 1);
    kv_head(&b, "t.y", GGUF_U8); put_u8(&b, 1);
    kv_head(&b, "t.x", GGUF_U32); put_u32(&b, 1);
    expect_fail("duplicate key", b.p, b.n, ER_ECORRUPT, "kv #2: duplicate key 't.x' (first at kv #0)");
    buf_free(&b);
    put_hdr(&b, 3, 0, 2);
    kv_head(&b, "\x01\xff", GGUF_U8); put_u8(&b, 1);
    kv_head(&b, "\x01\xff", GGUF_U8); put_u8(&b, 1);
    expect_fail("duplicate binary key", b.p, b.n, ER_ECORRUPT, "duplicate key '\?\?'");
    buf_free(&b);

    /* 20 000 distinct keys: the duplicate check stays fast and exact */
    put_hdr(&b, 3, 0, 10000);
    for (int i = 0; i < 10000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key.%d", i);
        kv_head(&b, k, GGUF_U8);
        put_u8(&b, 0);
    }
    gguf_file f2;
    CHECK(parse_copy(b.p, b.n, &f2, &img) == ER_OK, "10000 distinct keys: %s", er_last_error());
    uint32_t u = 1;
    CHECK(gguf_get_u32(&f2, "key.9999", &u) && u == 0, "last of 10000 keys");
    free(img);
    buf_free(&b);
    /* the same, with the last key repeating #123 */
    put_hdr(&b, 3, 0, 10000);
    for (int i = 0; i < 10000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key.%d", i == 9999 ? 123 : i);
        kv_head(&b, k, GGUF_U8);
        put_u8(&b, 0);
    }
    expect_fail("duplicate among 10000", b.p, b.n, ER_ECORRUPT,
                "kv #9999: duplicate key 'key.123' (first at kv #123)");
    buf_free(&b);
}

static void one_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes) {
    put_hdr(b, 3, 1, 0);
    put_tensor(b, name, n_dims, ne, type, off);
    pad_to(b, 32);
    for (size_t i = 0; i < data_bytes; i++) put_u8(b, 0);
}

static void test_broken_tensors(void) {
    buf b = {0};
    marks m;
    build_std(&b, &m, 3);
    patch_u32(&b, m.t_ndims[0], 0);
    expect_fail("n_dims 0", b.p, b.n, ER_ECORRUPT, "tensor 'tok.f32': n_dims 0 is outside 1..4");
    patch_u32(&b, m.t_ndims[0], 0xffffffffu);
    expect_fail("n_dims ~0", b.p, b.n, ER_ECORRUPT, "n_dims 4294967295 is outside");
    patch_u32(&b, m.t_ndims[0], 2);
    patch_u64(&b, m.t_ne0[0], 0);
    expect_fail("ne 0", b.p, b.n, ER_ECORRUPT, "tensor 'tok.f32': ne[0] is 0");
    patch_u64(&b, m.t_ne0[0], 4);
    patch_u64(&b, m.t_ne0[1], 48);
    expect_fail("ne0 not block multiple", b.p, b.n, ER_ECORRUPT,
                "tensor 'w.q8': ne[0] = 48 is not a multiple of the Q8_0 block size 32");
    patch_u64(&b, m.t_ne0[1], 64);
    patch_u64(&b, m.t_ne0[2], 16);
    expect_fail("q4_0 ne0 16", b.p, b.n, ER_ECORRUPT, "not a multiple of the Q4_0 block size 32");
    patch_u64(&b, m.t_ne0[2], 32);
    patch_u32(&b, m.t_type[0], 99);
    expect_fail("type 99", b.p, b.n, ER_EUNSUPPORTED, "tensor 'tok.f32': unsupported tensor type 99 (unknown)");
    patch_u32(&b, m.t_type[0], 16);
    expect_fail("type IQ2_XXS", b.p, b.n, ER_EUNSUPPORTED, "unsupported tensor type 16 (IQ2_XXS)");
    patch_u32(&b, m.t_type[0], 4);
    expect_fail("retired type 4", b.p, b.n, ER_EUNSUPPORTED, "unsupported tensor type 4 (unknown)");
    patch_u32(&b, m.t_type[0], GGML_F32);
    patch_u64(&b, m.t_off[1], 32);
    expect_fail("misaligned offset", b.p, b.n, ER_ECORRUPT,
                "tensor 'w.q8': data offset 32 is not a multiple of the alignment 64");
    patch_u64(&b, m.t_off[1], 64);
    patch_u64(&b, m.t_off[4], 512);
    char want[128];
    snprintf(want, sizeof want, "tensor 'w.bf16' data [%zu, %zu) extends past end of file (%zu bytes)",
             m.data_off + 512, m.data_off + 516, b.n);
    expect_fail("tensor past end", b.p, b.n, ER_ECORRUPT, want);
    patch_u64(&b, m.t_off[4], UINT64_MAX - 63); /* aligned, and offset + nbytes wraps */
    expect_fail("tensor offset wraps", b.p, b.n, ER_ECORRUPT, "tensor 'w.bf16' data [");
    patch_u64(&b, m.t_off[4], 448);
    patch_u64(&b, m.t_namelen[0], 0);
    expect_fail("empty tensor name", b.p, b.n, ER_ECORRUPT, "tensor #0: empty tensor name");
    patch_u64(&b, m.t_namelen[0], 300);
    expect_fail("tensor name 300", b.p, b.n, ER_ECORRUPT, "tensor #0: name length 300 exceeds the limit of 255");
    patch_u64(&b, m.t_namelen[0], 7);
    buf_free(&b);

    one_tensor(&b, "t", 1, (const uint64_t[]){8}, GGML_F32, 0, 32);
    patch_u64(&b, 24, 200); /* name length within limits, beyond the file */
    expect_fail("tensor name past end", b.p, b.n, ER_ECORRUPT, "tensor #0: name length 200 exceeds file");
    buf_free(&b);

    one_tensor(&b, "five", 5, (const uint64_t[]){1, 1, 1, 1, 1}, GGML_F32, 0, 4);
    expect_fail("n_dims 5", b.p, b.n, ER_ECORRUPT, "tensor 'five': n_dims 5 is outside 1..4");
    buf_free(&b);
    one_tensor(&b, "big", 2, (const uint64_t[]){1ull << 32, 1ull << 32}, GGML_F32, 0, 4);
    expect_fail("ne product 2^64", b.p, b.n, ER_ECORRUPT, "tensor 'big': element count overflows int64 at ne[1]");
    buf_free(&b);
    one_tensor(&b, "big4", 4, (const uint64_t[]){1u << 16, 1u << 16, 1u << 16, 1u << 16}, GGML_F32, 0, 4);
    expect_fail("ne product 4 dims", b.p, b.n, ER_ECORRUPT, "element count overflows int64 at ne[3] = 65536");
    buf_free(&b);
    one_tensor(&b, "huge", 1, (const uint64_t[]){UINT64_MAX}, GGML_F32, 0, 4);
    expect_fail("ne 2^64-1", b.p, b.n, ER_ECORRUPT, "element count overflows int64 at ne[0]");
    buf_free(&b);
    one_tensor(&b, "wide", 1, (const uint64_t[]){1ull << 62}, GGML_F32, 0, 4);
    expect_fail("bytes overflow", b.p, b.n, ER_ECORRUPT, "tensor 'wide': byte size overflows");
    buf_free(&b);
    one_tensor(&b, "wide2", 1, (const uint64_t[]){1ull << 40}, GGML_F32, 0, 4);
    expect_fail("bytes past end", b.p, b.n, ER_ECORRUPT, "tensor 'wide2' data [");
    buf_free(&b);

    put_hdr(&b, 3, 2, 0);
    put_tensor(&b, "a", 1, (const uint64_t[]){1}, GGML_F32, 0);
    put_tensor(&b, "a", 1, (const uint64_t[]){1}, GGML_F32, 32);
    pad_to(&b, 32);
    for (int i = 0; i < 36; i++) put_u8(&b, 0);
    expect_fail("duplicate tensor", b.p, b.n, ER_ECORRUPT, "tensor #1: duplicate tensor name 'a' (first at tensor #0)");
    buf_free(&b);

    /* descriptors fit but the data section starts past the end */
    put_hdr(&b, 3, 1, 0);
    put_tensor(&b, "a", 1, (const uint64_t[]){1}, GGML_F32, 0);
    expect_fail("no data section", b.p, b.n, ER_ECORRUPT, "data section (offset 64) starts past end of file");
    buf_free(&b);
}

/* Every proper prefix of the standard image is invalid; every single-byte
 * mutation of its metadata either parses cleanly or fails with a message. */
static void test_truncations_and_mutations(void) {
    buf b = {0};
    marks m;
    build_std(&b, &m, 3);
    int bad_status = 0, empty_msg = 0;
    for (size_t n = 0; n < b.n; n++) {
        gguf_file f;
        uint8_t *img;
        er_clear_error();
        int st = parse_copy(b.p, n, &f, &img);
        if (st != ER_ECORRUPT) {
            bad_status++;
            fprintf(stderr, "prefix %zu: %s %s\n", n, er_status_name(st), er_last_error());
        }
        if (!er_last_error()[0]) empty_msg++;
        free(img);
    }
    CHECK(bad_status == 0, "%d of %zu truncations did not give ER_ECORRUPT", bad_status, b.n);
    CHECK(empty_msg == 0, "%d truncations without a message", empty_msg);

    static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x07, 0x20, 0x3f, 0x40, 0x7f, 0x80, 0xfe, 0xff};
    int odd = 0, ok = 0, failed = 0;
    uint64_t acc = 0;
    for (size_t at = 0; at < m.data_off; at++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            if (b.p[at] == vals[v]) continue;
            uint8_t save = b.p[at];
            b.p[at] = vals[v];
            gguf_file f;
            uint8_t *img;
            er_clear_error();
            int st = parse_copy(b.p, b.n, &f, &img);
            if (st == ER_OK) {
                ok++;
                acc += walk_all(&f);
            } else {
                failed++;
                if ((st != ER_ECORRUPT && st != ER_EUNSUPPORTED) || !er_last_error()[0]) odd++;
            }
            free(img);
            b.p[at] = save;
        }
    }
    CHECK(odd == 0, "%d mutations failed with an unexpected status or no message", odd);
    CHECK(ok > 0 && failed > 0, "mutations: %d parsed, %d failed (acc %llu)", ok, failed, (unsigned long long)acc);
    buf_free(&b);
}

/* ---- gguf_open ----------------------------------------------------------- */

static void write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp || (n && fwrite(p, 1, n, fp) != n) || fclose(fp) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
}

static void test_open(void) {
    char dir[] = "/tmp/er-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    char path[256], empty[256], bad[256];
    snprintf(path, sizeof path, "%s/std.gguf", dir);
    snprintf(empty, sizeof empty, "%s/empty.gguf", dir);
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    buf b = {0};
    marks m;
    build_std(&b, &m, 3);
    write_file(path, b.p, b.n);
    write_file(empty, b.p, 0);
    patch_u32(&b, m.version, 7);
    write_file(bad, b.p, b.n);
    patch_u32(&b, m.version, 3);

    gguf_file f;
    int st = gguf_open(path, &f);
    CHECK(st == ER_OK, "open std: %s", er_last_error());
    if (st == ER_OK) {
        CHECK(f.mapped && f.size == b.n && memcmp(f.base, b.p, b.n) == 0, "mapping holds the file");
        gguf_tensor t;
        CHECK(gguf_find_tensor(&f, "w.f16", &t) && ((uintptr_t)t.data % STD_ALIGN) == 0,
              "mapped tensor data is aligned");
        uint32_t u;
        CHECK(gguf_get_u32(&f, "llama.block_count", &u) && u == 5, "block_count via open");
        gguf_close(&f);
        CHECK(f.base == NULL && !f.mapped, "close zeroes");
    }
    memset(&f, 0xab, sizeof f);
    st = gguf_open(empty, &f);
    CHECK(st == ER_ECORRUPT, "empty file: %s", er_status_name(st));
    CHECK_CONTAINS(er_last_error(), "file is empty/too small");
    CHECK_CONTAINS(er_last_error(), empty);
    CHECK(f.base == NULL, "failed open leaves nothing mapped");
    st = gguf_open(bad, &f);
    CHECK(st == ER_EUNSUPPORTED, "version 7 file: %s", er_status_name(st));
    CHECK_CONTAINS(er_last_error(), "unsupported GGUF version 7");
    CHECK(f.base == NULL, "failed parse unmaps");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    st = gguf_open(missing, &f);
    CHECK(st == ER_EIO, "missing file: %s", er_status_name(st));
    CHECK_CONTAINS(er_last_error(), missing);
    CHECK_CONTAINS(er_last_error(), strerror(ENOENT));
    st = gguf_open(dir, &f);
    CHECK(st == ER_EIO, "directory: %s", er_status_name(st));
    CHECK_CONTAINS(er_last_error(), "not a regular file");
    CHECK(gguf_open(NULL, &f) == ER_EINVAL, "NULL path");
    gguf_file z;
    memset(&z, 0, sizeof z);
    gguf_close(&z);
    gguf_close(NULL);

    unlink(path);
    unlink(empty);
    unlink(bad);
    rmdir(dir);
    buf_free(&b);
}

/* ---- real files ---------------------------------------------------------- */

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Opens a real file and checks the invariants every consumer relies on. */
static bool open_real(const char *path, gguf_file *f) {
    int st = gguf_open(path, f);
    CHECK(st == ER_OK, "%s: %s %s", path, er_status_name(st), er_last_error());
    if (st != ER_OK) return false;
    CHECK(f->version == 3 && f->data_off <= f->size, "%s: header", path);
    (void)walk_all(f);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor t, t2;
        gguf_tensor_at(f, i, &t);
        char name[300];
        snprintf(name, sizeof name, "%.*s", (int)t.name.len, t.name.ptr);
        CHECK(gguf_find_tensor(f, name, &t2) && t2.data == t.data, "%s: tensor %s", path, name);
        CHECK((uintptr_t)t.data % f->alignment == 0, "%s: %s aligned", path, name);
        CHECK(t.data + t.nbytes <= f->base + f->size, "%s: %s inside", path, name);
    }
    return true;
}

static uint64_t n_tokens(const gguf_file *f) {
    gguf_kv kv;
    return gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STR, &kv) ? kv.arr_n : 0;
}

static float f32_at(const gguf_tensor *t, size_t i) {
    float v;
    memcpy(&v, t->data + 4 * i, 4);
    return v;
}

static void test_real(const char *data) {
    char p[1024];
    snprintf(p, sizeof p, "%s/models/babyllama-tok105/babyllama-tok105-f32.gguf", data);
    if (!exists(data) || !exists(p)) {
        printf("note: %s absent; skipping real-file checks\n", exists(data) ? p : data);
        return;
    }
    gguf_file f;
    er_str s;
    uint32_t u;
    float x;
    bool bo;
    gguf_tensor t;
    const char *variants[] = {"f32", "q8_0"};
    for (int v = 0; v < 2; v++) {
        snprintf(p, sizeof p, "%s/models/babyllama-tok105/babyllama-tok105-%s.gguf", data, variants[v]);
        if (!open_real(p, &f)) continue;
        CHECK(gguf_get_str(&f, "general.architecture", &s) && er_str_eq(s, "llama"), "%s arch", p);
        CHECK(gguf_get_u32(&f, "llama.block_count", &u) && u == 5, "%s block_count", p);
        CHECK(gguf_get_u32(&f, "llama.embedding_length", &u) && u == 128, "%s embedding", p);
        CHECK(gguf_get_u32(&f, "llama.context_length", &u) && u == 256, "%s ctx", p);
        CHECK(gguf_get_f32(&f, "llama.attention.layer_norm_rms_epsilon", &x) && x == 1e-5f, "%s eps %g", p, x);
        CHECK(gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &bo) && bo, "%s add_bos", p);
        CHECK(n_tokens(&f) == 105, "%s tokens %llu", p, (unsigned long long)n_tokens(&f));
        CHECK(f.n_tensors == 47 && f.n_kv == 27 && f.data_off == 5728 && f.alignment == 32, "%s layout", p);
        CHECK(gguf_find_tensor(&f, "token_embd.weight", &t) && t.ne[0] == 128 && t.ne[1] == 105, "%s embd", p);
        if (v == 0) {
            CHECK(t.type == GGML_F32 && t.nbytes == 53760 && fabsf(f32_at(&t, 0) - 0.04358576f) < 1e-7f,
                  "%s token_embd[0] = %g", p, f32_at(&t, 0));
        } else {
            CHECK(t.type == GGML_Q8_0 && t.nbytes == 14280 && t.data[0] == 191 && t.data[1] == 20 &&
                      t.data[2] == 38, "%s Q8_0 token_embd bytes", p);
        }
        CHECK(gguf_find_tensor(&f, "blk.0.attn_norm.weight", &t) && t.type == GGML_F32 && t.n_dims == 1 &&
                  fabsf(f32_at(&t, 0) - 0.99419653f) < 1e-7f, "%s attn_norm", p);
        gguf_close(&f);
    }

    snprintf(p, sizeof p, "%s/models/llama-2-tiny-random/llama-2-tiny-random.gguf", data);
    if (open_real(p, &f)) {
        CHECK(gguf_get_str(&f, "general.architecture", &s) && er_str_eq(s, "llama"), "%s arch", p);
        CHECK(n_tokens(&f) == 32000, "%s tokens", p);
        CHECK(f.n_tensors == 12 && f.n_kv == 18, "%s counts", p);
        CHECK(gguf_find_tensor(&f, "token_embd.weight", &t) && t.type == GGML_F16 && t.ne[0] == 8 &&
                  t.ne[1] == 32000 && t.nbytes == 512000, "%s F16 embd", p);
        gguf_close(&f);
    }

    static const struct { const char *name, *arch; uint64_t tokens; } vocabs[] = {
        {"gpt-2", "gpt2", 50257}, {"llama-bpe", "llama", 128256}, {"llama-spm", "llama", 32000},
        {"qwen2", "qwen2", 151936},
    };
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        snprintf(p, sizeof p, "%s/tokenizers/vectors/ggml-vocab-%s.gguf", data, vocabs[i].name);
        if (!open_real(p, &f)) continue;
        CHECK(gguf_get_str(&f, "general.architecture", &s) && er_str_eq(s, vocabs[i].arch), "%s arch", p);
        CHECK(n_tokens(&f) == vocabs[i].tokens, "%s tokens %llu", p, (unsigned long long)n_tokens(&f));
        CHECK(f.n_tensors == 0, "%s has no tensors", p);
        gguf_close(&f);
    }
}

int main(int argc, char **argv) {
    const char *data = argc > 1 ? argv[1] : getenv("EDGERUN_TEST_DATA");
    test_type_facts();
    test_std_image(3);
    test_std_image(2);
    test_small_valid();
    test_broken_header();
    test_broken_kv();
    test_broken_tensors();
    test_truncations_and_mutations();
    test_open();
    if (data)
        test_real(data);
    else
        printf("note: no data directory given (argv[1] or EDGERUN_TEST_DATA); skipping real-file checks\n");
    return test_summary();
}
