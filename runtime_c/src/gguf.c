/*
 * gguf.c — GGUF reader over a read-only mapping: validate everything once.
 *
 * Layout (little-endian; this reader assumes a little-endian host, which is
 * every target we build for, and reads every scalar with memcpy because GGUF
 * packs fields without alignment):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv      x { str key, u32 vtype, value }
 *   n_tensors x { str name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   padding to `alignment`, then the data section (tensor offsets are relative to it)
 * where str = u64 length + bytes (no NUL) and an array value = u32 elem type,
 * u64 count, elements.
 *
 * Every read goes through `rd_need`, which compares the requested length with
 * the bytes REMAINING (never `p + n > end`, which wraps for huge n). kv_read
 * and tensor_read are the only decoders; gguf_parse runs them over the whole
 * file, so the look-ups that run them again later cannot fail.
 *
 * Decisions beyond the spec (all reported as ER_ECORRUPT unless noted):
 *  - versions 2 and 3 are read (same layout; v3 only added big-endian files);
 *    v1 (32-bit counts), anything newer and byte-swapped (big-endian) files
 *    are ER_EUNSUPPORTED;
 *  - keys: 1..65535 bytes, unique; bool values must be 0 or 1;
 *  - arrays of arrays are ER_EUNSUPPORTED (the spec allows them, llama.cpp
 *    refuses them, and no model key uses them);
 *  - general.alignment, when present, must be a u32 power of two;
 *  - tensor names: 1..255 bytes (llama.cpp stops at 63; we read a little
 *    more, never less), unique; n_dims 1..4; every ne >= 1 and the element
 *    count fits in int64 (ggml's index type); types without known block
 *    geometry are ER_EUNSUPPORTED;
 *  - at most 32768 kvs and 32768 tensors (published models use < 2000, with
 *    experts fused per layer): this bounds the duplicate check, which works
 *    without a heap and is quadratic for a file crafted to defeat its filter
 *    (a few seconds at the cap);
 *  - a file without tensors may stop short of the padded data offset (the
 *    llama.cpp vocab files do); data_off is then clamped to the file size.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

#define GGUF_HEADER_BYTES 24u
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_TENSOR_NAME 255u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_KV 32768u
#define GGUF_MAX_TENSORS 32768u
/* Smallest possible encodings, used to reject counts the file cannot hold
 * before looping over them: kv = key length + 1-byte key + type + 1-byte
 * value (an empty array is 12 bytes, more than 1); tensor = name length +
 * 1-byte name + n_dims + one ne + type + offset. */
#define GGUF_MIN_KV_BYTES (8u + 1u + 4u + 1u)
#define GGUF_MIN_TENSOR_BYTES (8u + 1u + 4u + 8u + 4u + 8u)

/* ---- bounds-checked cursor ------------------------------------------------ */

typedef struct rd {
    const uint8_t *b;
    size_t size;
    size_t off; /* invariant: off <= size */
} rd;

static bool rd_need(const rd *r, uint64_t n) { return n <= (uint64_t)(r->size - r->off); }
static uint64_t rd_left(const rd *r) { return (uint64_t)(r->size - r->off); }

static uint32_t ld_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t ld_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Copies up to 64 bytes of untrusted text into `out`, replacing anything not
 * printable ASCII, so messages stay valid UTF-8 for the Python layer and a
 * corrupt name cannot inject control characters into logs. */
static const char *clean(const uint8_t *p, uint64_t len, char out[72]) {
    uint64_t n = len < 64 ? len : 64;
    for (uint64_t i = 0; i < n; i++) out[i] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'') ? (char)p[i] : '?';
    if (len > 64) { memcpy(out + 64, "...", 4); } else { out[n] = '\0'; }
    return out;
}

