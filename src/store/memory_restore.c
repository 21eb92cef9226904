/*
 * memory_restore.c - sl_memory_store_load(): a state file
 * (state_format.h) read back into an unused memory store.
 *
 * The file is untrusted until each part is checked: its length against
 * what the header says, every checksum, and every record against the
 * invariants the store keeps (memory.c): hashes in their own shard, each
 * key once, no log on a narrow slot, logs whose events are in order with
 * their sum right (sl__heap_check), and each shard under its share of the
 * memory cap.  Nothing is installed until the whole file has passed, so
 * a bad file leaves the store as it was: empty.  The checksum finds
 * corruption, not forgery: a state is trusted as the process's own
 * memory once it passes, which is why the file is 0600 and belongs in a
 * directory of the service's own (docs/stores.md, "State file").
 *
 * Separate from the writer (memory_snapshot.c) because the two share
 * only the format, and the reader is the one to fuzz (fuzz/fuzz_state.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "store/memory_store.h"
#include "store/state_format.h"

static const char *const result_names[SL_STATE_RESULT_COUNT] = {
    "loaded",  "missing", "unreadable",   "truncated", "corrupt",
    "version", "endian",  "other_limits", "too_big"};

const char *sl_state_result_name(sl_state_result r)
{
    return (unsigned)r < SL_STATE_RESULT_COUNT ? result_names[r] : NULL;
}

/* A load in progress. */
typedef struct reader {
    int fd;
    const char *path;
    uint64_t size, pos; /* the file's size, and how far it has been read */
    /* The header agreed with the size: what does not fit after it is
     * damage, not a file cut short. */
    int sized;
    sl_memory_load_info *info;
    char *errbuf;
    size_t errlen;
} reader;

/* The shards' new tables, installed only once the whole file passed. */
typedef struct new_shard {
    sl__table t[2];
    size_t heap_bytes;
} new_shard;

__attribute__((format(printf, 3, 4))) static int
bad(reader *r, sl_state_result why, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl__set_err(r->errbuf, r->errlen, "%s: %s", r->path, msg);
    r->info->result = why;
    return SL_EINVAL;
}

