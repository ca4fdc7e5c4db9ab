/*
 * test_snapshot.c — er_session_save / er_session_load on the embedded model
 * (argv[1]; a scratch folder is made under $TMPDIR or /tmp).
 *
 *  - resume: a sampled generation saved halfway and loaded into another slot,
 *    another model instance (smaller n_ctx, 2 threads) continues token for
 *    token like the uninterrupted run; F16 KV caches too;
 *  - rejection: every single-bit flip, truncation, extension, a file of the
 *    same geometry from a model with different weights, another kv_type and a
 *    too-short context are refused with the right status and leave the
 *    session exactly as it was;
 *  - power cut: a forked writer that resumes from the snapshot and saves in a
 *    loop is SIGKILLed at >= 200 random moments; every time, the file loads
 *    and holds exactly the last completed or the in-flight state (checked
 *    against a reference: history, RNG, logits), and leftover temporary files
 *    are never a half-written state that would load.
 *
 * The test includes model.h to compare the loaded session's internals.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "test_util.h"

#define N_GEN 24
#define SAVE_AT 10

static char g_dir[512];
static const char *g_model;

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

static er_model *open_model(const char *path, int n_ctx, int n_threads, int kv_type, int n_sessions) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = n_ctx;
    o.n_threads = n_threads;
    o.kv_type = kv_type;
    o.n_sessions = n_sessions;
    o.n_batch = 8;
    er_model *m = NULL;
    int rc = er_model_open(path, &o, &m);
    CHECK(rc == ER_OK, "open %s: %s", path, er_last_error());
    return m;
}

static er_sampling sampling(void) {
    er_sampling sp;
    er_sampling_default(&sp);
    sp.temperature = 1.3f; /* hot enough that the RNG decides many tokens */
    sp.top_k = 0;
    sp.repeat_penalty = 1.05f;
    return sp;
}

/* Samples and appends n tokens; returns how many were produced. */
static int generate(er_session *s, int32_t *out, int n) {
    er_sampling sp = sampling();
    for (int i = 0; i < n; i++) {
        if (er_sample(s, &sp, &out[i]) != ER_OK || er_decode(s, &out[i], 1, NULL) != ER_OK) return i;
    }
    return n;
}

static int prompt(er_session *s) {
    static const int32_t ids[] = {1, 5, 6, 7, 8, 9, 10, 11};
    return er_decode(s, ids, sizeof ids / sizeof ids[0], NULL);
}

/* ---- resume ------------------------------------------------------------------ */

static int32_t g_ref[N_GEN];

static void test_resume(int kv_type) {
    char snap[600];
    path_in(snap, sizeof snap, kv_type ? "resume16.snap" : "resume.snap");
    er_model *m = open_model(g_model, 128, 1, kv_type, 2);
    if (!m) return;
    er_session *a = NULL, *b = NULL;
    CHECK(er_session_new(m, &a) == ER_OK && er_session_new(m, &b) == ER_OK, "%s", er_last_error());
    er_session_seed(a, 1234);
    CHECK(prompt(a) == ER_OK, "%s", er_last_error());
    int32_t got[N_GEN];
    CHECK(generate(a, got, SAVE_AT) == SAVE_AT, "%s", er_last_error());
    int rc = er_session_save(a, snap);
    CHECK(rc == ER_OK, "save: %s", er_last_error());
    CHECK(generate(a, got + SAVE_AT, N_GEN - SAVE_AT) == N_GEN - SAVE_AT, "%s", er_last_error());
    if (kv_type == ER_KV_F32) memcpy(g_ref, got, sizeof got);

    /* same model, other slot (with other state in it first) */
    er_session_seed(b, 99);
    prompt(b);
    rc = er_session_load(b, snap);
    CHECK(rc == ER_OK, "load: %s", er_last_error());
    CHECK_EQ_I64(er_session_pos(b), 8 + SAVE_AT);
    int32_t cont[N_GEN];
    CHECK(generate(b, cont, N_GEN - SAVE_AT) == N_GEN - SAVE_AT, "%s", er_last_error());
    CHECK(memcmp(cont, got + SAVE_AT, sizeof(int32_t) * (N_GEN - SAVE_AT)) == 0,
          "kv %d: continuation after load differs from the uninterrupted run", kv_type);

    /* a fresh instance with a smaller context and a thread pool */
    er_model *m2 = open_model(g_model, 64, 2, kv_type, 1);
    if (m2) {
        er_session *c = NULL;
        CHECK(er_session_new(m2, &c) == ER_OK, "%s", er_last_error());
        uint64_t f1 = 0, f2 = 0;
        CHECK(er_model_fingerprint(m, &f1) == ER_OK && er_model_fingerprint(m2, &f2) == ER_OK && f1 == f2 && f1,
              "fingerprints %llx %llx", (unsigned long long)f1, (unsigned long long)f2);
        rc = er_session_load(c, snap);
        CHECK(rc == ER_OK, "load into a fresh model: %s", er_last_error());
        CHECK(generate(c, cont, N_GEN - SAVE_AT) == N_GEN - SAVE_AT, "%s", er_last_error());
        CHECK(memcmp(cont, got + SAVE_AT, sizeof(int32_t) * (N_GEN - SAVE_AT)) == 0,
              "kv %d: continuation in a fresh model differs", kv_type);
        er_stats st;
        er_session_stats(c, &st);
        CHECK(st.n_decode_tokens == SAVE_AT + (N_GEN - SAVE_AT), "stats restored: %lld decode tokens",
              (long long)st.n_decode_tokens);
        er_session_free(c);
        er_model_close(m2);
    }
    er_session_free(a);
    er_session_free(b);
    er_model_close(m);
}

