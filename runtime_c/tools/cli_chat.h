/*
 * cli_chat.h — `edgerun-cli chat` (cli_chat.c).
 */
#ifndef ER_CLI_CHAT_H
#define ER_CLI_CHAT_H

#include "cli_args.h"

/* Runs the chat on stdin/stdout; returns the process exit status. */
int cli_cmd_chat(const cli_args *a);

#endif
