/*
 * pretokenize.h — the pre-tokenizers named by `tokenizer.ggml.pre` (internal).
 *
 * Each pre-tokenizer stands for the regex (or sequence of regexes) that the
 * model's Hugging Face tokenizer.json applies with Split(behavior="isolated"):
 * both the matches and the gaps between them become pieces, and every later
 * regex of a sequence splits the pieces of the one before. The splitters are
 * hand-written (no regex engine) and agree with HF `tokenizers` span for span
 * (tests/test_pretokenize.py checks this differentially).
 */
#ifndef ER_PRETOKENIZE_H
#define ER_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct er_span { uint32_t off, len; } er_span; /* byte range of one pre-token in the input */

/* Pre-tokenizer ids. Many GGUF names share one id (see the name table in
 * pretokenize.c); ER_PRE_NONE means "no splitting" (SentencePiece). */
enum er_pre {
    ER_PRE_NONE = 0,
    ER_PRE_GPT2,           /* GPT-2 byte-level regex; also mpt, olmo, jais, ... */
    ER_PRE_LLAMA3,         /* Llama 3: case-insensitive contractions, digits in threes */
    ER_PRE_QWEN2,          /* as Llama 3 but single digits; also stablelm2 */
    ER_PRE_DEEPSEEK_LLM,   /* six-regex sequence with explicit letter/punct/CJK classes */
    ER_PRE_DEEPSEEK_CODER, /* five-regex sequence */
    ER_PRE_FALCON,         /* punctuation runs, then GPT-2, then ASCII digit triples */
    ER_PRE_STARCODER,      /* single digits, then GPT-2; refact, command-r, smollm, ... */
    ER_PRE_PORO,           /* " ?[^(\s|.,!?…。，、।۔،)]+"; bloom, gpt3-finnish */
    ER_PRE_VIKING,         /* poro's regex, then single digits */
    ER_PRE_QWEN35,         /* Qwen2's regex with combining marks (\p{M}) joining letters */
    ER_PRE_GPT4O,          /* o200k: words split at case changes, contractions attached,
                            * digits in threes; Phi-4-mini */
    ER_PRE_DEFAULT,        /* llama.cpp's default ("default", "" or no key): punctuation
                            * runs, then GPT-2, then numbers, then ASCII digit triples */
    ER_PRE_COUNT
};

/* The id for a `tokenizer.ggml.pre` value (name[0..len), not NUL-terminated),
 * or -1 if unknown. "default" and "" map to ER_PRE_DEFAULT, llama.cpp's default
 * regex set, which is not GPT-2's ("gpt-2"). */
int er_pre_from_name(const char *name, size_t len);

/* Static canonical name of an id ("none", "gpt2", "llama3", ...); NULL if out of range. */
const char *er_pre_name(int pre);

/* Splits UTF-8 text into pre-tokens. Writes at most cap spans; returns the
 * number of spans needed (may exceed cap: the caller then reports ER_ERANGE).
 * Spans are in order, non-empty and cover the text exactly; empty text gives
 * none. Invalid UTF-8 bytes are one "character" each, of category Cn (neither
 * letter, number, punctuation nor space). An unknown `pre` behaves as
 * ER_PRE_NONE. Text longer than UINT32_MAX bytes (spans hold 32-bit offsets)
 * returns SIZE_MAX and writes nothing. No heap, no globals but const tables;
 * bounded stack. */
size_t er_pretokenize(int pre, const char *text, size_t len, er_span *out, size_t cap);

/* A linear bound on er_pretokenize's result for any pre: one span per byte. */
static inline size_t er_pretokenize_max_spans(size_t len) { return len; }

#endif
