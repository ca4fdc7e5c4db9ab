/*
 * sample.cu — greedy argmax and the full ranking of the logits on the
 * device, reproducing sampler.c's order exactly.
 *
 * Both first apply the repetition penalty as sampler.c does: marks[] flags
 * every id in pen_ids (a duplicate id is still penalised once; ids outside
 * [0, n) are ignored), then v = v > 0 ? v / penalty : v * penalty — IEEE
 * division (this file must not be built with fast-math).
 *
 * argmax: sampler.c keeps `chosen` and replaces it when cp[i] > cp[chosen],
 * starting from 0. So the answer is 0 when cp[0] is NaN (nothing compares
 * greater than NaN); otherwise the lowest id among the maxima of the non-NaN
 * values, -0.0 and +0.0 being equal. The reduction orders candidates that
 * way (NaN below everything, ties to the lower id) and the final step
 * applies the cp[0]-is-NaN rule.
 *
 * rank: CUB's radix sort of 32-bit keys that order floats descending, over
 * ids given in ascending order; radix sorting is stable, so equal values
 * keep the lower id first — sampler.c's before(). -0.0 is keyed as +0.0
 * (they compare equal there), and NaN, which sampler.c's comparisons leave
 * unordered, is keyed last. vals are then gathered from the penalised
 * values, so they are the CPU's bits (signed zeros included).
 */
#include "kernels/cuda/erk_common.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <limits.h>

#define ARG_THREADS 256
#define ARG_MAX_BLOCKS 128

struct sample_scratch {
    uint8_t *marks;        /* n */
    unsigned *counter;     /* blocks done (argmax) */
    float *best_v;         /* ARG_MAX_BLOCKS */
    int32_t *best_i;       /* ARG_MAX_BLOCKS */
    float *pv;             /* n penalised (and tempered) values */
    uint32_t *keys_in;     /* n */
    uint32_t *keys_out;    /* n */
    int32_t *ids_in;       /* n */
    void *cub_temp;
};

/* Bytes of everything before cub_temp; carve() lays out the same sizes. */
static size_t fixed_bytes(int n) {
    return erk_align((size_t)n, 256) + 256 + 2 * erk_align(ARG_MAX_BLOCKS * 4, 256) + 4 * erk_align((size_t)n * 4, 256);
}

static sample_scratch carve(void *base, int n) {
    uint8_t *p = static_cast<uint8_t *>(base);
    sample_scratch s;
    size_t off = 0;
    const size_t nn = (size_t)n;
    s.marks = p + off;
    off += erk_align(nn, 256);
    s.counter = reinterpret_cast<unsigned *>(p + off);
    off += 256;
    s.best_v = reinterpret_cast<float *>(p + off);
    off += erk_align(ARG_MAX_BLOCKS * sizeof(float), 256);
    s.best_i = reinterpret_cast<int32_t *>(p + off);
    off += erk_align(ARG_MAX_BLOCKS * sizeof(int32_t), 256);
    s.pv = reinterpret_cast<float *>(p + off);
    off += erk_align(nn * 4, 256);
    s.keys_in = reinterpret_cast<uint32_t *>(p + off);
    off += erk_align(nn * 4, 256);
    s.keys_out = reinterpret_cast<uint32_t *>(p + off);
    off += erk_align(nn * 4, 256);
    s.ids_in = reinterpret_cast<int32_t *>(p + off);
    off += erk_align(nn * 4, 256);
    s.cub_temp = p + off;
    return s;
}

/* CUB's temporary storage for sorting n pairs on the current device; 0 and
 * the error cleared when there is no device to ask. */
static size_t cub_temp_bytes(int n) {
    size_t bytes = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t *>(nullptr),
                                                    static_cast<uint32_t *>(nullptr),
                                                    static_cast<const int32_t *>(nullptr),
                                                    static_cast<int32_t *>(nullptr), n, 0, 32, (cudaStream_t)0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return bytes;
}

extern "C" size_t erk_sample_scratch_bytes(int n) {
    if (n < 1)
        return 0;
    /* erk_rank hands CUB the size CUB asks for at launch time, which must
     * fit what was planned here: the larger of this device's answer and a
     * generous bound (CUB's double buffers plus 1 MiB of histograms and tile
     * state) also covers a plan made without a device, or on a different
     * device than the one that runs the sort. */
    const size_t bound = 2 * erk_align((size_t)n * 8, 256) + ((size_t)1 << 20);
    const size_t cub = cub_temp_bytes(n);
    return fixed_bytes(n) + erk_align(cub > bound ? cub : bound, 256);
}

__global__ void k_mark(uint8_t *__restrict__ marks, int n, const int32_t *__restrict__ pen_ids, int n_pen) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n_pen; j += gridDim.x * blockDim.x) {
        const int32_t id = pen_ids[j];
        if (id >= 0 && id < n)
            marks[id] = 1;
    }
}

__device__ __forceinline__ float penalised(float v, bool marked, float penalty) {
    if (!marked)
        return v;
    return v > 0.0f ? v / penalty : v * penalty;
}

/* a ranks above b for argmax: NaN lowest, ties to the lower id */
__device__ __forceinline__ bool arg_better(float av, int ai, float bv, int bi) {
    if (isnan(av))
        return isnan(bv) && ai < bi;
    return isnan(bv) || av > bv || (av == bv && ai < bi);
}

