/*
 * test_api_hardening.c — every public function of edgerun.h called with NULL
 * and out-of-range arguments: int-returning calls give ER_EINVAL (or the
 * documented ER_ERANGE / ER_ESTATE / ER_ECONTEXT) with a non-empty message,
 * *_free / *_close accept NULL, string- and size-returning calls give their
 * documented sentinel, and nothing crashes (the asan build runs this too).
 * argv[1] is the embedded model.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "edgerun.h"
#include "error.h"
#include "test_util.h"

/* rc must be `want` and leave a message. */
#define EXPECT(call, want)                                                                          \
    do {                                                                                            \
        er_clear_error();                                                                           \
        int rc_ = (call);                                                                           \
        CHECK(rc_ == (want), "%s returned %s (%s), want %s", #call, er_status_name(rc_), er_last_error(), \
              er_status_name(want));                                                                \
        CHECK(rc_ == ER_OK || er_last_error()[0] != '\0', "%s: no message", #call);                 \
    } while (0)

static const char *g_model;

static void test_options(void) {
    EXPECT(er_options_default(NULL), ER_EINVAL);
    er_plan_report rep;
    EXPECT(er_plan(NULL, NULL, &rep), ER_EINVAL);
    EXPECT(er_plan(g_model, NULL, NULL), ER_EINVAL);
    EXPECT(er_plan(g_model, NULL, &rep), ER_OK);
    er_model *m = (er_model *)(uintptr_t)1;
    EXPECT(er_model_open(NULL, NULL, &m), ER_EINVAL);
    CHECK(m == NULL, "*out is NULL after a failed open");
    EXPECT(er_model_open(g_model, NULL, NULL), ER_EINVAL);

    /* each field out of range, through er_plan and er_model_open */
    for (int c = 0; c < 13; c++) {
        er_options o;
        er_options_default(&o);
        const char *what = "";
        switch (c) {
        case 0: o.n_ctx = -1; what = "n_ctx -1"; break;
        case 1: o.n_ctx = (1 << 20) + 1; what = "n_ctx 2^20+1"; break;
        case 2: o.n_batch = -1; what = "n_batch -1"; break;
        case 3: o.n_batch = 65537; what = "n_batch 65537"; break;
        case 4: o.n_threads = -1; what = "n_threads -1"; break;
        case 5: o.n_threads = 513; what = "n_threads 513"; break;
        case 6: o.n_sessions = -1; what = "n_sessions -1"; break;
        case 7: o.n_sessions = 1025; what = "n_sessions 1025"; break;
        case 8: o.kv_type = 2; what = "kv_type 2"; break;
        case 9: o.kv_type = -1; what = "kv_type -1"; break;
        case 10: o.vocab_only = 2; what = "vocab_only 2"; break;
        case 11: o.trace_events = -1; what = "trace_events -1"; break;
        case 12: o.trace_events = (1 << 24) + 1; what = "trace_events 2^24+1"; break;
        }
        er_clear_error();
        int rc = er_plan(g_model, &o, &rep);
        CHECK(rc == ER_EINVAL && er_last_error()[0], "er_plan with %s: %s", what, er_status_name(rc));
        m = NULL;
        rc = er_model_open(g_model, &o, &m);
        CHECK(rc == ER_EINVAL && er_last_error()[0] && !m, "er_model_open with %s: %s", what, er_status_name(rc));
        if (m) er_model_close(m);
    }
    er_options o;
    er_options_default(&o);
    static _Alignas(64) uint8_t small[4096];
    o.arena = small + 1;
    o.arena_bytes = sizeof small - 1;
    EXPECT(er_model_open(g_model, &o, &m), ER_EINVAL);
    o.arena = small;
    o.arena_bytes = sizeof small;
    EXPECT(er_model_open(g_model, &o, &m), ER_ENOMEM_ARENA);
    o.arena = NULL;
    o.isa = "no-such-isa";
    er_clear_error();
    int rc = er_model_open(g_model, &o, &m);
    CHECK(rc < 0 && er_last_error()[0] && !m, "unknown isa: %s", er_status_name(rc));
    er_model_close(NULL); /* documented no-op */
}

static void test_model(er_model *m) {
    er_hparams hp;
    er_plan_report rep;
    er_tensor_info ti;
    uint64_t fp;
    EXPECT(er_model_hparams(NULL, &hp), ER_EINVAL);
    EXPECT(er_model_hparams(m, NULL), ER_EINVAL);
    EXPECT(er_model_arena(NULL, &rep), ER_EINVAL);
    EXPECT(er_model_arena(m, NULL), ER_EINVAL);
    EXPECT(er_model_n_tensors(NULL), ER_EINVAL);
    int nt = er_model_n_tensors(m);
    CHECK(nt > 0, "n_tensors %d", nt);
    EXPECT(er_model_tensor(NULL, 0, &ti), ER_EINVAL);
    EXPECT(er_model_tensor(m, 0, NULL), ER_EINVAL);
    EXPECT(er_model_tensor(m, -1, &ti), ER_EINVAL);
    EXPECT(er_model_tensor(m, nt, &ti), ER_EINVAL);
    EXPECT(er_model_tensor(m, INT32_MAX, &ti), ER_EINVAL);
    EXPECT(er_model_tensor(m, nt - 1, &ti), ER_OK);
    EXPECT(er_model_fingerprint(NULL, &fp), ER_EINVAL);
    EXPECT(er_model_fingerprint(m, NULL), ER_EINVAL);
    er_layer_info li;
    EXPECT(er_model_hparams(m, &hp), ER_OK);
    EXPECT(er_model_layer(NULL, 0, &li), ER_EINVAL);
    EXPECT(er_model_layer(m, 0, NULL), ER_EINVAL);
    EXPECT(er_model_layer(m, -1, &li), ER_EINVAL);
    EXPECT(er_model_layer(m, hp.n_layer, &li), ER_EINVAL);
    EXPECT(er_model_layer(m, hp.n_layer - 1, &li), ER_OK);
    CHECK(li.block == ER_BLOCK_ATTENTION && li.rope == 1 && li.window == 0 && li.n_head_kv == hp.n_head_kv &&
              li.conv_kernel == 0,
          "a llama layer: attention with RoPE over the whole context");
    CHECK(er_model_isa(NULL) != NULL && er_model_isa_reason(NULL) != NULL, "isa strings never NULL");
    CHECK(er_model_vocab(NULL) == NULL, "vocab of NULL");
    CHECK(er_last_error() != NULL && er_version() != NULL, "never NULL");
    CHECK(strcmp(er_status_name(ER_EMISMATCH), "ER_EMISMATCH") == 0, "EMISMATCH name");
    CHECK(strcmp(er_status_name(-12345), "ER_UNKNOWN") == 0 && strcmp(er_status_name(7), "ER_UNKNOWN") == 0,
          "unknown status names");
}

static void test_session(er_model *m) {
    er_session *s = (er_session *)(uintptr_t)1, *s2 = NULL;
    EXPECT(er_session_new(NULL, &s), ER_EINVAL);
    CHECK(s == NULL, "*out NULL after failure");
    EXPECT(er_session_new(m, NULL), ER_EINVAL);
    EXPECT(er_session_new(m, &s), ER_OK);
    EXPECT(er_session_new(m, &s2), ER_EBUSY);
    er_session_free(NULL); /* documented no-op */
    EXPECT(er_session_reset(NULL), ER_EINVAL);
    EXPECT(er_session_seed(NULL, 1), ER_EINVAL);
    EXPECT(er_session_pos(NULL), ER_EINVAL);
    EXPECT(er_session_n_ctx(NULL), ER_EINVAL);
    er_stats st;
    EXPECT(er_session_stats(NULL, &st), ER_EINVAL);
    EXPECT(er_session_stats(s, NULL), ER_EINVAL);

    int32_t id = 0;
    er_sampling sp;
    EXPECT(er_sample(s, NULL, &id), ER_ESTATE);
    EXPECT(er_sampling_default(NULL), ER_EINVAL);
    int32_t ids[4] = {1, 2, 3, 4};
    er_hparams hp;
    er_model_hparams(m, &hp);
    float *lg = NULL;
    EXPECT(er_decode(NULL, ids, 1, &lg), ER_EINVAL);
    EXPECT(er_decode(s, NULL, 1, &lg), ER_EINVAL);
    EXPECT(er_decode(s, ids, 0, &lg), ER_EINVAL);
    int32_t bad[2] = {1, -1};
    EXPECT(er_decode(s, bad, 2, &lg), ER_EINVAL);
    bad[1] = hp.n_vocab;
    EXPECT(er_decode(s, bad, 2, &lg), ER_EINVAL);
    bad[1] = INT32_MIN;
    EXPECT(er_decode(s, bad, 2, &lg), ER_EINVAL);
    EXPECT(er_decode(s, ids, (size_t)er_session_n_ctx(s) + 1, &lg), ER_ECONTEXT);
    EXPECT(er_decode(s, ids, SIZE_MAX, &lg), ER_ECONTEXT);
    CHECK(er_session_pos(s) == 0, "failed decodes appended nothing");
    float out[8];
    EXPECT(er_decode_all(NULL, ids, 1, out, 8), ER_EINVAL);
    EXPECT(er_decode_all(s, NULL, 1, out, 8), ER_EINVAL);
    EXPECT(er_decode_all(s, ids, 1, NULL, 8), ER_EINVAL);
    EXPECT(er_decode_all(s, ids, 1, out, 8), ER_ERANGE);
    EXPECT(er_decode_all(s, ids, SIZE_MAX / 2, out, 8), ER_ERANGE);
    EXPECT(er_decode(s, ids, 4, &lg), ER_OK);

    EXPECT(er_sample(NULL, NULL, &id), ER_EINVAL);
    EXPECT(er_sample(s, NULL, NULL), ER_EINVAL);
    for (int c = 0; c < 10; c++) {
        er_sampling_default(&sp);
        switch (c) {
        case 0: sp.temperature = -1.0f; break;
        case 1: sp.temperature = NAN; break;
        case 2: sp.temperature = INFINITY; break;
        case 3: sp.top_k = -1; break;
        case 4: sp.top_p = 0.0f; break;
        case 5: sp.top_p = 1.5f; break;
        case 6: sp.min_p = -0.1f; break;
        case 7: sp.repeat_penalty = 0.0f; break;
        case 8: sp.repeat_penalty = NAN; break;
        case 9: sp.repeat_last_n = -1; break;
        }
        er_clear_error();
        int rc = er_sample(s, &sp, &id);
        CHECK(rc == ER_EINVAL && er_last_error()[0], "sampling case %d: %s", c, er_status_name(rc));
    }

    /* snapshots */
    char path[5200];
    memset(path, 'a', sizeof path - 1);
    path[sizeof path - 1] = 0;
    EXPECT(er_session_save(NULL, "/tmp/x"), ER_EINVAL);
    EXPECT(er_session_save(s, NULL), ER_EINVAL);
    EXPECT(er_session_save(s, ""), ER_EINVAL);
    EXPECT(er_session_save(s, path), ER_EINVAL);
    EXPECT(er_session_load(NULL, "/tmp/x"), ER_EINVAL);
    EXPECT(er_session_load(s, NULL), ER_EINVAL);
    EXPECT(er_session_load(s, ""), ER_EINVAL);
    EXPECT(er_session_load(s, path), ER_EIO); /* ENAMETOOLONG from open */
    CHECK(er_session_pos(s) == 4, "failed loads left the session alone");
    er_session_free(s);
}

static void test_trace(er_model *m) {
    er_trace_event e;
    EXPECT(er_trace_enable(NULL, 1), ER_EINVAL);
    EXPECT(er_trace_enable(m, 2), ER_EINVAL);
    EXPECT(er_trace_enable(m, -1), ER_EINVAL);
    EXPECT(er_trace_enable(m, 1), ER_ESTATE); /* opened without a ring */
    EXPECT(er_trace_reset(NULL), ER_EINVAL);
    EXPECT(er_trace_count(NULL), ER_EINVAL);
    EXPECT(er_trace_get(NULL, 0, &e), ER_EINVAL);
    EXPECT(er_trace_get(m, 0, NULL), ER_EINVAL);
    EXPECT(er_trace_get(m, 0, &e), ER_EINVAL); /* empty */
    EXPECT(er_trace_get(m, -1, &e), ER_EINVAL);
    EXPECT(er_trace_export(NULL, "/tmp/x.json"), ER_EINVAL);
    EXPECT(er_trace_export(m, NULL), ER_EINVAL);
    EXPECT(er_trace_export(m, ""), ER_EINVAL);
    CHECK(strcmp(er_trace_op_name(-1), "unknown") == 0 && strcmp(er_trace_op_name(ER_OP_COUNT), "unknown") == 0,
          "op names out of range");
}

static void test_tokenizer(er_model *m) {
    const er_vocab *v = er_model_vocab(m);
    CHECK(v != NULL, "model has a vocab");
    if (!v) return;
    static uint8_t scratch[1 << 16];
    int32_t ids[64];
    size_t n = 0;
    EXPECT(er_tokenize(NULL, "ab", 2, 0, ids, 64, &n, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, NULL, 2, 0, ids, 64, &n, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, "ab", 2, 0, NULL, 64, &n, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, "ab", 2, 0, ids, 64, NULL, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, "ab", 2, 0x100, ids, 64, &n, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, "ab", 2, 0, ids, 64, &n, NULL, 0), ER_ERANGE);
    EXPECT(er_tokenize(v, "ab", 2, 0, ids, 64, &n, scratch, 1), ER_ERANGE);
    EXPECT(er_tokenize(v, "ab", SIZE_MAX, 0, ids, 64, &n, scratch, sizeof scratch), ER_EINVAL);
    EXPECT(er_tokenize(v, "", 0, 0, ids, 64, &n, scratch, sizeof scratch), ER_OK);

    er_detok_state ds;
    memset(&ds, 0, sizeof ds);
    char out[64];
    EXPECT(er_detok_step(NULL, &ds, 1, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_step(v, NULL, 1, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_step(v, &ds, 1, NULL, 64, &n), ER_EINVAL);
    EXPECT(er_detok_step(v, &ds, 1, out, 64, NULL), ER_EINVAL);
    EXPECT(er_detok_step(v, &ds, -1, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_step(v, &ds, er_vocab_n_tokens(v), out, 64, &n), ER_EINVAL);
    ds.n_pending = 9;
    EXPECT(er_detok_step(v, &ds, 1, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_flush(v, &ds, out, 64, &n), ER_EINVAL);
    memset(&ds, 0, sizeof ds);
    EXPECT(er_detok_flush(NULL, &ds, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_flush(v, NULL, out, 64, &n), ER_EINVAL);
    EXPECT(er_detok_flush(v, &ds, out, 64, NULL), ER_EINVAL);
    int32_t bad[2] = {1, -5};
    EXPECT(er_detokenize(NULL, bad, 1, 0, out, 64, &n), ER_EINVAL);
    EXPECT(er_detokenize(v, NULL, 1, 0, out, 64, &n), ER_EINVAL);
    EXPECT(er_detokenize(v, bad, 1, 0, out, 64, NULL), ER_EINVAL);
    EXPECT(er_detokenize(v, bad, 2, 0, out, 64, &n), ER_EINVAL);
    EXPECT(er_detokenize(v, bad, 1, 0, NULL, 64, &n), ER_EINVAL);

    /* facts: documented sentinels for NULL / out-of-range */
    CHECK(er_vocab_token_text(v, -1) == NULL && er_vocab_token_text(v, er_vocab_n_tokens(v)) == NULL &&
              er_vocab_token_text(NULL, 0) == NULL,
          "token_text out of range is NULL");
    CHECK(er_vocab_pre(NULL) != NULL, "pre name never NULL");
    CHECK(er_tokenize_scratch_bytes(NULL, 4) == SIZE_MAX, "scratch bytes of NULL");
    EXPECT(er_vocab_kind(NULL), ER_EINVAL);
    EXPECT(er_vocab_n_tokens(NULL), ER_EINVAL);
    EXPECT(er_vocab_bos(NULL), ER_EINVAL);
    EXPECT(er_vocab_eos(NULL), ER_EINVAL);
    EXPECT(er_vocab_is_eog(NULL, 0), ER_EINVAL);
    CHECK(er_vocab_is_eog(v, -7) == 0 && er_vocab_is_eog(v, INT32_MAX) == 0, "ids out of range are not EOG");
    er_clear_error();
    CHECK(er_vocab_token_text(v, -1) == NULL && er_last_error()[0], "token_text message");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_api_hardening MODEL.gguf\n");
        return 77;
    }
    g_model = argv[1];
    if (access(g_model, R_OK) != 0) {
        printf("skip: %s not found\n", g_model);
        return 77;
    }
    test_options();
    er_options o;
    er_options_default(&o);
    o.n_ctx = 32;
    er_model *m = NULL;
    int rc = er_model_open(g_model, &o, &m);
    CHECK(rc == ER_OK, "open: %s", er_last_error());
    if (m) {
        test_model(m);
        test_session(m);
        test_trace(m);
        test_tokenizer(m);
        er_model_close(m);
    }
    /* a vocab-only model has no sessions */
    o.vocab_only = 1;
    if (er_model_open(g_model, &o, &m) == ER_OK) {
        er_session *s = NULL;
        EXPECT(er_session_new(m, &s), ER_ESTATE);
        er_model_close(m);
    }
    return test_summary();
}
