/*
 * trace.c — recording into the op-trace ring and the Chrome trace export.
 *
 * Readers (count/get/export/reset) take the model's step_lock: every event is
 * written inside a forward step, which runs under that lock, so a reader never
 * sees a half-written slot. The export writes through a stack buffer with
 * write(2), keeping the "no heap after open" promise for every entry point.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "model.h"

static const char *const k_op_names[] = {
    "embed", "attn_norm", "qkv", "rope", "kv_store", "attention", "attn_out",
    "ffn_norm", "ffn_gate_up", "silu_mul", "ffn_down", "output_norm", "lm_head", "gelu_mul",
    "conv_in", "shortconv", "conv_out",
};
/* an op appended to the enum without a name here would print as NULL */
_Static_assert(sizeof k_op_names / sizeof k_op_names[0] == ER_OP_COUNT, "one name per ER_OP_*");

const char *er_trace_op_name(int op) {
    return op >= 0 && op < ER_OP_COUNT ? k_op_names[op] : "unknown";
}

size_t er_trace_plan(uint32_t events) {
    return events ? er_align_up((size_t)events * sizeof(er_trace_event)) : 0;
}

void er_trace_init(er_trace *t, er_trace_event *mem, uint32_t cap) {
    t->ring = mem;
    t->cap = mem ? cap : 0;
    atomic_init(&t->next, 0);
    atomic_init(&t->on, t->cap > 0);
    t->t0_ns = er_now_ns();
}

void er_trace_push(er_trace *t, uint64_t t_start, int op, int layer, int thread, int s0, int s1, int s2) {
    uint64_t t_end = er_now_ns();
    uint64_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
    er_trace_event *e = &t->ring[i % t->cap];
    /* clock readings before open cannot happen; clamp anyway so a relative
     * time never wraps to 2^64 */
    e->t_start_ns = t_start > t->t0_ns ? t_start - t->t0_ns : 0;
    e->t_end_ns = t_end > t->t0_ns ? t_end - t->t0_ns : 0;
    e->op = op;
    e->layer = layer;
    e->thread = thread;
    e->shape[0] = s0;
    e->shape[1] = s1;
    e->shape[2] = s2;
}

/* ---- public calls ---------------------------------------------------------- */

static int check_model(const er_model *m, const char *fn) {
    if (!m) return er_fail(ER_EINVAL, "%s: model is NULL", fn);
    return ER_OK;
}

static uint64_t held(const er_trace *t) {
    uint64_t n = atomic_load_explicit(&t->next, memory_order_relaxed);
    return n < t->cap ? n : t->cap;
}

int er_trace_enable(er_model *m, int on) {
    int rc = check_model(m, "er_trace_enable");
    if (rc) return rc;
    if (on != 0 && on != 1) return er_fail(ER_EINVAL, "er_trace_enable: on must be 0 or 1, got %d", on);
    if (on && m->trace.cap == 0)
        return er_fail(ER_ESTATE, "er_trace_enable: the model was opened with trace_events = 0, so no trace ring "
                                  "was planned (reopen with er_options.trace_events > 0)");
    atomic_store_explicit(&m->trace.on, on, memory_order_relaxed);
    return ER_OK;
}

int er_trace_reset(er_model *m) {
    int rc = check_model(m, "er_trace_reset");
    if (rc) return rc;
    pthread_mutex_lock(&m->step_lock);
    atomic_store_explicit(&m->trace.next, 0, memory_order_relaxed);
    pthread_mutex_unlock(&m->step_lock);
    return ER_OK;
}

int er_trace_count(er_model *m) {
    int rc = check_model(m, "er_trace_count");
    if (rc) return rc;
    pthread_mutex_lock(&m->step_lock);
    uint64_t n = held(&m->trace);
    pthread_mutex_unlock(&m->step_lock);
    return (int)n; /* cap <= 2^24 */
}

/* Event i (0 = oldest) of a ring holding n events; caller holds step_lock. */
static const er_trace_event *event_at(const er_trace *t, uint64_t n, uint64_t i) {
    uint64_t next = atomic_load_explicit(&t->next, memory_order_relaxed);
    return &t->ring[(next - n + i) % t->cap];
}

