/*
 * forward_cuda.c — the transformer step on the GPU.
 *
 * er_cuda_launch_forward enqueues the whole step on the backend's stream
 * and touches nothing on the host, so the same function runs a prefill
 * chunk eagerly and is recorded once per session slot as the decode graph
 * (backend.c): every value that changes between steps (position, token
 * ids) is read by the kernels from the slot's device words. The residual
 * additions are fused into the output projections (accumulate = 1).
 */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"
#include "error.h"

void er_cuda_launch_forward(er_cuda *c, const er_model *md, dev_slot *sl, int m, int rows, float *logits) {
    const er_dims *d = &md->d;
    erk_stream st = (erk_stream)c->stream;
    const int E = d->n_embd, qd = d->n_head * d->head_dim, kvd = (int)d->kv_row, F = d->n_ff;
    const int32_t *pos = sl->words, *ids = sl->words + 1;
    const float eps = md->hp.rms_eps, base = md->hp.rope_freq_base;
    const float scale = 1.0f / sqrtf((float)d->head_dim);
    void *mm = c->mm_scratch;

    erk_embed(st, c->tok_embd.wtype, c->tok_embd.w, E, ids, m, c->x);
    for (int l = 0; l < d->n_layer; l++) {
        const dev_layer *L = &c->layers[l];
        uint8_t *kc = (uint8_t *)sl->k_cache + (size_t)l * c->kv_layer_bytes;
        uint8_t *vc = (uint8_t *)sl->v_cache + (size_t)l * c->kv_layer_bytes;

        /* attention block */
        erk_rmsnorm(st, c->xb, c->x, L->attn_norm, m, E, eps);
        erk_matmul(st, L->wq.wtype, L->wq.w, L->wq.n_in, L->wq.n_out, c->xb, m, c->q, 0, mm);
        erk_matmul(st, L->wk.wtype, L->wk.w, L->wk.n_in, L->wk.n_out, c->xb, m, c->k, 0, mm);
        erk_matmul(st, L->wv.wtype, L->wv.w, L->wv.n_in, L->wv.n_out, c->xb, m, c->v, 0, mm);
        if (L->bq) erk_bias_add(st, c->q, L->bq, m, qd);
        if (L->bk) erk_bias_add(st, c->k, L->bk, m, kvd);
        if (L->bv) erk_bias_add(st, c->v, L->bv, m, kvd);
        erk_rope(st, c->q, m, qd, d->n_head, d->head_dim, pos, base, md->rope_neox);
        erk_rope(st, c->k, m, kvd, d->n_head_kv, d->head_dim, pos, base, md->rope_neox);
        erk_kv_store(st, c->k, c->v, m, kvd, kc, vc, d->kv_type, pos);
        erk_attention(st, c->att, c->q, kc, vc, d->kv_type, m, d->n_head, d->n_head_kv, d->head_dim, d->n_ctx, pos,
                      scale, c->att_scratch);
        erk_matmul(st, L->wo.wtype, L->wo.w, L->wo.n_in, L->wo.n_out, c->att, m, c->x, 1, mm);

        /* feed-forward block (SwiGLU) */
        erk_rmsnorm(st, c->xb, c->x, L->ffn_norm, m, E, eps);
        erk_matmul(st, L->gate.wtype, L->gate.w, L->gate.n_in, L->gate.n_out, c->xb, m, c->hb, 0, mm);
        erk_matmul(st, L->up.wtype, L->up.w, L->up.n_in, L->up.n_out, c->xb, m, c->hb2, 0, mm);
        erk_silu_mul(st, c->hb, c->hb2, (size_t)m * (size_t)F);
        erk_matmul(st, L->down.wtype, L->down.w, L->down.n_in, L->down.n_out, c->hb, m, c->x, 1, mm);
    }
    /* only the rows someone reads go through the vocabulary projection */
    const int first = m - rows;
    erk_rmsnorm(st, c->xb, c->x + (size_t)first * E, c->output_norm, rows, E, eps);
    erk_matmul(st, c->output.wtype, c->output.w, c->output.n_in, c->output.n_out, c->xb, rows, logits, 0, mm);
}

void er_cuda_launch_greedy(er_cuda *c, const er_model *md, dev_slot *sl) {
    erk_argmax((erk_stream)c->stream, sl->logits, md->d.n_vocab, c->pen_ids, 0, 1.0f, c->argmax_out,
               c->sample_scratch);
}

int er_cuda_forward(er_session *s, const int32_t *ids, int m, float *logits_all) {
    er_model *md = s->model;
    er_cuda *c = md->cuda;
    dev_slot *sl = &c->slots[s->slot];
    const size_t V = (size_t)md->d.n_vocab;
    cudaStream_t st = c->stream;

    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    sl->greedy_valid = 0;
    /* the previous step ended with a stream sync, so h_words is free */
    c->h_words[0] = s->pos;
    memcpy(c->h_words + 1, ids, (size_t)m * sizeof(int32_t));
    CUDA_CHECK(cudaMemcpyAsync(sl->words, c->h_words, (size_t)(m + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, st),
               "copying the step's token ids to the GPU");
    if (m == 1 && sl->graph) {
        CUDA_CHECK_SYNC(cudaGraphLaunch(sl->graph, st), "launching the decode graph", st);
        if (logits_all)
            CUDA_CHECK_SYNC(cudaMemcpyAsync(logits_all, sl->logits, V * 4, cudaMemcpyDeviceToHost, st),
                            "reading logits", st);
    } else if (logits_all) {
        er_cuda_launch_forward(c, md, sl, m, m, c->logits_all);
        CUDA_CHECK_SYNC(cudaGetLastError(), "launching the forward pass", st);
        CUDA_CHECK_SYNC(cudaMemcpyAsync(logits_all, c->logits_all, (size_t)m * V * 4, cudaMemcpyDeviceToHost, st),
                        "reading logits", st);
        CUDA_CHECK_SYNC(cudaMemcpyAsync(sl->logits, c->logits_all + (size_t)(m - 1) * V, V * 4,
                                        cudaMemcpyDeviceToDevice, st),
                        "keeping the last logits", st);
    } else {
        er_cuda_launch_forward(c, md, sl, m, 1, sl->logits);
    }
    if (!(m == 1 && sl->graph)) er_cuda_launch_greedy(c, md, sl); /* the graph ends with it */
    CUDA_CHECK_SYNC(cudaGetLastError(), "launching the forward pass", st);
    CUDA_CHECK_SYNC(cudaMemcpyAsync(s->logits, sl->logits, V * 4, cudaMemcpyDeviceToHost, st), "reading logits", st);
    CUDA_CHECK_SYNC(cudaMemcpyAsync(c->h_out, c->argmax_out, sizeof(int32_t), cudaMemcpyDeviceToHost, st),
                    "reading the greedy id", st);
    CUDA_CHECK_SYNC(cudaStreamSynchronize(st), "the forward pass", st);
    if (*c->h_out >= 0 && *c->h_out < md->d.n_vocab) {
        sl->greedy = *c->h_out;
        sl->greedy_valid = 1;
    }
    return ER_OK;
}
