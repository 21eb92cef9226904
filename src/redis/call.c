/*
 * call.c - one decision as script calls: the arguments of
 * src/redis/lua/main.lua made from items, costs and the store's key
 * space, and the script's reply read back into decisions.  A call is one
 * part per Cluster slot of its keys (one in all on a plain store), each
 * a script call of its own.
 *
 * The store's blocking checks and the daemon's asynchronous ones are both
 * built and read here, so a call decides the same whoever sends it.  The
 * semantics live in the Lua files, which mirror src/core/ line for line.
 */
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "internal.h"
#include "redis/redis_proto.h"

/* The Lua script's numbers are doubles: see docs/stores.md for why these
 * bounds make every intermediate an integer below 2^53. */
#define EXACT_BOUND (INT64_C(1) << 52)

enum {
    CALL_ARGS = 3, /* now (s, ns), the head, as main.lua reads them */
    NUM_LEN = 24,  /* an int64 in decimal, NUL included */
    /* algorithm L P B step flags t_num t_den, and for an override of a
     * schedule its base's L (schedule.lua) */
    SPEC_FIELDS = 9,
    /* The head: the extra TTL and record, then per item its limit and
     * cost, each field with the separator after it. */
    HEAD_LEN = 2 * NUM_LEN + SL_MAX_ITEMS * (SPEC_FIELDS + 1) * NUM_LEN,
    IDENT_HEX = 16, /* the limit's identity in a key name */
    MAX_ARGS = 3 + SL_MAX_ITEMS + CALL_ARGS,
};

/* ---- what the script can decide, and under which key ---- */

static int is_bucket(sl_algorithm alg)
{
    return alg == SL_TOKEN_BUCKET || alg == SL_GCRA || alg == SL_LEAKY_BUCKET;
}

/* A limit's numbers in ticks of q ns (main.lua, "Ticks"): its period
 * and step, and T = t_num / t_den reduced. */
typedef struct ticked {
    int k; /* q = 10^k */
    int64_t q, period, step, t_num, t_den;
} ticked;

static const int64_t tick_ns[] = {1,       10,       100,       1000,
                                10000,   100000,   1000000,   10000000,
                                100000000, 1000000000};

/* Whether c's numbers in ticks of 10^k ns are whole and keep every
 * intermediate of the script an exact double; then *t holds them. */
static int ticks_fit(const sl_limit_config *c, int64_t t_num, int64_t t_den,
                     int k, ticked *t)
{
    int64_t q = tick_ns[k];
    if (c->period % q != 0 || c->step % q != 0 || c->period / q > EXACT_BOUND)
        return 0;
    int64_t g = sl__gcd64(t_num, q);
    t->k = k;
    t->q = q;
    t->period = c->period / q;
    t->step = c->step / q;
    t->t_num = t_num / g;
    if ((sl__i128)t_den * (q / g) > EXACT_BOUND)
        return 0;
    t->t_den = t_den * (q / g);
    return !is_bucket(c->algorithm) ||
           (sl__i128)c->burst * t->t_num <= EXACT_BOUND;
}

/* The tick of a limit: the least 10^k ns in which its base's numbers fit
 * (so every limit sharing the base's state keeps one time scale, whatever
 * an override does to L), then the limit's own numbers in it.  0, or
 * SL_ERANGE when none fits (docs/stores.md, "Exactness"). */
static int tick_of(const sl_limit *lim, ticked *t, char *errbuf, size_t errlen)
{
    const sl_limit_config *b = &lim->base;
    int64_t bg = sl__gcd64(b->period, b->limit);
    int k = 0;
    while (k < 10 && !ticks_fit(b, b->period / bg, b->limit / bg, k, t))
        k++;
    if (k == 10 || !ticks_fit(&lim->cfg, lim->t_num, lim->t_den, k, t)) {
        if (is_bucket(lim->cfg.algorithm))
            sl__set_err(errbuf, errlen,
                        "limit out of range for the redis store: period "
                        "'%lld' ns, burst %lld: no tick of 1 ns to 1 s keeps "
                        "its times below 2^52",
                        (long long)lim->cfg.period, (long long)lim->cfg.burst);
        else
            sl__set_err(errbuf, errlen,
                        "limit out of range for the redis store: period "
                        "'%lld' ns: no tick of 1 ns to 1 s keeps its times "
                        "below 2^52",
                        (long long)lim->cfg.period);
        return SL_ERANGE;
    }
    return 0;
}

