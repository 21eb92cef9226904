/*
 * cluster_links.c - `sluice serve --store redis-cluster://...`: where a
 * worker thread sends each part of a call (redis_async_send.c) on a Redis
 * Cluster.  Kept apart from redis_async*.c, which own calls, timeouts,
 * the breaker and the failure policy, so that this file is only routing:
 * one hiredis async connection ("link") per master node, made on demand
 * on the worker's loop, and the slot map that picks it.
 *
 * The map comes first from the breaker's probe (CLUSTER SLOTS after
 * SCRIPT LOAD on a seed), then from a refresh: sent on a link after a
 * MOVED, a link lost or refused, or a part for a slot the map does not
 * know; at most one in flight.  Links load the library (FUNCTION LOAD)
 * but need no SCRIPT LOAD: the SHA1 is the same on every node, and a node
 * without the script (or the library) answers NOSCRIPT (or "Function not
 * found"), to which redis_async_send.c sends EVAL (after the library).  A link
 * that fails is dropped (its calls get no reply, which redis_async_send.c
 * counts as failures); the next part for that node connects again.
 *
 * A node that is gone without a word (paused, cut off by the network)
 * leaves its link open and silent.  So every link counts what it was
 * sent and what came back
 * (sd_cluster_sent, _replied), and when calls time out
 * (sd_cluster_timed_out, from redis_async_deadline.c's timer) a link that has
 * owed a reply for the whole timeout is dropped and the map read again
 * (from a link that answers): without that, a worker whose breaker stays
 * closed (other masters answer) would keep sending a dead master's slots
 * to its link after the failover.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "decision/layer.h"
#include "log/log.h"

#define REFRESH_MIN_MS 100
#define REFRESH_LOST_MS 2000

typedef struct link {
    redisAsyncContext *ac;
    char *host;
    int port;
    int connected;
    size_t owed;         /* commands sent and not answered yet */
    uint64_t waiting_ms; /* loop time of the last answer (or first send) */
} link;

struct sd_cluster {
    uv_loop_t *loop;
    sl__redis_endpoint ep; /* the seeds and credentials, borrowed */
    sl__redis_slot_map *map;
    link *links;
    size_t n_links;
    int refreshing; /* a CLUSTER SLOTS is in flight */
    uint64_t last_refresh_ms;
    uint64_t timeout_ms; /* a link connecting longer has failed */
    int closing;         /* no refresh and no new link while links close */
    size_t next_probe;
};

sd_cluster *sd_cluster_new(uv_loop_t *loop, const sl__redis_endpoint *ep,
                           uint64_t timeout_ms)
{
    sd_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL ||
        (cl->links = calloc(SL__REDIS_MAX_NODES, sizeof(link))) == NULL) {
        free(cl);
        return NULL;
    }
    cl->loop = loop;
    cl->ep = *ep;
    cl->timeout_ms = timeout_ms;
    return cl;
}

/* The link of ac, or NULL (not one of ours, or already dropped). */
static link *link_of(sd_cluster *cl, const redisAsyncContext *ac)
{
    for (size_t i = 0; i < cl->n_links; i++)
        if (cl->links[i].ac == ac)
            return &cl->links[i];
    return NULL;
}

int sd_cluster_owns(sd_cluster *cl, const redisAsyncContext *ac)
{
    return ac != NULL && link_of(cl, ac) != NULL;
}

/* Forgets a link (hiredis frees its context): the table keeps its order
 * otherwise irrelevant, so the last one takes its place. */
static void forget_link(sd_cluster *cl, link *l)
{
    free(l->host);
    *l = cl->links[--cl->n_links];
}

static void link_connect_cb(const redisAsyncContext *ac, int status)
{
    sd_cluster *cl = ac->data;
    link *l;
    if ((l = link_of(cl, ac)) == NULL)
        return;
    if (status == REDIS_OK) {
        l->connected = 1;
        return;
    }
    forget_link(cl, l); /* hiredis frees the context after this */
    sd_cluster_refresh(cl);
}

