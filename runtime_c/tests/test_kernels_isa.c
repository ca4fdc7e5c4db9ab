/*
 * test_kernels_isa.c — every kernel of every table this build and CPU can
 * run, against the generic table and double-precision references.
 *
 * Exactness contract (what each check below enforces):
 *  - argmax: the index the plain loop picks (kernels.h), NaN, ties and +-0 included.
 *  - quantize_row_q8_0 / q8_k, dequant_row, add, f32->f16: bit-identical to
 *    generic (f16->f32 too, except that a NaN need only stay a NaN of the
 *    same sign: F16C/FCVT quiet signalling NaNs).
 *  - K-quant (and IQ4_XS) dots and matmuls: bit-identical (exact integer
 *    super-block sums and the shared float tail of kquant.h), and generic's
 *    dot within 1e-6 * sum|w*x| of the double reference built from its
 *    dequantizer.
 *  - Q8_0/Q4_0/Q5_0/IQ4_NL dots: the same exact integer block sums,
 *    accumulated in float in another order: within 1e-6 * sum|w*x| of the
 *    double reference (the integer parts are exact, only the n/32 float
 *    additions round); Q4_1/Q5_1 within 4e-6 (their min term cancels).
 *  - F32/F16/BF16 dots: within 4e-7 * sqrt(n) * sum|w*x| of the double
 *    reference, as generic is held to.
 *  - rope_cs: bit-identical to generic (separate products, no FMA).
 *  - rmsnorm, silu-mul: 1e-6 relative per element; softmax 3e-6 relative
 *    (our vector exp is ~2 ulp against libm's); attention 1e-5 of max|out|.
 * The same binary runs natively and under qemu-aarch64 at every SVE length;
 * tables the CPU cannot run are reported as skipped, not failed.
 */
#include "kernels/kernels.h"
#include "kernels/generic/generic.h"
#include "edgerun.h"
#include "error.h"
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__)
unsigned er_sve_vector_bytes(void);
#endif

/* ---- deterministic random numbers (xorshift64*) ---- */
static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd_u64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}
static uint32_t rnd_u32(void) { return (uint32_t)(rnd_u64() >> 32); }
static float rnd_f(void) { return (float)((double)(rnd_u64() >> 11) * 0x1p-53 * 2.0 - 1.0); }
static er_f16 rnd_scale(void) { return er_f32_to_f16(0.0005f + 0.02f * (rnd_f() + 1.0f)); }

static const char *const k_wnames[ER_W_COUNT] = {"f32",  "f16",  "bf16",   "q8_0",   "q4_0", "q4_k", "q5_k", "q6_k",
                                                 "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q3_k", "q2_k"};

enum { NMAX = 4096 + 256, RMAX = 13, MMAX = 9 };

/* Bytes of one weight row of n elements. */
static size_t row_bytes(int t, int n) {
    switch (t) {
    case ER_W_F32: return (size_t)n * 4;
    case ER_W_F16:
    case ER_W_BF16: return (size_t)n * 2;
    case ER_W_Q8_0: return (size_t)n / 32 * sizeof(er_block_q8_0);
    case ER_W_Q4_0: return (size_t)n / 32 * sizeof(er_block_q4_0);
    case ER_W_Q4_K: return (size_t)n / 256 * sizeof(er_block_q4_k);
    case ER_W_Q5_K: return (size_t)n / 256 * sizeof(er_block_q5_k);
    case ER_W_Q6_K: return (size_t)n / 256 * sizeof(er_block_q6_k);
    case ER_W_Q4_1: return (size_t)n / 32 * sizeof(er_block_q4_1);
    case ER_W_Q5_0: return (size_t)n / 32 * sizeof(er_block_q5_0);
    case ER_W_Q5_1: return (size_t)n / 32 * sizeof(er_block_q5_1);
    case ER_W_IQ4_NL: return (size_t)n / 32 * sizeof(er_block_iq4_nl);
    case ER_W_IQ4_XS: return (size_t)n / 256 * sizeof(er_block_iq4_xs);
    case ER_W_Q3_K: return (size_t)n / 256 * sizeof(er_block_q3_k);
    default: return (size_t)n / 256 * sizeof(er_block_q2_k);
    }
}

static int block_elems(int t) { return er_wtype_block_elems(t); }

/* Random bytes with every scale field set to a finite positive half, so the
 * dot products stay finite while every quant bit pattern is exercised. */
