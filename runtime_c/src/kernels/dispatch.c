/*
 * dispatch.c — CPU feature detection and the choice of kernel table.
 *
 * Detection runs once (pthread_once) and fills static buffers: the feature
 * list and one "why" sentence per built table and way of choosing it. That
 * is how er_kernels_select can hand out a static sentence naming the CPU's
 * features without allocating — a fixed set of literals could not include
 * the features, and a thread-local buffer would die with the thread while
 * the model that stores the pointer lives on. The buffers are written only
 * inside the once-routine, so concurrent readers never see a partial string.
 *
 * Adding an ISA table: declare its er_kernels_<isa>() getter, add a row to
 * k_built (best first) under the build's #if, with a predicate over
 * cpu_flags. Nothing else changes. The #if conditions here must match the
 * ones in meson.build that build the ISA libraries.
 */
#include "edgerun.h" /* first: er_cpu_features is exported (ER_API) */
#include "kernels.h"
#include "generic/generic.h"
#include "../error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define ER_BUILD_AVX2 1
const er_kernels *er_kernels_avx2(void);
const er_kernels *er_kernels_avx512vnni(void);
#endif
#if defined(__aarch64__) && defined(__GNUC__)
#define ER_BUILD_ARM 1
const er_kernels *er_kernels_neon(void);
const er_kernels *er_kernels_neon_dotprod(void);
const er_kernels *er_kernels_neon_i8mm(void);
const er_kernels *er_kernels_sve(void);
/* SVE vector length in bytes (sve/vl_sve.c); call only when HWCAP says SVE */
unsigned er_sve_vector_bytes(void);
#endif

/* Detected features as bits, for the tables' "can this CPU run me" tests. */
enum {
    CPU_ASIMD = 1u << 0,
    CPU_ASIMDDP = 1u << 1,
    CPU_FPHP = 1u << 2,
    CPU_ASIMDHP = 1u << 3,
    CPU_SVE = 1u << 4,
    CPU_SVE2 = 1u << 5,
    CPU_I8MM = 1u << 6,
    CPU_AVX = 1u << 7,
    CPU_AVX2 = 1u << 8,
    CPU_FMA = 1u << 9,
    CPU_F16C = 1u << 10,
    CPU_AVX512F = 1u << 11,
    CPU_SVE256 = 1u << 12, /* SVE vectors of 256 bits or more */
    CPU_AVX512VL = 1u << 13,
    CPU_AVX512BW = 1u << 14,
    CPU_AVX512VNNI = 1u << 15,
};

static const struct {
    unsigned bit;
    const char *name;
} k_feature_names[] = {
    {CPU_ASIMD, "asimd"}, {CPU_ASIMDDP, "asimddp"}, {CPU_FPHP, "fphp"},   {CPU_ASIMDHP, "asimdhp"},
    {CPU_SVE, "sve"},     {CPU_SVE2, "sve2"},       {CPU_I8MM, "i8mm"},   {CPU_AVX, "avx"},
    {CPU_AVX2, "avx2"},   {CPU_FMA, "fma"},         {CPU_F16C, "f16c"},   {CPU_AVX512F, "avx512f"},
    {CPU_SVE256, "sve>=256"}, {CPU_AVX512VL, "avx512vl"}, {CPU_AVX512BW, "avx512bw"},
    {CPU_AVX512VNNI, "avx512vnni"},
};

typedef struct {
    const char *name;
    const er_kernels *(*table)(void);
    unsigned needs;  /* every bit must be present; 0 = runs anywhere */
    unsigned prefer; /* further bits automatic choice wants (a name still forces it) */
} isa_entry;

/* Tables compiled into this build, best first; generic must stay last as
 * the fallback that always runs. */
