/*
 * test_trace.c — the op-trace ring and its Chrome trace export, on the
 * embedded model (argv[1]).
 *
 *  - off (trace_events = 0): nothing is recorded, enabling is refused;
 *  - on: every operation of every layer appears, shapes match the model,
 *    pool workers record their shares, and per thread the events follow each
 *    other in time without overlap (monotonic timestamps);
 *  - enable(0)/enable(1)/reset, and a small ring that wraps (keeps the newest);
 *  - the exported file is parsed by a strict JSON parser written here and
 *    checked against the trace-event schema Perfetto reads (traceEvents of
 *    complete "X" events with name/ts/dur/pid/tid/args), per-thread
 *    timestamps monotonic;
 *  - the cost of tracing: tokens/s with no ring, a ring switched off, and
 *    recording — printed for the report, not asserted (timing on a shared CI
 *    machine is noise).
 */
#include <stdlib.h>
#include <unistd.h>

#include "edgerun.h"
#include "error.h"
#include "model.h"
#include "test_util.h"

static const char *g_model;

static er_model *open_traced(int events, int n_threads) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 256;
    o.n_batch = 16;
    o.n_threads = n_threads;
    o.trace_events = events;
    er_model *m = NULL;
    int rc = er_model_open(g_model, &o, &m);
    CHECK(rc == ER_OK, "open: %s", er_last_error());
    return m;
}

/* Prompt of 12 tokens, then n greedy decode steps. */
static int run_tokens(er_model *m, int n) {
    er_session *s = NULL;
    if (er_session_new(m, &s) != ER_OK) return -1;
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = 3 + i;
    int done = 0;
    if (er_decode(s, ids, 12, NULL) == ER_OK) {
        for (; done < n; done++) {
            int32_t id;
            if (er_sample(s, NULL, &id) != ER_OK || er_decode(s, &id, 1, NULL) != ER_OK) break;
        }
    }
    er_session_free(s);
    return done;
}

/* ---- a strict JSON parser (RFC 8259 grammar) into a flat node table ---------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jnode {
    int type;
    const char *s;         /* the value's text (strings: inside the quotes) */
    size_t len;
    const char *key;       /* member name when the parent is an object */
    size_t key_len;
    int first, next;       /* child list, sibling list (-1 = none) */
} jnode;

typedef struct jparser {
    const char *p, *end;
    jnode *n;
    int count, cap, err;
} jparser;

static void jws(jparser *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int jnew(jparser *j, int type) {
    if (j->count == j->cap) {
        j->cap = j->cap ? 2 * j->cap : 1024;
        j->n = realloc(j->n, sizeof(jnode) * (size_t)j->cap);
    }
    jnode *x = &j->n[j->count];
    memset(x, 0, sizeof *x);
    x->type = type;
    x->first = x->next = -1;
    return j->count++;
}

static int jstring(jparser *j, const char **s, size_t *len) {
    if (j->p >= j->end || *j->p != '"') return 0;
    const char *b = ++j->p;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) return 0;
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end) return 0;
            if (*j->p == 'u') {
                for (int i = 0; i < 4; i++) {
                    j->p++;
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p)) return 0;
                }
            } else if (!strchr("\"\\/bfnrt", *j->p)) {
                return 0;
            }
        }
        j->p++;
    }
    if (j->p >= j->end) return 0;
    *s = b;
    *len = (size_t)(j->p - b);
    j->p++;
    return 1;
}

static int jnumber(jparser *j) {
    const char *p = j->p;
    if (p < j->end && *p == '-') p++;
    if (p >= j->end) return 0;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < j->end && *p >= '0' && *p <= '9') p++;
    else return 0;
    if (p < j->end && *p == '.') {
        p++;
        if (p >= j->end || *p < '0' || *p > '9') return 0;
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < j->end && (*p == '+' || *p == '-')) p++;
        if (p >= j->end || *p < '0' || *p > '9') return 0;
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 1;
}

static int jvalue(jparser *j, int depth);

/* Parses a container's members; returns 0 on a syntax error. */
static int jcontainer(jparser *j, int self, int is_obj, int depth) {
    char close = is_obj ? '}' : ']';
    j->p++;
    jws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 1;
    }
    int prev = -1;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        jws(j);
        if (is_obj) {
            if (!jstring(j, &key, &key_len)) return 0;
            jws(j);
            if (j->p >= j->end || *j->p != ':') return 0;
            j->p++;
        }
        int child = jvalue(j, depth + 1);
        if (child < 0) return 0;
        j->n[child].key = key;
        j->n[child].key_len = key_len;
        if (prev < 0) j->n[self].first = child;
        else j->n[prev].next = child;
        prev = child;
        jws(j);
        if (j->p >= j->end) return 0;
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p != close) return 0;
        j->p++;
        return 1;
    }
}

