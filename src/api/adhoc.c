/*
 * adhoc.c - the ad hoc limits of the client-side API (adhoc.h): made on
 * first use and kept in a table shared by the threads, an LRU cache of
 * at most --max-adhoc-limits entries; their counters live in the store.
 * Evicting an entry changes no decision: a limit's state is keyed by its
 * parameters, its id and the key (sl_limit_config.id), not by the limit
 * object, so the limit made again for the same (id, interval, requests,
 * algorithm) finds the same counter in the store, which has its own
 * bound and expiry (--store-bytes, Redis's TTLs).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/adhoc.h"

/* The sl_limit_config.id of every ad hoc limit: rule limits derive their
 * ids from the rules, so the two never share state by accident. */
#define ADHOC_LIMIT_ID UINT64_C(0x61646863636c6e74)
#define ADHOC_BUCKETS 4096

struct sv_adhoc_limit {
    struct sv_adhoc_limit *next;          /* in its bucket */
    struct sv_adhoc_limit *newer, *older; /* in the LRU list */
    size_t refs; /* 1 for the table while in it, 1 per request using it */
    uint64_t hash;
    sl_nanos interval;
    int64_t requests;
    sl_algorithm algorithm;
    sl_limit *limit;
    size_t id_len;
    char id[];
};
typedef struct sv_adhoc_limit adhoc_limit;

/* The table of ad hoc limits.  Invariants: n <= the cap; every entry's
 * limit matches its (interval, requests, algorithm); the LRU list holds
 * exactly the entries of the buckets, newest (last used) first.  An
 * entry leaves the table when it is the oldest and a new one needs its
 * room, and is freed when its last request lets go of it (sv_adhoc_put). */
struct sv_adhoc {
    pthread_mutex_t lock;
    adhoc_limit *buckets[ADHOC_BUCKETS];
    adhoc_limit *newest, *oldest;
    size_t n;
};

int sv_adhoc_init(sv_server *s)
{
    s->adhoc = calloc(1, sizeof(*s->adhoc));
    if (s->adhoc == NULL)
        return -1;
    pthread_mutex_init(&s->adhoc->lock, NULL);
    return 0;
}

/* Drops a reference; under t->lock. */
static void adhoc_unref(adhoc_limit *a)
{
    if (--a->refs > 0)
        return;
    sl_limit_free(a->limit);
    free(a);
}

/* A request lets go of the entry that adhoc_get gave it. */
void sv_adhoc_put(struct sv_adhoc *t, sv_adhoc_limit *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    adhoc_unref(a);
    pthread_mutex_unlock(&t->lock);
}

static void lru_unlink(struct sv_adhoc *t, adhoc_limit *a)
{
    *(a->newer ? &a->newer->older : &t->newest) = a->older;
    *(a->older ? &a->older->newer : &t->oldest) = a->newer;
}

static void lru_push(struct sv_adhoc *t, adhoc_limit *a)
{
    a->newer = NULL;
    a->older = t->newest;
    *(t->newest ? &t->newest->newer : &t->oldest) = a;
    t->newest = a;
}

/* Takes the least recently used entry out of the table; under t->lock. */
static void adhoc_evict_oldest(struct sv_adhoc *t)
{
    adhoc_limit *a = t->oldest, **b = &t->buckets[a->hash % ADHOC_BUCKETS];
    while (*b != a)
        b = &(*b)->next;
    *b = a->next;
    lru_unlink(t, a);
    t->n--;
    adhoc_unref(a);
}

void sv_adhoc_release(sv_server *s)
{
    if (s->adhoc == NULL)
        return;
    while (s->adhoc->oldest != NULL)
        adhoc_evict_oldest(s->adhoc);
    pthread_mutex_destroy(&s->adhoc->lock);
    free(s->adhoc);
    s->adhoc = NULL;
}

static uint64_t hash_adhoc(const char *id, size_t len, sl_nanos interval,
                           int64_t requests, sl_algorithm alg)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)id[i]) * 0x100000001b3ULL;
    h = (h ^ (uint64_t)interval) * 0x100000001b3ULL;
    h = (h ^ (uint64_t)requests) * 0x100000001b3ULL;
    return (h ^ (uint64_t)alg) * 0x100000001b3ULL;
}

int sv_adhoc_get(sv_server *s, const char *id, size_t id_len,
                 sl_nanos interval, int64_t requests, sl_algorithm alg,
                 sv_adhoc_limit **out, sv_api_err *e)
{
    uint64_t h = hash_adhoc(id, id_len, interval, requests, alg);
    struct sv_adhoc *t = s->adhoc;
    pthread_mutex_lock(&t->lock);
    adhoc_limit **b = &t->buckets[h % ADHOC_BUCKETS], *a;
    for (a = *b; a != NULL; a = a->next)
        if (a->hash == h && a->interval == interval &&
            a->requests == requests && a->algorithm == alg &&
            a->id_len == id_len && memcmp(a->id, id, id_len) == 0)
            break;
    if (a != NULL) {
        lru_unlink(t, a);
        lru_push(t, a);
        a->refs++;
        *out = a;
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    sl_limit_config cfg = {.algorithm = alg,
                           .limit = requests,
                           .period = interval,
                           .id = ADHOC_LIMIT_ID};
    char err[160];
    sl_limit *lim;
    int rc = sl_limit_new(&cfg, &lim, err, sizeof(err));
    if (rc != 0) {
        pthread_mutex_unlock(&t->lock);
        return sv_api_fail(e, rc == SL_ENOMEM ? 503 : 400, sl_err_name(rc),
                           "interval/requests/algorithm: %s", err);
    }
    a = malloc(sizeof(*a) + id_len);
    if (a == NULL) {
        pthread_mutex_unlock(&t->lock);
        sl_limit_free(lim);
        return sv_api_fail(e, 503, "ENOMEM", "out of memory");
    }
    *a = (adhoc_limit){.refs = 1,
                       .hash = h,
                       .interval = interval,
                       .requests = requests,
                       .algorithm = alg,
                       .limit = lim,
                       .id_len = id_len};
    memcpy(a->id, id, id_len);
    if (s->cfg.max_adhoc_limits > 0) {
        while (t->n >= s->cfg.max_adhoc_limits)
            adhoc_evict_oldest(t);
        a->next = *b;
        *b = a;
        lru_push(t, a);
        t->n++;
        a->refs++;
    }
    *out = a;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

const sl_limit *sv_adhoc_limit_of(const sv_adhoc_limit *a)
{
    return a->limit;
}
