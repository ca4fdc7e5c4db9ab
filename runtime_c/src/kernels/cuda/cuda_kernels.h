/*
 * cuda_kernels.h — the CUDA kernels' launch interface (internal).
 *
 * The CUDA backend does not go through er_kernels: a decode step is a
 * sequence of device launches captured once as a CUDA graph, so the
 * forward pass (cuda/forward_cuda.*) calls these launchers directly on
 * one stream. Every launcher:
 *   - only enqueues work on `st` (no synchronisation, no allocation, no
 *     host-side reads of device memory), so it can be captured in a graph;
 *   - takes every per-step value that changes between steps (the position)
 *     as a DEVICE pointer, read by the kernels, so one captured graph stays
 *     valid for every step of a session;
 *   - takes its scratch memory from the caller (sized by the matching
 *     *_scratch_bytes function at plan time, carved from the device arena).
 * Launch errors surface through cudaGetLastError / the stream, checked by
 * the caller after the step.
 *
 * Weights live on the device in a per-row layout of this backend's choosing
 * (erk_row_bytes / erk_row_to_device): rows stay independent, so they are
 * converted and uploaded in row ranges through a small staging buffer.
 * Weight types are enum er_wtype (kernels.h); KV types ER_KV_F32/ER_KV_F16.
 * All float tensors are row-major, rows contiguous.
 */
#ifndef ER_CUDA_KERNELS_H
#define ER_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *erk_stream;   /* the same type as cudaStream_t */

/* ---- weight layout (host-side functions, callable without a GPU) ---- */

/* Bytes of one weight row of n_in elements in the device layout: a multiple
 * of 16 so every row starts 16-byte aligned. 0 if wtype/n_in is not
 * supported (n_in must be a multiple of the type's block). */
size_t erk_row_bytes(int wtype, int n_in);

/* Bytes of the same row in the GGUF layout (what erk_row_to_device reads;
 * the tests size their source rows with it). 0 for an unknown wtype. */
size_t erk_gguf_row_bytes(int wtype, int n_in);

/* Converts one row from the GGUF layout (src) into the device layout (dst,
 * erk_row_bytes bytes; padding zeroed). Pure host code. */
void erk_row_to_device(int wtype, const void *src, void *dst, int n_in);

/* Inverse for tests: device-layout row -> float values (host code). */
void erk_row_dequant_host(int wtype, const void *dev_row, float *dst, int n_in);

/* The same through the kernels' own element decoder compiled for the host
 * (tests: checks the device-side offsets without a device). */
void erk_row_decode_host(int wtype, const void *dev_row, float *dst, int n_in);

/* ---- linear layers ---- */

/* Scratch for erk_matmul with up to m_max rows of n_in_max inputs. */
size_t erk_matmul_scratch_bytes(int wtype, int m_max, int n_in_max);

/* y[b][r] (+)= dot(W row r, x row b) for b < m, r < n_out; w is n_out
 * device-layout rows of n_in. accumulate = 1 adds into y (the residual
 * connection fused into the output projections), 0 overwrites. m = 1 runs
 * the bandwidth-bound matvec; m > 1 the prefill matmul (tensor cores where
 * the GPU has them). */
void erk_matmul(erk_stream st, int wtype, const void *w, int n_in, int n_out, const float *x, int m, float *y,
                int accumulate, void *scratch);

/* x[b] = row ids[b] of the embedding table (device layout, n_embd wide). */
void erk_embed(erk_stream st, int wtype, const void *table, int n_embd, const int32_t *ids, int m, float *x);

/* ---- element-wise ---- */

/* y[b] = x[b] / rms(x[b]) * w over m rows of n (y may alias x). */
void erk_rmsnorm(erk_stream st, float *y, const float *x, const float *w, int m, int n, float eps);

/* y[b][i] += bias[i] over m rows of n (qwen2's QKV biases). */
void erk_bias_add(erk_stream st, float *y, const float *bias, int m, int n);

/* g = silu(g) * u over n elements. */
void erk_silu_mul(erk_stream st, float *g, const float *u, size_t n);

/* Rotary embedding in place on m rows (row stride row_stride floats) of
 * n_heads heads of head_dim; row b is at position pos[0] + b. neox as in
 * kernels.h: 0 rotates pairs (2i, 2i+1), 1 pairs (i, i + head_dim/2). */
void erk_rope(erk_stream st, float *x, int m, int row_stride, int n_heads, int head_dim, const int32_t *pos,
              float freq_base, int neox);

/* ---- attention ---- */

/* Stores m rows of k and v (kv_row floats each) at positions pos[0]..pos[0]+m-1
 * of one layer's caches ([n_ctx][kv_row] of kv_type). */
void erk_kv_store(erk_stream st, const float *k, const float *v, int m, int kv_row, void *k_cache, void *v_cache,
                  int kv_type, const int32_t *pos);

/* Scratch for erk_attention (split-K partial results for decode). */
size_t erk_attention_scratch_bytes(int m_max, int n_head, int head_dim, int n_ctx);

/* Causal attention for m query rows (n_head heads of head_dim each) over one
 * layer's caches: row b sees positions 0..pos[0]+b. GQA maps head h to KV
 * head h / (n_head / n_head_kv). Grids are sized by n_ctx, not by the live
 * length, so a captured graph serves every step; blocks past the live length
 * exit early. out has m rows of n_head*head_dim. */
void erk_attention(erk_stream st, float *out, const float *q, const void *k_cache, const void *v_cache, int kv_type,
                   int m, int n_head, int n_head_kv, int head_dim, int n_ctx, const int32_t *pos, float scale,
                   void *scratch);

/* ---- sampling ---- */

/* The penalised, temperature-scaled logits the CPU sampler (sampler.c)
 * ranks, computed the same way bit for bit: for each of the n_pen distinct
 * ids in pen_ids, v = v > 0 ? v / penalty : v * penalty; then, if
 * temperature > 0, v = v / temperature (IEEE division). */

/* Scratch for erk_argmax and erk_rank over n logits. */
size_t erk_sample_scratch_bytes(int n);

/* *out = the lowest id among the maxima of the penalised logits (greedy
 * sampling exactly as sampler.c; temperature is not applied). */
void erk_argmax(erk_stream st, const float *logits, int n, const int32_t *pen_ids, int n_pen, float penalty,
                int32_t *out, void *scratch);

/* Ranks all n penalised, temperature-scaled logits: vals/ids receive them
 * best first (higher value first, lower id on ties — sampler.c's order), so
 * the first k entries are top-k and top-p/min-p/the draw run on the host over
 * a prefix. temperature must be > 0. */
void erk_rank(erk_stream st, const float *logits, int n, const int32_t *pen_ids, int n_pen, float penalty,
              float temperature, float *vals, int32_t *ids, void *scratch);

#ifdef __cplusplus
}
#endif

#endif
