/*
 * cli_args.h — command-line parsing for edgerun-cli (kept apart from the
 * commands so that each file has one job).
 */
#ifndef ER_CLI_ARGS_H
#define ER_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "edgerun.h"

enum { CLI_NONE = 0, CLI_RUN, CLI_INFO, CLI_EVAL, CLI_CHAT, CLI_HELP, CLI_VERSION };

typedef struct cli_args {
    int command;
    const char *model;
    const char *prompt;       /* NULL when only --ids was given */
    const char *ids_text;     /* raw --ids argument */
    const char *prompts_path; /* eval: one prompt per line */
    int dump_logits;          /* eval --logits: every sampled step's logits in the output */
    int32_t n_predict;
    uint64_t seed;
    int have_seed;
    int parse_special;
    int echo;
    int print_ids;
    int ignore_eos;           /* --ignore-eos: fixed-length runs for benchmarks */
    const char *timings_path; /* --timings FILE: per-step latencies (cli_timings.h) */
    int32_t warmup;           /* --warmup N: run's untimed first pass of N decode steps (see cmd_run) */
    const char *chat_format;  /* chat --chat-format chatml|llama3|gemma (NULL: from the file's template) */
    const char *system;       /* chat --system TEXT */
    const char *date;         /* chat --date: llama3's "Today Date" (NULL: today, "%d %b %Y") */
    int print_prompt;         /* chat --print-prompt: render stdin's conversation, run nothing */
    er_sampling sampling;
    er_options options;
} cli_args;

/* Fills *a from argv. On a usage error prints one line to stderr and returns
 * non-zero; never exits by itself. */
int cli_parse(int argc, char **argv, cli_args *a);

/* Parses "1 2 3" / "1,2,3" into ids[] (at most cap). Returns the count, or -1
 * after printing an error. */
long cli_parse_ids(const char *text, int32_t *ids, size_t cap);

/* Counts the ids in an --ids string, so the caller can size the buffer. */
size_t cli_count_ids(const char *text);

void cli_usage(FILE *out);

#endif
