/*
 * hot.c - the status page's last minute (hot.h): per-thread space-saving
 * top-K tables of keys and rules, in two 30 s generations, and a ring of
 * 5 s buckets of rule decisions (hot_history.c); merged across threads
 * on demand.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hot.h"
#include "runtime/hot_history.h"

#define HOT_K 64                        /* entries of a table */
#define HOT_TEXT 96                     /* bytes of a key or rule kept */
#define HOT_GEN_NS (30 * SL_NS_PER_SEC) /* a generation's span */
#define HOT_STEP_NS (SV_HIST_STEP_S * SL_NS_PER_SEC)

typedef struct hot_entry {
    uint64_t hash; /* also in the table's hash[], for the merge */
    uint64_t count, over, error;
    uint8_t key_len, rule_len;
    char key[HOT_TEXT], rule[HOT_TEXT / 2];
} hot_entry;

#define HOT_SLOTS 256 /* of the index: a quarter full at most */

/* The entries, an index of their hashes (linear probing, entry + 1 per
 * slot, 0 empty), and the least count known, so that a miss finds an
 * entry to replace without a full scan while there are ties (the usual
 * case: every newcomer enters at the minimum plus one). */
typedef struct hot_table {
    size_t n, cursor;
    uint64_t min; /* no entry counts less (a lower bound) */
    uint64_t hash[HOT_K];
    uint8_t index[HOT_SLOTS];
    hot_entry e[HOT_K];
} hot_table;

/* The slot of hash in t's index, or of the empty slot its probe ends on. */
static size_t slot_of(const hot_table *t, uint64_t hash)
{
    size_t i = hash % HOT_SLOTS;
    while (t->index[i] != 0 && t->hash[t->index[i] - 1] != hash)
        i = (i + 1) % HOT_SLOTS;
    return i;
}

/* Removes hash's slot, shifting back the probe run after it. */
static void unindex(hot_table *t, uint64_t hash)
{
    size_t hole = slot_of(t, hash);
    for (size_t j = (hole + 1) % HOT_SLOTS; t->index[j] != 0;
         j = (j + 1) % HOT_SLOTS) {
        size_t home = t->hash[t->index[j] - 1] % HOT_SLOTS;
        /* j's entry may fill the hole unless its home lies in (hole, j]. */
        if ((j - home + HOT_SLOTS) % HOT_SLOTS >=
            (j - hole + HOT_SLOTS) % HOT_SLOTS) {
            t->index[hole] = t->index[j];
            hole = j;
        }
    }
    t->index[hole] = 0;
}

struct sv_hot {
    pthread_mutex_t lock;        /* uncontended but for a status request */
    int64_t gen;                 /* now / HOT_GEN_NS of keys[0], rules[0] */
    hot_table keys[2], rules[2]; /* [0] this generation, [1] the last */
    sv_hist history;
};

sv_hot *sv_hot_new(void)
{
    sv_hot *h = calloc(1, sizeof(*h));
    if (h != NULL)
        pthread_mutex_init(&h->lock, NULL);
    return h;
}

void sv_hot_free(sv_hot *h)
{
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/* A hash of n bytes continued from x, eight bytes a step (a byte at a
 * time cost more than the rest of the count).  Not keyed: a client that
 * made two keys collide would only merge their lines on the page. */
static uint64_t mix(uint64_t x, const char *a, size_t n)
{
    const uint64_t k = UINT64_C(0x9e3779b97f4a7c15);
    for (; n >= 8; a += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, a, 8);
        x = (x ^ v) * k;
        x ^= x >> 29;
    }
    uint64_t v = 0;
    memcpy(&v, a, n);
    x = (x ^ v ^ ((uint64_t)n << 56)) * k;
    return x ^ (x >> 32);
}

/* An entry of the least count, from the cursor on. */
static size_t least(hot_table *t)
{
    size_t best = t->cursor;
    for (size_t k = 0; k < HOT_K; k++) {
        size_t i = (t->cursor + k) % HOT_K;
        if (t->e[i].count <= t->min) {
            t->cursor = (i + 1) % HOT_K;
            return i;
        }
        if (t->e[i].count < t->e[best].count)
            best = i;
    }
    t->min = t->e[best].count; /* a full scan: the true minimum */
    t->cursor = (best + 1) % HOT_K;
    return best;
}