int sl__redis_limit_fits(const sl_limit *lim, char *errbuf, size_t errlen)
{
    ticked t;
    return tick_of(lim, &t, errbuf, errlen);
}

/* The proof per algorithm is docs/stores.md, "The negative cache": every
 * algorithm's retry_after is the first ns its refused cost fits, absent
 * arrivals, and arrivals only push that later; a refusal writes nothing
 * that a later call could see.  Two exceptions: a sliding_log that logs
 * rejected attempts (a refusal consumes), and a limit decided in ticks of
 * more than 1 ns (its times are within two ticks, possibly after the
 * first that fits). */
int sl__redis_refusal_lasts(const sl_limit *lim)
{
    ticked t;
    if (lim->cfg.algorithm == SL_SLIDING_LOG &&
        (lim->cfg.flags & SL_LOG_REJECTED))
        return 0;
    return tick_of(lim, &t, NULL, 0) == 0 && t.q == 1;
}

/* The hash tag's escape byte: '}' (which would end the tag early, so
 * that a client could pick a key's slot, docs/stores.md) and the escape
 * itself are written as it and two hex digits inside the braces. */
#define TAG_ESCAPE '\\'

/* The most bytes key_name() writes for a key of key_len bytes. */
static size_t key_name_max(const sl__redis_keyspace *ks, size_t key_len)
{
    return strlen(ks->prefix) + IDENT_HEX + 3 + 3 * key_len;
}

/* tag's bytes at out, '}' and TAG_ESCAPE escaped: the length written. */
static size_t put_tag(char *out, const char *tag, size_t len)
{
    size_t n = 0;
    if (memchr(tag, '}', len) == NULL && memchr(tag, TAG_ESCAPE, len) == NULL) {
        memcpy(out, tag, len); /* the usual key: as it is */
        return len;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)tag[i];
        if (b == '}' || b == TAG_ESCAPE) {
            out[n++] = TAG_ESCAPE;
            out[n++] = "0123456789abcdef"[b >> 4];
            out[n++] = "0123456789abcdef"[b & 15];
        } else {
            out[n++] = (char)b;
        }
    }
    return n;
}

/* The key of an item: prefix, the limit's identity, then the caller's key
 * with its hash tag in braces, so that every limit of one client key lands
 * in one slot (docs/stores.md): "{key}", or with a tag delimiter d,
 * "{tag}rest" where tag is the key before its first d and rest the d and
 * what follows.  Inside the braces '}' and TAG_ESCAPE are escaped, so the
 * tag is always the whole of it.  Names stay distinct: the escaping is
 * one to one, the tag has no d and the rest is empty or starts with one.
 * Returns the length written to out, which has room for key_name_max(). */
size_t sl__redis_key_name(const sl__redis_keyspace *ks, uint64_t ident,
                          const void *key, size_t key_len, char *out)
{
    size_t n = strlen(ks->prefix), tag = key_len;
    const char *d;
    memcpy(out, ks->prefix, n);
    for (int i = IDENT_HEX - 1; i >= 0; i--)
        out[n++] = "0123456789abcdef"[(ident >> (4 * i)) & 15];
    out[n++] = ':';
    out[n++] = '{';
    if (ks->tag_delimiter != 0 && key_len > 0 &&
        (d = memchr(key, ks->tag_delimiter, key_len)) != NULL)
        tag = (size_t)(d - (const char *)key);
    if (tag > 0)
        n += put_tag(out + n, key, tag);
    out[n++] = '}';
    if (key_len > tag)
        memcpy(out + n, (const char *)key + tag, key_len - tag);
    return n + key_len - tag;
}

size_t sl__redis_key_name_max(const sl__redis_keyspace *ks, size_t key_len)
{
    return key_name_max(ks, key_len);
}

size_t sl__redis_key_ident_at(const sl__redis_keyspace *ks)
{
    return strlen(ks->prefix) + IDENT_HEX + 1;
}

static size_t key_name(const sl__redis_keyspace *ks, const sl_check_item *it,
                       char *out)
{
    return sl__redis_key_name(ks, it->limit->ident, it->key, it->key_len, out);
}

/* ---- the arguments of one script call ---- */