static void fill_row(int t, void *row, int n) {
    unsigned char *p = row;
    size_t nb = row_bytes(t, n);
    for (size_t i = 0; i < nb; i++) p[i] = (unsigned char)rnd_u32();
    switch (t) {
    case ER_W_F32:
        for (int i = 0; i < n; i++) ((float *)row)[i] = rnd_f();
        break;
    case ER_W_F16:
        for (int i = 0; i < n; i++) ((er_f16 *)row)[i] = er_f32_to_f16(rnd_f() * 4);
        break;
    case ER_W_BF16:
        for (int i = 0; i < n; i++) {
            float f = rnd_f() * 2;
            uint32_t u;
            memcpy(&u, &f, 4);
            ((er_bf16 *)row)[i] = (er_bf16)(u >> 16);
        }
        break;
    case ER_W_Q8_0:
        for (int b = 0; b < n / 32; b++) ((er_block_q8_0 *)row)[b].d = rnd_scale();
        break;
    case ER_W_Q4_0:
        for (int b = 0; b < n / 32; b++) ((er_block_q4_0 *)row)[b].d = rnd_scale();
        break;
    case ER_W_Q4_K:
        for (int b = 0; b < n / 256; b++) {
            ((er_block_q4_k *)row)[b].d = rnd_scale();
            ((er_block_q4_k *)row)[b].dmin = rnd_scale();
        }
        break;
    case ER_W_Q5_K:
        for (int b = 0; b < n / 256; b++) {
            ((er_block_q5_k *)row)[b].d = rnd_scale();
            ((er_block_q5_k *)row)[b].dmin = rnd_scale();
        }
        break;
    case ER_W_Q6_K:
        for (int b = 0; b < n / 256; b++) ((er_block_q6_k *)row)[b].d = rnd_scale();
        break;
    /* the mins of Q4_1/Q5_1 near -8 (-16) quanta, as a quantizer sets them
     * for weights around zero, so the two terms of the dot cancel */
    case ER_W_Q4_1:
        for (int b = 0; b < n / 32; b++) {
            er_block_q4_1 *k = (er_block_q4_1 *)row + b;
            k->d = rnd_scale();
            k->m = er_f32_to_f16(-er_f16_to_f32(k->d) * (7.0f + rnd_f()));
        }
        break;
    case ER_W_Q5_1:
        for (int b = 0; b < n / 32; b++) {
            er_block_q5_1 *k = (er_block_q5_1 *)row + b;
            k->d = rnd_scale();
            k->m = er_f32_to_f16(-er_f16_to_f32(k->d) * (15.0f + rnd_f()));
        }
        break;
    case ER_W_Q5_0:
        for (int b = 0; b < n / 32; b++) ((er_block_q5_0 *)row)[b].d = rnd_scale();
        break;
    case ER_W_IQ4_NL:
        for (int b = 0; b < n / 32; b++) ((er_block_iq4_nl *)row)[b].d = rnd_scale();
        break;
    case ER_W_IQ4_XS:
        for (int b = 0; b < n / 256; b++) ((er_block_iq4_xs *)row)[b].d = rnd_scale();
        break;
    case ER_W_Q3_K:
        for (int b = 0; b < n / 256; b++) ((er_block_q3_k *)row)[b].d = rnd_scale();
        break;
    default:
        for (int b = 0; b < n / 256; b++) {
            ((er_block_q2_k *)row)[b].d = rnd_scale();
            ((er_block_q2_k *)row)[b].dmin = rnd_scale();
        }
        break;
    }
}

/* An activation row whose blocks have very different magnitudes. */
static void fill_act(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = rnd_f() * (float)(1 + (i / 32) % 7) * ((i / 256) % 2 ? 0.01f : 3.0f);
}

/* Prepares x in act kind `kind` (generic quantizers: those are checked
 * bit-identical separately). Returns the row stride in bytes. */
static size_t prepare(int kind, const float *x, int n, void *dst) {
    size_t rb = er_act_row_bytes(kind, n);
    if (kind == ER_ACT_Q8_0)
        er_gen_quantize_row_q8_0(x, dst, n);
    else if (kind == ER_ACT_Q8_K)
        er_gen_quantize_row_q8_k(x, dst, n);
    else
        memcpy(dst, x, rb);
    return rb;
}

static void act_values(int kind, const void *xa, int n, float *out) {
    if (kind == ER_ACT_Q8_0) {
        er_gen_dequant_q8_0(xa, out, n);
    } else if (kind == ER_ACT_Q8_K) {
        const er_block_q8_k *b = xa;
        for (int i = 0; i < n; i++) out[i] = b[i / 256].d * (float)b[i / 256].qs[i % 256];
    } else {
        memcpy(out, xa, (size_t)n * sizeof(float));
    }
}

/* Double reference of one dot; *mag = sum |w*x|. */
static double ref_dot(int t, int kind, const void *w, const void *xa, int n, double *mag) {
    static float wd[NMAX], xd[NMAX];
    er_kernels_generic()->dequant_row[t](w, wd, n);
    act_values(kind, xa, n, xd);
    double s = 0, m = 0;
    for (int i = 0; i < n; i++) {
        s += (double)wd[i] * xd[i];
        m += fabs((double)wd[i] * xd[i]);
    }
    *mag = m;
    return s;
}

/* the types whose super-block dot is one exact integer sum and kquant.h's
 * float tail: every table's result is generic's, bit for bit */
static int is_kquant(int t) { return er_wtype_block_elems(t) == ER_QK_K; }

/* Allowed distance from the double reference; 0 means "bit-identical to
 * generic" instead. */
