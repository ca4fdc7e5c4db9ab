/* add.c — residual add y += x (y and x may be the same row). */
#include "generic.h"

void er_gen_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++)
        y[i] += x[i];
}