static const isa_entry k_built[] = {
#if ER_BUILD_AVX2
    /* avx2 with VPDPBUSD in the repacked integer matmuls: EVEX-encoded, so
     * it needs the OS to save AVX-512 state (zmm_ok) even on ymm registers */
    {"avx512vnni", er_kernels_avx512vnni,
     CPU_AVX | CPU_AVX2 | CPU_FMA | CPU_F16C | CPU_AVX512F | CPU_AVX512VL | CPU_AVX512BW | CPU_AVX512VNNI, 0},
    {"avx2", er_kernels_avx2, CPU_AVX | CPU_AVX2 | CPU_FMA | CPU_F16C, 0},
#endif
#if ER_BUILD_ARM
    /* At 128 bits SVE holds what NEON holds: the sve table's layouts are
     * then the NEON ones (4 rows), and neon-i8mm adds SMMLA prefill while
     * plain SVE lacks NEON's SRI/BSL for the K-quants' bit merges (more
     * instructions per record, docs/PERFORMANCE.md), so the NEON tables are
     * preferred there. */
    {"sve", er_kernels_sve, CPU_ASIMD | CPU_SVE, CPU_SVE256},
    /* neon-dotprod plus SMMLA prefill on the repacked Q8_0/Q4_0 layouts */
    {"neon-i8mm", er_kernels_neon_i8mm, CPU_ASIMD | CPU_ASIMDDP | CPU_I8MM, 0},
    {"neon-dotprod", er_kernels_neon_dotprod, CPU_ASIMD | CPU_ASIMDDP, 0},
    {"neon", er_kernels_neon, CPU_ASIMD, 0},
#endif
    {"generic", er_kernels_generic, 0, 0},
};
#define N_BUILT (sizeof k_built / sizeof k_built[0])

/* Every name EDGERUN_ISA may carry in some build, so a typo ("nonexistent")
 * is told apart from a real table this build simply lacks ("avx2" here). */
static const char *const k_known[] = {"generic", "neon", "neon-dotprod", "neon-i8mm", "sve", "avx2", "avx512vnni"};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static unsigned s_flags;
static char s_features[128];
static char s_built_names[64];
static char s_reason_auto[N_BUILT][256];
static char s_reason_named[N_BUILT][96];
static char s_reason_env[N_BUILT][96];

#if defined(__x86_64__) && defined(__GNUC__)
/* XCR0 says which register state the OS saves on context switch: a CPU
 * with AVX but an OS that does not save YMM would corrupt registers. */
static unsigned long long read_xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

#if ER_BUILD_AVX2
int er_x86_decode_prefetch;

/* The decode kernels' own prefetch of the weight stream (er_kq8_prefetch,
 * kq_x8_avx2.h) by CPU, measured one thread on the 110M shapes' matrices
 * from DRAM against a plain read of the same bytes: on Zen 5 (AMD family
 * 0x1A) it took Q6_K from 0.75-0.84 of the read rate to 0.91-1.05 and a
 * 110M Q4_0 token from 2.37 to 1.9-2.05 ms; on Zen 4 (family 0x19) the
 * hardware prefetchers keep up alone and the same instructions cost: Q8_0
 * 16-row 2.85 against 2.39 ms, Q4_K and Q6_K 1.3-1.8x, IQ4_XS and Q3_K a
 * third of the DRAM rate (the Q4_K/Q5_K/Q6_K kernels as rewritten since:
 * a plain read's 0.75-0.93 off, 0.52-0.71 on). So off for AMD family 0x19 (Zen 4, and Zen 3,
 * which shares the family and was not measured) and on elsewhere, as the
 * kernels were tuned before Zen 4 was measured. EDGERUN_DECODE_PREFETCH=0|1
 * overrides it, to measure a new CPU both ways. */
static int x86_decode_prefetch(void) {
    const char *env = getenv("EDGERUN_DECODE_PREFETCH");
    if (env && (!strcmp(env, "0") || !strcmp(env, "1")))
        return env[0] == '1';
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) /* AuthenticAMD */
        return 1;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 1;
    const unsigned base = (a >> 8) & 0xf, family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
    return family != 0x19;
}
#endif

