/*
 * test_live_swap.c — er_live: swapping the model while threads generate.
 *
 * Two models that give different logits: the embedded model (argv[1], "A")
 * and a copy with the signs of its ffn_down and output matrices flipped
 * ("B", written under $TMPDIR or /tmp). Reference logits of every step of
 * every prompt are computed up front on plain models, and every session's
 * model is identified by its fingerprint, so each step's logits must equal
 * its own model's reference bit for bit: a step that mixed weights, or ran
 * on a model other than the one its session is bound to, cannot pass.
 *
 *  - semantics, step by step on one thread: a session keeps its model across
 *    a swap, new sessions get the new one, the old model is closed exactly
 *    when its last session ends, rebind moves a session (its logits then
 *    equal a fresh prefill of its tokens on the new model), misuse is refused;
 *  - stress: N workers take requests from a shared counter (session, prompt,
 *    greedy steps, free) while a swapper opens a fresh A or B and swaps it in
 *    every millisecond; some requests sleep mid-generation so they span swaps,
 *    some rebind between steps (checked against a shadow session on a plain
 *    model of the same kind). Afterwards: every request ran exactly once, the
 *    handle counts what the workers counted, every swapped-out model was
 *    closed, and closing the handle releases the last one.
 *
 * argv[2] (optional) is the number of stress requests (default 1000). The
 * meson test "live_swap_tsan" runs this under ThreadSanitizer in a
 * -Db_sanitize=thread build (make test-tsan-swap).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "test_util.h"

#define N_WORKERS 4
#define N_PROMPTS 4
#define PROMPT_LEN 6
#define K_STEPS 10
#define N_THREADS 2      /* per model: the pool's worker is joined at every close */

static const char *g_path[2];
static char g_path_b[512];
static int g_V;
static uint64_t g_fp[2];
static int32_t g_prompt[N_PROMPTS][PROMPT_LEN];
/* ref[kind][prompt][step]: logits after the prompt (step 0) and after each greedy token */
static float *g_ref;
static int32_t g_ref_tok[2][N_PROMPTS][K_STEPS];

static float *ref_row(int kind, int p, int step) {
    return g_ref + (((size_t)kind * N_PROMPTS + (size_t)p) * (K_STEPS + 1) + (size_t)step) * (size_t)g_V;
}

static er_model *open_kind(int kind, int n_sessions) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 64;
    o.n_threads = N_THREADS;
    o.n_sessions = n_sessions;
    er_model *m = NULL;
    if (er_model_open(g_path[kind], &o, &m) != ER_OK) {
        fprintf(stderr, "open %s: %s\n", g_path[kind], er_last_error());
        return NULL;
    }
    return m;
}

static int kind_of(const er_session *s) {
    uint64_t fp = 0;
    er_model_fingerprint(er_session_model(s), &fp);
    return fp == g_fp[0] ? 0 : fp == g_fp[1] ? 1 : -1;
}

/* ---- the second model ---------------------------------------------------- */

/* Copies A to g_path_b with every float of the ffn_down and output matrices
 * negated: still a valid file, other logits and other greedy tokens. */
static int make_model_b(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_path_b, sizeof g_path_b, "%s/edgerun-live-swap-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(g_path_b);
    if (fd < 0) return -1;
    FILE *in = fopen(g_path[0], "rb");
    if (!in) return close(fd), -1;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    size_t got = buf ? fread(buf, 1, (size_t)n, in) : 0;
    fclose(in);
    if (got != (size_t)n) return free(buf), close(fd), -1;

    er_options o;
    er_options_default(&o);
    o.n_ctx = 64;
    er_model *m = NULL;
    int flipped = 0;
    if (er_model_open(g_path[0], &o, &m) == ER_OK) {
        for (int i = 0; i < er_model_n_tensors(m); i++) {
            er_tensor_info t;
            er_model_tensor(m, i, &t);
            if (t.type != 0 /* F32 */ || (!strstr(t.name, "ffn_down") && strcmp(t.name, "output.weight"))) continue;
            for (uint64_t b = 0; b + 4 <= t.nbytes; b += 4) buf[t.offset + b + 3] ^= 0x80; /* sign bit, little endian */
            flipped++;
        }
        er_model_close(m);
    }
    ssize_t w = flipped ? write(fd, buf, (size_t)n) : -1;
    free(buf);
    close(fd);
    CHECK(flipped > 0, "no F32 ffn_down/output tensor to perturb in %s", g_path[0]);
    return w == n ? 0 : -1;
}

