/*
 * cli_eval.c — `edgerun-cli eval MODEL.gguf PROMPTS.txt`: one generation per
 * line of PROMPTS.txt in a single process, results as JSON lines.
 *
 * Why it exists: checking a cross build under qemu-user means answering
 * hundreds of prompts, and a process (plus emulator) start per prompt would
 * cost more than the generations. The board driver (pybind/edgerun/
 * board_test.py) and `make demo` compare these lines between an emulated
 * build and the host build: the answers must match the task, and with
 * --logits the logits of every step must agree within a tolerance.
 *
 * Output: the first line describes the run
 *   {"model": ..., "isa": ..., "isa_reason": ..., "n_vocab": V, "n_threads": T, "n_prompts": N}
 * then one line per prompt (blank lines of the file are skipped)
 *   {"index": i, "text": "...", "ids": [...], "n_prompt": P, "n_gen": G, "stop": "...",
 *    "ttft_ms": x, "decode_ms": y [, "logits": [[V floats] per sampled token]]}
 * Floats are printed with %.9g, which round-trips every float exactly.
 * Each prompt starts from an empty session (er_session_reset); with --seed the
 * RNG is reseeded per prompt, so a line does not depend on the ones before it.
 */
#include "cli_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(void)
{
    fprintf(stderr, "edgerun-cli: error: %s\n", er_last_error());
    return 1;
}

static int oom(void)
{
    fprintf(stderr, "edgerun-cli: error: out of memory\n");
    return 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The whole file, NUL-terminated; *len excludes the NUL. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "edgerun-cli: error: cannot open prompts file '%s'\n", path);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) { oom(); return NULL; }
    if (err) {
        fprintf(stderr, "edgerun-cli: error: cannot read prompts file '%s'\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Splits buf in place into lines (strips a trailing \r); returns the number
 * of non-blank lines and the longest one's length. */
static size_t split_lines(char *buf, size_t len, size_t *longest)
{
    size_t count = 0;
    *longest = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && buf[j] != '\n') j++;
        size_t end = j;
        if (end > i && buf[end - 1] == '\r') end--;
        buf[end] = '\0';
        if (j < len) buf[j] = '\0';
        if (end > i) {
            count++;
            if (end - i > *longest) *longest = end - i;
        }
        i = j + 1;
    }
    return count;
}

static void json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void json_floats(const float *x, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%.9g", i ? ", " : "", (double)x[i]);
    putchar(']');
}

/* Buffers sized once from the model and the prompts file. */
typedef struct eval_ctx {
    const cli_args *a;
    er_session *sess;
    const er_vocab *vocab;
    int n_vocab;
    void *scratch;
    size_t scratch_bytes;
    int32_t *ids;             /* prompt ids, then room for nothing else */
    size_t ids_cap;
    int32_t *gen;             /* generated ids */
    float *logits;            /* n_predict * n_vocab when --logits */
    char *text;               /* detokenized output */
    size_t text_cap;
} eval_ctx;

static int eval_one(eval_ctx *c, size_t index, const char *line)
{
    const cli_args *a = c->a;
    size_t n_prompt = 0;
    int flags = ER_TOK_ADD_SPECIAL | (a->parse_special ? ER_TOK_PARSE_SPECIAL : 0);
    if (er_tokenize(c->vocab, line, strlen(line), flags, c->ids, c->ids_cap, &n_prompt, c->scratch,
                    c->scratch_bytes) != ER_OK)
        return fail();
    if (er_session_reset(c->sess) != ER_OK) return fail();
    if (a->have_seed && er_session_seed(c->sess, a->seed) != ER_OK) return fail();

    const int n_ctx = er_session_n_ctx(c->sess);
    double t0 = now_ms(), ttft = 0.0, t_decode = 0.0;
    float *logits = NULL;
    if (er_decode(c->sess, c->ids, n_prompt, &logits) != ER_OK) return fail();
    long n_gen = 0;
    const char *stop = "limit";
    size_t text_len = 0;
    er_detok_state st;
    memset(&st, 0, sizeof st);
    for (long i = 0; i < a->n_predict; i++) {
        int32_t id = 0;
        if (c->logits) memcpy(c->logits + (size_t)i * (size_t)c->n_vocab, logits, (size_t)c->n_vocab * sizeof(float));
        if (er_sample(c->sess, &a->sampling, &id) != ER_OK) return fail();
        if (i == 0) ttft = now_ms() - t0;
        c->gen[n_gen++] = id;
        if (er_vocab_is_eog(c->vocab, id)) { stop = "end of text"; break; }
        size_t n = 0;
        if (er_detok_step(c->vocab, &st, id, c->text + text_len, c->text_cap - text_len, &n) != ER_OK)
            return fail();
        text_len += n;
        if (i + 1 == a->n_predict) break;       /* the last token needs no forward pass */
        if (er_session_pos(c->sess) >= n_ctx) { stop = "context full"; break; }
        double td = now_ms();
        if (er_decode(c->sess, &id, 1, &logits) != ER_OK) return fail();
        t_decode += now_ms() - td;
    }
    size_t n = 0;
    if (er_detok_flush(c->vocab, &st, c->text + text_len, c->text_cap - text_len, &n) != ER_OK) return fail();
    text_len += n;

    printf("{\"index\": %zu, \"text\": ", index);
    json_string(c->text, text_len);
    fputs(", \"ids\": [", stdout);
    for (long i = 0; i < n_gen; i++) printf("%s%d", i ? ", " : "", (int)c->gen[i]);
    printf("], \"n_prompt\": %zu, \"n_gen\": %ld, \"stop\": \"%s\", \"ttft_ms\": %.4f, \"decode_ms\": %.4f",
           n_prompt, n_gen, stop, ttft, t_decode);
    if (c->logits) {
        fputs(", \"logits\": [", stdout);
        for (long i = 0; i < n_gen; i++) {
            if (i) fputs(", ", stdout);
            json_floats(c->logits + (size_t)i * (size_t)c->n_vocab, c->n_vocab);
        }
        putchar(']');
    }
    fputs("}\n", stdout);
    return 0;
}

