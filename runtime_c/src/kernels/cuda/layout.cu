/*
 * layout.cu — GGUF rows <-> the device row layout (host code only; see
 * erk_common.cuh for the layout). Callable without a GPU: the loader
 * converts rows through a staging buffer before upload, and the tests check
 * the round trip against the generic dequantizer on machines with no device.
 *
 * erk_row_dequant_host rebuilds each GGUF block from the device row and runs
 * the generic dequantizer on it, so "device row -> floats" is by
 * construction the CPU's arithmetic; what it checks is that the layout loses
 * and misplaces nothing.
 */
#include "kernels/cuda/erk_common.cuh"

#include <string.h>

extern "C" {
#include "kernels/generic/generic.h"
}

extern "C" size_t erk_gguf_row_bytes(int wtype, int n) {
    switch (wtype) {
    case ER_W_F32: return (size_t)n * 4;
    case ER_W_F16: case ER_W_BF16: return (size_t)n * 2;
    case ER_W_Q8_0: return (size_t)(n / 32) * sizeof(er_block_q8_0);
    case ER_W_Q4_0: return (size_t)(n / 32) * sizeof(er_block_q4_0);
    case ER_W_Q4_K: return (size_t)(n / 256) * sizeof(er_block_q4_k);
    case ER_W_Q5_K: return (size_t)(n / 256) * sizeof(er_block_q5_k);
    case ER_W_Q6_K: return (size_t)(n / 256) * sizeof(er_block_q6_k);
    default: return 0;
    }
}

extern "C" size_t erk_row_bytes(int wtype, int n_in) {
    if (n_in <= 0)
        return 0;
    size_t b;
    switch (wtype) {
    case ER_W_F32: b = (size_t)n_in * 4; break;
    case ER_W_F16: case ER_W_BF16: b = (size_t)n_in * 2; break;
    case ER_W_Q8_0:
        if (n_in % 32) return 0;
        b = (size_t)n_in + (size_t)(n_in / 32) * 2;
        break;
    case ER_W_Q4_0:
        if (n_in % 32) return 0;
        b = (size_t)n_in / 2 + (size_t)(n_in / 32) * 2;
        break;
    case ER_W_Q4_K:
        if (n_in % 256) return 0;
        b = (size_t)n_in / 2 + (size_t)(n_in / 256) * 16;
        break;
    case ER_W_Q5_K:
        if (n_in % 256) return 0;
        b = (size_t)n_in / 2 + (size_t)n_in / 8 + (size_t)(n_in / 256) * 16;
        break;
    case ER_W_Q6_K:
        if (n_in % 256) return 0;
        b = (size_t)n_in / 2 + (size_t)n_in / 4 + (size_t)n_in / 16 + (size_t)(n_in / 256) * 2;
        break;
    default: return 0;
    }
    return erk_align(b, 16);
}

/* GGUF blocks (raw) -> device row (dev). erk_row_dequant_host below spells
 * the same offsets again independently, so the round-trip test catches a
 * slip in either. */
static void move(const void *raw, uint8_t *dev, size_t bytes) { memcpy(dev, raw, bytes); }

static void convert(int wtype, const uint8_t *raw, uint8_t *dev, int n) {
    switch (wtype) {
    case ER_W_F32: case ER_W_F16: case ER_W_BF16:
        move(raw, dev, erk_gguf_row_bytes(wtype, n));
        return;
    case ER_W_Q8_0:
        for (int i = 0; i < n / 32; i++) {
            const er_block_q8_0 *b = reinterpret_cast<const er_block_q8_0 *>(raw) + i;
            move(b->qs, dev + 32 * (size_t)i, 32);
            move(&b->d, dev + n + 2 * (size_t)i, 2);
        }
        return;
    case ER_W_Q4_0:
        for (int i = 0; i < n / 32; i++) {
            const er_block_q4_0 *b = reinterpret_cast<const er_block_q4_0 *>(raw) + i;
            move(b->qs, dev + 16 * (size_t)i, 16);
            move(&b->d, dev + (size_t)n / 2 + 2 * (size_t)i, 2);
        }
        return;
    case ER_W_Q4_K:
        for (int i = 0; i < n / 256; i++) {
            const er_block_q4_k *b = reinterpret_cast<const er_block_q4_k *>(raw) + i;
            uint8_t *meta = dev + (size_t)n / 2 + 16 * (size_t)i;
            move(b->qs, dev + 128 * (size_t)i, 128);
            move(&b->d, meta, 2);
            move(&b->dmin, meta + 2, 2);
            move(b->scales, meta + 4, 12);
        }
        return;
    case ER_W_Q5_K:
        for (int i = 0; i < n / 256; i++) {
            const er_block_q5_k *b = reinterpret_cast<const er_block_q5_k *>(raw) + i;
            uint8_t *meta = dev + (size_t)n / 2 + (size_t)n / 8 + 16 * (size_t)i;
            move(b->qs, dev + 128 * (size_t)i, 128);
            move(b->qh, dev + (size_t)n / 2 + 32 * (size_t)i, 32);
            move(&b->d, meta, 2);
            move(&b->dmin, meta + 2, 2);
            move(b->scales, meta + 4, 12);
        }
        return;
    case ER_W_Q6_K:
        for (int i = 0; i < n / 256; i++) {
            const er_block_q6_k *b = reinterpret_cast<const er_block_q6_k *>(raw) + i;
            move(b->ql, dev + 128 * (size_t)i, 128);
            move(b->qh, dev + (size_t)n / 2 + 64 * (size_t)i, 64);
            move(b->scales, dev + (size_t)n / 2 + (size_t)n / 4 + 16 * (size_t)i, 16);
            move(&b->d, dev + (size_t)n / 2 + (size_t)n / 4 + (size_t)n / 16 + 2 * (size_t)i, 2);
        }
        return;
    default: return;
    }
}

