/*
 * fuzz_parse.c - libFuzzer target for the parsers of configuration text:
 * sl_duration_parse() and sl_algorithm_parse().  The input is the whole
 * text, (pointer, length) and not NUL-terminated, as a rules file or a
 * command line hands it over.
 *
 * Beyond "no crash, no UB", each answer is checked against a small
 * independent model: a duration is digits and one known unit whose product
 * fits in int64; an algorithm name round-trips through
 * sl_algorithm_name().  A disagreement aborts, which libFuzzer reports.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void disagree(const char *what, const uint8_t *data, size_t size,
                     int rc, long long got)
{
    fprintf(stderr, "fuzz_parse: %s for '%.*s' (%zu bytes): rc %d, %lld\n",
            what, (int)(size > 80 ? 80 : size), (const char *)data, size, rc,
            got);
    abort();
}

/* The model: SL_OK with *out, SL_EINVAL or SL_ERANGE. */
static int model_duration(const uint8_t *s, size_t len, int64_t *out)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {{"", 1},
                 {"ns", 1},
                 {"us", 1000},
                 {"ms", 1000000},
                 {"s", 1000000000},
                 {"m", 60000000000},
                 {"min", 60000000000},
                 {"h", 3600000000000},
                 {"d", 86400000000000}};
    size_t i = 0;
    __int128 value = 0;
    int overflow = 0;

    while (i < len && s[i] >= '0' && s[i] <= '9') {
        value = value * 10 + (s[i] - '0');
        if (value > INT64_MAX) {
            overflow = 1;
            value = (__int128)INT64_MAX + 1; /* stays "too big" */
        }
        i++;
    }
    if (i == 0)
        return SL_EINVAL;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (strlen(units[u].unit) == len - i &&
            memcmp(units[u].unit, s + i, len - i) == 0) {
            if (overflow || value * units[u].ns > INT64_MAX)
                return SL_ERANGE;
            *out = (int64_t)(value * units[u].ns);
            return SL_OK;
        }
    }
    /* Not a duration, however many digits came first (sluice.h: a bad
     * unit is SL_EINVAL even when the digits overflow). */
    return SL_EINVAL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    sl_nanos got = -12345;
    int64_t want = -1;
    int rc = sl_duration_parse(text, size, &got);
    int model = model_duration(data, size, &want);

    if (rc != model)
        disagree("duration: return code differs from the model", data, size,
                 rc, model);
    if (rc == SL_OK && got != want)
        disagree("duration: value differs from the model", data, size, rc,
                 got);
    if (rc != SL_OK && got != -12345)
        disagree("duration: *out written on error", data, size, rc, got);

    sl_algorithm alg = SL_ALGORITHM_COUNT;
    rc = sl_algorithm_parse(text, size, &alg);
    if (rc == SL_OK) {
        const char *name = sl_algorithm_name(alg);
        if (name == NULL || strlen(name) != size ||
            memcmp(name, data, size) != 0)
            disagree("algorithm: accepted a name that does not round-trip",
                     data, size, rc, (long long)alg);
    } else if (rc != SL_EINVAL) {
        disagree("algorithm: unexpected error", data, size, rc, 0);
    } else {
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            const char *name = sl_algorithm_name((sl_algorithm)a);
            if (strlen(name) == size && memcmp(name, data, size) == 0)
                disagree("algorithm: refused a valid name", data, size, rc,
                         a);
        }
    }
    return 0;
}
