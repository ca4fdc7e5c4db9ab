/*
 * cpu.c — per-thread floating-point mode. Compiled for the baseline ISA:
 * MXCSR exists on every x86-64 and FPCR on every aarch64 CPU.
 */
#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

void er_cpu_set_ftz(void) {
#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE__))
    /* bit 15 FTZ: denormal results become zero; bit 6 DAZ: denormal
     * operands read as zero. F16C conversions ignore both, so F16 KV-cache
     * values stay bit-exact. */
    _mm_setcsr(_mm_getcsr() | 0x8040u);
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    /* FPCR.FZ (bit 24) flushes single/double denormals, inputs and results,
     * for both scalar and NEON/SVE arithmetic. FZ16 is left alone: no
     * kernel does half-precision arithmetic. */
    unsigned long long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (1ull << 24)));
#endif
}
