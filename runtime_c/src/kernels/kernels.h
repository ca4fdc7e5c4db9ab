/*
 * kernels.h — the kernel table (internal).
 *
 * The forward pass calls compute only through an er_kernels table, chosen
 * once at open (dispatch.c). generic/ implements every entry in portable C;
 * an ISA folder (neon/, sve/, x86/, cuda/) copies the generic table and
 * overrides what it speeds up, so a missing SIMD kernel never means a
 * missing feature.
 *
 * Conventions: `n` is the element count of a row; quantized rows hold n/32
 * blocks (n must be a multiple of 32 for Q8_0/Q4_0 and the other 32-element
 * types, of 256 for the K-quants and IQ4_XS, whose rows hold n/256
 * super-blocks: er_wtype_block_elems). Weight matrices are
 * row-major with ne[0] = n columns contiguous, as in GGUF.
 */
#ifndef ER_KERNELS_H
#define ER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define ER_QK8_0 32
#define ER_QK4_0 32
#define ER_QK_K 256           /* K-quant super-block */

/* K/V positions attention_multi converts to floats at a time: 32 rows of a
 * 64-wide head are 8 KiB, in L1 beside the queries' state. A multiple of 8
 * (the AVX2 kernel's score groups must not straddle two blocks). */
#define ER_ATT_BLOCK 32
/* attention_scores/attention_sums match attention_heads bit for bit for
 * head sizes a multiple of this (every table's float lanes divide it) */
#define ER_ATT_SPLIT_LANES 16

typedef uint16_t er_f16;      /* IEEE half, stored bits */
typedef uint16_t er_bf16;     /* bfloat16, stored bits */

/* llama.cpp's exact block layouts. */
typedef struct {
    er_f16 d;                 /* scale */
    int8_t qs[ER_QK8_0];      /* value = qs[j] * d */
} er_block_q8_0;              /* 34 bytes */

typedef struct {
    er_f16 d;                 /* scale */
    uint8_t qs[ER_QK4_0 / 2]; /* element j: low nibble of qs[j]; element j+16: high nibble; value (q-8)*d */
} er_block_q4_0;              /* 18 bytes */

/*
 * K-quants: super-blocks of 256 in 8 (Q4_K, Q5_K) or 16 (Q6_K) sub-blocks.
 * Q4_K/Q5_K: value = d*sc[j]*q - dmin*mn[j] for sub-block j of 32, where the
 * eight 6-bit scales sc and mins mn are packed into scales[12] (decoded by
 * er_kq_scale_min in kquant.h). Elements 64c..64c+31 are the low nibbles of
 * qs[32c..32c+31], elements 64c+32..64c+63 the high nibbles; Q5_K adds the
 * fifth bit from qh[l] bit 2c (low half) and bit 2c+1 (high half).
 */
typedef struct {
    er_f16 d;                 /* scale of the sub-block scales */
    er_f16 dmin;              /* scale of the sub-block mins */
    uint8_t scales[12];
    uint8_t qs[ER_QK_K / 2];
} er_block_q4_k;              /* 144 bytes */

typedef struct {
    er_f16 d;
    er_f16 dmin;
    uint8_t scales[12];
    uint8_t qh[ER_QK_K / 8];
    uint8_t qs[ER_QK_K / 2];
} er_block_q5_k;              /* 176 bytes */

/* Q6_K: value = d * scales[e/16] * (q - 32), q six bits: within each half of
 * 128 (ql += 64, qh += 32 per half), for l < 32: element l = ql[l] low nibble
 * | qh[l] bits 0-1; l+32 = ql[l+32] low | bits 2-3; l+64 = ql[l] high | bits
 * 4-5; l+96 = ql[l+32] high | bits 6-7 (each 2-bit field is bits 4-5 of q). */
typedef struct {
    uint8_t ql[ER_QK_K / 2];
    uint8_t qh[ER_QK_K / 4];
    int8_t scales[ER_QK_K / 16];
    er_f16 d;
} er_block_q6_k;              /* 210 bytes */

/* Q8_K activations for the K-quant dots: float scale, and the sums of each
 * 16 quants so the dots can apply the mins without touching qs again. */
typedef struct {
    float d;
    int8_t qs[ER_QK_K];
    int16_t bsums[ER_QK_K / 16];
} er_block_q8_k;              /* 292 bytes */

