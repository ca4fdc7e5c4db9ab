/*
 * test_live_no_alloc.c — the static-arena promise through an er_live handle:
 * taking sessions, prefill, greedy steps, a swap (while a session keeps the
 * old model open), a rebind and freeing sessions that do not end a model make
 * zero calls to malloc/calloc/realloc/free/posix_memalign. Only opening a
 * model, er_live_open and the close of a swapped-out model may allocate or
 * free, and they run outside the counted region.
 *
 * Like test_no_alloc, the executable defines the allocator entry points
 * itself and forwards them to glibc. That cannot share a process with a
 * sanitizer's allocator, so sanitizer builds (and non-glibc systems) skip.
 */
#include <stdio.h>
#include <stdlib.h>

#include "edgerun.h"
#include "test_util.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ER_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ER_SANITIZED 1
#endif

#if defined(__GLIBC__) && !defined(ER_SANITIZED)
#include <dlfcn.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static volatile int g_counting;
static volatile long g_calls;

static void count(void) {
    if (g_counting) __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { return count(), __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return count(), __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return count(), __libc_realloc(p, n); }
void free(void *p) {
    if (p) count();
    __libc_free(p);
}
int posix_memalign(void **out, size_t align, size_t n) {
    static void *(*memalign_fn)(size_t, size_t);
    count();
    if (!memalign_fn) {
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc) *(void **)&memalign_fn = dlsym(libc, "memalign");
        if (!memalign_fn) return ENOMEM;
    }
    void *p = memalign_fn(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

static er_model *open_model(const char *path) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 64;
    o.n_threads = 2;
    o.n_sessions = 2;
    er_model *m = NULL;
    CHECK(er_model_open(path, &o, &m) == ER_OK, "open %s: %s", path, er_last_error());
    return m;
}

/* Prefill and n greedy steps; returns the number of failing calls. */
static int generate(er_session *s, int n) {
    static const int32_t prompt[] = {1, 2, 3, 4, 5, 6};
    int bad = er_decode(s, prompt, 6, NULL) != ER_OK;
    for (int i = 0; i < n; i++) {
        int32_t t;
        bad += er_sample(s, NULL, &t) != ER_OK;
        bad += er_decode(s, &t, 1, NULL) != ER_OK;
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_live_no_alloc MODEL.gguf\n"), 2;
    er_model *a = open_model(argv[1]), *b = open_model(argv[1]);
    er_live *L = NULL;
    if (!a || !b || er_live_open(a, &L) != ER_OK) {
        CHECK(0, "setup: %s", er_last_error());
        return test_summary();
    }
    er_session *s1 = NULL, *s2 = NULL;
    int bad = 0;
    er_live_stats st;

    g_counting = 1;
    bad += er_live_session_new(L, &s1) != ER_OK;
    bad += s1 ? generate(s1, 20) : 1;
    bad += er_live_swap(L, b) != ER_OK;          /* a stays open: s1 holds it */
    bad += er_live_session_new(L, &s2) != ER_OK;
    bad += s2 ? generate(s2, 20) : 1;
    er_session_free(s2);                           /* b is current: stays open */
    bad += er_live_stats_get(L, &st) != ER_OK;
    g_counting = 0;

    CHECK(bad == 0, "%d calls failed: %s", bad, er_last_error());
    CHECK(g_calls == 0, "%ld allocator calls on the generation path through er_live", g_calls);
    CHECK(st.models_open == 2 && st.models_closed == 0, "old model kept open by its session");
    /* this rebind ends a's last session: a is closed (and freed) here */
    CHECK(er_live_session_rebind(L, &s1) == 1, "rebind: %s", er_last_error());
    er_session_free(s1);
    CHECK(er_live_close(L) == ER_OK, "close: %s", er_last_error());
    return test_summary();
}

#else
int main(void) {
    printf("skip: needs glibc and a build without sanitizers (it replaces the allocator)\n");
    return 77;
}
#endif