/* ---- rejection ---------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    fstat(fd, &st);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    *n = (size_t)read(fd, p, (size_t)st.st_size);
    close(fd);
    return p;
}

static void spit(const char *path, const void *p, size_t n) {
    /* unlink, not O_TRUNC: ext4 flushes a truncated-and-rewritten file on
     * close, which makes the 2000 rewrites below take seconds */
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, p, n) == (ssize_t)n, "write %s", path);
    close(fd);
}

/* The session's observable state, to prove a failed load changed nothing. */
typedef struct state {
    int pos, has_logits;
    uint64_t rng;
    uint32_t crc_like;
} state;

static state snap_state(const er_session *s) {
    state st = {s->pos, s->has_logits, s->rng, 0};
    const uint8_t *p = (const uint8_t *)s->logits;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < (size_t)s->model->d.n_vocab * 4; i++) h = (h ^ p[i]) * 16777619u;
    const uint8_t *k = s->k_cache;
    for (size_t i = 0; i < (size_t)s->pos * s->model->d.kv_row * 4; i++) h = (h ^ k[i]) * 16777619u;
    st.crc_like = h;
    return st;
}

static int same(state a, state b) {
    return a.pos == b.pos && a.has_logits == b.has_logits && a.rng == b.rng && a.crc_like == b.crc_like;
}

static void expect_reject(er_session *s, const char *path, int want, const char *what) {
    state before = snap_state(s);
    er_clear_error();
    int rc = er_session_load(s, path);
    CHECK(rc == want, "%s: load returned %s (%s), want %s", what, er_status_name(rc), er_last_error(),
          er_status_name(want));
    CHECK(er_last_error()[0] != '\0', "%s: no message", what);
    CHECK(same(before, snap_state(s)), "%s: a failed load changed the session", what);
}

