/*
 * lease.c - a thread's leases: units of a fixed_window that Redis counted
 * for this thread in a window, or of a token_bucket or gcra that Redis
 * took from the bucket and holds under this thread's holder id, on the
 * call the thread sent anyway (lease.lua, lease_bucket.lua), so that the
 * thread allows that many more requests of the (limit, key) itself,
 * without a round trip, until the lease's expiry.
 *
 * The expiry is asked_at + min(the time Redis said was left of the
 * window, lease_max) less the clocks' margin, where asked_at is this
 * thread's clock when the call went: Redis decided no earlier, so the
 * expiry is never after the window's end, and a unit is used only inside
 * the window that counted it.  Per window, the units allowed on every
 * node together are at most those Redis counted, at most the limit
 * (docs/stores.md, "Leases", proves it).  A bucket's lease lives
 * lease_max less the margin, within the life Redis gave its holder's
 * field, whose units hold the bucket's level down until they come back
 * or expire.  The price is the other way: a request may be refused while
 * leases elsewhere hold units unused.
 *
 * A lease's size follows the key's rate on this thread: the units it
 * asked for since its last lease was asked over the time since (a span
 * of at most two lease lifetimes, of at least MIN_SEEN units), times a
 * lease's lifetime, at most lease_share of the limit; a key seen for the
 * first time, or too slow to use a lease of MIN_ASK units, asks none.
 * Units unused are given back (lease_return.c sends them) shortly before
 * the expiry, when the key has been idle, when the rules change, or when
 * the entry is evicted; Redis takes them only into the window they came
 * from.
 *
 * The table is a fixed one of keyed.h, as the negative cache's: a
 * stranger making keys by the million evicts entries, never adds memory,
 * and a collision is a miss.  The entries that hold units are also on a
 * list, so that the sweep looks at those alone.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "decision/keyed.h"
#include "decision/layer.h"

/* Returned this long before the expiry: the return reaches Redis while
 * the window is, most likely, still the one the units came from. */
#define RETURN_AHEAD_NS (20 * SL_NS_PER_MS)
/* A lease not used for this long is given back. */
#define IDLE_NS (250 * SL_NS_PER_MS)
/* The least lease asked: a lease costs a return call, so it is worth
 * asking only when it spares several calls. */
#define MIN_ASK 4
/* The least units a key is seen to use in a span before it asks: a cold
 * key's two requests a moment apart would otherwise look like a rate. */
#define MIN_SEEN MIN_ASK

/* One (limit, key), 256 bytes.  Invariants: hash is 0 for an empty entry,
 * else the keyed hash of (ident, key) with its low bit set, in the bucket
 * it picks; key_len <= SD_LEASE_KEY_MAX; units >= 0; live_at is 0 when
 * units is 0, else 1 + its index in the live list, which names it; a
 * bucket's lease has window_ns SD_LEASE_NO_WINDOW and window_s its burst
 * (what its return names, with limit and period). */
typedef struct sd_lease {
    uint64_t hash;
    uint64_t ident;
    int64_t limit, period;       /* the numbers in force when it was granted */
    int64_t units;               /* left to allow, in the window below */
    int64_t pool;                /* Redis's remaining after the grant, then */
    int64_t window_s, window_ns; /* the window's start, on Redis's clock */
    sl_nanos until;              /* allowed before: the expiry */
    sl_nanos reset_at;           /* the window's end as the grant said it */
    sl_nanos last_ask; /* its rate's span began: its last ask, or since */
    int64_t demand;    /* units asked of it in the span, locally or not */
    sl_nanos last_use; /* a lease or an ask of it, last: for eviction */
    /* An ask is out until its reply or then: one at a time, so that the
     * calls of one batch do not each take a lease. */
    sl_nanos asking_until;
    uint32_t live_at;
    uint16_t key_len;
    char key[SD_LEASE_KEY_MAX];
} sd_lease;

_Static_assert(sizeof(sd_lease) == 256, "an entry is 256 bytes");

#define WAYS SD_KEYED_WAYS