/* Reads n bytes at the current position: 0, or the error set. */
static int take(reader *r, void *buf, uint64_t n, const char *what)
{
    unsigned char *b = buf;
    if (n > r->size - r->pos)
        return bad(r, r->sized ? SL_STATE_CORRUPT : SL_STATE_TRUNCATED,
                   "%s: needs %llu bytes at offset %llu of %llu", what,
                   (unsigned long long)n, (unsigned long long)r->pos,
                   (unsigned long long)r->size);
    for (uint64_t done = 0; done < n;) {
        ssize_t got = read(r->fd, b + done, n - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return bad(r, SL_STATE_UNREADABLE, "cannot read: %s",
                       strerror(errno));
        if (got == 0)
            return bad(r, SL_STATE_TRUNCATED, "%s: file ended at %llu", what,
                       (unsigned long long)(r->pos + done));
        done += (uint64_t)got;
    }
    r->pos += n;
    return 0;
}

/* The header's checks, in the order that names the real problem: not
 * ours, another byte order, another version, then damage. */
static int check_header(reader *r, const unsigned char *h)
{
    if (memcmp(h, SL__STATE_MAGIC, 8) != 0)
        return bad(r, SL_STATE_CORRUPT, "not a sluice state file");
    uint32_t bom = sl__get32(h + SL__STH_BOM);
    if (bom == __builtin_bswap32(SL__STATE_BOM))
        return bad(r, SL_STATE_ENDIAN, "written in the other byte order");
    if (bom != SL__STATE_BOM)
        return bad(r, SL_STATE_CORRUPT, "bad byte-order mark: '0x%08x'", bom);
    uint32_t version = sl__get32(h + SL__STH_VERSION);
    if (version != SL__STATE_VERSION)
        return bad(r, SL_STATE_VERSION,
                   "format version '%u' (this sluice reads %d)", version,
                   SL__STATE_VERSION);
    if (sl__get32(h + SL__STH_CRC) != sl__state_crc(0, h, SL__STH_CRC))
        return bad(r, SL_STATE_CORRUPT, "header checksum mismatch");
    if (sl__get32(h + SL__STH_SIZE) != SL__STATE_HEADER ||
        sl__get32(h + SL__STH_SHARDS) != SL__NSHARDS ||
        sl__get32(h + SL__STH_FLAGS) != 0)
        return bad(r, SL_STATE_CORRUPT, "unknown header layout");
    uint64_t bytes = sl__get64(h + SL__STH_FILE_BYTES);
    if (bytes > r->size)
        return bad(r, SL_STATE_TRUNCATED, "%llu bytes of %llu",
                   (unsigned long long)r->size, (unsigned long long)bytes);
    if (bytes < r->size)
        return bad(r, SL_STATE_CORRUPT, "%llu bytes where %llu were written",
                   (unsigned long long)r->size, (unsigned long long)bytes);
    int64_t epoch = (int64_t)sl__get64(h + SL__STH_EPOCH);
    int64_t now = (int64_t)sl__get64(h + SL__STH_NOW);
    if (now < 0 || now > SL_MAX_TIME ||
        (epoch == INT64_MIN && sl__get64(h + SL__STH_KEYS) != 0) ||
        (epoch != INT64_MIN &&
         (epoch < -((int64_t)1 << 59) || epoch > SL_MAX_TIME)))
        return bad(r, SL_STATE_CORRUPT, "time base out of range: '%lld'",
                   (long long)epoch);
    return 0;
}

/* The limits the file was saved under, against those in force. */
static int check_limits(reader *r, const sl_memory_save_options *o, uint32_t n)
{
    uint64_t len = (uint64_t)n * 8 + 4;
    unsigned char *b;
    int err;
    if (len > r->size - r->pos)
        return bad(r, SL_STATE_CORRUPT, "limits: %u do not fit", n);
    if ((b = malloc(len)) == NULL)
        return SL_ENOMEM;
    if ((err = take(r, b, len, "limits")) != 0)
        goto out;
    if (sl__get32(b + n * (size_t)8) != sl__state_crc(0, b, n * (size_t)8)) {
        err = bad(r, SL_STATE_CORRUPT, "limits checksum mismatch");
        goto out;
    }
    r->info->limits_saved = n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = sl__get64(b + i * (size_t)8);
        if (i > 0 && id <= sl__get64(b + (i - 1) * (size_t)8)) {
            err = bad(r, SL_STATE_CORRUPT, "limits out of order");
            goto out;
        }
        for (size_t k = 0; k < o->n_limits; k++)
            if (o->limits[k] != NULL && o->limits[k]->ident == id) {
                r->info->limits_kept++;
                break;
            }
    }
    if (n > 0 && o->n_limits > 0 && r->info->limits_kept == 0)
        err = bad(r, SL_STATE_OTHER_LIMITS,
                  "saved under other limits: none of its %u is in force", n);
out:
    free(b);
    return err;
}

/* A slot's hash, checked: not 0 (empty), in shard k, not yet placed. */
static int check_hash(reader *r, const new_shard *ns, int k, uint64_t hash)
{
    if (hash == 0 || (int)(hash >> (64 - SL__SHARD_BITS)) != k)
        return bad(r, SL_STATE_CORRUPT, "shard %d: key hash '%016llx'", k,
                   (unsigned long long)hash);
    if (sl__table_find(&ns->t[SL__TABLE_NARROW], SL__TABLE_NARROW, hash) ||
        sl__table_find(&ns->t[SL__TABLE_WIDE], SL__TABLE_WIDE, hash))
        return bad(r, SL_STATE_CORRUPT, "shard %d: key hash '%016llx' twice", k,
                   (unsigned long long)hash);
    return 0;
}

/* Slots for n keys, under the 7/8 load bound with room to spare. */
static uint32_t cap_for(uint32_t n)
{
    uint64_t cap = (uint64_t)n + n / 4 + 1;
    return cap < SL__TABLE_MIN_CAP ? SL__TABLE_MIN_CAP : (uint32_t)cap;
}