/* ---- the types small published models ship in (issue 25) -----------------
 * Q4_1, Q5_0, Q5_1 and IQ4_NL: blocks of 32, the fallbacks llama.cpp's
 * K-quant mixes use on rows that are not a multiple of 256 (widths 576,
 * 640, 960 ...); IQ4_XS, Q3_K and Q2_K: super-blocks of 256. In every
 * 32-element type element j of a block is the low nibble of qs[j] and
 * element j+16 the high nibble, as in Q4_0. */

/* Q4_1: value = d * q + m, q the 4-bit nibble (0..15). */
typedef struct {
    er_f16 d;
    er_f16 m;
    uint8_t qs[ER_QK4_0 / 2];
} er_block_q4_1;              /* 20 bytes */

/* Q5_0: value = d * (q - 16), q = nibble | bit j of qh (little-endian
 * 32-bit) << 4 for element j. */
typedef struct {
    er_f16 d;
    uint8_t qh[4];
    uint8_t qs[ER_QK4_0 / 2];
} er_block_q5_0;              /* 22 bytes */

/* Q5_1: value = d * q + m, q as in Q5_0 without the offset. */
typedef struct {
    er_f16 d;
    er_f16 m;
    uint8_t qh[4];
    uint8_t qs[ER_QK4_0 / 2];
} er_block_q5_1;              /* 24 bytes */

/* IQ4_NL: value = d * er_iq4nl_values[nibble], a non-linear 4-bit grid. */
typedef struct {
    er_f16 d;
    uint8_t qs[ER_QK4_0 / 2];
} er_block_iq4_nl;            /* 18 bytes */

/* The 16 levels of IQ4_NL and IQ4_XS (llama.cpp's kvalues_iq4nl). */
extern const int8_t er_iq4nl_values[16];

/* IQ4_XS: IQ4_NL's grid in super-blocks of 256, eight sub-blocks of 32 with
 * 6-bit scales: sub-block j has ls = (scales_l[j/2] >> 4*(j%2) & 15) |
 * ((scales_h >> 2j & 3) << 4) and value = d * (ls - 32) * grid[nibble];
 * its elements are the nibbles of qs[16j .. 16j+15] as in IQ4_NL. */
typedef struct {
    er_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[ER_QK_K / 64];
    uint8_t qs[ER_QK_K / 2];
} er_block_iq4_xs;            /* 136 bytes */

/* Q2_K: sixteen sub-blocks of 16; element e (half h = e/128, j = e%128/32,
 * l = e%32) is q = qs[32h + l] >> 2j & 3, and value = d * (scales[e/16] &
 * 15) * q - dmin * (scales[e/16] >> 4). */
typedef struct {
    uint8_t scales[ER_QK_K / 16];
    uint8_t qs[ER_QK_K / 4];
    er_f16 d;
    er_f16 dmin;
} er_block_q2_k;              /* 84 bytes */

/* Q3_K: element e (h, j, l as in Q2_K) has low bits qs[32h + l] >> 2j & 3
 * and q = low - 4 when bit 4h+j of hmask[l] is clear (low when set); value
 * = d * (s[e/16] - 32) * q, the sixteen 6-bit scales s packed in scales[12]
 * (er_q3k_scales in kquant.h). */
typedef struct {
    uint8_t hmask[ER_QK_K / 8];
    uint8_t qs[ER_QK_K / 4];
    uint8_t scales[12];
    er_f16 d;
} er_block_q3_k;              /* 110 bytes */

/* Weight types the table indexes (dense, small). The types of issue 25
 * follow Q6_K, so no earlier index moved; nothing may assume the order
 * says a block size (er_wtype_block_elems does). */
enum er_wtype {
    ER_W_F32 = 0, ER_W_F16, ER_W_BF16, ER_W_Q8_0, ER_W_Q4_0, ER_W_Q4_K, ER_W_Q5_K, ER_W_Q6_K,
    ER_W_Q4_1, ER_W_Q5_0, ER_W_Q5_1, ER_W_IQ4_NL, ER_W_IQ4_XS, ER_W_Q3_K, ER_W_Q2_K,
    ER_W_COUNT
};

/* Elements per block of a weight type: 1 (float types), 32 or 256. */
static inline int er_wtype_block_elems(int wt) {
    switch (wt) {
    case ER_W_F32: case ER_W_F16: case ER_W_BF16: return 1;
    case ER_W_Q4_K: case ER_W_Q5_K: case ER_W_Q6_K: case ER_W_IQ4_XS: case ER_W_Q3_K: case ER_W_Q2_K: return ER_QK_K;
    default: return ER_QK8_0;
    }
}

