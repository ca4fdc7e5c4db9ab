/*
 * cli_eval.h — `edgerun-cli eval`: many prompts in one process, JSON lines out
 * (see cli_eval.c for the format).
 */
#ifndef ER_CLI_EVAL_H
#define ER_CLI_EVAL_H

#include "cli_args.h"

/* Runs a->prompts_path through a->model; returns the process exit status. */
int cli_cmd_eval(const cli_args *a);

#endif
