/*
 * cli_chat.c — `edgerun-cli chat MODEL`: a multi-turn chat on stdin/stdout.
 *
 * Each turn renders the whole conversation (cli_chat_format.c), tokenizes it,
 * keeps the longest prefix the session's cache already holds
 * (er_session_history + er_session_truncate) and prefills only the rest, so a
 * turn costs its own tokens, not the conversation's. Every buffer is
 * allocated once before the first turn; the turns allocate nothing.
 */
#include "cli_chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_chat_format.h"

#define MAX_MSG 4096        /* turns held; the oldest pair goes first when full */
#define LINE_CAP 65536      /* one user line */

typedef struct chat_state {
    char *store;            /* message texts, back to back */
    size_t store_cap, store_len;
    const char *text[MAX_MSG];
    size_t len[MAX_MSG];
    int n_msg;
} chat_state;

static int fail_msg(const char *what)
{
    fprintf(stderr, "edgerun-cli: error: %s\n", what);
    return 1;
}

static int fail_er(void) { return fail_msg(er_last_error()); }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Drops the oldest user/assistant pair: texts move down in place. */
static void drop_oldest_pair(chat_state *c)
{
    int k = c->n_msg >= 2 ? 2 : c->n_msg;
    if (!k) return;
    size_t cut = (size_t)(c->text[k - 1] + c->len[k - 1] - c->store);
    memmove(c->store, c->store + cut, c->store_len - cut);
    c->store_len -= cut;
    for (int i = k; i < c->n_msg; i++) {
        c->text[i - k] = c->text[i] - cut;
        c->len[i - k] = c->len[i];
    }
    c->n_msg -= k;
}

/* Starts a message at the end of the store (empty; text appended by
 * append_text). Makes room by dropping old pairs; 0 on success. */
static int begin_msg(chat_state *c)
{
    while (c->n_msg + 1 > MAX_MSG - 1) drop_oldest_pair(c);
    c->text[c->n_msg] = c->store + c->store_len;
    c->len[c->n_msg] = 0;
    c->n_msg++;
    return 0;
}

/* Appends to the last message; what does not fit is left out (1 returned). */
static int append_text(chat_state *c, const char *s, size_t n)
{
    int cut = 0;
    if (n > c->store_cap - c->store_len) { n = c->store_cap - c->store_len; cut = 1; }
    memcpy(c->store + c->store_len, s, n);
    c->store_len += n;
    c->len[c->n_msg - 1] += n;
    return cut;
}

/* Room for a message of n bytes: old pairs dropped (never the last message). */
static int make_room(chat_state *c, size_t n)
{
    while (n > c->store_cap - c->store_len && c->n_msg >= 2) drop_oldest_pair(c);
    return n <= c->store_cap - c->store_len ? 0 : -1;
}