static double dot_tol(int t, int n, double mag) {
    if (is_kquant(t)) return 0;
    if (t == ER_W_Q8_0 || t == ER_W_Q4_0 || t == ER_W_Q5_0 || t == ER_W_IQ4_NL) return 1e-6 * mag + 1e-30;
    /* Q4_1/Q5_1: d q and m terms of up to ~4x |w| cancel per block */
    if (t == ER_W_Q4_1 || t == ER_W_Q5_1) return 4e-6 * mag + 1e-30;
    return 4e-7 * sqrt((double)n) * mag + 1e-7;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---------------------------------------------------------------- checks */

static void check_table_shape(const er_kernels *k, const er_kernels *g) {
    int missing = 0, kinds = 0;
    for (int t = 0; t < ER_W_COUNT; t++) {
        missing += !k->vec_dot[t] + !k->matmul[t] + !k->dequant_row[t];
        kinds += k->act_kind[t] != g->act_kind[t];
    }
    missing += !k->quantize_row_q8_0 + !k->quantize_row_q8_k + !k->rmsnorm + !k->rope + !k->rope_cs + !k->softmax +
               !k->silu_mul + !k->add + !k->argmax + !k->attention + !k->attention_multi + !k->f32_to_f16 +
               !k->f16_to_f32;
    CHECK(missing == 0, "%s: %d null entries", k->name, missing);
    CHECK(kinds == 0, "%s: %d weight types use another activation format than generic", k->name, kinds);
}

static void check_quantizers(const er_kernels *k) {
    static float x[NMAX];
    static er_block_q8_0 a[NMAX / 32], b[NMAX / 32];
    static er_block_q8_k ak[NMAX / 256], bk[NMAX / 256];
    for (int rep = 0; rep < 5; rep++) {
        /* 352: blocks in a group of 8 and 3 after it (AVX2 scales 8 at once) */
        int n = rep == 0 ? 32 : rep == 1 ? 256 : rep == 2 ? 4096 : rep == 3 ? NMAX : 352;
        fill_act(x, n);
        for (int j = 0; j < 32; j++) x[32 + j] = 0.0f;                  /* an all-zero block */
        for (int j = 0; j < 32; j++) x[64 + j] = (float)(j - 16) * 0.5f; /* exact .5 ties */
        x[64 + 31] = 127.0f;
        if (n >= 256) {
            /* scales a half holds only as a subnormal (1.3e-5), that no half
             * holds (8e-24), and a denormal input (flushed under FTZ) */
            for (int j = 0; j < 32; j++) x[96 + j] = (float)(j - 16) * 1e-4f;
            for (int j = 0; j < 32; j++) x[128 + j] = (float)(j - 16) * 6.25e-23f;
            for (int j = 0; j < 32; j++) x[160 + j] = j == 5 ? 1e-40f : 0.0f;
        }
        if (n >= 512) {
            x[300] = INFINITY; /* inf and NaN in their own blocks */
            x[420] = NAN;
            x[421] = -5.0f;
            /* a Q8_K block whose largest magnitude comes as -v, then +v: the
             * scale follows the first, as generic's strict > does */
            for (int j = 512; j < 768; j++) x[j] *= 0.1f;
            x[600] = -100.0f;
            x[601] = 100.0f;
            x[800] = NAN; /* a NaN in a Q8_K block with no inf to hide it */
        }
        memset(a, 0x5a, sizeof a);
        memset(b, 0xa5, sizeof b);
        k->quantize_row_q8_0(x, a, n);
        er_gen_quantize_row_q8_0(x, b, n);
        CHECK(memcmp(a, b, (size_t)n / 32 * sizeof a[0]) == 0, "%s: quantize_row_q8_0 n=%d differs from generic",
              k->name, n);
        if (n % 256 == 0) {
            memset(ak, 0x5a, sizeof ak);
            memset(bk, 0xa5, sizeof bk);
            k->quantize_row_q8_k(x, ak, n);
            er_gen_quantize_row_q8_k(x, bk, n);
            CHECK(memcmp(ak, bk, (size_t)n / 256 * sizeof ak[0]) == 0,
                  "%s: quantize_row_q8_k n=%d differs from generic", k->name, n);
        }
    }
}

/* check_quantizers again on a thread in the workers' floating-point mode
 * (er_cpu_set_ftz), where the quantizers run in a decode: a vector division
 * or half conversion that flushed differently from generic's scalar code
 * would change the bytes only there */
static void *quantizers_ftz_thread(void *arg) {
    er_cpu_set_ftz();
    check_quantizers(arg);
    return NULL;
}

static void check_quantizers_ftz(const er_kernels *k) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, quantizers_ftz_thread, (void *)k) == 0, "thread");
    pthread_join(th, NULL);
}

static void check_dots(const er_kernels *k, const er_kernels *g) {
    static unsigned char w[NMAX * 4];
    static float x[NMAX];
    static unsigned char xa[NMAX * 4];
    static const int n_float[] = {1, 7, 8, 13, 31, 32, 33, 100, 256, 1000, 4096};
    static const int n_q32[] = {32, 64, 96, 256, 480, 4096, 4096 + 32};
    static const int n_qk[] = {256, 512, 768, 4096};
    for (int t = 0; t < ER_W_COUNT; t++) {
        const int be = er_wtype_block_elems(t);
        const int *ns = be == 1 ? n_float : be == 32 ? n_q32 : n_qk;
        int cnt = be == 1 ? 11 : be == 32 ? 7 : 4;
        int bad = 0;
        for (int ni = 0; ni < cnt; ni++) {
            int n = ns[ni];
            for (int rep = 0; rep < 3; rep++) {
                fill_row(t, w, n);
                fill_act(x, n);
                prepare(k->act_kind[t], x, n, xa);
                double mag;
                double ref = ref_dot(t, k->act_kind[t], w, xa, n, &mag);
                float got = k->vec_dot[t](n, w, xa), gen = g->vec_dot[t](n, w, xa);
                double tol = dot_tol(t, n, mag);
                /* K-quants: bit-identical to generic, and generic's dot agrees
                 * with its own dequantizer (checked against gguf-py's) */
                int ok = tol == 0 ? same_bits(got, gen) && fabs(gen - ref) <= 1e-6 * mag + 1e-30
                                  : fabs(got - ref) <= tol && fabs(gen - ref) <= tol;
                if (!ok && bad++ < 3)
                    fprintf(stderr, "  %s %s n=%d: got %.9g generic %.9g ref %.9g tol %.3g\n", k->name, k_wnames[t], n,
                            got, gen, ref, tol);
            }
        }
        CHECK(bad == 0, "%s: %s vec_dot: %d mismatches (%s)", k->name, k_wnames[t], bad,
              is_kquant(t) ? "must be bit-identical" : "tolerance vs double reference");
    }
}

