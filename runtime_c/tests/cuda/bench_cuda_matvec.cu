/*
 * bench_cuda_matvec.cu — decode matvec speed (erk_matmul with m = 1, the
 * activation quantization included) on the 110M model's shapes, as bytes of
 * weights streamed per second and % of the GPU's peak memory bandwidth.
 *
 * Each call reads a different copy of the matrix from a buffer several times
 * the L2 size, so the numbers are DRAM numbers, not L2 hits; the calls are
 * captured in one CUDA graph so CPU launch overhead is not what is measured
 * (inside a decode step's graph the same holds). Exits 77 without a GPU.
 *
 * usage: bench_cuda_matvec [iterations]
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "kernels/kernels.h"
}
#include "kernels/cuda/cuda_kernels.h"

#define CK(call)                                                                                      \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

int main(int argc, char **argv) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 1 || iters > 100000) {
        fprintf(stderr, "iterations must be in [1, 100000]\n");
        return 2;
    }
    int dev = 0, clock_khz = 0, bus_bits = 0, l2 = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev));
    CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    /* DDR: two transfers per clock */
    const double peak = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
    printf("device: %s, %d SMs, L2 %d MiB, peak memory bandwidth %.0f GB/s (from clock x bus width)\n", prop.name,
           prop.multiProcessorCount, l2 >> 20, peak / 1e9);

    const size_t pool_bytes = std::max<size_t>((size_t)8 * (size_t)l2, (size_t)512 << 20);
    uint8_t *pool = nullptr;
    CK(cudaMalloc(&pool, pool_bytes));
    const int shapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}; /* n_out x n_in */
    const int types[] = {ER_W_Q8_0, ER_W_Q4_0, ER_W_Q4_K, ER_W_F16, ER_W_Q6_K};
    const char *names[ER_W_COUNT] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
    float *x = nullptr, *y = nullptr;
    CK(cudaMalloc(&x, 2048 * sizeof(float)));
    CK(cudaMalloc(&y, 32000 * sizeof(float)));
    std::vector<float> hx(2048);
    for (size_t i = 0; i < hx.size(); i++)
        hx[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    CK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    printf("%-5s %13s %10s %10s %9s\n", "type", "n_out x n_in", "us/call", "GB/s", "% peak");
    for (int t : types)
        for (auto &s : shapes) {
            const int n_out = s[0], n_in = s[1];
            const size_t rb = erk_row_bytes(t, n_in), mat = rb * (size_t)n_out;
            const size_t copies = pool_bytes / mat;
            /* any bytes do for timing, but keep scales finite: zeros decode to 0 */
            CK(cudaMemset(pool, 0, copies * mat));
            void *scratch = nullptr;
            CK(cudaMalloc(&scratch, erk_matmul_scratch_bytes(t, 1, n_in)));
            /* warm-up (also loads the modules) */
            for (int i = 0; i < 5; i++)
                erk_matmul((erk_stream)st, t, pool + (i % copies) * mat, n_in, n_out, x, 1, y, 0, scratch);
            CK(cudaStreamSynchronize(st));
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < iters; i++)
                erk_matmul((erk_stream)st, t, pool + ((size_t)i % copies) * mat, n_in, n_out, x, 1, y, 0, scratch);
            CK(cudaStreamEndCapture(st, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            CK(cudaGraphLaunch(ge, st)); /* first launch uploads the graph */
            CK(cudaStreamSynchronize(st));
            CK(cudaEventRecord(e0, st));
            CK(cudaGraphLaunch(ge, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaStreamSynchronize(st));
            CK(cudaGetLastError());
            float ms = 0.0f;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const double sec = ms / 1e3 / iters, bps = (double)mat / sec;
            printf("%-5s %6d x %5d %10.2f %10.1f %8.1f%%\n", names[t], n_out, n_in, sec * 1e6, bps / 1e9,
                   100.0 * bps / peak);
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
            CK(cudaFree(scratch));
        }
    CK(cudaFree(pool));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaStreamDestroy(st));
    return 0;
}
