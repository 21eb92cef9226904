/*
 * policy.c - a check that Redis could not decide (a timeout, an error, the
 * breaker open) is decided by each item's failure policy: its rule's
 * store_failure, else --redis-failure.  Any fail_closed item refuses the
 * request (SL_ESTORE); fail_open items are allowed with their whole
 * limit left; local items are decided together, all or nothing, on the
 * memory store with their limits divided among the nodes (local.c).
 *
 * While Redis decides, what it allows of local items is recorded on the
 * same divided limits (sd_policy_record): a node that falls back
 * mid-period starts from what it has already let through, not from a
 * fresh counter, so N nodes cut off together allow at most their unused
 * shares on top of the shared limit (docs/server.md, "Overshoot").
 */
#include <stdio.h>

#include "decision/layer.h"

static const char *const reason_names[SD_N_REASONS] = {"timeout", "error",
                                                       "breaker_open"};

const char *sd_reason_name(int reason)
{
    return reason_names[reason];
}

static int policy_of(const sd_thread *t, const sd_check *c, size_t i)
{
    if (c->failure != NULL && c->failure[i] != SL__RULE_FAILURE_DEFAULT)
        return (int)c->failure[i] - SL__RULE_FAILURE_LOCAL;
    return t->e->cfg.redis_failure;
}

void sd_policy_record(sd_thread *t, const sd_check *c, const sl_decision *each,
                      sl_nanos now)
{
    sl_check_item local[SL_MAX_ITEMS];
    int64_t costs[SL_MAX_ITEMS];
    sl_decision out[SL_MAX_ITEMS], overall;
    size_t n = 0;
    char err[64];

    for (size_t i = 0; i < c->n; i++)
        if ((each[i].allowed || (c->flags & SL_RECORD)) && c->costs[i] > 0 &&
            policy_of(t, c, i) == SD_FAIL_LOCAL) {
            local[n] = c->items[i];
            costs[n++] = c->costs[i];
        }
    /* An error here (out of memory) only loses the record: the fallback
     * is then as loose as a fresh counter, never wrong otherwise. */
    if (n > 0)
        (void)sd_local_check(t, local, costs, n, now, SL_RECORD, out, &overall,
                             err, sizeof(err));
}

void sd_policy_decide(sd_thread *t, sd_check *c, sl_nanos now, int reason)
{
    int policy[SL_MAX_ITEMS], used[SD_N_POLICIES] = {0};
    sl_check_item local[SL_MAX_ITEMS];
    int64_t local_costs[SL_MAX_ITEMS];
    sl_decision out[SL_MAX_ITEMS], local_each[SL_MAX_ITEMS], local_overall;
    size_t n_local = 0;

    for (size_t i = 0; i < c->n; i++) {
        policy[i] = policy_of(t, c, i);
        used[policy[i]] = 1;
    }
    for (int p = 0; p < SD_N_POLICIES; p++)
        if (used[p])
            sd_count(&t->stats->fallbacks[p], 1);
    if (used[SD_FAIL_CLOSED]) {
        snprintf(c->err, sizeof(c->err),
                 "store unavailable (%s) and the limit's "
                 "failure policy is fail_closed",
                 sd_reason_name(reason));
        c->rc = SL_ESTORE;
        return;
    }
    for (size_t i = 0; i < c->n; i++)
        if (policy[i] == SD_FAIL_LOCAL) {
            local[n_local] = c->items[i];
            local_costs[n_local++] = c->costs[i];
        }
    if (n_local > 0) {
        c->rc =
            sd_local_check(t, local, local_costs, n_local, now, c->flags,
                           local_each, &local_overall, c->err, sizeof(c->err));
        if (c->rc != 0)
            return;
    }
    for (size_t i = 0, j = 0; i < c->n; i++) {
        if (policy[i] == SD_FAIL_LOCAL) {
            out[i] = local_each[j++];
        } else {
            int64_t l = sl_limit_get_config(c->items[i].limit)->limit;
            out[i] = (sl_decision){.allowed = 1, .limit = l, .remaining = l};
        }
    }
    /* Items decided apart (some locally, some allowed by fail_open)
     * combine as sl_check_costs combines its items. */
    sl_decisions_combine(out, c->n, &c->overall);
    for (size_t i = 0; c->each != NULL && i < c->n; i++)
        c->each[i] = out[i];
    c->rc = 0;
}