static void link_disconnect_cb(const redisAsyncContext *ac, int status)
{
    sd_cluster *cl = ac->data;
    link *l;
    (void)status;
    if ((l = link_of(cl, ac)) == NULL)
        return;
    forget_link(cl, l);
    sd_cluster_refresh(cl); /* the node may have failed over */
}

void sd_cluster_write_now(sd_cluster *cl)
{
    for (size_t i = 0; i < cl->n_links; i++)
        if (cl->links[i].connected)
            sd_link_write_now(cl->links[i].ac);
}

redisAsyncContext *sd_cluster_link_to(sd_cluster *cl, const char *host,
                                      int port)
{
    redisAsyncContext *ac;
    sl__redis_handshake hs;
    link *l;

    for (size_t i = 0; i < cl->n_links; i++)
        if (cl->links[i].port == port && strcmp(cl->links[i].host, host) == 0)
            return cl->links[i].ac;
    if (cl->closing || cl->n_links == SL__REDIS_MAX_NODES)
        return NULL;
    ac = redisAsyncConnect(host, port);
    if (ac == NULL || ac->err) {
        if (ac != NULL)
            redisAsyncFree(ac);
        return NULL;
    }
    ac->data = cl;
    if (sd_link_attach(ac, cl->loop, cl->ep.tls, host) != 0) {
        redisAsyncFree(ac);
        return NULL;
    }
    l = &cl->links[cl->n_links];
    if ((l->host = strdup(host)) == NULL) {
        redisAsyncFree(ac);
        return NULL;
    }
    l->ac = ac;
    l->port = port;
    l->connected = 0;
    l->owed = 0;
    cl->n_links++;
    redisAsyncSetConnectCallback(ac, link_connect_cb);
    redisAsyncSetDisconnectCallback(ac, link_disconnect_cb);
    /* AUTH and FUNCTION LOAD, pipelined ahead of everything: the library
     * is on every master that serves calls.  A refusal of AUTH shows in
     * the replies of what follows (NOAUTH), which fail their calls; one
     * of FUNCTION LOAD in a "Function not found" (reload_library). */
    sl__redis_handshake_init(&hs, &cl->ep, SL__REDIS_WITH_FUNCTION_LOAD);
    for (size_t i = 0; i < hs.n; i++)
        redisAsyncCommandArgv(ac, NULL, NULL, hs.cmd[i].argc, hs.cmd[i].argv,
                              hs.cmd[i].lens);
    return ac;
}

redisAsyncContext *sd_cluster_link(sd_cluster *cl, int slot)
{
    int node = cl->map ? sl__redis_slot_map_node(cl->map, slot) : -1;
    int port;
    const char *host;

    if (node < 0) {
        sd_cluster_refresh(cl);
        return NULL;
    }
    host = sl__redis_slot_map_host(cl->map, (size_t)node, &port);
    return sd_cluster_link_to(cl, host, port);
}

const char *sd_cluster_host_of(sd_cluster *cl, const redisAsyncContext *ac)
{
    link *l = link_of(cl, ac);
    return l ? l->host : "";
}

int sd_cluster_set_map(sd_cluster *cl, const redisReply *reply,
                       const char *host)
{
    sl__redis_slot_map *map;
    if (sl__redis_slot_map_new(reply, host, &map) != 0)
        return -1;
    sl__redis_slot_map_free(cl->map);
    cl->map = map;
    return 0;
}

void sd_cluster_sent(sd_cluster *cl, const redisAsyncContext *ac)
{
    link *l = link_of(cl, ac);
    if (l != NULL && l->owed++ == 0)
        l->waiting_ms = uv_now(cl->loop);
}

void sd_cluster_replied(sd_cluster *cl, const redisAsyncContext *ac)
{
    link *l = link_of(cl, ac);
    if (l != NULL && l->owed > 0) {
        l->owed--;
        l->waiting_ms = uv_now(cl->loop);
    }
}