static unsigned detect_flags(void) {
    unsigned f = 0;
#if defined(__aarch64__) && defined(__linux__)
    /* Bit positions from the Linux arm64 ABI (asm/hwcap.h); spelled out
     * because older libc headers lack the newer names. */
    unsigned long hw = getauxval(AT_HWCAP);
    unsigned long hw2 = getauxval(AT_HWCAP2);
    if (hw & (1ul << 1)) f |= CPU_ASIMD;
    if (hw & (1ul << 9)) f |= CPU_FPHP;
    if (hw & (1ul << 10)) f |= CPU_ASIMDHP;
    if (hw & (1ul << 20)) f |= CPU_ASIMDDP;
    if (hw & (1ul << 22)) f |= CPU_SVE;
    if (hw2 & (1ul << 1)) f |= CPU_SVE2;
    if (hw2 & (1ul << 13)) f |= CPU_I8MM;
#elif defined(__aarch64__)
    /* No auxv (macOS, BSD): trust what the compiler was told the target has. */
    f |= CPU_ASIMD;
#if defined(__ARM_FEATURE_DOTPROD)
    f |= CPU_ASIMDDP;
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
    f |= CPU_FPHP | CPU_ASIMDHP;
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
    f |= CPU_I8MM;
#endif
#elif defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        const int osxsave = (c >> 27) & 1;
        const unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
        const int ymm_ok = (xcr0 & 0x6) == 0x6;
        const int zmm_ok = (xcr0 & 0xe6) == 0xe6;
        if (ymm_ok && ((c >> 28) & 1)) f |= CPU_AVX;
        if (ymm_ok && ((c >> 12) & 1)) f |= CPU_FMA;
        if (ymm_ok && ((c >> 29) & 1)) f |= CPU_F16C;
        if (__get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            if (ymm_ok && ((b >> 5) & 1)) f |= CPU_AVX2;
            if (zmm_ok && ((b >> 16) & 1)) f |= CPU_AVX512F;
            if (zmm_ok && ((b >> 30) & 1)) f |= CPU_AVX512BW;
            if (zmm_ok && ((b >> 31) & 1)) f |= CPU_AVX512VL;
            if (zmm_ok && ((c >> 11) & 1)) f |= CPU_AVX512VNNI;
        }
    }
#endif
    return f;
}

/* Appends `s` to buf with a separating space, never overflowing. */
static void append_word(char *buf, size_t cap, const char *s) {
    size_t len = strlen(buf);
    if (len + (len ? 1 : 0) + strlen(s) + 1 > cap)
        return;
    if (len)
        buf[len++] = ' ';
    memcpy(buf + len, s, strlen(s) + 1);
}

#if ER_BUILD_AVX2
/* Appends `s` to buf as it is, never overflowing (cut short if it must). */
static void append_tail(char *buf, size_t cap, const char *s) {
    const size_t len = strlen(buf);
    if (len + 1 < cap)
        snprintf(buf + len, cap - len, "%s", s);
}
#endif

static int runs_here(const isa_entry *e) { return (s_flags & e->needs) == e->needs; }
static int preferred_here(const isa_entry *e) {
    const unsigned all = e->needs | e->prefer;
    return (s_flags & all) == all;
}

