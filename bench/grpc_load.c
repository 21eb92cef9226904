/*
 * grpc_load.c - an open-loop, paced load generator for unary gRPC calls
 * over h2c (nghttp2's client session on epoll, one thread), for the p99
 * of sluice's gRPC door at a given rate (bench/grpc_p99.sh).
 *
 *   grpc_load -r RATE -d SECONDS [-w WARMUP] [-c CONNS] [-v] \
 *             HOST:PORT PATH REQUEST_FILE
 *
 * Call i is due at start + i / RATE, on connection i % CONNS: the calls
 * are spaced evenly in time and dealt round the connections, each of
 * which carries as many concurrent streams as the calls in flight need
 * (up to the server's SETTINGS_MAX_CONCURRENT_STREAMS; nghttp2 holds the
 * rest until a stream closes).  A call is sent when it is due whether or
 * not earlier ones were answered (open loop), and its latency runs from
 * the time it was due, not from when it went out: a stall of the server,
 * or of this program, counts against every call that should have gone
 * out meanwhile (no coordinated omission).  Between due times the loop
 * sleeps in epoll_pwait2 with a nanosecond timeout, waking for answers.
 *
 * h2load --rps, by contrast, starts a batch of requests per connection
 * on a timer tick and times each from its own submission; the calls of a
 * batch queue behind one another at the server, so its percentiles
 * include the batches' own queueing (docs/benchmarks.md).
 *
 * REQUEST_FILE holds the gRPC-framed request (the 5-byte prefix and the
 * message), sent as one DATA frame with END_STREAM.  A call counts as
 * answered when its stream closes without error with grpc-status 0.
 * Calls due in the first WARMUP seconds (default 1) are sent but not
 * measured.  Prints: the rate asked and achieved, answered and failed
 * calls, latency percentiles from the due time (p50 p90 p99 p99.9 max),
 * the same from the send time, and how late this program sent (its own
 * share).  -v prints the one line as key=value pairs for scripts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#define OUT_CAP (256 * 1024)

typedef struct call {
    int64_t due, sent, done; /* CLOCK_MONOTONIC ns; 0: not yet */
    int grpc_status;         /* -1 until the trailers say */
} call;

typedef struct conn {
    int fd;
    nghttp2_session *ng;
    uint8_t out[OUT_CAP];
    size_t out_len, out_off;
    int writable; /* the socket took everything last time */
} conn;

static struct {
    const uint8_t *req;
    size_t req_len;
    const char *authority, *path;
    size_t answered, failed;
} g;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "grpc_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- nghttp2 callbacks ---- */

static ssize_t read_req(nghttp2_session *ng, int32_t id, uint8_t *buf,
                        size_t length, uint32_t *flags,
                        nghttp2_data_source *src, void *user)
{
    (void)ng, (void)id, (void)src, (void)user;
    if (length < g.req_len)
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* checked at start: <16 KB */
    memcpy(buf, g.req, g.req_len);
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)g.req_len;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    if (namelen != 11 || memcmp(name, "grpc-status", 11) != 0)
        return 0;
    call *c = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (c != NULL) {
        int v = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            v = v * 10 + (value[i] - '0');
        c->grpc_status = v;
    }
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error, void *user)
{
    (void)user;
    call *c = nghttp2_session_get_stream_user_data(ng, id);
    if (c == NULL)
        return 0;
    c->done = now_ns();
    if (error == 0 && c->grpc_status == 0)
        g.answered++;
    else {
        g.failed++;
        c->done = -1;
    }
    return 0;
}

/* ---- connections ---- */

static void conn_open(conn *k, const struct addrinfo *ai,
                      nghttp2_session_callbacks *cb, int ep)
{
    k->fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (k->fd < 0 || connect(k->fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("connect");
    int one = 1;
    setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(k->fd, F_SETFL, O_NONBLOCK);
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_http_messaging(opt, 1);
    if (nghttp2_session_client_new2(&k->ng, cb, k, opt) != 0)
        die("nghttp2_session_client_new2");
    nghttp2_option_del(opt);
    /* Windows as large as they go: the load is never held by flow
     * control, as a gRPC client's is not for messages this small. */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (1u << 31) - 1},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, iv, 2);
    nghttp2_session_set_local_window_size(k->ng, NGHTTP2_FLAG_NONE, 0,
                                          (1 << 30));
    k->writable = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
                             .data.ptr = k};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, k->fd, &ev) != 0)
        die("epoll_ctl");
}

