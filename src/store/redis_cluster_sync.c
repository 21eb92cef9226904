/*
 * redis_cluster_sync.c - the blocking Redis store on a Redis Cluster: each
 * script call goes to the master of its slot, over one connection per
 * node (redis_conn.c), made when a slot first needs it.  The daemon's
 * asynchronous twin is src/decision/cluster_links.c.
 *
 * The slot map is read with CLUSTER SLOTS from the first node that
 * answers (known nodes, then the seeds) before the first call, and again
 * after anything that says it is stale: a MOVED (the slot has moved: the
 * call follows it at once, the map is read again before the next call), a
 * node that cannot be reached (it may have failed over), CLUSTERDOWN.  An
 * ASK (a slot being migrated, the key already moved) sends ASKING and the
 * command to the named node, once, leaving the map as it is.  A
 * TRYAGAIN (a multi-key call whose keys are split by a migration) waits a
 * little and tries again.  Every call follows at most SL__REDIS_MAX_HOPS
 * of these.  What a reply is comes from the protocol core
 * (sl__redis_reply_kind), as in the daemon.
 *
 * A call whose connection broke is not sent again: the node may have run
 * it (the same rule as the plain store, docs/stores.md "Failures").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "store/redis_store.h"

#define TRYAGAIN_MS 20

typedef struct node_conn {
    char *host;
    int port;
    sl__redis_conn *conn;
} node_conn;

struct sl__redis_cluster {
    sl__redis_endpoint ep;   /* the seeds, credentials and timeout */
    sl__redis_slot_map *map; /* NULL: read it before the next call */
    node_conn *conns;        /* every node connected to, in order */
    size_t n_conns;
};

int sl__redis_cluster_new(const sl__redis_endpoint *ep, sl__redis_cluster **out)
{
    sl__redis_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL ||
        (c->conns = calloc(SL__REDIS_MAX_NODES, sizeof(node_conn))) == NULL) {
        free(c);
        return SL_ENOMEM;
    }
    c->ep = *ep;
    *out = c;
    return 0;
}

void sl__redis_cluster_free(sl__redis_cluster *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n_conns; i++) {
        sl__redis_conn_free(c->conns[i].conn);
        free(c->conns[i].host);
    }
    sl__redis_slot_map_free(c->map);
    free(c->conns);
    free(c);
}

/* The connection to (host, port), made (not connected) if new; NULL when
 * out of memory or past SL__REDIS_MAX_NODES nodes. */
static node_conn *conn_for(sl__redis_cluster *c, const char *host, int port)
{
    node_conn *nc;
    sl__redis_endpoint ep;
    for (size_t i = 0; i < c->n_conns; i++)
        if (c->conns[i].port == port && strcmp(c->conns[i].host, host) == 0)
            return &c->conns[i];
    if (c->n_conns == SL__REDIS_MAX_NODES)
        return NULL;
    nc = &c->conns[c->n_conns];
    if ((nc->host = strdup(host)) == NULL)
        return NULL;
    /* The store's credentials, timeout and TLS; a cluster has only db 0. */
    ep = (sl__redis_endpoint){.host = nc->host,
                              .port = port,
                              .user = c->ep.user,
                              .password = c->ep.password,
                              .timeout_ms = c->ep.timeout_ms,
                              .tls = c->ep.tls};
    if (sl__redis_conn_new(&ep, 0, &nc->conn) != 0) {
        free(nc->host);
        return NULL;
    }
    nc->port = port;
    c->n_conns++;
    return nc;
}

static void forget_map(sl__redis_cluster *c)
{
    sl__redis_slot_map_free(c->map);
    c->map = NULL;
}

/* Asks one node for the slot map: 0, or SL_ESTORE (SL_EINVAL: its TLS
 * certificate refused) with err set. */
static int read_map(sl__redis_cluster *c, node_conn *nc, char *err,
                    size_t errlen)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    sl__redis_slot_map *map;
    redisReply *r =
        sl__redis_conn_command(nc->conn, 0, 2, argv, NULL, err, errlen);
    int rc;
    if (r == NULL)
        return sl__redis_conn_failure(nc->conn);
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis CLUSTER SLOTS on '%s:%d': %s", nc->host,
                 nc->port, r->str);
        freeReplyObject(r);
        return SL_ESTORE;
    }
    rc = sl__redis_slot_map_new(r, nc->host, &map);
    freeReplyObject(r);
    if (rc != 0) {
        snprintf(err, errlen,
                 "redis CLUSTER SLOTS on '%s:%d': unexpected reply", nc->host,
                 nc->port);
        return SL_ESTORE;
    }
    forget_map(c);
    c->map = map;
    return 0;
}

