/*
 * shortconv.c — one position of LFM2's gated short convolution, per channel
 * c of n: B*x of this position goes into its ring row (pos % lc), then
 * y[c] = C[c] * sum_j w[c][j] * (B*x)[pos - lc + 1 + j], taps before
 * position 0 counting as zero (transformers pads the sequence's left with
 * lc - 1 zeros). The ring holds the last lc positions' B*x; positions are
 * taken in order, so a prefill chunk runs them one after another and its
 * later positions never overwrite a row an earlier one still reads.
 */
#include "generic.h"

void er_gen_shortconv(float *y, const float *bcx, float *ring, const float *w, int n, int lc, int pos) {
    const float *b = bcx, *cg = bcx + n, *x = bcx + 2 * n;
    float *row = ring + (size_t)(pos % lc) * (size_t)n;
    for (int c = 0; c < n; c++) row[c] = b[c] * x[c];
    const int first = pos - lc + 1 < 0 ? lc - 1 - pos : 0; /* taps before position 0 are zero */
    for (int c = 0; c < n; c++) {
        float acc = 0.0f;
        for (int j = first; j < lc; j++) {
            const int p = pos - lc + 1 + j;
            acc += w[(size_t)c * (size_t)lc + (size_t)j] * ring[(size_t)(p % lc) * (size_t)n + (size_t)c];
        }
        y[c] = cg[c] * acc;
    }
}
