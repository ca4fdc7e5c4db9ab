/*
 * test_cuda_kernels.cu — every erk_* launcher against the generic CPU
 * kernels on random data. Exits 77 (meson: skipped) when there is no GPU.
 *
 * Tolerances, and why:
 *  - matmul, m = 1, integer kernels (Q8_0, Q4_0, Q4_K; x quantized in shared
 *    memory, or through the scratch for rows wider than 32768): the activations are
 *    quantized the CPU's way, so (a) the result must be within the
 *    activation-quantization bound of the exact f32 dot of the dequantized
 *    weights: sum_k |W_k| * 0.6 * amax(block of x_k) / 127 (half a quantum,
 *    plus Q8_0's f16 rounding of the scale), plus float noise; and (b) it
 *    must equal the CPU's own quantized dot up to float summation order
 *    (2e-5 of sum |W x|), which checks the integers are the CPU's.
 *  - matmul, m = 1, float kernels: 1e-5 of sum |W x| (summation order only).
 *  - matmul, m > 1 (tensor cores, f16 operands): 2e-3 of sum |W x|; F32
 *    weights (kept in f32 by the simple kernel): 1e-5.
 *  - embed: bit-exact against dequant_row; kv_store: bit-exact.
 *  - rmsnorm, rope, silu_mul, attention: 1e-4 of the largest reference
 *    magnitude in the row/head.
 *  - argmax/rank: exactly sampler.c's order (host reimplementation), ties,
 *    signed zeros, NaN and the repetition penalty included.
 * A captured CUDA graph replayed at two positions checks that the launchers
 * are capturable and read the position from device memory.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "edgerun.h"
#include "kernels/kernels.h"
}
#include "kernels/cuda/cuda_kernels.h"
#include "test_util.h"

/* The weight types the CUDA backend lays out and computes with: F32 .. Q6_K.
 * The later ones (Q4_1 .. Q2_K, issue 25) have no device layout yet, and
 * er_cuda_plan refuses a file that holds them, naming the tensor. */
enum { N_CUDA_W = ER_W_Q6_K + 1 };

#define CK(call)                                                                                      \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

static cudaStream_t g_st;
static const er_kernels *gen;

/* ---- small helpers ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float randf() { return (float)((double)next_u32() / 4294967296.0 * 2.0 - 1.0); } /* [-1, 1) */

