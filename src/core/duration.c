/*
 * duration.c - "500ms", "1m", "1d" or plain nanoseconds to sl_nanos.
 * Used by the command line today and by the rules files later, so that a
 * duration reads the same everywhere.
 */
#include <string.h>

#include "internal.h"

static const struct {
    const char *suffix;
    int64_t ns;
} units[] = {
    {"ns", 1},
    {"us", SL_NS_PER_US},
    {"ms", SL_NS_PER_MS},
    {"s", SL_NS_PER_SEC},
    {"m", 60 * SL_NS_PER_SEC},
    {"min", 60 * SL_NS_PER_SEC},
    {"h", 3600 * SL_NS_PER_SEC},
    {"d", 86400 * SL_NS_PER_SEC},
};

int sl_duration_parse(const char *text, size_t len, sl_nanos *out)
{
    size_t i = 0, digits;
    int64_t value = 0, mult = 1;
    int overflow = 0;

    if (len == 0 || text[0] < '0' || text[0] > '9')
        return SL_EINVAL;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, text[i] - '0', &value))
            overflow = 1;
    }
    digits = i;
    if (digits < len) {
        /* The unit is checked first: text that is not a duration at all
         * is SL_EINVAL even when its digits would not fit. */
        size_t rest = len - digits, u;
        for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            if (strlen(units[u].suffix) == rest &&
                memcmp(units[u].suffix, text + digits, rest) == 0)
                break;
        }
        if (u == sizeof(units) / sizeof(units[0]))
            return SL_EINVAL;
        mult = units[u].ns;
    }
    if (overflow || __builtin_mul_overflow(value, mult, &value))
        return SL_ERANGE;
    *out = value;
    return 0;
}
