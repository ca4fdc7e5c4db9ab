/*
 * test_failinject.c — every allocation and I/O call the runtime makes fails
 * in turn, and each failure gives a clean error: a negative status with a
 * message, no crash, no leaked heap block, file descriptor, file mapping,
 * thread or temporary file, and no half-changed session.
 *
 * How: this executable defines malloc/calloc/realloc/free/posix_memalign/
 * aligned_alloc, open/open64/openat/openat64 (+ the _FORTIFY_SOURCE
 * variants), fstat/fstat64, mmap/mmap64/munmap, read/write/fsync/rename/close
 * and pthread_create. The runtime is linked in statically, so these
 * definitions win for every call it makes; they forward to glibc (__libc_*
 * for the heap, dlsym(RTLD_NEXT) for the rest). The scenario — plan, open
 * with 2 threads and a trace ring, tokenize, prefill, 4 sampled tokens,
 * snapshot save and load, trace export, close — first runs with counting only
 * (C calls), then C more times with call N = 1..C failing.
 *
 * Heap blocks are tracked only while armed: the runtime's single arena block
 * must be freed on every path. Needs glibc (else exits 77, skipped). Under
 * ASan the heap calls still go to glibc's allocator (as in test_no_alloc), so
 * leaks are judged by this test's own bookkeeping, not by LeakSanitizer.
 */
/* The build asks for 64-bit off_t, which makes glibc's headers rename open to
 * open64 (and fstat, mmap...): this file defines both names itself, so it
 * needs the plain declarations. */
#undef _FILE_OFFSET_BITS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "edgerun.h"
#include "error.h"
#include "test_util.h"

/* ---- the interposer ------------------------------------------------------------ */

enum { K_HEAP, K_OPEN, K_FSTAT, K_MMAP, K_READ, K_WRITE, K_FSYNC, K_RENAME, K_THREAD, K_COUNT };
static const char *const k_kind[K_COUNT] = {"heap", "open", "fstat", "mmap", "read", "write", "fsync", "rename",
                                            "pthread_create"};

static volatile int g_armed;
static long g_calls, g_fail_at, g_injected;
static int g_injected_kind = -1;
static long g_per_kind[K_COUNT];

/* Counts a call; true when this is the one to fail. */
static int inject(int kind) {
    if (!g_armed) return 0;
    long n = __atomic_add_fetch(&g_calls, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_per_kind[kind], 1, __ATOMIC_SEQ_CST);
    if (n != g_fail_at) return 0;
    g_injected++;
    g_injected_kind = kind;
    return 1;
}

/* Live resources acquired while armed. Small tables: the runtime holds a
 * handful of each. */
#define MAX_LIVE 256
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_blocks[MAX_LIVE];
static int g_fds[MAX_LIVE];
static struct { void *addr; size_t len; } g_maps[MAX_LIVE];
static int g_overflow;

static void track_block(void *p) {
    if (!g_armed || !p) return;
    pthread_mutex_lock(&g_mu);
    int i = 0;
    while (i < MAX_LIVE && g_blocks[i]) i++;
    if (i < MAX_LIVE) g_blocks[i] = p;
    else g_overflow = 1;
    pthread_mutex_unlock(&g_mu);
}

static void untrack_block(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (g_blocks[i] == p) g_blocks[i] = NULL;
    pthread_mutex_unlock(&g_mu);
}

static void track_fd(int fd) {
    if (!g_armed || fd < 0) return;
    pthread_mutex_lock(&g_mu);
    int i = 0;
    while (i < MAX_LIVE && g_fds[i] >= 0) i++;
    if (i < MAX_LIVE) g_fds[i] = fd;
    else g_overflow = 1;
    pthread_mutex_unlock(&g_mu);
}

