/*
 * rope.cu — rotary embedding in place. Frequencies as generic/rope.c
 * computes them (transformers' inv_freq in float, angle = pos * inv_freq in
 * float); the position comes from device memory (pos[0] + row) so a
 * captured graph serves every step.
 *
 * inv_freq is base^(2i/d) evaluated in double and rounded to float: within
 * an ulp of glibc's powf, where CUDA's float powf may be 2 ulp off — and at
 * position 1000 one ulp of inv_freq already turns the angle by 6e-5 rad.
 * Double is slow on Jetson (1/64 rate), so each block builds the table of
 * head_dim/2 frequencies once in shared memory and then walks rows.
 */
#include "kernels/cuda/erk_common.cuh"

#define ROPE_MAX_HALF 256 /* head_dim up to 512 */
#define ROPE_MAX_BLOCKS 64

__global__ void k_rope(float *__restrict__ x, int m, int row_stride, int n_heads, int head_dim,
                       const int32_t *__restrict__ pos, float freq_base, int neox) {
    __shared__ float inv_freq[ROPE_MAX_HALF];
    const int half = head_dim / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float e = (float)(2 * i) / (float)head_dim;
        inv_freq[i] = 1.0f / (float)pow((double)freq_base, (double)e);
    }
    __syncthreads();
    const int p0 = pos[0];
    for (int b = blockIdx.x; b < m; b += gridDim.x) {
        float *row = x + (size_t)b * row_stride;
        for (int t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
            const int i = t % half, h = t / half;
            const float theta = (float)(p0 + b) * inv_freq[i];
            const float c = cosf(theta), s = sinf(theta);
            float *v = row + (size_t)h * head_dim;
            const int ia = neox ? i : 2 * i;
            const int ib = neox ? i + half : 2 * i + 1;
            const float x0 = v[ia], x1 = v[ib];
            v[ia] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
            v[ib] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
        }
    }
}

extern "C" void erk_rope(erk_stream st, float *x, int m, int row_stride, int n_heads, int head_dim,
                         const int32_t *pos, float freq_base, int neox) {
    if (m < 1 || n_heads < 1 || head_dim < 2 || head_dim / 2 > ROPE_MAX_HALF)
        return;
    const unsigned blocks = (unsigned)(m < ROPE_MAX_BLOCKS ? m : ROPE_MAX_BLOCKS);
    k_rope<<<blocks, 256, 0, reinterpret_cast<cudaStream_t>(st)>>>(x, m, row_stride, n_heads, head_dim, pos,
                                                                   freq_base, neox);
}