static void test_reject(void) {
    char good[600], bad[600], other[600];
    path_in(good, sizeof good, "good.snap");
    path_in(bad, sizeof bad, "bad.snap");
    path_in(other, sizeof other, "other-model.gguf");
    er_model *m = open_model(g_model, 128, 1, ER_KV_F32, 2);
    if (!m) return;
    er_session *a = NULL, *b = NULL;
    er_session_new(m, &a);
    er_session_new(m, &b);
    er_session_seed(a, 5);
    prompt(a);
    int32_t t[6];
    generate(a, t, 6);
    CHECK(er_session_save(a, good) == ER_OK, "%s", er_last_error());
    er_session_seed(b, 77);
    prompt(b);

    size_t n = 0;
    uint8_t *img = slurp(good, &n);
    CHECK(img && n > 128, "snapshot of %zu bytes", n);
    if (!img) return;
    /* every bit of the header and a stride through the payload */
    int flips = 0;
    for (size_t i = 0; i < n; i += i < 128 ? 1 : 1 + n / 400) {
        for (int bit = 0; bit < 8; bit += i < 128 ? 1 : 3) {
            img[i] ^= (uint8_t)(1u << bit);
            spit(bad, img, n);
            img[i] ^= (uint8_t)(1u << bit);
            state before = snap_state(b);
            int rc = er_session_load(b, bad);
            /* the version field may turn into another version number */
            int ok = rc == ER_ECORRUPT || (rc == ER_EUNSUPPORTED && i >= 8 && i < 12);
            CHECK(ok, "flip byte %zu bit %d: %s (%s)", i, bit, er_status_name(rc), er_last_error());
            CHECK(same(before, snap_state(b)), "flip byte %zu bit %d changed the session", i, bit);
            flips++;
        }
    }
    printf("snapshot: %d bit flips of a %zu-byte snapshot all rejected\n", flips, n);
    spit(bad, img, n - 1);
    expect_reject(b, bad, ER_ECORRUPT, "truncated by one byte");
    spit(bad, img, 100);
    expect_reject(b, bad, ER_ECORRUPT, "truncated into the header");
    spit(bad, img, 0);
    expect_reject(b, bad, ER_ECORRUPT, "empty file");
    uint8_t *longer = malloc(n + 4);
    memcpy(longer, img, n);
    memset(longer + n, 0, 4);
    spit(bad, longer, n + 4);
    expect_reject(b, bad, ER_ECORRUPT, "trailing bytes");
    free(longer);
    expect_reject(b, g_model, ER_ECORRUPT, "a GGUF file");
    path_in(bad, sizeof bad, "missing.snap");
    expect_reject(b, bad, ER_EIO, "missing file");
    expect_reject(b, g_dir, ER_EIO, "a folder");

    /* a model whose weights differ in one sampled byte: same geometry, other fingerprint */
    size_t mn = 0;
    uint8_t *model = slurp(g_model, &mn);
    gguf_file f;
    if (model && gguf_parse(model, mn, &f) == ER_OK) {
        gguf_tensor tt;
        CHECK(gguf_find_tensor(&f, "output_norm.weight", &tt), "tensor");
        size_t off = (size_t)(tt.data - model);
        model[off + 1] ^= 0x40; /* a float's mantissa: the file stays valid */
        spit(other, model, mn);
        er_model *m3 = open_model(other, 128, 1, ER_KV_F32, 1);
        if (m3) {
            er_session *c = NULL;
            er_session_new(m3, &c);
            expect_reject(c, good, ER_EMISMATCH, "another model");
            er_session_free(c);
            er_model_close(m3);
        }
    }
    free(model);
    free(img);

    er_model *m16 = open_model(g_model, 128, 1, ER_KV_F16, 1);
    if (m16) {
        er_session *c = NULL;
        er_session_new(m16, &c);
        expect_reject(c, good, ER_EMISMATCH, "another kv_type");
        er_session_free(c);
        er_model_close(m16);
    }
    er_model *small = open_model(g_model, 8, 1, ER_KV_F32, 1);
    if (small) {
        er_session *c = NULL;
        er_session_new(small, &c);
        expect_reject(c, good, ER_ECONTEXT, "n_ctx too small");
        er_session_free(c);
        er_model_close(small);
    }

    /* an empty session round-trips: position 0, no logits to sample from */
    char empty[600];
    path_in(empty, sizeof empty, "empty.snap");
    er_session *e = NULL;
    er_session_free(b);
    CHECK(er_session_new(m, &e) == ER_OK, "%s", er_last_error());
    er_session_reset(e);
    CHECK(er_session_save(e, empty) == ER_OK, "save empty: %s", er_last_error());
    CHECK(er_session_load(a, empty) == ER_OK && er_session_pos(a) == 0, "load empty: %s", er_last_error());
    int32_t id;
    CHECK(er_sample(a, NULL, &id) == ER_ESTATE, "sampling an empty loaded session");
    CHECK(prompt(a) == ER_OK, "decode after loading an empty snapshot: %s", er_last_error());
    b = e;

    /* save failures leave the previous snapshot alone and no temporary file */
    char nodir[700];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir/x.snap", g_dir);
    CHECK(er_session_save(a, nodir) == ER_EIO && er_last_error()[0], "save into a missing folder: %s",
          er_last_error());
    er_session_free(a);
    er_session_free(b);
    er_model_close(m);
}