int er_trace_get(er_model *m, int32_t i, er_trace_event *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_trace_get: model and out must not be NULL");
    pthread_mutex_lock(&m->step_lock);
    uint64_t n = held(&m->trace);
    if (i < 0 || (uint64_t)i >= n) {
        pthread_mutex_unlock(&m->step_lock);
        return er_fail(ER_EINVAL, "er_trace_get: event %d out of range [0, %llu)", i, (unsigned long long)n);
    }
    *out = *event_at(&m->trace, n, (uint64_t)i);
    pthread_mutex_unlock(&m->step_lock);
    return ER_OK;
}

/* ---- export ---------------------------------------------------------------- */

typedef struct out_buf {
    int fd;
    int err;               /* first errno of a failed write, 0 if none */
    size_t n;
    char b[4096];
} out_buf;

static void flush_out(out_buf *o) {
    size_t done = 0;
    while (done < o->n && !o->err) {
        ssize_t w = write(o->fd, o->b + done, o->n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) o->err = w < 0 ? errno : EIO;
        else done += (size_t)w;
    }
    o->n = 0;
}

/* Appends formatted text; one record is far below the buffer size. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void emit(out_buf *o, const char *fmt, ...) {
    if (sizeof o->b - o->n < 512) flush_out(o);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->b + o->n, sizeof o->b - o->n, fmt, ap);
    va_end(ap);
    if (k > 0) o->n += (size_t)k < sizeof o->b - o->n ? (size_t)k : sizeof o->b - o->n - 1;
}

/* Microseconds with three decimals, from integer nanoseconds (no rounding
 * drift, so per-thread order in the file equals order in the ring). */
#define US_FMT "%llu.%03llu"
#define US_ARG(ns) (unsigned long long)((ns) / 1000u), (unsigned long long)((ns) % 1000u)

/* The model's name as a JSON string body: quotes, backslashes and control
 * bytes escaped (the name comes from the file). */
static void emit_json_str(out_buf *o, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') emit(o, "\\%c", c);
        else if (c < 0x20) emit(o, "\\u%04x", c);
        else if (c >= 0x80) emit(o, "?"); /* a 63-byte cut may split UTF-8: keep the JSON valid */
        else emit(o, "%c", c);
    }
}

static void write_events(er_model *m, out_buf *o) {
    const er_trace *t = &m->trace;
    uint64_t n = held(t), recorded = atomic_load_explicit(&t->next, memory_order_relaxed);
    emit(o, "{\"traceEvents\":[\n");
    /* thread names first, so Perfetto labels the tracks */
    for (int th = 0; th < m->d.n_threads; th++)
        emit(o, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s %d\"}},\n", th,
             th ? "worker" : "caller", th);
    for (uint64_t i = 0; i < n; i++) {
        const er_trace_event *e = event_at(t, n, i);
        uint64_t dur = e->t_end_ns > e->t_start_ns ? e->t_end_ns - e->t_start_ns : 0;
        emit(o, "{\"name\":\"%s\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":" US_FMT ",\"dur\":" US_FMT
                ",\"pid\":1,\"tid\":%d,\"args\":{\"layer\":%d,\"shape\":[%d,%d,%d]}}%s\n",
             er_trace_op_name(e->op), US_ARG(e->t_start_ns), US_ARG(dur), e->thread, e->layer, e->shape[0],
             e->shape[1], e->shape[2], i + 1 < n ? "," : "");
    }
    emit(o, "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"model\":\"");
    emit_json_str(o, m->hp.name);
    emit(o, "\",\"arch\":\"%s\",\"isa\":\"%s\",\"recorded\":%llu,\"held\":%llu,\"dropped\":%llu}}\n",
         m->hp.arch, m->k ? m->k->name : "", (unsigned long long)recorded, (unsigned long long)n,
         (unsigned long long)(recorded - n));
}

int er_trace_export(er_model *m, const char *path) {
    if (!m || !path) return er_fail(ER_EINVAL, "er_trace_export: model and path must not be NULL");
    if (!path[0]) return er_fail(ER_EINVAL, "er_trace_export: path is empty");
    out_buf o;
    o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o.fd < 0) return er_fail(ER_EIO, "er_trace_export: cannot create '%s': %s", path, strerror(errno));
    o.err = 0;
    o.n = 0;
    pthread_mutex_lock(&m->step_lock);
    write_events(m, &o);
    pthread_mutex_unlock(&m->step_lock);
    flush_out(&o);
    int e = o.err;
    if (close(o.fd) != 0 && !e) e = errno;
    if (e) return er_fail(ER_EIO, "er_trace_export: writing '%s' failed: %s", path, strerror(e));
    return ER_OK;
}