/* ---- references ------------------------------------------------------------ */

static int compute_refs(void) {
    for (int kind = 0; kind < 2; kind++) {
        er_model *m = open_kind(kind, 1);
        if (!m) return -1;
        er_model_fingerprint(m, &g_fp[kind]);
        for (int p = 0; p < N_PROMPTS; p++) {
            er_session *s;
            float *lg;
            if (er_session_new(m, &s) || er_decode(s, g_prompt[p], PROMPT_LEN, &lg)) return er_model_close(m), -1;
            memcpy(ref_row(kind, p, 0), lg, (size_t)g_V * 4);
            for (int k = 0; k < K_STEPS; k++) {
                int32_t t;
                er_sample(s, NULL, &t);
                g_ref_tok[kind][p][k] = t;
                er_decode(s, &t, 1, &lg);
                memcpy(ref_row(kind, p, k + 1), lg, (size_t)g_V * 4);
            }
            er_session_free(s);
        }
        er_model_close(m);
    }
    return 0;
}

/* ---- one-thread semantics ------------------------------------------------- */

/* Runs steps [from, to) of prompt p on s, checking against kind's reference
 * (step 0 = the prompt). Returns the number of mismatching steps. */
static int run_steps(er_session *s, int kind, int p, int from, int to) {
    int bad = 0;
    for (int k = from; k < to; k++) {
        float *lg;
        if (k == 0) {
            er_decode(s, g_prompt[p], PROMPT_LEN, &lg);
        } else {
            int32_t t;
            er_sample(s, NULL, &t);
            bad += t != g_ref_tok[kind][p][k - 1];
            er_decode(s, &t, 1, &lg);
        }
        bad += memcmp(lg, ref_row(kind, p, k), (size_t)g_V * 4) != 0;
    }
    return bad;
}

/* Logits of a fresh prefill of s's tokens on a plain model of `kind`, compared
 * with s's current logits (what a rebind must have produced). */
static int same_as_prefill(const er_session *s, int kind) {
    er_model *m = open_kind(kind, 1);
    if (!m) return 0;
    er_session *r;
    float *lg;
    int ok = er_session_new(m, &r) == ER_OK && er_decode(r, s->history, (size_t)s->pos, &lg) == ER_OK &&
             memcmp(lg, s->logits, (size_t)g_V * 4) == 0;
    er_session_free(r);
    er_model_close(m);
    return ok;
}