/* Space-saving: counts `key` (with its rule) in t. */
static void count(hot_table *t, uint64_t hash, const char *key, size_t key_len,
                  const char *rule, size_t rule_len, uint64_t over, uint64_t n)
{
    hot_entry *e = NULL;
    size_t slot = slot_of(t, hash);
    if (t->index[slot] != 0)
        e = &t->e[t->index[slot] - 1];
    if (e == NULL) {
        size_t i;
        if (t->n < HOT_K) {
            i = t->n++;
            t->e[i] = (hot_entry){0};
        } else {
            i = least(t);
            unindex(t, t->hash[i]);
            slot = slot_of(t, hash);
            /* The newcomer inherits the evicted count: its error. */
            t->e[i].error = t->e[i].count;
            t->e[i].over = 0;
        }
        e = &t->e[i];
        e->hash = t->hash[i] = hash;
        t->index[slot] = (uint8_t)(i + 1);
        e->key_len = (uint8_t)(key_len < HOT_TEXT ? key_len : HOT_TEXT);
        memcpy(e->key, key, e->key_len);
        e->rule_len =
            (uint8_t)(rule_len < sizeof(e->rule) ? rule_len : sizeof(e->rule));
        memcpy(e->rule, rule, e->rule_len);
    }
    e->count += n;
    e->over += over;
}

static void clear(hot_table *t)
{
    t->n = t->cursor = 0;
    t->min = 0;
    memset(t->index, 0, sizeof(t->index));
}

/* Moves the generations on to now's. */
static void advance(sv_hot *h, sl_nanos now)
{
    int64_t gen = now / HOT_GEN_NS;
    if (gen == h->gen)
        return;
    if (gen == h->gen + 1) {
        h->keys[1] = h->keys[0];
        h->rules[1] = h->rules[0];
    } else {
        clear(&h->keys[1]);
        clear(&h->rules[1]);
    }
    clear(&h->keys[0]);
    clear(&h->rules[0]);
    h->gen = gen;
}

uint64_t sv_hot_hash(const char *id, size_t n)
{
    return mix(0, id, n);
}

void sv_hot_count(sv_worker *w, const char *rule, size_t rule_len,
                  uint64_t rule_hash, const char *key, size_t key_len, int over)
{
    sv_hot *h = w->hot;
    if (h == NULL)
        return;
    sl_nanos now = sv_now(w);
    uint64_t rh = rule_hash;
    uint64_t kh = mix(rh, key, key_len);
    int64_t epoch = now / HOT_STEP_NS;
    pthread_mutex_lock(&h->lock);
    advance(h, now);
    count(&h->keys[0], kh, key, key_len, rule, rule_len, over != 0, 1);
    count(&h->rules[0], rh, "", 0, rule, rule_len, over != 0, 1);
    sv_hist_count(&h->history, epoch, rule, rule_len, rh, over != 0);
    pthread_mutex_unlock(&h->lock);
}

/* Adds src's entries into dst (a merge: dst keeps the K most counted,
 * errors summed). */
static void merge(hot_entry *dst, size_t *n, size_t cap, const hot_table *src)
{
    for (size_t i = 0; i < src->n; i++) {
        const hot_entry *s = &src->e[i];
        size_t j = 0;
        while (j < *n && dst[j].hash != s->hash)
            j++;
        if (j == *n) {
            if (*n == cap)
                continue; /* cap is all threads' K: never reached */
            dst[(*n)++] = *s;
            continue;
        }
        dst[j].count += s->count;
        dst[j].over += s->over;
        dst[j].error += s->error;
    }
}

static int by_count(const void *a, const void *b)
{
    const hot_entry *x = a, *y = b;
    return (x->count < y->count) - (x->count > y->count);
}

/* One length-prefixed field of a counter key ("8:10.0.0.1") at *p: its
 * bytes and length, *p moved past it; 0, or -1 when the key ends first
 * (it was cut at HOT_TEXT) or is not of that form. */
