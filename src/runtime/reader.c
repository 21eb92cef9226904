/*
 * reader.c - client sockets read first come, first served: in an
 * edge-triggered epoll of the thread's own, which is in the loop as one
 * uv_poll, rather than by libuv (uv_read_start), whose epoll is
 * level-triggered.  There a socket reported readable goes back on the
 * kernel's ready list at once, so the next poll scans the sockets just
 * served before those that became readable since, and a connection whose
 * next request came a little late waits a second round behind the
 * others (docs/benchmarks.md, "The order clients are served in").
 * Writes stay libuv's.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "runtime/reader.h"

/* Full reads of one socket before it goes to the back of the line. */
#define READS_PER_TURN 32

static void ready_cb(uv_poll_t *h, int status, int events);

void sv_readers_init(sv_readers *all, uv_loop_t *loop, char *buf, size_t len)
{
    all->loop = loop;
    all->epfd = -1;
    all->buf = buf;
    all->len = len;
}

void sv_readers_close(sv_readers *all)
{
    if (all->epfd >= 0 && !uv_is_closing((uv_handle_t *)&all->poll)) {
        uv_close((uv_handle_t *)&all->poll, NULL);
        close(all->epfd);
    }
}

/* Puts the socket in the epoll (EPOLL_CTL_ADD), or asks it again
 * (EPOLL_CTL_MOD), which queues it if there is something to read now:
 * an edge that came while reading was off is not lost. */
static int watch(sv_reader *r, int op)
{
    sv_readers *all = r->all;
    uv_os_fd_t fd;
    if (all->epfd < 0) {
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0 || uv_poll_init(all->loop, &all->poll, epfd) != 0) {
            if (epfd >= 0)
                close(epfd);
            return -1;
        }
        all->epfd = epfd;
        uv_poll_start(&all->poll, UV_READABLE, ready_cb);
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.ptr = r};
    if (uv_fileno((uv_handle_t *)r->tcp, &fd) != 0)
        return -1;
    return epoll_ctl(all->epfd, op, fd, &ev);
}

static int wanted(const sv_reader *r)
{
    return r->reading && !r->eof && !uv_is_closing((uv_handle_t *)r->tcp);
}

/* Reads until the socket is drained, as an edge-triggered socket must
 * be: a short read means it was, and what comes after brings a new edge
 * -- except the end of stream, whose edge may have come with the data:
 * after the peer's shutdown (hup) it is read for at once. */
static void read_some(sv_reader *r, int hup)
{
    sv_readers *all = r->all;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)r->tcp, &fd) != 0)
        return;
    for (int i = 0; i < READS_PER_TURN; i++) {
        if (!wanted(r))
            return;
        ssize_t n = read(fd, all->buf, all->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n == 0)
            r->eof = 1;
        r->cb(r,
              n > 0    ? n
              : n == 0 ? UV_EOF
                       : uv_translate_sys_error(errno),
              all->buf);
        if (n < 0 || (n < (ssize_t)all->len && !hup))
            return;
    }
    if (wanted(r) && watch(r, EPOLL_CTL_MOD) != 0)
        r->cb(r, UV_EIO, NULL);
}

static void ready_cb(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    sv_readers *all = (sv_readers *)((char *)h - offsetof(sv_readers, poll));
    struct epoll_event ev[64];
    int n = epoll_wait(all->epfd, ev, 64, 0);
    for (int i = 0; i < n; i++)
        read_some(ev[i].data.ptr,
                  (ev[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
}

int sv_reader_start(sv_readers *all, sv_reader *r, uv_tcp_t *tcp, sv_read_cb cb)
{
    *r = (sv_reader){.all = all, .tcp = tcp, .cb = cb, .reading = 1};
    return watch(r, EPOLL_CTL_ADD);
}

int sv_reader_set(sv_reader *r, int on)
{
    if (uv_is_closing((uv_handle_t *)r->tcp) || on == r->reading ||
        (on && r->eof))
        return 0;
    r->reading = on;
    return on ? watch(r, EPOLL_CTL_MOD) : 0;
}

int sv_reader_keep(sv_buf *stash, const char *data, size_t len, size_t cap)
{
    if (len > 0) /* an empty append would allocate */
        sv_buf_add(stash, data, len);
    if (stash->failed)
        return -1;
    return stash->len > cap;
}
