/*
 * key_hash.h - the memory store's keyed hash of (limit identity, key bytes).
 *
 * The hash is on every decision's path, so it is a folded-multiply hash
 * in the manner of wyhash (Wang Yi) and rapidhash: two 64x64->128-bit
 * multiplies for a key of up to 16 bytes and one more per further 16
 * bytes, about 30 instructions for an 8-byte key where SipHash-1-3 took
 * 130.  SipHash remains the limit identity's hash (limit.c), which is
 * computed once per limit.
 *
 * Why keyed, and why this is enough.  Keys come from clients; a fixed
 * hash would let one send keys that all land in one shard and one probe
 * run.  The hash is keyed by four 64-bit secrets derived (by SipHash) from
 * the store's random 128-bit seed, and nothing derived from it is shown to
 * a client: not the hash, not the shard, not the slot.  To aim keys at one
 * shard an attacker must therefore predict a function of secrets it never
 * observes, except through the timing of its own requests.  This is the
 * defence Go's runtime map (its wyhash-derived memhash, per-map seed),
 * Zig's std.HashMap (wyhash) and Rust's foldhash rely on.  It is not a
 * cryptographic PRF: the known weaknesses of this construction (a
 * multiplicand that is 0, which makes the product forget the other) need
 * an input equal to a secret, a 2^-64 guess.  The store bounds what a
 * successful flood could do anyway: a shard holds at most its share of the
 * memory cap, so flooding one costs evictions there, not memory or
 * unbounded probe runs elsewhere (tests/test_store.c,
 * test_seed_defeats_keys_aimed_at_one_shard).
 *
 * Identity.  The 64-bit value is the key's identity in the table (the key
 * bytes are not kept), so distinct inputs must collide with probability
 * near 2^-64: the limit identity, each 8-byte half of the key, and the
 * length all enter a multiply with a secret, and the final fold mixes the
 * whole 128-bit product.
 */
#ifndef SL_KEY_HASH_H
#define SL_KEY_HASH_H

#include <stdint.h>
#include <string.h>

#include "internal.h"

typedef struct sl__key_hasher {
    uint64_t secret[4];
} sl__key_hasher;

/* The secrets from a store's seed: SipHash-1-3 under the seed of 0..3. */
static inline void sl__key_hasher_init(sl__key_hasher *h, uint64_t seed0,
                                       uint64_t seed1)
{
    for (int i = 0; i < 4; i++)
        h->secret[i] = sl__siphash13(seed0, seed1, (uint64_t)i, NULL, 0);
}

/* The low and high halves of a * b, xored: the fold of wyhash's mum. */
static inline uint64_t sl__fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static inline uint64_t sl__load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t sl__load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The hash of `prefix` (a limit's identity) and len bytes at data.  Loads
 * are native-endian: the value is only ever used inside this process. */
static inline uint64_t sl__key_hash(const sl__key_hasher *h, uint64_t prefix,
                                    const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t seed = sl__fold_mul(prefix ^ h->secret[0], h->secret[1]);
    uint64_t a, b;

    if (len <= 16) {
        if (len >= 4) {
            /* Two overlapping pairs of 4-byte loads cover 4 to 16 bytes. */
            size_t off = (len >> 3) << 2;
            a = (sl__load32(p) << 32) | sl__load32(p + off);
            b = (sl__load32(p + len - 4) << 32) | sl__load32(p + len - 4 - off);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) |
                p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t left = len;
        for (; left > 16; left -= 16, p += 16)
            seed = sl__fold_mul(sl__load64(p) ^ h->secret[2],
                                sl__load64(p + 8) ^ seed);
        /* The last 16 bytes, overlapping the previous block if need be. */
        a = sl__load64(p + left - 16);
        b = sl__load64(p + left - 8);
    }
    a ^= h->secret[1];
    b ^= seed;
    unsigned __int128 m = (unsigned __int128)a * b;
    return sl__fold_mul((uint64_t)m ^ h->secret[0] ^ len,
                        (uint64_t)(m >> 64) ^ h->secret[3]);
}

#endif /* SL_KEY_HASH_H */
