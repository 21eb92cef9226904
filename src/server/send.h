/*
 * send.h - the one write path of serve's connections and the proxy's
 * clients and upstreams.
 */
#ifndef SV_SEND_H
#define SV_SEND_H

#include <stddef.h>
#include <uv.h>

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

#endif
