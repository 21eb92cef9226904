/*
 * send.h - the one write path of serve's connections and the proxy's
 * clients and upstreams.
 */
#ifndef SV_SEND_H
#define SV_SEND_H

#include <stddef.h>
#include <uv.h>

#include "runtime/buf.h"

/* send.c: data written on s, at once if the socket takes it (`queued`
 * says some of s's bytes still wait in uv_write requests, which must go
 * first).  What it does not take is copied into an sv_send_req and
 * queued; *left says how much, and cb runs when it is written (the
 * callback frees the request).  0, or -1 when the stream failed or
 * memory ran out (the caller closes the stream). */
typedef struct sv_send_req {
    uv_write_t req;
    void *owner;
    size_t len; /* bytes this request carries */
    char data[];
} sv_send_req;

int sv_send(uv_stream_t *s, const void *data, size_t len, int queued,
            void *owner, uv_write_cb cb, size_t *left);

/* A connection's output (serve's and the proxy's): gathered in `out` and
 * sent by sv_outbox_flush() in one write, at once if the socket takes
 * it; what it does not take waits in `writes` requests holding `pending`
 * bytes, which the owner weighs to stop reading (backpressure). */
typedef struct sv_outbox {
    sv_buf out;
    size_t writes;  /* requests in flight */
    size_t pending; /* their bytes */
} sv_outbox;

/* Sends what out holds, then empties it (keeping its room, up to
 * keep_cap bytes: a streamed body may have made it large).  0, or -1
 * when the stream failed or memory ran out (the owner closes). */
int sv_outbox_flush(sv_outbox *o, uv_stream_t *s, void *owner, uv_write_cb cb,
                    size_t keep_cap);
/* In the owner's write callback (the request's `owner`): the request is
 * done, and freed. */
void sv_outbox_written(sv_outbox *o, uv_write_t *req);

#endif
