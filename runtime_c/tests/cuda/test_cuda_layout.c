/*
 * test_cuda_layout.c — the CUDA backend's device row layout, host side only
 * (runs on machines with no GPU).
 *
 * For every weight type: random GGUF rows (random bytes, so NaN/inf scales
 * and every quant pattern occur) -> erk_row_to_device -> erk_row_dequant_host
 * must give the generic table's dequant_row of the original bit for bit, and
 * so must erk_row_decode_host, the kernels' own element decoder (erk_deq)
 * compiled for the host.
 * Also: row sizes are 16-byte multiples no smaller than the GGUF row, bad
 * widths give 0, and padding is zeroed (the kernels read whole 16-byte
 * vectors, so stale padding would be harmless only if it were never summed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "test_util.h"

/* The weight types the CUDA backend lays out and computes with: F32 .. Q6_K.
 * The later ones (Q4_1 .. Q2_K, issue 25) have no device layout yet, and
 * er_cuda_plan refuses a file that holds them, naming the tensor. */
enum { N_CUDA_W = ER_W_Q6_K + 1 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static int block_of(int w) {
    switch (w) {
    case ER_W_Q8_0: case ER_W_Q4_0: return 32;
    case ER_W_Q4_K: case ER_W_Q5_K: case ER_W_Q6_K: return 256;
    default: return 1;
    }
}

static const char *wname[ER_W_COUNT] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};

int main(void) {
    const er_kernels *gen = er_kernels_generic();
    const int widths[] = {256, 768, 2048, 4096 + 256, 5 * 256};
    enum { MAXN = 4096 + 256 };
    static unsigned char raw[MAXN * 4], dev[MAXN * 4 + 64];
    static float ref[MAXN], got[MAXN];

    for (int w = 0; w < N_CUDA_W; w++) {
        /* widths the type refuses */
        if (block_of(w) > 1) {
            CHECK(erk_row_bytes(w, block_of(w) + 1) == 0, "%s: width %d accepted", wname[w], block_of(w) + 1);
            CHECK(erk_row_bytes(w, block_of(w) / 2) == 0, "%s: width %d accepted", wname[w], block_of(w) / 2);
        } else {
            /* odd float widths are fine: only their padding changes */
            CHECK(erk_row_bytes(w, 3) % 16 == 0 && erk_row_bytes(w, 3) >= erk_gguf_row_bytes(w, 3), "%s: width 3", wname[w]);
        }
        CHECK(erk_row_bytes(w, 0) == 0, "%s: width 0 accepted", wname[w]);
        CHECK(erk_row_bytes(w, -32) == 0, "%s: negative width accepted", wname[w]);

        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const int n = widths[wi];
            const size_t rb = erk_row_bytes(w, n), gb = erk_gguf_row_bytes(w, n);
            CHECK(rb > 0 && rb % 16 == 0, "%s n=%d: row bytes %zu", wname[w], n, rb);
            CHECK(rb >= gb && rb < gb + 16 + (size_t)(n / block_of(w)) * 2 + 16,
                  "%s n=%d: row bytes %zu vs GGUF %zu", wname[w], n, rb, gb);
            for (int trial = 0; trial < 20; trial++) {
                for (size_t i = 0; i < gb; i++)
                    raw[i] = (unsigned char)next_u32();
                /* poison the whole destination: the conversion must zero the padding itself */
                memset(dev, 0xa5, sizeof dev);
                erk_row_to_device(w, raw, dev, n);
                /* the quant payload is a permutation of the GGUF bytes, so
                 * the row holds exactly gb bytes of data then zeros; the last
                 * non-zero byte can only sit inside the first gb bytes */
                int pad_ok = 1;
                for (size_t i = gb; i < rb; i++)
                    pad_ok &= dev[i] == 0;
                CHECK(pad_ok, "%s n=%d: padding not zeroed", wname[w], n);
                CHECK(dev[rb] == 0xa5, "%s n=%d: wrote past the row", wname[w], n);
                gen->dequant_row[w](raw, ref, n);
                memset(got, 0xff, sizeof got);
                erk_row_dequant_host(w, dev, got, n);
                const int same = memcmp(ref, got, (size_t)n * sizeof(float)) == 0;
                CHECK(same, "%s n=%d trial %d: device-layout row dequantizes differently", wname[w], n, trial);
                /* the kernels' element decoder (erk_deq) on the host: its
                 * offsets, nibble and bit rules against the CPU's bits. A
                 * NaN only has to stay NaN: cuda_fp16's half -> float
                 * conversion does not keep the payload bits (random rows
                 * hold NaN scales; real weights never do). */
                memset(got, 0xff, sizeof got);
                erk_row_decode_host(w, dev, got, n);
                int first = -1;
                for (int i = 0; i < n && first < 0; i++)
                    if (memcmp(&ref[i], &got[i], sizeof(float)) != 0 && !(isnan(ref[i]) && isnan(got[i])))
                        first = i;
                CHECK(first < 0, "%s n=%d trial %d: erk_deq differs first at element %d (%a vs %a)", wname[w], n,
                      trial, first, first < 0 ? 0.0 : (double)got[first], first < 0 ? 0.0 : (double)ref[first]);
                if (!same || first >= 0)
                    break;
            }
        }
    }
    return test_summary();
}