int sl__redis_cluster_refresh(sl__redis_cluster *c, char *err, size_t errlen)
{
    /* Nodes already known first (a seed may be long gone), then the
     * seeds; conn_for may add to conns, so its count is read once. */
    /* A refused certificate is the configuration's fault, not a node's:
     * no other node would be accepted either. */
    size_t known = c->n_conns;
    int rc;
    for (size_t i = 0; i < known; i++)
        if ((rc = read_map(c, &c->conns[i], err, errlen)) == 0 ||
            rc == SL_EINVAL)
            return rc;
    for (size_t i = 0; i < c->ep.n_seeds; i++) {
        node_conn *nc = conn_for(c, c->ep.seed_hosts[i], c->ep.seed_ports[i]);
        if (nc == NULL) {
            snprintf(err, errlen, "out of memory");
            return SL_ENOMEM;
        }
        if ((rc = read_map(c, nc, err, errlen)) == 0 || rc == SL_EINVAL)
            return rc;
    }
    return SL_ESTORE;
}

/* The master of slot by the map (read first if need be), or NULL with
 * err set. */
static node_conn *master_of(sl__redis_cluster *c, int slot, char *err,
                            size_t errlen)
{
    int port, i;
    const char *host;
    node_conn *nc;

    if (c->map == NULL && sl__redis_cluster_refresh(c, err, errlen) != 0)
        return NULL;
    if ((i = sl__redis_slot_map_node(c->map, slot)) < 0) {
        snprintf(err, errlen, "redis cluster: no node serves slot %d", slot);
        forget_map(c);
        return NULL;
    }
    host = sl__redis_slot_map_host(c->map, (size_t)i, &port);
    if ((nc = conn_for(c, host, port)) == NULL)
        snprintf(err, errlen, "out of memory");
    return nc;
}

redisReply *sl__redis_cluster_command(sl__redis_cluster *c, int slot, int argc,
                                      const char *const *argv,
                                      const size_t *lens, char *err,
                                      size_t errlen)
{
    node_conn *to = NULL; /* set by a redirection: where the next hop goes */
    int asking = 0;

    for (int hop = 0; hop <= SL__REDIS_MAX_HOPS; hop++) {
        node_conn *nc = to ? to : master_of(c, slot, err, errlen);
        sl__redis_redirect rd;
        redisReply *r;
        int kind;

        if (nc == NULL)
            return NULL;
        r = sl__redis_conn_command(nc->conn, asking, argc, argv, lens, err,
                                   errlen);
        to = NULL;
        asking = 0;
        if (r == NULL) {
            forget_map(c); /* the node may be gone for good: a failover */
            return NULL;
        }
        kind = sl__redis_reply_kind(r, &rd);
        if ((kind == SL__REDIS_REPLY_MOVED || kind == SL__REDIS_REPLY_ASK) &&
            rd.slot == slot) {
            freeReplyObject(r);
            to = conn_for(c, rd.host[0] ? rd.host : nc->host, rd.port);
            if (to == NULL) {
                snprintf(err, errlen, "out of memory");
                return NULL;
            }
            if (rd.ask)
                asking = 1;
            else
                forget_map(c);
            continue;
        }
        if (kind == SL__REDIS_REPLY_TRYAGAIN) {
            struct timespec ts = {0, TRYAGAIN_MS * 1000000L};
            freeReplyObject(r);
            nanosleep(&ts, NULL);
            continue;
        }
        if (kind == SL__REDIS_REPLY_CLUSTERDOWN)
            forget_map(c);
        return r;
    }
    snprintf(err, errlen,
             "redis cluster: more than %d redirections for slot %d",
             SL__REDIS_MAX_HOPS, slot);
    return NULL;
}

const char *sl__redis_cluster_script_ref(const sl__redis_cluster *c)
{
    for (size_t i = 0; i < c->n_conns; i++)
        if (sl__redis_conn_script_ref(c->conns[i].conn)[0] != '\0')
            return sl__redis_conn_script_ref(c->conns[i].conn);
    return "";
}

void sl__redis_cluster_no_functions(sl__redis_cluster *c)
{
    for (size_t i = 0; i < c->n_conns; i++)
        sl__redis_conn_no_functions(c->conns[i].conn);
}
