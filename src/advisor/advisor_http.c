/*
 * advisor_http.c - the HTTP server of `sluice advisor` (advisor.h): GET
 * and HEAD /v1/recommendations with its ETag and If-None-Match, from the
 * answer in force (advisor_answer.c), on a poll() loop of at most
 * MAX_CONNS connections with bounded buffers, one request each.  Apart
 * because it is the advisor's only server I/O, on the calling thread, and
 * needs of the rest no more than av_answer_read().
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>

#include "advisor/advisor.h"
#include "sluice.h"

#define MAX_CONNS 64
#define MAX_REQUEST 8192 /* bytes of a request, head and body */
#define IDLE_MS 10000    /* a connection silent this long is closed */

static int64_t mono_ms(void)
{
    return sl_clock_monotonic() / SL_NS_PER_MS;
}

typedef struct conn {
    int fd;
    http_parser hp;
    size_t received;
    int64_t last_ms;
    char url[1024];
    size_t url_len;
    int url_long;
    char field[32];
    size_t field_len;
    int in_inm; /* the header being read is If-None-Match */
    int in_value;
    char inm[128];
    size_t inm_len;
    int done; /* the request is complete: out is being written */
    char *out;
    size_t out_len, out_off;
} conn;

static int on_url(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (c->url_len + len >= sizeof(c->url))
        c->url_long = 1;
    else {
        memcpy(c->url + c->url_len, at, len);
        c->url_len += len;
    }
    return 0;
}

static int on_field(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (c->in_value) {
        c->in_value = 0;
        c->field_len = 0;
    }
    if (c->field_len + len < sizeof(c->field)) {
        memcpy(c->field + c->field_len, at, len);
        c->field_len += len;
    } else {
        c->field_len = sizeof(c->field); /* too long: no header of ours */
    }
    return 0;
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
    conn *c = hp->data;
    if (!c->in_value) {
        c->in_value = 1;
        c->in_inm = c->field_len == 13 &&
                    strncasecmp(c->field, "If-None-Match", 13) == 0;
    }
    if (c->in_inm && c->inm_len + len < sizeof(c->inm)) {
        memcpy(c->inm + c->inm_len, at, len);
        c->inm_len += len;
    }
    return 0;
}

static int on_complete(http_parser *hp)
{
    conn *c = hp->data;
    c->done = 1;
    http_parser_pause(hp, 1);
    return 0;
}

static const http_parser_settings req_settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_message_complete = on_complete,
};

static void respond(conn *c, int status, const char *reason, const char *extra,
                    const char *body)
{
    size_t blen = body ? strlen(body) : 0;
    size_t cap = blen + 512;
    c->out = malloc(cap);
    if (c->out == NULL)
        return; /* closed without an answer */
    /* No body (a 304): no Content-Length either. */
    char length[48] = "";
    if (body != NULL)
        snprintf(length, sizeof(length), "Content-Length: %zu\r\n", blen);
    int n =
        snprintf(c->out, cap, "HTTP/1.1 %d %s\r\nConnection: close\r\n%s%s\r\n",
                 status, reason, extra ? extra : "", length);
    if (n < 0 || (size_t)n >= cap) {
        free(c->out);
        c->out = NULL;
        return;
    }
    if (body != NULL)
        memcpy(c->out + n, body, blen);
    c->out_len = (size_t)n + blen;
    c->out_off = 0;
}

#define JSON_TYPE "Content-Type: application/json\r\n"