template <typename T> static T *dalloc(size_t count) {
    void *p = nullptr;
    CK(cudaMalloc(&p, count * sizeof(T) + 16));
    CK(cudaMemset(p, 0, count * sizeof(T) + 16));
    return static_cast<T *>(p);
}
template <typename T> static void up(T *d, const T *h, size_t count) {
    CK(cudaMemcpy(d, h, count * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T> static void down(T *h, const T *d, size_t count) {
    CK(cudaMemcpy(h, d, count * sizeof(T), cudaMemcpyDeviceToHost));
}
static void sync_check(const char *what) {
    CK(cudaGetLastError());
    cudaError_t e = cudaStreamSynchronize(g_st);
    if (e != cudaSuccess) {
        fprintf(stderr, "FATAL: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static const char *wname[ER_W_COUNT] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};

static er_f16 small_scale(float lo, float hi) { return er_f32_to_f16(lo + (hi - lo) * (randf() * 0.5f + 0.5f)); }

/* One random, well-formed GGUF row (finite scales of realistic size). */
static void random_row(int w, uint8_t *dst, int n) {
    switch (w) {
    case ER_W_F32:
        for (int i = 0; i < n; i++) {
            float v = randf() * 0.1f;
            memcpy(dst + 4 * (size_t)i, &v, 4);
        }
        return;
    case ER_W_F16:
        for (int i = 0; i < n; i++) {
            er_f16 h = er_f32_to_f16(randf() * 0.1f);
            memcpy(dst + 2 * (size_t)i, &h, 2);
        }
        return;
    case ER_W_BF16:
        for (int i = 0; i < n; i++) {
            float v = randf() * 0.1f;
            uint32_t b;
            memcpy(&b, &v, 4);
            er_bf16 h = (er_bf16)(b >> 16);
            memcpy(dst + 2 * (size_t)i, &h, 2);
        }
        return;
    default: break;
    }
    /* quantized: random quant bytes everywhere, then sane scales */
    const size_t rb = erk_gguf_row_bytes(w, n);
    for (size_t i = 0; i < rb; i++)
        dst[i] = (uint8_t)next_u32();
    switch (w) {
    case ER_W_Q8_0:
        for (int i = 0; i < n / 32; i++) {
            er_block_q8_0 *b = reinterpret_cast<er_block_q8_0 *>(dst) + i;
            b->d = small_scale(0.0005f, 0.002f);
            for (int j = 0; j < 32; j++)
                if (b->qs[j] == -128)
                    b->qs[j] = -127; /* llama.cpp never writes -128 */
        }
        return;
    case ER_W_Q4_0:
        for (int i = 0; i < n / 32; i++)
            (reinterpret_cast<er_block_q4_0 *>(dst) + i)->d = small_scale(0.005f, 0.02f);
        return;
    case ER_W_Q4_K:
        for (int i = 0; i < n / 256; i++) {
            er_block_q4_k *b = reinterpret_cast<er_block_q4_k *>(dst) + i;
            b->d = small_scale(0.0002f, 0.001f);
            b->dmin = small_scale(0.0002f, 0.001f);
        }
        return;
    case ER_W_Q5_K:
        for (int i = 0; i < n / 256; i++) {
            er_block_q5_k *b = reinterpret_cast<er_block_q5_k *>(dst) + i;
            b->d = small_scale(0.0001f, 0.0005f);
            b->dmin = small_scale(0.0001f, 0.0005f);
        }
        return;
    case ER_W_Q6_K:
        for (int i = 0; i < n / 256; i++) {
            er_block_q6_k *b = reinterpret_cast<er_block_q6_k *>(dst) + i;
            b->d = small_scale(0.00005f, 0.0002f);
            for (int j = 0; j < 16; j++)
                if (b->scales[j] == -128)
                    b->scales[j] = -127;
        }
        return;
    default: return;
    }
}

/* Uploads n_rows random rows in the device layout; fills raw (GGUF) too. */
static uint8_t *make_weights(int w, int n, int rows, std::vector<uint8_t> &raw) {
    const size_t gb = erk_gguf_row_bytes(w, n), db = erk_row_bytes(w, n);
    raw.assign(gb * rows, 0);
    std::vector<uint8_t> dev(db * rows);
    for (int r = 0; r < rows; r++) {
        random_row(w, raw.data() + gb * r, n);
        erk_row_to_device(w, raw.data() + gb * r, dev.data() + db * r, n);
    }
    uint8_t *d = dalloc<uint8_t>(dev.size());
    up(d, dev.data(), dev.size());
    return d;
}

static int is_int_path(int w) { return w == ER_W_Q8_0 || w == ER_W_Q4_0 || w == ER_W_Q4_K; }

/* ---- matmul ---- */

static void test_matmul_case(int w, int n, int n_out, int m, int acc) {
    std::vector<uint8_t> raw;
    uint8_t *dw = make_weights(w, n, n_out, raw);
    const size_t gb = erk_gguf_row_bytes(w, n);
    std::vector<float> W((size_t)n_out * n), x((size_t)m * n), y0((size_t)m * n_out), y((size_t)m * n_out);
    for (int r = 0; r < n_out; r++)
        gen->dequant_row[w](raw.data() + gb * r, W.data() + (size_t)r * n, n);
    for (auto &v : x)
        v = randf() * 2.0f;
    /* a few outliers so some blocks' quantum is coarse */
    for (int b = 0; b < m; b++)
        x[(size_t)b * n + (next_u32() % n)] = 8.0f;
    for (auto &v : y0)
        v = randf();
    float *dx = dalloc<float>(x.size()), *dy = dalloc<float>(y.size());
    up(dx, x.data(), x.size());
    up(dy, y0.data(), y0.size());
    const size_t sb = erk_matmul_scratch_bytes(w, m, n);
    CHECK(sb > 0, "%s: no scratch size", wname[w]);
    uint8_t *scratch = dalloc<uint8_t>(sb);
    erk_matmul((erk_stream)g_st, w, dw, n, n_out, dx, m, dy, acc, scratch);
    sync_check("erk_matmul");
    down(y.data(), dy, y.size());

    /* the CPU's quantized activations, for the integer-path identity check */
    const int ak = gen->act_kind[w];
    std::vector<uint8_t> xq(er_act_row_bytes(ak, n) + 64);
    int bad = 0;
    for (int b = 0; b < m && bad < 5; b++) {
        const float *xb = x.data() + (size_t)b * n;
        if (ak == ER_ACT_Q8_0)
            gen->quantize_row_q8_0(xb, xq.data(), n);
        else if (ak == ER_ACT_Q8_K)
            gen->quantize_row_q8_k(xb, xq.data(), n);
        const int qblk = ak == ER_ACT_Q8_K ? 256 : 32;
        for (int r = 0; r < n_out && bad < 5; r++) {
            const float *wr = W.data() + (size_t)r * n;
            double ref = 0.0, mag = 0.0, qbound = 0.0;
            for (int k0 = 0; k0 < n; k0 += qblk) {
                const int k1 = std::min(n, k0 + qblk);
                double amax = 0.0, wsum = 0.0;
                for (int k = k0; k < k1; k++) {
                    ref += (double)wr[k] * xb[k];
                    mag += fabs((double)wr[k] * xb[k]);
                    amax = std::max(amax, fabs((double)xb[k]));
                    wsum += fabs((double)wr[k]);
                }
                qbound += wsum * 0.6 * amax / 127.0;
            }
            const double base = acc ? (double)y0[(size_t)b * n_out + r] : 0.0;
            const double got = (double)y[(size_t)b * n_out + r] - base;
            double tol;
            if (m > 1 && w != ER_W_F32)
                tol = 2e-3 * mag + 1e-6; /* tensor cores, f16 operands */
            else if (m > 1)
                tol = 1e-5 * mag + 1e-6; /* F32 weights stay in f32 */
            else if (is_int_path(w))
                tol = qbound + 1e-5 * mag + 1e-6;
            else
                tol = 1e-5 * mag + 1e-6;
            /* the accumulate add itself rounds once at |y| */
            tol += acc ? 1e-6 * fabs(base) : 0.0;
            if (!(fabs(got - ref) <= tol)) {
                bad++;
                CHECK(0, "%s n=%d n_out=%d m=%d acc=%d: y[%d][%d] = %.7g, f32 ref %.7g (tol %.3g)", wname[w], n,
                      n_out, m, acc, b, r, got, ref, tol);
            }
            if (m == 1 && is_int_path(w)) {
                const float cpu = gen->vec_dot[w](n, raw.data() + gb * r, xq.data());
                const double t2 = 2e-5 * mag + 1e-6 + (acc ? 1e-6 * fabs(base) : 0.0);
                if (!(fabs(got - (double)cpu) <= t2)) {
                    bad++;
                    CHECK(0, "%s n=%d n_out=%d: y[%d] = %.7g, CPU quantized dot %.7g (tol %.3g)", wname[w], n,
                          n_out, r, got, (double)cpu, t2);
                }
            }
        }
    }
    CHECK(bad == 0, "%s n=%d n_out=%d m=%d acc=%d: %d mismatches (first shown)", wname[w], n, n_out, m, acc, bad);
    CK(cudaFree(dw));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    CK(cudaFree(scratch));
}

static void test_matmul() {
    const int shapes[][2] = {{768, 97}, {512, 64}, {2048, 33}, {256, 130}};
    const int ms[] = {1, 2, 7, 64};
    for (int w = 0; w < N_CUDA_W; w++) {
        for (auto &s : shapes)
            for (int m : ms)
                test_matmul_case(w, s[0], s[1], m, 0);
        test_matmul_case(w, 768, 50, 1, 1);
        test_matmul_case(w, 768, 50, 7, 1);
    }
    /* tall matrices: the integer matvecs give each warp 2 (n_out >= 4096)
     * and 4 (>= 16384, the vocabulary projection) rows; partial last blocks */
    for (int w : {ER_W_Q8_0, ER_W_Q4_0, ER_W_Q4_K})
        for (int n_out : {4101, 16390})
            test_matmul_case(w, 256, n_out, 1, 0);
    /* decode rows too wide to quantize in shared memory: the scratch path */
    for (int w : {ER_W_Q8_0, ER_W_Q4_0, ER_W_Q4_K})
        test_matmul_case(w, 33024, 5, 1, 0);
    /* float types at a width the vector kernels cannot take */
    for (int w : {ER_W_F32, ER_W_F16, ER_W_BF16})
        for (int m : {1, 3})
            test_matmul_case(w, 100, 21, m, 0);
}

/* ---- embed ---- */

static void test_embed() {
    const int n = 512, rows = 37, m = 6;
    for (int w = 0; w < N_CUDA_W; w++) {
        std::vector<uint8_t> raw;
        uint8_t *dt = make_weights(w, n, rows, raw);
        const int32_t ids[m] = {0, 36, 5, 5, -1, 17};
        int32_t *did = dalloc<int32_t>(m);
        up(did, ids, m);
        float *dx = dalloc<float>((size_t)m * n);
        erk_embed((erk_stream)g_st, w, dt, n, did, m, dx);
        sync_check("erk_embed");
        std::vector<float> got((size_t)m * n), ref(n);
        down(got.data(), dx, got.size());
        for (int b = 0; b < m; b++) {
            if (ids[b] < 0) {
                std::fill(ref.begin(), ref.end(), 0.0f);
            } else {
                gen->dequant_row[w](raw.data() + erk_gguf_row_bytes(w, n) * ids[b], ref.data(), n);
            }
            CHECK(memcmp(ref.data(), got.data() + (size_t)b * n, n * sizeof(float)) == 0,
                  "%s: embedded row %d (id %d) differs from dequant_row", wname[w], b, ids[b]);
        }
        CK(cudaFree(dt));
        CK(cudaFree(did));
        CK(cudaFree(dx));
    }
}

/* ---- element-wise ---- */

static double max_abs(const float *v, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = std::max(m, fabs((double)v[i]));
    return m;
}

/* |got - ref| <= rel * max|ref| over each group of `group` elements */
static int close_groups(const float *got, const float *ref, size_t n, size_t group, double rel, const char *what) {
    int bad = 0;
    for (size_t g0 = 0; g0 < n; g0 += group) {
        const size_t g1 = std::min(n, g0 + group);
        const double scale = std::max(max_abs(ref + g0, g1 - g0), 1e-30);
        for (size_t i = g0; i < g1; i++)
            if (!(fabs((double)got[i] - ref[i]) <= rel * scale)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s[%zu]: %.8g vs ref %.8g\n", what, i, (double)got[i], (double)ref[i]);
            }
    }
    return bad;
}

static void test_rmsnorm() {
    for (int n : {768, 100, 4096}) {
        const int m = 3;
        std::vector<float> x((size_t)m * n), w(n), ref((size_t)m * n), got((size_t)m * n);
        for (auto &v : x)
            v = randf() * 3.0f;
        for (auto &v : w)
            v = randf() + 1.0f;
        for (int b = 0; b < m; b++)
            gen->rmsnorm(ref.data() + (size_t)b * n, x.data() + (size_t)b * n, w.data(), n, 1e-5f);
        float *dx = dalloc<float>(x.size()), *dw = dalloc<float>(n), *dy = dalloc<float>(x.size());
        up(dx, x.data(), x.size());
        up(dw, w.data(), n);
        erk_rmsnorm((erk_stream)g_st, dy, dx, dw, m, n, 1e-5f);
        sync_check("erk_rmsnorm");
        down(got.data(), dy, got.size());
        CHECK(close_groups(got.data(), ref.data(), got.size(), n, 1e-4, "rmsnorm") == 0, "rmsnorm n=%d", n);
        /* in place (y aliases x) */
        erk_rmsnorm((erk_stream)g_st, dx, dx, dw, m, n, 1e-5f);
        sync_check("erk_rmsnorm in place");
        down(got.data(), dx, got.size());
        CHECK(close_groups(got.data(), ref.data(), got.size(), n, 1e-4, "rmsnorm/in-place") == 0,
              "rmsnorm in place n=%d", n);
        CK(cudaFree(dx));
        CK(cudaFree(dw));
        CK(cudaFree(dy));
    }
}

static void test_bias_silu() {
    const int m = 4, n = 900;
    std::vector<float> y((size_t)m * n), bias(n), got(y.size());
    for (auto &v : y)
        v = randf();
    for (auto &v : bias)
        v = randf();
    float *dy = dalloc<float>(y.size()), *db = dalloc<float>(n);
    up(dy, y.data(), y.size());
    up(db, bias.data(), n);
    erk_bias_add((erk_stream)g_st, dy, db, m, n);
    sync_check("erk_bias_add");
    down(got.data(), dy, got.size());
    int bad = 0;
    for (int b = 0; b < m; b++)
        for (int i = 0; i < n; i++)
            bad += got[(size_t)b * n + i] != y[(size_t)b * n + i] + bias[i];
    CHECK(bad == 0, "bias_add: %d elements differ", bad);

    const size_t cnt = 10007;
    std::vector<float> g(cnt), u(cnt), ref, out(cnt);
    for (size_t i = 0; i < cnt; i++) {
        g[i] = randf() * 12.0f;
        u[i] = randf() * 2.0f;
    }
    g[0] = -100.0f; /* e^-g = inf: the quotient is -0 */
    ref = g;
    gen->silu_mul(ref.data(), u.data(), (int)cnt);
    float *dg = dalloc<float>(cnt), *du = dalloc<float>(cnt);
    up(dg, g.data(), cnt);
    up(du, u.data(), cnt);
    erk_silu_mul((erk_stream)g_st, dg, du, cnt);
    sync_check("erk_silu_mul");
    down(out.data(), dg, cnt);
    bad = 0;
    for (size_t i = 0; i < cnt; i++)
        if (!(fabs((double)out[i] - ref[i]) <= 1e-4 * std::max(1e-3, fabs((double)ref[i])))) {
            if (bad++ < 3)
                fprintf(stderr, "  silu_mul[%zu]: %.8g vs %.8g\n", i, (double)out[i], (double)ref[i]);
        }
    CHECK(bad == 0, "silu_mul: %d elements off by more than 1e-4 relative", bad);
    CK(cudaFree(dy));
    CK(cudaFree(db));
    CK(cudaFree(dg));
    CK(cudaFree(du));
}

static void test_rope() {
    struct {
        int n_heads, hd, pos, neox;
        float base;
    } cases[] = {{4, 64, 0, 0, 10000.0f}, {4, 64, 5, 0, 10000.0f}, {2, 128, 300, 1, 1000000.0f},
                 {3, 64, 600, 1, 10000.0f}, {2, 32, 77, 0, 500000.0f}};
    for (auto &c : cases) {
        const int m = 3, row_stride = c.n_heads * c.hd + 40; /* rows inside a wider (qkv) buffer */
        std::vector<float> x((size_t)m * row_stride), ref, got(x.size());
        for (auto &v : x)
            v = randf();
        ref = x;
        for (int b = 0; b < m; b++)
            gen->rope(ref.data() + (size_t)b * row_stride, c.n_heads, c.hd, c.pos + b, c.base, c.neox);
        float *dx = dalloc<float>(x.size());
        int32_t *dpos = dalloc<int32_t>(1);
        up(dx, x.data(), x.size());
        up(dpos, &c.pos, 1);
        erk_rope((erk_stream)g_st, dx, m, row_stride, c.n_heads, c.hd, dpos, c.base, c.neox);
        sync_check("erk_rope");
        down(got.data(), dx, got.size());
        CHECK(close_groups(got.data(), ref.data(), got.size(), row_stride, 1e-4, "rope") == 0,
              "rope heads=%d hd=%d pos=%d neox=%d", c.n_heads, c.hd, c.pos, c.neox);
        int pad_same = 1;
        for (int b = 0; b < m; b++)
            for (int i = c.n_heads * c.hd; i < row_stride; i++)
                pad_same &= got[(size_t)b * row_stride + i] == x[(size_t)b * row_stride + i];
        CHECK(pad_same, "rope wrote outside its heads");
        CK(cudaFree(dx));
        CK(cudaFree(dpos));
    }
}

/* ---- KV store and attention ---- */

static void test_kv_store() {
    for (int kv_type : {ER_KV_F32, ER_KV_F16}) {
        const int n_ctx = 50, kv_row = 96, m = 5, pos = 17;
        const size_t esz = kv_type == ER_KV_F16 ? 2 : 4;
        std::vector<float> k((size_t)m * kv_row), v(k.size());
        for (auto &t : k)
            t = randf() * 5.0f;
        for (auto &t : v)
            t = randf() * 5.0f;
        std::vector<uint8_t> kc((size_t)n_ctx * kv_row * esz, 0x5a), vc(kc.size(), 0x5a);
        std::vector<uint8_t> kref = kc, vref = vc;
        for (int b = 0; b < m; b++)
            for (int j = 0; j < kv_row; j++) {
                const size_t i = (size_t)(pos + b) * kv_row + j, s = (size_t)b * kv_row + j;
                if (kv_type == ER_KV_F16) {
                    er_f16 hk = er_f32_to_f16(k[s]), hv = er_f32_to_f16(v[s]);
                    memcpy(&kref[i * 2], &hk, 2);
                    memcpy(&vref[i * 2], &hv, 2);
                } else {
                    memcpy(&kref[i * 4], &k[s], 4);
                    memcpy(&vref[i * 4], &v[s], 4);
                }
            }
        float *dk = dalloc<float>(k.size()), *dv = dalloc<float>(v.size());
        uint8_t *dkc = dalloc<uint8_t>(kc.size()), *dvc = dalloc<uint8_t>(vc.size());
        int32_t *dpos = dalloc<int32_t>(1);
        up(dk, k.data(), k.size());
        up(dv, v.data(), v.size());
        up(dkc, kc.data(), kc.size());
        up(dvc, vc.data(), vc.size());
        up(dpos, &pos, 1);
        erk_kv_store((erk_stream)g_st, dk, dv, m, kv_row, dkc, dvc, kv_type, dpos);
        sync_check("erk_kv_store");
        down(kc.data(), dkc, kc.size());
        down(vc.data(), dvc, vc.size());
        CHECK(kc == kref, "kv_store type %d: K cache differs (bits)", kv_type);
        CHECK(vc == vref, "kv_store type %d: V cache differs (bits)", kv_type);
        CK(cudaFree(dk));
        CK(cudaFree(dv));
        CK(cudaFree(dkc));
        CK(cudaFree(dvc));
        CK(cudaFree(dpos));
    }
}

struct kv_caches {
    std::vector<uint8_t> k, v; /* host copies, kv_type elements */
    uint8_t *dk, *dv;
};

static kv_caches make_caches(int kv_type, int n_ctx, int kv_row) {
    kv_caches c;
    const size_t count = (size_t)n_ctx * kv_row, esz = kv_type == ER_KV_F16 ? 2 : 4;
    c.k.resize(count * esz);
    c.v.resize(count * esz);
    for (size_t i = 0; i < count; i++) {
        const float a = randf(), b = randf();
        if (kv_type == ER_KV_F16) {
            er_f16 ha = er_f32_to_f16(a), hb = er_f32_to_f16(b);
            memcpy(&c.k[2 * i], &ha, 2);
            memcpy(&c.v[2 * i], &hb, 2);
        } else {
            memcpy(&c.k[4 * i], &a, 4);
            memcpy(&c.v[4 * i], &b, 4);
        }
    }
    c.dk = dalloc<uint8_t>(c.k.size());
    c.dv = dalloc<uint8_t>(c.v.size());
    up(c.dk, c.k.data(), c.k.size());
    up(c.dv, c.v.data(), c.v.size());
    return c;
}

/* out[b][h] by the generic kernel: row b sees positions 0..pos+b */
static void attention_ref(std::vector<float> &out, const std::vector<float> &q, const kv_caches &c, int kv_type,
                          int m, int n_head, int n_head_kv, int hd, int pos, float scale) {
    const size_t esz = kv_type == ER_KV_F16 ? 2 : 4, kv_row = (size_t)n_head_kv * hd;
    std::vector<float> scores((size_t)pos + m + 1);
    out.assign((size_t)m * n_head * hd, 0.0f);
    for (int b = 0; b < m; b++)
        for (int h = 0; h < n_head; h++) {
            const int kvh = h / (n_head / n_head_kv);
            gen->attention(out.data() + ((size_t)b * n_head + h) * hd, q.data() + ((size_t)b * n_head + h) * hd,
                           c.k.data() + kvh * hd * esz, c.v.data() + kvh * hd * esz, kv_type, kv_row, pos + b + 1,
                           hd, scale, scores.data());
        }
}

static void test_attention() {
    struct {
        int n_head, n_head_kv, hd, n_ctx;
    } shapes[] = {{8, 2, 64, 300}, {4, 4, 128, 260}, {6, 3, 96, 129}};
    for (auto &s : shapes)
        for (int kv_type : {ER_KV_F32, ER_KV_F16}) {
            const kv_caches c = make_caches(kv_type, s.n_ctx, s.n_head_kv * s.hd);
            const float scale = 1.0f / sqrtf((float)s.hd);
            const size_t sb = erk_attention_scratch_bytes(64, s.n_head, s.hd, s.n_ctx);
            uint8_t *scratch = dalloc<uint8_t>(sb);
            struct {
                int m, pos;
            } runs[] = {{1, 0},   {1, 1},   {1, 126}, {1, 127}, {1, 128}, {1, 129}, {1, 255},
                        {1, 256}, {2, 126}, {7, 120}, {7, 0},   {64, 0},  {64, 60}};
            for (auto &r : runs) {
                if (r.pos + r.m > s.n_ctx)
                    continue;
                std::vector<float> q((size_t)r.m * s.n_head * s.hd), ref, got(q.size());
                for (auto &v : q)
                    v = randf() * 4.0f; /* peaky softmax */
                attention_ref(ref, q, c, kv_type, r.m, s.n_head, s.n_head_kv, s.hd, r.pos, scale);
                float *dq = dalloc<float>(q.size()), *dout = dalloc<float>(q.size());
                int32_t *dpos = dalloc<int32_t>(1);
                up(dq, q.data(), q.size());
                up(dpos, &r.pos, 1);
                erk_attention((erk_stream)g_st, dout, dq, c.dk, c.dv, kv_type, r.m, s.n_head, s.n_head_kv, s.hd,
                              s.n_ctx, dpos, scale, scratch);
                sync_check("erk_attention");
                down(got.data(), dout, got.size());
                CHECK(close_groups(got.data(), ref.data(), got.size(), s.hd, 1e-4, "attention") == 0,
                      "attention heads=%d/%d hd=%d n_ctx=%d kv=%d m=%d pos=%d", s.n_head, s.n_head_kv, s.hd,
                      s.n_ctx, kv_type, r.m, r.pos);
                CK(cudaFree(dq));
                CK(cudaFree(dout));
                CK(cudaFree(dpos));
            }
            CK(cudaFree(scratch));
            CK(cudaFree(c.dk));
            CK(cudaFree(c.dv));
        }
}

/* ---- sampling: sampler.c's order, reimplemented on the host ---- */

static void penalise_host(std::vector<float> &cp, const std::vector<int32_t> &pen, float penalty) {
    std::vector<char> done(cp.size(), 0);
    for (int32_t t : pen) {
        if (done[t])
            continue;
        cp[t] = cp[t] > 0.0f ? cp[t] / penalty : cp[t] * penalty;
        done[t] = 1;
    }
}

static int32_t argmax_host(std::vector<float> cp, const std::vector<int32_t> &pen, float penalty) {
    penalise_host(cp, pen, penalty);
    int32_t chosen = 0;
    for (int i = 1; i < (int)cp.size(); i++)
        if (cp[i] > cp[chosen])
            chosen = i;
    return chosen;
}

static void rank_host(std::vector<float> cp, const std::vector<int32_t> &pen, float penalty, float temp,
                      std::vector<float> &vals, std::vector<int32_t> &ids) {
    penalise_host(cp, pen, penalty);
    for (auto &v : cp)
        v /= temp;
    ids.resize(cp.size());
    for (size_t i = 0; i < cp.size(); i++)
        ids[i] = (int32_t)i;
    /* sampler.c's before(): a total order when no value is NaN */
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return cp[a] > cp[b] || (cp[a] == cp[b] && a < b);
    });
    vals.resize(cp.size());
    for (size_t i = 0; i < cp.size(); i++)
        vals[i] = cp[ids[i]];
}

enum { L_RANDOM, L_TIES, L_ZEROS, L_NAN0, L_NANS };

static std::vector<float> make_logits(int n, int kind) {
    std::vector<float> l(n);
    for (auto &v : l)
        v = randf() * 10.0f;
    if (kind == L_TIES || kind == L_NANS)
        for (auto &v : l)
            v = roundf(v * 2.0f) / 2.0f; /* many equal values, several equal maxima */
    if (kind == L_ZEROS) {
        for (auto &v : l)
            v = -1.0f - fabsf(v);
        for (int j = 0; j < 8; j++)
            l[next_u32() % n] = (j & 1) ? 0.0f : -0.0f;
    }
    if (kind == L_NAN0)
        l[0] = NAN;
    if (kind == L_NANS)
        for (int j = 0; j < 5; j++)
            l[1 + next_u32() % (n - 1)] = NAN;
    return l;
}

static void test_sampling() {
    for (int n : {5, 1000, 32000, 151936}) {
        const size_t sb = erk_sample_scratch_bytes(n);
        CHECK(sb > 0, "no sample scratch size for n=%d", n);
        uint8_t *scratch = dalloc<uint8_t>(sb);
        float *dl = dalloc<float>(n), *dvals = dalloc<float>(n);
        int32_t *dids = dalloc<int32_t>(n), *dout = dalloc<int32_t>(1), *dpen = dalloc<int32_t>(64);
        for (int kind = L_RANDOM; kind <= L_NANS; kind++)
            for (float penalty : {1.0f, 1.3f}) {
                std::vector<float> l = make_logits(n, kind);
                std::vector<int32_t> pen;
                if (penalty != 1.0f) {
                    /* penalise the current leaders (and a duplicate) so the answer moves */
                    const int32_t top = argmax_host(l, pen, 1.0f);
                    pen = {top, (int32_t)(next_u32() % n), top, (int32_t)(next_u32() % n)};
                }
                up(dl, l.data(), n);
                if (!pen.empty())
                    up(dpen, pen.data(), pen.size());
                erk_argmax((erk_stream)g_st, dl, n, dpen, (int)pen.size(), penalty, dout, scratch);
                sync_check("erk_argmax");
                int32_t got = -1;
                down(&got, dout, 1);
                const int32_t want = argmax_host(l, pen, penalty);
                CHECK(got == want, "argmax n=%d kind=%d penalty=%g: %d, sampler.c picks %d", n, kind,
                      (double)penalty, got, want);
                if (kind == L_NAN0 || kind == L_NANS)
                    continue; /* sampler.c's sort leaves NaN unordered: checked separately below */
                const float temp = kind == L_TIES ? 1.0f : 0.7f;
                erk_rank((erk_stream)g_st, dl, n, dpen, (int)pen.size(), penalty, temp, dvals, dids, scratch);
                sync_check("erk_rank");
                std::vector<float> gv(n), wv;
                std::vector<int32_t> gi(n), wi;
                down(gv.data(), dvals, n);
                down(gi.data(), dids, n);
                rank_host(l, pen, penalty, temp, wv, wi);
                int first = -1;
                for (int i = 0; i < n && first < 0; i++)
                    if (gi[i] != wi[i] || memcmp(&gv[i], &wv[i], 4) != 0)
                        first = i;
                CHECK(first < 0, "rank n=%d kind=%d penalty=%g: first difference at %d: id %d val %a, want id %d val %a",
                      n, kind, (double)penalty, first, first < 0 ? 0 : gi[first],
                      first < 0 ? 0.0 : (double)gv[first], first < 0 ? 0 : wi[first],
                      first < 0 ? 0.0 : (double)wv[first]);
            }
        /* NaN in rank: documented to sort after every number */
        std::vector<float> l = make_logits(n, L_RANDOM);
        const int nan_at = n > 3 ? 3 : 0;
        l[nan_at] = NAN;
        up(dl, l.data(), n);
        erk_rank((erk_stream)g_st, dl, n, dpen, 0, 1.0f, 1.0f, dvals, dids, scratch);
        sync_check("erk_rank NaN");
        int32_t last = -1;
        down(&last, dids + (n - 1), 1);
        CHECK(last == nan_at, "rank n=%d: NaN id %d is not last (last is %d)", n, nan_at, last);
        CK(cudaFree(scratch));
        CK(cudaFree(dl));
        CK(cudaFree(dvals));
        CK(cudaFree(dids));
        CK(cudaFree(dout));
        CK(cudaFree(dpen));
    }
}

/* ---- a captured graph replayed at two positions ---- */

static void test_graph() {
    const int n = 768, n_out = 1000, n_head = 4, n_head_kv = 2, hd = 64, n_ctx = 300;
    std::vector<uint8_t> raw;
    uint8_t *dw = make_weights(ER_W_Q4_0, n, n_out, raw);
    const kv_caches c = make_caches(ER_KV_F16, n_ctx, n_head_kv * hd);
    float *dx = dalloc<float>(n), *dy = dalloc<float>(n_out), *dq = dalloc<float>(n_head * hd);
    float *dout = dalloc<float>(n_head * hd), *dvals = dalloc<float>(n_out);
    int32_t *dpos = dalloc<int32_t>(1), *dtok = dalloc<int32_t>(1), *dids = dalloc<int32_t>(n_out);
    uint8_t *s_mm = dalloc<uint8_t>(erk_matmul_scratch_bytes(ER_W_Q4_0, 1, n));
    uint8_t *s_at = dalloc<uint8_t>(erk_attention_scratch_bytes(1, n_head, hd, n_ctx));
    uint8_t *s_sa = dalloc<uint8_t>(erk_sample_scratch_bytes(n_out));
    const float scale = 0.125f;

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    erk_matmul((erk_stream)g_st, ER_W_Q4_0, dw, n, n_out, dx, 1, dy, 0, s_mm);
    erk_argmax((erk_stream)g_st, dy, n_out, nullptr, 0, 1.0f, dtok, s_sa);
    /* temperature 1: dividing by anything else could merge two near values
     * into a tie that argmax (on the raw values) does not see */
    erk_rank((erk_stream)g_st, dy, n_out, nullptr, 0, 1.0f, 1.0f, dvals, dids, s_sa);
    erk_attention((erk_stream)g_st, dout, dq, c.dk, c.dv, ER_KV_F16, 1, n_head, n_head_kv, hd, n_ctx, dpos, scale,
                  s_at);
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));

    for (int pos : {3, 200}) {
        std::vector<float> x(n), q(n_head * hd), ref, got(q.size()), y(n_out);
        for (auto &v : x)
            v = randf();
        for (auto &v : q)
            v = randf() * 3.0f;
        up(dx, x.data(), n);
        up(dq, q.data(), q.size());
        up(dpos, &pos, 1);
        CK(cudaGraphLaunch(exec, g_st));
        sync_check("graph launch");
        attention_ref(ref, q, c, ER_KV_F16, 1, n_head, n_head_kv, hd, pos, scale);
        down(got.data(), dout, got.size());
        CHECK(close_groups(got.data(), ref.data(), got.size(), hd, 1e-4, "graph attention") == 0,
              "graph replay at pos %d: attention differs", pos);
        down(y.data(), dy, n_out);
        int32_t tok = -1, id0 = -1;
        down(&tok, dtok, 1);
        down(&id0, dids, 1);
        const std::vector<int32_t> none;
        CHECK(tok == argmax_host(y, none, 1.0f), "graph replay at pos %d: argmax %d", pos, tok);
        CHECK(id0 == tok, "graph replay at pos %d: rank starts with %d, argmax is %d", pos, id0, tok);
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (void *p : {(void *)dw, (void *)c.dk, (void *)c.dv, (void *)dx, (void *)dy, (void *)dq, (void *)dout,
                    (void *)dvals, (void *)dpos, (void *)dtok, (void *)dids, (void *)s_mm, (void *)s_at,
                    (void *)s_sa})
        CK(cudaFree(p));
}

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    gen = er_kernels_generic();
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    test_matmul();
    test_embed();
    test_rmsnorm();
    test_bias_silu();
    test_rope();
    test_kv_store();
    test_attention();
    test_sampling();
    test_graph();
    CK(cudaStreamDestroy(g_st));
    return test_summary();
}