/* What reading an item's decision needs of its limit and cost: L, and
 * for a bucket's one-integer reply (fast.lua) B, T and the cost. */
typedef struct item_numbers {
    int64_t limit, burst, t_num, t_den, cost;
    sl__redis_ask ask; /* a lease asked ("c+S", lease.lua); units 0: none */
    int64_t tick;      /* ns per tick of the reply's durations */
    int bucket;        /* token_bucket or gcra of its own numbers */
} item_numbers;

/* The arguments of one call, pointing into bufs it owns. */
typedef struct call_args {
    int argc;
    const char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    char nums[3][NUM_LEN]; /* numkeys, now (s, ns) */
    int nnums;
    /* Everything of the call but its keys and now, as one argument
     * (main.lua's head_of): the script parses a head once and keeps it,
     * and most calls of a server share a few heads. */
    char head[HEAD_LEN];
    char *keys;                       /* malloc'd: every key name */
    size_t n;                         /* items */
    item_numbers items[SL_MAX_ITEMS]; /* for reading their decisions */
} call_args;

static void push_arg(call_args *a, const char *s, size_t len)
{
    a->argv[a->argc] = s;
    a->lens[a->argc++] = len;
}

/* v in decimal at s: its length.  By hand: snprintf cost as much as the
 * rest of building a call. */
static size_t put_num(char *s, int64_t v)
{
    char digits[NUM_LEN];
    size_t i = sizeof(digits), len;
    /* Through unsigned, so INT64_MIN negates without overflow. */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        digits[--i] = '-';
    len = sizeof(digits) - i;
    memcpy(s, digits + i, len);
    return len;
}

/* The same for an unsigned 64-bit v (a holder's id). */
static size_t put_unum(char *s, uint64_t u)
{
    char digits[NUM_LEN];
    size_t i = sizeof(digits), len;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    len = sizeof(digits) - i;
    memcpy(s, digits + i, len);
    return len;
}

static void push_num(call_args *a, int64_t v)
{
    char *s = a->nums[a->nnums++];
    push_arg(a, s, put_num(s, v));
}

/* A limit's fields at s, space-separated (all >= 0: sl_limit_new), its
 * times in ticks t: the length written. */
static size_t put_spec(char *s, const sl_limit *lim, const ticked *t)
{
    const int64_t f[SPEC_FIELDS] = {
        lim->cfg.algorithm, lim->cfg.limit, t->period,
        lim->cfg.burst,     t->step,        (int64_t)lim->cfg.flags,
        t->t_num,           t->t_den,       lim->base.limit};
    int fields = lim->override && is_bucket(lim->cfg.algorithm)
                     ? SPEC_FIELDS
                     : SPEC_FIELDS - 1;
    size_t len = 0;
    for (int i = 0; i < fields; i++) {
        if (i > 0)
            s[len++] = ' ';
        len += put_num(s + len, f[i]);
        if (i == 0 && t->k > 0) {
            s[len++] = '/';
            s[len++] = (char)('0' + t->k);
        }
    }
    return len;
}

/* The head: "ttl,record,spec,cost[,spec,cost...]" (main.lua), a cost
 * "c+S" for an item that asks a lease of S, "c+S+M+H" for a leased
 * bucket's; such a bucket's spec is "@p spec" on every call, p the index
 * (from 1) of the ':' after the identity in its keys' names, where
 * lease_bucket.lua names their leases' hashes. */
static void push_head(call_args *a, const sl__redis_keyspace *ks,
                      const sl_check_item *items, const int64_t *costs,
                      const ticked *ticks, size_t n, int record)
{
    char *s = a->head;
    size_t len = put_num(s, ks->extra_ttl_ms);
    s[len++] = ',';
    s[len++] = record ? '1' : '0';
    for (size_t i = 0; i < n; i++) {
        const sl__redis_ask *ask = &a->items[i].ask;
        int leased = sl__redis_leased_bucket(items[i].limit);
        s[len++] = ',';
        if (leased) {
            s[len++] = '@';
            len += put_num(s + len, (int64_t)sl__redis_key_ident_at(ks));
            s[len++] = ' ';
        }
        len += put_spec(s + len, items[i].limit, &ticks[i]);
        s[len++] = ',';
        len += put_num(s + len, costs[i]);
        if (ask->units > 0) {
            s[len++] = '+';
            len += put_num(s + len, ask->units);
        }
        if (ask->units > 0 && leased) {
            s[len++] = '+';
            len += put_num(s + len, ask->life_ms);
            s[len++] = '+';
            len += put_unum(s + len, ask->holder);
        }
    }
    push_arg(a, s, len);
}

