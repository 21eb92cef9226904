/*
 * link.c - one hiredis async connection on a thread's libuv loop.
 *
 * The connection is polled here rather than by hiredis's libuv adapter,
 * for three reasons.  The adapter restarts its poll handle on every
 * command (addWrite) and after every write (addRead), and each
 * uv_poll_start takes the socket out of epoll: a system call per call,
 * most of them failing; here the poll changes only with the interest.
 * The adapter ignores a poll error, and libuv reports a refused connect
 * or a reset as one (and stops the poll): the connection would never
 * answer, where here hiredis is made to see the error at once.  And
 * hiredis writes a connection's commands when the loop next polls it,
 * after all of the iteration's reads, so Redis and the thread would take
 * turns instead of working at once: sd_link_write_now() lets Redis start
 * on the first calls while the thread parses the next requests.  A TLS
 * link (rediss://) has hooks of its own (link_tls.c).
 */
#include <stdlib.h>

#include "decision/layer.h"

typedef struct plain_link {
    uv_poll_t poll;
    redisAsyncContext *ac; /* NULL once hiredis has let go (cleanup) */
    int events;
} plain_link;

static void poll_cb(uv_poll_t *p, int status, int events);

static void set_events(plain_link *l, int events)
{
    if (l->ac != NULL && events != l->events) {
        l->events = events;
        if (events)
            uv_poll_start(&l->poll, events, poll_cb);
        else
            uv_poll_stop(&l->poll);
    }
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
    plain_link *l = p->data;
    if (l->ac == NULL)
        return;
    if (status < 0) {
        /* An error on the socket (libuv has stopped the poll): hiredis
         * finds it on its next connect check or read, and disconnects. */
        int want = l->events;
        l->events = 0;
        if (!(l->ac->c.flags & REDIS_CONNECTED))
            redisAsyncHandleWrite(l->ac);
        else
            redisAsyncHandleRead(l->ac);
        if (l->ac != NULL)
            set_events(l, want);
        return;
    }
    if (events & UV_READABLE)
        redisAsyncHandleRead(l->ac);
    if (l->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(l->ac);
}

static void add_read(void *priv)
{
    plain_link *l = priv;
    set_events(l, l->events | UV_READABLE);
}

static void del_read(void *priv)
{
    plain_link *l = priv;
    set_events(l, l->events & ~UV_READABLE);
}

static void add_write(void *priv)
{
    plain_link *l = priv;
    set_events(l, l->events | UV_WRITABLE);
}

static void del_write(void *priv)
{
    plain_link *l = priv;
    set_events(l, l->events & ~UV_WRITABLE);
}

static void close_cb(uv_handle_t *h)
{
    free(h->data);
}

static void cleanup(void *priv)
{
    plain_link *l = priv;
    l->ac = NULL;
    uv_close((uv_handle_t *)&l->poll, close_cb);
}

static const sd_link_hooks plain_hooks = {add_read, del_read, add_write,
                                          del_write, cleanup};

int sd_link_attach(redisAsyncContext *ac, uv_loop_t *loop,
                   const sl__tls_client *tls, const char *host)
{
    plain_link *l;
    if (tls != NULL)
        return sd_link_tls_attach(ac, loop, tls, host);
    if ((l = calloc(1, sizeof(*l))) == NULL)
        return -1;
    if (sd_link_hook(ac, loop, &l->poll, l, &plain_hooks) != 0) {
        free(l);
        return -1;
    }
    l->ac = ac;
    return 0;
}

void sd_link_write_now(redisAsyncContext *ac)
{
    if (ac == NULL || sdslen(ac->c.obuf) == 0)
        return;
    if (ac->ev.addWrite == add_write)
        redisAsyncHandleWrite(ac);
    else
        sd_link_tls_write_now(ac);
}
