/*
 * gguf.h — GGUF v3 reader over a read-only mapping (internal).
 *
 * gguf_open validates the WHOLE file once (every key, value, array, tensor
 * descriptor, every tensor's extent and alignment) and keeps no tables: the
 * descriptor below is a fixed-size struct. Later look-ups re-walk the already
 * validated bytes, which is why they cannot fail on corruption and why opening
 * needs no heap. A model has a few hundred keys and tensors, so linear scans
 * cost microseconds and happen only at open.
 */
#ifndef ER_GGUF_H
#define ER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGUF metadata value types (spec numbering). */
enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STR = 8, GGUF_ARR = 9, GGUF_U64 = 10, GGUF_I64 = 11,
    GGUF_F64 = 12, GGUF_VTYPE_COUNT
};

/* GGML tensor types we know by id (llama.cpp numbering). */
enum ggml_type {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12,
    GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_IQ4_NL = 20, GGML_IQ4_XS = 23,
    GGML_BF16 = 30
};

/* A length-delimited string pointing into the mapping (NOT NUL-terminated). */
typedef struct er_str {
    const char *ptr;
    uint64_t len;
} er_str;

/* One metadata entry, decoded from the mapping. */
typedef struct gguf_kv {
    er_str key;
    uint32_t type;                 /* enum gguf_vtype */
    union {
        uint64_t u64;              /* U8..U64, BOOL (0/1) */
        int64_t i64;               /* I8..I64 */
        double f64;                /* F32, F64 */
        er_str str;                /* STR */
    } v;
    uint32_t arr_type;             /* ARR: element type */
    uint64_t arr_n;                /* ARR: element count */
    const uint8_t *arr_data;       /* ARR: first element (strings: length-prefixed, packed) */
} gguf_kv;

/* One tensor descriptor. */
typedef struct gguf_tensor {
    er_str name;
    uint32_t n_dims;
    uint64_t ne[4];                /* unused dims are 1 */
    uint32_t type;                 /* enum ggml_type */
    uint64_t offset;               /* relative to the data section */
    const uint8_t *data;           /* base + data_offset + offset */
    uint64_t nbytes;
} gguf_tensor;

/* The file. Fixed size; no pointers into heap memory. */
typedef struct gguf_file {
    const uint8_t *base;           /* mapping */
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    size_t kv_off;                 /* offset of the first kv */
    size_t tensors_off;            /* offset of the first tensor descriptor */
    size_t data_off;               /* offset of the (aligned) data section */
    uint32_t alignment;            /* general.alignment or 32 */
    bool mapped;                   /* base is our mmap (gguf_open): gguf_close unmaps it */
} gguf_file;

/* Maps `path` read-only and validates it. On failure sets er_last_error and
 * returns ER_EIO/ER_ECORRUPT/ER_EUNSUPPORTED, leaving nothing mapped. */
int gguf_open(const char *path, gguf_file *f);

/* Validates an in-memory image (used by gguf_open and the fuzz/bad-input tests). */
int gguf_parse(const uint8_t *base, size_t size, gguf_file *f);

/* Unmaps (only what gguf_open mapped; a gguf_parse image stays the caller's)
 * and zeroes *f. Safe on a zeroed struct. */
void gguf_close(gguf_file *f);

/* Finds key `key` (NUL-terminated); returns true and fills *out if present. */
bool gguf_find_kv(const gguf_file *f, const char *key, gguf_kv *out);

/* i-th kv / tensor in file order (i < n_kv / n_tensors). */
void gguf_kv_at(const gguf_file *f, uint64_t i, gguf_kv *out);
void gguf_tensor_at(const gguf_file *f, uint64_t i, gguf_tensor *out);

/* Finds a tensor by name; returns true and fills *out if present. */
bool gguf_find_tensor(const gguf_file *f, const char *name, gguf_tensor *out);

/* Typed getters: true when the key exists and converts losslessly. */
bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
bool gguf_get_f32(const gguf_file *f, const char *key, float *out);
bool gguf_get_bool(const gguf_file *f, const char *key, bool *out);
bool gguf_get_str(const gguf_file *f, const char *key, er_str *out);
/* Array getter: true when `key` is an array of `elem_type`. */
bool gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, gguf_kv *out);

/* Iterates a validated string array: *cursor starts at kv->arr_data; each call
 * returns the next string and advances the cursor. */
er_str gguf_arr_next_str(const uint8_t **cursor);

/* Element size in bytes of a scalar metadata type (0 for STR/ARR). */
size_t gguf_vtype_size(uint32_t type);

/* Type facts: block size in elements and bytes per block; 0 if unsupported. */
int ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
const char *ggml_type_name(uint32_t type);   /* "Q4_K", or the static string "unknown" for unknown ids */

/* Bytes of a row of `n` elements of `type`; 0 if the type is unknown or `n`
 * is not a multiple of its block. */
size_t ggml_row_bytes(uint32_t type, uint64_t n);

bool er_str_eq(er_str s, const char *cstr);

#endif