static size_t read_line(char *buf, size_t cap, int *eof, int *too_long)
{
    *too_long = 0;
    if (!fgets(buf, (int)cap, stdin)) { *eof = 1; return 0; }
    size_t n = strlen(buf);
    if (n && buf[n - 1] == '\n') n--;
    else if (n == cap - 1) {
        /* the rest of an over-long line is read and refused with it */
        int ch;
        while ((ch = getchar()) != EOF && ch != '\n') {}
        *too_long = 1;
    }
    if (n && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    return n;
}

static const char *today(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%d %b %Y", &tm);
    return buf;
}

/* --print-prompt: stdin's lines are the conversation (user, assistant, ...). */
static int print_prompt(const cli_args *a, int fmt, const char *bos, const char *date,
                        chat_state *c, char *line, char *render, size_t render_cap)
{
    for (;;) {
        int eof = 0, too_long = 0;
        size_t n = read_line(line, LINE_CAP, &eof, &too_long);
        if (eof) break;
        if (too_long) return fail_msg("a line of stdin is longer than 65535 bytes");
        if (c->n_msg >= MAX_MSG - 1 || n > c->store_cap - c->store_len)
            return fail_msg("the conversation is too long");
        begin_msg(c);
        append_text(c, line, n);
    }
    chat_render_in in = {a->system, bos, date, c->n_msg, c->text, c->len};
    long len = chat_render(fmt, &in, render, render_cap);
    if (len < 0) return fail_msg("the rendered conversation is too long");
    fwrite(render, 1, (size_t)len, stdout);
    return 0;
}

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

typedef struct chat_bufs {
    char *render;
    size_t render_cap;
    int32_t *ids;
    size_t ids_cap;
    void *scratch;
    size_t scratch_bytes;
    char *piece;
    size_t piece_cap;
} chat_bufs;

/* One turn: the user's line is the last message. Returns 0, or 1 on a
 * runtime error (the message printed). */
static int run_turn(const cli_args *a, int fmt, const char *bos, const char *date, chat_state *c,
                    er_session *sess, const er_vocab *vocab, chat_bufs *b, int turn)
{
    int n_ctx = er_session_n_ctx(sess);
    long len = -1;
    size_t n_tok = 0;
    for (;;) {
        chat_render_in in = {a->system, bos, date, c->n_msg, c->text, c->len};
        len = chat_render(fmt, &in, b->render, b->render_cap);
        if (len >= 0) {
            int rc = er_tokenize(vocab, b->render, (size_t)len, ER_TOK_PARSE_SPECIAL, b->ids, b->ids_cap,
                                 &n_tok, b->scratch, b->scratch_bytes);
            if (rc != ER_OK) return fail_er();
            /* room for the reply's first tokens; the oldest turns go first */
            if ((long)n_tok < (long)n_ctx) break;
        }
        if (c->n_msg <= 1) {
            fprintf(stderr, "edgerun-cli: error: the turn does not fit in the context (%d tokens): "
                            "give a larger --ctx\n", n_ctx);
            c->n_msg = 0;
            c->store_len = 0;
            return 0;
        }
        drop_oldest_pair(c);
    }

    const int32_t *hist = NULL;
    int n_hist = er_session_history(sess, &hist);
    if (n_hist < 0) return fail_er();
    size_t common = 0;
    while (common < (size_t)n_hist && common < n_tok && hist[common] == b->ids[common]) common++;
    /* the last prompt token is decoded again so that there are logits to sample */
    if (common == n_tok) common--;
    int rc = er_session_truncate(sess, (int32_t)common);
    if (rc == ER_EUNSUPPORTED) {
        if (er_session_reset(sess) != ER_OK) return fail_er();
        common = 0;
    } else if (rc != ER_OK) {
        return fail_er();
    }

    double t0 = now_ms();
    if (er_decode(sess, b->ids + common, n_tok - common, NULL) != ER_OK) return fail_er();
    double t_prefill = now_ms() - t0, t_decode = 0.0;
    long n_gen = 0, n_steps = 0;
    const char *stop = "limit";
    er_detok_state st;
    memset(&st, 0, sizeof st);
    begin_msg(c);
    for (long i = 0; i < a->n_predict; i++) {
        int32_t id = 0;
        if (er_sample(sess, &a->sampling, &id) != ER_OK) return fail_er();
        if (!a->ignore_eos && er_vocab_is_eog(vocab, id)) { stop = "end of turn"; break; }
        n_gen++;
        size_t n = 0;
        if (er_detok_step(vocab, &st, id, b->piece, b->piece_cap, &n) != ER_OK) return fail_er();
        if (n) { fwrite(b->piece, 1, n, stdout); fflush(stdout); append_text(c, b->piece, n); }
        if (i + 1 == a->n_predict) break;
        if (a->options.ctx_strategy == ER_CTX_FAIL && er_session_pos(sess) >= n_ctx) { stop = "context full"; break; }
        double td = now_ms();
        if (er_decode(sess, &id, 1, NULL) != ER_OK) return fail_er();
        t_decode += now_ms() - td;
        n_steps++;
    }
    size_t n = 0;
    if (er_detok_flush(vocab, &st, b->piece, b->piece_cap, &n) != ER_OK) return fail_er();
    if (n) { fwrite(b->piece, 1, n, stdout); append_text(c, b->piece, n); }
    fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr,
            "edgerun-cli: turn %d: prompt %zu tok, reused %zu, prefilled %zu, generated %ld tok (%s) | "
            "prefill %.1f tok/s | decode %.1f tok/s | cache %d/%d\n",
            turn, n_tok, common, n_tok - common, n_gen, stop,
            t_prefill > 0 ? (double)(n_tok - common) / (t_prefill / 1e3) : 0.0,
            t_decode > 0 ? (double)n_steps / (t_decode / 1e3) : 0.0, er_session_pos(sess), n_ctx);
    return 0;
}

