/*
 * cli_chat_format.c — the chat formats edgerun-cli renders itself (ChatML,
 * Llama 3, Gemma), written to give byte for byte what the models' own Jinja
 * templates give for a conversation without tools (tests/test_native_cli_chat.py
 * compares against edgerun.chat.render on the shared templates).
 */
#include "cli_chat_format.h"

#include <string.h>

static const char QWEN_SYSTEM[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

int chat_format_parse(const char *name)
{
    if (!strcmp(name, "chatml")) return CHAT_CHATML;
    if (!strcmp(name, "chatml-plain")) return CHAT_CHATML_PLAIN;
    if (!strcmp(name, "llama3")) return CHAT_LLAMA3;
    if (!strcmp(name, "gemma")) return CHAT_GEMMA;
    return CHAT_UNKNOWN;
}

static int contains(const char *s, size_t n, const char *needle)
{
    const size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0) return 1;
    return 0;
}

/* The bare ChatML template, as chat templates usually spell it. */
static const char PLAIN_CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* A template's characters with what does not change its output taken out:
 * whitespace outside string literals, the kind of quote, and the spelling
 * of a newline inside one (an escape, or the character itself). */
typedef struct tmpl_chars { const char *s; size_t n, i; char quote; } tmpl_chars;

static int next_char(tmpl_chars *t)
{
    while (t->i < t->n) {
        const char c = t->s[t->i++];
        if (!t->quote) {
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
            if (c == '\'' || c == '"') { t->quote = c; return '\''; }
            return (unsigned char)c;
        }
        if (c == t->quote) { t->quote = 0; return '\''; }
        if (c == '\\' && t->i < t->n && t->s[t->i] == 'n') { t->i++; return '\n'; }
        return (unsigned char)c;
    }
    return -1;
}

static int is_plain_chatml(const char *tmpl, size_t len)
{
    tmpl_chars a = {tmpl, len, 0, 0}, b = {PLAIN_CHATML, sizeof PLAIN_CHATML - 1, 0, 0};
    for (;;) {
        const int x = next_char(&a), y = next_char(&b);
        if (x != y) return 0;
        if (x < 0) return 1;
    }
}

int chat_format_detect(const char *tmpl, size_t len)
{
    const int chatml = contains(tmpl, len, "<|im_start|>"), llama3 = contains(tmpl, len, "<|start_header_id|>"),
              gemma = contains(tmpl, len, "<start_of_turn>");
    if (chatml + llama3 + gemma != 1) return CHAT_UNKNOWN; /* none, or two families' markers */
    if (chatml) return contains(tmpl, len, QWEN_SYSTEM) ? CHAT_CHATML : is_plain_chatml(tmpl, len) ? CHAT_CHATML_PLAIN
                                                                                                    : CHAT_UNKNOWN;
    /* Llama 3.0's template has no system turn of its own; 3.1-3.3's always
     * open with the knowledge cutoff and today's date */
    if (llama3) return contains(tmpl, len, "Cutting Knowledge Date: December 2023") ? CHAT_LLAMA3 : CHAT_UNKNOWN;
    return CHAT_GEMMA;
}

const char *chat_format_default_bos(int fmt)
{
    return fmt == CHAT_LLAMA3 ? "<|begin_of_text|>" : fmt == CHAT_GEMMA ? "<bos>" : "";
}

/* Jinja's trim is Python's str.strip(); user lines hold no line breaks, so
 * ASCII whitespace covers what reaches it. */
static void trim(const char **s, size_t *n)
{
    const char *p = *s;
    size_t len = *n;
    while (len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f')) { p++; len--; }
    while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\n' || p[len - 1] == '\r' ||
                   p[len - 1] == '\v' || p[len - 1] == '\f')) len--;
    *s = p;
    *n = len;
}

typedef struct out_buf { char *p; size_t cap, len; int over; } out_buf;

static void put(out_buf *o, const char *s, size_t n)
{
    if (o->over || n > o->cap - o->len) { o->over = 1; return; }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void puts_(out_buf *o, const char *s) { put(o, s, strlen(s)); }

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Writes trim(seg[0] + seg[1] + ...) without building the concatenation. */
static void put_trimmed(out_buf *o, const char *const *seg, const size_t *len, int n)
{
    int fs = n, ls = -1;
    size_t fi = 0, li = 0;
    for (int k = 0; k < n && fs == n; k++)
        for (size_t i = 0; i < len[k]; i++) if (!is_space(seg[k][i])) { fs = k; fi = i; break; }
    for (int k = n - 1; k >= 0 && ls < 0; k--)
        for (size_t i = len[k]; i > 0; i--) if (!is_space(seg[k][i - 1])) { ls = k; li = i; break; }
    if (fs == n) return;
    for (int k = fs; k <= ls; k++) {
        size_t a = k == fs ? fi : 0, b = k == ls ? li : len[k];
        put(o, seg[k] + a, b - a);
    }
}

long chat_render(int fmt, const chat_render_in *in, char *out, size_t cap)
{
    out_buf o = {out, cap ? cap - 1 : 0, 0, cap == 0};
    const char *sys = in->system;
    size_t sys_len = sys ? strlen(sys) : 0;
    switch (fmt) {
    case CHAT_CHATML:
    case CHAT_CHATML_PLAIN:
        if (sys || fmt == CHAT_CHATML) {
            puts_(&o, "<|im_start|>system\n");
            if (sys) put(&o, sys, sys_len); else puts_(&o, QWEN_SYSTEM);
            puts_(&o, "<|im_end|>\n");
        }
        for (int i = 0; i < in->n_msg; i++) {
            puts_(&o, "<|im_start|>");
            puts_(&o, i % 2 == 0 ? "user" : "assistant");
            puts_(&o, "\n");
            put(&o, in->text[i], in->len[i]);
            puts_(&o, "<|im_end|>\n");
        }
        puts_(&o, "<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3: {
        puts_(&o, in->bos);
        puts_(&o, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
        puts_(&o, in->date);
        puts_(&o, "\n\n");
        if (sys) { const char *s = sys; size_t n = sys_len; trim(&s, &n); put(&o, s, n); }
        puts_(&o, "<|eot_id|>");
        for (int i = 0; i < in->n_msg; i++) {
            const char *s = in->text[i];
            size_t n = in->len[i];
            trim(&s, &n);
            puts_(&o, i % 2 == 0 ? "<|start_header_id|>user<|end_header_id|>\n\n"
                                 : "<|start_header_id|>assistant<|end_header_id|>\n\n");
            put(&o, s, n);
            puts_(&o, "<|eot_id|>");
        }
        puts_(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    }
    case CHAT_GEMMA:
        /* Gemma's template refuses a system role; the system text goes in
         * front of the first user turn (the whole then trimmed, as the
         * template trims every turn), the way Gemma's own guides fold it. */
        puts_(&o, in->bos);
        for (int i = 0; i < in->n_msg; i++) {
            puts_(&o, i % 2 == 0 ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
            const char *s = in->text[i];
            size_t n = in->len[i];
            if (i == 0 && sys) {
                const char *seg[3] = {sys, "\n\n", s};
                size_t len[3] = {sys_len, 2, n};
                put_trimmed(&o, seg, len, 3);
            } else {
                trim(&s, &n);
                put(&o, s, n);
            }
            puts_(&o, "<end_of_turn>\n");
        }
        puts_(&o, "<start_of_turn>model\n");
        break;
    default:
        return -1;
    }
    if (o.over) return -1;
    out[o.len] = '\0';
    return (long)o.len;
}
