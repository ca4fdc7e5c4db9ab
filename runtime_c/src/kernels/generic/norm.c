/*
 * norm.c — RMSNorm. The sum of squares is accumulated in double (as ggml
 * does) because a 4096-wide float sum loses digits the 1e-4 comparison with
 * transformers needs; the scale itself is a float, like both references.
 */
#include "generic.h"

#include <math.h>

void er_gen_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    if (n <= 0)
        return;
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)(x[i] * x[i]);
    const float mean = (float)(ss / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    /* (x*scale)*w in this order, matching transformers' LlamaRMSNorm; y may
     * alias x, which is safe because element i is read before it is written */
    for (int i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}