struct sd_leases {
    sd_lease *slots; /* buckets * WAYS */
    sd_keyed keyed;
    uint32_t *live; /* indices of the entries holding units */
    size_t n_live;
    sd_lease_return pending[SD_LEASE_PENDING];
    size_t n_pending;
    sd_stats *stats;
    uint64_t holder; /* this thread's id in its buckets' lease hashes */
    /* When a bucket's return was last taken to be sent: Redis drops the
     * holder's field when it runs, so a grant to a call asked no later
     * may have been in that field, and is not used. */
    sl_nanos bucket_returned_at;
};

sd_leases *sd_leases_new(size_t bytes, sd_stats *stats)
{
    size_t buckets;
    if (bytes < SD_LEASE_MIN_BYTES)
        return NULL;
    sd_leases *ls = calloc(1, sizeof(*ls));
    if (ls == NULL ||
        sd_keyed_init(&ls->keyed, bytes, sizeof(sd_lease), &buckets) != 0 ||
        (ls->slots = calloc(buckets * WAYS, sizeof(sd_lease))) == NULL ||
        (ls->live = calloc(buckets * WAYS, sizeof(uint32_t))) == NULL) {
        sd_leases_free(ls);
        return NULL;
    }
    ls->stats = stats;
    ls->bucket_returned_at = INT64_MIN;
    if (getrandom(&ls->holder, sizeof(ls->holder), 0) !=
        (ssize_t)sizeof(ls->holder)) {
        sd_leases_free(ls);
        return NULL;
    }
    return ls;
}

void sd_leases_free(sd_leases *ls)
{
    if (ls == NULL)
        return;
    free(ls->slots);
    free(ls->live);
    free(ls);
}

static sd_lease *bucket_of(const sd_leases *ls, uint64_t hash)
{
    return &ls->slots[sd_keyed_bucket(&ls->keyed, hash)];
}

static int same(const sd_lease *e, uint64_t hash, const sl_check_item *item)
{
    return sd_keyed_same(e->hash, e->ident, e->key, e->key_len, hash, item) &&
           e->limit == item->limit->cfg.limit &&
           e->period == item->limit->cfg.period;
}

static sd_lease *find(sd_leases *ls, const sl_check_item *item)
{
    if (item->key_len > SD_LEASE_KEY_MAX)
        return NULL;
    uint64_t hash = sd_keyed_hash(&ls->keyed, item);
    sd_lease *b = bucket_of(ls, hash);
    for (int i = 0; i < WAYS; i++)
        if (same(&b[i], hash, item))
            return &b[i];
    return NULL;
}

/* Units to be given back to the window (s, ns) of (ident, key), of a
 * limit of these numbers (s the burst of a bucket's, ns
 * SD_LEASE_NO_WINDOW). */
static void give_back(sd_leases *ls, uint64_t ident, const void *key,
                      size_t key_len, int64_t units, int64_t s, int64_t ns,
                      int64_t limit, int64_t period)
{
    if (units <= 0)
        return;
    if (ls->n_pending == SD_LEASE_PENDING || key_len > SD_LEASE_KEY_MAX) {
        sd_count(&ls->stats->lease_units_lost, (uint64_t)units);
        return;
    }
    sd_lease_return *r = &ls->pending[ls->n_pending++];
    *r = (sd_lease_return){.units = units,
                           .window_s = s,
                           .window_ns = ns,
                           .limit = limit,
                           .period = period,
                           .ident = ident,
                           .holder = ls->holder,
                           .key_len = (uint16_t)key_len};
    if (key_len > 0)
        memcpy(r->key, key, key_len);
}

static void live_add(sd_leases *ls, sd_lease *e)
{
    if (e->live_at != 0)
        return;
    ls->live[ls->n_live++] = (uint32_t)(e - ls->slots);
    e->live_at = (uint32_t)ls->n_live;
}

/* e holds no units from here. */
static void live_del(sd_leases *ls, sd_lease *e)
{
    if (e->live_at == 0)
        return;
    uint32_t last = ls->live[--ls->n_live];
    ls->live[e->live_at - 1] = last;
    ls->slots[last].live_at = e->live_at;
    e->live_at = 0;
    e->units = 0;
}

