/*
 * test_http_client.c - the admin HTTP client (src/http/http_client.c)
 * against a tiny server in a thread: one listening loopback socket, one
 * connection, a scripted answer (whole, byte by byte, never, too much,
 * garbage), and the request it read kept for the test to check.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http_client.h"
#include "testutil.h"

typedef struct server {
    int fd, port, v6;
    pthread_t thread;
    const char *reply; /* sent after the request was read */
    size_t reply_len;
    int bytewise;     /* the reply one byte per send */
    size_t body_fill; /* then this many 'x' */
    int silent_ms;    /* or: hold the connection this long, answering nothing */
    char request[8192];
    size_t request_len;
} server;

static int64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The request's head and its Content-Length body, or what came in 2 s. */
static void read_request(server *s, int c)
{
    int64_t deadline = ms_now() + 2000;
    while (s->request_len < sizeof(s->request) - 1 && ms_now() < deadline) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(c, s->request + s->request_len,
                         sizeof(s->request) - 1 - s->request_len, 0);
        if (n <= 0)
            break;
        s->request_len += (size_t)n;
        s->request[s->request_len] = '\0';
        char *end = strstr(s->request, "\r\n\r\n");
        if (end == NULL)
            continue;
        char *cl = strstr(s->request, "Content-Length: ");
        size_t want = cl ? (size_t)atol(cl + 16) : 0;
        if (s->request_len >= (size_t)(end + 4 - s->request) + want)
            break;
    }
}

static void *serve_one(void *arg)
{
    server *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    read_request(s, c);
    if (s->silent_ms > 0)
        usleep((useconds_t)s->silent_ms * 1000);
    for (size_t i = 0; s->reply != NULL && i < s->reply_len;) {
        size_t n = s->bytewise ? 1 : s->reply_len - i;
        ssize_t w = send(c, s->reply + i, n, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        i += (size_t)w;
    }
    char fill[4096];
    memset(fill, 'x', sizeof(fill));
    for (size_t sent = 0; sent < s->body_fill;) {
        size_t n = s->body_fill - sent < sizeof(fill) ? s->body_fill - sent
                                                      : sizeof(fill);
        ssize_t w = send(c, fill, n, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the client gave up: expected past its cap */
        sent += (size_t)w;
    }
    close(c);
    return NULL;
}

/* Starts s (its answer set by the caller) on a loopback port: 0, or -1
 * when the address family is not there (IPv6 off). */
static int server_start(server *s)
{
    s->fd = socket(s->v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (s->v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    }
    if (bind(s->fd, (struct sockaddr *)&ss, len) != 0) {
        close(s->fd);
        return -1;
    }
    assert_int_equal(listen(s->fd, 4), 0);
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&ss, &len), 0);
    s->port = ntohs(s->v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                          : ((struct sockaddr_in *)&ss)->sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, serve_one, s), 0);
    return 0;
}

static void server_stop(server *s)
{
    pthread_join(s->thread, NULL);
    close(s->fd);
}

static char *addr_of(const server *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%d", s->v6 ? "[::1]" : "127.0.0.1", s->port);
    return buf;
}

#define REPLY(s, text)                                                         \
    do {                                                                       \
        (s)->reply = (text);                                                   \
        (s)->reply_len = strlen(text);                                         \
    } while (0)

static const char *const capture[] = {"ETag", "Content-Type", NULL};

static void get_with_headers(void **state)
{
    (void)state;
    server s = {0};
    REPLY(&s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              "etag: \"1795306693000\"\r\nContent-Length: 2\r\n\r\n{}");
    assert_int_equal(server_start(&s), 0);
    char target[64], err[256];
    ah_response r;
    ah_response_init(&r, capture);
    const char *const headers[] = {"If-None-Match: \"1\"",
                                   "Accept: application/json", NULL};
    int rc = ah_request(addr_of(&s, target, sizeof(target)), "GET",
                        "/v1/recommendations?rules_version=ab", headers, NULL,
                        0, 2000, &r, err, sizeof(err));
    server_stop(&s);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{}");
    assert_int_equal(r.body_len, 2);
    assert_string_equal(ah_response_header(&r, "ETag"), "\"1795306693000\"");
    assert_string_equal(ah_response_header(&r, "content-type"),
                        "application/json");
    assert_null(ah_response_header(&r, "Server"));
    char want[128];
    snprintf(want, sizeof(want),
             "GET /v1/recommendations?rules_version=ab HTTP/1.1\r\n"
             "Host: 127.0.0.1:%d\r\n",
             s.port);
    assert_true(strncmp(s.request, want, strlen(want)) == 0);
    assert_non_null(strstr(s.request, "\r\nConnection: close\r\n"));
    assert_non_null(strstr(s.request, "\r\nIf-None-Match: \"1\"\r\n"));
    assert_non_null(strstr(s.request, "\r\nAccept: application/json\r\n"));
    assert_null(strstr(s.request, "Content-Length"));
    ah_response_release(&r);
}