/* The first two arguments: how the server is to find the script. */
static void use_sha(call_args *a, const char *ref)
{
    a->argv[0] = sl__redis_script_command(ref, &a->argv[1], &a->lens[1]);
    a->lens[0] = strlen(a->argv[0]);
}

static int build_args(const sl__redis_keyspace *ks, call_args *a,
                      const sl_check_item *items, const int64_t *costs,
                      const sl__redis_ask *asks, size_t n, sl_nanos now,
                      int record, const char *sha)
{
    size_t total = 0, at = 0;

    ticked ticks[SL_MAX_ITEMS];
    for (size_t i = 0; i < n; i++) {
        total += key_name_max(ks, items[i].key_len);
        if (tick_of(items[i].limit, &ticks[i], NULL, 0) != 0)
            return SL_ERANGE; /* prepare_call() checked it */
    }
    if ((a->keys = malloc(total ? total : 1)) == NULL)
        return SL_ENOMEM;
    a->nnums = 0;
    a->n = n;
    for (size_t i = 0; i < n; i++) {
        const sl_limit *lim = items[i].limit;
        a->items[i] =
            (item_numbers){.limit = lim->cfg.limit,
                           .burst = lim->cfg.burst,
                           .t_num = ticks[i].t_num,
                           .t_den = ticks[i].t_den,
                           .tick = ticks[i].q,
                           .cost = costs[i],
                           .ask = asks[i],
                           .bucket = (lim->cfg.algorithm == SL_TOKEN_BUCKET ||
                                      lim->cfg.algorithm == SL_GCRA) &&
                                     !lim->override};
    }
    a->argc = 2;
    use_sha(a, sha);
    push_num(a, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t len = key_name(ks, &items[i], a->keys + at);
        push_arg(a, a->keys + at, len);
        at += len;
    }
    if (ks->use_server_time) {
        push_arg(a, "", 0);
        push_arg(a, "", 0);
    } else {
        push_num(a, now / SL_NS_PER_SEC);
        push_num(a, now % SL_NS_PER_SEC);
    }
    push_head(a, ks, items, costs, ticks, n, record);
    return 0;
}

/* ---- calls and their parts ---- */

typedef struct call_part {
    call_args a;
    int slot;                     /* -1 on a plain store */
    size_t item_of[SL_MAX_ITEMS]; /* the call's index of the part's item j */
} call_part;

struct sl__redis_call {
    size_t n, n_parts;
    call_part *parts[SL_MAX_ITEMS];
    sl_decision each[SL_MAX_ITEMS]; /* filled by each part's reply */
    sl__redis_grant grants[SL_MAX_ITEMS]; /* likewise; 0 units: none */
};

/* Each item's slot; keys that share a hash tag share a slot. */
static int item_slots(const sl__redis_keyspace *ks, const sl_check_item *items,
                      size_t n, int *slot)
{
    for (size_t i = 0; i < n; i++) {
        char *name = malloc(key_name_max(ks, items[i].key_len));
        if (name == NULL)
            return SL_ENOMEM;
        slot[i] = sl__redis_key_slot(name, key_name(ks, &items[i], name));
        free(name);
    }
    return 0;
}

/* Validates the items against the script's bounds and builds the call's
 * parts, in ascending slot order. */
