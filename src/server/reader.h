/*
 * reader.h - a thread's client sockets read first come, first served.
 */
#ifndef SL_SRV_READER_H
#define SL_SRV_READER_H

#include <stddef.h>
#include <sys/types.h>

#include <uv.h>

/* One thread's: its sockets in an edge-triggered epoll of its own, in
 * the loop as one uv_poll; and the buffer every read lands in. */
typedef struct sl_readers {
    uv_loop_t *loop;
    uv_poll_t poll;
    int epfd; /* -1 until the first socket */
    char *buf;
    size_t len;
} sl_readers;

typedef struct sl_reader sl_reader;

/* What a read brought: nread bytes at data (in the thread's buffer, valid
 * until the callback returns), UV_EOF, or another negative libuv error
 * (also when the socket could not be watched: the owner closes it). */
typedef void (*sl_read_cb)(sl_reader *r, ssize_t nread, const char *data);

struct sl_reader {
    sl_readers *all;
    uv_tcp_t *tcp;
    sl_read_cb cb;
    int reading; /* reads wanted */
    int eof;     /* the peer sent all it will */
};

void sl_readers_init(sl_readers *all, uv_loop_t *loop, char *buf,
                     size_t len);
/* Once no socket is left (on stop). */
void sl_readers_close(sl_readers *all);

/* Starts reading tcp: 0, or -1. */
int sl_reader_start(sl_readers *all, sl_reader *r, uv_tcp_t *tcp,
                    sl_read_cb cb);
/* Reads wanted or not: 0, or -1 (the owner closes the socket).  Turned
 * on, what came meanwhile is read at the next poll. */
int sl_reader_set(sl_reader *r, int on);

#endif
