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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/conn.h"
#include "runtime/decide.h"
#include "runtime/metrics.h"
#include "runtime/peers.h"
#include "runtime/rules_reload.h"
#include "runtime/state_file.h"
#include "runtime/tls_listeners.h"
#include "log/log.h"
#include "runtime/hot.h"

static void tick_cb(uv_prepare_t *h)
{
    sv_worker *w = h->data;
    w->now_stale = 1;
    if (w->tls_todo != NULL)
        sv_conn_tls_resume(w);
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
        if (!w->control)
            uv_close((uv_handle_t *)&w->listener, noop_close_cb);
        else {
            w->server->cfg.plane->stop(w);
            if (w->server->cfg.control_stop != NULL)
                w->server->cfg.control_stop(w);
        }
        for (int d = 0; d < w->server->cfg.n_doors; d++) {
            if (w->doors[d].w == NULL)
                continue;
            uv_close((uv_handle_t *)&w->doors[d].tcp, noop_close_cb);
            w->doors[d].door->close_idle(&w->doors[d]);
        }
        uv_close((uv_handle_t *)&w->tick, noop_close_cb);
        uv_close((uv_handle_t *)&w->wake, noop_close_cb);
        w->server->cfg.frontend->close_idle(w);
        sd_thread_stop(w->dec);
    }
}

static void connection_cb(uv_stream_t *server, int status)
{
    sv_worker *w = server->data;
    if (status != 0)
        return;
    w->server->cfg.frontend->accept(w);
}

static void door_cb(uv_stream_t *server, int status)
{
    sv_listener *l = (sv_listener *)server;
    if (status == 0)
        l->door->accept(l);
}

/* Descriptors a thread holds for itself: its listeners, its epolls and
 * wake-up, its Redis connections; and the process: stdio, the rules
 * watch, files read on reload.  Generous: running short costs accepts. */
#define FDS_PER_THREAD 16
#define FDS_PROCESS 64

/*
 * Every connection is a descriptor: RLIMIT_NOFILE's soft limit, often
 * 1024, would make accept() fail with EMFILE long before
 * --max-connections, and libuv then stops accepting until one closes.
 * So the soft limit is raised to what --max-connections needs, and a
 * hard limit below that is refused at start, naming the numbers, rather
 * than discovered under load.  0, or -1 after a message.
 */
static int raise_nofile(const sv_config *cfg, int threads)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)cfg->max_connections + FDS_PROCESS +
                  (rlim_t)threads * (FDS_PER_THREAD + cfg->fds_per_thread);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr,
                "sluice: --max-connections %d needs %llu file descriptors "
                "(with %d threads), but the hard RLIMIT_NOFILE is %llu: "
                "lower --max-connections to at most %lld, or raise the hard "
                "limit (ulimit -Hn; LimitNOFILE= under systemd)\n",
                cfg->max_connections, (unsigned long long)need, threads,
                (unsigned long long)rl.rlim_max,
                (long long)rl.rlim_max -
                    (long long)(need - (rlim_t)cfg->max_connections));
        return -1;
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "sluice: cannot raise RLIMIT_NOFILE to %llu: %s\n",
                (unsigned long long)need, strerror(errno));
        return -1;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    sv_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* A listening socket on the configured address with SO_REUSEPORT.  port
 * 0 is resolved by the first socket; the others bind to what it got. */