static const char *vtype_name(uint32_t t) {
    static const char *const names[GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return t < GGUF_VTYPE_COUNT ? names[t] : "invalid";
}

/* Where a message points: "kv #3 'llama.block_count'", "tensor 'x'". Formatted
 * only on failure paths, because look-ups re-run the decoders on every call. */
typedef struct where {
    const char *kind; /* "kv #" or "tensor #" */
    uint64_t idx;
    er_str name;      /* key / tensor name once read */
} where;

static const char *where_fmt(const where *w, char out[128]) {
    char nm[72];
    if (!w->name.ptr)
        snprintf(out, 128, "%s%llu", w->kind, (unsigned long long)w->idx);
    else if (w->kind[0] == 't') /* tensor names are unique and say more than an index */
        snprintf(out, 128, "tensor '%s'", clean((const uint8_t *)w->name.ptr, w->name.len, nm));
    else
        snprintf(out, 128, "%s%llu '%s'", w->kind, (unsigned long long)w->idx,
                 clean((const uint8_t *)w->name.ptr, w->name.len, nm));
    return out;
}
/* The compound literal lives until the end of the enclosing block, i.e. past
 * the er_fail call that consumes it. */
#define W(w) where_fmt((w), (char[128]){0})

/* ---- key/value ------------------------------------------------------------ */

/* Reads a length-prefixed string at the cursor; `what` names it for messages. */
static int read_str(rd *r, er_str *out, const where *ctx, const char *what) {
    if (!rd_need(r, 8))
        return er_fail(ER_ECORRUPT, "%s: %s length at offset %zu is cut off by end of file (%zu bytes)",
                       W(ctx), what, r->off, r->size);
    uint64_t len = ld_u64(r->b + r->off);
    r->off += 8;
    if (!rd_need(r, len))
        return er_fail(ER_ECORRUPT, "%s: %s length %llu exceeds file (%llu bytes left at offset %zu)",
                       W(ctx), what, (unsigned long long)len, (unsigned long long)rd_left(r), r->off);
    out->ptr = (const char *)(r->b + r->off);
    out->len = len;
    r->off += (size_t)len;
    return ER_OK;
}

/* Reads one scalar of `type` (not STR/ARR) into kv->v. */
static int read_scalar(rd *r, uint32_t type, gguf_kv *kv, const where *ctx) {
    size_t sz = gguf_vtype_size(type);
    if (!rd_need(r, sz))
        return er_fail(ER_ECORRUPT, "%s: %s value at offset %zu is cut off by end of file (%zu bytes)",
                       W(ctx), vtype_name(type), r->off, r->size);
    const uint8_t *p = r->b + r->off;
    r->off += sz;
    switch (type) {
    case GGUF_U8: kv->v.u64 = p[0]; break;
    case GGUF_BOOL:
        if (p[0] > 1) return er_fail(ER_ECORRUPT, "%s: bool value %u is not 0 or 1", W(ctx), p[0]);
        kv->v.u64 = p[0];
        break;
    case GGUF_I8: kv->v.i64 = (int8_t)p[0]; break;
    case GGUF_U16: { uint16_t v; memcpy(&v, p, 2); kv->v.u64 = v; break; }
    case GGUF_I16: { int16_t v; memcpy(&v, p, 2); kv->v.i64 = v; break; }
    case GGUF_U32: kv->v.u64 = ld_u32(p); break;
    case GGUF_I32: { int32_t v; memcpy(&v, p, 4); kv->v.i64 = v; break; }
    case GGUF_U64: kv->v.u64 = ld_u64(p); break;
    case GGUF_I64: { int64_t v; memcpy(&v, p, 8); kv->v.i64 = v; break; }
    case GGUF_F32: { float v; memcpy(&v, p, 4); kv->v.f64 = v; break; }
    case GGUF_F64: { double v; memcpy(&v, p, 8); kv->v.f64 = v; break; }
    default: break;
    }
    return ER_OK;
}

/* Reads the array body (after the ARR type tag) and checks every element. */
static int read_array(rd *r, gguf_kv *kv, const where *ctx) {
    if (!rd_need(r, 12))
        return er_fail(ER_ECORRUPT, "%s: array header at offset %zu is cut off by end of file (%zu bytes)",
                       W(ctx), r->off, r->size);
    uint32_t et = ld_u32(r->b + r->off);
    uint64_t n = ld_u64(r->b + r->off + 4);
    r->off += 12;
    if (et == GGUF_ARR) return er_fail(ER_EUNSUPPORTED, "%s: nested arrays are not supported", W(ctx));
    if (et >= GGUF_VTYPE_COUNT) return er_fail(ER_ECORRUPT, "%s: invalid array element type %u", W(ctx), et);
    kv->arr_type = et;
    kv->arr_n = n;
    kv->arr_data = r->b + r->off;
    if (et == GGUF_STR) {
        /* Each string costs at least its 8-byte length: reject impossible
         * counts before walking (a 2^63 count would otherwise loop forever). */
        if (n > rd_left(r) / 8)
            return er_fail(ER_ECORRUPT, "%s: array count %llu of strings exceeds file (%llu bytes left)",
                           W(ctx), (unsigned long long)n, (unsigned long long)rd_left(r));
        for (uint64_t i = 0; i < n; i++) {
            if (!rd_need(r, 8))
                return er_fail(ER_ECORRUPT, "%s: array element #%llu: string length is cut off by end of file",
                               W(ctx), (unsigned long long)i);
            uint64_t len = ld_u64(r->b + r->off);
            r->off += 8;
            if (!rd_need(r, len))
                return er_fail(ER_ECORRUPT,
                               "%s: array element #%llu: string length %llu exceeds file (%llu bytes left)", W(ctx),
                               (unsigned long long)i, (unsigned long long)len, (unsigned long long)rd_left(r));
            r->off += (size_t)len;
        }
        return ER_OK;
    }
    size_t es = gguf_vtype_size(et);
    if (n > rd_left(r) / es)
        return er_fail(ER_ECORRUPT, "%s: array count %llu of %s exceeds file (%llu bytes left)", W(ctx),
                       (unsigned long long)n, vtype_name(et), (unsigned long long)rd_left(r));
    if (et == GGUF_BOOL) {
        for (uint64_t i = 0; i < n; i++)
            if (r->b[r->off + i] > 1)
                return er_fail(ER_ECORRUPT, "%s: array element #%llu: bool value %u is not 0 or 1", W(ctx),
                               (unsigned long long)i, r->b[r->off + i]);
    }
    r->off += (size_t)(n * es);
    return ER_OK;
}

/* Decodes kv #idx at r->off and advances past it; checks everything. */
static int kv_read(rd *r, uint64_t idx, gguf_kv *kv) {
    memset(kv, 0, sizeof *kv);
    where wh = {"kv #", idx, {NULL, 0}}, *ctx = &wh;
    if (!rd_need(r, 8))
        return er_fail(ER_ECORRUPT, "%s: key length at offset %zu is cut off by end of file (%zu bytes)", W(ctx),
                       r->off, r->size);
    uint64_t klen = ld_u64(r->b + r->off);
    if (klen == 0) return er_fail(ER_ECORRUPT, "%s: empty key", W(ctx));
    if (klen > GGUF_MAX_KEY)
        return er_fail(ER_ECORRUPT, "%s: key length %llu exceeds the limit of %u", W(ctx), (unsigned long long)klen,
                       GGUF_MAX_KEY);
    int st = read_str(r, &kv->key, ctx, "key");
    if (st) return st;
    wh.name = kv->key;
    if (!rd_need(r, 4))
        return er_fail(ER_ECORRUPT, "%s: value type at offset %zu is cut off by end of file (%zu bytes)", W(ctx),
                       r->off, r->size);
    kv->type = ld_u32(r->b + r->off);
    r->off += 4;
    if (kv->type >= GGUF_VTYPE_COUNT) return er_fail(ER_ECORRUPT, "%s: invalid value type %u", W(ctx), kv->type);
    if (kv->type == GGUF_STR) return read_str(r, &kv->v.str, ctx, "string");
    if (kv->type == GGUF_ARR) return read_array(r, kv, ctx);
    return read_scalar(r, kv->type, kv, ctx);
}

/* ---- tensor descriptors --------------------------------------------------- */

/* Decodes descriptor #idx (everything but the data extent, which needs
 * data_off) and advances past it. */
static int tensor_read(rd *r, uint64_t idx, uint32_t alignment, gguf_tensor *t) {
    memset(t, 0, sizeof *t);
    where wh = {"tensor #", idx, {NULL, 0}}, *ctx = &wh;
    if (!rd_need(r, 8))
        return er_fail(ER_ECORRUPT, "%s: name length at offset %zu is cut off by end of file (%zu bytes)", W(ctx),
                       r->off, r->size);
    uint64_t nlen = ld_u64(r->b + r->off);
    if (nlen == 0) return er_fail(ER_ECORRUPT, "%s: empty tensor name", W(ctx));
    if (nlen > GGUF_MAX_TENSOR_NAME)
        return er_fail(ER_ECORRUPT, "%s: name length %llu exceeds the limit of %u", W(ctx), (unsigned long long)nlen,
                       GGUF_MAX_TENSOR_NAME);
    int st = read_str(r, &t->name, ctx, "name");
    if (st) return st;
    wh.name = t->name;
    if (!rd_need(r, 4))
        return er_fail(ER_ECORRUPT, "%s: n_dims at offset %zu is cut off by end of file (%zu bytes)", W(ctx), r->off,
                       r->size);
    t->n_dims = ld_u32(r->b + r->off);
    r->off += 4;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return er_fail(ER_ECORRUPT, "%s: n_dims %u is outside 1..%u", W(ctx), t->n_dims, GGUF_MAX_DIMS);
    if (!rd_need(r, 8ull * t->n_dims + 12))
        return er_fail(ER_ECORRUPT, "%s: shape/type/offset at offset %zu are cut off by end of file (%zu bytes)",
                       W(ctx), r->off, r->size);
    uint64_t count = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        t->ne[d] = ld_u64(r->b + r->off);
        r->off += 8;
        if (t->ne[d] == 0) return er_fail(ER_ECORRUPT, "%s: ne[%u] is 0", W(ctx), d);
        if (t->ne[d] > (uint64_t)INT64_MAX / count)
            return er_fail(ER_ECORRUPT, "%s: element count overflows int64 at ne[%u] = %llu", W(ctx), d,
                           (unsigned long long)t->ne[d]);
        count *= t->ne[d];
    }
    t->type = ld_u32(r->b + r->off);
    t->offset = ld_u64(r->b + r->off + 4);
    r->off += 12;
    uint32_t be, bb;
    if (!ggml_type_block(t->type, &be, &bb))
        return er_fail(ER_EUNSUPPORTED, "%s: unsupported tensor type %u (%s)", W(ctx), t->type,
                       ggml_type_name(t->type));
    if (t->ne[0] % be != 0)
        return er_fail(ER_ECORRUPT, "%s: ne[0] = %llu is not a multiple of the %s block size %u", W(ctx),
                       (unsigned long long)t->ne[0], ggml_type_name(t->type), be);
    /* bytes = (count / be) * bb; count / be is exact since be divides ne[0]. */
    uint64_t blocks = count / be;
    if (blocks > UINT64_MAX / bb)
        return er_fail(ER_ECORRUPT, "%s: byte size overflows (%llu blocks of %u bytes)", W(ctx),
                       (unsigned long long)blocks, bb);
    t->nbytes = blocks * bb;
    if (t->offset % alignment != 0)
        return er_fail(ER_ECORRUPT, "%s: data offset %llu is not a multiple of the alignment %u", W(ctx),
                       (unsigned long long)t->offset, alignment);
    return ER_OK;
}