static void post_body_bytewise_chunked(void **state)
{
    (void)state;
    server s = {0};
    REPLY(&s, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n"
              "ETag: a\r\nETag: b\r\n\r\n"
              "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    s.bytewise = 1;
    assert_int_equal(server_start(&s), 0);
    char target[64], err[256];
    ah_response r;
    ah_response_init(&r, capture);
    const char *body = "{\"requests_per_unit\":150}";
    int rc = ah_request(addr_of(&s, target, sizeof(target)), "PUT",
                        "/admin/v1/overrides/x", NULL, body, strlen(body), 2000,
                        &r, err, sizeof(err));
    server_stop(&s);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "abcde");
    assert_string_equal(ah_response_header(&r, "etag"), "a, b");
    assert_null(ah_response_header(&r, "Content-Type"));
    assert_non_null(strstr(s.request, "\r\nContent-Length: 25\r\n\r\n"
                                      "{\"requests_per_unit\":150}"));
    ah_response_release(&r);
}

/* No Content-Length: the body ends with the connection. */
static void body_to_close_and_304(void **state)
{
    (void)state;
    server s = {0};
    REPLY(&s, "HTTP/1.0 200 OK\r\n\r\nuntil the end");
    assert_int_equal(server_start(&s), 0);
    char target[64], err[256];
    ah_response r;
    ah_response_init(&r, NULL);
    int rc = ah_request(addr_of(&s, target, sizeof(target)), "GET", "/", NULL,
                        NULL, 0, 2000, &r, err, sizeof(err));
    server_stop(&s);
    assert_int_equal(rc, 0);
    assert_string_equal(r.body, "until the end");

    server t = {0};
    REPLY(&t, "HTTP/1.1 304 Not Modified\r\nETag: \"7\"\r\n\r\n");
    assert_int_equal(server_start(&t), 0);
    ah_response_release(&r);
    ah_response_init(&r, capture);
    rc = ah_request(addr_of(&t, target, sizeof(target)), "GET", "/", NULL, NULL,
                    0, 2000, &r, err, sizeof(err));
    server_stop(&t);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 304);
    assert_non_null(r.body);
    assert_int_equal(r.body_len, 0);
    assert_string_equal(ah_response_header(&r, "ETag"), "\"7\"");
    ah_response_release(&r);
}