static int prepare_call(const sl__redis_keyspace *ks, sl__redis_call *c,
                        const sl_check_item *items, const int64_t *costs,
                        const sl__redis_ask *asks, size_t n, sl_nanos now,
                        int record, const char *sha, char *errbuf,
                        size_t errlen)
{
    int slot[SL_MAX_ITEMS], err = 0;

    for (size_t i = 0; i < n && !err; i++) {
        ticked t;
        err = tick_of(items[i].limit, &t, errbuf, errlen);
        /* The same limit and key twice: one key, decided twice. */
        for (size_t j = 0; j < i && !err; j++)
            if (items[j].limit->ident == items[i].limit->ident &&
                items[j].key_len == items[i].key_len &&
                (items[i].key_len == 0 ||
                 memcmp(items[j].key, items[i].key, items[i].key_len) == 0)) {
                sl__set_err(errbuf, errlen,
                            "the same limit and key twice in one call");
                err = SL_EINVAL;
            }
    }
    if (err)
        return err;
    c->n = n;
    c->n_parts = 0;
    if (!ks->cluster)
        memset(slot, 0xff, sizeof(slot)); /* -1: one part */
    else if ((err = item_slots(ks, items, n, slot)) != 0)
        return err;
    for (size_t done = 0; done < n;) {
        /* The next part: the smallest slot not yet taken. */
        int next = INT32_MAX;
        sl_check_item sub[SL_MAX_ITEMS];
        int64_t sub_costs[SL_MAX_ITEMS];
        sl__redis_ask sub_asks[SL_MAX_ITEMS];
        call_part *p;
        for (size_t i = 0; i < n; i++)
            if (slot[i] != INT32_MAX && slot[i] < next)
                next = slot[i];
        if ((p = malloc(sizeof(*p))) == NULL)
            return SL_ENOMEM;
        p->a.keys = NULL;
        p->a.n = 0;
        p->slot = next;
        c->parts[c->n_parts++] = p;
        for (size_t i = 0; i < n; i++)
            if (slot[i] == next) {
                p->item_of[p->a.n] = i;
                sub[p->a.n] = items[i];
                sub_asks[p->a.n] = asks != NULL ? asks[i] : (sl__redis_ask){0};
                sub_costs[p->a.n++] = costs[i];
                slot[i] = INT32_MAX;
                done++;
            }
        if ((err = build_args(ks, &p->a, sub, sub_costs, sub_asks, p->a.n, now,
                              record, sha)) != 0)
            return err;
    }
    return 0;
}

int sl__redis_call_new(const sl__redis_keyspace *ks, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now,
                       unsigned flags, const char *sha, sl__redis_call **out,
                       char *errbuf, size_t errlen)
{
    return sl__redis_call_new_asking(ks, items, costs, NULL, n, now, flags, sha,
                                     out, errbuf, errlen);
}

int sl__redis_leased_bucket(const sl_limit *lim)
{
    ticked t;
    return lim->leased && is_bucket(lim->cfg.algorithm) &&
           lim->cfg.algorithm != SL_LEAKY_BUCKET && lim->t_den > 0 &&
           tick_of(lim, &t, NULL, 0) == 0 && t.q == 1;
}

int sl__redis_may_lease(const sl_limit *lim)
{
    ticked t;
    if (lim->cfg.algorithm != SL_FIXED_WINDOW)
        return sl__redis_leased_bucket(lim) && !lim->override;
    return tick_of(lim, &t, NULL, 0) == 0 && t.q == 1;
}

int sl__redis_call_new_asking(const sl__redis_keyspace *ks,
                              const sl_check_item *items, const int64_t *costs,
                              const sl__redis_ask *asks, size_t n, sl_nanos now,
                              unsigned flags, const char *sha,
                              sl__redis_call **out, char *errbuf, size_t errlen)
{
    sl__redis_call *c;
    int err;

    sl__set_err(errbuf, errlen, "%s", "");
    for (size_t i = 0; asks != NULL && i < n; i++)
        if (asks[i].units < 0 || asks[i].units > SL_MAX_COUNT ||
            (asks[i].units > 0 &&
             ((flags & SL_RECORD) || !sl__redis_may_lease(items[i].limit) ||
              (sl__redis_leased_bucket(items[i].limit) &&
               (asks[i].life_ms < 1 || asks[i].life_ms > SL_MAX_COUNT))))) {
            sl__set_err(errbuf, errlen, "invalid argument");
            return SL_EINVAL;
        }
    if (ks == NULL || out == NULL || (flags & ~SL_RECORD) != 0 ||
        !sl__redis_script_ref_ok(sha)) {
        sl__set_err(errbuf, errlen, "invalid argument");
        return SL_EINVAL;
    }
    if ((err = sl__check_input(ks->max_key_len, items, n, costs, now)) != 0) {
        sl__set_err(errbuf, errlen, "%s", sl_strerror(err));
        return err;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        sl__set_err(errbuf, errlen, "out of memory");
        return SL_ENOMEM;
    }
    err = prepare_call(ks, c, items, costs, asks, n, now,
                       (flags & SL_RECORD) != 0, sha, errbuf, errlen);
    if (err != 0) {
        if (err == SL_ENOMEM)
            sl__set_err(errbuf, errlen, "out of memory");
        sl__redis_call_free(c);
        return err;
    }
    *out = c;
    return 0;
}