static void check_matmul(const er_kernels *k, const er_kernels *g) {
    static unsigned char w[RMAX * NMAX * 4];
    static float x[MMAX][NMAX];
    static unsigned char xa[MMAX * (NMAX * 4 + 64)];
    enum { YS = RMAX + 3 };
    static const int ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* every remainder of 4-row tiles */
    for (int t = 0; t < ER_W_COUNT; t++) {
        /* F32 rows of 4100 floats exceed the kernels' 128 KiB weight chunk
         * every 7 rows, so chunk boundaries fall inside [r0, r1) */
        const int n = t == ER_W_F32 ? 4100 : er_wtype_block_elems(t) <= 32 ? 96 + 1 * (t == ER_W_F16) : 512;
        const size_t rb = row_bytes(t, n);
        for (int r = 0; r < RMAX; r++) fill_row(t, w + r * rb, n);
        const int kind = k->act_kind[t];
        const size_t xs = er_act_row_bytes(kind, n) + 8; /* padded: stride != row size */
        for (int b = 0; b < MMAX; b++) {
            fill_act(x[b], n);
            prepare(kind, x[b], n, xa + b * xs);
        }
        int bad = 0, touched = 0;
        /* 10, 9 and 8 rows: every remainder the float register tiles (3 or
         * 4 weight rows) leave, with chunk boundaries inside for F32 */
        static const int ranges[][2] = {{2, RMAX - 1}, {1, RMAX - 3}, {3, RMAX - 2}};
        for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            const int m = ms[mi];
            float y[MMAX * YS], yg[MMAX * YS];
            for (int i = 0; i < MMAX * YS; i++) y[i] = yg[i] = -777.0f;
            er_matmul_args a = {.w = w, .w_row_bytes = rb, .x = xa, .x_stride = xs, .y = y, .y_stride = YS,
                                .n = n, .m = m, .r0 = ranges[ri][0], .r1 = ranges[ri][1]};
            k->matmul[t](&a);
            a.y = yg;
            g->matmul[t](&a);
            for (int b = 0; b < MMAX; b++)
                for (int c = 0; c < YS; c++) {
                    const float v = y[b * YS + c];
                    if (b < m && c >= a.r0 && c < a.r1) {
                        double mag;
                        double ref = ref_dot(t, kind, w + c * rb, xa + b * xs, n, &mag);
                        double tol = dot_tol(t, n, mag);
                        int ok = tol == 0 ? same_bits(v, yg[b * YS + c]) : fabs(v - ref) <= tol;
                        if (!ok && bad++ < 3)
                            fprintf(stderr, "  %s %s matmul m=%d b=%d r=%d: %.9g vs generic %.9g\n", k->name,
                                    k_wnames[t], m, b, c, v, yg[b * YS + c]);
                    } else if (v != -777.0f) {
                        touched++;
                    }
                }
        }
        CHECK(bad == 0, "%s: %s matmul: %d outputs off", k->name, k_wnames[t], bad);
        CHECK(touched == 0, "%s: %s matmul wrote %d outputs outside its rows/batch", k->name, k_wnames[t], touched);
    }
}

/* avx512vnni's row-wise dots of the 32-element issue-25 types take VPDPBUSD
 * where avx2's take maddubs + madd: the same exact block sums in the same
 * float order, so the same bits (x86/q32_avx2.c) */
static void check_vnni_twin(const er_kernels *k) {
    if (strcmp(k->name, "avx512vnni") != 0) return;
    const er_kernels *twin = er_kernels_select("avx2", NULL);
    static unsigned char w[4 * 4096];
    static float x[4096];
    static unsigned char xa[4096 * 2];
    static const int types[] = {ER_W_Q4_1, ER_W_Q5_0, ER_W_Q5_1, ER_W_IQ4_NL}, ns[] = {32, 96, 4096};
    int bad = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int ni = 0; ni < 3; ni++) {
            const int t = types[ti], n = ns[ni];
            fill_row(t, w, n);
            fill_act(x, n);
            prepare(ER_ACT_Q8_0, x, n, xa);
            bad += !same_bits(k->vec_dot[t](n, w, xa), twin->vec_dot[t](n, w, xa));
        }
    CHECK(bad == 0, "avx512vnni: %d issue-25 dots differ from avx2's bits", bad);
}

static void check_dequant(const er_kernels *k, const er_kernels *g) {
    static unsigned char w[NMAX * 4];
    static float a[NMAX], b[NMAX];
    for (int t = 0; t < ER_W_COUNT; t++) {
        int n = block_elems(t) == 1 ? 1000 + 3 : 4096;
        fill_row(t, w, n);
        k->dequant_row[t](w, a, n);
        g->dequant_row[t](w, b, n);
        CHECK(memcmp(a, b, (size_t)n * 4) == 0, "%s: dequant_row %s differs from generic", k->name, k_wnames[t]);
    }
}

static int close_rel(float got, float want, double rel, double abs_tol) {
    if (isnan(want)) return isnan(got);
    return fabs((double)got - want) <= rel * fabs((double)want) + abs_tol;
}

/* argmax against the rule it promises (kernels.h): the plain loop */
static int32_t argmax_rule(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void check_argmax(const er_kernels *k) {
    static float x[32000];
    static const int ns[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 100, 1000, 32000};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int n = ns[ni];
        for (int c = 0; c < 10; c++) {
            for (int i = 0; i < n; i++) x[i] = rnd_f();
            const int a = (int)(rnd_u64() % (uint64_t)n), b = (int)(rnd_u64() % (uint64_t)n);
            switch (c) {
            case 1: x[a] = x[b] = 2.0f; break;                       /* a tie, in any two lanes */
            case 2: x[0] = NAN; break;                               /* nothing exceeds it */
            case 3: x[a] = NAN, x[b] = 5.0f; break;                  /* a NaN never wins */
            case 4: for (int i = 0; i < n; i++) x[i] = i % 3 ? -0.0f : 0.0f; break; /* +0 == -0 */
            case 5: for (int i = 0; i < n; i++) x[i] = -INFINITY; break;
            case 6: x[a] = INFINITY, x[b] = INFINITY; break;
            case 7: for (int i = 0; i < n; i++) x[i] = i % 2 ? NAN : -1.0f; x[n - 1] = 0.5f; break;
            case 8: x[n - 1] = 3.0f; break;                          /* in the tail */
            case 9: /* NaN everywhere but 0 and b: no lane may let one in */
                for (int i = 1; i < n; i++) x[i] = NAN;
                x[0] = -1.0f, x[b] = b ? 0.5f : -1.0f;
                break;
            default: break;
            }
            const int32_t got = k->argmax(x, n), want = argmax_rule(x, n);
            CHECK(got == want, "%s: argmax n=%d case %d gives %d, the rule %d", k->name, n, c, (int)got, (int)want);
        }
    }
}

