/*
 * test_decode_batch.c — er_decode_batch against er_decode, bit for bit, and
 * its argument checks.
 *
 * On the model given (the embedded one in meson), for every kernel table
 * this CPU runs and 1 and 2 threads: 1, 2, 4 and 8 sessions step together
 * over a schedule where session i joins at step i with a prompt of its own
 * length, prefilled in chunks of up to 5 tokens, then decodes a token a step;
 * a twin session decodes the same chunks alone with er_decode. Every step,
 * each batched session's logits must be its twin's, bit for bit (memcmp).
 * tests/test_decode_batch.py does the same through the binding on converted
 * llama/qwen2/K-quant models and the gemma3 and lfm2 family files.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "test_util.h"

#define MAX_SLOTS 8
#define CHUNK 5

static const char *g_model;

static int n_vocab(const er_model *m) {
    er_hparams hp;
    return er_model_hparams(m, &hp) == ER_OK ? (int)hp.n_vocab : 1;
}

static uint32_t rnd(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void run_case(const char *isa, int threads, int n_slots) {
    er_options o;
    er_options_default(&o);
    o.isa = isa;
    o.n_threads = threads;
    o.n_ctx = 96;
    o.n_batch = CHUNK * n_slots;
    o.n_sessions = 2 * n_slots;
    er_model *m = NULL;
    if (er_model_open(g_model, &o, &m) != ER_OK) return; /* a table this CPU does not run */
    const int V = n_vocab(m);
    er_session *bs[MAX_SLOTS], *as[MAX_SLOTS];
    for (int i = 0; i < n_slots; i++) {
        CHECK(er_session_new(m, &bs[i]) == ER_OK, "%s", er_last_error());
        CHECK(er_session_new(m, &as[i]) == ER_OK, "%s", er_last_error());
    }
    uint32_t seed = 12345u + (uint32_t)n_slots;
    int left[MAX_SLOTS];
    for (int i = 0; i < n_slots; i++) left[i] = 1 + (int)(rnd(&seed) % (3 * CHUNK));
    int32_t ids[MAX_SLOTS][CHUNK];
    for (int step = 0; step < 9; step++) {
        er_session *ss[MAX_SLOTS];
        const int32_t *ip[MAX_SLOTS];
        size_t n[MAX_SLOTS];
        int who[MAX_SLOTS], ns = 0;
        for (int i = 0; i < n_slots && i <= step; i++) {
            const int k = left[i] > 0 ? (left[i] < CHUNK ? left[i] : CHUNK) : 1;
            left[i] -= k;
            for (int j = 0; j < k; j++) ids[i][j] = (int32_t)(rnd(&seed) % (uint32_t)V);
            ss[ns] = bs[i], ip[ns] = ids[i], n[ns] = (size_t)k, who[ns++] = i;
        }
        float *got[MAX_SLOTS];
        CHECK(er_decode_batch(ss, ip, n, (size_t)ns, got) == ER_OK, "%s", er_last_error());
        for (int b = 0; b < ns; b++) {
            float *want = NULL;
            CHECK(er_decode(as[who[b]], ip[b], n[b], &want) == ER_OK, "%s", er_last_error());
            CHECK(er_session_pos(bs[who[b]]) == er_session_pos(as[who[b]]), "positions differ");
            CHECK(want && memcmp(got[b], want, (size_t)V * sizeof(float)) == 0,
                  "isa %s, %d threads, %d slots, step %d, slot %d (%zu ids): logits differ", isa, threads, n_slots,
                  step, who[b], n[b]);
        }
    }
    er_model_close(m);
}

static void bad_arguments(void) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 16;
    o.n_batch = 8;
    o.n_sessions = 3;
    er_model *m = NULL, *m2 = NULL;
    CHECK(er_model_open(g_model, &o, &m) == ER_OK, "%s", er_last_error());
    CHECK(er_model_open(g_model, NULL, &m2) == ER_OK, "%s", er_last_error());
    if (!m || !m2) return;
    er_session *a, *b, *c, *other;
    er_session_new(m, &a);
    er_session_new(m, &b);
    er_session_new(m, &c);
    er_session_new(m2, &other);
    int32_t one[1] = {1}, many[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bad[1] = {n_vocab(m)};
    const int32_t *ip[3] = {one, one, one};
    size_t n[3] = {1, 1, 1};
    er_session *same[2] = {a, a}, *mixed[2] = {a, other}, *ab[2] = {a, b}, *withnull[2] = {a, NULL};
    CHECK(er_decode_batch(NULL, ip, n, 1, NULL) == ER_EINVAL, "NULL sessions");
    CHECK(er_decode_batch(ab, NULL, n, 2, NULL) == ER_EINVAL, "NULL ids");
    CHECK(er_decode_batch(ab, ip, NULL, 2, NULL) == ER_EINVAL, "NULL n_ids");
    CHECK(er_decode_batch(ab, ip, n, 0, NULL) == ER_EINVAL, "no sessions");
    CHECK(er_decode_batch(withnull, ip, n, 2, NULL) == ER_EINVAL, "a NULL session");
    CHECK(er_decode_batch(same, ip, n, 2, NULL) == ER_EINVAL, "a session twice");
    CHECK_CONTAINS(er_last_error(), "same");
    CHECK(er_decode_batch(mixed, ip, n, 2, NULL) == ER_EINVAL, "sessions of two models");
    CHECK(er_decode_batch(ab, ip, n, 4, NULL) == ER_EINVAL, "more sessions than the model's slots");
    size_t zero[2] = {1, 0};
    CHECK(er_decode_batch(ab, ip, zero, 2, NULL) == ER_EINVAL, "no tokens for a session");
    const int32_t *ipbad[2] = {one, bad};
    CHECK(er_decode_batch(ab, ipbad, n, 2, NULL) == ER_EINVAL, "an id out of range");
    const int32_t *ipmany[2] = {many, many};
    size_t n9[2] = {8, 1};
    CHECK(er_decode_batch(ab, ipmany, n9, 2, NULL) == ER_ERANGE, "rows over n_batch");
    CHECK_CONTAINS(er_last_error(), "n_batch");
    CHECK(er_session_pos(a) == 0 && er_session_pos(b) == 0, "a refused step appends nothing");
    /* a full context: nothing appended to any session */
    CHECK(er_decode(a, many, 8, NULL) == ER_OK && er_decode(a, many, 8, NULL) == ER_OK, "%s", er_last_error());
    CHECK(er_decode_batch(ab, ip, n, 2, NULL) == ER_ECONTEXT, "context full");
    CHECK(er_session_pos(a) == 16 && er_session_pos(b) == 0, "a refused step appends nothing");
    er_session *bc[2] = {b, c};
    float *out[2] = {NULL, NULL};
    CHECK(er_decode_batch(bc, ip, n, 2, out) == ER_OK, "%s", er_last_error());
    CHECK(out[0] && out[1] && er_session_pos(b) == 1 && er_session_pos(c) == 1, "both appended");
    er_model_close(m2);
    er_model_close(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    g_model = argv[1];
    static const char *const isas[] = {"generic", "avx2", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm", "sve"};
    for (size_t t = 0; t < sizeof isas / sizeof isas[0]; t++)
        for (int threads = 1; threads <= 2; threads++)
            for (int slots = 1; slots <= MAX_SLOTS; slots *= 2) run_case(isas[t], threads, slots);
    bad_arguments();
    return test_summary();
}