/* A wide slot's log, from n events at *ev (advanced): 0 or error. */
static int read_log(reader *r, int k, const unsigned char **ev, uint64_t n,
                    sl__state *st)
{
    sl__eventlog *log = sl__elog_new((uint32_t)n);
    if (log == NULL)
        return SL_ENOMEM;
    for (uint32_t i = 0; i < n; i++, *ev += SL__STATE_EVENT) {
        log->ev[i].at = (int64_t)sl__get64(*ev);
        log->ev[i].cost = (int64_t)sl__get64(*ev + 8);
        int64_t cost = log->ev[i].cost;
        if (cost <= 0 || cost > SL_MAX_COUNT) {
            free(log);
            return bad(r, SL_STATE_CORRUPT, "shard %d: event cost '%lld'", k,
                       (long long)cost);
        }
        log->sum += log->ev[i].cost; /* 2^30 events of 2^40: no overflow */
    }
    log->len = (uint32_t)n;
    st->w[0] = (int64_t)(intptr_t)log;
    if (sl__heap_check(st) != 0 || st->w[1] < log->ev[n - 1].at) {
        free(log);
        st->w[0] = 0;
        return bad(r, SL_STATE_CORRUPT, "shard %d: a log out of order", k);
    }
    return 0;
}

/* Shard k's records in body (its section after the head) into ns. */
static int read_slots(reader *r, int k, new_shard *ns, const unsigned char *p,
                      uint32_t nn, uint32_t nw, uint64_t nev)
{
    const unsigned char *ev =
        p + (size_t)nn * SL__STATE_NSLOT + (size_t)nw * SL__STATE_WSLOT;
    uint64_t ev_left = nev;
    int err;

    for (uint32_t i = 0; i < nn; i++, p += SL__STATE_NSLOT) {
        sl__nslot s = {.hash = sl__get64(p),
                       .word = sl__get64(p + 8),
                       .st = {sl__get32(p + 16), sl__get32(p + 20)}};
        if ((err = check_hash(r, ns, k, s.hash)) != 0)
            return err;
        if (s.st.used & SL__HEAP_FLAG)
            return bad(r, SL_STATE_CORRUPT, "shard %d: a narrow log", k);
        sl__table_place(&ns->t[SL__TABLE_NARROW], SL__TABLE_NARROW, &s);
    }
    for (uint32_t i = 0; i < nw; i++, p += SL__STATE_WSLOT) {
        sl__slot s = {
            .hash = sl__get64(p),
            .state = {{(int64_t)sl__get64(p + 8), (int64_t)sl__get64(p + 16)}},
            .st = {sl__get32(p + 24), sl__get32(p + 28)}};
        if ((err = check_hash(r, ns, k, s.hash)) != 0)
            return err;
        if (s.st.used & SL__HEAP_FLAG) {
            uint64_t n = (uint64_t)s.state.w[0];
            if (n == 0 || n > ev_left || n > (UINT32_C(1) << 30))
                return bad(r, SL_STATE_CORRUPT, "shard %d: a log of '%llu'", k,
                           (unsigned long long)n);
            if ((err = read_log(r, k, &ev, n, &s.state)) != 0)
                return err;
            ev_left -= n;
            ns->heap_bytes += sl__heap_bytes(&s.state);
        }
        sl__table_place(&ns->t[SL__TABLE_WIDE], SL__TABLE_WIDE, &s);
    }
    if (ev_left != 0)
        return bad(r, SL_STATE_CORRUPT, "shard %d: '%llu' events unclaimed", k,
                   (unsigned long long)ev_left);
    return 0;
}

/* Frees what new_shard holds: its logs and tables. */
static void release_new(new_shard *ns)
{
    sl__table *t = &ns->t[SL__TABLE_WIDE];
    for (uint32_t j = 0; t->slots != NULL && j < t->cap; j++) {
        sl__slot *s = (sl__slot *)sl__table_slot(t, SL__TABLE_WIDE, j);
        if (s->hash != 0 && (s->st.used & SL__HEAP_FLAG))
            sl__heap_release(&s->state);
    }
    sl__table_release(&ns->t[SL__TABLE_NARROW]);
    sl__table_release(t);
}