static void check_elementwise(const er_kernels *k, const er_kernels *g) {
    static float x[NMAX], w[NMAX], y1[NMAX], y2[NMAX], u[NMAX];
    static const int ns[] = {1, 5, 8, 17, 64, 100, 1000, 4096};
    int bad_norm = 0, bad_alias = 0, bad_soft = 0, bad_silu = 0, bad_gelu = 0, bad_add = 0;
    static float gv[NMAX];
    const er_family_kernels kf = er_kernels_family(k), gf = er_kernels_family(g);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int n = ns[ni];
        for (int i = 0; i < n; i++) {
            x[i] = rnd_f() * 5;
            w[i] = rnd_f() + 1.0f;
            u[i] = rnd_f() * 3;
        }
        k->rmsnorm(y1, x, w, n, 1e-5f);
        g->rmsnorm(y2, x, w, n, 1e-5f);
        for (int i = 0; i < n; i++) bad_norm += !close_rel(y1[i], y2[i], 1e-6, 0);
        memcpy(y1, x, (size_t)n * 4);
        k->rmsnorm(y1, y1, w, n, 1e-5f); /* in place */
        for (int i = 0; i < n; i++) bad_alias += !close_rel(y1[i], y2[i], 1e-6, 0);

        /* softmax: wide logits, masked entries */
        for (int i = 0; i < n; i++) y1[i] = y2[i] = (i % 11 == 3) ? -INFINITY : rnd_f() * 30;
        k->softmax(y1, n);
        g->softmax(y2, n);
        for (int i = 0; i < n; i++) bad_soft += !close_rel(y1[i], y2[i], 3e-6, 1e-12);

        /* silu-mul across its whole range, including the overflow side */
        for (int i = 0; i < n; i++) {
            y1[i] = y2[i] = (i % 13 == 0) ? rnd_f() * 200 : rnd_f() * 12;
        }
        k->silu_mul(y1, u, n);
        g->silu_mul(y2, u, n);
        for (int i = 0; i < n; i++) bad_silu += !close_rel(y1[i], y2[i], 1e-6, 1e-30);

        /* gelu-mul (Gemma's GeGLU) across its range, saturating on both sides:
         * the SIMD tables compute it as a sigmoid of e^x, generic with tanhf,
         * so they agree to float rounding of |v * u|, not bit for bit (where
         * 1 + tanhf(z) cancels, generic itself is only that accurate) */
        for (int i = 0; i < n; i++) {
            y1[i] = y2[i] = (i % 13 == 0) ? rnd_f() * 200 : rnd_f() * 12;
        }
        memcpy(gv, y1, (size_t)n * 4);
        kf.gelu_mul(y1, u, n);
        gf.gelu_mul(y2, u, n);
        for (int i = 0; i < n; i++)
            bad_gelu += !(fabsf(y1[i] - y2[i]) <= 1e-6f * fabsf(gv[i] * u[i]) + 1e-30f);

        memcpy(y1, x, (size_t)n * 4);
        memcpy(y2, x, (size_t)n * 4);
        k->add(y1, w, n);
        g->add(y2, w, n);
        bad_add += memcmp(y1, y2, (size_t)n * 4) != 0;
    }
    /* every entry masked: zeros, not NaN */
    for (int i = 0; i < 20; i++) y1[i] = -INFINITY;
    k->softmax(y1, 20);
    int zeros = 0;
    for (int i = 0; i < 20; i++) zeros += y1[i] == 0.0f;
    CHECK(zeros == 20, "%s: all-masked softmax gives zeros", k->name);
    CHECK(bad_norm == 0 && bad_alias == 0, "%s: rmsnorm %d / in-place %d elements off", k->name, bad_norm, bad_alias);
    CHECK(bad_soft == 0, "%s: softmax %d elements beyond 3e-6 relative", k->name, bad_soft);
    CHECK(bad_silu == 0, "%s: silu_mul %d elements beyond 1e-6 relative", k->name, bad_silu);
    CHECK(bad_gelu == 0, "%s: gelu_mul %d elements beyond 1e-6 of |v * u|", k->name, bad_gelu);
    CHECK(bad_add == 0, "%s: add differs from generic", k->name);

    /* rope: same arithmetic expected, held to 1e-6 relative */
    int bad_rope = 0;
    for (int neox = 0; neox < 2; neox++) {
        for (int i = 0; i < 4 * 64; i++) y1[i] = y2[i] = rnd_f();
        k->rope(y1, 4, 64, 1234, 10000.0f, neox);
        g->rope(y2, 4, 64, 1234, 10000.0f, neox);
        for (int i = 0; i < 4 * 64; i++) bad_rope += !close_rel(y1[i], y2[i], 1e-6, 1e-7);
    }
    CHECK(bad_rope == 0, "%s: rope %d elements off", k->name, bad_rope);
}

/* rope_cs against generic, bit for bit, on the head sizes of real models
 * (64, 128) and on ones that leave a scalar tail after the vectors (48: three
 * 8-pair blocks of the neox half in AVX2, 20 and 6: partial blocks), and
 * against its own table's rope (the same rotation with angles inside). */