/* Longest token text, so the output buffer bound is known up front. */
static size_t max_token_bytes(const er_vocab *vocab)
{
    size_t best = 0;
    int n = er_vocab_n_tokens(vocab);
    for (int i = 0; i < n; i++) {
        const char *t = er_vocab_token_text(vocab, i);
        size_t len = t ? strlen(t) : 0;
        if (len > best) best = len;
    }
    return best;
}

int cli_cmd_eval(const cli_args *a)
{
    size_t file_len = 0, longest = 0;
    char *file = read_file(a->prompts_path, &file_len);
    if (!file) return 1;
    size_t n_prompts = split_lines(file, file_len, &longest);

    er_model *model = NULL;
    eval_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    int status = 1;
    if (er_model_open(a->model, &a->options, &model) != ER_OK) { fail(); goto out; }
    c.vocab = er_model_vocab(model);
    if (!c.vocab) {
        fprintf(stderr, "edgerun-cli: error: %s has no tokenizer; eval needs text prompts\n", a->model);
        goto out;
    }
    er_hparams hp;
    if (er_model_hparams(model, &hp) != ER_OK) { fail(); goto out; }
    c.n_vocab = hp.n_vocab;
    /* One id per byte plus BOS/EOS and a dummy-prefix space bounds every
     * tokenizer we run (the same bound as `run`). */
    c.ids_cap = longest + 8;
    c.scratch_bytes = er_tokenize_scratch_bytes(c.vocab, longest);
    size_t n_predict = a->n_predict > 0 ? (size_t)a->n_predict : 1;
    c.text_cap = n_predict * (max_token_bytes(c.vocab) + 8) + 16;
    c.ids = malloc(c.ids_cap * sizeof *c.ids);
    c.scratch = malloc(c.scratch_bytes ? c.scratch_bytes : 1);
    c.gen = malloc(n_predict * sizeof *c.gen);
    c.text = malloc(c.text_cap);
    if (a->dump_logits) c.logits = malloc(n_predict * (size_t)c.n_vocab * sizeof *c.logits);
    if (!c.ids || !c.scratch || !c.gen || !c.text || (a->dump_logits && !c.logits)) { oom(); goto out; }
    if (er_session_new(model, &c.sess) != ER_OK) { fail(); goto out; }

    er_plan_report plan;
    if (er_model_arena(model, &plan) != ER_OK) { fail(); goto out; }
    fputs("{\"model\": ", stdout);
    json_string(a->model, strlen(a->model));
    fputs(", \"isa\": ", stdout);
    json_string(er_model_isa(model), strlen(er_model_isa(model)));
    fputs(", \"isa_reason\": ", stdout);
    json_string(er_model_isa_reason(model), strlen(er_model_isa_reason(model)));
    printf(", \"n_vocab\": %d, \"n_threads\": %d, \"n_prompts\": %zu, \"arena_bytes\": %zu}\n", c.n_vocab,
           plan.n_threads, n_prompts, plan.total_bytes);

    double t0 = now_ms();
    size_t index = 0;
    for (size_t i = 0; i < file_len; i += strlen(file + i) + 1) {
        if (!file[i]) continue;
        if (eval_one(&c, index++, file + i)) goto out;
    }
    fflush(stdout);
    fprintf(stderr, "edgerun-cli: eval %zu prompts in %.1f ms | isa %s | threads %d\n", n_prompts,
            now_ms() - t0, er_model_isa(model), plan.n_threads);
    status = 0;
out:
    er_session_free(c.sess);
    er_model_close(model);
    free(c.ids);
    free(c.scratch);
    free(c.gen);
    free(c.text);
    free(c.logits);
    free(file);
    return status;
}