/* One shard's section: 0 or error; *keys and *events added to. */
static int read_shard(reader *r, const sl__memory_store *ms, int k,
                      new_shard *ns, uint64_t *keys, uint64_t *events)
{
    unsigned char head[SL__STATE_SECTION_HEAD];
    unsigned char *body;
    int err;

    if ((err = take(r, head, sizeof(head), "shard")) != 0)
        return err;
    uint32_t nn = sl__get32(head), nw = sl__get32(head + 4);
    uint64_t nev = sl__get64(head + 8);
    uint64_t left = r->size - r->pos;
    /* Each count bounded by the file before any product is taken. */
    if (nn > left / SL__STATE_NSLOT || nw > left / SL__STATE_WSLOT ||
        nev > left / SL__STATE_EVENT ||
        (uint64_t)nn * SL__STATE_NSLOT + (uint64_t)nw * SL__STATE_WSLOT +
                nev * SL__STATE_EVENT + 4 >
            left)
        return bad(r, SL_STATE_CORRUPT, "shard %d: %u + %u keys do not fit", k,
                   nn, nw);
    size_t len = (size_t)nn * SL__STATE_NSLOT + (size_t)nw * SL__STATE_WSLOT +
                 (size_t)nev * SL__STATE_EVENT;
    if ((body = malloc(len + 4)) == NULL)
        return SL_ENOMEM;
    if ((err = take(r, body, len + 4, "shard")) != 0)
        goto out;
    uint32_t crc =
        sl__state_crc(sl__state_crc(0, head, sizeof(head)), body, len);
    if (sl__get32(body + len) != crc) {
        err = bad(r, SL_STATE_CORRUPT, "shard %d: checksum mismatch", k);
        goto out;
    }
    if (sl__table_init(&ns->t[SL__TABLE_NARROW], SL__TABLE_NARROW,
                       cap_for(nn)) != 0 ||
        sl__table_init(&ns->t[SL__TABLE_WIDE], SL__TABLE_WIDE, cap_for(nw)) !=
            0) {
        err = SL_ENOMEM;
        goto out;
    }
    if ((err = read_slots(r, k, ns, body, nn, nw, nev)) != 0)
        goto out;
    size_t bytes = sl__table_bytes(SL__TABLE_NARROW, ns->t[0].cap) +
                   sl__table_bytes(SL__TABLE_WIDE, ns->t[1].cap) +
                   ns->heap_bytes;
    if (bytes > ms->shard_max_bytes) {
        err = bad(r, SL_STATE_TOO_BIG,
                  "shard %d needs %zu bytes, over its share of the memory "
                  "cap (%zu)",
                  k, bytes, ms->shard_max_bytes);
        goto out;
    }
    *keys += (uint64_t)nn + nw;
    *events += nev;
out:
    free(body);
    return err;
}

/* A memory store that has decided nothing and holds nothing. */
static int unused(sl__memory_store *ms)
{
    if (sl__memory_epoch(ms) != INT64_MIN)
        return 0;
    for (int k = 0; k < SL__NSHARDS; k++)
        if (ms->shards[k].t[0].count + ms->shards[k].t[1].count != 0)
            return 0;
    return 1;
}

/* The file's state in place of the store's (empty) one. */
static void install(sl__memory_store *ms, new_shard *ns, const unsigned char *h)
{
    for (int k = 0; k < SL__NSHARDS; k++) {
        sl__shard *sh = &ms->shards[k];
        sl__shard_lock(sh);
        for (int w = 0; w < 2; w++) {
            sl__table_release(&sh->t[w]);
            sh->t[w] = ns[k].t[w];
        }
        sh->heap_bytes = ns[k].heap_bytes;
        sl__shard_unlock(sh);
    }
    for (int i = 0; i < 4; i++)
        ms->hasher.secret[i] = sl__get64(h + SL__STH_SECRETS + 8 * i);
    atomic_store(&ms->epoch, (int64_t)sl__get64(h + SL__STH_EPOCH));
}

