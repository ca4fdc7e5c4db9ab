/*
 * sample_cuda.c — the device half of sampling on a CUDA model.
 *
 * The logits never leave the GPU for greedy decoding: every step already
 * ends with the plain argmax (forward_cuda.c), so greedy sampling without a
 * penalty costs nothing here; with one, erk_argmax applies it and returns
 * one id. With a temperature, erk_rank
 * orders all logits (penalised, divided by the temperature, best first,
 * lower id on ties: sampler.c's order) and only the prefix that top-k
 * keeps comes back, into the session's candidate arrays, where sampler.c
 * runs top-p, min-p and the draw with the session's RNG — the CPU
 * sampler's own code, so a seed draws the same token on both backends
 * when the logits agree.
 */
#include <string.h>

#include "cuda_internal.h"
#include "error.h"

static int sample_locked(er_session *s, const er_sampling *p, const int32_t *pen, int n_pen, int32_t *chosen,
                         int *n_ranked) {
    er_model *md = s->model;
    er_cuda *c = md->cuda;
    dev_slot *sl = &c->slots[s->slot];
    const int V = md->d.n_vocab;
    cudaStream_t st = c->stream;
    erk_stream ks = (erk_stream)st;
    const float penalty = p->repeat_penalty;
    if (penalty == 1.0f || n_pen < 0) n_pen = 0;
    if (n_pen > md->d.n_ctx) n_pen = md->d.n_ctx; /* cannot happen: distinct ids of at most n_ctx tokens */

    if (p->temperature <= 0.0f && n_pen == 0 && sl->greedy_valid) {
        /* the step already ran this exact argmax (no penalty) */
        *chosen = sl->greedy;
        *n_ranked = 0;
        return ER_OK;
    }
    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    if (n_pen > 0) {
        memcpy(c->h_pen, pen, (size_t)n_pen * sizeof(int32_t));
        CUDA_CHECK(cudaMemcpyAsync(c->pen_ids, c->h_pen, (size_t)n_pen * sizeof(int32_t), cudaMemcpyHostToDevice, st),
                   "copying penalised ids to the GPU");
    }
    if (p->temperature <= 0.0f) {
        erk_argmax(ks, sl->logits, V, c->pen_ids, n_pen, penalty, c->argmax_out, c->sample_scratch);
        CUDA_CHECK_SYNC(cudaGetLastError(), "launching argmax", st);
        CUDA_CHECK_SYNC(cudaMemcpyAsync(c->h_out, c->argmax_out, sizeof(int32_t), cudaMemcpyDeviceToHost, st),
                        "reading the sampled id", st);
        CUDA_CHECK_SYNC(cudaStreamSynchronize(st), "greedy sampling", st);
        if (*c->h_out < 0 || *c->h_out >= V)
            return er_fail(ER_EIO, "CUDA argmax returned id %d outside [0, %d)", *c->h_out, V);
        *chosen = *c->h_out;
        *n_ranked = 0;
        return ER_OK;
    }
    erk_rank(ks, sl->logits, V, c->pen_ids, n_pen, penalty, p->temperature, c->rank_vals, c->rank_ids,
             c->sample_scratch);
    CUDA_CHECK_SYNC(cudaGetLastError(), "launching the ranking", st);
    int n = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    CUDA_CHECK_SYNC(cudaMemcpyAsync(s->cand_p, c->rank_vals, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, st),
                    "reading ranked logits", st);
    CUDA_CHECK_SYNC(cudaMemcpyAsync(s->cand_id, c->rank_ids, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost, st),
                    "reading ranked ids", st);
    CUDA_CHECK_SYNC(cudaStreamSynchronize(st), "sampling", st);
    for (int i = 0; i < n; i++)
        if (s->cand_id[i] < 0 || s->cand_id[i] >= V)
            return er_fail(ER_EIO, "CUDA ranking returned id %d outside [0, %d)", s->cand_id[i], V);
    *n_ranked = n;
    return ER_OK;
}

int er_cuda_sample(er_session *s, const er_sampling *p, const int32_t *pen_ids, int n_pen, int32_t *chosen,
                   int *n_ranked) {
    /* the stream, the scratch and the staging are the model's, shared with
     * every session's steps */
    pthread_mutex_lock(&s->model->step_lock);
    int rc = sample_locked(s, p, pen_ids, n_pen, chosen, n_ranked);
    pthread_mutex_unlock(&s->model->step_lock);
    return rc;
}