int cli_cmd_chat(const cli_args *a)
{
    er_model *model = NULL;
    er_session *sess = NULL;
    chat_state *c = NULL;
    chat_bufs b;
    char *line = NULL;
    int status = 1;
    char date_buf[64];
    memset(&b, 0, sizeof b);

    int fmt = a->chat_format ? chat_format_parse(a->chat_format) : CHAT_UNKNOWN;
    const char *date = a->date ? a->date : today(date_buf, sizeof date_buf);
    const er_vocab *vocab = NULL;
    if (a->model) {
        if (er_model_open(a->model, &a->options, &model) != ER_OK) return fail_er();
        vocab = er_model_vocab(model);
        if (!vocab) { fail_msg("the model has no tokenizer: chat needs one"); goto out; }
        if (fmt == CHAT_UNKNOWN) {
            const char *tmpl = NULL;
            size_t tlen = 0;
            if (er_model_meta_str(model, "tokenizer.chat_template", &tmpl, &tlen) != ER_OK) {
                fail_msg("the model has no tokenizer.chat_template: pass --chat-format chatml|chatml-plain|llama3|gemma");
                goto out;
            }
            fmt = chat_format_detect(tmpl, tlen);
            if (fmt == CHAT_UNKNOWN) {
                fail_msg("the model's chat template is none of those edgerun-cli renders byte for byte (Qwen2.5's "
                         "ChatML, plain ChatML, Llama 3.1+, Gemma): `edgerun chat` (Python) renders any template; "
                         "or pass --chat-format chatml|chatml-plain|llama3|gemma if one of them is the model's");
                goto out;
            }
        }
    }
    const char *bos = chat_format_default_bos(fmt);
    if (vocab && fmt != CHAT_CHATML && fmt != CHAT_CHATML_PLAIN && er_vocab_bos(vocab) >= 0) {
        const char *t = er_vocab_token_text(vocab, er_vocab_bos(vocab));
        if (t) bos = t;
    }

    /* The store and render buffers are sized by the context: a conversation
     * past n_ctx tokens loses its oldest turns anyway, and a token is rarely
     * more than a few bytes; 64 KiB is the floor for --print-prompt. */
    int n_ctx = a->options.n_ctx > 0 ? a->options.n_ctx : 2048;
    er_plan_report plan;
    if (model) {
        if (er_model_arena(model, &plan) != ER_OK) { fail_er(); goto out; }
        n_ctx = plan.n_ctx;
    }
    size_t store_cap = (size_t)n_ctx * 16 + LINE_CAP;
    c = malloc(sizeof *c);
    line = malloc(LINE_CAP);
    b.render_cap = store_cap + (size_t)MAX_MSG * 64 + (a->system ? strlen(a->system) : 0) + 512;
    b.render = malloc(b.render_cap);
    if (c) { memset(c, 0, sizeof *c); c->store_cap = store_cap; c->store = malloc(store_cap); }
    if (!c || !c->store || !line || !b.render) { fail_msg("out of memory"); goto out; }

    if (a->print_prompt) {
        status = print_prompt(a, fmt, bos, date, c, line, b.render, b.render_cap);
        goto out;
    }

    if (er_session_new(model, &sess) != ER_OK) { fail_er(); goto out; }
    if (a->have_seed && er_session_seed(sess, a->seed) != ER_OK) { fail_er(); goto out; }
    b.ids_cap = b.render_cap + 8;
    b.ids = malloc(b.ids_cap * sizeof *b.ids);
    b.scratch_bytes = er_tokenize_scratch_bytes(vocab, b.render_cap);
    b.scratch = malloc(b.scratch_bytes ? b.scratch_bytes : 1);
    b.piece_cap = max_token_bytes(vocab) + 64;
    b.piece = malloc(b.piece_cap);
    if (!b.ids || !b.scratch || !b.piece) { fail_msg("out of memory"); goto out; }

    int turn = 0;
    for (;;) {
        int eof = 0, too_long = 0;
        size_t n = read_line(line, LINE_CAP, &eof, &too_long);
        if (eof || !strcmp(line, "/quit")) break;
        if (too_long) { fail_msg("the line is longer than 65535 bytes: left out"); continue; }
        if (!strcmp(line, "/reset")) {
            if (er_session_reset(sess) != ER_OK) { fail_er(); goto out; }
            c->n_msg = 0;
            c->store_len = 0;
            fprintf(stderr, "edgerun-cli: conversation reset\n");
            continue;
        }
        if (n == 0) continue;
        if (make_room(c, n)) { fail_msg("the line does not fit in the conversation buffer"); continue; }
        begin_msg(c);
        append_text(c, line, n);
        if (run_turn(a, fmt, bos, date, c, sess, vocab, &b, ++turn)) goto out;
    }
    status = 0;
out:
    er_session_free(sess);
    er_model_close(model);
    if (c) free(c->store);
    free(c);
    free(line);
    free(b.render);
    free(b.ids);
    free(b.scratch);
    free(b.piece);
    return status;
}