static er_live *semantics(void) {
    er_model *a0 = open_kind(0, N_WORKERS), *b1 = open_kind(1, N_WORKERS);
    er_live *L = NULL;
    CHECK(a0 && b1, "open models");
    if (!a0 || !b1) return NULL;

    /* adoption refuses models it could not own safely */
    er_session *plain;
    CHECK(er_session_new(b1, &plain) == ER_OK, "%s", er_last_error());
    CHECK(er_live_open(b1, &L) == ER_EBUSY, "a model with a session in use is refused");
    er_session_free(plain);
    CHECK(er_live_open(NULL, &L) == ER_EINVAL && L == NULL, "NULL model");
    CHECK(er_live_open(a0, NULL) == ER_EINVAL, "NULL out");
    CHECK(er_live_open(a0, &L) == ER_OK, "%s", er_last_error());
    if (!L) return NULL;
    CHECK(er_live_swap(L, a0) == ER_ESTATE, "swapping in the current model is refused");
    CHECK(er_live_swap(NULL, b1) == ER_EINVAL && er_live_swap(L, NULL) == ER_EINVAL, "NULLs");
    CHECK(er_session_new(a0, &plain) == ER_ESTATE, "er_session_new on a handle's model: %s", er_last_error());
    er_options vo;
    er_options_default(&vo);
    vo.vocab_only = 1;
    er_model *vocab = NULL;
    if (er_model_open(g_path[0], &vo, &vocab) == ER_OK) {
        CHECK(er_live_swap(L, vocab) == ER_EINVAL, "vocab_only model is refused");
        er_model_close(vocab);
    }

    /* s1 starts on A and keeps A across the swap */
    er_session *s1, *s2;
    CHECK(er_live_session_new(L, &s1) == ER_OK && kind_of(s1) == 0, "first session on A");
    CHECK(run_steps(s1, 0, 1, 0, 4) == 0, "s1 before the swap matches A");
    CHECK(er_live_swap(L, b1) == ER_OK, "%s", er_last_error());
    er_live_stats st;
    er_live_stats_get(L, &st);
    CHECK(st.generation == 1 && st.current_fingerprint == g_fp[1] && st.models_open == 2 && st.models_closed == 0 &&
              st.sessions_active == 1,
          "after swap: gen %llu open %d closed %llu active %lld", (unsigned long long)st.generation, st.models_open,
          (unsigned long long)st.models_closed, (long long)st.sessions_active);
    CHECK(er_live_session_new(L, &s2) == ER_OK && kind_of(s2) == 1, "a session after the swap runs on B");
    CHECK(run_steps(s2, 1, 2, 0, 5) == 0, "s2 matches B");
    CHECK(run_steps(s1, 0, 1, 4, K_STEPS + 1) == 0, "s1 finishes on A's weights after the swap");
    CHECK(er_live_close(L) == ER_EBUSY, "close with sessions in use is refused");
    er_session_free(s1);
    er_live_stats_get(L, &st);
    CHECK(st.models_closed == 1 && st.models_open == 1 && st.sessions_active == 1,
          "A closed when its last session ended: closed %llu open %d", (unsigned long long)st.models_closed,
          st.models_open);

    /* rebind: nothing to do on the current model; after a swap, a prefill on the new one */
    CHECK(er_live_session_rebind(L, &s2) == 0, "rebind on the current model is a no-op");
    er_model *a2 = open_kind(0, N_WORKERS);
    CHECK(a2 && er_live_swap(L, a2) == ER_OK, "swap back to A");
    er_session *before = s2;
    int rc = er_live_session_rebind(L, &s2);
    CHECK(rc == 1 && s2 != before && kind_of(s2) == 0, "rebind moves the session to A (rc %d)", rc);
    CHECK(s2->pos == PROMPT_LEN + 4 && same_as_prefill(s2, 0), "rebound logits are A's for the same tokens");
    er_live_stats_get(L, &st);
    CHECK(st.models_closed == 2 && st.models_open == 1, "B closed by the rebind that ended its last session");
    er_session_free(s2);

    /* a swapped-out model without sessions is closed by the swap itself */
    er_model *b3 = open_kind(1, N_WORKERS);
    CHECK(b3 && er_live_swap(L, b3) == ER_OK, "swap");
    er_live_stats_get(L, &st);
    CHECK(st.models_closed == 3 && st.models_open == 1 && st.sessions_active == 0 && st.sessions_started == 2,
          "an idle model closes at the swap: closed %llu started %llu", (unsigned long long)st.models_closed,
          (unsigned long long)st.sessions_started);
    return L;
}

/* ---- stress ------------------------------------------------------------- */

static er_live *g_live;
static er_model *g_shadow_model[2]; /* plain models for checking rebinds */
static int g_requests;
static atomic_int g_next, g_stop, g_bad, g_ebusy, g_spans, g_rebinds, g_kind_count[2];
static atomic_int *g_done;
static atomic_ullong g_swaps;

static void bad(int id, const char *what) {
    if (atomic_fetch_add(&g_bad, 1) < 10) fprintf(stderr, "request %d: %s\n", id, what);
}

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* A request that rebinds between steps, shadowed step by step by a session on
 * a plain model of its current kind. */