static void check_rope_cs(const er_kernels *k, const er_kernels *g) {
    enum { HMAX = 12, DMAX = 128 };
    static float x[HMAX * DMAX + 1], y1[HMAX * DMAX + 1], y2[HMAX * DMAX + 1], y3[HMAX * DMAX + 1];
    float cs[DMAX];
    static const int dims[] = {64, 128, 48, 20, 6}, heads[] = {1, 3, 12}, poss[] = {0, 1, 77, 4095};
    int bad = 0, bad_rope = 0, moved = 0, runs = 0;
    for (int neox = 0; neox < 2; neox++)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 3; b++)
                for (int p = 0; p < 4; p++) {
                    const int hd = dims[a], nh = heads[b], n = nh * hd;
                    er_rope_angles(cs, hd, poss[p], 10000.0f);
                    for (int i = 0; i < n; i++) x[i] = rnd_f() * 4;
                    x[n] = y1[n] = y2[n] = 12345.0f; /* past the last head: must stay */
                    memcpy(y1, x, (size_t)n * 4);
                    memcpy(y2, x, (size_t)n * 4);
                    memcpy(y3, x, (size_t)n * 4);
                    k->rope_cs(y1, nh, hd, cs, neox);
                    g->rope_cs(y2, nh, hd, cs, neox);
                    k->rope(y3, nh, hd, poss[p], 10000.0f, neox);
                    bad += memcmp(y1, y2, (size_t)(n + 1) * 4) != 0;
                    bad_rope += memcmp(y1, y3, (size_t)n * 4) != 0;
                    /* the check would pass vacuously if nothing rotated */
                    if (poss[p] > 0) moved += memcmp(y1, x, (size_t)n * 4) != 0;
                    runs++;
                }
    CHECK(bad == 0, "%s: rope_cs differs from generic in %d of %d cases", k->name, bad, runs);
    CHECK(bad_rope == 0, "%s: rope_cs differs from its table's rope in %d of %d cases", k->name, bad_rope, runs);
    CHECK(moved == runs * 3 / 4, "%s: rope_cs changed only %d of %d inputs at pos > 0", k->name, moved, runs * 3 / 4);
}