static void untrack_fd(int fd) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (g_fds[i] == fd) g_fds[i] = -1;
    pthread_mutex_unlock(&g_mu);
}

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n) {
    if (inject(K_HEAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_malloc(n);
    track_block(p);
    return p;
}

void *calloc(size_t a, size_t b) {
    if (inject(K_HEAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_calloc(a, b);
    track_block(p);
    return p;
}

void *realloc(void *old, size_t n) {
    if (inject(K_HEAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_realloc(old, n);
    if (p || n == 0) untrack_block(old);
    track_block(p);
    return p;
}

void free(void *p) {
    untrack_block(p);
    __libc_free(p);
}

/* glibc's own memalign. Not __libc_memalign: ASan intercepts that name (the
 * loader uses it for TLS), and a block from ASan's allocator handed to
 * __libc_free aborts. Looked up in libc's handle, which skips interceptors. */
static void *(*real_memalign)(size_t, size_t);

int posix_memalign(void **out, size_t align, size_t n) {
    if (inject(K_HEAP)) return ENOMEM;
    void *p = real_memalign(align, n);
    if (!p) return ENOMEM;
    track_block(p);
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n) {
    if (inject(K_HEAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = real_memalign(align, n);
    track_block(p);
    return p;
}

/* Real libc entry points, resolved before main (dlsym may itself allocate,
 * which is fine: the heap functions above need no resolution). */
static int (*real_open)(const char *, int, ...), (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...), (*real_openat64)(int, const char *, int, ...);
static int (*real_open_2)(const char *, int), (*real_open64_2)(const char *, int);
static int (*real_fstat)(int, struct stat *), (*real_fstat64)(int, struct stat64 *);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t), *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int (*real_munmap)(void *, size_t);
static ssize_t (*real_read)(int, void *, size_t), (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int), (*real_rename)(const char *, const char *), (*real_close)(int);
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

#define RESOLVE(var, name) (*(void **)&(var) = dlsym(RTLD_NEXT, name))

__attribute__((constructor)) static void resolve_all(void) {
    RESOLVE(real_open, "open");
    RESOLVE(real_open64, "open64");
    RESOLVE(real_openat, "openat");
    RESOLVE(real_openat64, "openat64");
    RESOLVE(real_open_2, "__open_2");
    RESOLVE(real_open64_2, "__open64_2");
    RESOLVE(real_fstat, "fstat");
    RESOLVE(real_fstat64, "fstat64");
    RESOLVE(real_mmap, "mmap");
    RESOLVE(real_mmap64, "mmap64");
    RESOLVE(real_munmap, "munmap");
    RESOLVE(real_read, "read");
    RESOLVE(real_write, "write");
    RESOLVE(real_fsync, "fsync");
    RESOLVE(real_rename, "rename");
    RESOLVE(real_close, "close");
    RESOLVE(real_pthread_create, "pthread_create");
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc) *(void **)&real_memalign = dlsym(libc, "memalign");
    for (int i = 0; i < MAX_LIVE; i++) g_fds[i] = -1;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_BODY(call)                 \
    if (inject(K_OPEN)) {               \
        errno = EMFILE;                 \
        return -1;                      \
    }                                   \
    int fd = call;                      \
    track_fd(fd);                       \
    return fd;

int open(const char *p, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    OPEN_BODY(real_open(p, flags, mode))
}
int open64(const char *p, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    OPEN_BODY(real_open64(p, flags, mode))
}
int openat(int dir, const char *p, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    OPEN_BODY(real_openat(dir, p, flags, mode))
}
int openat64(int dir, const char *p, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    OPEN_BODY(real_openat64(dir, p, flags, mode))
}
int __open_2(const char *p, int flags);
int __open_2(const char *p, int flags) { OPEN_BODY(real_open_2(p, flags)) }
int __open64_2(const char *p, int flags);
int __open64_2(const char *p, int flags) { OPEN_BODY(real_open64_2(p, flags)) }

int close(int fd) {
    untrack_fd(fd);
    return real_close(fd);
}

int fstat(int fd, struct stat *st) {
    if (inject(K_FSTAT)) {
        errno = EIO;
        return -1;
    }
    return real_fstat(fd, st);
}
int fstat64(int fd, struct stat64 *st) {
    if (inject(K_FSTAT)) {
        errno = EIO;
        return -1;
    }
    return real_fstat64(fd, st);
}

static void track_map(void *a, size_t len, int fd) {
    if (!g_armed || a == MAP_FAILED || fd < 0) return; /* anonymous maps are glibc's (thread stacks) */
    pthread_mutex_lock(&g_mu);
    int i = 0;
    while (i < MAX_LIVE && g_maps[i].addr) i++;
    if (i < MAX_LIVE) {
        g_maps[i].addr = a;
        g_maps[i].len = len;
    } else {
        g_overflow = 1;
    }
    pthread_mutex_unlock(&g_mu);
}

void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
    if (inject(K_MMAP)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    void *p = real_mmap(a, len, prot, flags, fd, off);
    track_map(p, len, fd);
    return p;
}
void *mmap64(void *a, size_t len, int prot, int flags, int fd, off64_t off) {
    if (inject(K_MMAP)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    void *p = real_mmap64(a, len, prot, flags, fd, off);
    track_map(p, len, fd);
    return p;
}

int munmap(void *a, size_t len) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (g_maps[i].addr == a && g_maps[i].len == len) g_maps[i].addr = NULL;
    pthread_mutex_unlock(&g_mu);
    return real_munmap(a, len);
}

ssize_t read(int fd, void *b, size_t n) {
    if (inject(K_READ)) {
        errno = EIO;
        return -1;
    }
    return real_read(fd, b, n);
}

ssize_t write(int fd, const void *b, size_t n) {
    if (inject(K_WRITE)) {
        errno = ENOSPC;
        return -1;
    }
    return real_write(fd, b, n);
}

int fsync(int fd) {
    if (inject(K_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int rename(const char *a, const char *b) {
    if (inject(K_RENAME)) {
        errno = EXDEV;
        return -1;
    }
    return real_rename(a, b);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    if (inject(K_THREAD)) return EAGAIN;
    return real_pthread_create(t, attr, fn, arg);
}

/* ---- the scenario ------------------------------------------------------------------ */

static char g_dir[512], g_snap[600], g_trace[600];

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
    return n;
}

static int temp_files(void) {
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

typedef struct outcome {
    int failed;            /* some call returned an error */
    int bad;               /* an error without a message, a wrong status, or changed state */
    char where[64];
} outcome;

static void note(outcome *o, const char *where, int rc, int ok_status) {
    if (rc == ER_OK) return;
    if (!o->failed) snprintf(o->where, sizeof o->where, "%s -> %s", where, er_status_name(rc));
    o->failed = 1;
    if (rc > 0 || !er_last_error()[0] || (ok_status && rc != ok_status)) o->bad = 1;
}

static outcome scenario(const char *model) {
    outcome o = {0, 0, ""};
    static uint8_t scratch[1 << 16];
    er_options opts;
    er_options_default(&opts);
    opts.n_ctx = 64;
    opts.n_threads = 2;
    opts.trace_events = 512;

    er_plan_report rep;
    note(&o, "er_plan", er_plan(model, &opts, &rep), 0);

    er_model *m = NULL;
    int rc = er_model_open(model, &opts, &m);
    note(&o, "er_model_open", rc, 0);
    if (rc) {
        if (m) o.bad = 1;
        return o;
    }
    er_session *s = NULL, *s2 = NULL;
    note(&o, "er_session_new", er_session_new(m, &s), 0);
    if (er_session_new(m, &s2) != ER_EBUSY || s2) o.bad = 1; /* n_sessions = 1 */
    int32_t ids[32];
    size_t n = 0;
    const er_vocab *v = er_model_vocab(m);
    rc = er_tokenize(v, "12+34=", 6, ER_TOK_ADD_SPECIAL, ids, 32, &n, scratch, sizeof scratch);
    note(&o, "er_tokenize", rc, 0);
    if (rc == ER_OK) note(&o, "er_decode", er_decode(s, ids, n, NULL), 0);
    er_sampling sp;
    er_sampling_default(&sp);
    sp.temperature = 0.7f;
    er_session_seed(s, 3);
    for (int i = 0; i < 4 && rc == ER_OK; i++) {
        int32_t id;
        rc = er_sample(s, &sp, &id);
        if (rc == ER_OK) rc = er_decode(s, &id, 1, NULL);
        note(&o, "generate", rc, 0);
    }

    rc = er_session_save(s, g_snap);
    note(&o, "er_session_save", rc, ER_EIO);
    int pos = er_session_pos(s);
    er_session_reset(s);
    rc = er_session_load(s, g_snap);
    note(&o, "er_session_load", rc, ER_EIO);
    /* loaded: the new snapshot; refused: the reset session, untouched (the
     * file is then the previous run's snapshot or this one's) */
    if (rc == ER_OK && er_session_pos(s) != pos) o.bad = 1;
    if (rc != ER_OK && er_session_pos(s) != 0) o.bad = 1;

    note(&o, "er_trace_export", er_trace_export(m, g_trace), ER_EIO);
    er_session_free(s);
    er_model_close(m);
    return o;
}

static int live_blocks(void) {
    int n = 0;
    for (int i = 0; i < MAX_LIVE; i++) n += g_blocks[i] != NULL;
    return n;
}
static int live_fds(void) {
    int n = 0;
    for (int i = 0; i < MAX_LIVE; i++) n += g_fds[i] >= 0;
    return n;
}
static int live_maps(void) {
    int n = 0;
    for (int i = 0; i < MAX_LIVE; i++) n += g_maps[i].addr != NULL;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_failinject MODEL.gguf\n");
        return 77;
    }
    if (access(argv[1], R_OK) != 0) {
        printf("skip: %s not found\n", argv[1]);
        return 77;
    }
    if (!real_open || !real_mmap || !real_pthread_create || !real_write || !real_memalign) {
        printf("skip: cannot resolve libc entry points\n");
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/er-fail-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    snprintf(g_snap, sizeof g_snap, "%s/s.snap", g_dir);
    snprintf(g_trace, sizeof g_trace, "%s/t.json", g_dir);
    int threads0 = thread_count();

    /* the counting run (also warms glibc's thread-stack cache) */
    g_fail_at = 0;
    g_calls = 0;
    g_armed = 1;
    outcome o = scenario(argv[1]);
    g_armed = 0;
    long total = g_calls;
    CHECK(!o.failed, "the scenario fails without injection: %s: %s", o.where, er_last_error());
    printf("scenario makes %ld interposed calls:", total);
    for (int k = 0; k < K_COUNT; k++) printf(" %s %ld", k_kind[k], g_per_kind[k]);
    printf("\n");
    CHECK(g_per_kind[K_HEAP] >= 1 && g_per_kind[K_OPEN] >= 4 && g_per_kind[K_MMAP] >= 2 &&
          g_per_kind[K_WRITE] >= 2 && g_per_kind[K_THREAD] >= 1, "interposition missed calls");
    CHECK(live_blocks() == 0 && live_fds() == 0 && live_maps() == 0, "clean run leaks: %d blocks %d fds %d maps",
          live_blocks(), live_fds(), live_maps());

    int by_kind[K_COUNT] = {0};
    for (long nth = 1; nth <= total; nth++) {
        g_fail_at = nth;
        g_calls = 0;
        g_injected = 0;
        g_injected_kind = -1;
        er_clear_error();
        g_armed = 1;
        o = scenario(argv[1]);
        g_armed = 0;
        const char *kind = g_injected_kind >= 0 ? k_kind[g_injected_kind] : "?";
        CHECK(g_injected == 1, "call %ld: the injection did not happen (the call sequence changed)", nth);
        CHECK(o.failed, "call %ld (%s) failed but every API call returned ER_OK", nth, kind);
        CHECK(!o.bad, "call %ld (%s): unclean failure at %s: '%s'", nth, kind, o.where, er_last_error());
        CHECK(live_blocks() == 0, "call %ld (%s): %d heap blocks leaked", nth, kind, live_blocks());
        CHECK(live_fds() == 0, "call %ld (%s): %d file descriptors leaked", nth, kind, live_fds());
        CHECK(live_maps() == 0, "call %ld (%s): %d file mappings leaked", nth, kind, live_maps());
        CHECK(temp_files() == 0, "call %ld (%s): a temporary snapshot file was left behind", nth, kind);
        /* a joined thread can still be counted in /proc for a moment: the
         * kernel wakes pthread_join before it drops the thread from the
         * group (seen once under a parallel test run); a leaked thread
         * stays, so waiting up to ~0.2 s cannot hide one */
        int th = thread_count();
        for (int w = 0; w < 200 && th != threads0; w++) {
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
            th = thread_count();
        }
        CHECK(th == threads0, "call %ld (%s): %d threads alive, %d before", nth, kind, th, threads0);
        if (g_injected_kind >= 0) by_kind[g_injected_kind]++;
        if (getenv("ER_FAILINJECT_VERBOSE")) printf("call %2ld %-14s -> %s: %s\n", nth, kind, o.where, er_last_error());
        er_clear_error();
    }
    CHECK(!g_overflow, "tracking tables overflowed");
    printf("failed each of the %ld calls in turn:", total);
    for (int k = 0; k < K_COUNT; k++) printf(" %s %d", k_kind[k], by_kind[k]);
    printf("\n");
    unlink(g_snap);
    unlink(g_trace);
    rmdir(g_dir);
    return test_summary();
}
#else
int main(void) {
    printf("skip: interposition needs glibc\n");
    return 77;
}
#endif
