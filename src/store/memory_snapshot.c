/*
 * memory_snapshot.c - sl_memory_store_save(): the memory store's state
 * written to a file (state_format.h), for a restart to load
 * (memory_restore.c).
 *
 * A save must not stop decisions, so it never holds more than one shard:
 * each shard is copied under its lock into a buffer (its slots as they
 * are, and its logs' events), released, and only then checksummed and
 * written.  A shard of the benchmark's 10M keys is some 40,000 slots, a
 * copy of a fraction of a millisecond (docs/benchmarks.md).  The copy of
 * one shard is consistent; the file is not one instant of the whole
 * store, which no decision could tell apart, since each decides on its
 * keys alone (a multi-item call spanning shards may be seen by the save
 * before it in one shard and after it in another: at worst one call's
 * worth of state).  Rejected: fork() and copy-on-write as Redis's
 * BGSAVE does, which stalls the process for the page-table copy (tens of
 * ms at gigabytes) and doubles the memory of every page written during
 * the save, in a library that does not own its process.
 *
 * The file appears whole or not at all: it is written to "path.tmp",
 * its header last (it holds the length and the totals), fsync'd, renamed
 * over path, and the directory fsync'd, so a crash at any point leaves
 * the previous save or this one, never a mix.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/eventlog.h"
#include "store/memory_store.h"
#include "store/state_format.h"

uint32_t sl__state_crc(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;
    /* zlib takes a uInt length: whole gigabytes at a time. */
    while (n > 0) {
        uInt part = n > (1u << 30) ? 1u << 30 : (uInt)n;
        crc = (uint32_t)crc32(crc, b, part);
        b += part;
        n -= part;
    }
    return crc;
}