/* Maps a GGML type id to an er_wtype, or -1 if no kernel handles it. */
int er_wtype_from_ggml(uint32_t ggml_type);

/* How activations must be prepared for a weight type's dot product. */
enum er_act_kind { ER_ACT_F32 = 0, ER_ACT_Q8_0 = 1, ER_ACT_Q8_K = 2, ER_ACT_COUNT };

/* Activation format each weight type's dot product takes. It is a property of
 * the block format, not of the ISA, so every table uses this one list. */
#define ER_ACT_KINDS \
    { [ER_W_F32] = ER_ACT_F32, \
      [ER_W_F16] = ER_ACT_F32, \
      [ER_W_BF16] = ER_ACT_F32, \
      [ER_W_Q8_0] = ER_ACT_Q8_0, \
      [ER_W_Q4_0] = ER_ACT_Q8_0, \
      [ER_W_Q4_K] = ER_ACT_Q8_K, \
      [ER_W_Q5_K] = ER_ACT_Q8_K, \
      [ER_W_Q6_K] = ER_ACT_Q8_K, \
      /* llama.cpp dots Q4_1/Q5_1 with Q8_1 (Q8_0 plus the block sum, */ \
      /* which these dots take from the int8 quants instead), */ \
      /* Q5_0 and IQ4_NL with Q8_0, the 256-element types with Q8_K */ \
      [ER_W_Q4_1] = ER_ACT_Q8_0, \
      [ER_W_Q5_0] = ER_ACT_Q8_0, \
      [ER_W_Q5_1] = ER_ACT_Q8_0, \
      [ER_W_IQ4_NL] = ER_ACT_Q8_0, \
      [ER_W_IQ4_XS] = ER_ACT_Q8_K, \
      [ER_W_Q3_K] = ER_ACT_Q8_K, \
      [ER_W_Q2_K] = ER_ACT_Q8_K }

/*
 * Matrix product Y[b][r] = dot(W row r, X row b) for rows r in [r0, r1) and
 * batch rows b in [0, m). X rows are already in the weight type's activation
 * format (act_kind): float rows of n, n/32 Q8_0 or n/256 Q8_K blocks; x_stride
 * is in bytes.
 * Y is float with row stride y_stride (elements). Threads split [r0, r1).
 */
typedef struct er_matmul_args {
    const void *w;            /* weight rows */
    size_t w_row_bytes;
    const void *x;            /* m activation rows */
    size_t x_stride;          /* bytes between activation rows */
    float *y;
    size_t y_stride;          /* elements between output rows */
    int n;                    /* columns (shared dimension) */
    int m;                    /* batch rows */
    int r0, r1;               /* output columns (weight rows) this call computes */
    /* The last m_one of the m rows get, each, the arithmetic of a call with
     * that row alone (m = 1): a batched step (forward.c, er_forward_batch)
     * puts there the rows that decode alone, or are a prefill's remainder
     * after its tiles of 4, so each row's bits are those it gets alone.
     * Kernels whose rows never depend on the others ignore it. */
    int m_one;
} er_matmul_args;