static void rebinding_request(int id, er_session *s, int kind) {
    er_session *sh = NULL;
    int32_t hist[PROMPT_LEN + K_STEPS];
    memcpy(hist, g_prompt[id % N_PROMPTS], sizeof g_prompt[0]);
    int n = PROMPT_LEN;
    float *lg, *lg_sh;
    if (er_session_new(g_shadow_model[kind], &sh) || er_decode(sh, hist, (size_t)n, &lg_sh) ||
        er_decode(s, hist, (size_t)n, &lg)) {
        bad(id, er_last_error());
        er_session_free(sh);
        er_session_free(s);
        return;
    }
    if (memcmp(lg, lg_sh, (size_t)g_V * 4)) bad(id, "prompt logits differ from the shadow");
    for (int k = 0; k < K_STEPS; k++) {
        if (k & 1) {
            int rc = er_live_session_rebind(g_live, &s);
            if (rc < 0) {
                bad(id, er_last_error());
                break;
            }
            if (rc == 1) {
                atomic_fetch_add(&g_rebinds, 1);
                kind = kind_of(s);
                if (kind < 0) {
                    bad(id, "rebound to an unknown model");
                    break;
                }
                er_session_free(sh);
                if (er_session_new(g_shadow_model[kind], &sh) || er_decode(sh, hist, (size_t)n, &lg_sh)) {
                    sh = NULL;
                    bad(id, er_last_error());
                    break;
                }
                if (memcmp(s->logits, lg_sh, (size_t)g_V * 4)) bad(id, "logits after rebind differ from a prefill");
            }
        }
        int32_t t, t_sh;
        er_sample(s, NULL, &t);
        er_sample(sh, NULL, &t_sh);
        if (t != t_sh) bad(id, "sampled token differs from the shadow");
        hist[n++] = t;
        if (er_decode(s, &t, 1, &lg) || er_decode(sh, &t, 1, &lg_sh)) {
            bad(id, er_last_error());
            break;
        }
        if (memcmp(lg, lg_sh, (size_t)g_V * 4)) bad(id, "step logits differ from the shadow (mixed weights)");
    }
    er_session_free(sh);
    er_session_free(s);
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        int id = atomic_fetch_add(&g_next, 1);
        if (id >= g_requests) return NULL;
        er_session *s;
        int rc = er_live_session_new(g_live, &s);
        if (rc == ER_EBUSY) atomic_fetch_add(&g_ebusy, 1);
        if (rc) {
            bad(id, er_last_error());
            continue;
        }
        int kind = kind_of(s);
        if (kind < 0) {
            bad(id, "session on a model of unknown fingerprint");
            er_session_free(s);
            continue;
        }
        atomic_fetch_add(&g_kind_count[kind], 1);
        atomic_fetch_add(&g_done[id], 1);
        if (id % 5 == 4) {
            rebinding_request(id, s, kind);
            continue;
        }
        int p = id % N_PROMPTS;
        if (run_steps(s, kind, p, 0, 4)) bad(id, "logits differ from its model's reference (mixed weights)");
        if (id % 8 == 0) sleep_us(2500); /* long enough for the swapper to swap under it */
        if (run_steps(s, kind, p, 4, K_STEPS + 1)) bad(id, "logits differ from its model's reference (mixed weights)");
        er_live_stats st;
        er_live_stats_get(g_live, &st);
        /* finished while the other kind was current: it ran across a swap
         * (an A -> B -> A pair within one request is not counted) */
        if (st.current_fingerprint != g_fp[kind]) atomic_fetch_add(&g_spans, 1);
        er_session_free(s);
    }
}

static void *swapper(void *arg) {
    int kind = *(int *)arg;
    while (!atomic_load(&g_stop)) {
        kind ^= 1;
        er_model *m = open_kind(kind, N_WORKERS);
        if (!m || er_live_swap(g_live, m) != ER_OK) {
            atomic_fetch_add(&g_bad, 1);
            fprintf(stderr, "swap failed: %s\n", er_last_error());
            er_model_close(m);
            return NULL;
        }
        atomic_fetch_add(&g_swaps, 1);
        sleep_us(1000);
    }
    return NULL;
}