static int jvalue(jparser *j, int depth) {
    jws(j);
    if (j->p >= j->end || depth > 64) return -1;
    char c = *j->p;
    const char *b = j->p;
    int id;
    if (c == '{' || c == '[') {
        id = jnew(j, c == '{' ? J_OBJ : J_ARR);
        if (!jcontainer(j, id, c == '{', depth)) return -1;
    } else if (c == '"') {
        id = jnew(j, J_STR);
        const char *s;
        size_t len;
        if (!jstring(j, &s, &len)) return -1;
        j->n[id].s = s;
        j->n[id].len = len;
        return id;
    } else if (c == 't' || c == 'f' || c == 'n') {
        const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t l = strlen(lit);
        if ((size_t)(j->end - j->p) < l || memcmp(j->p, lit, l) != 0) return -1;
        j->p += l;
        id = jnew(j, c == 'n' ? J_NULL : J_BOOL);
    } else {
        id = jnew(j, J_NUM);
        if (!jnumber(j)) return -1;
    }
    j->n[id].s = b;
    j->n[id].len = (size_t)(j->p - b);
    return id;
}

static int jget(const jparser *j, int obj, const char *key) {
    if (obj < 0 || j->n[obj].type != J_OBJ) return -1;
    for (int c = j->n[obj].first; c >= 0; c = j->n[c].next)
        if (j->n[c].key_len == strlen(key) && memcmp(j->n[c].key, key, j->n[c].key_len) == 0) return c;
    return -1;
}

static int jis_str(const jparser *j, int id, const char *want) {
    return id >= 0 && j->n[id].type == J_STR && j->n[id].len == strlen(want) && memcmp(j->n[id].s, want, j->n[id].len) == 0;
}

/* "123.456" microseconds -> 123456 ns (the export always writes 3 decimals). */
static int jus_ns(const jparser *j, int id, uint64_t *ns) {
    if (id < 0 || j->n[id].type != J_NUM) return 0;
    char tmp[64];
    size_t l = j->n[id].len < 63 ? j->n[id].len : 63;
    memcpy(tmp, j->n[id].s, l);
    tmp[l] = 0;
    char *dot = strchr(tmp, '.');
    if (!dot || strlen(dot + 1) != 3) return 0;
    *dot = 0;
    *ns = strtoull(tmp, NULL, 10) * 1000u + strtoull(dot + 1, NULL, 10);
    return 1;
}

static long jint(const jparser *j, int id) {
    return id >= 0 && j->n[id].type == J_NUM ? strtol(j->n[id].s, NULL, 10) : -99999;
}

/* ---- checks --------------------------------------------------------------------- */

/* Per thread, events in ring order must not overlap and must move forward. */
static void check_ring(er_model *m, const char *what) {
    int n = er_trace_count(m);
    uint64_t last_end[64] = {0};
    int bad = 0, per_op[ER_OP_COUNT] = {0}, workers = 0;
    for (int i = 0; i < n; i++) {
        er_trace_event e;
        if (er_trace_get(m, i, &e) != ER_OK) {
            bad++;
            continue;
        }
        int ok = e.thread >= 0 && e.thread < m->d.n_threads && e.op >= 0 && e.op < ER_OP_COUNT &&
                 e.layer >= -1 && e.layer < m->d.n_layer && e.t_end_ns >= e.t_start_ns &&
                 e.t_start_ns >= last_end[e.thread] && e.shape[0] >= 1;
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s: event %d op %d layer %d thread %d [%llu, %llu] after %llu\n", what, i, e.op, e.layer,
                    e.thread, (unsigned long long)e.t_start_ns, (unsigned long long)e.t_end_ns,
                    (unsigned long long)(e.thread >= 0 && e.thread < 64 ? last_end[e.thread] : 0));
        if (e.thread >= 0 && e.thread < 64) last_end[e.thread] = e.t_end_ns;
        if (e.op >= 0 && e.op < ER_OP_COUNT) per_op[e.op]++;
        if (e.thread > 0) workers++;
    }
    CHECK(bad == 0, "%s: %d of %d events out of order or out of range", what, bad, n);
    if (m->d.n_threads > 1) CHECK(workers > 0, "%s: no worker events with %d threads", what, m->d.n_threads);
}