static int open_listener(const sv_addr *addr, int port, int *bound)
{
    struct sockaddr_storage ss;
    int fam;
    memset(&ss, 0, sizeof(ss));
    if (uv_ip4_addr(addr->host, port, (struct sockaddr_in *)&ss) == 0)
        fam = AF_INET;
    else if (uv_ip6_addr(addr->host, port, (struct sockaddr_in6 *)&ss) == 0)
        fam = AF_INET6;
    else {
        sl__log(SL__LOG_ERROR, NULL, "bad listen address: '%s'", addr->host);
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
        sl__log(SL__LOG_ERROR, NULL, "cannot listen on %s:%d: %s", addr->host,
                port, strerror(errno));
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

/* Whether listener i (0 the HTTP one, 1 + d door d) is served by a
 * thread that is the control one or not. */
static int serves(const sv_config *cfg, int i, int control)
{
    return i == 0 ? !control : cfg->doors[i - 1].control == control;
}

/* Opens this thread's sockets of the HTTP listener and the doors (fds[0]
 * and fds[1 + d], -1 for those it does not serve); the first thread
 * resolves each port 0.  0, or -1 with none left open. */
static int open_listeners(const sv_config *cfg, int control, int ports[],
                          int fds[])
{
    for (int i = 0; i <= cfg->n_doors; i++) {
        const sv_addr *a = i == 0 ? &cfg->listen : &cfg->doors[i - 1].addr;
        fds[i] = -1;
        if (serves(cfg, i, control) &&
            (fds[i] = open_listener(a, ports[i], &ports[i])) < 0) {
            while (i-- > 0)
                if (fds[i] >= 0)
                    close(fds[i]);
            return -1;
        }
    }
    return 0;
}

static void listen_fd(uv_loop_t *loop, uv_tcp_t *tcp, int fd,
                      uv_connection_cb cb)
{
    uv_tcp_init(loop, tcp);
    uv_tcp_open(tcp, fd);
    uv_listen((uv_stream_t *)tcp, 511, cb);
}

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
        sv_reload_now(the_server); /* the rules, and the certificates */
        if (fe->reload != NULL)
            fe->reload(fe->ctx);
        return;
    }
    sl__log(SL__LOG_INFO, NULL, "%s: draining and exiting",
            signum == SIGTERM ? "SIGTERM" : "SIGINT");
    atomic_store(&the_server->draining, 1);
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
    const sv_frontend *fe = cfg->frontend;
    sv_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return 1;
    the_server = s;
    s->cfg = *cfg;
    pthread_mutex_init(&s->reload_lock, NULL);
    signal(SIGPIPE, SIG_IGN);
    int status = 1;

    sd_config dc = {
        .store_bytes = cfg->store_bytes,
        .command_store_bytes =
            cfg->resp_listen.host != NULL ? cfg->resp_store_bytes : 0,
        .redis_url = cfg->redis_url,
        .redis_tls = cfg->redis_tls,
        .redis_sentinel_password_file = cfg->redis_sentinel_password_file,
        .redis_tag_domain = cfg->redis_tag_domain,
        .redis_timeout_ms = cfg->redis_timeout_ms,
        .redis_failure = cfg->redis_failure,
        .redis_breaker = cfg->redis_breaker,
        .nodes = cfg->nodes,
        .negative_cache_bytes = cfg->negative_cache_bytes,
        .lease_bytes = cfg->lease_bytes,
        .threads = cfg->threads > 0 ? cfg->threads : cpu_count()};
    char err[256];
    if (cfg->negative_cache_bytes > 0 &&
        cfg->negative_cache_bytes / (size_t)dc.threads <
            SD_NEGCACHE_MIN_BYTES) {
        sl__log(SL__LOG_ERROR, "serve",
                "--negative-cache-bytes: %zu is less than %d bytes for each "
                "of the %d threads (--threads); 0 turns the cache off",
                cfg->negative_cache_bytes, SD_NEGCACHE_MIN_BYTES, dc.threads);
        goto out;
    }
    if (cfg->lease_bytes > 0 &&
        cfg->lease_bytes / (size_t)dc.threads < SD_LEASE_MIN_BYTES) {
        sl__log(SL__LOG_ERROR, "serve",
                "--lease-bytes: %zu is less than %d bytes for each of the %d "
                "threads (--threads); 0 turns leases off",
                cfg->lease_bytes, SD_LEASE_MIN_BYTES, dc.threads);
        goto out;
    }
    if (sd_engine_new(&dc, &s->engine, err, sizeof(err)) != 0) {
        sl__log(SL__LOG_ERROR, "serve", "--store: %s", err);
        goto out;
    }
    s->store = sd_engine_memory(s->engine);
    if (sv_tls_listeners_init(s) != 0)
        goto out;
    if ((fe->init != NULL && fe->init(s) != 0) || cfg->plane->init(s) != 0 ||
        sv_reload_init(s) != 0)
        goto out;
    /* Counters before clients: the state file, with the rules in force
     * to compare its limits with. */
    if (sv_state_load(s) != 0)
        goto out;
    s->n_public = cfg->threads > 0 ? cfg->threads : cpu_count();
    s->n_workers = s->n_public + (cfg->control != 0);
    if (raise_nofile(cfg, s->n_workers) != 0 ||
        (cfg->max_connections_per_address > 0 &&
         (s->peers = sv_peers_new(cfg->max_connections_per_address)) == NULL))
        goto out;
    s->workers = calloc((size_t)s->n_workers, sizeof(*s->workers));
    if (s->workers == NULL)
        goto out;
    /* SIGTERM, SIGINT and SIGHUP wait, blocked, until the main loop's
     * handlers are in place (below): a supervisor that sends one as soon
     * as the port answers (a reload right after start) must not meet the
     * default action, which kills.  The threads inherit the mask, so the
     * main thread alone takes them. */
    sigset_t stop_sigs, old_mask;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGHUP);
    if (cfg->state_file != NULL)
        sigaddset(&stop_sigs, SIGUSR1); /* a save, once handled */
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_mask);

    /* Every thread's lock exists before any thread starts: a thread
     * rendering /metrics takes all of them. */
    int started = 0, locks = s->n_workers;
    int ports[1 + SV_MAX_DOORS], fds[1 + SV_MAX_DOORS];
    ports[0] = cfg->listen.port;
    for (int d = 0; d < cfg->n_doors; d++)
        ports[1 + d] = cfg->doors[d].addr.port;
    for (int i = 0; i < locks; i++) {
        pthread_mutex_init(&s->workers[i].series_lock, NULL);
        s->workers[i].hot = sv_hot_new();
    }
    for (int i = 0; i < s->n_workers; i++) {
        sv_worker *w = &s->workers[i];
        w->server = s;
        w->index = i;
        w->now_stale = 1;
        w->control = i == s->n_public;
        if (open_listeners(cfg, w->control, ports, fds) != 0)
            goto stop;
        uv_loop_init(&w->loop);
        sv_readers_init(&w->readers, &w->loop, w->read_buf,
                        sizeof(w->read_buf));
        w->listener.data = w;
        if (fds[0] >= 0)
            listen_fd(&w->loop, &w->listener, fds[0], connection_cb);
        for (int d = 0; d < cfg->n_doors; d++) {
            if (fds[1 + d] < 0)
                continue;
            w->doors[d].w = w;
            w->doors[d].door = &s->cfg.doors[d];
            listen_fd(&w->loop, &w->doors[d].tcp, fds[1 + d], door_cb);
        }
        uv_async_init(&w->loop, &w->wake, wake_cb);
        w->wake.data = w;
        uv_prepare_init(&w->loop, &w->tick);
        w->tick.data = w;
        uv_prepare_start(&w->tick, tick_cb);
        uv_unref((uv_handle_t *)&w->tick);
        sv_reload_adopt(w);
        if ((w->dec = sd_thread_new(s->engine, &w->loop, i, &w->stats.store)) ==
                NULL ||
            (w->control &&
             (cfg->plane->start(w) != 0 ||
              (cfg->control_start != NULL && cfg->control_start(w) != 0))))
            goto stop;
        pthread_create(&w->thread, NULL, worker_main, w);
        started++;
    }
    /* Tests and supervisors read the bound address from this line. */
    sl__log(SL__LOG_INFO, NULL, "listening on %s:%d (%d threads)",
            cfg->listen.host, ports[0], s->n_public);
    for (int d = 0; d < cfg->n_doors; d++)
        sl__log(SL__LOG_INFO, NULL, "%s listening on %s:%d", cfg->doors[d].name,
                cfg->doors[d].addr.host, ports[1 + d]);
    fflush(stderr);

    uv_loop_t main_loop;
    uv_loop_init(&main_loop);
    uv_signal_t sigs[3];
    const int signums[3] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&main_loop, &sigs[i]);
        uv_signal_start(&sigs[i], signal_cb, signums[i]);
    }
    sv_state_start(s, &main_loop);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    sv_reload_start_watch(s, &main_loop);
    uv_run(&main_loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&sigs[i], noop_close_cb);
    sv_state_stop(s);
    uv_run(&main_loop, UV_RUN_DEFAULT);
    uv_loop_close(&main_loop);
    status = 0;