static void stress(er_live *L) {
    er_live_stats st0;
    er_live_stats_get(L, &st0);
    g_live = L;
    g_done = calloc((size_t)g_requests, sizeof *g_done);
    g_shadow_model[0] = open_kind(0, N_WORKERS);
    g_shadow_model[1] = open_kind(1, N_WORKERS);
    if (!g_done || !g_shadow_model[0] || !g_shadow_model[1]) {
        CHECK(0, "stress setup");
        return;
    }
    for (int i = 0; i < g_requests; i++) atomic_init(&g_done[i], 0);
    int cur_kind = st0.current_fingerprint == g_fp[1];
    pthread_t w[N_WORKERS], sw;
    pthread_create(&sw, NULL, swapper, &cur_kind);
    for (int i = 0; i < N_WORKERS; i++) pthread_create(&w[i], NULL, worker, NULL);
    for (int i = 0; i < N_WORKERS; i++) pthread_join(w[i], NULL);
    atomic_store(&g_stop, 1);
    pthread_join(sw, NULL);

    int lost = 0, dup = 0;
    for (int i = 0; i < g_requests; i++) {
        int d = atomic_load(&g_done[i]);
        lost += d == 0;
        dup += d > 1;
    }
    er_live_stats st;
    er_live_stats_get(L, &st);
    unsigned long long swaps = atomic_load(&g_swaps);
    printf("stress: %d requests (%d on A, %d on B), %llu swaps, %d spanned a swap, %d rebinds, %llu models closed\n",
           g_requests, atomic_load(&g_kind_count[0]), atomic_load(&g_kind_count[1]), swaps, atomic_load(&g_spans),
           atomic_load(&g_rebinds), (unsigned long long)(st.models_closed - st0.models_closed));
    CHECK(atomic_load(&g_bad) == 0, "%d failed checks in the workers (see above)", atomic_load(&g_bad));
    CHECK(lost == 0 && dup == 0, "%d requests lost, %d run twice", lost, dup);
    CHECK(atomic_load(&g_ebusy) == 0, "no request was refused for want of a slot");
    CHECK_EQ_U64(st.sessions_started - st0.sessions_started, (uint64_t)g_requests);
    CHECK_EQ_I64(st.sessions_active, 0);
    CHECK_EQ_U64(st.generation - st0.generation, swaps);
    CHECK(swaps >= 5, "the swapper swapped only %llu times", swaps);
    /* every swapped-out model was closed: only the current one is open */
    CHECK_EQ_U64(st.models_closed - st0.models_closed, swaps);
    CHECK_EQ_I64(st.models_open, 1);
    CHECK(atomic_load(&g_kind_count[0]) > 0 && atomic_load(&g_kind_count[1]) > 0, "both models served requests");
    CHECK(atomic_load(&g_spans) > 0, "no request spanned a swap: the test did not exercise in-flight steps");
    CHECK(atomic_load(&g_rebinds) > 0, "no request was rebound");
    er_model_close(g_shadow_model[0]);
    er_model_close(g_shadow_model[1]);
    free(g_done);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_live_swap MODEL.gguf [REQUESTS]\n");
        return 2;
    }
    g_path[0] = argv[1];
    g_requests = argc > 2 ? atoi(argv[2]) : 1000;
    if (access(argv[1], R_OK) != 0) {
        printf("skip: %s is absent\n", argv[1]);
        return 77;
    }
    if (make_model_b() != 0) {
        CHECK(0, "cannot write the perturbed model");
        return test_summary();
    }
    g_path[1] = g_path_b;

    er_model *m = open_kind(0, 1);
    er_hparams hp;
    if (!m || er_model_hparams(m, &hp) != ER_OK) {
        CHECK(0, "open %s", argv[1]);
        unlink(g_path_b);
        return test_summary();
    }
    er_model_close(m);
    g_V = hp.n_vocab;
    uint32_t x = 12345;
    for (int p = 0; p < N_PROMPTS; p++)
        for (int i = 0; i < PROMPT_LEN; i++) {
            x = x * 1664525u + 1013904223u;
            g_prompt[p][i] = (int32_t)((x >> 8) % (uint32_t)g_V);
        }
    g_ref = malloc(sizeof(float) * 2 * N_PROMPTS * (K_STEPS + 1) * (size_t)g_V);
    CHECK(g_ref && compute_refs() == 0, "references: %s", er_last_error());
    CHECK(g_fp[0] != g_fp[1], "the perturbed copy has another fingerprint");
    int differ = 0;
    for (int p = 0; p < N_PROMPTS; p++)
        for (int k = 0; k <= K_STEPS; k++) differ += memcmp(ref_row(0, p, k), ref_row(1, p, k), (size_t)g_V * 4) != 0;
    CHECK(differ == N_PROMPTS * (K_STEPS + 1), "A and B give different logits at every step (%d of %d)", differ,
          N_PROMPTS * (K_STEPS + 1));

    if (g_test_fail == 0) {
        er_live *L = semantics();
        if (L) {
            stress(L);
            CHECK(er_live_close(L) == ER_OK, "close: %s", er_last_error());
        }
        CHECK(er_live_close(NULL) == ER_OK, "close(NULL)");
    }
    free(g_ref);
    unlink(g_path_b);
    return test_summary();
}