static void url_base_ipv6_and_localhost(void **state)
{
    (void)state;
    server s = {0};
    REPLY(&s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert_int_equal(server_start(&s), 0);
    char target[96], err[256];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/advisor/", s.port);
    ah_response r;
    ah_response_init(&r, NULL);
    int rc = ah_request(target, "GET", "/v1/recommendations", NULL, NULL, 0,
                        2000, &r, err, sizeof(err));
    server_stop(&s);
    assert_int_equal(rc, 0);
    assert_true(strncmp(s.request, "GET /advisor/v1/recommendations HTTP/1.1",
                        40) == 0);

    server l = {0};
    REPLY(&l, "HTTP/1.1 204 No Content\r\n\r\n");
    assert_int_equal(server_start(&l), 0);
    snprintf(target, sizeof(target), "localhost:%d", l.port);
    rc = ah_request(target, "HEAD", "/", NULL, NULL, 0, 2000, &r, err,
                    sizeof(err));
    server_stop(&l);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 204);

    server v = {.v6 = 1};
    REPLY(&v, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6");
    if (server_start(&v) != 0) {
        ah_response_release(&r);
        return; /* no IPv6 loopback here */
    }
    rc = ah_request(addr_of(&v, target, sizeof(target)), "GET", "/", NULL, NULL,
                    0, 2000, &r, err, sizeof(err));
    server_stop(&v);
    assert_int_equal(rc, 0);
    assert_string_equal(r.body, "v6");
    snprintf(target, sizeof(target), "Host: [::1]:%d\r\n", v.port);
    assert_non_null(strstr(v.request, target));
    ah_response_release(&r);
}

static void timeout_is_total(void **state)
{
    (void)state;
    server s = {0};
    s.silent_ms = 1500;
    assert_int_equal(server_start(&s), 0);
    char target[64], err[256];
    ah_response r;
    ah_response_init(&r, NULL);
    int64_t t0 = ms_now();
    int rc = ah_request(addr_of(&s, target, sizeof(target)), "GET", "/", NULL,
                        NULL, 0, 200, &r, err, sizeof(err));
    int64_t took = ms_now() - t0;
    server_stop(&s);
    assert_int_equal(rc, AH_ETIMEDOUT);
    assert_string_equal(ah_err_name(rc), "ETIMEDOUT");
    assert_non_null(strstr(err, "timed out"));
    expect_cmp(took, >=, 190);
    expect_cmp(took, <, 1000);
    assert_null(r.body);
}

/* Past the cap, whatever the framing says. */
static void oversized(void **state)
{
    (void)state;
    server s = {0};
    REPLY(&s, "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n");
    s.body_fill = 5000;
    assert_int_equal(server_start(&s), 0);
    char target[64], err[256];
    ah_response r;
    ah_response_init(&r, NULL);
    r.max_bytes = 1000;
    int rc = ah_request(addr_of(&s, target, sizeof(target)), "GET", "/", NULL,
                        NULL, 0, 2000, &r, err, sizeof(err));
    server_stop(&s);
    assert_int_equal(rc, AH_ETOOBIG);
    assert_non_null(strstr(err, "too large"));
    assert_null(r.body);

    /* The default cap, 4 MiB, with a body read to the close. */
    server big = {0};
    REPLY(&big, "HTTP/1.1 200 OK\r\n\r\n");
    big.body_fill = AH_MAX_RESPONSE;
    assert_int_equal(server_start(&big), 0);
    r.max_bytes = 0;
    rc = ah_request(addr_of(&big, target, sizeof(target)), "GET", "/", NULL,
                    NULL, 0, 5000, &r, err, sizeof(err));
    server_stop(&big);
    assert_int_equal(rc, AH_ETOOBIG);

    /* Just under it is fine. */
    server fits = {0};
    REPLY(&fits, "HTTP/1.1 200 OK\r\n\r\n");
    fits.body_fill = AH_MAX_RESPONSE - strlen(fits.reply);
    assert_int_equal(server_start(&fits), 0);
    rc = ah_request(addr_of(&fits, target, sizeof(target)), "GET", "/", NULL,
                    NULL, 0, 5000, &r, err, sizeof(err));
    server_stop(&fits);
    assert_int_equal(rc, 0);
    assert_int_equal(r.body_len, AH_MAX_RESPONSE - strlen(fits.reply));
    ah_response_release(&r);
}

static void garbage_and_cut_short(void **state)
{
    (void)state;
    static const char *const replies[] = {
        "SSH-2.0-OpenSSH_9.2\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nContent-Le",
        "HTTP/1.1 3 Odd\r\nContent-Length: 0\r\n\r\n",
        "",
    };
    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        server s = {0};
        REPLY(&s, replies[i]);
        assert_int_equal(server_start(&s), 0);
        char target[64], err[256];
        ah_response r;
        ah_response_init(&r, capture);
        int rc = ah_request(addr_of(&s, target, sizeof(target)), "GET", "/",
                            NULL, NULL, 0, 2000, &r, err, sizeof(err));
        server_stop(&s);
        if (rc != AH_EPROTO)
            fail_msg("reply %zu: got %s (%s)", i, ah_err_name(rc), err);
        assert_non_null(strstr(err, "malformed response"));
        assert_null(r.body);
    }
}

