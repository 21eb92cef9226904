/*
 * value.h - the validators of setting values, one per kind of value:
 * whole numbers with bounds, durations, booleans, enumerations and
 * host:port addresses.  `sluice serve` and `sluice proxy` read their flags
 * and config files with them (through the settings table, settings.h),
 * and the rules loader its keys, so that "5ms" or "64" reads the same
 * wherever it is written.  They judge the text only; the messages are
 * their callers', whose wordings users already match on.
 *
 * Every function takes (text, len), len authoritative: a NUL inside is a
 * byte like any other, which no kind of value accepts.
 */
#ifndef SL_SETTINGS_VALUE_H
#define SL_SETTINGS_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A whole number in decimal digits alone: no sign, no spaces.  0 with
 * *out; SL_EINVAL for anything else, or a number above SL_MAX_COUNT (2^40,
 * the largest count anywhere in sluice); SL_ERANGE, *out set, for one
 * outside [min, max]. */
int sl__value_uint(const char *text, size_t len, uint64_t min, uint64_t max,
                   uint64_t *out);

/* A duration in sl_duration_parse's units ("5ms", "1m"), at least min.
 * 0 with *out; SL_EINVAL when it is not a duration, SL_ERANGE when it is
 * below min or too large to hold. */
int sl__value_duration(const char *text, size_t len, sl_nanos min,
                       sl_nanos *out);

/* A percentage: decimal digits, at most one '.' with up to 3 digits after
 * it, then '%' ("5%", "2.5%").  0 with *out the fraction (0.05); SL_EINVAL
 * for anything else; SL_ERANGE, *out set, for one outside [min, max]
 * (in percent). */
int sl__value_percent(const char *text, size_t len, double min, double max,
                      double *out);

/* A YAML 1.1 boolean as lyft's yaml.v2 reads it (true, yes, on, y and
 * their negations, in three cases), and only unquoted (plain): a quoted
 * "true" is a string.  0 with *out, or SL_EINVAL. */
int sl__value_bool(const char *text, size_t len, int plain, int *out);

/* text's index in names (NULL-terminated), compared exactly or, with
 * fold_case, ignoring ASCII case; -1 when it is none of them. */
int sl__value_enum(const char *text, size_t len, const char *const *names,
                   int fold_case);

/* names as messages list them: "local, fail_open or fail_closed". */
void sl__value_enum_list(const char *const *names, char *out, size_t outlen);

/* HOST:PORT, or [IPv6]:PORT; the port, decimal from 0 to 65535, may be
 * left out when default_port >= 0.  The host is anything non-empty before
 * the last ':' (resolving it is the caller's business).  0 with host
 * (NUL-terminated, without the brackets; room for hostlen bytes) and
 * *port, or SL_EINVAL. */
int sl__value_hostport(const char *text, size_t len, int default_port,
                       char *host, size_t hostlen, int *port);

#endif