/* Everything the session has, written as far as the socket takes it. */
static void conn_flush(conn *k)
{
    for (;;) {
        while (k->out_len < OUT_CAP) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(k->ng, &data);
            if (n < 0) {
                fprintf(stderr, "grpc_load: %s\n", nghttp2_strerror((int)n));
                exit(1);
            }
            if (n == 0)
                break;
            if ((size_t)n > OUT_CAP - k->out_len) {
                /* Rare: keep the rest for the next round. */
                fprintf(stderr, "grpc_load: output buffer full\n");
                exit(1);
            }
            memcpy(k->out + k->out_len, data, (size_t)n);
            k->out_len += (size_t)n;
        }
        if (k->out_off == k->out_len)
            return;
        ssize_t w = write(k->fd, k->out + k->out_off, k->out_len - k->out_off);
        if (w < 0) {
            if (errno == EAGAIN) {
                k->writable = 0;
                return;
            }
            die("write");
        }
        k->out_off += (size_t)w;
        if (k->out_off == k->out_len)
            k->out_off = k->out_len = 0;
    }
}

static void conn_read(conn *k)
{
    static uint8_t buf[256 * 1024];
    for (;;) {
        ssize_t n = read(k->fd, buf, sizeof(buf));
        if (n == 0) {
            fprintf(stderr, "grpc_load: the server closed a connection\n");
            exit(1);
        }
        if (n < 0) {
            if (errno == EAGAIN)
                return;
            die("read");
        }
        if (nghttp2_session_mem_recv(k->ng, buf, (size_t)n) < 0) {
            fprintf(stderr, "grpc_load: protocol error from the server\n");
            exit(1);
        }
    }
}

static void submit(conn *k, call *c)
{
    const char *ct = "application/grpc", *te = "trailers";
#define NV(n, v)                                                               \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),                 \
     NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}
    nghttp2_nv nva[] = {NV(":method", "POST"),         NV(":scheme", "http"),
                        NV(":authority", g.authority), NV(":path", g.path),
                        NV("content-type", ct),        NV("te", te)};
    nghttp2_data_provider prd = {.read_callback = read_req};
    c->grpc_status = -1;
    c->sent = now_ns();
    if (nghttp2_submit_request(k->ng, NULL, nva, 6, &prd, c) < 0) {
        fprintf(stderr, "grpc_load: nghttp2_submit_request failed\n");
        exit(1);
    }
}

/* ---- percentiles ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile (nearest rank) of n sorted values, in ms. */
static double pct(const int64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p / 100 * (double)n + 0.999999);
    if (i < 1)
        i = 1;
    if (i > n)
        i = n;
    return (double)v[i - 1] / 1e6;
}