stop:
    if (status != 0) {
        s->n_workers = started; /* only those have a loop to stop */
        stop_all(s);
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    }
    /* Every thread is joined before any is released: a thread still
     * draining may be rendering /metrics, which reads all threads' series. */
    for (int i = 0; i < started; i++)
        pthread_join(s->workers[i].thread, NULL);
    /* Drained: no decision can follow this save. */
    if (status == 0)
        sv_state_save(s, "shutdown");
    for (int i = 0; i < started; i++) {
        sv_worker *w = &s->workers[i];
        uv_loop_close(&w->loop);
        sv_rules_release(w->rules);
        sv_metrics_release(w);
        sd_thread_free(w->dec);
        sv_dec_state_free(w->dec_scratch);
        sv_buf_release(&w->answer);
        if (fe->thread_release != NULL)
            fe->thread_release(w);
    }
    for (int i = 0; i < locks; i++) {
        pthread_mutex_destroy(&s->workers[i].series_lock);
        sv_hot_free(s->workers[i].hot);
    }
out:
    free(s->workers);
    sv_reload_release(s);
    cfg->plane->release(s);
    if (fe->release != NULL)
        fe->release(s);
    sv_peers_free(s->peers);
    sv_tls_listeners_release(s);
    sv_state_free(s);
    sd_engine_free(s->engine);
    pthread_mutex_destroy(&s->reload_lock);
    free(s);
    the_server = NULL;
    return status;
}