static void check_f16_rows(const er_kernels *k) {
    enum { N = 4099 };
    static float x[N], y[N], yg[N];
    static er_f16 h[N], hg[N], hs[N];
    for (int i = 0; i < N; i++) {
        uint32_t u = rnd_u32();
        if (i % 3 == 0) { /* mostly the range halves can hold, with its edges */
            float f = rnd_f() * ldexpf(1.0f, (int)(rnd_u32() % 40) - 26);
            memcpy(&u, &f, 4);
        }
        memcpy(&x[i], &u, 4);
    }
    k->f32_to_f16(x, h, N);
    er_gen_f32_to_f16(x, hg, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != hg[i];
    CHECK(bad == 0, "%s: f32_to_f16 differs from generic on %d of %d values", k->name, bad, N);

    for (int i = 0; i < N; i++) hs[i] = (er_f16)rnd_u32(); /* every class of half, NaNs included */
    k->f16_to_f32(hs, y, N);
    er_gen_f16_to_f32(hs, yg, N);
    bad = 0;
    for (int i = 0; i < N; i++) {
        if (isnan(yg[i]))
            bad += !isnan(y[i]) || !!signbit(y[i]) != !!signbit(yg[i]);
        else
            bad += !same_bits(y[i], yg[i]);
    }
    CHECK(bad == 0, "%s: f16_to_f32 differs from generic on %d values", k->name, bad);
}

/* a random K/V cache of n elements, as floats and as halves */
static void random_kv(float *kf, float *vf, er_f16 *kh, er_f16 *vh, int n) {
    for (int i = 0; i < n; i++) {
        kf[i] = rnd_f();
        vf[i] = rnd_f();
        kh[i] = er_f32_to_f16(kf[i]);
        vh[i] = er_f32_to_f16(vf[i]);
    }
}

static void check_attention(const er_kernels *k, const er_kernels *g) {
    enum { T = 37, HD = 128, STRIDE = 2 * HD + 8 };
    static float kf[T * STRIDE], vf[T * STRIDE];
    static er_f16 kh[T * STRIDE], vh[T * STRIDE];
    float q[HD], o1[HD], o2[HD], sc[T];
    random_kv(kf, vf, kh, vh, T * STRIDE);
    int bad = 0;
    /* 80: a blocked head with a 2-vector remainder; 20: not a multiple of 8.
     * n_kv 9 and 37: blocks of 8 positions plus a tail */
    static const int hds[] = {64, 80, 128, 20}, nkv[] = {1, 2, 9, 37};
    for (int kv = 0; kv < 2; kv++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                const int hd = hds[a];
                for (int i = 0; i < hd; i++) q[i] = rnd_f() * 2;
                const void *kk = kv ? (const void *)kh : (const void *)kf;
                const void *vv = kv ? (const void *)vh : (const void *)vf;
                const int kvt = kv ? ER_KV_F16 : ER_KV_F32;
                k->attention(o1, q, kk, vv, kvt, STRIDE, nkv[b], hd, 1.0f / sqrtf((float)hd), sc);
                g->attention(o2, q, kk, vv, kvt, STRIDE, nkv[b], hd, 1.0f / sqrtf((float)hd), sc);
                float mx = 0;
                for (int i = 0; i < hd; i++) mx = fabsf(o2[i]) > mx ? fabsf(o2[i]) : mx;
                for (int i = 0; i < hd; i++) bad += !(fabsf(o1[i] - o2[i]) <= 1e-5f * mx + 1e-30f);
            }
    CHECK(bad == 0, "%s: attention %d outputs beyond 1e-5 of max|out|", k->name, bad);
}

/* attention_multi against the same table's attention once per query: bit
 * for bit, with the queries' spans mixed (a causal prefill block: each
 * query one position further than the one before, grouped heads sharing
 * one) and spans crossing ER_ATT_BLOCK boundaries or ending inside one:
 * near the cache's end, and from position 0 (a prompt's first tokens,
 * whose diagonal is in the first block). */
static void check_attention_multi(const er_kernels *k) {
    enum { T = 3 * ER_ATT_BLOCK + 11, HD = 128, STRIDE = 2 * HD + 8, NQ = 24 };
    static float kf[T * STRIDE], vf[T * STRIDE];
    static er_f16 kh[T * STRIDE], vh[T * STRIDE];
    static float q[NQ][HD], o1[NQ][HD], o2[HD], scratch[ER_ATT_BLOCK * HD + NQ * T];
    random_kv(kf, vf, kh, vh, T * STRIDE);
    int bad = 0, calls = 0;
    /* groups: 1 and 3 query heads per K/V head, and all nq queries at one
     * position (a decode step's group: the few-query path from 2 on) */
    static const int hds[] = {64, 80, 128, 20}, nqs[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 24};
    for (int kv = 0; kv < 4; kv++)
        for (int a = 0; a < 4; a++)
            for (int c = 0; c < 10; c++)
                for (int gi = 0; gi < 3; gi++) {
                    const int hd = hds[a], nq = nqs[c], group = gi == 2 ? nq : 1 + 2 * gi, from0 = kv / 2;
                    float *out[NQ];
                    const float *qp[NQ];
                    int n_kv[NQ];
                    for (int i = 0; i < nq; i++) {
                        for (int j = 0; j < hd; j++) q[i][j] = rnd_f() * 2;
                        qp[i] = q[i];
                        out[i] = o1[i];
                        /* token i / group of the block sees one position more than the
                         * one before it, the last all T (or the first 1 from 0); one
                         * query: 1, 30, 59 or 88 */
                        n_kv[i] = nq == 1 ? 1 + (a * 29) % T : from0 ? 1 + i / group : T - (nq - 1) / group + i / group;
                    }
                    const void *kk = kv % 2 ? (const void *)kh : (const void *)kf;
                    const void *vv = kv % 2 ? (const void *)vh : (const void *)vf;
                    const int kvt = kv % 2 ? ER_KV_F16 : ER_KV_F32;
                    const float scale = 1.0f / sqrtf((float)hd);
                    k->attention_multi(out, qp, n_kv, nq, kk, vv, kvt, STRIDE, hd, scale, scratch);
                    for (int i = 0; i < nq; i++) {
                        k->attention(o2, q[i], kk, vv, kvt, STRIDE, n_kv[i], hd, scale, scratch);
                        for (int j = 0; j < hd; j++) bad += !same_bits(o1[i][j], o2[j]);
                    }
                    calls++;
                }
    CHECK(calls == 480 && bad == 0, "%s: attention_multi differs from attention per query in %d outputs", k->name,
          bad);
}

/* attention_heads against attention per query head: 1 to 5 K/V heads out of
 * a cache of 6, 1 to 5 query heads each (every width of the tables' calls:
 * 4 + 1 in 32 registers, 2 + 2 + 1 in 16, 3 + 2 on NEON),
 * lengths around the blocks of 8 (tails of 0-7 rows) and the prefetch
 * distance, head sizes that take the row-by-row kernel (64, 80, 128, 48:
 * the sums' remainders of 2 and 6 vectors) and one that takes the loop (20). */
static void check_attention_heads(const er_kernels *k) {
    enum { T = 61, HD = 128, NH = 6, STRIDE = NH * HD, NQ = 25 };
    static float kf[T * STRIDE], vf[T * STRIDE];
    static er_f16 kh[T * STRIDE], vh[T * STRIDE];
    static float q[NQ * HD], o1[NQ * HD], o2[HD], o3[NQ * HD], scratch[NQ * T], sc[NQ * T];
    random_kv(kf, vf, kh, vh, T * STRIDE);
    int bad = 0, bad_split = 0, calls = 0;
    static const int hds[] = {64, 80, 128, 48, 20}, nkvs[] = {1, 8, 9, 16, 23, 24, 61};
    for (int kv = 0; kv < 2; kv++)
        for (int a = 0; a < 5; a++)
            for (int nh = 1; nh <= 5; nh += 2)
                for (int group = 1; group <= 5; group++)
                    for (int c = 0; c < 7; c++) {
                        const int hd = hds[a], n_kv = nkvs[c], h0 = (nh + group) % 2; /* first head 0 or 1 */
                        const size_t esz = kv ? 2 : 4, col = (size_t)h0 * hd * esz;
                        for (int i = 0; i < nh * group * hd; i++) q[i] = rnd_f() * 2;
                        const unsigned char *kk = kv ? (const unsigned char *)kh : (const unsigned char *)kf;
                        const unsigned char *vv = kv ? (const unsigned char *)vh : (const unsigned char *)vf;
                        const int kvt = kv ? ER_KV_F16 : ER_KV_F32;
                        const float scale = 1.0f / sqrtf((float)hd);
                        k->attention_heads(o1, q, n_kv, kk + col, vv + col, kvt, STRIDE, nh, group, hd, scale, scratch);
                        for (int i = 0; i < nh * group; i++) {
                            const size_t hc = col + (size_t)(i / group) * hd * esz;
                            k->attention(o2, q + (size_t)i * hd, kk + hc, vv + hc, kvt, STRIDE, n_kv, hd, scale,
                                         scratch);
                            for (int j = 0; j < hd; j++) bad += !same_bits(o1[(size_t)i * hd + j], o2[j]);
                        }
                        /* The same in halves, as threads split a decode step: scores in
                         * ranges (8 rows, then the rest in 16s), sums in two head ranges. */
                        for (int t0 = 0; t0 < n_kv; t0 = t0 == 0 ? 8 : t0 + 16)
                            k->attention_scores(sc, q, n_kv, t0, n_kv - t0 < (t0 ? 16 : 8) ? n_kv : t0 + (t0 ? 16 : 8),
                                                kk + col, kvt, STRIDE, nh, group, hd, scale);
                        const int nh0 = nh / 2;
                        if (nh0) k->attention_sums(o3, sc, n_kv, vv + col, kvt, STRIDE, nh0, group, hd);
                        k->attention_sums(o3 + (size_t)nh0 * group * hd, sc + (size_t)nh0 * group * n_kv, n_kv,
                                          vv + col + (size_t)nh0 * hd * esz, kvt, STRIDE, nh - nh0, group, hd);
                        /* head sizes the split does not take bit for bit: generic's halves */
                        const int exact = hd % ER_ATT_SPLIT_LANES == 0;
                        for (int i = 0; i < nh * group * hd; i++)
                            bad_split += exact ? !same_bits(o3[i], o1[i]) : fabsf(o3[i] - o1[i]) > 1e-4f;
                        calls++;
                    }
    CHECK(calls == 1050 && bad == 0, "%s: attention_heads differs from attention per query head in %d outputs",
          k->name, bad);
    CHECK(bad_split == 0, "%s: attention_scores + attention_sums differ from attention_heads in %d outputs", k->name,
          bad_split);
}

/* ---------------------------------------------------------------- dispatch, FTZ */

static const char *const k_names[] = {"generic", "avx2", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm", "sve"};

static void check_forcing(const char *name, const er_kernels *k) {
    const char *why = NULL;
    setenv("EDGERUN_ISA", name, 1);
    const er_kernels *f = er_kernels_select(NULL, &why);
    CHECK(f == k && why && strstr(why, "EDGERUN_ISA") && strstr(why, name), "EDGERUN_ISA=%s: got %s (%s)", name,
          f ? f->name : "NULL", why ? why : "");
    unsetenv("EDGERUN_ISA");
}

static void check_auto_choice(void) {
    const char *feat = er_cpu_features(), *why = NULL;
    const er_kernels *k = er_kernels_select(NULL, &why);
    const char *want = "generic";
#if defined(__x86_64__)
    if (strstr(feat, "avx2") && strstr(feat, "fma") && strstr(feat, "f16c")) want = "avx2";
    if (!strcmp(want, "avx2") && strstr(feat, "avx512f") && strstr(feat, "avx512vl") && strstr(feat, "avx512bw") &&
        strstr(feat, "avx512vnni"))
        want = "avx512vnni";
#elif defined(__aarch64__)
    if (strstr(feat, "sve>=256")) want = "sve";
    else if (strstr(feat, "asimddp") && strstr(feat, "i8mm")) want = "neon-i8mm";
    else if (strstr(feat, "asimddp")) want = "neon-dotprod";
    else want = "neon";
#endif
    CHECK(k && strcmp(k->name, want) == 0, "automatic choice on '%s' is %s, want %s", feat, k ? k->name : "NULL", want);
    printf("cpu features: %s\nautomatic choice: %s\n", feat[0] ? feat : "(none)", why ? why : "?");
}

static volatile float g_tiny = 1e-30f, g_small = 1e-10f;
static void *ftz_thread(void *arg) {
    er_cpu_set_ftz();
    *(float *)arg = g_tiny * g_small; /* 1e-40: denormal, flushed to 0 under FTZ */
    return NULL;
}

static void check_ftz(void) {
#if defined(__x86_64__) || defined(__aarch64__)
    float in_thread = -1.0f;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, ftz_thread, &in_thread) == 0, "thread");
    pthread_join(th, NULL);
    const float here = g_tiny * g_small;
    CHECK(in_thread == 0.0f, "er_cpu_set_ftz: a denormal product is %g, not flushed", (double)in_thread);
    CHECK(here != 0.0f, "the main thread (no FTZ) keeps denormals: %g", (double)here);
#endif
}

