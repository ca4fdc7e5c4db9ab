/*
 * membw_cuda.c — edgerun-cuda-membw: the GPU's achievable memory bandwidth,
 * the ceiling scripts/bench_cuda.py judges decode speed against.
 *
 * A device-to-device cudaMemcpy of a buffer far larger than the L2 reads and
 * writes every byte once, so (2 x bytes) / time is the DRAM (HBM) rate the
 * copy engines reach; decode, which streams the weights, cannot beat it.
 * Timed with events over several copies after a warm-up; best of 5 rounds.
 * Prints one JSON object. Exit 77 (skip) without a usable device.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "edgerun-cuda-membw: %s: %s\n", #x, cudaGetErrorString(e_));  \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 1024;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "edgerun-cuda-membw: no usable CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    size_t fr = 0, tot = 0;
    CK(cudaMemGetInfo(&fr, &tot));
    size_t bytes = mib << 20;
    if (bytes > fr / 4) bytes = fr / 4 / (1 << 20) * (1 << 20);
    void *a = NULL, *b = NULL;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 0, bytes));
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    const int reps = 10;
    double best = 0;
    for (int round = 0; round < 5; round++) {
        CK(cudaEventRecord(t0, 0));
        for (int i = 0; i < reps; i++) CK(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0));
        CK(cudaEventRecord(t1, 0));
        CK(cudaEventSynchronize(t1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        double gbps = 2.0 * (double)bytes * reps / (ms / 1e3) / 1e9;
        if (gbps > best) best = gbps;
    }
    printf("{\"device\": \"%s\", \"bytes\": %zu, \"copy_gbps\": %.1f}\n", p.name, bytes, best);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
