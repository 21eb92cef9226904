/*
 * error.c - names and messages of the SL_E* codes, generated from the one
 * table in sluice.h so that C and the HTTP API share a vocabulary; and
 * the one way the library writes a message into a caller's errbuf.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

const char *sl_strerror(int err)
{
    switch (err) {
    case SL_OK:
        return "success";
#define SL__ERRNO_TEXT(name, value, text)                                      \
    case SL_##name:                                                            \
        return text;
        SL_ERRNO_MAP(SL__ERRNO_TEXT)
#undef SL__ERRNO_TEXT
    }
    return "unknown error";
}

const char *sl_err_name(int err)
{
    switch (err) {
    case SL_OK:
        return "OK";
#define SL__ERRNO_NAME(name, value, text)                                      \
    case SL_##name:                                                            \
        return #name;
        SL_ERRNO_MAP(SL__ERRNO_NAME)
#undef SL__ERRNO_NAME
    }
    return "EUNKNOWN";
}

void sl__set_err(char *buf, size_t len, const char *fmt, ...)
{
    if (buf != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
}
