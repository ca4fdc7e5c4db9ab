/* error.c — thread-local error messages; no heap, so usable after open. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char tl_msg[512];

int er_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    va_end(ap);
    return status;
}

void er_clear_error(void) { tl_msg[0] = '\0'; }

const char *er_last_error(void) { return tl_msg; }

const char *er_status_name(int status) {
    switch (status) {
    case ER_OK: return "ER_OK";
    case ER_EINVAL: return "ER_EINVAL";
    case ER_EIO: return "ER_EIO";
    case ER_ECORRUPT: return "ER_ECORRUPT";
    case ER_EUNSUPPORTED: return "ER_EUNSUPPORTED";
    case ER_ENOMEM_ARENA: return "ER_ENOMEM_ARENA";
    case ER_ENOMEM: return "ER_ENOMEM";
    case ER_ECONTEXT: return "ER_ECONTEXT";
    case ER_EBUSY: return "ER_EBUSY";
    case ER_ERANGE: return "ER_ERANGE";
    case ER_ESTATE: return "ER_ESTATE";
    case ER_EMISMATCH: return "ER_EMISMATCH";
    default: return "ER_UNKNOWN";
    }
}

const char *er_version(void) { return "0.1.0"; }