int main(void) {
    const er_kernels *g = er_kernels_generic();
    const char *only = getenv("EDGERUN_TEST_ISA"); /* optional: test one table */
    unsetenv("EDGERUN_ISA");
#if defined(__aarch64__)
    if (strstr(er_cpu_features(), "sve")) printf("sve vector length: %u bits\n", er_sve_vector_bytes() * 8);
#endif
    check_auto_choice();
    check_ftz();
    int tested = 0;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (only && only[0] && strcmp(only, k_names[i]) != 0) continue;
        er_clear_error();
        const er_kernels *k = er_kernels_select(k_names[i], NULL);
        if (!k) {
            printf("table %-13s skipped: %s\n", k_names[i], er_last_error());
            continue;
        }
        const int fails_before = g_test_fail;
        check_table_shape(k, g);
        check_quantizers(k);
        check_quantizers_ftz(k);
        check_dots(k, g);
        check_matmul(k, g);
        check_dequant(k, g);
        check_vnni_twin(k);
        check_elementwise(k, g);
        check_argmax(k);
        check_rope_cs(k, g);
        check_f16_rows(k);
        check_attention(k, g);
        check_attention_multi(k);
        check_attention_heads(k);
        check_forcing(k_names[i], k);
        printf("table %-13s %s\n", k_names[i], g_test_fail == fails_before ? "ok" : "FAILED");
        tested++;
    }
    CHECK(tested >= 1, "no table ran");
    return test_summary();
}
