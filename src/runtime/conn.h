/*
 * conn.h - the connection machine: one accepted connection's life, the
 * same for every door (serve's HTTP API, the admin and metrics
 * listeners, gRPC, the Redis protocol, the proxy's clients).
 *
 * The machine owns what every door used to write for itself: the counted
 * accept (--max-connections, --max-connections-per-address), the socket
 * and its deadline timer, the thread's list of open connections, reading
 * (the thread's reader, reader.c), output gathered in an outbox and sent
 * with backpressure (send.c), the lingering close after an answer to a
 * request that could not be read, closing and freeing, and the close of
 * idle connections on stop.  A door brings only its protocol: a type
 * (sv_conn_type) of callbacks, and a struct of its own whose first
 * member is the sv_conn.
 *
 * Every byte a connection reads and writes passes here, so that a
 * transport under all doors is written in one place: the connections of
 * a listener with a certificate (--tls-cert, or its own) speak TLS
 * (tls.h), and a door opens once the handshake is done, reading and
 * writing plain text as without.
 */
#ifndef SV_CONN_H
#define SV_CONN_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "runtime/deadline.h"
#include "runtime/reader.h"
#include "runtime/send.h"
#include "runtime/tls.h"
#include "runtime/worker.h"

typedef struct sv_conn sv_conn;

/* What a door does with its connections; const, one per door. */
typedef struct sv_conn_type {
    size_t size; /* the door's struct, whose first member is the sv_conn */
    /* Output waiting for the client beyond which reading stops until
     * half of it is written; 0: the door weighs it itself. */
    size_t max_pending;
    size_t keep_out; /* the outbox's buffer is kept up to this size */
    /* Accepted and counted: set up the protocol with the accepter's arg
     * (0), or -1 to close. */
    int (*open)(sv_conn *c, void *arg);
    /* nread bytes at data (the thread's read buffer, valid until the
     * callback returns), or UV_EOF or another libuv error (the client's
     * end: the door decides when to close). */
    void (*read)(sv_conn *c, ssize_t nread, const char *data);
    /* The deadline passed (not while lingering: the machine closes). */
    void (*timeout)(sv_conn *c);
    /* A write completed and the connection goes on (may be NULL). */
    void (*written)(sv_conn *c);
    /* Reading may resume after backpressure: nothing of the door's own
     * holds it (may be NULL: always). */
    int (*may_read)(sv_conn *c);
    /* Closing: give up what waits outside the connection (a decision on
     * the store), now, since the wait could end before the free (may be
     * NULL). */
    void (*closing)(sv_conn *c);
    /* Freeing: release the door's own buffers (may be NULL). */
    void (*release)(sv_conn *c);
    /* On stop: whether the connection is idle and closes now; one that
     * is not finishes what it has, then closes (NULL: the door's
     * stop() does it). */
    int (*idle)(sv_conn *c);
    /* Under TLS: what the listener speaks, for ALPN (NULL:
     * nothing said), and the answer, in plain text, to a client that
     * sends plain text to it (NULL: the connection just closes). */
    const sv_tls_alpn *alpn;
    const char *plaintext_answer;
} sv_conn_type;

struct sv_conn {
    uv_tcp_t tcp; /* first: a handle pointer is a connection pointer */
    sv_deadline timer;
    sv_worker *w;
    const sv_conn_type *type;
    sv_conn **list; /* the open connections it is in */
    sv_conn *prev, *next;
    sv_reader reader;
    sv_outbox ob; /* what goes to the client: ob.out, then sv_conn_flush() */
    uv_shutdown_t shutdown;
    /* A handle of the door's own (a timer), closed with the connection;
     * NULL: none. */
    uv_handle_t *extra;
    int handles_open;
    int opened;    /* opened by its door: the door's hooks may run */
    void *open_arg; /* the door's, until it is opened (after a handshake) */
    /* TLS: its listener's (its context and counts; set once accepted);
     * the connection's, over memory BIOs (NULL: plain text); its
     * handshake done; its records on their way out (the outbox sends
     * them, its `out` holds the door's plain text meanwhile); and its
     * place among the thread's connections whose decrypted bytes wait
     * for the door to read again. */
    sv_tls_listener *tls;
    SSL *ssl;
    int tls_open, tls_shut, tls_todo;
    sv_buf tls_out;
    sv_conn *tls_next;
    int want;      /* the door wants reads (sv_conn_set_reading) */
    int closing;   /* no more requests: finish the writes, then end */
    int lingering; /* 1: end by lingering; 2: lingering now */
    int paused;    /* reading stopped: the client is behind on output */
};

/* Accepts a client of listener onto w as a connection of type t, in
 * *list, opened with arg; a client over a cap is closed at once (a
 * prompt close, not a hang in the backlog).  Returns the connection, or
 * NULL. */
sv_conn *sv_conn_accept(sv_worker *w, uv_stream_t *listener, sv_conn **list,
                        const sv_conn_type *t, void *arg);

/* Closes now, whatever is unsent. */
void sv_conn_close(sv_conn *c);
/* No more requests: once the writes are done, the connection ends, and
 * with linger set it first sends its FIN and reads and drops what still
 * comes until the client closes or SV_LINGER_MS pass, so that no reset
 * destroys the answer (nginx's lingering close). */
void sv_conn_finish(sv_conn *c, int linger);
/* Sends what ob.out holds; applies the backpressure of max_pending, and
 * ends a finishing connection once everything is written.  0, or -1
 * when the connection closed. */
int sv_conn_flush(sv_conn *c);
/* Reads wanted or not (a door's own reasons: a request waits, its
 * read-ahead is full).  Backpressure still holds reading while paused. */
void sv_conn_set_reading(sv_conn *c, int on);
/* The connection is closing or closed: nothing more may be done with it
 * but wait for its free. */
int sv_conn_gone(const sv_conn *c);

/* On stop: each connection of *list its type calls idle closes now;
 * then the thread's reader closes once no connection is left. */
void sv_conn_close_idle(sv_worker *w, sv_conn **list);

/* The thread's connections whose decrypted bytes waited while their
 * door did not read, read now that it does (before the loop polls). */
void sv_conn_tls_resume(sv_worker *w);

/* The client's address as text in buf (INET6_ADDRSTRLEN), and whether
 * it is a loopback one: 0, or -1 when it cannot be read. */
int sv_conn_peer(sv_conn *c, char *buf, size_t len, int *loopback);

/* How long a connection lingers at most (sv_conn_finish). */
#define SV_LINGER_MS 2000

#endif
