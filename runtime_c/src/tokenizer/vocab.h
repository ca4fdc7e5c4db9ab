/*
 * vocab.h — how the model builds its tokenizer in the arena (internal).
 * The public calls (er_tokenize, er_detok_*, er_vocab_*) are in edgerun.h.
 */
#ifndef ER_VOCAB_H
#define ER_VOCAB_H

#include "edgerun.h"
#include "../arena.h"
#include "../gguf.h"

/* Bytes the tokenizer's tables need in the arena for file `f` (0 when the file
 * has no tokenizer.ggml.model). Validates the tokenizer metadata: on bad or
 * unsupported metadata returns (size_t)-1 after setting er_last_error; the
 * status is then in *status (ER_ECORRUPT / ER_EUNSUPPORTED). */
size_t er_vocab_plan(const gguf_file *f, int *status);

/* Builds the tables inside `a` (which holds at least er_vocab_plan bytes) and
 * returns the vocab through *out. The vocab keeps pointers into f->base (token
 * strings), which must stay mapped for the vocab's lifetime. */
int er_vocab_build(const gguf_file *f, er_arena *a, er_vocab **out);

#endif
