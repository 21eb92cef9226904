/*
 * rulesutil.h - what the tests of rules matching share: rules loaded from
 * text, request descriptors written "k=v,k=v", and their matches.
 * Everything is static: each test program includes this once, after
 * testutil.h.
 */
#ifndef SL_RULESUTIL_H
#define SL_RULESUTIL_H

#include "sluice_rules.h"

static inline sl_rules *rules_of(const char *text)
{
    sl_rules *r = NULL;
    char err[512] = "";
    int rc = sl_rules_load_buffer("t.yaml", text, strlen(text), NULL, &r,
                                  err, sizeof(err));
    if (rc != 0)
        fail_msg("load: %s: %s", sl_err_name(rc), err);
    return r;
}

/* A request descriptor written "k=v,k=v". */
typedef struct req {
    sl_rules_entry e[8];
    size_t n;
    char buf[256];
} req;

static inline void parse_req(req *q, const char *text)
{
    char *p, *save = NULL;
    snprintf(q->buf, sizeof(q->buf), "%s", text);
    q->n = 0;
    for (p = strtok_r(q->buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        char *eqs = strchr(p, '=');
        assert_non_null(eqs);
        *eqs = '\0';
        q->e[q->n].key = p;
        q->e[q->n].key_len = strlen(p);
        q->e[q->n].value = eqs + 1;
        q->e[q->n].value_len = strlen(eqs + 1);
        q->n++;
    }
}

typedef struct result {
    sl_rule_match m[SL_RULES_MAX_LIMITS_PER_NODE];
    size_t n;
    char key[512];
} result;

static inline size_t match(const sl_rules *r, const char *domain, const char *desc,
                    result *res)
{
    req q;
    parse_req(&q, desc);
    int rc = sl_rules_match(r, domain, strlen(domain), q.e, q.n, 0, res->m,
                            SL_RULES_MAX_LIMITS_PER_NODE, &res->n, res->key,
                            sizeof(res->key));
    if (rc != 0)
        fail_msg("match %s: %s", desc, sl_err_name(rc));
    return res->n;
}

#endif /* SL_RULESUTIL_H */
