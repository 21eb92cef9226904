/*
 * service.c - an HTTP server on the daemon's machinery for the commands
 * that decide nothing (service.h).  It is the daemon's process cut to
 * one thread: a server whose settings are the caps, one worker whose
 * loop is the caller's, and serve's HTTP connection (http_conn.c) on the
 * connection machine (runtime/conn.c), so these servers have the
 * daemon's bounds, timeouts, pipelining and answers, and whatever
 * transport the machine gains.
 */
#include <stdio.h>
#include <stdlib.h>

#include "http/http_conn.h"
#include "http/service.h"
#include "runtime/conn.h"
#include "runtime/peers.h"

struct sv_http_service {
    sv_server server;
    sv_worker worker;
    sv_frontend frontend; /* carries ctx */
    const sv_routes *routes;
};

void *sv_http_service_ctx(const sv_worker *w)
{
    return w->server->cfg.frontend->ctx;
}

static void connection_cb(uv_stream_t *listener, int status)
{
    sv_http_service *s = listener->data;
    if (status == 0)
        sv_http_accept(&s->worker, listener, s->routes);
}

sv_http_service *sv_http_service_new(const struct sockaddr *addr,
                                     const sv_http_service_opts *o, char *err,
                                     size_t errlen)
{
    sv_http_service *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->routes = o->routes;
    s->frontend.ctx = o->ctx;
    sv_config *cfg = &s->server.cfg;
    cfg->frontend = &s->frontend;
    cfg->max_connections = o->max_connections;
    cfg->max_connections_per_address = o->max_connections_per_address;
    if (o->max_connections_per_address > 0 &&
        (s->server.peers = sv_peers_new(o->max_connections_per_address)) ==
            NULL) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    cfg->max_header_bytes = o->max_header_bytes;
    cfg->max_body_bytes = o->max_body_bytes;
    cfg->idle_timeout_ms = o->idle_timeout_ms;
    cfg->read_timeout_ms = o->read_timeout_ms;
    s->server.tls_at[0].tls = o->tls;
    s->server.tls_at[0].name = "http";
    s->server.workers = &s->worker;
    s->server.n_workers = s->server.n_public = 1;
    sv_worker *w = &s->worker;
    w->server = &s->server;
    uv_loop_init(&w->loop);
    sv_readers_init(&w->readers, &w->loop, w->read_buf, sizeof(w->read_buf));
    uv_tcp_init(&w->loop, &w->listener);
    w->listener.data = s;
    int rc = uv_tcp_bind(&w->listener, addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&w->listener, 511, connection_cb);
    if (rc != 0) {
        snprintf(err, errlen, "%s", uv_strerror(rc));
        sv_http_service_stop(s);
        sv_http_service_run(s);
        sv_http_service_free(s);
        return NULL;
    }
    return s;
}

uv_loop_t *sv_http_service_loop(sv_http_service *s)
{
    return &s->worker.loop;
}

int sv_http_service_port(sv_http_service *s)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&s->worker.listener, (struct sockaddr *)&ss,
                           &len) != 0)
        return -1;
    return ntohs(ss.ss_family == AF_INET6
                     ? ((struct sockaddr_in6 *)&ss)->sin6_port
                     : ((struct sockaddr_in *)&ss)->sin_port);
}

void sv_http_service_run(sv_http_service *s)
{
    uv_run(&s->worker.loop, UV_RUN_DEFAULT);
}

void sv_http_service_stop(sv_http_service *s)
{
    sv_worker *w = &s->worker;
    if (w->stopping)
        return;
    w->stopping = 1;
    uv_close((uv_handle_t *)&w->listener, NULL);
    for (sv_conn *c = w->conns, *next; c != NULL; c = next) {
        next = c->next;
        sv_conn_close(c);
    }
    if (sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

void sv_http_service_free(sv_http_service *s)
{
    if (s == NULL)
        return;
    uv_loop_close(&s->worker.loop);
    sv_peers_free(s->server.peers);
    free(s);
}