/* ---- duplicate detection without a heap ----------------------------------- */

/* A 64 Kibit Bloom filter on the stack (8 KiB) makes the usual no-duplicate
 * case linear; only a filter hit pays for a re-walk comparing names. */
#define BLOOM_BITS 65536u
typedef struct bloom {
    uint64_t w[BLOOM_BITS / 64];
} bloom;

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

/* Adds `s`; returns true if it may have been present already. */
static bool bloom_add(bloom *b, er_str s) {
    uint64_t h = hash_bytes(s.ptr, s.len);
    uint32_t a = (uint32_t)h % BLOOM_BITS, c = (uint32_t)(h >> 32) % BLOOM_BITS;
    bool seen = ((b->w[a / 64] >> (a % 64)) & 1) && ((b->w[c / 64] >> (c % 64)) & 1);
    b->w[a / 64] |= 1ull << (a % 64);
    b->w[c / 64] |= 1ull << (c % 64);
    return seen;
}

static bool str_same(er_str a, er_str b) { return a.len == b.len && memcmp(a.ptr, b.ptr, (size_t)a.len) == 0; }

/* ---- parse ---------------------------------------------------------------- */

int gguf_parse(const uint8_t *base, size_t size, gguf_file *f) {
    if (!f) return er_fail(ER_EINVAL, "gguf_parse: NULL file");
    memset(f, 0, sizeof *f);
    if (!base || size < GGUF_HEADER_BYTES)
        return er_fail(ER_ECORRUPT, "file is empty/too small (%zu bytes; a GGUF header is %u)", base ? size : 0,
                       GGUF_HEADER_BYTES);
    if (memcmp(base, "GGUF", 4) != 0) {
        char m[72];
        return er_fail(ER_ECORRUPT, "bad magic '%s' (not a GGUF file)", clean(base, 4, m));
    }
    uint32_t version = ld_u32(base + 4);
    if (version != 2 && version != 3) {
        if ((version & 0xffffu) == 0 && version != 0)
            return er_fail(ER_EUNSUPPORTED,
                           "GGUF version field 0x%08x looks byte-swapped: big-endian GGUF files are not supported",
                           version);
        return er_fail(ER_EUNSUPPORTED, "unsupported GGUF version %u (this runtime reads v3)", version);
    }
    uint64_t n_tensors = ld_u64(base + 8), n_kv = ld_u64(base + 16);
    uint64_t left = size - GGUF_HEADER_BYTES;
    if (n_kv > GGUF_MAX_KV)
        return er_fail(ER_ECORRUPT, "header claims %llu kvs; this reader accepts at most %u",
                       (unsigned long long)n_kv, GGUF_MAX_KV);
    if (n_tensors > GGUF_MAX_TENSORS)
        return er_fail(ER_ECORRUPT, "header claims %llu tensors; this reader accepts at most %u",
                       (unsigned long long)n_tensors, GGUF_MAX_TENSORS);
    if (n_kv > left / GGUF_MIN_KV_BYTES ||
        n_tensors > (left - n_kv * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES)
        return er_fail(ER_ECORRUPT, "header claims %llu kvs and %llu tensors, more than the file (%zu bytes) can hold",
                       (unsigned long long)n_kv, (unsigned long long)n_tensors, size);

    rd r = {base, size, GGUF_HEADER_BYTES};
    uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
    bloom seen;
    memset(&seen, 0, sizeof seen);
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv kv;
        int st = kv_read(&r, i, &kv);
        if (st) return st;
        char k[72];
        if (bloom_add(&seen, kv.key)) {
            rd w = {base, size, GGUF_HEADER_BYTES};
            for (uint64_t j = 0; j < i; j++) {
                gguf_kv prev;
                (void)kv_read(&w, j, &prev); /* validated above */
                if (str_same(prev.key, kv.key))
                    return er_fail(ER_ECORRUPT, "kv #%llu: duplicate key '%s' (first at kv #%llu)",
                                   (unsigned long long)i, clean((const uint8_t *)kv.key.ptr, kv.key.len, k),
                                   (unsigned long long)j);
            }
        }
        if (er_str_eq(kv.key, "general.alignment")) {
            if (kv.type != GGUF_U32)
                return er_fail(ER_ECORRUPT, "general.alignment has type %s (must be u32)", vtype_name(kv.type));
            uint64_t a = kv.v.u64;
            if (a == 0 || (a & (a - 1)) != 0)
                return er_fail(ER_ECORRUPT, "general.alignment %llu is not a nonzero power of two",
                               (unsigned long long)a);
            alignment = (uint32_t)a;
        }
    }
    size_t tensors_off = r.off;

    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor t;
        int st = tensor_read(&r, i, alignment, &t);
        if (st) return st;
    }
    /* align_up without overflow: r.off <= size <= SIZE_MAX, so compute the pad
     * and compare it with what is left. */
    uint64_t pad = (alignment - (uint64_t)r.off % alignment) % alignment;
    size_t data_off;
    if (pad <= rd_left(&r)) {
        data_off = r.off + (size_t)pad;
    } else if (n_tensors == 0) {
        data_off = size;
    } else {
        return er_fail(ER_ECORRUPT, "data section (offset %llu) starts past end of file (%zu bytes)",
                       (unsigned long long)((uint64_t)r.off + pad), size);
    }

    memset(&seen, 0, sizeof seen);
    r.off = tensors_off;
    uint64_t data_len = size - data_off;
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor t;
        (void)tensor_read(&r, i, alignment, &t); /* validated above */
        char nm[72];
        if (t.offset > data_len || t.nbytes > data_len - t.offset)
            return er_fail(ER_ECORRUPT, "tensor '%s' data [%llu, %llu) extends past end of file (%zu bytes)",
                           clean((const uint8_t *)t.name.ptr, t.name.len, nm),
                           (unsigned long long)((uint64_t)data_off + t.offset),
                           /* may wrap for absurd values; only printed */
                           (unsigned long long)((uint64_t)data_off + t.offset + t.nbytes), size);
        if (bloom_add(&seen, t.name)) {
            rd w = {base, size, tensors_off};
            for (uint64_t j = 0; j < i; j++) {
                gguf_tensor prev;
                (void)tensor_read(&w, j, alignment, &prev);
                if (str_same(prev.name, t.name))
                    return er_fail(ER_ECORRUPT, "tensor #%llu: duplicate tensor name '%s' (first at tensor #%llu)",
                                   (unsigned long long)i, clean((const uint8_t *)t.name.ptr, t.name.len, nm),
                                   (unsigned long long)j);
            }
        }
    }

    f->base = base;
    f->size = size;
    f->version = version;
    f->n_kv = n_kv;
    f->n_tensors = n_tensors;
    f->kv_off = GGUF_HEADER_BYTES;
    f->tensors_off = tensors_off;
    f->data_off = data_off;
    f->alignment = alignment;
    return ER_OK;
}

