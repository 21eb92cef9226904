/*
 * negative_cache.c - what Redis refused, remembered until the refusal's
 * earliest allow time, so that a key hammered past its limit is answered
 * by the node and costs Redis nothing until it may pass again.
 *
 * A refusal of (limit, key) at cost c with retry_after r, decided by Redis
 * at a time no earlier than the call was asked (asked_at), means that no
 * call of that limit and key of cost c or more can pass before asked_at +
 * r, whichever node sends it (docs/stores.md, "The negative cache", proves
 * it per algorithm; sl__redis_refusal_lasts says for which limits).  The
 * cache answers such a call with the refusal it would get: remaining as
 * Redis said, reset and retry-after counted down to the new call's time.
 * It never allows anything, and it never answers a smaller cost (a bucket
 * that refuses 5 may allow 1), a query of cost 0, or a call it cannot
 * verify to be the same limit, numbers and key.
 *
 * Each thread has its own cache (docs/design.md, "The negative cache"
 * says why): no lock, no shared line on the path of the hot key it is
 * for.  Its table is allocated once at its budget and never grows: a
 * stranger who makes keys by the million evicts entries, never adds
 * memory.  Entries sit in buckets of four picked by a keyed SipHash of
 * the key, so nobody can aim keys at one bucket without the thread's
 * secret; and an entry holds its whole key and limit numbers, so a
 * collision is a miss, never another key's refusal.
 */
#include <stdlib.h>
#include <string.h>

#include "decision/keyed.h"
#include "decision/layer.h"

/* One remembered refusal, 256 bytes.  Invariants: hash is 0 for an empty
 * entry, else the keyed hash of (ident, key) with its low bit set, in the
 * bucket it picks; key_len <= SD_NEGCACHE_KEY_MAX; cost >= 1; until <=
 * retry_at.  `entries` counts the non-empty ones. */
typedef struct sd_refusal {
    uint64_t hash;
    /* What decides the key's calls on Redis: its state's identity and
     * the numbers in force (an override changes them, not the identity). */
    uint64_t ident;
    int64_t limit, period, burst, step;
    int64_t cost;      /* the refused cost: only as much or more is covered */
    int64_t remaining; /* as Redis answered */
    sl_nanos retry_at; /* asked_at + retry_after: what answers count down to */
    sl_nanos until;    /* retry_at less the clocks' margin: answered before */
    sl_nanos reset_at;
    uint16_t key_len;
    char key[SD_NEGCACHE_KEY_MAX];
} sd_refusal;

_Static_assert(sizeof(sd_refusal) == 256, "an entry is 256 bytes");

#define WAYS SD_KEYED_WAYS

struct sd_negcache {
    sd_refusal *slots; /* buckets * WAYS */
    sd_keyed keyed;
    size_t entries;
    sd_stats *stats;
};

sd_negcache *sd_negcache_new(size_t bytes, sd_stats *stats)
{
    size_t buckets;
    if (bytes < SD_NEGCACHE_MIN_BYTES)
        return NULL;
    sd_negcache *nc = calloc(1, sizeof(*nc));
    if (nc == NULL ||
        sd_keyed_init(&nc->keyed, bytes, sizeof(sd_refusal), &buckets) != 0 ||
        (nc->slots = calloc(buckets * WAYS, sizeof(sd_refusal))) == NULL) {
        sd_negcache_free(nc);
        return NULL;
    }
    nc->stats = stats;
    return nc;
}

void sd_negcache_free(sd_negcache *nc)
{
    if (nc == NULL)
        return;
    free(nc->slots);
    free(nc);
}

static uint64_t hash_of(const sd_negcache *nc, const sl_check_item *item)
{
    return sd_keyed_hash(&nc->keyed, item);
}

static sd_refusal *bucket_of(const sd_negcache *nc, uint64_t hash)
{
    return &nc->slots[sd_keyed_bucket(&nc->keyed, hash)];
}

static int same(const sd_refusal *e, uint64_t hash, const sl_check_item *item)
{
    const sl_limit_config *c = &item->limit->cfg;
    return sd_keyed_same(e->hash, e->ident, e->key, e->key_len, hash, item) &&
           e->limit == c->limit && e->period == c->period &&
           e->burst == c->burst && e->step == c->step;
}

static void set_entries(sd_negcache *nc, size_t entries)
{
    nc->entries = entries;
    atomic_store_explicit(&nc->stats->negcache_entries, entries,
                          memory_order_relaxed);
}

static void drop(sd_negcache *nc, sd_refusal *e)
{
    e->hash = 0;
    set_entries(nc, nc->entries - 1);
}

static sl_nanos until_now(sl_nanos at, sl_nanos now)
{
    return at > now ? at - now : 0;
}