/* The two options structs are one layout under two names. */
#define SAME_FIELD(f)                                                          \
    _Static_assert(offsetof(sl_memory_save_options, f) ==                      \
                       offsetof(sl_memory_load_options, f),                    \
                   "the options' " #f)
SAME_FIELD(wall);
SAME_FIELD(limits);
SAME_FIELD(n_limits);
_Static_assert(sizeof(sl_memory_save_options) == sizeof(sl_memory_load_options),
               "the options' size");

int sl__state_options(sl_memory_save_options *o, const void *opts,
                      const char *name, char *errbuf, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    if (opts != NULL &&
        sl__options_copy(o, sizeof(*o),
                         offsetof(sl_memory_save_options, n_limits) +
                             sizeof(o->n_limits),
                         opts, name, errbuf, errlen) != 0)
        return SL_EINVAL;
    if (o->n_limits > 0 && o->limits == NULL) {
        sl__set_err(errbuf, errlen, "n_limits without limits: '%zu'",
                    o->n_limits);
        return SL_EINVAL;
    }
    if (o->wall == 0)
        o->wall = sl_clock_realtime();
    return 0;
}

void (*sl__state_shard_saved_cb)(void *arg, int shard);
void *sl__state_shard_saved_arg;

static sl_nanos mono_now(void)
{
    return sl_clock_monotonic();
}

/* A growing byte buffer, reused from shard to shard. */
typedef struct out_buf {
    unsigned char *p;
    size_t len, cap;
} out_buf;

static int buf_reserve(out_buf *b, size_t cap)
{
    if (cap <= b->cap)
        return 0;
    unsigned char *n = realloc(b->p, cap);
    if (n == NULL)
        return SL_ENOMEM;
    /* Touched here, so that the copy under a shard's lock takes no page
     * fault. */
    memset(n + b->cap, 0, cap - b->cap);
    b->p = n;
    b->cap = cap;
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A shard as copied under its lock: both tables' slots as they are (a
 * wide slot that owns a log with the log's event count in w[0]), then the
 * logs' events, slot by slot.  A plain memcpy of the tables keeps the
 * lock's hold to the copy of some bytes; the compaction and the encoding
 * happen after it is released. */
typedef struct raw_shard {
    uint32_t cap[2], count[2];
    uint64_t events;
    unsigned char *slots[2];
    sl__event *ev;
} raw_shard;

/* The bytes one shard's copy can take now: its tables, and its logs'
 * events, which are at most what the logs hold. */
static size_t raw_bound(const sl__shard *sh)
{
    return sl__table_bytes(SL__TABLE_NARROW, sh->t[SL__TABLE_NARROW].cap) +
           sl__table_bytes(SL__TABLE_WIDE, sh->t[SL__TABLE_WIDE].cap) +
           sh->heap_bytes + 64;
}

/* Copies one shard, locked by the caller, into raw's buffer b, which
 * has room (raw_bound). */
static void copy_shard(const sl__shard *sh, out_buf *b, raw_shard *raw)
{
    unsigned char *o = b->p;
    for (int w = SL__TABLE_NARROW; w <= SL__TABLE_WIDE; w++) {
        const sl__table *t = &sh->t[w];
        raw->cap[w] = t->cap;
        raw->count[w] = t->count;
        raw->slots[w] = o;
        memcpy(o, t->slots, sl__table_bytes(w, t->cap));
        o += sl__table_bytes(w, t->cap);
    }
    /* The events, and each log's count where its pointer was. */
    raw->ev = (sl__event *)(void *)(b->p + (((size_t)(o - b->p) + 15) & ~15u));
    raw->events = 0;
    const sl__table *wt = &sh->t[SL__TABLE_WIDE];
    for (uint32_t i = 0; i < wt->cap; i++) {
        const sl__slot *s =
            (const sl__slot *)sl__table_slot(wt, SL__TABLE_WIDE, i);
        if (s->hash == 0 || !(s->st.used & SL__HEAP_FLAG))
            continue;
        const sl__eventlog *log = sl__elog(&s->state);
        sl__slot *copy = (sl__slot *)(void *)(raw->slots[SL__TABLE_WIDE] +
                                              (size_t)i * sizeof(sl__slot));
        copy->state.w[0] = log->len;
        /* A log left empty by a PEEK is the initial state: no log. */
        if (log->len == 0)
            copy->st.used &= ~SL__HEAP_FLAG;
        for (uint32_t k = 0; k < log->len; k++)
            raw->ev[raw->events++] = *sl__elog_at(log, k);
    }
}

/* The section of a copied shard, without its CRC, into b. */
static int encode_shard(const raw_shard *raw, out_buf *b)
{
    size_t need = SL__STATE_SECTION_HEAD +
                  (size_t)raw->count[0] * SL__STATE_NSLOT +
                  (size_t)raw->count[1] * SL__STATE_WSLOT +
                  (size_t)raw->events * SL__STATE_EVENT + 4;
    if (buf_reserve(b, need) != 0)
        return SL_ENOMEM;
    unsigned char *o = b->p;
    sl__put32(o, raw->count[SL__TABLE_NARROW]);
    sl__put32(o + 4, raw->count[SL__TABLE_WIDE]);
    sl__put64(o + 8, raw->events);
    o += SL__STATE_SECTION_HEAD;
    for (uint32_t i = 0; i < raw->cap[SL__TABLE_NARROW]; i++) {
        const sl__nslot *s =
            (const sl__nslot *)(const void *)(raw->slots[SL__TABLE_NARROW] +
                                              (size_t)i * sizeof(sl__nslot));
        if (s->hash == 0)
            continue;
        sl__put64(o, s->hash);
        sl__put64(o + 8, s->word);
        sl__put32(o + 16, s->st.expires);
        sl__put32(o + 20, s->st.used);
        o += SL__STATE_NSLOT;
    }
    for (uint32_t i = 0; i < raw->cap[SL__TABLE_WIDE]; i++) {
        const sl__slot *s =
            (const sl__slot *)(const void *)(raw->slots[SL__TABLE_WIDE] +
                                             (size_t)i * sizeof(sl__slot));
        if (s->hash == 0)
            continue;
        sl__put64(o, s->hash);
        sl__put64(o + 8, (uint64_t)s->state.w[0]);
        sl__put64(o + 16, (uint64_t)s->state.w[1]);
        sl__put32(o + 24, s->st.expires);
        sl__put32(o + 28, s->st.used);
        o += SL__STATE_WSLOT;
    }
    for (uint64_t k = 0; k < raw->events; k++, o += SL__STATE_EVENT) {
        sl__put64(o, (uint64_t)raw->ev[k].at);
        sl__put64(o + 8, (uint64_t)raw->ev[k].cost);
    }
    b->len = (size_t)(o - b->p);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The limits' identities, sorted and each once, into b (then their
 * CRC); *n gets their number. */
static int put_limits(const sl_memory_save_options *o, out_buf *b, uint32_t *n)
{
    uint64_t *ids = malloc((o->n_limits + 1) * sizeof(*ids));
    size_t k = 0;
    if (ids == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < o->n_limits; i++)
        if (o->limits[i] != NULL)
            ids[k++] = o->limits[i]->ident;
    qsort(ids, k, sizeof(*ids), cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || ids[u - 1] != ids[i])
            ids[u++] = ids[i];
    if (buf_reserve(b, u * 8 + 4) != 0) {
        free(ids);
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < u; i++)
        sl__put64(b->p + i * 8, ids[i]);
    sl__put32(b->p + u * 8, sl__state_crc(0, b->p, u * 8));
    b->len = u * 8 + 4;
    *n = (uint32_t)u;
    free(ids);
    return 0;
}

/* The header, once the totals are known. */
static void put_header(unsigned char *h, const sl__memory_store *ms,
                       sl_nanos now, sl_nanos wall, uint64_t keys,
                       uint64_t events, uint32_t n_limits, uint64_t bytes)
{
    memset(h, 0, SL__STATE_HEADER);
    memcpy(h, SL__STATE_MAGIC, 8);
    sl__put32(h + SL__STH_VERSION, SL__STATE_VERSION);
    sl__put32(h + SL__STH_BOM, SL__STATE_BOM);
    sl__put32(h + SL__STH_SIZE, SL__STATE_HEADER);
    sl__put32(h + SL__STH_SHARDS, SL__NSHARDS);
    for (int i = 0; i < 4; i++)
        sl__put64(h + SL__STH_SECRETS + 8 * i, ms->hasher.secret[i]);
    sl__put64(h + SL__STH_EPOCH, (uint64_t)sl__memory_epoch(ms));
    sl__put64(h + SL__STH_NOW, (uint64_t)now);
    sl__put64(h + SL__STH_WALL, (uint64_t)wall);
    sl__put64(h + SL__STH_KEYS, keys);
    sl__put64(h + SL__STH_EVENTS, events);
    sl__put32(h + SL__STH_LIMITS, n_limits);
    sl__put64(h + SL__STH_FILE_BYTES, bytes);
    sl__put32(h + SL__STH_CRC, sl__state_crc(0, h, SL__STH_CRC));
}

/* Every shard's section written to fd; *keys, *events, *bytes and
 * *longest added to.  0, SL_ENOMEM, or -1 for a failed write (errno). */
static int put_shards(sl__memory_store *ms, int fd, out_buf *raw_buf,
                      out_buf *b, uint64_t *keys, uint64_t *events,
                      uint64_t *bytes, sl_nanos *longest)
{
    for (int k = 0; k < SL__NSHARDS; k++) {
        sl__shard *sh = &ms->shards[k];
        raw_shard raw;
        sl_nanos t0;
        /* Room is found outside the lock: a realloc under it would be a
         * stall that decisions wait out. */
        for (;;) {
            sl__shard_lock(sh);
            size_t need = raw_bound(sh);
            if (need <= raw_buf->cap)
                break;
            sl__shard_unlock(sh);
            if (buf_reserve(raw_buf, need + need / 4) != 0)
                return SL_ENOMEM;
        }
        t0 = mono_now();
        copy_shard(sh, raw_buf, &raw);
        sl__shard_unlock(sh);
        sl_nanos held = mono_now() - t0;
        if (held > *longest)
            *longest = held;
        if (sl__state_shard_saved_cb != NULL)
            sl__state_shard_saved_cb(sl__state_shard_saved_arg, k);
        if (encode_shard(&raw, b) != 0)
            return SL_ENOMEM;
        *keys += (uint64_t)raw.count[0] + raw.count[1];
        *events += raw.events;
        sl__put32(b->p + b->len, sl__state_crc(0, b->p, b->len));
        b->len += 4;
        if (write_all(fd, b->p, b->len) != 0)
            return -1;
        *bytes += b->len;
    }
    return 0;
}

static int fail_io(char *errbuf, size_t errlen, const char *path,
                   const char *what)
{
    sl__set_err(errbuf, errlen, "%s: cannot %s: %s", path, what,
                strerror(errno));
    return SL_ESTORE;
}

/* fsync of the directory that holds path, so that the rename is on disk. */
static int sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof(dir))
            return 0;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int sl_memory_store_save(sl_store *store, const char *path, sl_nanos now,
                         const sl_memory_save_options *opts,
                         sl_memory_save_info *info, char *errbuf, size_t errlen)
{
    sl_memory_save_options o = {0};
    sl_memory_save_info done = {0};
    sl_nanos t0 = mono_now();
    unsigned char header[SL__STATE_HEADER];
    out_buf b = {0}, raw = {0};
    uint64_t events = 0;
    uint32_t n_limits = 0;
    char tmp[4096];
    int fd = -1, err;

    if (store == NULL || store->type->sweep != sl__memory_sweep ||
        path == NULL) {
        sl__set_err(errbuf, errlen, "not a memory store");
        return SL_EINVAL;
    }
    if (now < 0 || now > SL_MAX_TIME) {
        sl__set_err(errbuf, errlen, "now out of range: '%lld'", (long long)now);
        return SL_EINVAL;
    }
    if (sl__state_options(&o, opts, "sl_memory_save_options", errbuf, errlen) !=
        0)
        return SL_EINVAL;
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
        sl__set_err(errbuf, errlen, "path too long: '%s'", path);
        return SL_EINVAL;
    }
    sl__memory_store *ms = (sl__memory_store *)store;

    if ((err = put_limits(&o, &b, &n_limits)) != 0)
        goto fail;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    /* An old file of other permissions keeps them through O_TRUNC. */
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        err = fail_io(errbuf, errlen, tmp, "create");
        goto fail;
    }
    memset(header, 0, sizeof(header));
    done.bytes = SL__STATE_HEADER + b.len;
    if (write_all(fd, header, sizeof(header)) != 0 ||
        write_all(fd, b.p, b.len) != 0) {
        err = fail_io(errbuf, errlen, tmp, "write");
        goto fail;
    }
    err = put_shards(ms, fd, &raw, &b, &done.keys, &events, &done.bytes,
                     &done.longest_lock);
    free(raw.p);
    if (err == SL_ENOMEM)
        goto fail;
    if (err != 0) {
        err = fail_io(errbuf, errlen, tmp, "write");
        goto fail;
    }
    put_header(header, ms, now, o.wall, done.keys, events, n_limits,
               done.bytes);
    if (pwrite(fd, header, sizeof(header), 0) != (ssize_t)sizeof(header)) {
        err = fail_io(errbuf, errlen, tmp, "write");
        goto fail;
    }
    if (fsync(fd) != 0) {
        err = fail_io(errbuf, errlen, tmp, "fsync");
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        err = fail_io(errbuf, errlen, tmp, "close");
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        err = fail_io(errbuf, errlen, path, "rename the new file to");
        goto fail;
    }
    if (sync_dir(path) != 0) {
        err = fail_io(errbuf, errlen, path, "fsync the directory of");
        free(b.p);
        return err; /* the file is in place; its rename may not last */
    }
    free(b.p);
    done.duration = mono_now() - t0;
    if (info != NULL)
        *info = done;
    return 0;

fail:
    if (err == SL_ENOMEM)
        sl__set_err(errbuf, errlen, "%s: out of memory", path);
    if (fd >= 0)
        close(fd);
    if (fd >= 0 || err != SL_ENOMEM)
        unlink(tmp);
    free(b.p);
    return err;
}