/* ---- open/close ----------------------------------------------------------- */

int gguf_open(const char *path, gguf_file *f) {
    if (!f) return er_fail(ER_EINVAL, "gguf_open: NULL file");
    memset(f, 0, sizeof *f);
    if (!path) return er_fail(ER_EINVAL, "gguf_open: NULL path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return er_fail(ER_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        int e = errno;
        close(fd);
        return er_fail(ER_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(stt.st_mode)) {
        close(fd);
        return er_fail(ER_EIO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)stt.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return er_fail(ER_EIO, "'%s' (%lld bytes) is too large to map on this platform", path,
                       (long long)stt.st_size);
    }
    size_t size = (size_t)stt.st_size;
    /* mmap of length 0 fails with EINVAL; say what is actually wrong. */
    if (size < GGUF_HEADER_BYTES) {
        close(fd);
        return er_fail(ER_ECORRUPT, "'%s': file is empty/too small (%zu bytes; a GGUF header is %u)", path, size,
                       GGUF_HEADER_BYTES);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (m == MAP_FAILED) return er_fail(ER_EIO, "cannot map '%s': %s", path, strerror(e));
    int st = gguf_parse((const uint8_t *)m, size, f);
    if (st) {
        munmap(m, size);
        memset(f, 0, sizeof *f);
        return st;
    }
    f->mapped = true;
    return ER_OK;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->mapped && f->base) munmap((void *)(uintptr_t)f->base, f->size);
    memset(f, 0, sizeof *f);
}

/* ---- look-ups (over validated bytes) -------------------------------------- */

void gguf_kv_at(const gguf_file *f, uint64_t i, gguf_kv *out) {
    memset(out, 0, sizeof *out);
    if (!f->base || i >= f->n_kv) return;
    rd r = {f->base, f->size, f->kv_off};
    for (uint64_t j = 0; j <= i; j++)
        if (kv_read(&r, j, out)) return;
}

bool gguf_find_kv(const gguf_file *f, const char *key, gguf_kv *out) {
    if (!f->base) return false;
    rd r = {f->base, f->size, f->kv_off};
    gguf_kv kv;
    for (uint64_t j = 0; j < f->n_kv; j++) {
        if (kv_read(&r, j, &kv)) return false;
        if (er_str_eq(kv.key, key)) {
            if (out) *out = kv;
            return true;
        }
    }
    return false;
}

void gguf_tensor_at(const gguf_file *f, uint64_t i, gguf_tensor *out) {
    memset(out, 0, sizeof *out);
    if (!f->base || i >= f->n_tensors) return;
    rd r = {f->base, f->size, f->tensors_off};
    for (uint64_t j = 0; j <= i; j++)
        if (tensor_read(&r, j, f->alignment, out)) return;
    out->data = f->base + f->data_off + out->offset;
}

bool gguf_find_tensor(const gguf_file *f, const char *name, gguf_tensor *out) {
    if (!f->base) return false;
    rd r = {f->base, f->size, f->tensors_off};
    gguf_tensor t;
    for (uint64_t j = 0; j < f->n_tensors; j++) {
        if (tensor_read(&r, j, f->alignment, &t)) return false;
        if (er_str_eq(t.name, name)) {
            t.data = f->base + f->data_off + t.offset;
            if (out) *out = t;
            return true;
        }
    }
    return false;
}

/* Integer value of an integer-typed kv as (negative?, magnitude). */
static bool kv_int(const gguf_kv *kv, bool *neg, uint64_t *mag) {
    switch (kv->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        *neg = false;
        *mag = kv->v.u64;
        return true;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        *neg = kv->v.i64 < 0;
        /* -(x+1)+1 avoids negating INT64_MIN */
        *mag = *neg ? (uint64_t)(-(kv->v.i64 + 1)) + 1 : (uint64_t)kv->v.i64;
        return true;
    default: return false;
    }
}

bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    gguf_kv kv;
    bool neg;
    uint64_t mag;
    if (!gguf_find_kv(f, key, &kv) || !kv_int(&kv, &neg, &mag)) return false;
    if (neg || mag > UINT32_MAX) return false;
    *out = (uint32_t)mag;
    return true;
}