__device__ void block_best(float &v, int &i) {
    __shared__ float sv[ARG_THREADS / 32];
    __shared__ int si[ARG_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(ERK_FULL, v, o);
        const int oi = __shfl_xor_sync(ERK_FULL, i, o);
        if (arg_better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
    if (threadIdx.x % 32 == 0) {
        sv[threadIdx.x / 32] = v;
        si[threadIdx.x / 32] = i;
    }
    __syncthreads();
    v = sv[0];
    i = si[0];
    for (int w = 1; w < ARG_THREADS / 32; w++)
        if (arg_better(sv[w], si[w], v, i)) {
            v = sv[w];
            i = si[w];
        }
    __syncthreads(); /* sv/si may be reused by a second call */
}

__global__ void __launch_bounds__(ARG_THREADS)
    k_argmax(const float *__restrict__ logits, int n, const uint8_t *__restrict__ marks, float penalty,
             float *best_v, int32_t *best_i, unsigned *counter, int32_t *out) {
    __shared__ bool last;
    float v = NAN;
    int idx = INT_MAX;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float x = penalised(logits[i], marks[i] != 0, penalty);
        if (arg_better(x, i, v, idx)) {
            v = x;
            idx = i;
        }
    }
    block_best(v, idx);
    if (threadIdx.x == 0) {
        best_v[blockIdx.x] = v;
        best_i[blockIdx.x] = idx;
        __threadfence(); /* partial visible before the count says so */
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return; /* block-uniform: `last` is shared */
    __threadfence();
    v = NAN;
    idx = INT_MAX;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) {
        const float bv = *(volatile float *)&best_v[b];
        const int bi = *(volatile int32_t *)&best_i[b];
        if (arg_better(bv, bi, v, idx)) {
            v = bv;
            idx = bi;
        }
    }
    block_best(v, idx);
    if (threadIdx.x == 0) {
        const float v0 = penalised(logits[0], marks[0] != 0, penalty);
        *out = (isnan(v0) || isnan(v) || idx == INT_MAX) ? 0 : idx;
        *counter = 0u;
    }
}

static unsigned arg_blocks(int n) {
    const int per = ARG_THREADS * 8;
    const int b = (n + per - 1) / per;
    return (unsigned)(b < 1 ? 1 : (b > ARG_MAX_BLOCKS ? ARG_MAX_BLOCKS : b));
}

static void prepare_marks(cudaStream_t st, const sample_scratch &s, int n, const int32_t *pen_ids, int n_pen) {
    /* the counter is zeroed with the marks: both sit at the start */
    cudaMemsetAsync(s.marks, 0, erk_align((size_t)n, 256) + 256, st);
    if (n_pen > 0 && pen_ids) {
        const int blocks = (n_pen + 255) / 256;
        k_mark<<<(unsigned)(blocks < 1024 ? blocks : 1024), 256, 0, st>>>(s.marks, n, pen_ids, n_pen);
    }
}

extern "C" void erk_argmax(erk_stream st, const float *logits, int n, const int32_t *pen_ids, int n_pen,
                           float penalty, int32_t *out, void *scratch) {
    if (n < 1)
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    const sample_scratch sc = carve(scratch, n);
    prepare_marks(s, sc, n, pen_ids, n_pen);
    k_argmax<<<arg_blocks(n), ARG_THREADS, 0, s>>>(logits, n, sc.marks, penalty, sc.best_v, sc.best_i, sc.counter,
                                                   out);
}

__global__ void k_rank_keys(const float *__restrict__ logits, int n, const uint8_t *__restrict__ marks,
                            float penalty, float temperature, float *__restrict__ pv, uint32_t *__restrict__ keys,
                            int32_t *__restrict__ ids) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = penalised(logits[i], marks[i] != 0, penalty) / temperature;
        pv[i] = v;
        ids[i] = i;
        uint32_t key;
        if (isnan(v)) {
            key = 0xffffffffu;
        } else {
            const uint32_t bits = __float_as_uint(v == 0.0f ? 0.0f : v);
            const uint32_t asc = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
            key = ~asc;
        }
        keys[i] = key;
    }
}

__global__ void k_gather(const float *__restrict__ pv, const int32_t *__restrict__ ids, int n,
                         float *__restrict__ vals) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        vals[i] = ids[i] >= 0 && ids[i] < n ? pv[ids[i]] : NAN; /* -1: the sort did not run */
}

extern "C" void erk_rank(erk_stream st, const float *logits, int n, const int32_t *pen_ids, int n_pen,
                         float penalty, float temperature, float *vals, int32_t *ids, void *scratch) {
    if (n < 1)
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    const sample_scratch sc = carve(scratch, n);
    prepare_marks(s, sc, n, pen_ids, n_pen);
    const int blocks = (n + 255) / 256;
    const unsigned g = (unsigned)(blocks < 4096 ? blocks : 4096);
    k_rank_keys<<<g, 256, 0, s>>>(logits, n, sc.marks, penalty, temperature, sc.pv, sc.keys_in, sc.ids_in);
    size_t temp = cub_temp_bytes(n);
    /* CUB refuses (without launching, and without an error the caller's
     * cudaGetLastError would see) when it cannot run, e.g. temp storage too
     * small: ids of -1 then tell the host the ranking is missing */
    if (!temp || cub::DeviceRadixSort::SortPairs(sc.cub_temp, temp, sc.keys_in, sc.keys_out, sc.ids_in, ids, n, 0,
                                                 32, s) != cudaSuccess)
        cudaMemsetAsync(ids, 0xff, (size_t)n * sizeof(int32_t), s);
    k_gather<<<g, 256, 0, s>>>(sc.pv, ids, n, vals);
}
