/*
 * local.c - the local failure policy's limits: each rule's limit divided
 * by the nodes sharing the Redis (sd_engine_nodes), decided on the
 * thread's memory store, so that N nodes cut off from Redis together
 * allow about what the shared limit would.  A divided limit is made once
 * per thread (no lock on the fallback path) and found by its
 * configuration and divisor, never by address: a reload frees limits and
 * a new one may reuse an address.
 *
 * An override (sl_limit_override) is divided as an override of its
 * divided base: its own numbers divided, the divided base's counters, so
 * that the local state, like Redis's, survives a change of the numbers.
 * A limit of 0 stays 0 (it denies).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"

#define LOCAL_BUCKETS 1024
/* Divided limits one thread keeps; past it the policy cannot decide. */
#define LOCAL_MAX 100000

typedef struct local_limit {
    sl_limit_config cfg, base; /* the limit's numbers and its base's */
    int nodes;
    sl_limit *local;
    struct local_limit *next;
} local_limit;

struct sd_local {
    local_limit *buckets[LOCAL_BUCKETS];
    size_t count;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* A count divided by the nodes: at least 1, but 0 stays 0. */
static int64_t share(int64_t n, int nodes)
{
    return n == 0 ? 0 : n / nodes > 0 ? n / nodes : 1;
}

/* The divided limit: sl_limit_new() of the base's numbers divided, and
 * for an override sl_limit_override() of that with its own. */
static sl_limit *divide(const sl_limit_config *cfg, const sl_limit_config *base,
                        int nodes)
{
    sl_limit_config c = *base;
    sl_limit *b, *o;
    c.limit = share(base->limit, nodes);
    c.burst = share(base->burst, nodes);
    if (sl_limit_new(&c, &b, NULL, 0) != 0)
        return NULL;
    if (cfg->limit == base->limit && cfg->burst == base->burst)
        return b; /* not an override: only these two can differ */
    /* The buckets' burst is divided too; the windows take 0. */
    int bucket = c.algorithm == SL_TOKEN_BUCKET || c.algorithm == SL_GCRA ||
                 c.algorithm == SL_LEAKY_BUCKET;
    if (sl_limit_override(b, share(cfg->limit, nodes),
                          bucket ? share(cfg->burst, nodes) : 0, &o, NULL,
                          0) != 0)
        o = NULL;
    sl_limit_free(b);
    return o;
}

static const sl_limit *divided(sd_thread *t, const sl_limit *lim)
{
    const sl_limit_config *cfg = sl_limit_get_config(lim);
    const sl_limit_config *base = sl_limit_base_config(lim);
    int nodes = sd_engine_nodes(t->e);
    if (nodes <= 1)
        return lim;
    if (t->local == NULL && (t->local = calloc(1, sizeof(*t->local))) == NULL)
        return NULL;
    uint64_t h = fnv(UINT64_C(0xcbf29ce484222325), cfg, sizeof(*cfg));
    h = fnv(h, base, sizeof(*base));
    h = fnv(h, &nodes, sizeof(nodes));
    local_limit **b = &t->local->buckets[h % LOCAL_BUCKETS];
    for (local_limit *l = *b; l != NULL; l = l->next)
        if (l->nodes == nodes && memcmp(&l->cfg, cfg, sizeof(*cfg)) == 0 &&
            memcmp(&l->base, base, sizeof(*base)) == 0)
            return l->local;
    if (t->local->count >= LOCAL_MAX)
        return NULL;
    local_limit *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->cfg = *cfg;
    l->base = *base;
    l->nodes = nodes;
    if ((l->local = divide(cfg, base, nodes)) == NULL) {
        free(l);
        return NULL;
    }
    l->next = *b;
    *b = l;
    t->local->count++;
    return l->local;
}

int sd_local_check(sd_thread *t, const sl_check_item *items,
                   const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                   sl_decision *each, sl_decision *overall, char *err,
                   size_t errlen)
{
    sl_check_item local[SL_MAX_ITEMS];
    for (size_t i = 0; i < n; i++) {
        local[i] = items[i];
        local[i].limit = divided(t, items[i].limit);
        if (local[i].limit == NULL) {
            snprintf(err, errlen, "out of memory for the local fallback");
            return SL_ENOMEM;
        }
    }
    int rc = sl_check_costs(t->e->memory, local, costs, n, now, flags, each,
                            overall);
    if (rc != 0)
        snprintf(err, errlen, "store: %s", sl_strerror(rc));
    return rc;
}

void sd_local_release(sd_thread *t)
{
    if (t->local == NULL)
        return;
    for (size_t i = 0; i < LOCAL_BUCKETS; i++)
        for (local_limit *l = t->local->buckets[i], *next; l != NULL;
             l = next) {
            next = l->next;
            sl_limit_free(l->local);
            free(l);
        }
    free(t->local);
    t->local = NULL;
}