static void check_export(er_model *m, const char *path, int want_events) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot read %s", path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    jparser j = {buf, buf + got, NULL, 0, 0, 0};
    int root = jvalue(&j, 0);
    jws(&j);
    CHECK(root >= 0 && j.p == j.end, "export is not valid JSON (stopped at byte %ld of %zu)", (long)(j.p - buf), got);
    if (root < 0) {
        free(buf);
        free(j.n);
        return;
    }
    int evs = jget(&j, root, "traceEvents");
    CHECK(evs >= 0 && j.n[evs].type == J_ARR, "no traceEvents array");
    uint64_t last_end[64] = {0};
    int n_x = 0, n_meta = 0, bad = 0;
    for (int e = evs >= 0 ? j.n[evs].first : -1; e >= 0; e = j.n[e].next) {
        int ph = jget(&j, e, "ph"), name = jget(&j, e, "name"), pid = jget(&j, e, "pid"), tid = jget(&j, e, "tid");
        if (jis_str(&j, ph, "M")) {
            n_meta++;
            continue;
        }
        uint64_t ts = 0, dur = 0;
        int args = jget(&j, e, "args");
        int shape = jget(&j, args, "shape");
        long t = jint(&j, tid), layer = jint(&j, jget(&j, args, "layer"));
        int ok = jis_str(&j, ph, "X") && name >= 0 && j.n[name].type == J_STR && j.n[name].len > 0 &&
                 jint(&j, pid) == 1 && t >= 0 && t < m->d.n_threads && jus_ns(&j, jget(&j, e, "ts"), &ts) &&
                 jus_ns(&j, jget(&j, e, "dur"), &dur) && layer >= -1 && layer < m->d.n_layer && shape >= 0 &&
                 j.n[shape].type == J_ARR;
        if (ok) {
            int k = 0;
            for (int c = j.n[shape].first; c >= 0; c = j.n[c].next) k++;
            ok = k == 3 && ts >= last_end[t];
            last_end[t] = ts + dur;
        }
        if (!ok) bad++;
        n_x++;
    }
    CHECK(bad == 0, "%d of %d exported events break the schema or per-thread order", bad, n_x);
    CHECK(n_x == want_events, "exported %d events, ring holds %d", n_x, want_events);
    CHECK(n_meta == m->d.n_threads, "%d thread_name records for %d threads", n_meta, m->d.n_threads);
    int other = jget(&j, root, "otherData");
    CHECK(jint(&j, jget(&j, other, "held")) == want_events, "otherData.held");
    free(buf);
    free(j.n);
}

static void test_off(void) {
    er_model *m = open_traced(0, 2);
    if (!m) return;
    CHECK(run_tokens(m, 8) == 8, "%s", er_last_error());
    CHECK_EQ_I64(er_trace_count(m), 0);
    CHECK(er_trace_enable(m, 1) == ER_ESTATE && er_last_error()[0], "enable without a ring");
    CHECK(er_trace_enable(m, 0) == ER_OK, "disable without a ring is allowed");
    er_plan_report rep;
    er_model_arena(m, &rep);
    CHECK(rep.n_sections == ER_SEC_COUNT && strcmp(rep.sections[6].name, "trace") == 0 && rep.sections[6].bytes == 0,
          "trace section planned although off");
    er_model_close(m);
}