/* ---- power cut -------------------------------------------------------------- */

#define PC_PERIOD 24         /* states cycle through 1..PC_PERIOD positions */
#define PC_KILLS 220

typedef struct shared {
    volatile int64_t started, completed; /* version being / last saved by the child */
    volatile int64_t base;               /* version the child resumes from */
} shared;

static int32_t g_pc_ids[PC_PERIOD];
static float *g_pc_logits; /* PC_PERIOD rows of n_vocab: logits after p tokens at row p-1 */

/* Moves session s from version k-1 to version k. */
static int pc_step(er_session *s, int64_t k) {
    int p = (int)(1 + k % PC_PERIOD);
    if (p == 1) er_session_reset(s);
    int rc = er_decode(s, &g_pc_ids[p - 1], 1, NULL);
    if (rc) return rc;
    return er_session_seed(s, (uint64_t)k);
}

static uint64_t rng_of(er_session *scratch, int64_t k) {
    er_session_seed(scratch, (uint64_t)k);
    return scratch->rng;
}

/* Which version the session holds, or -1 if it matches none it may hold. */
static int64_t identify(er_session *s, er_session *scratch, int64_t lo, int64_t hi) {
    for (int64_t k = lo; k <= hi; k++) {
        int p = (int)(1 + k % PC_PERIOD);
        if (s->pos != p || s->rng != rng_of(scratch, k) || !s->has_logits) continue;
        if (memcmp(s->history, g_pc_ids, (size_t)p * 4) != 0) continue;
        const float *want = g_pc_logits + (size_t)(p - 1) * s->model->d.n_vocab;
        int ok = 1;
        for (int i = 0; i < s->model->d.n_vocab && ok; i++) ok = fabsf(s->logits[i] - want[i]) <= 1e-5f;
        if (ok) return k;
    }
    return -1;
}

static void child_loop(er_model *m, const char *path, shared *sh) {
    er_session *s = NULL;
    if (er_session_new(m, &s) != ER_OK || er_session_load(s, path) != ER_OK) _exit(3);
    for (int64_t k = sh->base + 1;; k++) {
        if (pc_step(s, k) != ER_OK) _exit(4);
        sh->started = k;
        if (er_session_save(s, path) != ER_OK) _exit(5);
        sh->completed = k;
    }
}

