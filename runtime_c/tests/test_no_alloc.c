/*
 * test_no_alloc.c — the static-arena promise: after er_model_open returns,
 * tokenizing, prefill, 100 decode steps with sampling and streaming
 * detokenization make zero calls to malloc/calloc/realloc/free; and, with
 * --page-faults (native runs: under qemu-user the count is the emulator's),
 * after the first step (which touches the mapped weights) decode takes no
 * page fault: open made the K/V caches, activations and sessions resident
 * and started the workers with their stacks (model.c fault_in_runtime,
 * threadpool.c touch_stack), so no step's latency depends on crossing a page
 * as the context grows.
 *
 * The test defines those four functions (and posix_memalign) itself; the
 * executable's definitions win over libc's for every caller in the process
 * (the runtime is linked in statically), and they forward to glibc. Counting
 * is switched on only around the generation loop; one run records into the
 * trace ring. Needs glibc: elsewhere it exits 77 (skipped).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "test_util.h"

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static volatile int g_counting;
static volatile long g_calls;

void *malloc(size_t n) {
    if (g_counting) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (g_counting) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (g_counting) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}
void free(void *p) {
    if (g_counting && p) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    __libc_free(p);
}

/* The arena comes from posix_memalign: it must reach glibc too, or under ASan
 * it would come from ASan's allocator and our free above would hand it to
 * glibc. glibc's memalign is looked up in libc's own handle because ASan
 * intercepts __libc_memalign. */
static void *(*real_memalign)(size_t, size_t);

int posix_memalign(void **out, size_t align, size_t n) {
    if (g_counting) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    if (!real_memalign) {
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc) *(void **)&real_memalign = dlsym(libc, "memalign");
        if (!real_memalign) return ENOMEM;
    }
    void *p = real_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

static int g_check_faults;

static void run(const char *path, int n_threads, int kv_type, int trace_events, int ctx_strategy) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 256;
    /* a sliding context: 100 tokens through 40 positions slide several
     * times (kv_shift.c), rows rotated or prefilled again, from the arena */
    if (ctx_strategy) {
        o.n_ctx = 40;
        o.ctx_strategy = ctx_strategy;
        o.ctx_keep = 4;
    }
    o.n_threads = n_threads;
    o.kv_type = kv_type;
    o.n_batch = 16;
    o.trace_events = trace_events;
    er_model *m = NULL;
    int rc = er_model_open(path, &o, &m);
    CHECK(rc == ER_OK, "open %s: %s", path, er_last_error());
    if (rc) return;
    er_session *s = NULL;
    CHECK(er_session_new(m, &s) == ER_OK, "session: %s", er_last_error());
    const er_vocab *v = er_model_vocab(m);

    static uint8_t scratch[1 << 20];
    static int32_t ids[256];
    static char text[256];
    const char *prompt = "12+34=";
    er_sampling sp;
    er_sampling_default(&sp);
    sp.temperature = 0.8f;
    sp.top_k = 20;
    sp.top_p = 0.95f;
    sp.min_p = 0.01f;
    sp.repeat_penalty = 1.1f;
    er_detok_state ds;
    memset(&ds, 0, sizeof ds);

    g_calls = 0;
    g_counting = 1;
    size_t n = 0;
    if (v) {
        rc = er_tokenize(v, prompt, strlen(prompt), ER_TOK_ADD_SPECIAL, ids, 256, &n, scratch, sizeof scratch);
    } else {
        ids[0] = 1;
        n = 1;
        rc = ER_OK;
    }
    int produced = 0;
    struct rusage r0, r1;
    memset(&r0, 0, sizeof r0);
    if (rc == ER_OK && er_decode(s, ids, n, NULL) == ER_OK && er_session_seed(s, 42) == ER_OK) {
        for (; produced < 100; produced++) {
            int32_t id;
            size_t got;
            if (produced == 1) getrusage(RUSAGE_SELF, &r0);
            if (er_sample(s, &sp, &id) != ER_OK) break;
            if (v) er_detok_step(v, &ds, id, text, sizeof text, &got);
            if (er_decode(s, &id, 1, NULL) != ER_OK) break;
        }
    }
    getrusage(RUSAGE_SELF, &r1);
    g_counting = 0;
    const long faults = (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);
    CHECK(!g_check_faults || faults == 0, "%ld page faults in 99 decode steps (threads %d, kv %d, trace %d)", faults,
          n_threads, kv_type, trace_events);
    CHECK(produced == 100, "generated %d of 100 tokens: %s", produced, er_last_error());
    CHECK(g_calls == 0, "%ld heap calls while generating (threads %d, kv %d, trace %d, ctx_strategy %d)",
          (long)g_calls, n_threads, kv_type, trace_events, ctx_strategy);
    if (ctx_strategy) CHECK(er_session_pos(s) < 40, "a 40-position session holds %d after 100 tokens", er_session_pos(s));
    if (trace_events) CHECK(er_trace_count(m) > 0, "tracing recorded nothing");
    er_session_free(s);
    er_model_close(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_no_alloc MODEL.gguf [--page-faults]\n");
        return 77;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        printf("skip: %s not found\n", argv[1]);
        return 77;
    }
    fclose(f);
    g_check_faults = argc > 2 && strcmp(argv[2], "--page-faults") == 0;
    run(argv[1], 1, ER_KV_F32, 0, ER_CTX_FAIL);
    run(argv[1], 2, ER_KV_F16, 0, ER_CTX_FAIL);
    run(argv[1], 2, ER_KV_F32, 4096, ER_CTX_FAIL); /* recording into the trace ring allocates nothing either */
    run(argv[1], 1, ER_KV_F32, 0, ER_CTX_SLIDE);
    run(argv[1], 2, ER_KV_F16, 0, ER_CTX_SLIDE);
    run(argv[1], 1, ER_KV_F32, 0, ER_CTX_SLIDE_PREFILL);
    return test_summary();
}
#else
int main(void) {
    printf("skip: malloc interposition needs glibc\n");
    return 77;
}
#endif
