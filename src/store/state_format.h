/*
 * state_format.h - the memory store's state file (docs/stores.md, "State
 * file"), shared by its writer (memory_snapshot.c) and its reader
 * (memory_restore.c): the layout's constants and little-endian codecs.
 *
 * Every integer is little-endian whatever the host, so a file is the
 * same bytes on every machine; the byte-order mark is there to name the
 * problem when a file was written some other way.  Layout (version 1):
 *
 *   header, 128 bytes:
 *     0  "SLUICEST"    8  version      12  byte-order mark 0x01020304
 *    16  header size  20  shards (256)  24  the key hash's 4 secrets
 *    56  epoch (ns of tick 0, INT64_MIN: no decision yet)
 *    64  saved now    72  saved wall clock   80  keys   88  log events
 *    96  limits      100  flags (0)   104  the file's size
 *   112  zero        124  CRC-32 of bytes 0..123
 *   limits: one u64 identity each, sorted, then their CRC-32;
 *   one section per shard, in order: narrow keys (u32), wide keys (u32),
 *     log events (u64); the narrow slots, 24 bytes {hash, packed state,
 *     expiry tick, last-use tick}; the wide slots, 32 bytes {hash, w0,
 *     w1, expiry, last use}, where a slot flagged as owning a log holds
 *     its event count in w0; the logs' events, 16 bytes {at, cost},
 *     oldest first, slot by slot; then the CRC-32 of the section.
 */
#ifndef SL_STATE_FORMAT_H
#define SL_STATE_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "sluice.h"

#define SL__STATE_MAGIC "SLUICEST"
#define SL__STATE_BOM UINT32_C(0x01020304)

enum {
    SL__STATE_VERSION = 1,
    SL__STATE_HEADER = 128,
    SL__STATE_SECTION_HEAD = 16,
    SL__STATE_NSLOT = 24,
    SL__STATE_WSLOT = 32,
    SL__STATE_EVENT = 16,
    /* Header offsets. */
    SL__STH_VERSION = 8,
    SL__STH_BOM = 12,
    SL__STH_SIZE = 16,
    SL__STH_SHARDS = 20,
    SL__STH_SECRETS = 24,
    SL__STH_EPOCH = 56,
    SL__STH_NOW = 64,
    SL__STH_WALL = 72,
    SL__STH_KEYS = 80,
    SL__STH_EVENTS = 88,
    SL__STH_LIMITS = 96,
    SL__STH_FLAGS = 100,
    SL__STH_FILE_BYTES = 104,
    SL__STH_CRC = 124,
};

static inline void sl__put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void sl__put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t sl__get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t sl__get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* zlib's CRC-32 of n bytes, continuing from crc (0 to start). */
uint32_t sl__state_crc(uint32_t crc, const void *p, size_t n);

/* A save's or a load's options (sl_memory_save_options and
 * sl_memory_load_options have the same fields), checked and copied into
 * *o, defaults filled in (wall read): 0, or SL_EINVAL with a message. */
int sl__state_options(sl_memory_save_options *o, const void *opts,
                      const char *name, char *errbuf, size_t errlen);

/* Called by a save after each shard's copy, with the shard's lock
 * released: a test's view of a save in progress (it may make decisions
 * there, or wait for another thread's).  NULL but in tests, which set it
 * before the save starts and clear it after. */
extern void (*sl__state_shard_saved_cb)(void *arg, int shard);
extern void *sl__state_shard_saved_arg;

#endif