/* The file at r->path, opened and checked whole, into ns: 0 or error. */
static int read_file(reader *r, const sl__memory_store *ms,
                     const sl_memory_save_options *o, new_shard *ns,
                     unsigned char *h)
{
    uint64_t keys = 0, events = 0;
    int err;

    if ((err = take(r, h, SL__STATE_HEADER, "header")) != 0 ||
        (err = check_header(r, h)) != 0)
        return err;
    r->sized = 1;
    if ((err = check_limits(r, o, sl__get32(h + SL__STH_LIMITS))) != 0)
        return err;
    for (int k = 0; k < SL__NSHARDS; k++)
        if ((err = read_shard(r, ms, k, &ns[k], &keys, &events)) != 0)
            return err;
    if (keys != sl__get64(h + SL__STH_KEYS) ||
        events != sl__get64(h + SL__STH_EVENTS) || r->pos != r->size)
        return bad(r, SL_STATE_CORRUPT, "totals differ from the header");
    r->info->keys = keys;
    return 0;
}

int sl_memory_store_load(sl_store *store, const char *path,
                         const sl_memory_load_options *opts,
                         sl_memory_load_info *info, char *errbuf, size_t errlen)
{
    sl_memory_save_options o; /* the load's: the same fields */
    sl_memory_load_info got = {0};
    unsigned char h[SL__STATE_HEADER];
    reader r = {-1, path, 0, 0, 0, &got, errbuf, errlen};
    new_shard *ns = NULL;
    struct stat stbuf;
    int err;

    got.result = SL_STATE_UNREADABLE;
    if (info != NULL)
        *info = got;
    if (store == NULL || store->type->sweep != sl__memory_sweep ||
        path == NULL || !unused((sl__memory_store *)store)) {
        sl__set_err(errbuf, errlen, "not an unused memory store");
        return SL_EINVAL;
    }
    if (sl__state_options(&o, opts, "sl_memory_load_options", errbuf, errlen) !=
        0)
        return SL_EINVAL;
    if ((r.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        err = bad(&r, errno == ENOENT ? SL_STATE_MISSING : SL_STATE_UNREADABLE,
                  "cannot open: %s", strerror(errno));
        goto out;
    }
    if (fstat(r.fd, &stbuf) != 0 || !S_ISREG(stbuf.st_mode)) {
        err = bad(&r, SL_STATE_UNREADABLE, "not a regular file");
        goto out;
    }
    r.size = got.bytes = (uint64_t)stbuf.st_size;
    if (r.size == 0) {
        err = bad(&r, SL_STATE_TRUNCATED, "empty file");
        goto out;
    }
    if ((ns = calloc(SL__NSHARDS, sizeof(*ns))) == NULL) {
        err = SL_ENOMEM;
        goto out;
    }
    if ((err = read_file(&r, (sl__memory_store *)store, &o, ns, h)) != 0)
        goto out;
    install((sl__memory_store *)store, ns, h);
    free(ns);
    ns = NULL;
    got.result = SL_STATE_LOADED;
    got.saved_now = (sl_nanos)sl__get64(h + SL__STH_NOW);
    got.saved_wall = (sl_nanos)sl__get64(h + SL__STH_WALL);
    sl_nanos gone = o.wall > got.saved_wall ? o.wall - got.saved_wall : 0;
    got.resume_now = sl__sat_add(got.saved_now, gone);
    if (got.resume_now > SL_MAX_TIME)
        got.resume_now = SL_MAX_TIME;
out:
    if (err == SL_ENOMEM)
        sl__set_err(errbuf, errlen, "%s: out of memory", path);
    for (int k = 0; ns != NULL && k < SL__NSHARDS; k++)
        release_new(&ns[k]);
    free(ns);
    if (r.fd >= 0)
        close(r.fd);
    if (info != NULL)
        *info = got;
    return err;
}
