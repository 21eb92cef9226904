/*
 * server.c - the process of `sluice serve`: one libuv loop per thread,
 * each with its own listening socket on the same address (SO_REUSEPORT),
 * so the kernel spreads connections over the cores and no acceptor thread
 * becomes the bottleneck; all threads decide against one shared store.
 * The main thread owns signals and the rules watcher: SIGTERM/SIGINT stop
 * accepting and drain, SIGHUP reloads.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/api.h"
#include "server/conn.h"
#include "server/decide.h"
#include "server/metrics.h"
#include "server/rules_reload.h"

static void tick_cb(uv_prepare_t *h)
{
    ((sv_worker *)h->data)->now_stale = 1;
}

static void noop_close_cb(uv_handle_t *h)
{
    (void)h;
}

static void wake_cb(uv_async_t *a)
{
    sv_worker *w = a->data;
    sv_reload_adopt(w);
    if (w->stopping == 1) {
        w->stopping = 2;
        uv_close((uv_handle_t *)&w->listener, noop_close_cb);
        uv_close((uv_handle_t *)&w->tick, noop_close_cb);
        uv_close((uv_handle_t *)&w->wake, noop_close_cb);
        if (w->server->cfg.frontend)
            w->server->cfg.frontend->close_idle(w);
        else
            sv_conn_close_idle(w);
        sd_thread_stop(w->dec);
    }
}

static void connection_cb(uv_stream_t *server, int status)
{
    sv_worker *w = server->data;
    if (status != 0)
        return;
    if (w->server->cfg.frontend)
        w->server->cfg.frontend->accept(w);
    else
        sv_conn_accept(w);
}

static void *worker_main(void *arg)
{
    sv_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* A listening socket on the configured address with SO_REUSEPORT.  port
 * 0 is resolved by the first socket; the others bind to what it got. */
