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
 * blocks (n must be a multiple of 32 for Q8_0/Q4_0). Weight matrices are
 * row-major with ne[0] = n columns contiguous, as in GGUF.
 */
#ifndef ER_KERNELS_H
#define ER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define ER_QK8_0 32
#define ER_QK4_0 32

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

/* Weight types the table indexes (dense, small). */
enum er_wtype { ER_W_F32 = 0, ER_W_F16, ER_W_BF16, ER_W_Q8_0, ER_W_Q4_0, ER_W_COUNT };

/* Maps a GGML type id to an er_wtype, or -1 if no kernel handles it. */
int er_wtype_from_ggml(uint32_t ggml_type);

/* How activations must be prepared for a weight type's dot product. */
enum er_act_kind { ER_ACT_F32 = 0, ER_ACT_Q8_0 = 1 };

/*
 * Matrix product Y[b][r] = dot(W row r, X row b) for rows r in [r0, r1) and
 * batch rows b in [0, m). X rows are already in the weight type's activation
 * format (act_kind): float rows of n, or n/32 Q8_0 blocks; x_stride is in bytes.
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

    /* y = x / rms(x) * w  (y may alias x) */
    void (*rmsnorm)(float *y, const float *x, const float *w, int n, float eps);

    /* rotary embedding in place on n_heads heads of head_dim at position pos.
     * neox = 0: pairs (2i, 2i+1) (GGUF llama layout); neox = 1: pairs (i, i+head_dim/2) (qwen2). */
    void (*rope)(float *x, int n_heads, int head_dim, int pos, float freq_base, int neox);

    /* in-place softmax over n */
    void (*softmax)(float *x, int n);

    /* g = silu(g) * u */
    void (*silu_mul)(float *g, const float *u, int n);

    /* y += x */
    void (*add)(float *y, const float *x, int n);

    /*
     * Causal attention for ONE query head over n_kv cached positions:
     * out[d] = sum_t softmax_t(scale * q.k_t) v_t[d]. k/v rows are head_dim
     * elements of kv_type (ER_KV_F32/ER_KV_F16) with row stride kv_stride
     * elements. scores: caller scratch of n_kv floats.
     */
    void (*attention)(float *out, const float *q, const void *k, const void *v, int kv_type,
                      size_t kv_stride, int n_kv, int head_dim, float scale, float *scores);

    /* float <-> f16 rows (KV cache stores) */
    void (*f32_to_f16)(const float *x, er_f16 *y, int n);
    void (*f16_to_f32)(const er_f16 *x, float *y, int n);
} er_kernels;

/* Bytes of one prepared activation row of n elements for act kind k. */
size_t er_act_row_bytes(int act_kind, int n);

/* Scalar conversions shared by all kernels (exact IEEE round-to-nearest-even). */
float er_f16_to_f32(er_f16 h);
er_f16 er_f32_to_f16(float f);
float er_bf16_to_f32(er_bf16 h);

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
