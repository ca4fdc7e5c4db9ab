/*
 * attention.cu — causal attention over one layer's KV caches.
 *
 * Decode (m = 1) is split-K ("flash decoding"): the context is cut into
 * ATT_SPLIT-position slices, block (head, slice) reduces its slice to a
 * partial (running max, sum of exponentials, unnormalised output) in
 * scratch, and a second kernel merges the live slices. Grids are sized by
 * n_ctx; slices past the live length (pos[0] + 1, read on the device) exit
 * at once, so one captured graph serves every step.
 *
 * Prefill (m > 1) runs one block per (head, query row) over the whole live
 * range and writes the output directly: no scratch, which would otherwise
 * grow with m * n_ctx.
 *
 * Inside a block each warp walks every ATT_WARPS-th position with an online
 * softmax (lanes split head_dim for the q.k dot and own head_dim/32 output
 * accumulators), then the warps' states are merged. Same maths as
 * generic/attention.c's two-pass softmax, in a different order: 1e-4
 * relative agreement, not bits.
 */
#include "kernels/cuda/erk_common.cuh"

extern "C" {
#include "edgerun.h" /* ER_KV_F16 */
}

#define ATT_SPLIT 128
#define ATT_WARPS 4
#define ATT_MAXD 256 /* head_dim limit: 8 accumulators per lane */

__device__ __forceinline__ float kv_at(const void *p, size_t i, bool f16) {
    return f16 ? __half2float(static_cast<const __half *>(p)[i]) : static_cast<const float *>(p)[i];
}

/* Live positions for query row b: 0..pos[0]+b, clamped into the cache. */
__device__ __forceinline__ int live_len(const int32_t *pos, int b, int n_ctx) {
    long long l = (long long)pos[0] + b + 1;
    return l < 0 ? 0 : (l > n_ctx ? n_ctx : (int)l);
}

template <bool F16>
__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attention(float *__restrict__ out, const float *__restrict__ q, const void *__restrict__ kc,
                const void *__restrict__ vc, int n_head, int n_head_kv, int hd, int n_ctx,
                const int32_t *__restrict__ pos, float scale, float *__restrict__ part, int n_split) {
    extern __shared__ float smem[];
    float *qs = smem;                         /* hd */
    float *ow = qs + hd;                      /* ATT_WARPS * hd */
    float *mw = ow + ATT_WARPS * hd;          /* ATT_WARPS */
    float *lw = mw + ATT_WARPS;               /* ATT_WARPS */
    const int h = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int L = live_len(pos, b, n_ctx);
    const int t0 = part ? split * ATT_SPLIT : 0;
    const int t1 = part ? min(t0 + ATT_SPLIT, L) : L;
    float *o = out + ((size_t)b * n_head + h) * hd;
    if (t0 >= t1) {
        /* a slice past the live length: the merge kernel skips it. With no
         * live position at all (a negative pos) the row is zeros, like the
         * CPU's softmax of an empty row. */
        if (!part)
            for (int d = threadIdx.x; d < hd; d += blockDim.x)
                o[d] = 0.0f;
        return; /* block-uniform */
    }
    const int kvh = h / (n_head / n_head_kv);
    const size_t kv_row = (size_t)n_head_kv * hd;
    const float *qr = q + ((size_t)b * n_head + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        qs[d] = qr[d];
    __syncthreads();

    float mx = -INFINITY, l = 0.0f, acc[ATT_MAXD / 32];
#pragma unroll
    for (int j = 0; j < ATT_MAXD / 32; j++)
        acc[j] = 0.0f;
    for (int t = t0 + warp; t < t1; t += ATT_WARPS) {
        const size_t base = (size_t)t * kv_row + (size_t)kvh * hd;
        float s = 0.0f;
        for (int d = lane; d < hd; d += 32)
            s += qs[d] * kv_at(kc, base + d, F16);
        s = scale * erk_warp_sum(s);
        const float nm = fmaxf(mx, s);
        const float corr = expf(mx - nm); /* mx = -inf on the first position: 0 */
        const float p = expf(s - nm);
        l = l * corr + p;
#pragma unroll
        for (int j = 0; j < ATT_MAXD / 32; j++) {
            const int d = lane + 32 * j;
            if (d < hd)
                acc[j] = acc[j] * corr + p * kv_at(vc, base + d, F16);
        }
        mx = nm;
    }
#pragma unroll
    for (int j = 0; j < ATT_MAXD / 32; j++) {
        const int d = lane + 32 * j;
        if (d < hd)
            ow[warp * hd + d] = acc[j];
    }
    if (lane == 0) {
        mw[warp] = mx;
        lw[warp] = l;
    }
    __syncthreads();
    /* warp 0 always saw position t0, so M is the max of real scores; a warp
     * that saw none has mx = -inf and weight expf(-inf) = 0 */
    float M = -INFINITY;
    for (int w = 0; w < ATT_WARPS; w++)
        M = fmaxf(M, mw[w]);
    float lsum = 0.0f;
    for (int w = 0; w < ATT_WARPS; w++)
        lsum += mw[w] == -INFINITY ? 0.0f : expf(mw[w] - M) * lw[w];
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++)
            v += mw[w] == -INFINITY ? 0.0f : expf(mw[w] - M) * ow[w * hd + d];
        if (part) {
            float *pp = part + ((size_t)h * n_split + split) * (hd + 2);
            pp[2 + d] = v;
            if (d == 0) {
                pp[0] = M;
                pp[1] = lsum;
            }
        } else {
            o[d] = v / lsum;
        }
    }
}

