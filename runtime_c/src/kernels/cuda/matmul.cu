/*
 * matmul.cu — erk_matmul: picks the kernel for a weight type and batch size.
 * m = 1 (decode) is the bandwidth-bound matvec: integer __dp4a kernels for
 * Q8_0/Q4_0/Q4_K on x quantized the CPU's way, the vector F16 kernel,
 * and the simple kernel for the rest. m > 1 (prefill) goes to the tensor-core
 * matmul; what it does not take (F32 weights, kept in f32) runs the matvec
 * over the m rows.
 */
#include "kernels/cuda/erk_common.cuh"

#include <stdint.h>

extern "C" size_t erk_matmul_scratch_bytes(int wtype, int m_max, int n_in_max) {
    if (m_max < 1 || n_in_max < 1 || !erk_row_bytes(wtype, n_in_max))
        return 0;
    const size_t a = erk_act_bytes(m_max, n_in_max);
    const size_t t = erk_matmul_tc_scratch_bytes(m_max, n_in_max);
    return a > t ? a : t;
}

extern "C" void erk_matmul(erk_stream st, int wtype, const void *w, int n_in, int n_out, const float *x, int m,
                           float *y, int accumulate, void *scratch) {
    if (m < 1 || n_out < 1 || m > 65535 || !erk_row_bytes(wtype, n_in))
        return;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
    if (m > 1 && erk_matmul_tc(s, wtype, w, n_in, n_out, x, m, y, accumulate, scratch))
        return;
    switch (wtype) {
    case ER_W_Q8_0: case ER_W_Q4_0: case ER_W_Q4_K: {
        /* decode quantizes x inside the matvec (one launch instead of two:
         * a decode step is launch-bound on small models); wider rows and
         * the m > 1 fallback go through the scratch */
        erk_act a = {nullptr, nullptr, nullptr};
        if (m > 1 || n_in > ERK_FUSED_MAX_N) {
            a = erk_act_carve(scratch, m, n_in);
            erk_quantize_act(s, wtype, x, m, n_in, a);
        }
        if (wtype == ER_W_Q8_0)
            erk_matvec_q8_0(s, w, n_in, n_out, x, a, m, y, accumulate);
        else if (wtype == ER_W_Q4_0)
            erk_matvec_q4_0(s, w, n_in, n_out, x, a, m, y, accumulate);
        else
            erk_matvec_q4_k(s, w, n_in, n_out, x, a, m, y, accumulate);
        return;
    }
    case ER_W_F16:
        if (n_in % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
            erk_matvec_f16(s, w, n_in, n_out, x, m, y, accumulate);
            return;
        }
        break;
    default: break;
    }
    erk_matvec_simple(s, wtype, w, n_in, n_out, x, m, y, accumulate);
}
