/*
 * test_util.h — the tiny check framework every C test shares.
 *
 * Each test is one translation unit: include this once, call CHECK(...) as
 * often as needed (failures are reported and counted, the test keeps going so
 * one run shows every broken case), and `return test_summary();` from main.
 * meson treats the nonzero exit status as failure and 77 as "skipped".
 */
#ifndef ER_TEST_UTIL_H
#define ER_TEST_UTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int g_test_pass, g_test_fail;

/* CHECK(cond, "printf format", args...): the message explains a failure. */
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            g_test_pass++;                                                      \
        } else {                                                                \
            g_test_fail++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                      \
    CHECK((int64_t)(a) == (int64_t)(b), "%s = %" PRId64 ", expected %" PRId64,  \
          #a, (int64_t)(a), (int64_t)(b))

#define CHECK_EQ_U64(a, b)                                                      \
    CHECK((uint64_t)(a) == (uint64_t)(b), "%s = %" PRIu64 ", expected %" PRIu64, \
          #a, (uint64_t)(a), (uint64_t)(b))

/* `hay` (NUL-terminated) contains `needle`. */
#define CHECK_CONTAINS(hay, needle)                                             \
    CHECK(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

/* Prints the tally; exit status for main. */
static inline int test_summary(void) {
    printf("%d passed, %d failed\n", g_test_pass, g_test_fail);
    return g_test_fail ? 1 : 0;
}

#endif