static void init_once(void) {
    s_flags = detect_flags();
#if ER_BUILD_AVX2
    er_x86_decode_prefetch = x86_decode_prefetch();
#endif
#if ER_BUILD_ARM
    if ((s_flags & CPU_SVE) && er_sve_vector_bytes() >= 32)
        s_flags |= CPU_SVE256;
#endif
    for (size_t i = 0; i < sizeof k_feature_names / sizeof k_feature_names[0]; i++)
        if (s_flags & k_feature_names[i].bit)
            append_word(s_features, sizeof s_features, k_feature_names[i].name);
    for (size_t i = 0; i < N_BUILT; i++)
        append_word(s_built_names, sizeof s_built_names, k_built[i].name);

    const char *feat = s_features[0] ? s_features : "none";
    for (size_t i = 0; i < N_BUILT; i++) {
        const char *nm = k_built[i].name;
        if (k_built[i].needs)
            snprintf(s_reason_auto[i], sizeof s_reason_auto[i],
                     "%s: best table built for this CPU (features: %s)", nm, feat);
        else if (N_BUILT > 1)
            snprintf(s_reason_auto[i], sizeof s_reason_auto[i],
                     "%s: this CPU lacks what the built SIMD tables need (features: %s)", nm, feat);
        else
            snprintf(s_reason_auto[i], sizeof s_reason_auto[i],
                     "%s: no SIMD table is built for this CPU (features: %s)", nm, feat);
        snprintf(s_reason_named[i], sizeof s_reason_named[i], "%s: requested by the caller", nm);
        snprintf(s_reason_env[i], sizeof s_reason_env[i], "%s: forced by EDGERUN_ISA", nm);
#if ER_BUILD_AVX2
        /* the SIMD tables' decode kernels say whether they prefetch (edgerun info shows it) */
        if (k_built[i].needs) {
            const char *pf = er_x86_decode_prefetch ? "; decode prefetch on" : "; decode prefetch off";
            append_tail(s_reason_auto[i], sizeof s_reason_auto[i], pf);
            append_tail(s_reason_named[i], sizeof s_reason_named[i], pf);
            append_tail(s_reason_env[i], sizeof s_reason_env[i], pf);
        }
#endif
    }
}

const char *er_cpu_features(void) {
    pthread_once(&s_once, init_once);
    return s_features;
}

static const er_kernels *pick_best(const char **reason) {
    for (size_t i = 0; i < N_BUILT; i++) {
        if (preferred_here(&k_built[i])) {
            if (reason)
                *reason = s_reason_auto[i];
            return k_built[i].table();
        }
    }
    /* unreachable while generic (needs = 0) is in k_built */
    er_fail(ER_EUNSUPPORTED, "no kernel table in this build runs on this CPU (features: %s)", s_features);
    return NULL;
}

const er_kernels *er_kernels_select(const char *want, const char **reason) {
    pthread_once(&s_once, init_once);
    int from_env = 0;
    if (!want || !want[0]) {
        const char *env = getenv("EDGERUN_ISA");
        if (!env || !env[0] || strcmp(env, "auto") == 0)
            return pick_best(reason);
        want = env;
        from_env = 1;
    }
    if (strcmp(want, "auto") == 0)
        return pick_best(reason);

    const char *feat = s_features[0] ? s_features : "none";
    const char *src = from_env ? "EDGERUN_ISA asks for" : "requested";
    for (size_t i = 0; i < N_BUILT; i++) {
        if (strcmp(want, k_built[i].name) != 0)
            continue;
        if (!runs_here(&k_built[i])) {
            er_fail(ER_EUNSUPPORTED,
                    "%s kernel table '%s', but this CPU lacks the features it needs "
                    "(CPU features: %s; tables built: %s)",
                    src, want, feat, s_built_names);
            return NULL;
        }
        if (reason)
            *reason = from_env ? s_reason_env[i] : s_reason_named[i];
        return k_built[i].table();
    }
    for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++) {
        if (strcmp(want, k_known[i]) == 0) {
            er_fail(ER_EUNSUPPORTED,
                    "%s kernel table '%s', which this build does not include "
                    "(tables built: %s; CPU features: %s)",
                    src, want, s_built_names, feat);
            return NULL;
        }
    }
    er_fail(ER_EUNSUPPORTED,
            "%s unknown kernel table '%.40s' (known names: generic neon neon-dotprod neon-i8mm sve avx2 avx512vnni "
            "auto; tables built: %s; CPU features: %s)",
            src, want, s_built_names, feat);
    return NULL;
}
