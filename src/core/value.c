/*
 * value.c - the validators of setting values (value.h): each kind of
 * value is read here and nowhere else: by the settings table
 * (src/settings/), the rules loader (its counts, durations, booleans and
 * enumerations) and the daemon's query strings.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/value.h"

int sl__value_uint(const char *text, size_t len, uint64_t min, uint64_t max,
                   uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0)
        return SL_EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return SL_EINVAL;
        v = v * 10 + (uint64_t)(text[i] - '0');
        if (v > (uint64_t)SL_MAX_COUNT)
            return SL_EINVAL; /* checked per digit: v * 10 cannot wrap */
    }
    *out = v;
    return v < min || v > max ? SL_ERANGE : 0;
}

int sl__value_percent(const char *text, size_t len, double min, double max,
                      double *out)
{
    uint64_t whole = 0, frac = 0, scale = 1;
    size_t i = 0;
    int digits = 0, dot = 0;
    if (len < 2 || text[len - 1] != '%')
        return SL_EINVAL;
    for (; i + 1 < len; i++) {
        if (text[i] == '.' && !dot && digits > 0) {
            dot = 1;
            continue;
        }
        if (text[i] < '0' || text[i] > '9' || (dot && scale == 1000) ||
            (!dot && whole > 1000))
            return SL_EINVAL;
        if (dot) {
            frac = frac * 10 + (uint64_t)(text[i] - '0');
            scale *= 10;
        } else {
            whole = whole * 10 + (uint64_t)(text[i] - '0');
        }
        digits++;
    }
    if (digits == 0 || text[len - 2] == '.')
        return SL_EINVAL;
    double pct = (double)whole + (double)frac / (double)scale;
    *out = pct / 100;
    return pct < min || pct > max ? SL_ERANGE : 0;
}

int sl__value_duration(const char *text, size_t len, sl_nanos min,
                       sl_nanos *out)
{
    sl_nanos ns;
    int rc = sl_duration_parse(text, len, &ns);
    if (rc != 0)
        return rc;
    if (ns < min)
        return SL_ERANGE;
    *out = ns;
    return 0;
}

int sl__value_bool(const char *text, size_t len, int plain, int *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes",
                                      "Yes",  "YES",  "on",   "On",
                                      "ON",   "y",    "Y",    NULL};
    static const char *const no[] = {"false", "False", "FALSE", "no",
                                     "No",    "NO",    "off",   "Off",
                                     "OFF",   "n",     "N",     NULL};
    if (!plain)
        return SL_EINVAL;
    if (sl__value_enum(text, len, yes, 0) >= 0)
        *out = 1;
    else if (sl__value_enum(text, len, no, 0) >= 0)
        *out = 0;
    else
        return SL_EINVAL;
    return 0;
}

int sl__value_enum(const char *text, size_t len, const char *const *names,
                   int fold_case)
{
    for (int i = 0; names[i] != NULL; i++) {
        size_t n = strlen(names[i]);
        if (n == len && (fold_case ? strncasecmp(text, names[i], n)
                                   : memcmp(text, names[i], n)) == 0)
            return i;
    }
    return -1;
}

void sl__value_enum_list(const char *const *names, char *out, size_t outlen)
{
    size_t n = 0, used = 0;
    while (names[n] != NULL)
        n++;
    if (outlen > 0)
        out[0] = '\0';
    for (size_t i = 0; i < n && used < outlen; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(out + used, outlen - used, "%s%s", sep, names[i]);
        if (w < 0)
            return;
        used += (size_t)w;
    }
}

int sl__value_hostport(const char *text, size_t len, int default_port,
                       char *host, size_t hostlen, int *port)
{
    size_t hl = len;
    uint64_t p = (uint64_t)default_port;
    /* The last ':' ends the host, so "::1:80" is ::1, port 80; only a
     * bracketed host may stand alone with colons inside. */
    while (hl > 0 && text[hl - 1] != ':')
        hl--;
    int has_port =
        hl > 0 && !(len >= 2 && text[0] == '[' && text[len - 1] == ']');
    if (has_port) {
        hl--;
        if (sl__value_uint(text + hl + 1, len - hl - 1, 0, 65535, &p) != 0)
            return SL_EINVAL;
    } else if (default_port < 0) {
        return SL_EINVAL;
    } else {
        hl = len;
    }
    const char *h = text;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostlen || memchr(h, '\0', hl) != NULL)
        return SL_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}
