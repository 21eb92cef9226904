/*
 * version.c - the library's version as it was built, for a program that
 * checks at run time which libsluice the loader gave it (the header's
 * macros say only which one it was built against).
 */
#include "sluice.h"

const char *sl_version(void)
{
    return SL_VERSION;
}

int sl_version_number(void)
{
    return SL_VERSION_NUMBER;
}
