/*
 * slots.c - what a Redis Cluster client must know, as pure functions:
 * the slot of a key (CRC16 of its hash tag), the redirections a node
 * answers (MOVED, ASK) and the slot map a node describes (CLUSTER SLOTS).
 *
 * Debian 12's hiredis 0.14 has no cluster support (hiredis-cluster is not
 * packaged), so sluice routes by itself (docs/design.md).  These parsers
 * read what a server sent, so they are written for hostile input (fuzzed
 * by fuzz/fuzz_cluster.c) and do no I/O: the library's blocking driver
 * (src/store/redis_cluster_sync.c) and the daemon's asynchronous one
 * (src/decision/cluster_links.c) share them.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "redis/redis_proto.h"

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis's
 * crc16.c; bit by bit rather than by table, since keys are short and it
 * runs once per item. */
static unsigned crc16(const unsigned char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc;
}

int sl__redis_key_slot(const void *key, size_t len)
{
    const unsigned char *k = key;
    const unsigned char *open = len ? memchr(k, '{', len) : NULL;

    /* The hash tag: from the first '{' to the first '}' after it, if
     * that is not empty; otherwise the whole key (Redis's keyHashSlot). */
    if (open != NULL) {
        size_t from = (size_t)(open - k) + 1;
        const unsigned char *close = memchr(k + from, '}', len - from);
        if (close != NULL && close > k + from)
            return (int)(crc16(k + from, (size_t)(close - k) - from) &
                         (SL__REDIS_SLOTS - 1));
    }
    return (int)(crc16(k, len) & (SL__REDIS_SLOTS - 1));
}

int sl__redis_redirect_parse(const char *s, size_t len, sl__redis_redirect *out)
{
    const char *end = s + len, *sp, *colon;
    int slot, port;

    /* "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>"; the
     * host is the text before the last ':' (an IPv6 address has more),
     * empty when the node does not know its own address. */
    if (len >= 6 && memcmp(s, "MOVED ", 6) == 0) {
        out->ask = 0;
        s += 6;
    } else if (len >= 4 && memcmp(s, "ASK ", 4) == 0) {
        out->ask = 1;
        s += 4;
    } else {
        return -1;
    }
    if ((sp = memchr(s, ' ', (size_t)(end - s))) == NULL ||
        sl__parse_int(s, (size_t)(sp - s), 0, SL__REDIS_SLOTS - 1, &slot))
        return -1;
    s = sp + 1;
    for (colon = end; colon > s && colon[-1] != ':'; colon--)
        ;
    if (colon == s || (size_t)(colon - 1 - s) >= sizeof(out->host) ||
        memchr(s, '\0', (size_t)(colon - 1 - s)) != NULL ||
        sl__parse_int(colon, (size_t)(end - colon), 1, 65535, &port))
        return -1;
    memcpy(out->host, s, (size_t)(colon - 1 - s));
    out->host[colon - 1 - s] = '\0';
    out->slot = slot;
    out->port = port;
    return 0;
}

/* ---- the slot map ---- */

enum { NO_NODE = 0xffff };

struct sl__redis_slot_map {
    uint16_t node_of[SL__REDIS_SLOTS]; /* index into nodes, or NO_NODE */
    size_t n_nodes;
    struct {
        char *host;
        int port;
    } nodes[SL__REDIS_MAX_NODES];
};

void sl__redis_slot_map_free(sl__redis_slot_map *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n_nodes; i++)
        free(m->nodes[i].host);
    free(m);
}

/* The index of (host, port), added if new: >= 0, or -1 (too many nodes,
 * out of memory). */
static int node_index(sl__redis_slot_map *m, const char *host, size_t host_len,
                      int port)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == host_len &&
            memcmp(m->nodes[i].host, host, host_len) == 0)
            return (int)i;
    if (m->n_nodes == SL__REDIS_MAX_NODES ||
        (m->nodes[m->n_nodes].host = strndup(host, host_len)) == NULL)
        return -1;
    m->nodes[m->n_nodes].port = port;
    return (int)m->n_nodes++;
}

static int is_int(const redisReply *r, long long lo, long long hi)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer >= lo &&
           r->integer <= hi;
}

int sl__redis_slot_map_new(const redisReply *r, const char *default_host,
                           sl__redis_slot_map **out)
{
    sl__redis_slot_map *m;

    /* Each entry: [first slot, last slot, master [host, port, id, ...],
     * replicas...].  Only masters serve writes, so replicas are skipped.
     * A host of "" or "?" means "the address you reached me at". */
    if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
        (m = malloc(sizeof(*m))) == NULL)
        return SL_EINVAL;
    memset(m->node_of, 0xff, sizeof(m->node_of));
    m->n_nodes = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i], *master, *host;
        int idx;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            !is_int(e->element[0], 0, SL__REDIS_SLOTS - 1) ||
            !is_int(e->element[1], e->element[0]->integer, SL__REDIS_SLOTS - 1))
            goto bad;
        master = e->element[2];
        if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
            master->element[0]->type != REDIS_REPLY_STRING ||
            !is_int(master->element[1], 1, 65535))
            goto bad;
        host = master->element[0];
        if ((host->len == 0 || (host->len == 1 && host->str[0] == '?')) &&
            default_host != NULL)
            idx = node_index(m, default_host, strlen(default_host),
                             (int)master->element[1]->integer);
        else if (host->len > 0 && memchr(host->str, '\0', host->len) == NULL)
            idx = node_index(m, host->str, host->len,
                             (int)master->element[1]->integer);
        else
            goto bad;
        if (idx < 0)
            goto bad;
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer;
             s++)
            m->node_of[s] = (uint16_t)idx;
    }
    if (m->n_nodes == 0)
        goto bad;
    *out = m;
    return 0;
bad:
    sl__redis_slot_map_free(m);
    return SL_EINVAL;
}

int sl__redis_slot_map_node(const sl__redis_slot_map *m, int slot)
{
    if (slot < 0 || slot >= SL__REDIS_SLOTS || m->node_of[slot] == NO_NODE)
        return -1;
    return m->node_of[slot];
}

size_t sl__redis_slot_map_nodes(const sl__redis_slot_map *m)
{
    return m->n_nodes;
}

const char *sl__redis_slot_map_host(const sl__redis_slot_map *m, size_t node,
                                    int *port)
{
    *port = m->nodes[node].port;
    return m->nodes[node].host;
}