static void usage(void)
{
    fprintf(stderr, "usage: grpc_load -r RATE -d SECONDS [-w WARMUP] "
                    "[-c CONNS] [-v] HOST:PORT PATH REQUEST_FILE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double rate = 0, dur = 0, warm = 1;
    int conns = 4, kv = 0, o;
    while ((o = getopt(argc, argv, "r:d:w:c:v")) != -1) {
        switch (o) {
        case 'r':
            rate = atof(optarg);
            break;
        case 'd':
            dur = atof(optarg);
            break;
        case 'w':
            warm = atof(optarg);
            break;
        case 'c':
            conns = atoi(optarg);
            break;
        case 'v':
            kv = 1;
            break;
        default:
            usage();
        }
    }
    if (argc - optind != 3 || rate <= 0 || dur <= 0 || warm < 0 || conns < 1)
        usage();
    char *hostport = argv[optind], *colon = strrchr(hostport, ':');
    if (colon == NULL)
        usage();
    g.authority = hostport;
    g.path = argv[optind + 1];
    FILE *f = fopen(argv[optind + 2], "rb");
    static uint8_t req[16000];
    if (f == NULL)
        die(argv[optind + 2]);
    g.req_len = fread(req, 1, sizeof(req), f);
    if (!feof(f) || g.req_len < 5) {
        fprintf(stderr, "grpc_load: the request must be 5 to 16000 bytes\n");
        return 2;
    }
    fclose(f);
    g.req = req;

    char host[256];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(stderr, "grpc_load: cannot resolve %s\n", hostport);
        return 1;
    }
    /* Timer slack of 1 ns: wake-ups on time, not up to 50 us late. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    int ep = epoll_create1(0);
    conn *k = calloc((size_t)conns, sizeof(*k));
    if (k == NULL || ep < 0)
        die("setup");
    for (int i = 0; i < conns; i++) {
        conn_open(&k[i], ai, cb, ep);
        conn_flush(&k[i]);
    }
    freeaddrinfo(ai);

    size_t total = (size_t)(rate * (warm + dur));
    size_t first = (size_t)(rate * warm); /* the first measured call */
    call *calls = calloc(total, sizeof(*calls));
    int64_t *lat = calloc(total, sizeof(*lat));
    if (calls == NULL || lat == NULL)
        die("calloc");
    double interval = 1e9 / rate;
    /* Connections and SETTINGS settle for 100 ms first. */
    int64_t start = now_ns() + 100000000;
    for (size_t i = 0; i < total; i++)
        calls[i].due = start + (int64_t)((double)i * interval);
    int64_t end = calls[total - 1].due + 2000000000LL; /* stragglers' wait */
    size_t next = 0;
    struct epoll_event evs[64];
    for (;;) {
        int64_t t = now_ns();
        for (; next < total && calls[next].due <= t; next++)
            submit(&k[next % (size_t)conns], &calls[next]);
        for (int i = 0; i < conns; i++)
            if (k[i].writable && nghttp2_session_want_write(k[i].ng))
                conn_flush(&k[i]);
        if (next == total && (g.answered + g.failed == total || t > end))
            break;
        int64_t wait = next < total ? calls[next].due - t : 10000000;
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        int n = epoll_pwait2(ep, evs, 64, &ts, NULL);
        if (n < 0 && errno != EINTR)
            die("epoll_pwait2");
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (evs[i].events & EPOLLOUT)
                c->writable = 1;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(c);
        }
    }

    /* The measured calls: due after the warm-up. */
    size_t n_ok = 0, n_sent = 0, n_lost = 0;
    int64_t *late = calloc(total, sizeof(*late));
    int64_t *svc = calloc(total, sizeof(*svc));
    int64_t last_done = 0;
    for (size_t i = first; i < total; i++) {
        call *c = &calls[i];
        if (c->sent)
            late[n_sent++] = c->sent - c->due;
        if (c->done <= 0) {
            n_lost++;
            continue;
        }
        lat[n_ok] = c->done - c->due;
        svc[n_ok++] = c->done - c->sent;
        if (c->done > last_done)
            last_done = c->done;
    }
    qsort(lat, n_ok, sizeof(*lat), cmp_i64);
    qsort(svc, n_ok, sizeof(*svc), cmp_i64);
    qsort(late, n_sent, sizeof(*late), cmp_i64);
    double span = n_ok ? (double)(last_done - calls[first].due) / 1e9 : 1;
    double achieved = (double)n_ok / span;
    if (kv)
        printf("rate=%.0f achieved=%.0f answered=%zu failed=%zu "
               "p50=%.3f p90=%.3f p99=%.3f p999=%.3f max=%.3f "
               "sent_p50=%.3f sent_p99=%.3f late_p99=%.3f late_max=%.3f\n",
               rate, achieved, n_ok, n_lost, pct(lat, n_ok, 50),
               pct(lat, n_ok, 90), pct(lat, n_ok, 99), pct(lat, n_ok, 99.9),
               pct(lat, n_ok, 100), pct(svc, n_ok, 50), pct(svc, n_ok, 99),
               pct(late, n_sent, 99), pct(late, n_sent, 100));
    else {
        printf("rate asked %.0f/s, achieved %.0f/s over %.1f s on %d "
               "connections (%zu answered, %zu failed or unanswered)\n",
               rate, achieved, span, conns, n_ok, n_lost);
        printf("latency from due time (ms): p50 %.3f  p90 %.3f  p99 %.3f  "
               "p99.9 %.3f  max %.3f\n",
               pct(lat, n_ok, 50), pct(lat, n_ok, 90), pct(lat, n_ok, 99),
               pct(lat, n_ok, 99.9), pct(lat, n_ok, 100));
        printf("latency from send time (ms): p50 %.3f  p99 %.3f\n",
               pct(svc, n_ok, 50), pct(svc, n_ok, 99));
        printf("sent late by (ms, this program's share): p99 %.3f  max %.3f\n",
               pct(late, n_sent, 99), pct(late, n_sent, 100));
    }
    for (int i = 0; i < conns; i++) {
        nghttp2_session_del(k[i].ng);
        close(k[i].fd);
    }
    nghttp2_session_callbacks_del(cb);
    free(k);
    free(calls);
    free(lat);
    free(late);
    free(svc);
    return n_lost > 0 ? 1 : 0;
}
