/*
 * fuzz_gguf.c — libFuzzer entry for the GGUF reader (not built by meson).
 *
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -Iruntime_c/include -Iruntime_c/src runtime_c/src/gguf.c \
 *     runtime_c/src/gguf_types.c runtime_c/src/error.c \
 *     runtime_c/tests/fuzz_gguf.c -o /tmp/fuzz_gguf
 *   /tmp/fuzz_gguf -max_total_time=60 [corpus-dir]
 *
 * Whatever gguf_parse accepts, every look-up a consumer may make must stay
 * inside the buffer; a failure must leave a message. Any crash or sanitizer
 * report is a bug in the reader.
 */
#include "error.h"
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file f;
    er_clear_error();
    int st = gguf_parse(data, size, &f);
    if (st != ER_OK) {
        if (!er_last_error()[0] || (st != ER_ECORRUPT && st != ER_EUNSUPPORTED)) abort();
        return 0;
    }
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < f.n_kv; i++) {
        gguf_kv kv;
        gguf_kv_at(&f, i, &kv);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv.key.len < 255 ? kv.key.len : 255), kv.key.ptr);
        gguf_kv again;
        /* keys are unique, so a key without an embedded NUL finds itself */
        if (strlen(key) == kv.key.len && (!gguf_find_kv(&f, key, &again) || again.key.ptr != kv.key.ptr)) abort();
        uint32_t u;
        float x;
        bool b;
        er_str s;
        acc += gguf_get_u32(&f, key, &u) + gguf_get_f32(&f, key, &x) + gguf_get_bool(&f, key, &b) +
               gguf_get_str(&f, key, &s);
        if (kv.type == GGUF_STR && kv.v.str.len) acc += (uint8_t)kv.v.str.ptr[kv.v.str.len - 1];
        if (kv.type != GGUF_ARR) continue;
        if (kv.arr_type == GGUF_STR) {
            const uint8_t *cur = kv.arr_data;
            for (uint64_t j = 0; j < kv.arr_n; j++) {
                er_str e = gguf_arr_next_str(&cur);
                if (e.len) acc += (uint8_t)e.ptr[e.len - 1];
            }
        } else if (kv.arr_n) {
            acc += kv.arr_data[kv.arr_n * gguf_vtype_size(kv.arr_type) - 1];
        }
    }
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        gguf_tensor t;
        gguf_tensor_at(&f, i, &t);
        if (t.nbytes == 0 || t.data < data || t.data + t.nbytes > data + size) abort();
        acc += t.data[0] + t.data[t.nbytes - 1];
        if (ggml_row_bytes(t.type, t.ne[0]) == 0) abort();
    }
    (void)acc;
    return 0;
}