/* e's units back to Redis, and e without them. */
static void release(sd_leases *ls, sd_lease *e)
{
    give_back(ls, e->ident, e->key, e->key_len, e->units, e->window_s,
              e->window_ns, e->limit, e->period);
    live_del(ls, e);
}

/* The entry of item, made (in an empty way, or over the least recently
 * used one, its units given back) when there is none: NULL when the key
 * is too long. */
static sd_lease *entry_of(sd_leases *ls, const sl_check_item *item,
                          sl_nanos now, int *made)
{
    if (item->key_len > SD_LEASE_KEY_MAX)
        return NULL;
    uint64_t hash = sd_keyed_hash(&ls->keyed, item);
    sd_lease *b = bucket_of(ls, hash), *e = NULL;
    *made = 0;
    for (int i = 0; i < WAYS; i++)
        if (same(&b[i], hash, item))
            return &b[i];
    for (int i = 0; i < WAYS && e == NULL; i++)
        if (b[i].hash == 0)
            e = &b[i];
    if (e == NULL) {
        e = &b[0];
        for (int i = 1; i < WAYS; i++)
            if (b[i].last_use < e->last_use)
                e = &b[i];
        release(ls, e);
    }
    const sl_limit_config *c = &item->limit->cfg;
    *e = (sd_lease){.hash = hash,
                    .ident = item->limit->ident,
                    .limit = c->limit,
                    .period = c->period,
                    .last_ask = now,
                    .last_use = now,
                    .key_len = (uint16_t)item->key_len};
    if (item->key_len > 0)
        memcpy(e->key, item->key, item->key_len);
    *made = 1;
    return e;
}

static int has_terms(const sd_check *check, size_t i)
{
    return check->lease != NULL && check->lease[i].share_ppm > 0 &&
           !(check->flags & SL_RECORD) && check->costs[i] > 0;
}

int sd_leases_answer(sd_leases *ls, sd_check *check, sl_nanos now)
{
    sd_lease *e[SL_MAX_ITEMS];
    if (ls == NULL || ls->n_live == 0 || check->n > SL_MAX_ITEMS)
        return 0;
    for (size_t i = 0; i < check->n; i++) {
        if (!has_terms(check, i) ||
            (e[i] = find(ls, &check->items[i])) == NULL ||
            e[i]->units < check->costs[i] || now >= e[i]->until)
            return 0;
    }
    sl_decision each[SL_MAX_ITEMS];
    for (size_t i = 0; i < check->n; i++) {
        sd_lease *l = e[i];
        l->units -= check->costs[i];
        l->demand += check->costs[i];
        l->last_use = now;
        /* What this node knows is left: its lease, and what Redis had
         * not leased when it granted (others may have taken it since). */
        each[i] = (sl_decision){.allowed = 1,
                                .limit = l->limit,
                                .remaining = l->units + l->pool,
                                .reset_after =
                                    l->reset_at > now ? l->reset_at - now : 0};
        if (l->units == 0)
            live_del(ls, l);
    }
    for (size_t i = 0; check->each != NULL && i < check->n; i++)
        check->each[i] = each[i];
    sl_decisions_combine(each, check->n, &check->overall);
    check->rc = 0;
    check->cached = 1;
    sd_count(&ls->stats->lease_local, 1);
    return 1;
}

