/*
 * vnni_ports.c — how many cycles a block of 16 independent 512-bit
 * VPDPBUSDs takes alone and beside the other instructions a batched Q4_0
 * tile issues per block (a benchmark of the CPU, not of edgerun; not part
 * of the runtime). It answers whether the float tail of the 4-row product
 * (a VMULPS and a VMULPS or FMA per row and block: x86/repack_avx2.c and
 * repack_q32_x16_avx512.c) runs beside VPDPBUSD or in its place, which
 * decides the fastest 4-slot step one thread can take (docs/PERFORMANCE.md,
 * "What one thread can do with four slots"). Usage, on an AVX-512 VNNI CPU:
 *   cc -O2 scripts/vnni_ports.c -o /tmp/vnni_ports && /tmp/vnni_ports
 * Each figure is the fastest of 5 runs (a shared machine only slows one).
 * Cycles come from the TSC rate measured against a chain of dependent adds
 * (one a cycle on every x86 core of the last decade), so a CPU whose core
 * clock differs from its TSC still reads in core cycles.
 */
#include <stdio.h>
#include <time.h>

#define REPS 4000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* the body runs REPS times; every register it writes is its own chain
 * (zmm0-15 VPDPBUSD accumulators, zmm16-19 the other instructions'), and
 * zmm30/31, zeroed first (zero idioms: no execution pipe), are read-only
 * operands, so nothing waits on a latency */
#define CLOBBER                                                                                                  \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",   \
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm30", "xmm31"
#define TIME(name, body)                                                                                         \
    do {                                                                                                         \
        double best = 1e30;                                                                                      \
        for (int trial = 0; trial < 5; trial++) {                                                                \
            const double t0 = now();                                                                             \
            for (long i = 0; i < REPS; i++) __asm__ volatile(ZERO body ::: CLOBBER);                            \
            if (now() - t0 < best) best = now() - t0;                                                            \
        }                                                                                                        \
        printf("%-34s %6.2f cycles\n", name, best * ghz * 1e9 / (double)REPS);                                   \
    } while (0)

#define ZERO "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"
#define DP(r) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define DP16 DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7) DP(8) DP(9) DP(10) DP(11) DP(12) DP(13) DP(14) DP(15)
#define OP4(op) op(16) op(17) op(18) op(19)
#define MUL(r) "vmulps %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define FMA(r) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define ADD(r) "vaddps %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define CVT(r) "vcvtdq2ps %%zmm30, %%zmm" #r "\n\t"
#define AND(r) "vpandd %%zmm30, %%zmm31, %%zmm" #r "\n\t"

/* AVX-512 on for this function alone: only then may asm name zmm16-31 */
__attribute__((target("avx512f"))) int main(void) {
    /* core clock: 2 dependent adds per iteration, one cycle each */
    long x = 0;
    double fastest = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        const double t0 = now();
        for (long i = 0; i < REPS; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0" : "+r"(x));
        if (now() - t0 < fastest) fastest = now() - t0;
    }
    const double ghz = 2.0 * (double)REPS / fastest / 1e9;
    printf("core clock ~%.2f GHz (dependent adds)\n", ghz);
    TIME("16 VPDPBUSD zmm", DP16);
    TIME("16 VPDPBUSD + 4 VMULPS", DP16 OP4(MUL));
    TIME("16 VPDPBUSD + 4 VFMADD231PS", DP16 OP4(FMA));
    TIME("16 VPDPBUSD + 4 VADDPS", DP16 OP4(ADD));
    TIME("16 VPDPBUSD + 4 VCVTDQ2PS", DP16 OP4(CVT));
    TIME("16 VPDPBUSD + 4 VPANDD", DP16 OP4(AND));
    TIME("16 VMULPS alone", MUL(0) MUL(1) MUL(2) MUL(3) MUL(4) MUL(5) MUL(6) MUL(7) MUL(8) MUL(9) MUL(10) MUL(11)
                                MUL(12) MUL(13) MUL(14) MUL(15));
    return 0;
}
