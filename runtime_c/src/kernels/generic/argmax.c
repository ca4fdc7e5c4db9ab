/* argmax.c — greedy sampling's pick (kernels.h, argmax). */
#include "generic.h"

/* The plain loop is one compare chain, ~3 cycles an element on x86 (27 us
 * over 32,000 logits); here eight independent ones, lane j taking every
 * eighth element from j + 1, each keeping its first maximum and where it
 * was: ~11 us. The largest value is the same in any order (a max is
 * exact), and the first index holding it is the least of the lanes' that
 * hold it. */
int32_t er_gen_argmax(const float *x, int n) {
    if (x[0] != x[0]) return 0;
    float m[8];
    int32_t at[8];
    for (int j = 0; j < 8; j++) m[j] = x[0], at[j] = 0;
    int i = 1;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            if (x[i + j] > m[j]) m[j] = x[i + j], at[j] = i + j;
    for (; i < n; i++)
        if (x[i] > m[0]) m[0] = x[i], at[0] = i;
    int32_t best = at[0];
    float top = m[0];
    for (int j = 1; j < 8; j++)
        if (m[j] > top || (m[j] == top && at[j] < best)) top = m[j], best = at[j];
    return best;
}
