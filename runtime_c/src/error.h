/*
 * error.h — the thread-local "last error" every entry point reports through (internal).
 */
#ifndef ER_ERROR_H
#define ER_ERROR_H

#include "edgerun.h"

/* Records a formatted message for `status` on the calling thread and returns
 * `status`, so a failure path reads `return er_fail(ER_ECORRUPT, "...", ...);`.
 * The message is truncated to fit the thread's fixed buffer; never allocates. */
int er_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the calling thread's message (entry points call this on success only
 * where a stale message would mislead). */
void er_clear_error(void);

#endif