static void test_power_cut(void) {
    char path[600];
    path_in(path, sizeof path, "pc.snap");
    er_model *m = open_model(g_model, 64, 1, ER_KV_F32, 4); /* 3 here + the writer's */
    if (!m) return;
    er_session *ref = NULL, *chk = NULL, *scratch = NULL;
    er_session_new(m, &ref);
    er_session_new(m, &chk);
    er_session_new(m, &scratch);
    uint64_t r = 0x1234567;
    for (int i = 0; i < PC_PERIOD; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        g_pc_ids[i] = (int32_t)((r >> 33) % (uint64_t)m->d.n_vocab);
    }
    g_pc_logits = malloc(sizeof(float) * PC_PERIOD * (size_t)m->d.n_vocab);
    for (int p = 1; p <= PC_PERIOD; p++) {
        float *lg = NULL;
        er_decode(ref, &g_pc_ids[p - 1], 1, &lg);
        memcpy(g_pc_logits + (size_t)(p - 1) * m->d.n_vocab, lg, sizeof(float) * (size_t)m->d.n_vocab);
    }
    /* version 0 on disk before the first writer starts */
    er_session_reset(ref);
    pc_step(ref, 0);
    CHECK(er_session_save(ref, path) == ER_OK, "%s", er_last_error());

    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sh->base = 0;
    srand(12345);
    int kills = 0, old_hits = 0, new_hits = 0, bad = 0, tmp_valid = 0, tmp_rejected = 0;
    int64_t max_version = 0;
    double t_start = er_now_ms();
    for (; kills < PC_KILLS; kills++) {
        sh->started = sh->completed = sh->base;
        pid_t pid = fork();
        if (pid == 0) child_loop(m, path, sh);
        CHECK(pid > 0, "fork: %s", strerror(errno));
        if (pid < 0) break;
        /* 0.05..25 ms: a save with its two fsyncs takes ~1-10 ms on a disk,
         * so kills land before the first save, inside write, fsync and rename,
         * and between saves */
        struct timespec ts = {0, 50000 + (long)(rand() % 25000) * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child exited by itself (status %d)", status);
        int64_t lo = sh->completed, hi = sh->started;
        int rc = er_session_load(chk, path);
        CHECK(rc == ER_OK, "kill %d: the snapshot does not load: %s", kills, er_last_error());
        int64_t v = rc == ER_OK ? identify(chk, scratch, lo, hi) : -1;
        if (v < 0) {
            bad++;
            CHECK(v >= 0, "kill %d: snapshot is neither version %lld nor %lld", kills, (long long)lo, (long long)hi);
            break;
        }
        if (v == lo) old_hits++;
        else new_hits++;
        if (v > max_version) max_version = v;
        sh->base = v;

        /* leftover temporary files: a complete one may load (it is the
         * in-flight version), a partial one must not */
        DIR *dir = opendir(g_dir);
        struct dirent *de;
        while (dir && (de = readdir(dir))) {
            if (strncmp(de->d_name, "pc.snap.tmp.", 12) != 0) continue;
            char tp[1200];
            snprintf(tp, sizeof tp, "%s/%s", g_dir, de->d_name);
            state before = snap_state(scratch);
            int trc = er_session_load(scratch, tp);
            if (trc == ER_OK) {
                int64_t tv = identify(scratch, chk, hi, hi);
                CHECK(tv == hi, "kill %d: a complete temporary file holds an unexpected state", kills);
                tmp_valid++;
            } else {
                CHECK(trc == ER_ECORRUPT, "kill %d: temporary file: %s", kills, er_status_name(trc));
                CHECK(same(before, snap_state(scratch)), "rejected temporary file changed the session");
                tmp_rejected++;
            }
            unlink(tp);
        }
        if (dir) closedir(dir);
    }
    printf("power cut: %d kills in %.1f s; loaded the old version %d times, the new one %d times; "
           "%d versions written; temporary files left: %d partial (rejected), %d complete\n",
           kills, (er_now_ms() - t_start) / 1e3, old_hits, new_hits, (int)max_version, tmp_rejected, tmp_valid);
    CHECK(kills >= 200 && bad == 0, "%d kills, %d bad", kills, bad);
    CHECK(max_version > 20, "the writer made little progress (%lld versions): delays too short?",
          (long long)max_version);
    munmap(sh, sizeof *sh);
    free(g_pc_logits);
    unlink(path);
    er_session_free(ref);
    er_session_free(chk);
    er_session_free(scratch);
    er_model_close(m);
}

static void cleanup_dir(void) {
    DIR *dir = opendir(g_dir);
    struct dirent *de;
    while (dir && (de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
        unlink(p);
    }
    if (dir) closedir(dir);
    rmdir(g_dir);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_snapshot MODEL.gguf\n");
        return 77;
    }
    g_model = argv[1];
    if (access(g_model, R_OK) != 0) {
        printf("skip: %s not found\n", g_model);
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/er-snap-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = er_now_ms();
    test_resume(ER_KV_F32);
    test_resume(ER_KV_F16);
    double t1 = er_now_ms();
    test_reject();
    double t2 = er_now_ms();
    test_power_cut();
    printf("resume %.1f s, reject %.1f s, power cut %.1f s\n", (t1 - t0) / 1e3, (t2 - t1) / 1e3,
           (er_now_ms() - t2) / 1e3);
    cleanup_dir();
    return test_summary();
}