void sd_leases_asks(sd_leases *ls, const sd_check *check, sl_nanos now,
                    sl__redis_ask *asks)
{
    for (size_t i = 0; i < check->n; i++) {
        sd_lease *e;
        int made;
        asks[i] = (sl__redis_ask){0};
        if (ls == NULL || !has_terms(check, i) ||
            !sl__redis_may_lease(check->items[i].limit) ||
            (e = entry_of(ls, &check->items[i], now, &made)) == NULL)
            continue;
        e->demand += check->costs[i];
        e->last_use = now;
        if (made || now < e->asking_until)
            continue; /* first seen: no rate yet; or a lease on its way */
        const sd_lease_terms *t = &check->lease[i];
        const sl_limit_config *c = &check->items[i].limit->cfg;
        int bucket = c->algorithm != SL_FIXED_WINDOW;
        sl_nanos life = t->max, elapsed = now - e->last_ask;
        if (elapsed > 2 * t->max) {
            /* A rate seen that long ago may be gone: measured afresh. */
            e->last_ask = now;
            e->demand = check->costs[i];
            continue;
        }
        if (e->demand < MIN_SEEN)
            continue; /* two requests close together are no rate */
        if (!bucket && e->reset_at > now && e->reset_at - now < life)
            life = e->reset_at - now;
        if (elapsed < 1)
            elapsed = 1;
        /* The units this key would use over a lease's life at the rate
         * seen since its last lease was asked (or its span began), less
         * those the call costs; at most lease_share of the limit (of a
         * bucket's burst, all it can ever hold). */
        int64_t cap = (int64_t)((sl__i128)(bucket ? c->burst : e->limit) *
                                t->share_ppm / 1000000);
        sl__i128 want = (sl__i128)e->demand * life / elapsed;
        want -= check->costs[i];
        asks[i].units = want < MIN_ASK ? 0 : want > cap ? cap : (int64_t)want;
        if (asks[i].units == 0)
            continue; /* the span goes on: its rate is told better */
        asks[i].life_ms = t->max / SL_NS_PER_MS;
        asks[i].holder = ls->holder;
        e->last_ask = now;
        e->demand = 0;
        e->asking_until = now + t->max;
    }
}

static int window_cmp(int64_t s1, int64_t n1, int64_t s2, int64_t n2)
{
    if (s1 != s2)
        return s1 < s2 ? -1 : 1;
    return n1 < n2 ? -1 : n1 > n2;
}

/* e holds the units of a grant just taken, with its decision d, asked
 * at asked_at. */
static void hold(sd_leases *ls, sd_lease *e, const sl_decision *d,
                 int64_t units, sl_nanos asked_at)
{
    e->pool = d->remaining > units ? d->remaining - units : 0;
    e->reset_at = asked_at + d->reset_after;
    e->last_use = asked_at;
    live_add(ls, e);
    sd_count(&ls->stats->lease_grants, 1);
    sd_count(&ls->stats->lease_units_granted, (uint64_t)units);
}

/* One grant g of item, with its decision d, asked at asked_at. */
static void keep(sd_leases *ls, const sl_check_item *item,
                 const sd_lease_terms *t, const sl_decision *d,
                 const sl__redis_grant *g, sl_nanos asked_at)
{
    /* Redis decided at or after asked_at, so asked_at plus the time it
     * said was left of the window is no later than the window's end; and
     * the clocks' margin as the negative cache's: TIME's microseconds
     * (1 us) and NTP's slew of each clock (1/512 of the wait). */
    sl_nanos life = d->reset_after < t->max ? d->reset_after : t->max;
    sl_nanos until = asked_at + life - (life >> 9) - 1000;
    sd_lease *e = find(ls, item);
    if (e == NULL || until <= asked_at) {
        give_back(ls, item->limit->ident, item->key, item->key_len, g->units,
                  g->window_s, g->window_ns, item->limit->cfg.limit,
                  item->limit->cfg.period);
        return;
    }
    int cmp = e->units > 0 ? window_cmp(g->window_s, g->window_ns, e->window_s,
                                        e->window_ns)
                           : 1;
    if (cmp < 0) {
        /* A reply older than the lease held: its window is over. */
        sd_count(&ls->stats->lease_units_lost, (uint64_t)g->units);
        return;
    }
    if (cmp > 0) {
        /* A newer window: the units held are of one that is over. */
        sd_count(&ls->stats->lease_units_lost, (uint64_t)e->units);
        e->units = 0;
        e->until = until;
    }
    e->units += g->units;
    /* Both expiries are within the one window. */
    if (until > e->until)
        e->until = until;
    e->window_s = g->window_s;
    e->window_ns = g->window_ns;
    hold(ls, e, d, g->units, asked_at);
}