typedef struct er_kernels {
    const char *name;                         /* "generic", "avx2", "neon", ... */

    /* activation format per weight type, and its row size in bytes for n elements */
    int act_kind[ER_W_COUNT];

    /* dot product of one weight row with one prepared activation row */
    float (*vec_dot[ER_W_COUNT])(int n, const void *w_row, const void *x_row);

    /* the matrix product for one weight type (generic: loops over vec_dot) */
    void (*matmul[ER_W_COUNT])(const er_matmul_args *a);

    /* row conversion to float (embedding look-up, reference checks) */
    void (*dequant_row[ER_W_COUNT])(const void *src, float *dst, int n);

    /* float row -> Q8_0 blocks (n multiple of 32), llama.cpp's rounding */
    void (*quantize_row_q8_0)(const float *x, void *dst, int n);

    /* float row -> Q8_K blocks with bsums (n multiple of 256), llama.cpp's rule */
    void (*quantize_row_q8_k)(const float *x, void *dst, int n);

    /* y = x / rms(x) * w  (y may alias x) */
    void (*rmsnorm)(float *y, const float *x, const float *w, int n, float eps);

    /* rotary embedding in place on n_heads heads of head_dim at position pos.
     * neox = 0: pairs (2i, 2i+1) (GGUF llama layout); neox = 1: pairs (i, i+head_dim/2) (qwen2). */
    void (*rope)(float *x, int n_heads, int head_dim, int pos, float freq_base, int neox);

    /* the same rotation with the angles precomputed: cs[2i], cs[2i+1] = cos, sin
     * of pair i's angle (er_rope_angles), applied to each of the n_heads heads.
     * Every version is bit-identical to er_gen_rope_cs (separate multiplies
     * and adds, never fused), so the table changes speed, never logits. */
    void (*rope_cs)(float *x, int n_heads, int head_dim, const float *cs, int neox);

    /* in-place softmax over n */
    void (*softmax)(float *x, int n);

    /* g = silu(g) * u */
    void (*silu_mul)(float *g, const float *u, int n);

    /* y += x */
    void (*add)(float *y, const float *x, int n);

    /*
     * Greedy sampling's pick: the index of the first largest of x[0..n),
     * n >= 1, exactly as `best = 0; if (x[i] > x[best]) best = i` finds it
     * (a NaN never wins, except a NaN at 0, which nothing exceeds; equal
     * values, +0 and -0 included, keep the first). Every table returns the
     * same index for the same x.
     */
    int32_t (*argmax)(const float *x, int n);

    /*
     * Causal attention for ONE query head over n_kv cached positions:
     * out[d] = sum_t softmax_t(scale * q.k_t) v_t[d]. k/v rows are head_dim
     * elements of kv_type (ER_KV_F32/ER_KV_F16) with row stride kv_stride
     * elements. scores: caller scratch of n_kv floats.
     */
    void (*attention)(float *out, const float *q, const void *k, const void *v, int kv_type,
                      size_t kv_stride, int n_kv, int head_dim, float scale, float *scores);

    /*
     * attention for nq (>= 1) queries that read the same K/V head: query i
     * (q[i], head_dim floats) sees positions [0, n_kv[i]) and writes out[i].
     * The query heads of one grouped-query K/V head, over one or more tokens
     * of a prefill. Results must equal, bit for bit, those of `attention`
     * called once per query: the point is to load and convert each K/V row
     * once for all nq queries, not to compute differently. scratch: caller
     * scratch of ER_ATT_BLOCK * head_dim + nq * max(n_kv) floats. generic's
     * is the loop over `attention`.
     */
    void (*attention_multi)(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                            const void *v, int kv_type, size_t kv_stride, int head_dim, float scale,
                            float *scratch);

    /*
     * One decode step's attention over nkv K/V heads side by side in the
     * cache: k and v point at the first head's column of row 0, head i's
     * column i * head_dim elements further. Query head i * group + j
     * (q + (i * group + j) * head_dim floats; out likewise) reads K/V head
     * i, and every query sees positions [0, n_kv). Results must equal, bit
     * for bit, those of `attention` per query head: the point is the order
     * of the reads, row by row across all nkv heads (one contiguous run of
     * each row, which the prefetchers stream) instead of one head's column
     * down the whole cache and then the next's. scratch: caller scratch of
     * nkv * group * n_kv floats. generic's is the loop over `attention`.
     */
    void (*attention_heads)(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                            size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch);

    /*
     * attention_heads in two halves, so that a decode step's threads can
     * share one layer's attention with every result as on one thread
     * (forward.c, er_att_split): attention_scores writes the scores of rows
     * [t0, t1) for every query head into sc (query i at sc + i * n_kv, the
     * same layout attention_heads uses in its scratch), t0 a multiple of 8
     * and t1 a multiple of 8 or n_kv; any split of [0, n_kv) into such
     * ranges writes the same floats. attention_sums then takes each query's
     * softmax in place and writes out over all n_kv rows: called once per
     * K/V head range ([0, n_kv) scored first), it gives attention_heads'
     * results bit for bit, for head_dim a multiple of ER_ATT_SPLIT_LANES
     * (other sizes are computed, but as generic computes them).
     */
    void (*attention_scores)(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale);
    void (*attention_sums)(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                           int group, int head_dim);

    /* float <-> f16 rows (KV cache stores) */
    void (*f32_to_f16)(const float *x, er_f16 *y, int n);
    void (*f16_to_f32)(const er_f16 *x, float *y, int n);

    /*
     * Interleaved weight layouts, where a table has one that pays (0 / NULL
     * elsewhere: the file's layout is used as is). repack_rows[t] consecutive
     * rows are interleaved; a matrix qualifies when n_out is a multiple of
     * it. repack copies all n_out rows (row_bytes apart in src) into dst,
     * which takes exactly the same number of bytes. matmul_repacked is
     * matmul on that copy (a->w points at it); r0 and r1 - r0 must be
     * multiples of repack_rows[t].
     */
    int repack_rows[ER_W_COUNT];
    void (*repack[ER_W_COUNT])(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
    void (*matmul_repacked[ER_W_COUNT])(const er_matmul_args *a);

    /* ---- model families (family.c) ---------------------------------------
     * Element-wise steps of families past llama/qwen2. A table that leaves
     * one NULL runs the generic version (er_kernels_family fills the gap),
     * so every table runs every family; a SIMD version goes here once a
     * trace shows the step matters. */
    /* g = gelu_tanh(g) * u (Gemma's GeGLU; transformers' gelu_pytorch_tanh) */
    void (*gelu_mul)(float *g, const float *u, int n);
    /* LFM2's gated short convolution at position pos over n channels: bcx
     * is in_proj's output (B, C, x; n each), ring the layer's last lc
     * positions of B*x (row p % lc; this one's is written), w the taps
     * ([n][lc], the last for pos); y = C * conv(B*x). Positions before 0
     * read as zero, whatever the ring holds. */
    void (*shortconv)(float *y, const float *bcx, float *ring, const float *w, int n, int lc, int pos);
} er_kernels;

/* The family steps of table k, with the generic version where k has none. */
typedef struct er_family_kernels {
    void (*gelu_mul)(float *g, const float *u, int n);
    void (*shortconv)(float *y, const float *bcx, float *ring, const float *w, int n, int lc, int pos);
} er_family_kernels;
er_family_kernels er_kernels_family(const er_kernels *k);

/*
 * RoPE angles with a family's frequency changes: the n_rot/2 (cos, sin)
 * pairs of pos, each frequency 1 / base^(2i/n_rot) divided by `scale`
 * (linear scaling; 1 = none) and by factors[i] when factors is not NULL
 * (Llama 3.x rope_freqs). With scale 1 and no factors it equals
 * er_rope_angles bit for bit.
 */
void er_rope_angles_scaled(float *cs, int n_rot, int pos, float freq_base, float scale, const float *factors);

/*
 * RoPE with the angles computed once per position rather than in each layer:
 * er_rope_angles fills cs[0 .. head_dim) with (cos, sin) pairs for pos; the
 * table's rope_cs rotates the heads with them, bit-identical to the table's
 * rope for the same pos. One version for every ISA: it runs once per token
 * (head_dim/2 powf/cosf/sinf), not per layer, so SIMD would save nothing.
 */
void er_rope_angles(float *cs, int head_dim, int pos, float freq_base);

/* Bytes of one prepared activation row of n elements for act kind k. */
size_t er_act_row_bytes(int act_kind, int n);

/* Scalar conversions shared by all kernels (exact IEEE round-to-nearest-even). */
float er_f16_to_f32(er_f16 h);
er_f16 er_f32_to_f16(float f);
float er_bf16_to_f32(er_bf16 h);

/*
 * Sets flush-to-zero and denormals-are-zero for the calling thread (MXCSR
 * FTZ|DAZ on x86, FPCR.FZ on aarch64; nothing elsewhere). Worker threads call
 * it once at start: a denormal operand costs ~100 cycles on many cores, and
 * values that small are noise to every kernel here.
 */
void er_cpu_set_ftz(void);

/* The generic table (always available). */
const er_kernels *er_kernels_generic(void);

/*
 * Chooses a table. `want` = NULL/"" picks the best for this CPU, after
 * $EDGERUN_ISA if set; otherwise the named table. Returns NULL (and sets
 * er_last_error, ER_EUNSUPPORTED) for a name this build or CPU cannot run.
 * *reason receives a static sentence saying why this table was chosen.
 */
const er_kernels *er_kernels_select(const char *want, const char **reason);

/* Space-separated CPU features the dispatcher detected (e.g. "avx avx2 fma
 * f16c" or "asimd asimddp fphp sve"); "" when none are known. Static storage,
 * filled once, safe from any thread (for `edgerun info --isa`). */
const char *er_cpu_features(void);

#endif
