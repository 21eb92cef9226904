/*
 * siphash.c - SipHash-1-3 (Aumasson and Bernstein; one compression round,
 * three finalisation rounds, as Python and Rust use for hash tables).
 *
 * Keys come from clients, so a fixed hash would let an attacker send keys
 * that all land in one probe run and turn every decision into a scan.  A
 * keyed PRF with a random per-store seed makes that infeasible.  The limit's
 * identity is hashed as an 8-byte prefix so that a key under two limits
 * gets two independent hashes without copying the key.
 */
#include <string.h>

#include "internal.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                               \
    do {                                                                       \
        v0 += v1;                                                              \
        v1 = ROTL(v1, 13);                                                     \
        v1 ^= v0;                                                              \
        v0 = ROTL(v0, 32);                                                     \
        v2 += v3;                                                              \
        v3 = ROTL(v3, 16);                                                     \
        v3 ^= v2;                                                              \
        v0 += v3;                                                              \
        v3 = ROTL(v3, 21);                                                     \
        v3 ^= v0;                                                              \
        v2 += v1;                                                              \
        v1 = ROTL(v1, 17);                                                     \
        v1 ^= v2;                                                              \
        v2 = ROTL(v2, 32);                                                     \
    } while (0)

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

uint64_t sl__siphash13(uint64_t k0, uint64_t k1, uint64_t prefix,
                       const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    uint64_t v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    uint64_t v3 = k1 ^ UINT64_C(0x7465646279746573);
    uint64_t total = (uint64_t)len + 8, m, tail = 0;
    size_t i;

    v3 ^= prefix;
    SIPROUND;
    v0 ^= prefix;
    for (i = 0; i + 8 <= len; i += 8) {
        m = load_le64(p + i);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; i + j < len; j++)
        tail |= (uint64_t)p[i + j] << (8 * j);
    m = tail | (total << 56);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