void sl__redis_call_free(sl__redis_call *call)
{
    for (size_t p = 0; call != NULL && p < call->n_parts; p++) {
        free(call->parts[p]->a.keys);
        free(call->parts[p]);
    }
    free(call);
}

size_t sl__redis_call_parts(const sl__redis_call *call)
{
    return call->n_parts;
}

int sl__redis_call_part_slot(const sl__redis_call *call, size_t part)
{
    return call->parts[part]->slot;
}

int sl__redis_call_part_argv(const sl__redis_call *call, size_t part,
                             const char *const **argv, const size_t **lens)
{
    const call_args *a = &call->parts[part]->a;
    *argv = a->argv;
    *lens = a->lens;
    return a->argc;
}

void sl__redis_call_part_use_sha(sl__redis_call *call, size_t part,
                                 const char *sha)
{
    use_sha(&call->parts[part]->a, sha);
}

void sl__redis_call_part_use_eval(sl__redis_call *call, size_t part)
{
    use_sha(&call->parts[part]->a, NULL);
}

int sl__redis_call_argv(const sl__redis_call *call, const char *const **argv,
                        const size_t **lens)
{
    return sl__redis_call_part_argv(call, 0, argv, lens);
}

void sl__redis_call_use_eval(sl__redis_call *call)
{
    sl__redis_call_part_use_eval(call, 0);
}

/* ---- replies ---- */

/* Maps a script's error reply to a code: its first word names it. */
static int reply_error(const redisReply *r, char *err, size_t errlen)
{
    sl__set_err(err, errlen, "redis: %s", r->str);
    if (strncmp(r->str, "ERANGE ", 7) == 0)
        return SL_ERANGE;
    if (strncmp(r->str, "EINVAL ", 7) == 0)
        return SL_EINVAL;
    return SL_ESTORE;
}

/* A bucket's decision from fast.lua's one integer x: the lead in ticks
 * after it, x when admitted, -x - 1 when refused.  The fields are the
 * lead's as schedule.lua (and src/core/schedule.h) report them: the
 * units left, the time until the lead is gone, and a refusal's wait
 * until lead + cost * T fits in B * T (-1: the cost is over B).  0, or
 * -1 for a lead no decision leaves. */
static int bucket_decision(const item_numbers *it, int64_t x, sl_decision *d)
{
    int64_t most = it->burst * it->t_num; /* <= 2^52: check_bounds() */
    int64_t lead = x >= 0 ? x : -(x + 1);
    if (x < -most - 1 || x > most)
        return -1;
    /* A refusal is of a request that did not fit, lead + cost * T past
     * B * T, or of a cost over B; any other is no decision (and its wait
     * would come out negative). */
    if (x < 0 && it->cost <= it->burst && lead + it->cost * it->t_num <= most)
        return -1;
    d->allowed = x >= 0;
    d->limit = it->limit;
    d->remaining = it->burst - sl__ceil_div64(lead, it->t_num);
    d->reset_after = sl__ceil_div64(lead, it->t_den);
    d->retry_after = 0;
    if (x < 0)
        d->retry_after =
            it->cost > it->burst
                ? -1
                : sl__ceil_div64(lead + it->cost * it->t_num - most, it->t_den);
    d->delay = 0;
    return 0;
}

/* A decision's durations from ticks of q ns to ns, saturating; a wait of
 * -1 (never) stays. */
static void in_ns(sl_decision *d, int64_t q)
{
    if (q == 1)
        return;
    d->reset_after = sl__clamp64((sl__i128)d->reset_after * q);
    if (d->retry_after > 0)
        d->retry_after = sl__clamp64((sl__i128)d->retry_after * q);
    d->delay = sl__clamp64((sl__i128)d->delay * q);
}

/* Reads the script's reply: 5 integers per item and 3 more for one that
 * asked a lease (into grants), or for one bucket item fast.lua's one
 * integer. */