/* A bucket's grant g of item, with its decision d, asked at asked_at.
 * Redis gave the holder's field life_ms from when it ran, at or after
 * asked_at: the lease ends before, by the clocks' margin (keep()'s). */
static void keep_bucket(sd_leases *ls, const sl_check_item *item,
                        const sd_lease_terms *t, const sl_decision *d,
                        const sl__redis_grant *g, sl_nanos asked_at)
{
    const sl_limit_config *c = &item->limit->cfg;
    sl_nanos life = t->max / SL_NS_PER_MS * SL_NS_PER_MS;
    sl_nanos until = asked_at + life - (life >> 9) - 1000;
    sd_lease *e = find(ls, item);
    if (asked_at <= ls->bucket_returned_at) {
        /* A return sent since may have dropped the field they are in. */
        sd_count(&ls->stats->lease_units_lost, (uint64_t)g->units);
        return;
    }
    if (e == NULL || until <= asked_at) {
        give_back(ls, item->limit->ident, item->key, item->key_len, g->units,
                  c->burst, SD_LEASE_NO_WINDOW, c->limit, c->period);
        return;
    }
    /* The units held may be of a field Redis has dropped as expired
     * (this thread cannot tell when Redis ran the call): they are not
     * used past their own expiry, under the new one. */
    sd_count(&ls->stats->lease_units_lost, (uint64_t)e->units);
    e->units = g->units;
    e->until = until;
    e->window_s = c->burst;
    e->window_ns = SD_LEASE_NO_WINDOW;
    hold(ls, e, d, g->units, asked_at);
}

void sd_leases_learn(sd_leases *ls, const sd_check *check,
                     const sl_decision *each, const sl__redis_grant *grants,
                     sl_nanos asked_at, int stale)
{
    for (size_t i = 0; ls != NULL && i < check->n; i++) {
        const sl__redis_grant *g = &grants[i];
        sd_lease *e;
        if (has_terms(check, i) && (e = find(ls, &check->items[i])) != NULL)
            e->asking_until = 0; /* the ask is answered */
        if (g->units <= 0)
            continue;
        const sl_check_item *it = &check->items[i];
        const sl_limit_config *c = &it->limit->cfg;
        int bucket = c->algorithm != SL_FIXED_WINDOW;
        if (stale || !has_terms(check, i))
            give_back(ls, it->limit->ident, it->key, it->key_len, g->units,
                      bucket ? c->burst : g->window_s,
                      bucket ? SD_LEASE_NO_WINDOW : g->window_ns, c->limit,
                      c->period);
        else if (bucket)
            keep_bucket(ls, it, &check->lease[i], &each[i], g, asked_at);
        else
            keep(ls, it, &check->lease[i], &each[i], g, asked_at);
    }
}

struct sd_lease_backs {
    sl_nanos asked_at;
    size_t n;
    struct {
        uint64_t hash; /* 0: no ask */
        int bucket;
        sd_lease_return r; /* the units and, of a window's, the window: 0 */
    } item[];
};

sd_lease_backs *sd_leases_backs_new(const sd_leases *ls, const sd_check *check,
                                    const sl__redis_ask *asks,
                                    sl_nanos asked_at)
{
    size_t asked = 0;
    for (size_t i = 0; ls != NULL && i < check->n; i++)
        asked += asks[i].units > 0;
    if (asked == 0)
        return NULL;
    sd_lease_backs *b =
        calloc(1, sizeof(*b) + check->n * sizeof(b->item[0]));
    if (b == NULL)
        return NULL;
    b->asked_at = asked_at;
    b->n = check->n;
    for (size_t i = 0; i < check->n; i++) {
        const sl_check_item *it = &check->items[i];
        const sl_limit_config *c = &it->limit->cfg;
        if (asks[i].units <= 0)
            continue; /* (an item that asked has a key an entry holds) */
        b->item[i].hash = sd_keyed_hash(&ls->keyed, it);
        b->item[i].bucket = c->algorithm != SL_FIXED_WINDOW;
        b->item[i].r = (sd_lease_return){.window_s = c->burst,
                                         .window_ns = SD_LEASE_NO_WINDOW,
                                         .limit = c->limit,
                                         .period = c->period,
                                         .ident = it->limit->ident,
                                         .key_len = (uint16_t)it->key_len};
        if (it->key_len > 0)
            memcpy(b->item[i].r.key, it->key, it->key_len);
    }
    return b;
}