static int open_listener(const sv_config *cfg, int port, int *bound)
{
    struct sockaddr_storage ss;
    int fam;
    memset(&ss, 0, sizeof(ss));
    if (uv_ip4_addr(cfg->listen_host, port, (struct sockaddr_in *)&ss) == 0)
        fam = AF_INET;
    else if (uv_ip6_addr(cfg->listen_host, port, (struct sockaddr_in6 *)&ss) ==
             0)
        fam = AF_INET6;
    else {
        fprintf(stderr, "sluice: bad listen address: '%s'\n", cfg->listen_host);
        return -1;
    }
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&ss,
             fam == AF_INET ? sizeof(struct sockaddr_in)
                            : sizeof(struct sockaddr_in6)) ||
        listen(fd, 511)) {
        fprintf(stderr, "sluice: cannot listen on %s:%d: %s\n",
                cfg->listen_host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound = ntohs(fam == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

static sv_server *the_server;

static void stop_all(sv_server *s)
{
    for (int i = 0; i < s->n_workers; i++) {
        s->workers[i].stopping = 1;
        uv_async_send(&s->workers[i].wake);
    }
}

static void signal_cb(uv_signal_t *h, int signum)
{
    if (signum == SIGHUP) {
        const sv_frontend *fe = the_server->cfg.frontend;
        sv_reload_now(the_server);
        if (fe != NULL && fe->reload != NULL)
            fe->reload(fe->ctx);
        return;
    }
    fprintf(stderr, "sluice: %s: draining and exiting\n",
            signum == SIGTERM ? "SIGTERM" : "SIGINT");
    stop_all(the_server);
    sv_reload_stop_watch();
    uv_stop(h->loop);
}

static int cpu_count(void)
{
    uv_cpu_info_t *info;
    int n = 0;
    if (uv_cpu_info(&info, &n) == 0)
        uv_free_cpu_info(info, n);
    return n > 0 ? n : 1;
}

int sv_server_run(const sv_config *cfg)
{
    sv_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return 1;
    the_server = s;
    s->cfg = *cfg;
    pthread_mutex_init(&s->reload_lock, NULL);
    signal(SIGPIPE, SIG_IGN);
    int status = 1;

    sd_config dc = {.store_bytes = cfg->store_bytes,
                    .redis_url = cfg->redis_url,
                    .redis_tag_domain = cfg->redis_tag_domain,
                    .redis_timeout_ms = cfg->redis_timeout_ms,
                    .redis_failure = cfg->redis_failure,
                    .redis_breaker = cfg->redis_breaker,
                    .nodes = cfg->nodes};
    char err[256];
    if (sd_engine_new(&dc, &s->engine, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice serve: --store: %s\n", err);
        goto out;
    }
    s->store = sd_engine_memory(s->engine);
    if (sv_adhoc_init(s) != 0 || sv_reload_init(s) != 0)
        goto out;
    s->n_workers = cfg->threads > 0 ? cfg->threads : cpu_count();
    s->workers = calloc((size_t)s->n_workers, sizeof(*s->workers));
    if (s->workers == NULL)
        goto out;

    /* Every thread's lock exists before any thread starts: a thread
     * rendering /metrics takes all of them. */
    int port = cfg->listen_port, started = 0, locks = s->n_workers;
    for (int i = 0; i < locks; i++)
        pthread_mutex_init(&s->workers[i].series_lock, NULL);
    for (int i = 0; i < s->n_workers; i++) {
        sv_worker *w = &s->workers[i];
        w->server = s;
        w->index = i;
        w->now_stale = 1;
        int fd = open_listener(cfg, port, &port);
        if (fd < 0)
            goto stop;
        uv_loop_init(&w->loop);
        sv_readers_init(&w->readers, &w->loop, w->read_buf,
                        sizeof(w->read_buf));
        uv_tcp_init(&w->loop, &w->listener);
        uv_tcp_open(&w->listener, fd);
        w->listener.data = w;
        uv_listen((uv_stream_t *)&w->listener, 511, connection_cb);
        uv_async_init(&w->loop, &w->wake, wake_cb);
        w->wake.data = w;
        uv_prepare_init(&w->loop, &w->tick);
        w->tick.data = w;
        uv_prepare_start(&w->tick, tick_cb);
        uv_unref((uv_handle_t *)&w->tick);
        sv_reload_adopt(w);
        if ((w->dec = sd_thread_new(s->engine, &w->loop, i, &w->stats.store)) ==
            NULL)
            goto stop;
        pthread_create(&w->thread, NULL, worker_main, w);
        started++;
    }
    /* Tests and supervisors read the bound address from this line. */
    fprintf(stderr, "sluice: listening on %s:%d (%d threads)\n",
            cfg->listen_host, port, s->n_workers);
    fflush(stderr);

    uv_loop_t main_loop;
    uv_loop_init(&main_loop);
    uv_signal_t sigs[3];
    const int signums[3] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&main_loop, &sigs[i]);
        uv_signal_start(&sigs[i], signal_cb, signums[i]);
    }
    sv_reload_start_watch(s, &main_loop);
    uv_run(&main_loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&sigs[i], noop_close_cb);
    uv_run(&main_loop, UV_RUN_DEFAULT);
    uv_loop_close(&main_loop);
    status = 0;

stop:
    if (status != 0) {
        s->n_workers = started; /* only those have a loop to stop */
        stop_all(s);
    }
    /* Every thread is joined before any is released: a thread still
     * draining may be rendering /metrics, which reads all threads' series. */
    for (int i = 0; i < started; i++)
        pthread_join(s->workers[i].thread, NULL);
    for (int i = 0; i < started; i++) {
        sv_worker *w = &s->workers[i];
        uv_loop_close(&w->loop);
        sv_rules_release(w->rules);
        sv_metrics_release(w);
        sd_thread_free(w->dec);
        sv_dec_state_free(w->dec_scratch);
        sv_buf_release(&w->answer);
    }
    for (int i = 0; i < locks; i++)
        pthread_mutex_destroy(&s->workers[i].series_lock);
out:
    free(s->workers);
    sv_reload_release(s);
    sv_adhoc_release(s);
    sd_engine_free(s->engine);
    pthread_mutex_destroy(&s->reload_lock);
    free(s);
    the_server = NULL;
    return status;
}