static int read_decisions(const redisReply *r, const item_numbers *items,
                          size_t n, sl_decision *each, sl__redis_grant *grants,
                          char *err, size_t errlen)
{
    size_t want = 5 * n, at = 0;
    for (size_t i = 0; i < n; i++) {
        grants[i] = (sl__redis_grant){0}; /* whatever the reply's shape */
        want += items[i].ask.units > 0 ? 3 : 0;
    }
    if (r->type == REDIS_REPLY_ERROR)
        return reply_error(r, err, errlen);
    if (r->type == REDIS_REPLY_INTEGER && n == 1 && items[0].bucket &&
        items[0].tick == 1 &&
        bucket_decision(&items[0], r->integer, &each[0]) == 0)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want)
        goto bad;
    for (size_t i = 0; i < want; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            goto bad;
    for (size_t i = 0; i < n; i++) {
        redisReply **e = &r->element[at];
        at += 5;
        if (items[i].ask.units > 0) {
            /* No more than asked, and a window's start (s, ns) that is
             * one. */
            if ((uint64_t)e[5]->integer > (uint64_t)items[i].ask.units ||
                e[6]->integer < 0 || (uint64_t)e[7]->integer >= 1000000000u)
                goto bad;
            grants[i] = (sl__redis_grant){.units = e[5]->integer,
                                          .window_s = e[6]->integer,
                                          .window_ns = e[7]->integer};
            at += 3;
        }
        /* What no decision reports is not passed on: a server that is
         * not Redis running our script (or a broken one) gets an error,
         * not headers with a negative count or a wait that overflows. */
        if ((uint64_t)e[0]->integer > 1 ||
            (uint64_t)e[1]->integer > (uint64_t)SL_MAX_COUNT ||
            e[2]->integer < 0 || e[3]->integer < -1 || e[4]->integer < 0)
            goto bad;
        each[i].allowed = e[0]->integer != 0;
        each[i].limit = items[i].limit;
        each[i].remaining = e[1]->integer;
        each[i].reset_after = e[2]->integer;
        each[i].retry_after = e[3]->integer;
        each[i].delay = e[4]->integer;
        in_ns(&each[i], items[i].tick);
    }
    return 0;
bad:
    sl__set_err(err, errlen, "redis: unexpected reply");
    return SL_ESTORE;
}

int sl__redis_call_read_part(sl__redis_call *call, size_t part,
                             const redisReply *reply, char *errbuf,
                             size_t errlen)
{
    const call_part *p = call->parts[part];
    sl_decision got[SL_MAX_ITEMS];
    sl__redis_grant grants[SL_MAX_ITEMS];
    int rc;

    sl__set_err(errbuf, errlen, "%s", "");
    switch (sl__redis_reply_kind(reply, NULL)) {
    case SL__REDIS_REPLY_NONE:
        sl__set_err(errbuf, errlen, "redis: no reply");
        return SL_ESTORE;
    case SL__REDIS_REPLY_NOSCRIPT:
        return 1;
    }
    if ((rc = read_decisions(reply, p->a.items, p->a.n, got, grants, errbuf,
                             errlen)) != 0)
        return rc;
    for (size_t j = 0; j < p->a.n; j++) {
        call->each[p->item_of[j]] = got[j];
        call->grants[p->item_of[j]] = grants[j];
    }
    return 0;
}

void sl__redis_call_take_grants(sl__redis_call *call, sl__redis_grant *out)
{
    memcpy(out, call->grants, call->n * sizeof(*out));
    memset(call->grants, 0, call->n * sizeof(*out));
}

void sl__redis_call_result(const sl__redis_call *call, sl_decision *each,
                           sl_decision *overall)
{
    if (overall != NULL)
        sl_decisions_combine(call->each, call->n, overall);
    for (size_t i = 0; each != NULL && i < call->n; i++)
        each[i] = call->each[i];
}

int sl__redis_call_read(const sl__redis_call *call, const redisReply *reply,
                        sl_decision *each, sl_decision *overall, char *errbuf,
                        size_t errlen)
{
    /* A one-part call: its reply's decisions are the result. */
    sl__redis_call *c = (sl__redis_call *)call;
    int err;
    if (call->n_parts != 1) {
        sl__set_err(errbuf, errlen,
                    "a call of %zu parts (Redis Cluster): read each with "
                    "sl__redis_call_read_part",
                    call->n_parts);
        return SL_EINVAL;
    }
    err = sl__redis_call_read_part(c, 0, reply, errbuf, errlen);
    if (err == 0)
        sl__redis_call_result(call, each, overall);
    return err;
}
