/*
 * gguf_types.c — facts about GGML tensor types and GGUF value types.
 *
 * Block geometry follows llama.cpp's ggml (block_q8_1 is two fp16 + 32 int8 =
 * 36 bytes there; gguf-py's table still says 40 from when the scales were
 * floats — ggml is what writes and reads the data, so it wins). Only types
 * listed in kBlocks can be parsed: a tensor of any other id makes gguf_parse
 * fail with ER_EUNSUPPORTED, because without its block geometry we cannot
 * bound its extent. Having geometry here does NOT mean the runtime can compute
 * with the type; the model layer decides that.
 */
#include "gguf.h"

#include <string.h>

typedef struct type_block {
    uint32_t elems;
    uint32_t bytes;
} type_block;

/* Indexed by ggml type id; {0,0} = no geometry known. */
static const type_block kBlocks[] = {
    [GGML_F32] = {1, 4},      [GGML_F16] = {1, 2},       [GGML_Q4_0] = {32, 18},
    [GGML_Q4_1] = {32, 20},   [GGML_Q5_0] = {32, 22},    [GGML_Q5_1] = {32, 24},
    [GGML_Q8_0] = {32, 34},   [GGML_Q8_1] = {32, 36},    [GGML_Q2_K] = {256, 84},
    [GGML_Q3_K] = {256, 110}, [GGML_Q4_K] = {256, 144},  [GGML_Q5_K] = {256, 176},
    [GGML_Q6_K] = {256, 210}, [GGML_Q8_K] = {256, 292},  [GGML_IQ4_NL] = {32, 18},
    [GGML_IQ4_XS] = {256, 136}, [GGML_BF16] = {1, 2},
};

/* Names for every id llama.cpp has assigned, including ones we cannot parse,
 * so an "unsupported type" message can say which type a file uses. Gaps are
 * ids ggml retired (4, 5: Q4_2/Q4_3; 31..33: old Q4_0 repacks). */
static const char *const kNames[] = {
    [0] = "F32",      [1] = "F16",      [2] = "Q4_0",    [3] = "Q4_1",    [6] = "Q5_0",
    [7] = "Q5_1",     [8] = "Q8_0",     [9] = "Q8_1",    [10] = "Q2_K",   [11] = "Q3_K",
    [12] = "Q4_K",    [13] = "Q5_K",    [14] = "Q6_K",   [15] = "Q8_K",   [16] = "IQ2_XXS",
    [17] = "IQ2_XS",  [18] = "IQ3_XXS", [19] = "IQ1_S",  [20] = "IQ4_NL", [21] = "IQ3_S",
    [22] = "IQ2_S",   [23] = "IQ4_XS",  [24] = "I8",     [25] = "I16",    [26] = "I32",
    [27] = "I64",     [28] = "F64",     [29] = "IQ1_M",  [30] = "BF16",   [34] = "TQ1_0",
    [35] = "TQ2_0",   [39] = "MXFP4",
};

int ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes) {
    uint32_t e = 0, b = 0;
    if (type < sizeof kBlocks / sizeof kBlocks[0]) {
        e = kBlocks[type].elems;
        b = kBlocks[type].bytes;
    }
    if (block_elems) *block_elems = e;
    if (block_bytes) *block_bytes = b;
    return e != 0;
}

const char *ggml_type_name(uint32_t type) {
    if (type < sizeof kNames / sizeof kNames[0] && kNames[type]) return kNames[type];
    return "unknown";
}

size_t ggml_row_bytes(uint32_t type, uint64_t n) {
    uint32_t be, bb;
    if (!ggml_type_block(type, &be, &bb) || n % be != 0) return 0;
    uint64_t blocks = n / be;
    /* 0 also signals "does not fit in size_t" (only reachable on 32-bit hosts
     * or with absurd n; validated tensors never get here). */
    if (blocks > SIZE_MAX / bb) return 0;
    return (size_t)(blocks * bb);
}

size_t gguf_vtype_size(uint32_t type) {
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0; /* STR, ARR, invalid */
    }
}

bool er_str_eq(er_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}
