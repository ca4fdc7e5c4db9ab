/*
 * softmax.c — in-place softmax. Subtracting the max keeps expf finite for
 * any input (logits of 1e4 would overflow otherwise); the normaliser is
 * summed in double so a long row of tiny terms is not swamped.
 */
#include "generic.h"

#include <math.h>

void er_gen_softmax(float *x, int n) {
    if (n <= 0)
        return;
    float mx = x[0];
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        /* every entry masked: no distribution exists; zeros keep NaN out of
         * whatever consumes the row */
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}