bool gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    gguf_kv kv;
    bool neg;
    uint64_t mag;
    if (!gguf_find_kv(f, key, &kv)) return false;
    if (kv.type == GGUF_F32) {
        *out = (float)kv.v.f64; /* exact: it was a float */
        return true;
    }
    if (kv.type == GGUF_F64) {
        /* Rounds to nearest; refuses finite values outside float's range
         * instead of silently turning them into infinities. */
        double d = kv.v.f64;
        if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX)) return false;
        *out = (float)d;
        return true;
    }
    if (!kv_int(&kv, &neg, &mag)) return false;
    /* Integers only when exact in float: at most 24 significant bits. */
    uint64_t m = mag;
    while (m > (1u << 24) && (m & 1) == 0) m >>= 1;
    if (m > (1u << 24)) return false;
    float v = (float)mag;
    *out = neg ? -v : v;
    return true;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    gguf_kv kv;
    bool neg;
    uint64_t mag;
    if (!gguf_find_kv(f, key, &kv)) return false;
    if (kv.type == GGUF_BOOL) {
        *out = kv.v.u64 != 0;
        return true;
    }
    if (!kv_int(&kv, &neg, &mag) || neg || mag > 1) return false;
    *out = mag == 1;
    return true;
}

bool gguf_get_str(const gguf_file *f, const char *key, er_str *out) {
    gguf_kv kv;
    if (!gguf_find_kv(f, key, &kv) || kv.type != GGUF_STR) return false;
    *out = kv.v.str;
    return true;
}

bool gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, gguf_kv *out) {
    gguf_kv kv;
    if (!gguf_find_kv(f, key, &kv) || kv.type != GGUF_ARR || kv.arr_type != elem_type) return false;
    *out = kv;
    return true;
}

er_str gguf_arr_next_str(const uint8_t **cursor) {
    er_str s;
    s.len = ld_u64(*cursor);
    s.ptr = (const char *)(*cursor + 8);
    *cursor += 8 + (size_t)s.len;
    return s;
}
