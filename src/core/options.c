/*
 * options.c - the one rule by which the public options structs grow
 * without breaking programs built against older headers (sluice.h,
 * "Options structs"): the caller says its struct's size in the leading
 * field, and the library reads only what that size holds.
 *
 * Kept apart so that every options struct is read by the same code: a
 * store or the rules loader only says its struct's sizes.
 */
#include <string.h>

#include "internal.h"

static int refuse(size_t size, size_t known, const char *name, char *errbuf,
                  size_t errlen)
{
    sl__set_err(errbuf, errlen,
                "invalid options size: '%zu' (%s is %zu bytes: its _INIT "
                "macro sets it)",
                size, name, known);
    return SL_EINVAL;
}

int sl__options_copy(void *dst, size_t known, size_t first, const void *src,
                     const char *name, char *errbuf, size_t errlen)
{
    size_t size;
    memcpy(&size, src, sizeof(size));
    if (size < first)
        return refuse(size, known, name, errbuf, errlen);
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)src)[i] != 0)
            return refuse(size, known, name, errbuf, errlen);
    memset(dst, 0, known);
    memcpy(dst, src, size < known ? size : known);
    return 0;
}
