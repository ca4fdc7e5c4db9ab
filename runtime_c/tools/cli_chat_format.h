/*
 * cli_chat_format.h — the built-in chat formats of `edgerun-cli chat`.
 */
#ifndef ER_CLI_CHAT_FORMAT_H
#define ER_CLI_CHAT_FORMAT_H

#include <stddef.h>

/* CHAT_CHATML is Qwen2.5's (its default system prompt when none is given),
 * CHAT_CHATML_PLAIN the bare ChatML template (a system turn only when given). */
enum { CHAT_UNKNOWN = 0, CHAT_CHATML, CHAT_LLAMA3, CHAT_GEMMA, CHAT_CHATML_PLAIN };

/* "chatml" | "chatml-plain" | "llama3" | "gemma" -> CHAT_*, else CHAT_UNKNOWN. */
int chat_format_parse(const char *name);

/* The format a Jinja chat template renders, when it is one of those above:
 * ChatML with Qwen2.5's default system prompt, the bare ChatML template,
 * Llama 3.1+'s headers (with the knowledge-cutoff system turn), Gemma's
 * turns. CHAT_UNKNOWN otherwise: ChatML markers alone do not say what a
 * template renders (Qwen3's, SmolLM3's, LFM2's each differ), and a chat
 * rendered in a format the model was not trained on answers worse with no
 * error anywhere. */
int chat_format_detect(const char *tmpl, size_t len);

/* The BOS text the format's template starts with when the vocabulary gives
 * none ("" for ChatML, which starts with no BOS). */
const char *chat_format_default_bos(int fmt);

/* A conversation: messages alternate user, assistant, user, ... starting
 * with a user turn; system is NULL when none was given. */
typedef struct chat_render_in {
    const char *system;
    const char *bos;    /* BOS text (llama3, gemma) */
    const char *date;   /* llama3's "Today Date" */
    int n_msg;
    const char *const *text;
    const size_t *len;
} chat_render_in;

/* Renders the conversation with the generation prompt into out (NUL-ended).
 * Returns the length, or -1 when it does not fit in cap (or fmt is unknown). */
long chat_render(int fmt, const chat_render_in *in, char *out, size_t cap);

#endif
