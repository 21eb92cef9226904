/*
 * validate.c - `sluice validate [--list] PATH`: loads rules the way the
 * server will and reports the first error, without starting anything.
 * Meant for CI and for a deploy step before a reload.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "redis/redis_proto.h"
#include "rules/rule_daemon.h"
#include "sluice.h"
#include "sluice_rules.h"

static const char validate_usage[] =
    "usage: sluice validate [--list] PATH\n"
    "\n"
    "Checks a rules file, or every *.yaml and *.yml file of a directory,\n"
    "and prints 'ok: N domains, M limits (version V)'; --list also prints\n"
    "one line per limit.  An error is printed as 'file:line:column:\n"
    "message' on stderr, and so are warnings ('warning: file:line:column:\n"
    "message') for what envoyproxy/ratelimit accepts but looks like a\n"
    "mistake.\n"
    "Exit status: 0 valid, 2 invalid rules or usage, 1 unreadable path.\n";

void cmd_validate_usage(FILE *to)
{
    fputs(validate_usage, to);
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* A period in the largest unit that divides it: 30s, 5m, 1500ms. */
static void print_period(sl_nanos p)
{
    static const struct {
        const char *suffix;
        sl_nanos ns;
    } u[] = {{"d", 86400 * SL_NS_PER_SEC}, {"h", 3600 * SL_NS_PER_SEC},
             {"m", 60 * SL_NS_PER_SEC},    {"s", SL_NS_PER_SEC},
             {"ms", SL_NS_PER_MS},         {"us", SL_NS_PER_US}};
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
        if (p % u[i].ns == 0) {
            printf("%lld%s", (long long)(p / u[i].ns), u[i].suffix);
            return;
        }
    printf("%lldns", (long long)p);
}

static void print_rule(const sl_rules *rules, const sl_rule *r)
{
    printf("%s", r->path);
    if (r->name[0] != '\0')
        printf(" name=%s", r->name);
    switch (r->action) {
    case SL_RULE_UNLIMITED:
        printf(" unlimited");
        break;
    case SL_RULE_DENY:
        printf(" deny");
        break;
    case SL_RULE_LIMIT: {
        const sl_limit_config *c = sl_limit_get_config(r->limit);
        printf(" %s %lld/", sl_algorithm_name(c->algorithm),
               (long long)c->limit);
        if (r->unit != NULL && r->unit_multiplier == 1)
            printf("%s", r->unit);
        else if (r->unit != NULL)
            printf("%lld %ss", (long long)r->unit_multiplier, r->unit);
        else
            print_period(r->period);
        if (c->burst != c->limit)
            printf(" burst=%lld", (long long)c->burst);
        break;
    }
    }
    if (r->shadow_mode)
        printf(" shadow_mode");
    const sl__rule_daemon *d = sl__rule_daemon_of(rules, r);
    if (d->detailed_metric)
        printf(" detailed_metric");
    if (d->quota_mode)
        printf(" quota_mode");
    if (d->value_to_metric)
        printf(" value_to_metric");
    if (d->shared)
        printf(" share_threshold");
    if (d->metadata != NULL)
        printf(" metadata");
    for (size_t i = 0; i < r->n_replaces; i++)
        printf(" replaces=%s", r->replaces[i]);
    printf("\n");
}

int cmd_validate(int argc, char **argv)
{
    const char *path = NULL;
    int list = 0;
    sl_rules *rules = NULL;
    char err[1024];
    int rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(validate_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (argv[i][0] == '-' || path != NULL) {
            fprintf(stderr, "sluice validate: unexpected argument: '%s'\n",
                    argv[i]);
            fputs(validate_usage, stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (path == NULL) {
        fputs(validate_usage, stderr);
        return 2;
    }
    if (access(path, R_OK) != 0) {
        perror(path);
        return 1;
    }
    rc = sl_rules_load(path, NULL, &rules, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return rc == SL_ENOMEM ? 1 : 2;
    }
    /* What ratelimit accepts and sluice loads too, but which looks like
     * a mistake: on stderr, the load still valid. */
    for (size_t i = 0; i < sl__rules_warning_count(rules); i++)
        fprintf(stderr, "warning: %s\n", sl__rules_warning(rules, i));
    /* A limit the Redis store's script cannot decide exactly (a period
     * no tick of 10^k ns brings below 2^52 ns) loads on the memory store
     * and is refused by `sluice serve --store redis://` as it loads. */
    for (size_t i = 0; i < sl_rules_rule_count(rules); i++) {
        const sl_rule *r = sl_rules_rule(rules, i);
        char why[256];
        if (sl__rule_redis_fits(rules, r, why, sizeof(why)) != 0)
            fprintf(stderr,
                    "warning: rule '%s': refused with --store "
                    "redis://: %s\n",
                    r->path, why);
    }
    if (list)
        for (size_t i = 0; i < sl_rules_rule_count(rules); i++)
            print_rule(rules, sl_rules_rule(rules, i));
    size_t nd = sl_rules_domain_count(rules), nl = sl_rules_rule_count(rules);
    printf("ok: %zu %s, %zu %s (version %s)\n", nd,
           plural(nd, "domain", "domains"), nl, plural(nl, "limit", "limits"),
           sl_rules_version(rules));
    sl_rules_free(rules);
    return 0;
}