/* Does If-None-Match (a list of entity tags, or *) name etag? */
static int matches(const char *inm, const char *etag)
{
    if (strcmp(inm, "*") == 0)
        return 1;
    size_t n = strlen(etag);
    for (const char *p = inm; (p = strstr(p, etag)) != NULL; p += n)
        if ((p == inm || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/') &&
            (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return 1;
    return 0;
}

static void answer_cb(void *priv, const char *json, const char *etag)
{
    conn *c = priv;
    char extra[160];
    if (c->inm_len > 0 && matches(c->inm, etag)) {
        snprintf(extra, sizeof(extra), "ETag: %s\r\n", etag);
        respond(c, 304, "Not Modified", extra, NULL);
        return;
    }
    snprintf(extra, sizeof(extra), "ETag: %s\r\n" JSON_TYPE, etag);
    respond(c, 200, "OK", extra, json);
    /* HEAD: the length, without the body. */
    if (c->out != NULL && c->hp.method == HTTP_HEAD)
        c->out_len -= json ? strlen(json) : 0;
}

static void route(conn *c, av_answer *a)
{
    c->url[c->url_len] = '\0';
    c->inm[c->inm_len] = '\0';
    size_t plen = strcspn(c->url, "?");
    int is_recs = !c->url_long && plen == 19 &&
                  strncmp(c->url, "/v1/recommendations", 19) == 0;
    if (!is_recs) {
        respond(c, 404, "Not Found", JSON_TYPE,
                "{\"error\":\"not found\",\"code\":\"ENOTFOUND\"}");
        return;
    }
    if (c->hp.method != HTTP_GET && c->hp.method != HTTP_HEAD) {
        respond(c, 405, "Method Not Allowed", JSON_TYPE "Allow: GET, HEAD\r\n",
                "{\"error\":\"method not allowed\",\"code\":\"EMETHOD\"}");
        return;
    }
    av_answer_read(a, answer_cb, c);
}

int av_http_listen(const char *addr, char *shown, size_t shown_len)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
        fprintf(stderr, "sluice advisor: --listen: want HOST:PORT: '%s'\n",
                addr);
        return -1;
    }
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr,
                gai_strerror(rc));
        return -1;
    }
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char port[16] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        getnameinfo((struct sockaddr *)&ss, len, NULL, 0, port, sizeof(port),
                    NI_NUMERICSERV);
    int v6 = ai->ai_family == AF_INET6;
    snprintf(shown, shown_len, "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
             port);
    freeaddrinfo(ai);
    return fd;
}

static void close_conn(conn *c)
{
    close(c->fd);
    free(c->out);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

/* Reads what c has; answers when its request is complete. */
static void conn_read(conn *c, av_answer *a)
{
    char buf[4096];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_conn(c);
        return;
    }
    c->received += (size_t)n;
    if (c->received > MAX_REQUEST) {
        respond(c, 431, "Request Header Fields Too Large", JSON_TYPE,
                "{\"error\":\"request too large\",\"code\":\"ETOOLARGE\"}");
        c->done = 1;
        return;
    }
    http_parser_execute(&c->hp, &req_settings, buf, (size_t)n);
    if (c->done) {
        route(c, a);
    } else if (HTTP_PARSER_ERRNO(&c->hp) != HPE_OK) {
        respond(c, 400, "Bad Request", JSON_TYPE,
                "{\"error\":\"malformed request\",\"code\":\"EINVAL\"}");
        c->done = 1;
    }
    if (c->done && c->out == NULL)
        close_conn(c);
}

static void conn_write(conn *c)
{
    ssize_t n =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_conn(c);
        return;
    }
    c->out_off += (size_t)n;
    if (c->out_off == c->out_len) {
        shutdown(c->fd, SHUT_WR);
        close_conn(c);
    }
}

void av_http_serve(int lfd, av_answer *a, atomic_int *stop)
{
    static conn conns[MAX_CONNS];
    for (int i = 0; i < MAX_CONNS; i++)
        conns[i].fd = -1;
    while (!atomic_load(stop)) {
        struct pollfd pfd[MAX_CONNS + 1];
        int map[MAX_CONNS + 1], n = 0;
        int free_slot = -1;
        int64_t now = mono_ms();
        for (int i = 0; i < MAX_CONNS; i++) {
            if (conns[i].fd < 0) {
                free_slot = free_slot < 0 ? i : free_slot;
                continue;
            }
            if (now - conns[i].last_ms > IDLE_MS) {
                close_conn(&conns[i]);
                free_slot = free_slot < 0 ? i : free_slot;
                continue;
            }
            pfd[n] = (struct pollfd){
                .fd = conns[i].fd, .events = conns[i].done ? POLLOUT : POLLIN};
            map[n++] = i;
        }
        if (free_slot >= 0) { /* full: new connections wait in the backlog */
            pfd[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
            map[n++] = -1;
        }
        if (poll(pfd, (nfds_t)n, 200) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (pfd[k].revents == 0)
                continue;
            if (map[k] < 0) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                    continue;
                conn *c = &conns[free_slot];
                memset(c, 0, sizeof(*c));
                c->fd = fd;
                c->last_ms = mono_ms();
                http_parser_init(&c->hp, HTTP_REQUEST);
                c->hp.data = c;
                continue;
            }
            conn *c = &conns[map[k]];
            c->last_ms = mono_ms();
            if (c->done)
                conn_write(c);
            else
                conn_read(c, a);
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].fd >= 0)
            close_conn(&conns[i]);
}
