/*
 * kv_store.cu — m rows of k and v into one layer's caches at positions
 * pos[0]..pos[0]+m-1 (read on the device, so the captured graph serves
 * every step). F16 caches round to nearest even, like er_f32_to_f16, so the
 * cached bits equal the CPU backend's. The caller keeps pos[0] + m <= n_ctx
 * (the host checks the position before every step); a negative position
 * stores nothing.
 */
#include "kernels/cuda/erk_common.cuh"

extern "C" {
#include "edgerun.h" /* ER_KV_F16 */
}

template <bool F16>
__global__ void k_kv_store(const float *__restrict__ k, const float *__restrict__ v, int m, int kv_row,
                           void *__restrict__ kc, void *__restrict__ vc, const int32_t *__restrict__ pos) {
    const size_t total = (size_t)m * kv_row;
    const int p0 = pos[0];
    if (p0 < 0)
        return;
    const size_t off = (size_t)p0 * kv_row;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
        if (F16) {
            static_cast<__half *>(kc)[off + t] = __float2half_rn(k[t]);
            static_cast<__half *>(vc)[off + t] = __float2half_rn(v[t]);
        } else {
            static_cast<float *>(kc)[off + t] = k[t];
            static_cast<float *>(vc)[off + t] = v[t];
        }
    }
}

extern "C" void erk_kv_store(erk_stream st, const float *k, const float *v, int m, int kv_row, void *k_cache,
                             void *v_cache, int kv_type, const int32_t *pos) {
    if (m < 1 || kv_row < 1)
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    const size_t blocks = ((size_t)m * kv_row + 255) / 256;
    const unsigned g = (unsigned)(blocks < 65536 ? blocks : 65536);
    if (kv_type == ER_KV_F16)
        k_kv_store<true><<<g, 256, 0, s>>>(k, v, m, kv_row, k_cache, v_cache, pos);
    else
        k_kv_store<false><<<g, 256, 0, s>>>(k, v, m, kv_row, k_cache, v_cache, pos);
}
