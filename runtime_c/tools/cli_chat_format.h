/*
 * cli_chat_format.h — the built-in chat formats of `edgerun-cli chat`.
 */
#ifndef ER_CLI_CHAT_FORMAT_H
#define ER_CLI_CHAT_FORMAT_H

#include <stddef.h>

enum { CHAT_UNKNOWN = 0, CHAT_CHATML, CHAT_LLAMA3, CHAT_GEMMA };

/* "chatml" | "llama3" | "gemma" -> CHAT_*, else CHAT_UNKNOWN. */
int chat_format_parse(const char *name);

/* The format a Jinja chat template is written for, from its turn markers;
 * CHAT_UNKNOWN when it has none of them, or markers of more than one. */
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
