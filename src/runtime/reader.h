/*
 * reader.h - a thread's client sockets read first come, first served.
 */
#ifndef SV_READER_H
#define SV_READER_H

#include <stddef.h>
#include <sys/types.h>

#include <uv.h>

#include "runtime/buf.h"

/* One thread's: its sockets in an edge-triggered epoll of its own, in
 * the loop as one uv_poll; and the buffer every read lands in. */
typedef struct sv_readers {
    uv_loop_t *loop;
    uv_poll_t poll;
    int epfd; /* -1 until the first socket */
    char *buf;
    size_t len;
} sv_readers;

typedef struct sv_reader sv_reader;

/* What a read brought: nread bytes at data (in the thread's buffer, valid
 * until the callback returns), UV_EOF, or another negative libuv error
 * (also when the socket could not be watched: the owner closes it). */
typedef void (*sv_read_cb)(sv_reader *r, ssize_t nread, const char *data);

struct sv_reader {
    sv_readers *all;
    uv_tcp_t *tcp;
    sv_read_cb cb;
    int reading; /* reads wanted */
    int eof;     /* the peer sent all it will */
};

void sv_readers_init(sv_readers *all, uv_loop_t *loop, char *buf, size_t len);
/* Once no socket is left (on stop). */
void sv_readers_close(sv_readers *all);

/* Starts reading tcp: 0, or -1. */
int sv_reader_start(sv_readers *all, sv_reader *r, uv_tcp_t *tcp,
                    sv_read_cb cb);
/* Reads wanted or not: 0, or -1 (the owner closes the socket).  Turned
 * on, what came meanwhile is read at the next poll. */
int sv_reader_set(sv_reader *r, int on);

/* Bytes read while the connection's parser is paused (a request waits on
 * the store, or its answer), kept to parse when it resumes: appended to
 * stash.  Returns 0; 1 when the stash holds more than cap bytes (stop
 * reading until it is parsed); -1 when memory ran out (close). */
int sv_reader_keep(sv_buf *stash, const char *data, size_t len, size_t cap);

#endif
