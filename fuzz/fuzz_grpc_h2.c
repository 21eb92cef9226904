/*
 * fuzz_grpc_h2.c - libFuzzer target for the gRPC front end's HTTP/2
 * session (src/grpc/h2.c) with its real methods (rls.c, health.c) on the
 * memory store, no socket: the client preface and an empty SETTINGS,
 * then the input as what a client sends, in pieces whose sizes the
 * input's first byte picks (frames split across reads), the session's
 * output drained after each piece and its clock moved on (read timeouts
 * and grpc-timeouts expire), then a drain (GOAWAY) and the session
 * freed with whatever calls are still open (the rules and server of
 * serve_fixture.h).  No crash, leak or
 * out-of-bounds access; the output must be HTTP/2 frames.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/grpc.h"
#include "serve_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
    size_t len;
    uint8_t first; /* the first byte the session ever wrote */
} sink;

static int sink_write(void *owner, const uint8_t *data, size_t len)
{
    sink *k = owner;
    if (k->len == 0 && len > 0)
        k->first = data[0];
    k->len += len;
    return 0;
}

static void sink_wake(void *owner)
{
    (void)owner; /* the harness sends after every piece anyway */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t start[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                   "\0\0\0\4\0\0\0\0\0";
    static const gr_method *const methods[] = {&gr_rls_method,
                                               &gr_health_method};
    if (srv.store == NULL) {
        setup();
        srv.cfg.grpc_rate_limit_headers = 1;
    }
    if (size == 0)
        return 0;
    size_t piece = 1 + data[0] % 64;
    data++;
    size--;
    sink k = {0};
    gr_session_config cfg = {.methods = methods,
                             .n_methods = 2,
                             .ctx = &worker,
                             .max_message_bytes = 4096,
                             .max_header_bytes = 1024,
                             .max_streams = 8,
                             .read_timeout_ms = 50};
    gr_session_io io = {sink_write, sink_wake, &k};
    gr_session *s = gr_session_new(&cfg, &io);
    if (s == NULL)
        abort();
    uint64_t now = 1000;
    int ok = gr_session_recv(s, start, sizeof(start) - 1, now) == 0;
    for (size_t off = 0; ok && off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        worker.now_stale = 1;
        ok = gr_session_recv(s, data + off, n, now) == 0;
        if (gr_session_send(s, SIZE_MAX) != 0)
            ok = 0;
        now += 7;
        gr_session_expire(s, now);
    }
    gr_session_drain(s);
    gr_session_send(s, SIZE_MAX);
    /* A server session's output opens with its SETTINGS frame, whose
     * type byte is the fourth. */
    if (k.len < 9 || k.first != 0)
        __builtin_trap();
    gr_session_free(s);
    return 0;
}