extern "C" void erk_row_to_device(int wtype, const void *src, void *dst, int n_in) {
    const size_t bytes = erk_row_bytes(wtype, n_in);
    if (!bytes || !src || !dst)
        return;
    memset(dst, 0, bytes);
    convert(wtype, static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), n_in);
}

extern "C" void erk_row_dequant_host(int wtype, const void *dev_row, float *dst, int n_in) {
    if (!erk_row_bytes(wtype, n_in) || !dev_row || !dst)
        return;
    const uint8_t *dev = static_cast<const uint8_t *>(dev_row);
    /* one GGUF block (or 64 floats) at a time through a stack buffer: no
     * allocation, whatever the row length */
    union {
        er_block_q8_0 q8;
        er_block_q4_0 q4;
        er_block_q4_k q4k;
        er_block_q5_k q5k;
        er_block_q6_k q6k;
        float f[64];
    } blk;
    switch (wtype) {
    case ER_W_F32: er_gen_dequant_f32(dev, dst, n_in); return;
    case ER_W_F16: er_gen_dequant_f16(dev, dst, n_in); return;
    case ER_W_BF16: er_gen_dequant_bf16(dev, dst, n_in); return;
    default: break;
    }
    const int per = (wtype == ER_W_Q8_0 || wtype == ER_W_Q4_0) ? 32 : 256;
    for (int i = 0; i < n_in / per; i++) {
        memset(&blk, 0, sizeof blk);
        switch (wtype) {
        case ER_W_Q8_0:
            memcpy(blk.q8.qs, dev + 32 * (size_t)i, 32);
            memcpy(&blk.q8.d, dev + n_in + 2 * (size_t)i, 2);
            er_gen_dequant_q8_0(&blk.q8, dst + (size_t)i * per, per);
            break;
        case ER_W_Q4_0:
            memcpy(blk.q4.qs, dev + 16 * (size_t)i, 16);
            memcpy(&blk.q4.d, dev + (size_t)n_in / 2 + 2 * (size_t)i, 2);
            er_gen_dequant_q4_0(&blk.q4, dst + (size_t)i * per, per);
            break;
        case ER_W_Q4_K: {
            const uint8_t *meta = dev + (size_t)n_in / 2 + 16 * (size_t)i;
            memcpy(blk.q4k.qs, dev + 128 * (size_t)i, 128);
            memcpy(&blk.q4k.d, meta, 2);
            memcpy(&blk.q4k.dmin, meta + 2, 2);
            memcpy(blk.q4k.scales, meta + 4, 12);
            er_gen_dequant_q4_k(&blk.q4k, dst + (size_t)i * per, per);
            break;
        }
        case ER_W_Q5_K: {
            const uint8_t *meta = dev + (size_t)n_in / 2 + (size_t)n_in / 8 + 16 * (size_t)i;
            memcpy(blk.q5k.qs, dev + 128 * (size_t)i, 128);
            memcpy(blk.q5k.qh, dev + (size_t)n_in / 2 + 32 * (size_t)i, 32);
            memcpy(&blk.q5k.d, meta, 2);
            memcpy(&blk.q5k.dmin, meta + 2, 2);
            memcpy(blk.q5k.scales, meta + 4, 12);
            er_gen_dequant_q5_k(&blk.q5k, dst + (size_t)i * per, per);
            break;
        }
        case ER_W_Q6_K: {
            const size_t sc = (size_t)n_in / 2 + (size_t)n_in / 4;
            memcpy(blk.q6k.ql, dev + 128 * (size_t)i, 128);
            memcpy(blk.q6k.qh, dev + (size_t)n_in / 2 + 64 * (size_t)i, 64);
            memcpy(blk.q6k.scales, dev + sc + 16 * (size_t)i, 16);
            memcpy(&blk.q6k.d, dev + sc + (size_t)n_in / 16 + 2 * (size_t)i, 2);
            er_gen_dequant_q6_k(&blk.q6k, dst + (size_t)i * per, per);
            break;
        }
        default: return;
        }
    }
}

/* The kernels' own per-element decoder (erk_deq, shared by the embedding,
 * tensor-core and simple-matvec kernels) compiled for the host: the
 * no-GPU layout test holds it to the generic dequantizer bit for bit, which
 * checks every device-side offset and nibble/bit rule without a device. */
extern "C" void erk_row_decode_host(int wtype, const void *dev_row, float *dst, int n_in) {
    if (!erk_row_bytes(wtype, n_in) || !dev_row || !dst)
        return;
    const uint8_t *row = static_cast<const uint8_t *>(dev_row);
    for (int e = 0; e < n_in; e++)
        dst[e] = erk_deq(wtype, row, n_in, e);
}