/* Merges the live slices of each head: grid n_head, threads over head_dim. */
__global__ void k_attention_merge(float *__restrict__ out, const float *__restrict__ part, int hd, int n_ctx,
                                  const int32_t *__restrict__ pos, int n_split) {
    const int h = blockIdx.x;
    const int L = live_len(pos, 0, n_ctx);
    const int live = (L + ATT_SPLIT - 1) / ATT_SPLIT;
    const float *ph = part + (size_t)h * n_split * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < live; s++)
        M = fmaxf(M, ph[(size_t)s * (hd + 2)]);
    float lsum = 0.0f;
    for (int s = 0; s < live; s++)
        lsum += expf(ph[(size_t)s * (hd + 2)] - M) * ph[(size_t)s * (hd + 2) + 1];
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        for (int s = 0; s < live; s++)
            v += expf(ph[(size_t)s * (hd + 2)] - M) * ph[(size_t)s * (hd + 2) + 2 + d];
        out[(size_t)h * hd + d] = live ? v / lsum : 0.0f;
    }
}

static int n_splits(int n_ctx) { return (n_ctx + ATT_SPLIT - 1) / ATT_SPLIT; }

extern "C" size_t erk_attention_scratch_bytes(int m_max, int n_head, int head_dim, int n_ctx) {
    (void)m_max; /* only decode (m = 1) uses scratch */
    if (n_head < 1 || head_dim < 1 || n_ctx < 1)
        return 0;
    return erk_align((size_t)n_head * n_splits(n_ctx) * (size_t)(head_dim + 2) * sizeof(float), 256);
}

extern "C" void erk_attention(erk_stream st, float *out, const float *q, const void *k_cache, const void *v_cache,
                              int kv_type, int m, int n_head, int n_head_kv, int head_dim, int n_ctx,
                              const int32_t *pos, float scale, void *scratch) {
    if (m < 1 || m > 65535 || n_head < 1 || n_head_kv < 1 || n_head % n_head_kv || head_dim < 1 ||
        head_dim > ATT_MAXD || n_ctx < 1)
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    const size_t shm = ((size_t)(ATT_WARPS + 1) * head_dim + 2 * ATT_WARPS) * sizeof(float);
    const bool f16 = kv_type == ER_KV_F16;
    if (m == 1) {
        const int ns = n_splits(n_ctx);
        float *part = static_cast<float *>(scratch);
        dim3 grid((unsigned)n_head, (unsigned)ns, 1);
        if (f16)
            k_attention<true><<<grid, ATT_WARPS * 32, shm, s>>>(out, q, k_cache, v_cache, n_head, n_head_kv,
                                                               head_dim, n_ctx, pos, scale, part, ns);
        else
            k_attention<false><<<grid, ATT_WARPS * 32, shm, s>>>(out, q, k_cache, v_cache, n_head, n_head_kv,
                                                                head_dim, n_ctx, pos, scale, part, ns);
        k_attention_merge<<<(unsigned)n_head, 128, 0, s>>>(out, part, head_dim, n_ctx, pos, ns);
    } else {
        dim3 grid((unsigned)n_head, 1, (unsigned)m);
        if (f16)
            k_attention<true><<<grid, ATT_WARPS * 32, shm, s>>>(out, q, k_cache, v_cache, n_head, n_head_kv,
                                                               head_dim, n_ctx, pos, scale, nullptr, 1);
        else
            k_attention<false><<<grid, ATT_WARPS * 32, shm, s>>>(out, q, k_cache, v_cache, n_head, n_head_kv,
                                                                head_dim, n_ctx, pos, scale, nullptr, 1);
    }
}
