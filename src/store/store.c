/*
 * store.c - the public decision calls: check the caller's input once, here,
 * then hand over to the store's vtable.  Every store gets the same
 * validation and the same way of combining several limits.
 */
#include <stddef.h>

#include "internal.h"

/* sl__check_input (decision.c) for a store, which may be NULL. */
static int check_input(sl_store *store, const sl_check_item *items, size_t n,
                       const int64_t *costs, sl_nanos now)
{
    if (store == NULL)
        return SL_EINVAL;
    return sl__check_input(store->max_key_len, items, n, costs, now);
}

/* sl_check on a store without a check_one: one item of check_multi. */
__attribute__((noinline)) static int
check_by_multi(sl_store *store, const sl_limit *limit, const void *key,
               size_t key_len, int64_t cost, sl_nanos now, sl_decision *out)
{
    sl_check_item item = {limit, key, key_len};
    sl_decision d;
    int err = store->type->check_multi(store, &item, &cost, 1, now, 0, &d);

    if (err == 0)
        *out = d;
    return err;
}

/*
 * The hot path: sl__check_input's checks for one item, in its order (so
 * the same input gets the same error), written out so that they cost a
 * few compares (a negative time or cost is a huge unsigned one), then a
 * jump to the store's single-item call: sl_check keeps no frame of its
 * own.
 */
int sl_check(sl_store *store, const sl_limit *limit, const void *key,
             size_t key_len, int64_t cost, sl_nanos now, sl_decision *out)
{
    if (store == NULL || (uint64_t)now > (uint64_t)SL_MAX_TIME)
        return SL_EINVAL;
    if ((uint64_t)cost > (uint64_t)SL_MAX_COUNT)
        return SL_ECOST;
    if (limit == NULL || (key == NULL && key_len != 0))
        return SL_EINVAL;
    if (key_len > store->max_key_len)
        return SL_EKEYLEN;
    if (out == NULL)
        return SL_EINVAL;
    if (store->type->check_one != NULL)
        return store->type->check_one(store, limit, key, key_len, cost, now,
                                      out);
    return check_by_multi(store, limit, key, key_len, cost, now, out);
}

int sl_check_costs(sl_store *store, const sl_check_item *items,
                   const int64_t *costs, size_t n, sl_nanos now, unsigned flags,
                   sl_decision *each, sl_decision *overall)
{
    sl_decision local[SL_MAX_ITEMS];
    int err = check_input(store, items, n, costs, now);

    if (err == 0 && (overall == NULL || (flags & ~SL_RECORD) != 0))
        err = SL_EINVAL;
    if (err == 0)
        err = store->type->check_multi(store, items, costs, n, now,
                                       (flags & SL_RECORD) != 0, local);
    if (err != 0)
        return err;
    sl_decisions_combine(local, n, overall);
    for (size_t i = 0; each != NULL && i < n; i++)
        each[i] = local[i];
    return 0;
}

int sl_check_multi(sl_store *store, const sl_check_item *items, size_t n,
                   int64_t cost, sl_nanos now, sl_decision *each,
                   sl_decision *overall)
{
    int64_t costs[SL_MAX_ITEMS];

    if (n > SL_MAX_ITEMS)
        return SL_EINVAL;
    for (size_t i = 0; i < n; i++)
        costs[i] = cost;
    return sl_check_costs(store, items, costs, n, now, 0, each, overall);
}

int sl_check_batch(sl_store *store, const sl_limit *limit, const sl_key *keys,
                   size_t n, int64_t cost, sl_nanos now, sl_decision *out)
{
    sl_check_item item = {limit, NULL, 0};
    int err = check_input(store, &item, 1, &cost, now);

    if (err == 0 && ((keys == NULL || out == NULL) && n > 0))
        err = SL_EINVAL;
    for (size_t i = 0; err == 0 && i < n; i++) {
        if (keys[i].data == NULL && keys[i].len != 0)
            err = SL_EINVAL;
        else if (keys[i].len > store->max_key_len)
            err = SL_EKEYLEN;
    }
    if (err != 0 || n == 0)
        return err;
    return store->type->check_batch(store, limit, keys, n, cost, now, out);
}

size_t sl_store_sweep(sl_store *store, sl_nanos now, size_t max_slots)
{
    return store->type->sweep(store, now, max_slots);
}

void sl_store_get_stats(sl_store *store, sl_store_stats *out)
{
    store->type->stats(store, out);
}

void sl_store_last_error(sl_store *store, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    if (store != NULL && store->type->last_error != NULL)
        store->type->last_error(store, buf, len);
}

void sl_store_free(sl_store *store)
{
    if (store != NULL)
        store->type->destroy(store);
}
