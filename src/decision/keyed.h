/*
 * keyed.h - the fixed tables of a thread's negative cache and leases
 * (negative_cache.c, lease.c): allocated once at their budget and never
 * grown, entries of (limit, key) in buckets of SD_KEYED_WAYS picked by a
 * keyed SipHash, so that nobody can aim keys at one bucket without the
 * thread's secret.  An entry holds its whole key, compared byte for byte:
 * a collision is a miss, never another key's entry.
 */
#ifndef SD_KEYED_H
#define SD_KEYED_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"

#define SD_KEYED_WAYS 4

typedef struct sd_keyed {
    size_t mask;     /* buckets - 1, a power of two less one */
    uint64_t k0, k1; /* the hash's secret */
} sd_keyed;

/* The buckets of entries of entry_size bytes that bytes hold (the
 * largest power of two, at least one), and the secret drawn: 0 with
 * *buckets, or -1 when getrandom() fails. */
static inline int sd_keyed_init(sd_keyed *k, size_t bytes, size_t entry_size,
                                size_t *buckets)
{
    size_t n = 1;
    while (n * 2 * SD_KEYED_WAYS * entry_size <= bytes)
        n *= 2;
    k->mask = n - 1;
    *buckets = n;
    return getrandom(&k->k0, sizeof(k->k0), 0) == (ssize_t)sizeof(k->k0) &&
                   getrandom(&k->k1, sizeof(k->k1), 0) == (ssize_t)sizeof(k->k1)
               ? 0
               : -1;
}

/* The keyed hash of item, its low bit set (0 marks an empty entry). */
static inline uint64_t sd_keyed_hash(const sd_keyed *k,
                                     const sl_check_item *item)
{
    return sl__siphash13(k->k0, k->k1, item->limit->ident, item->key,
                         item->key_len) |
           1;
}

/* The index of the first entry of hash's bucket. */
static inline size_t sd_keyed_bucket(const sd_keyed *k, uint64_t hash)
{
    return ((hash >> 1) & k->mask) * SD_KEYED_WAYS;
}

/* Whether an entry of (hash, ident, key) is item's. */
static inline int sd_keyed_same(uint64_t hash, uint64_t ident, const char *key,
                                size_t key_len, uint64_t item_hash,
                                const sl_check_item *item)
{
    return hash == item_hash && ident == item->limit->ident &&
           key_len == item->key_len &&
           (key_len == 0 || memcmp(key, item->key, key_len) == 0);
}

#endif
