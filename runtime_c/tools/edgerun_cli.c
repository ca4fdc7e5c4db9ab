/*
 * edgerun_cli.c — the native command line for devices without Python:
 *   edgerun-cli run MODEL.gguf "prompt" [options]   stream generated text
 *   edgerun-cli info MODEL.gguf                     hparams, tensor types, arena plan
 *   edgerun-cli eval MODEL.gguf PROMPTS.txt         one answer per line, JSON lines (cli_eval.c)
 *   edgerun-cli chat MODEL.gguf                     multi-turn chat on stdin (cli_chat.c)
 *
 * Uses only the public header. Buffers are sized and allocated once right after
 * er_model_open; the generation loop itself allocates nothing, so the process
 * shows the runtime's memory behaviour unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "cli_chat.h"
#include "cli_eval.h"
#include "cli_timings.h"
#include "edgerun.h"

static int fail(void)
{
    fprintf(stderr, "edgerun-cli: error: %s\n", er_last_error());
    return 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* ---- run ------------------------------------------------------------------ */

/* The prompt as ids: parsed from --ids, or tokenized with a scratch buffer the
 * vocabulary sizes. Allocated once; the caller frees *ids_out. */
static int prompt_ids(const cli_args *a, const er_vocab *vocab, int32_t **ids_out, size_t *n_out)
{
    if (a->ids_text) {
        size_t cap = cli_count_ids(a->ids_text);
        int32_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
        if (!ids) { fprintf(stderr, "edgerun-cli: error: out of memory\n"); return 1; }
        long n = cli_parse_ids(a->ids_text, ids, cap);
        if (n < 0) { free(ids); return 2; }
        *ids_out = ids;
        *n_out = (size_t)n;
        return 0;
    }
    if (!vocab) {
        fprintf(stderr, "edgerun-cli: error: %s has no tokenizer: give the prompt with --ids\n", a->model);
        return 1;
    }
    size_t len = strlen(a->prompt);
    int flags = ER_TOK_ADD_SPECIAL | (a->parse_special ? ER_TOK_PARSE_SPECIAL : 0);
    size_t scratch_bytes = er_tokenize_scratch_bytes(vocab, len);
    /* One id per byte plus BOS/EOS and a dummy-prefix space bounds every
     * tokenizer we run; ER_ERANGE below still guards the bound. */
    size_t cap = len + 8;
    void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!scratch || !ids) {
        free(scratch); free(ids);
        fprintf(stderr, "edgerun-cli: error: out of memory\n");
        return 1;
    }
    size_t n = 0;
    int rc = er_tokenize(vocab, a->prompt, len, flags, ids, cap, &n, scratch, scratch_bytes);
    if (rc == ER_ERANGE && n > cap) {
        int32_t *bigger = realloc(ids, n * sizeof *ids);
        if (!bigger) { free(scratch); free(ids); fprintf(stderr, "edgerun-cli: error: out of memory\n"); return 1; }
        ids = bigger;
        cap = n;
        rc = er_tokenize(vocab, a->prompt, len, flags, ids, cap, &n, scratch, scratch_bytes);
    }
    free(scratch);
    if (rc != ER_OK) { free(ids); return fail(); }
    if (n == 0) {
        free(ids);
        fprintf(stderr, "edgerun-cli: error: the prompt tokenizes to no tokens\n");
        return 1;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

/* Longest token text: bounds what one er_detok_step can write, so the output
 * buffer is allocated once instead of growing inside the loop. */
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

static int emit_text(const er_vocab *vocab, er_detok_state *st, int32_t id, char *buf, size_t cap)
{
    size_t n = 0;
    if (er_detok_step(vocab, st, id, buf, cap, &n) != ER_OK) return fail();
    if (n) { fwrite(buf, 1, n, stdout); fflush(stdout); }
    return 0;
}

/* --warmup: the prompt and n decode steps once, untimed, then the session
 * starts over (seeded again when a seed was given, so the timed run's tokens
 * are the ones it gives without a warm-up). Under qemu-user a run's first
 * decode steps are spent translating the decode kernels (prefill runs
 * others): 1.5-3x a steady step in every run of a board bench, which the
 * per-step median over runs keeps and the p99/p50 gate then refused; on a
 * board they fault in the arena's pages. Neither is the steady per-token
 * latency --timings is there to measure. */
static int warm_up(const cli_args *a, er_session *sess, const int32_t *ids, size_t n_prompt, int n_ctx)
{
    if (er_decode(sess, ids, n_prompt, NULL) != ER_OK) return fail();
    for (int32_t i = 0; i < a->warmup && er_session_pos(sess) < n_ctx; i++) {
        int32_t id = 0;
        if (er_sample(sess, &a->sampling, &id) != ER_OK || er_decode(sess, &id, 1, NULL) != ER_OK) return fail();
    }
    if (er_session_reset(sess) != ER_OK) return fail();
    if (a->have_seed && er_session_seed(sess, a->seed) != ER_OK) return fail();
    return 0;
}

static int cmd_run(const cli_args *a)
{
    er_model *model = NULL;
    er_session *sess = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    int status = 1;
    cli_timings timings;
    memset(&timings, 0, sizeof timings);

    if (er_model_open(a->model, &a->options, &model) != ER_OK) return fail();
    const er_vocab *vocab = er_model_vocab(model);
    int print_ids = a->print_ids || !vocab;

    size_t n_prompt = 0;
    int rc = prompt_ids(a, vocab, &ids, &n_prompt);
    if (rc) { status = rc; goto out; }

    size_t text_cap = 0;
    if (!print_ids) {
        text_cap = max_token_bytes(vocab) + 64;
        text = malloc(text_cap);
        if (!text) { fprintf(stderr, "edgerun-cli: error: out of memory\n"); goto out; }
    }

    if (er_session_new(model, &sess) != ER_OK) { fail(); goto out; }
    if (a->have_seed && er_session_seed(sess, a->seed) != ER_OK) { fail(); goto out; }
    int n_ctx = er_session_n_ctx(sess);
    /* Decode steps never outnumber the context positions. */
    if (a->timings_path && cli_timings_init(&timings, (size_t)(n_ctx > 0 ? n_ctx : 1))) goto out;
    if (a->warmup > 0 && warm_up(a, sess, ids, n_prompt, n_ctx)) goto out;

    if (a->echo) {
        if (a->prompt && !a->ids_text) fputs(a->prompt, stdout);
        else for (size_t i = 0; i < n_prompt; i++) printf("%s%d", i ? " " : "", (int)ids[i]);
        if (print_ids && n_prompt) fputc(' ', stdout);
        fflush(stdout);
    }

    double c0 = a->timings_path ? cli_thread_cpu_us() : 0.0;
    double t0 = now_ms();
    if (er_decode(sess, ids, n_prompt, NULL) != ER_OK) { fail(); goto out; }
    double t_prefill = now_ms() - t0;
    if (a->timings_path) timings.prefill_cpu_us = cli_thread_cpu_us() - c0;
    double ttft = 0.0, t_decode = 0.0;
    long n_gen = 0, n_decode_calls = 0;
    const char *stop = "limit";
    er_detok_state st;
    memset(&st, 0, sizeof st);

    for (long i = 0; i < a->n_predict; i++) {
        int32_t id = 0;
        if (er_sample(sess, &a->sampling, &id) != ER_OK) { fail(); goto out; }
        if (i == 0) ttft = now_ms() - t0;
        if (vocab && !a->ignore_eos && er_vocab_is_eog(vocab, id)) { stop = "end of text"; break; }
        n_gen++;
        if (print_ids) { printf("%s%d", n_gen > 1 ? " " : "", (int)id); fflush(stdout); }
        else if (emit_text(vocab, &st, id, text, text_cap)) goto out;
        if (i + 1 == a->n_predict) break;       /* the last token needs no forward pass */
        if (er_session_pos(sess) >= n_ctx) { stop = "context full"; break; }
        double cd = a->timings_path ? cli_thread_cpu_us() : 0.0;
        double td = now_ms();
        if (er_decode(sess, &id, 1, NULL) != ER_OK) { fail(); goto out; }
        double step_ms = now_ms() - td;
        t_decode += step_ms;
        n_decode_calls++;
        if (a->timings_path) cli_timings_step(&timings, step_ms * 1e3, cli_thread_cpu_us() - cd);
    }
    if (!print_ids) {
        size_t n = 0;
        if (er_detok_flush(vocab, &st, text, text_cap, &n) != ER_OK) { fail(); goto out; }
        fwrite(text, 1, n, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);

    if (a->timings_path) {
        timings.n_prompt = n_prompt;
        timings.prefill_us = t_prefill * 1e3;
        timings.ttft_us = ttft * 1e3;
        if (cli_timings_write(&timings, a->timings_path)) goto out;
    }

    er_plan_report arena;
    if (er_model_arena(model, &arena) != ER_OK) { fail(); goto out; }
    fprintf(stderr,
            "edgerun-cli: prompt %zu tok, generated %ld tok (%s) | TTFT %.2f ms | "
            "prefill %.1f tok/s | decode %.1f tok/s | arena %zu bytes (%.2f MiB) | "
            "isa %s | threads %d\n",
            n_prompt, n_gen, stop, ttft,
            t_prefill > 0 ? (double)n_prompt / (t_prefill / 1e3) : 0.0,
            t_decode > 0 ? (double)n_decode_calls / (t_decode / 1e3) : 0.0,
            arena.total_bytes, mib(arena.total_bytes), er_model_isa(model), arena.n_threads);
    status = 0;
out:
    er_session_free(sess);
    er_model_close(model);
    free(ids);
    free(text);
    cli_timings_free(&timings);
    return status;
}

/* ---- info ----------------------------------------------------------------- */

typedef struct type_total {
    const char *name;
    long count;
    unsigned long long elements, bytes;
} type_total;

static void print_tensor_types(const er_model *model)
{
    type_total totals[16];
    int n_types = 0, n = er_model_n_tensors(model);
    memset(totals, 0, sizeof totals);
    for (int i = 0; i < n; i++) {
        er_tensor_info t;
        if (er_model_tensor(model, i, &t) != ER_OK) continue;
        unsigned long long elems = 1;
        for (int d = 0; d < t.n_dims && d < 4; d++) elems *= (unsigned long long)t.ne[d];
        int k = 0;
        while (k < n_types && strcmp(totals[k].name, t.type_name) != 0) k++;
        if (k == n_types) {
            if (n_types == (int)(sizeof totals / sizeof totals[0])) continue;
            totals[n_types++].name = t.type_name;
        }
        totals[k].count++;
        totals[k].elements += elems;
        totals[k].bytes += t.nbytes;
    }
    printf("tensors: %d\n", n);
    printf("  %-6s %7s %14s %14s\n", "type", "tensors", "elements", "bytes");
    for (int k = 0; k < n_types; k++)
        printf("  %-6s %7ld %14llu %14llu\n", totals[k].name, totals[k].count,
               totals[k].elements, totals[k].bytes);
}

static int cmd_info(const cli_args *a)
{
    er_model *model = NULL;
    if (er_model_open(a->model, &a->options, &model) != ER_OK) return fail();

    er_hparams hp;
    er_plan_report plan;
    if (er_model_hparams(model, &hp) != ER_OK || er_model_arena(model, &plan) != ER_OK) {
        er_model_close(model);
        return fail();
    }
    printf("model: %s\n", a->model);
    printf("  arch %s%s%s\n", hp.arch, hp.name[0] ? ", name " : "", hp.name);
    printf("  vocab %d, embd %d, layers %d, heads %d (kv %d, head_dim %d), ff %d\n",
           hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_ff);
    printf("  context (trained) %d, rope freq_base %g, rms_eps %g\n",
           hp.n_ctx_train, (double)hp.rope_freq_base, (double)hp.rms_eps);
    printf("  tied output %s, qkv bias %s\n", hp.tied_output ? "yes" : "no", hp.has_qkv_bias ? "yes" : "no");
    /* what the family changes in the step, where the file says so */
    if (hp.n_rot != hp.head_dim) printf("  rotary dims %d of %d\n", hp.n_rot, hp.head_dim);
    if (hp.rope_freq_factors) printf("  rope frequency factors (rope_freqs.weight)\n");
    if (hp.rope_scale != 1.0f) printf("  rope scaling linear, factor %g\n", (double)hp.rope_scale);
    if (hp.sliding_window)
        printf("  sliding window %d (local layers' rope freq_base %g)\n", hp.sliding_window,
               (double)hp.rope_freq_base_swa);
    if (hp.final_logit_softcap != 0.0f) printf("  final logit softcap %g\n", (double)hp.final_logit_softcap);
    printf("  parameters %llu, weight bytes %llu (%.2f MiB, mapped)\n",
           (unsigned long long)hp.n_params, (unsigned long long)hp.weight_bytes, mib((size_t)hp.weight_bytes));

    const er_vocab *vocab = er_model_vocab(model);
    if (vocab) {
        int kind = er_vocab_kind(vocab);
        printf("tokenizer: %s, %d tokens, pre %s, bos %d, eos %d\n",
               kind == ER_VOCAB_SPM ? "SentencePiece-BPE" : kind == ER_VOCAB_BPE ? "byte-level BPE" : "none",
               er_vocab_n_tokens(vocab), er_vocab_pre(vocab), er_vocab_bos(vocab), er_vocab_eos(vocab));
    } else {
        printf("tokenizer: none (ids only)\n");
    }
    print_tensor_types(model);

    printf("arena: %zu bytes (%.2f MiB) for n_ctx %d, n_batch %d, n_threads %d, sessions %d, kv %s\n",
           plan.total_bytes, mib(plan.total_bytes), plan.n_ctx, plan.n_batch, plan.n_threads,
           plan.n_sessions, plan.kv_type == ER_KV_F16 ? "f16" : "f32");
    printf("  %-16s %-10s %14s %14s\n", "section", "kind", "bytes", "used");
    for (int i = 0; i < plan.n_sections && i < ER_MAX_SECTIONS; i++) {
        const er_section *s = &plan.sections[i];
        printf("  %-16s %-10s %14zu %14zu\n", s->name ? s->name : "?",
               s->persistent ? "persistent" : "scratch", s->bytes, s->used);
    }
    printf("kernels: %s (%s)\n", er_model_isa(model), er_model_isa_reason(model));
    er_model_close(model);
    return 0;
}

int main(int argc, char **argv)
{
    cli_args a;
    int rc = cli_parse(argc, argv, &a);
    if (rc) return rc;
    switch (a.command) {
    case CLI_HELP: cli_usage(stdout); return 0;
    case CLI_VERSION: printf("edgerun-cli %s\n", er_version()); return 0;
    case CLI_RUN: return cmd_run(&a);
    case CLI_INFO: return cmd_info(&a);
    case CLI_EVAL: return cli_cmd_eval(&a);
    case CLI_CHAT: return cli_cmd_chat(&a);
    default: cli_usage(stderr); return 2;
    }
}
