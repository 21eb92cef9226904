/*
 * send.c - how every socket of the process is written (the serve
 * connections, the proxy's clients and upstreams): at once with
 * uv_try_write while nothing of the stream is queued, and only what the
 * socket does not take copied into a write request for uv_write.  An
 * idle stream's uv_write would write just as soon, but it allocates,
 * defers the callback to the next loop iteration and re-registers the
 * socket with epoll when its queue drains: an epoll_ctl per response.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/send.h"

int sv_send(uv_stream_t *s, const void *data, size_t len, int queued,
            void *owner, uv_write_cb cb, size_t *left)
{
    size_t sent = 0;
    *left = 0;
    if (len == 0)
        return 0;
    if (!queued) {
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        int n = uv_try_write(s, &b, 1);
        if (n < 0 && n != UV_EAGAIN)
            return -1;
        sent = n > 0 ? (size_t)n : 0;
        if (sent == len)
            return 0;
    }
    sv_send_req *wr = malloc(sizeof(*wr) + (len - sent));
    if (wr == NULL)
        return -1;
    wr->owner = owner;
    wr->len = len - sent;
    memcpy(wr->data, (const char *)data + sent, wr->len);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
    if (uv_write(&wr->req, s, &b, 1, cb) != 0) {
        free(wr);
        return -1;
    }
    *left = wr->len;
    return 0;
}

int sv_outbox_flush(sv_outbox *o, uv_stream_t *s, void *owner, uv_write_cb cb,
                    size_t keep_cap)
{
    size_t left;
    if (sv_send(s, o->out.data, o->out.len, o->writes > 0, owner, cb, &left) !=
        0)
        return -1;
    o->out.len = 0;
    if (o->out.cap > keep_cap)
        sv_buf_release(&o->out);
    if (left > 0) {
        o->writes++;
        o->pending += left;
    }
    return 0;
}

void sv_outbox_written(sv_outbox *o, uv_write_t *req)
{
    sv_send_req *wr = (sv_send_req *)req;
    o->writes--;
    o->pending -= wr->len;
    free(wr);
}
