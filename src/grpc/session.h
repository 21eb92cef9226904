/*
 * session.h - one HTTP/2 connection speaking gRPC (h2.c), without its
 * socket: bytes in, bytes out, and calls handed to the methods of a
 * table.  The connection (grpc_conn.c) does the I/O; a fuzz target feeds
 * it bytes alone.
 */
#ifndef GR_SESSION_H
#define GR_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* The gRPC status codes used here (grpc's doc/statuscodes.md). */
enum {
    GR_OK = 0,
    GR_UNKNOWN = 2,
    GR_INVALID_ARGUMENT = 3,
    GR_DEADLINE_EXCEEDED = 4,
    GR_NOT_FOUND = 5,
    GR_RESOURCE_EXHAUSTED = 8,
    GR_UNIMPLEMENTED = 12,
    GR_INTERNAL = 13,
    GR_UNAVAILABLE = 14,
};

typedef struct gr_session gr_session;
typedef struct gr_call gr_call; /* one stream's unary call */
typedef struct gr_mem gr_mem;   /* mem.h */

/* A method: its path ("/package.Service/Method") and what runs it. */
typedef struct gr_method {
    const char *path;
    /* The request message (len bytes at msg, valid until the call is
     * answered or cancelled): answer with gr_call_reply() or
     * gr_call_fail(), at once or later. */
    void (*start)(gr_call *c, const uint8_t *msg, size_t len);
    /* The call is given up before its answer (the stream was reset, the
     * connection closed, the deadline passed): release what start()
     * kept.  The call is gone when it returns; never answer it. */
    void (*cancel)(gr_call *c);
} gr_method;

typedef struct gr_session_config {
    const gr_method *const *methods;
    size_t n_methods;
    void *ctx;                /* the methods' (gr_call_ctx) */
    size_t max_message_bytes; /* a larger request: RESOURCE_EXHAUSTED */
    size_t max_header_bytes;  /* a request's header list, as HTTP/2 counts */
    uint32_t max_streams;     /* SETTINGS_MAX_CONCURRENT_STREAMS */
    uint64_t read_timeout_ms; /* HEADERS to the request's end */
    /* An answer ready to its last byte sent (0: no bound); past it the
     * stream is reset, since a peer that never opens its flow-control
     * window would hold the stream, and the connection, for good. */
    uint64_t write_timeout_ms;
} gr_session_config;

/* Where the session's bytes go: write() appends them to the connection's
 * output (0, or -1 out of memory); wake() asks for them to be sent when
 * an answer came from outside the session's own calls (a decision that
 * waited on the store). */
typedef struct gr_session_io {
    int (*write)(void *owner, const uint8_t *data, size_t len);
    void (*wake)(void *owner);
    void *owner;
} gr_session_io;

/* A server session, its SETTINGS queued; cfg and io are copied.  NULL
 * when out of memory. */
gr_session *gr_session_new(const gr_session_config *cfg,
                           const gr_session_io *io);
/* Cancels every call still out, then frees (NULL: no-op). */
void gr_session_free(gr_session *s);

/* Bytes read from the peer, at loop time now_ms: 0, or -1 when the
 * session is over (a protocol error: send what it queued, then close). */
int gr_session_recv(gr_session *s, const uint8_t *data, size_t len,
                    uint64_t now_ms);
/* Hands what the session has to send to io->write, stopping once at
 * least max_bytes went: 0, or -1 when the session failed. */
int gr_session_send(gr_session *s, size_t max_bytes);
/* Nothing more to read or write: the connection may close. */
int gr_session_done(gr_session *s);
/* Open streams. */
size_t gr_session_streams(const gr_session *s);
/* Open streams whose request is still coming or whose call runs: those
 * the connection is busy with; an answered stream only waits for the
 * peer to take its answer. */
size_t gr_session_busy(const gr_session *s);
/* The server stops: GOAWAY, the graceful way (a notice first, then the
 * last stream once the peer answered a PING); calls under way finish. */
void gr_session_drain(gr_session *s);
/* Fails the calls whose grpc-timeout, and the requests whose read
 * timeout, passed by now_ms, and resets the streams whose answers the
 * peer did not take within the write timeout; returns the next such
 * time, 0 for none. */
uint64_t gr_session_expire(gr_session *s, uint64_t now_ms);

/* ---- for the methods ---- */

void *gr_call_ctx(const gr_call *c);
/* The method's own state for the call, kept across a wait. */
void gr_call_set_data(gr_call *c, void *data);
void *gr_call_data(const gr_call *c);
/* The session's allocator (mem.h), for the method's state: blocks taken
 * for a call go back before it is answered or when it is cancelled. */
gr_mem *gr_call_mem(const gr_call *c);
/* Room for the answer's len bytes (NULL when out of memory: fail the
 * call), then gr_call_reply() sends it with status OK. */
uint8_t *gr_call_reply_buf(gr_call *c, size_t len);
void gr_call_reply(gr_call *c);
/* An error status and its message (sent percent-encoded). */
void gr_call_fail(gr_call *c, int code, const char *message);

#endif
