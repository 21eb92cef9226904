/*
 * sentinel.c - a thread's question to the Sentinels of a
 * redis-sentinel:// store: where is the master now?  Asked before each
 * connection to the master (redis_async.c's probe), of one Sentinel at a
 * time on the thread's loop: AUTH with the Sentinels' credentials and
 * SENTINEL get-master-addr-by-name, pipelined behind the connect; a
 * Sentinel that cannot be reached or does not know the master passes the
 * question to the next.  The probe's timer bounds the whole question.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/layer.h"

struct sd_sentinel {
    uv_loop_t *loop;
    sl__redis_endpoint ep; /* the store's: strings borrowed */
    size_t next, asked;    /* the Sentinel to ask next; how many were */
    redisAsyncContext *ac; /* the question in flight */
    sd_sentinel_done done; /* NULL once cancelled */
    void *priv;
    char why[256]; /* the last Sentinel's failure */
    int auth_failed; /* the Sentinel refused AUTH: said in why */
};

static int ask(sd_sentinel *q);

/* A refused AUTH is the reason the question fails (NOAUTH), and the one
 * worth saying: a wrong --redis-sentinel-password-file. */
static void auth_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_sentinel *q = priv;
    const redisReply *r = reply;
    (void)ac;
    if (q->done != NULL && r != NULL && r->type == REDIS_REPLY_ERROR) {
        snprintf(q->why, sizeof(q->why), "sentinel %s:%d: AUTH: %s",
                 q->ep.sentinel_hosts[q->next], q->ep.sentinel_ports[q->next],
                 r->str);
        q->auth_failed = 1;
    }
}

/* The answer, or the question to the next Sentinel.  hiredis calls this
 * for every question it was given, with no reply when the connection
 * failed or was dropped, so q lives until then. */
static void answer_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    sd_sentinel *q = priv;
    char host[256];
    int port = 0;
    size_t which = q->next;

    q->ac = NULL;
    if (q->done == NULL) { /* cancelled */
        free(q);
        return;
    }
    if (q->auth_failed)
        q->auth_failed = 0; /* why says so already */
    else if (reply == NULL && ac->errstr != NULL && ac->errstr[0] != '\0')
        snprintf(q->why, sizeof(q->why), "sentinel %s:%d: %s",
                 q->ep.sentinel_hosts[which], q->ep.sentinel_ports[which],
                 ac->errstr);
    else if (sl__redis_sentinel_master(&q->ep, reply, host, sizeof(host), &port,
                                       q->why, sizeof(q->why)) == 0) {
        redisAsyncFree(ac); /* deferred by hiredis until this returns */
        q->done(q->priv, host, port, which, NULL);
        free(q);
        return;
    }
    if (reply != NULL)
        redisAsyncFree(ac);
    q->next = (q->next + 1) % q->ep.n_sentinels;
    (void)ask(q);
}

/* 0 with the question in flight, or -1 when every Sentinel failed at
 * once: done was called and q freed. */
static int ask(sd_sentinel *q)
{
    const char *argv[3];
    size_t lens[3];
    int argc = sl__redis_sentinel_args(&q->ep, argv, lens);
    sl__redis_endpoint sep = {.user = q->ep.sentinel_user,
                              .password = q->ep.sentinel_password};
    sl__redis_handshake hs;
    redisAsyncContext *ac;

    while (q->asked++ < q->ep.n_sentinels) {
        const char *host = q->ep.sentinel_hosts[q->next];
        ac = redisAsyncConnect(host, q->ep.sentinel_ports[q->next]);
        if (ac != NULL && !ac->err &&
            sd_link_attach(ac, q->loop, q->ep.tls, host) == 0) {
            sl__redis_handshake_init(&hs, &sep, 0); /* AUTH, if any */
            for (size_t i = 0; i < hs.n; i++)
                redisAsyncCommandArgv(ac, auth_cb, q, hs.cmd[i].argc,
                                      hs.cmd[i].argv, hs.cmd[i].lens);
            if (redisAsyncCommandArgv(ac, answer_cb, q, argc, argv, lens) ==
                REDIS_OK) {
                q->ac = ac;
                return 0;
            }
        }
        if (ac != NULL)
            redisAsyncFree(ac);
        q->next = (q->next + 1) % q->ep.n_sentinels;
    }
    q->done(q->priv, NULL, 0, 0, q->why[0] ? q->why : "no Sentinel answered");
    free(q);
    return -1;
}

sd_sentinel *sd_sentinel_ask(uv_loop_t *loop, const sl__redis_endpoint *ep,
                             size_t first, sd_sentinel_done done, void *priv)
{
    sd_sentinel *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        done(priv, NULL, 0, 0, "out of memory");
        return NULL;
    }
    q->loop = loop;
    q->ep = *ep;
    q->next = first % ep->n_sentinels;
    q->done = done;
    q->priv = priv;
    return ask(q) == 0 ? q : NULL;
}

void sd_sentinel_cancel(sd_sentinel *q)
{
    q->done = NULL;
    if (q->ac != NULL)
        redisAsyncFree(q->ac); /* answer_cb, with no reply, frees q */
}