static void test_on(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/er-trace-%ld.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    er_model *m = open_traced(100000, 2);
    if (!m) return;
    er_plan_report rep;
    er_model_arena(m, &rep);
    CHECK(rep.sections[6].bytes >= 100000 * sizeof(er_trace_event), "trace section %zu bytes", rep.sections[6].bytes);
    CHECK(run_tokens(m, 8) == 8, "%s", er_last_error());
    int n = er_trace_count(m);
    /* 9 forward steps (the prompt and 8 tokens): per step embed + per layer
     * 10 caller ops + output norm + lm head, plus worker shares */
    int per_step_caller = 3 + 10 * m->d.n_layer;
    CHECK(n >= 9 * per_step_caller, "%d events for 9 steps (want >= %d)", n, 9 * per_step_caller);
    int counts[ER_OP_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        er_trace_event e;
        er_trace_get(m, i, &e);
        if (e.thread == 0) counts[e.op]++;
        if (e.op == ER_OP_QKV && e.thread == 0) {
            int want = m->d.n_head * m->d.head_dim + 2 * (int)m->d.kv_row;
            CHECK(e.shape[1] == want && e.shape[2] == m->d.n_embd, "qkv shape [%d %d %d]", e.shape[0], e.shape[1],
                  e.shape[2]);
        }
        if (i == 0) CHECK(e.op == ER_OP_EMBED && e.shape[0] == 12, "first event op %d rows %d", e.op, e.shape[0]);
    }
    for (int op = 0; op < ER_OP_COUNT; op++) {
        int want = op == ER_OP_EMBED || op == ER_OP_OUTPUT_NORM || op == ER_OP_LM_HEAD ? 9 : 9 * m->d.n_layer;
        if (op == ER_OP_GELU_MUL) want = 0; /* a SwiGLU model: its gate is silu_mul */
        if (op >= ER_OP_CONV_IN && op <= ER_OP_CONV_OUT) want = 0; /* attention on every layer, no convolution */
        CHECK(counts[op] == want, "op %s: %d caller events, want %d", er_trace_op_name(op), counts[op], want);
    }
    check_ring(m, "two threads");
    CHECK(er_trace_export(m, path) == ER_OK, "export: %s", er_last_error());
    check_export(m, path, n);

    CHECK(er_trace_enable(m, 0) == ER_OK, "%s", er_last_error());
    run_tokens(m, 4);
    CHECK_EQ_I64(er_trace_count(m), n);
    CHECK(er_trace_enable(m, 1) == ER_OK, "%s", er_last_error());
    run_tokens(m, 1);
    CHECK(er_trace_count(m) > n, "recording resumed");
    CHECK(er_trace_reset(m) == ER_OK && er_trace_count(m) == 0, "reset");
    run_tokens(m, 1);
    er_trace_event e;
    CHECK(er_trace_get(m, 0, &e) == ER_OK && e.op == ER_OP_EMBED, "after reset the ring starts over");
    CHECK(er_trace_get(m, er_trace_count(m), &e) == ER_EINVAL, "get past the end");
    CHECK(strcmp(er_trace_op_name(ER_OP_ATTENTION), "attention") == 0 && strcmp(er_trace_op_name(99), "unknown") == 0,
          "op names");
    /* appended: the ids a saved trace or another binding holds keep their meaning */
    CHECK(ER_OP_GELU_MUL == 13 && ER_OP_CONV_IN == 14 && ER_OP_CONV_OUT + 1 == ER_OP_COUNT &&
              strcmp(er_trace_op_name(ER_OP_CONV_IN), "conv_in") == 0 &&
              strcmp(er_trace_op_name(ER_OP_SHORTCONV), "shortconv") == 0 &&
              strcmp(er_trace_op_name(ER_OP_CONV_OUT), "conv_out") == 0,
          "short-convolution op names");
    CHECK(er_trace_export(m, "/nonexistent-dir/x.json") == ER_EIO && er_last_error()[0], "export to a bad path");
    er_model_close(m);

    /* a ring smaller than one step wraps and keeps the newest, still ordered */
    m = open_traced(50, 1);
    if (m) {
        run_tokens(m, 3);
        CHECK_EQ_I64(er_trace_count(m), 50);
        check_ring(m, "wrapped ring");
        er_trace_get(m, 49, &e);
        CHECK(e.op == ER_OP_LM_HEAD, "newest event is the last step's lm_head (op %d)", e.op);
        CHECK(er_trace_export(m, path) == ER_OK, "%s", er_last_error());
        check_export(m, path, 50);
        er_model_close(m);
    }
    unlink(path);
}

/* Decode tokens/s of one 200-token run. */
static double tok_per_s(er_model *m) {
    er_trace_reset(m);
    double t0 = er_now_ms();
    int n = run_tokens(m, 200);
    return n / ((er_now_ms() - t0) / 1e3);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The three configurations interleaved round by round (so clock-frequency
 * drift hits all alike), median of 15 rounds each. */
static void measure_cost(void) {
    er_model *none = open_traced(0, 1), *ring = open_traced(1 << 16, 1);
    if (!none || !ring) return;
    enum { R = 15 };
    double v[3][R];
    run_tokens(none, 200);
    run_tokens(ring, 200);
    for (int r = 0; r < R; r++) {
        v[0][r] = tok_per_s(none);
        er_trace_enable(ring, 0);
        v[1][r] = tok_per_s(ring);
        er_trace_enable(ring, 1);
        v[2][r] = tok_per_s(ring);
    }
    for (int k = 0; k < 3; k++) qsort(v[k], R, sizeof(double), cmp_double);
    double a = v[0][R / 2], b = v[1][R / 2], c = v[2][R / 2];
    printf("tracing cost (embedded model, 1 thread, 200 greedy decode steps, median of %d interleaved rounds): "
           "no ring %.0f tok/s, ring off %.0f tok/s (%+.1f%%), recording %.0f tok/s (%+.1f%%)\n",
           R, a, b, 100.0 * (b - a) / a, c, 100.0 * (c - a) / a);
    er_model_close(none);
    er_model_close(ring);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_trace MODEL.gguf\n");
        return 77;
    }
    g_model = argv[1];
    if (access(g_model, R_OK) != 0) {
        printf("skip: %s not found\n", g_model);
        return 77;
    }
    test_off();
    test_on();
    measure_cost();
    return test_summary();
}
