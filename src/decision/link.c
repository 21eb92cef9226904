/*
 * link.c - one hiredis async connection on a thread's libuv loop.
 *
 * hiredis's libuv adapter restarts its poll handle on every command
 * (addWrite) and after every write (addRead), and each uv_poll_start takes
 * the socket out of epoll: a system call per call, most of them failing.
 * Only a change of interest needs the restart.  And hiredis writes a
 * connection's commands when the loop next polls it, after all of the
 * iteration's reads, so Redis and the thread would take turns instead of
 * working at once: sd_link_write_now() lets Redis start on the first
 * calls while the thread parses the next requests.  A TLS link
 * (rediss://) has hooks of its own (link_tls.c).
 */
#include <hiredis/adapters/libuv.h>

#include "decision/layer.h"

static void add_read(void *privdata)
{
    if (!(((redisLibuvEvents *)privdata)->events & UV_READABLE))
        redisLibuvAddRead(privdata);
}

static void add_write(void *privdata)
{
    if (!(((redisLibuvEvents *)privdata)->events & UV_WRITABLE))
        redisLibuvAddWrite(privdata);
}

int sd_link_attach(redisAsyncContext *ac, uv_loop_t *loop,
                   const sl__redis_tls *tls, const char *host)
{
    if (tls != NULL)
        return sd_link_tls_attach(ac, loop, tls, host);
    if (redisLibuvAttach(ac, loop) != REDIS_OK)
        return -1;
    ac->ev.addRead = add_read;
    ac->ev.addWrite = add_write;
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