/* Has the link owed a reply for the whole timeout? */
static int silent(const sd_cluster *cl, const link *l, uint64_t now)
{
    return l->owed > 0 && now >= l->waiting_ms + cl->timeout_ms;
}

static void refresh_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_cluster *cl = priv;
    redisReply *r = reply;
    sd_cluster_replied(cl, ac);
    cl->refreshing = 0;
    if (r != NULL && r->type != REDIS_REPLY_ERROR && !cl->closing &&
        sd_cluster_set_map(cl, r, sd_cluster_host_of(cl, ac)) != 0)
        sl__log(SL__LOG_WARN, NULL,
                "redis cluster: unexpected CLUSTER SLOTS reply");
}

void sd_cluster_refresh(sd_cluster *cl)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    redisAsyncContext *ac = NULL;
    int port;

    /* At most one in flight (one unanswered for REFRESH_LOST_MS is given
     * up), and one per REFRESH_MIN_MS: with every node down, each failed
     * call asks for one. */
    uint64_t now = uv_now(cl->loop);
    if (cl->closing || now < cl->last_refresh_ms + REFRESH_MIN_MS ||
        (cl->refreshing && now < cl->last_refresh_ms + REFRESH_LOST_MS))
        return;
    cl->last_refresh_ms = now;
    /* Any node answers for the whole cluster: a connected link that is
     * not silent if there is one, else the next probe target. */
    for (size_t i = 0; i < cl->n_links && ac == NULL; i++)
        if (cl->links[i].connected && !silent(cl, &cl->links[i], now))
            ac = cl->links[i].ac;
    if (ac == NULL) {
        const char *host = sd_cluster_probe_target(cl, &port);
        ac = sd_cluster_link_to(cl, host, port);
    }
    if (ac != NULL &&
        redisAsyncCommandArgv(ac, refresh_cb, cl, 2, argv, NULL) == REDIS_OK) {
        sd_cluster_sent(cl, ac);
        cl->refreshing = 1;
    }
}

const char *sd_cluster_probe_target(sd_cluster *cl, int *port)
{
    /* Round robin over the seeds and the masters the map knows, so that
     * a seed that died does not keep the breaker open. */
    size_t mapped = cl->map ? sl__redis_slot_map_nodes(cl->map) : 0;
    size_t i = cl->next_probe++ % (cl->ep.n_seeds + mapped);
    if (i < cl->ep.n_seeds) {
        *port = cl->ep.seed_ports[i];
        return cl->ep.seed_hosts[i];
    }
    return sl__redis_slot_map_host(cl->map, i - cl->ep.n_seeds, port);
}

void sd_cluster_timed_out(sd_cluster *cl)
{
    uint64_t now = uv_now(cl->loop);
    for (size_t i = 0; i < cl->n_links;) {
        link *l = &cl->links[i];
        if (silent(cl, l, now)) {
            redisAsyncContext *ac = l->ac;
            forget_link(cl, l); /* the last link moves to i */
            redisAsyncFree(ac);
        } else {
            i++;
        }
    }
    sd_cluster_refresh(cl);
}

void sd_cluster_close(sd_cluster *cl)
{
    /* Freeing a link calls its pending callbacks (redis_async_send.c's fail
     * their parts) and its disconnect callback, which must not refresh. */
    cl->closing = 1;
    while (cl->n_links > 0) {
        redisAsyncContext *ac = cl->links[cl->n_links - 1].ac;
        forget_link(cl, &cl->links[cl->n_links - 1]);
        redisAsyncFree(ac);
    }
    cl->closing = 0;
}

void sd_cluster_free(sd_cluster *cl)
{
    if (cl == NULL)
        return;
    sd_cluster_close(cl);
    sl__redis_slot_map_free(cl->map);
    free(cl->links);
    free(cl);
}