static int field_of(const char **p, const char *end, const char **text,
                    size_t *len)
{
    size_t n = 0;
    const char *q = *p;
    while (q < end && *q >= '0' && *q <= '9' && n < HOT_TEXT)
        n = n * 10 + (size_t)(*q++ - '0');
    if (q == *p || q == end || *q != ':' || (size_t)(end - q - 1) < n)
        return -1;
    *text = q + 1;
    *len = n;
    *p = q + 1 + n;
    return 0;
}

/* The counter key's domain and its entries as a reader writes them,
 * "tenant=acme, user=alice", out of the store's encoding
 * ("3:api,6:tenant=4:acme,4:user=5:alice"); a key cut short ends in
 * "...". */
static void readable_key(json_t *o, const char *key, size_t n)
{
    const char *p = key, *end = key + n, *t, *v;
    size_t tl, vl;
    char buf[HOT_TEXT * 2 + 8];
    size_t len = 0;
    if (field_of(&p, end, &t, &tl) != 0) {
        json_object_set_new(o, "key", sv_readable_text(key, n));
        return;
    }
    json_object_set_new(o, "domain", sv_readable_text(t, tl));
    while (p < end) {
        if (*p++ != ',' || field_of(&p, end, &t, &tl) != 0 || p == end ||
            *p++ != '=' || field_of(&p, end, &v, &vl) != 0) {
            memcpy(buf + len, "...", 3);
            len += 3;
            break;
        }
        int w = snprintf(buf + len, sizeof(buf) - 4 - len, "%s%.*s=%.*s",
                         len ? ", " : "", (int)tl, t, (int)vl, v);
        if (w < 0 || (size_t)w >= sizeof(buf) - 4 - len)
            break; /* cannot happen: the text is shorter than its key */
        len += (size_t)w;
    }
    json_object_set_new(o, "key", sv_readable_text(buf, len));
}

static json_t *top(hot_entry *all, size_t n, size_t n_top, int with_key)
{
    json_t *a = json_array();
    qsort(all, n, sizeof(*all), by_count);
    for (size_t i = 0; i < n && i < n_top; i++) {
        json_t *o = json_pack(
            "{s:o,s:I,s:I,s:I}", "rule", sv_readable_text(all[i].rule, all[i].rule_len),
            "decisions", (json_int_t)all[i].count, "over_limit",
            (json_int_t)all[i].over, "error", (json_int_t)all[i].error);
        if (with_key)
            readable_key(o, all[i].key, all[i].key_len);
        json_array_append_new(a, o);
    }
    return a;
}

json_t *sv_hot_report(sv_server *s, sl_nanos now, size_t n_top)
{
    size_t cap = (size_t)s->n_workers * 2 * HOT_K;
    hot_entry *keys = calloc(cap ? cap : 1, sizeof(*keys));
    hot_entry *rules = calloc(cap ? cap : 1, sizeof(*rules));
    sv_hist_sum *history = sv_hist_sum_new(now / HOT_STEP_NS);
    size_t nk = 0, nr = 0;
    if (keys == NULL || rules == NULL || history == NULL) {
        free(keys);
        free(rules);
        free(history);
        return NULL;
    }
    for (int i = 0; i < s->n_workers; i++) {
        sv_hot *h = s->workers[i].hot;
        if (h == NULL)
            continue;
        pthread_mutex_lock(&h->lock);
        advance(h, now); /* a quiet thread's old counts are not the last
                            minute's */
        for (int g = 0; g < 2; g++) {
            merge(keys, &nk, cap, &h->keys[g]);
            merge(rules, &nr, cap, &h->rules[g]);
        }
        sv_hist_sum_add(history, &h->history);
        pthread_mutex_unlock(&h->lock);
    }
    json_t *r = json_pack("{s:I,s:o,s:o,s:o}", "window_s",
                          (json_int_t)(2 * HOT_GEN_NS / SL_NS_PER_SEC),
                          "hot_keys", top(keys, nk, n_top, 1), "hot_rules",
                          top(rules, nr, n_top, 0), "history",
                          sv_hist_sum_json(history));
    free(keys);
    free(rules);
    return r;
}