/* The entry of r's (limit, key), by the hash it had: NULL when none. */
static sd_lease *find_return(sd_leases *ls, uint64_t hash,
                             const sd_lease_return *r)
{
    sd_lease *b = bucket_of(ls, hash);
    for (int i = 0; i < WAYS; i++)
        if (b[i].hash == hash && b[i].ident == r->ident &&
            b[i].key_len == r->key_len &&
            memcmp(b[i].key, r->key, r->key_len) == 0 &&
            b[i].limit == r->limit && b[i].period == r->period)
            return &b[i];
    return NULL;
}

void sd_leases_give_back_late(sd_leases *ls, const sd_lease_backs *b,
                              const sl__redis_grant *grants)
{
    for (size_t i = 0; ls != NULL && b != NULL && i < b->n; i++) {
        const sd_lease_return *r = &b->item[i].r;
        int64_t units = grants[i].units;
        if (b->item[i].hash == 0 || units <= 0)
            continue;
        sd_lease *e = find_return(ls, b->item[i].hash, r);
        if (e != NULL)
            e->asking_until = 0; /* the ask is answered */
        if (!b->item[i].bucket)
            give_back(ls, r->ident, r->key, r->key_len, units,
                      grants[i].window_s, grants[i].window_ns, r->limit,
                      r->period);
        else if (b->asked_at <= ls->bucket_returned_at ||
                 (e != NULL && e->units > 0))
            sd_count(&ls->stats->lease_units_lost, (uint64_t)units);
        else
            give_back(ls, r->ident, r->key, r->key_len, units, r->window_s,
                      r->window_ns, r->limit, r->period);
    }
}

void sd_leases_sweep(sd_leases *ls, sl_nanos now)
{
    for (size_t i = 0; ls != NULL && i < ls->n_live;) {
        sd_lease *e = &ls->slots[ls->live[i]];
        if (now >= e->until) {
            /* Missed: too late to give back into its window. */
            sd_count(&ls->stats->lease_units_lost, (uint64_t)e->units);
            live_del(ls, e);
        } else if (now >= e->until - RETURN_AHEAD_NS ||
                   now - e->last_use >= IDLE_NS) {
            release(ls, e);
        } else {
            i++;
        }
    }
}

void sd_leases_clear(sd_leases *ls)
{
    if (ls == NULL)
        return;
    while (ls->n_live > 0)
        release(ls, &ls->slots[ls->live[ls->n_live - 1]]);
    memset(ls->slots, 0, (ls->keyed.mask + 1) * WAYS * sizeof(sd_lease));
}

size_t sd_leases_take_returns(sd_leases *ls, sd_lease_return *out, size_t max,
                              sl_nanos now)
{
    size_t n = 0;
    while (ls != NULL && n < max && ls->n_pending > 0) {
        out[n] = ls->pending[--ls->n_pending];
        if (out[n++].window_ns == SD_LEASE_NO_WINDOW)
            ls->bucket_returned_at = now;
    }
    return n;
}

int sd_leases_check(const sd_leases *ls)
{
    size_t live = 0;
    for (size_t i = 0; ls != NULL && i < (ls->keyed.mask + 1) * WAYS; i++) {
        const sd_lease *e = &ls->slots[i];
        if (e->hash == 0) {
            if (e->live_at != 0)
                return -1;
            continue;
        }
        if ((e->hash & 1) == 0 ||
            bucket_of(ls, e->hash) != &ls->slots[i / WAYS * WAYS] ||
            e->key_len > SD_LEASE_KEY_MAX || e->units < 0 ||
            (e->units == 0) != (e->live_at == 0) ||
            (e->live_at != 0 && ls->live[e->live_at - 1] != i))
            return -1;
        live += e->live_at != 0;
    }
    return ls == NULL || live == ls->n_live ? 0 : -1;
}
