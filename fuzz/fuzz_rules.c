/*
 * fuzz_rules.c - libFuzzer target for the rules loader: arbitrary bytes as
 * one rules file.  Whatever the input, loading must return 0 or a negative
 * SL_E* code with a NUL-terminated message, never crash, leak or read out
 * of bounds; a successful load must survive a match and be freed cleanly.
 * Each domain is matched twice for key "k": with the value "v", and with
 * the input's own bytes as the value, so that its globs meet values as
 * arbitrary as themselves.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rules/rule_daemon.h"
#include "sluice_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_rules *rules = NULL;
    char err[256];
    sl_rules_options opts = {.size = sizeof(sl_rules_options),
                             .max_file_bytes = 64 * 1024};

    if (sl_rules_load_buffer("fuzz.yaml", (const char *)data, size, &opts,
                             &rules, err, sizeof(err)) != 0) {
        if (memchr(err, '\0', sizeof(err)) == NULL)
            __builtin_trap();
        return 0;
    }
    for (size_t i = 0; i < sl_rules_domain_count(rules); i++) {
        const char *d = sl_rules_domain_name(rules, i);
        sl_rules_entry e[2] = {{"k", 1, "v", 1},
                               {"k", 1, (const char *)data, size}};
        sl_rule_match m[SL_RULES_MAX_LIMITS_PER_NODE];
        char key[512];
        size_t n;
        for (int j = 0; j < 2; j++)
            if (sl_rules_match(rules, d, strlen(d), &e[j], 1, 0, m,
                               SL_RULES_MAX_LIMITS_PER_NODE, &n, key,
                               sizeof(key)) == 0)
                sl_rules_drop_replaced(m, &n);
        /* ratelimit's metric key walks the tree as a match does. */
        size_t len;
        (void)sl__rules_metric_text(rules, d, strlen(d), e, 2, 0, key,
                                    sizeof(key), &len);
    }
    for (size_t i = 0; i < sl__rules_warning_count(rules); i++)
        if (strlen(sl__rules_warning(rules, i)) == 0)
            __builtin_trap();
    sl_rules_free(rules);
    return 0;
}
