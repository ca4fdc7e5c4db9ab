/*
 * embed.cu — token rows of the embedding table (device layout) as floats,
 * one thread per element, decoded by erk_deq: the CPU dequantizer's bits.
 * A negative id gives a zero row (ids are validated on the host before they
 * are uploaded; the table's row count is not known here).
 */
#include "kernels/cuda/erk_common.cuh"

template <int WT>
__global__ void k_embed(const uint8_t *__restrict__ table, size_t row_bytes, int n, const int32_t *__restrict__ ids,
                        int m, float *__restrict__ x) {
    const size_t total = (size_t)m * n;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(t / n), e = (int)(t % n);
        const int32_t id = ids[b];
        x[t] = id < 0 ? 0.0f : erk_deq(WT, table + (size_t)id * row_bytes, n, e);
    }
}

extern "C" void erk_embed(erk_stream st, int wtype, const void *table, int n_embd, const int32_t *ids, int m,
                          float *x) {
    const size_t rb = erk_row_bytes(wtype, n_embd);
    if (m < 1 || !rb)
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    const uint8_t *t = static_cast<const uint8_t *>(table);
    const size_t blocks = ((size_t)m * n_embd + 255) / 256;
    const unsigned g = (unsigned)(blocks < 65536 ? blocks : 65536);
    switch (wtype) {
    case ER_W_F32: k_embed<ER_W_F32><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_F16: k_embed<ER_W_F16><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_BF16: k_embed<ER_W_BF16><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_Q8_0: k_embed<ER_W_Q8_0><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_Q4_0: k_embed<ER_W_Q4_0><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_Q4_K: k_embed<ER_W_Q4_K><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_Q5_K: k_embed<ER_W_Q5_K><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    case ER_W_Q6_K: k_embed<ER_W_Q6_K><<<g, 256, 0, s>>>(t, rb, n_embd, ids, m, x); break;
    default: break;
    }
}