static void refused(void **state)
{
    (void)state;
    /* A port just bound and closed: nothing listens there. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char target[64], err[256];
    snprintf(target, sizeof(target), "127.0.0.1:%d", ntohs(a.sin_port));
    ah_response r;
    ah_response_init(&r, NULL);
    int rc = ah_request(target, "GET", "/", NULL, NULL, 0, 2000, &r, err,
                        sizeof(err));
    assert_int_equal(rc, AH_ECONNECT);
    assert_non_null(strstr(err, "refused"));
    assert_non_null(strstr(err, target));
}

static void bad_arguments(void **state)
{
    (void)state;
    static const struct {
        const char *target, *method, *path, *header;
        int want;
    } cases[] = {
        {"127.0.0.1", "GET", "/", NULL, AH_EADDR},
        {"example.com:80", "GET", "/", NULL, AH_EADDR}, /* no DNS */
        {"ftp://127.0.0.1:1", "GET", "/", NULL, AH_EADDR},
        {"https://127.0.0.1:1", "GET", "/", NULL, AH_ECONNECT}, /* parsed */
        {"127.0.0.1:99999", "GET", "/", NULL, AH_EADDR},
        {"127.0.0.1:0", "GET", "/", NULL, AH_EADDR},
        {"127.0.0.1:8x", "GET", "/", NULL, AH_EADDR},
        {"::1:80", "GET", "/", NULL, AH_EADDR},
        {"[::1:80", "GET", "/", NULL, AH_EADDR},
        {"127.0.0.1:1/base", "GET", "/", NULL, AH_EADDR},
        {":80", "GET", "/", NULL, AH_EADDR},
        {"127.0.0.1:1", "get", "/", NULL, AH_EINVAL},
        {"127.0.0.1:1", "GET", "x", NULL, AH_EINVAL},
        {"127.0.0.1:1", "GET", "/a b", NULL, AH_EINVAL},
        {"127.0.0.1:1", "GET", "/", "X: a\r\nInjected: 1", AH_EINVAL},
        {"127.0.0.1:1", "GET", "/", "no colon", AH_EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *const headers[] = {cases[i].header, NULL};
        char err[256] = "";
        ah_response r;
        ah_response_init(&r, NULL);
        int rc = ah_request(cases[i].target, cases[i].method, cases[i].path,
                            headers, NULL, 0, 1000, &r, err, sizeof(err));
        if (rc != cases[i].want)
            fail_msg("case %zu (%s): got %s, want %s (%s)", i, cases[i].target,
                     ah_err_name(rc), ah_err_name(cases[i].want), err);
        assert_true(err[0] != '\0');
    }
    ah_response r;
    ah_response_init(&r, NULL);
    assert_int_equal(
        ah_request("127.0.0.1:1", "GET", "/", NULL, NULL, 0, 0, &r, NULL, 0),
        AH_EINVAL);
}

/* The reader alone, fed in every split of one response. */
static void parser_any_split(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 4"
                       "\r\n\r\nbodyEXTRA";
    size_t len = strlen(resp);
    for (size_t cut = 0; cut <= len; cut++) {
        ah_response r;
        ah_response_init(&r, capture);
        ah_parser p;
        ah_parser_init(&p, &r, 0);
        int rc = ah_parser_feed(&p, resp, cut);
        if (rc == 0)
            rc = ah_parser_feed(&p, resp + cut, len - cut);
        assert_int_equal(rc, 1);
        assert_string_equal(r.body, "body");
        assert_string_equal(ah_response_header(&r, "etag"), "\"x\"");
        ah_response_release(&r);
    }
    ah_response r;
    ah_response_init(&r, NULL);
    char err[128];
    assert_int_equal(
        ah_response_parse("HTTP/1.1 200 OK\r\n\r\nx", 20, &r, err, sizeof(err)),
        0);
    assert_string_equal(r.body, "x");
    assert_int_equal(
        ah_response_parse("HTTP/1.1 200", 12, &r, err, sizeof(err)), AH_EPROTO);
    assert_null(r.body);
    assert_string_equal(ah_strerror(AH_ETOOBIG), "response too large");
    assert_string_equal(ah_err_name(12345), "EUNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_with_headers),
        cmocka_unit_test(post_body_bytewise_chunked),
        cmocka_unit_test(body_to_close_and_304),
        cmocka_unit_test(url_base_ipv6_and_localhost),
        cmocka_unit_test(timeout_is_total),
        cmocka_unit_test(oversized),
        cmocka_unit_test(garbage_and_cut_short),
        cmocka_unit_test(refused),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(parser_any_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