int sd_negcache_find(sd_negcache *nc, const sl_check_item *item, int64_t cost,
                     sl_nanos now, sl_decision *d)
{
    if (nc == NULL || nc->entries == 0 || cost <= 0 ||
        item->key_len > SD_NEGCACHE_KEY_MAX)
        return 0;
    uint64_t hash = hash_of(nc, item);
    sd_refusal *b = bucket_of(nc, hash);
    for (int i = 0; i < WAYS; i++) {
        sd_refusal *e = &b[i];
        if (!same(e, hash, item))
            continue;
        if (now >= e->until) {
            drop(nc, e); /* it may pass now: Redis decides */
            return 0;
        }
        if (cost < e->cost)
            return 0;
        /* A cost past the limit's capacity never passes, whatever the
         * state: the store says -1, so does the cache. */
        sl_algorithm alg = item->limit->cfg.algorithm;
        int bucket =
            alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
        *d = (sl_decision){.allowed = 0,
                           .limit = e->limit,
                           .remaining = e->remaining,
                           .reset_after = until_now(e->reset_at, now),
                           .retry_after = cost > (bucket ? e->burst : e->limit)
                                              ? -1
                                              : e->retry_at - now,
                           .delay = 0};
        return 1;
    }
    return 0;
}

void sd_negcache_put(sd_negcache *nc, const sl_check_item *item, int64_t cost,
                     sl_nanos asked_at, const sl_decision *d)
{
    if (nc == NULL || d->allowed || d->retry_after <= 0 || cost <= 0 ||
        item->key_len > SD_NEGCACHE_KEY_MAX ||
        !sl__redis_refusal_lasts(item->limit))
        return;
    /* Redis's clock against ours: its TIME has microseconds (a call it
     * reads at T + 999 ns is decided at T), and NTP slews each clock by
     * at most 500 ppm, so two run apart by at most 1000 ppm: 1 us plus
     * 1/512 of the wait (docs/stores.md, "The negative cache"). */
    sl_nanos retry_at = sl__sat_add(asked_at, d->retry_after);
    sl_nanos until = retry_at - (d->retry_after >> 9) - 1000;
    if (until <= asked_at)
        return;
    uint64_t hash = hash_of(nc, item);
    sd_refusal *b = bucket_of(nc, hash), *e = NULL;
    for (int i = 0; i < WAYS && e == NULL; i++)
        if (same(&b[i], hash, item))
            e = &b[i];
    for (int i = 0; i < WAYS && e == NULL; i++)
        if (b[i].hash == 0)
            e = &b[i];
    if (e == NULL) {
        /* The bucket is full: the entry whose refusal ends first goes,
         * and counts as an eviction only if it was still live. */
        e = &b[0];
        for (int i = 1; i < WAYS; i++)
            if (b[i].until < e->until)
                e = &b[i];
        if (e->until > asked_at)
            sd_count(&nc->stats->negcache_evictions, 1);
        drop(nc, e);
    }
    if (e->hash == 0)
        set_entries(nc, nc->entries + 1);
    const sl_limit_config *c = &item->limit->cfg;
    *e = (sd_refusal){.hash = hash,
                      .ident = item->limit->ident,
                      .limit = c->limit,
                      .period = c->period,
                      .burst = c->burst,
                      .step = c->step,
                      .cost = cost,
                      .remaining = d->remaining,
                      .retry_at = retry_at,
                      .until = until,
                      .reset_at = sl__sat_add(asked_at, d->reset_after),
                      .key_len = (uint16_t)item->key_len};
    if (item->key_len > 0)
        memcpy(e->key, item->key, item->key_len);
}

int sd_negcache_answer(sd_negcache *nc, sd_check *check, sl_nanos now)
{
    sl_decision each[SL_MAX_ITEMS];
    if (nc == NULL || (check->flags & SL_RECORD) || check->n > SL_MAX_ITEMS)
        return 0;
    for (size_t i = 0; i < check->n; i++)
        if (!sd_negcache_find(nc, &check->items[i], check->costs[i], now,
                              &each[i]))
            return 0;
    for (size_t i = 0; check->each != NULL && i < check->n; i++)
        check->each[i] = each[i];
    sl_decisions_combine(each, check->n, &check->overall);
    check->rc = 0;
    check->cached = 1;
    sd_count(&nc->stats->negcache_hits, 1);
    return 1;
}

void sd_negcache_learn(sd_negcache *nc, const sd_check *check,
                       const sl_decision *each, sl_nanos asked_at)
{
    if (nc == NULL || (check->flags & SL_RECORD))
        return;
    for (size_t i = 0; i < check->n; i++)
        if (!each[i].allowed)
            sd_negcache_put(nc, &check->items[i], check->costs[i], asked_at,
                            &each[i]);
}

void sd_negcache_clear(sd_negcache *nc)
{
    if (nc == NULL)
        return;
    memset(nc->slots, 0, (nc->keyed.mask + 1) * WAYS * sizeof(sd_refusal));
    set_entries(nc, 0);
}

int sd_negcache_check(const sd_negcache *nc)
{
    size_t live = 0;
    for (size_t i = 0; nc != NULL && i < (nc->keyed.mask + 1) * WAYS; i++) {
        const sd_refusal *e = &nc->slots[i];
        if (e->hash == 0)
            continue;
        live++;
        if ((e->hash & 1) == 0 ||
            bucket_of(nc, e->hash) != &nc->slots[i / WAYS * WAYS] ||
            e->key_len > SD_NEGCACHE_KEY_MAX || e->cost < 1 ||
            e->until > e->retry_at)
            return -1;
    }
    return nc == NULL || live == nc->entries ? 0 : -1;
}
