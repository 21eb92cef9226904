/*
 * advisor_http.c - the HTTP server of `sluice advisor` (advisor.h): GET
 * and HEAD /v1/recommendations with its ETag and If-None-Match, from the
 * answer in force (advisor_answer.c), on the daemon's own HTTP server
 * (http/service.c) with its bounds and timeouts, over TLS with
 * --tls-cert, asking for a bearer token with --token-file.  Apart
 * because it is
 * the advisor's only server I/O, on the calling thread, and needs of the
 * rest no more than av_answer_read().
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "advisor/advisor.h"
#include "api/request.h"
#include "http/respond.h"
#include "http/service.h"
#include "log/secret.h"
#include "runtime/tls.h"

/* Its clients are a fleet's sluice nodes, each polling on one connection,
 * and a few people: room for many, but no address may take more than a
 * few, and a request must come whole quickly, so that clients trickling
 * bytes hold neither the slots nor the legitimate polls up. */
#define MAX_CONNS 1024
#define MAX_PER_ADDRESS 16
#define MAX_REQUEST 8192 /* bytes of a request's head, and of a body */
#define READ_MS 3000     /* a request must arrive whole within */
#define IDLE_MS 10000    /* a connection silent this long is closed */
#define STOP_POLL_MS 100 /* how often the stop flag is looked at */

/* A bearer token shorter than this is refused at start. */
#define MIN_TOKEN 16

struct av_http {
    sv_http_service *svc;
    sv_tls *tls; /* NULL: plain text */
    char token[512];
    size_t token_len; /* 0: none asked */
    av_answer *a;
    atomic_int *stop;
    uv_timer_t stop_timer;
};

/* Does If-None-Match (a list of entity tags, or *) name etag? */
static int matches(const char *inm, size_t len, const char *etag)
{
    if (len == 1 && inm[0] == '*')
        return 1;
    size_t n = strlen(etag);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(inm + i, etag, n) == 0 &&
            (i == 0 || inm[i - 1] == ' ' || inm[i - 1] == ',' ||
             inm[i - 1] == '/') &&
            (i + n == len || inm[i + n] == ',' || inm[i + n] == ' '))
            return 1;
    return 0;
}

typedef struct answering {
    const sv_http_request *req;
    sv_buf *out;
    int keep_alive;
} answering;

static void answer_cb(void *priv, const char *json, const char *etag)
{
    answering *an = priv;
    char extra[160];
    snprintf(extra, sizeof(extra), "ETag: %s\r\n", etag);
    const sv_http_header *inm = sv_http_header_find(an->req, "If-None-Match");
    if (inm != NULL && matches(inm->value, inm->value_len, etag)) {
        sv_respond_empty(an->out, 304, extra, an->keep_alive);
        return;
    }
    size_t len = strlen(json);
    sv_respond_head(an->out, 200, "application/json", len, an->keep_alive);
    sv_buf_addstr(an->out, extra);
    sv_buf_add(an->out, "\r\n", 2);
    if (an->req->method != HTTP_HEAD) /* HEAD: the length, not the body */
        sv_buf_add(an->out, json, len);
}

/* No token asked, or the request's Authorization is "Bearer <token>",
 * compared in a time that depends on the lengths only. */
static int authorized(const av_http *h, const sv_http_request *req)
{
    if (h->token_len == 0)
        return 1;
    const sv_http_header *auth = sv_http_header_find(req, "Authorization");
    static const char scheme[] = "Bearer ";
    size_t n = sizeof(scheme) - 1;
    if (auth == NULL || auth->value_len < n ||
        strncasecmp(auth->value, scheme, n) != 0)
        return 0;
    const char *given = auth->value + n;
    size_t len = auth->value_len - n;
    unsigned char diff = (unsigned char)(len != h->token_len);
    for (size_t i = 0; i < h->token_len; i++)
        diff |= (unsigned char)(h->token[i] ^ (i < len ? given[i] : 0));
    return diff == 0;
}

static int recommendations(sv_worker *w, const sv_http_request *req,
                           sv_req *rq, sv_buf *out, int keep_alive)
{
    (void)rq;
    if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
        json_t *body =
            json_pack("{s:{s:s,s:s}}", "error", "code", "EMETHOD", "message",
                      "method not allowed: use GET or HEAD");
        sv_respond_json(out, 405, "Allow: GET, HEAD\r\n", body, keep_alive);
        json_decref(body);
        return 0;
    }
    av_http *h = sv_http_service_ctx(w);
    if (!authorized(h, req)) {
        json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", "EAUTH",
                                 "message",
                                 "a bearer token is required "
                                 "(Authorization: Bearer ...)");
        sv_respond_json(out, 401, "WWW-Authenticate: Bearer\r\n", body,
                        keep_alive);
        json_decref(body);
        return 0;
    }
    answering an = {req, out, keep_alive};
    av_answer_read(h->a, answer_cb, &an);
    return 0;
}

static const sv_route_entry entries[] = {
    {"/v1/recommendations", SV_ANY_METHOD, NULL, recommendations},
};

static const sv_routes routes = {entries, 1, 0, &sv_api_req};

/* The token and the certificate, read before the socket is made: 0, or
 * -1 said on stderr. */
static int read_files(av_http *h, const av_options *o)
{
    char err[300];
    if (o->token_file != NULL) {
        int n = sl__secret_read(o->token_file, "--token-file", h->token,
                                sizeof(h->token), err, sizeof(err));
        if (n >= 0 && n < MIN_TOKEN)
            snprintf(err, sizeof(err),
                     "--token-file: '%s': the token must be at least %d "
                     "bytes",
                     o->token_file, MIN_TOKEN);
        if (n < MIN_TOKEN) {
            fprintf(stderr, "sluice advisor: %s\n", err);
            return -1;
        }
        h->token_len = (size_t)n;
    }
    if ((o->tls_cert == NULL) != (o->tls_key == NULL)) {
        fprintf(stderr, "sluice advisor: --tls-cert and --tls-key go "
                        "together\n");
        return -1;
    }
    sv_tls_files f = {o->tls_cert, o->tls_key, NULL};
    if (o->tls_cert != NULL &&
        (h->tls = sv_tls_new(&f, NULL, err, sizeof(err))) == NULL) {
        fprintf(stderr, "sluice advisor: %s\n", err);
        return -1;
    }
    return 0;
}

av_http *av_http_new(const av_options *o, av_answer *a, char *shown,
                     size_t shown_len)
{
    const char *addr = o->listen;
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
        fprintf(stderr, "sluice advisor: --listen: want HOST:PORT: '%s'\n",
                addr);
        return NULL;
    }
    const char *name = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && name[0] == '[' && name[hlen - 1] == ']') {
        name++;
        hlen -= 2;
    }
    memcpy(host, name, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr,
                gai_strerror(rc));
        return NULL;
    }
    av_http *h = calloc(1, sizeof(*h));
    if (h != NULL && read_files(h, o) != 0) {
        sv_tls_free(h->tls);
        free(h);
        freeaddrinfo(ai);
        return NULL;
    }
    sv_http_service_opts so = {.routes = &routes,
                               .ctx = h,
                               .max_connections = MAX_CONNS,
                               .max_connections_per_address = MAX_PER_ADDRESS,
                               .max_header_bytes = MAX_REQUEST,
                               .max_body_bytes = MAX_REQUEST,
                               .idle_timeout_ms = IDLE_MS,
                               .read_timeout_ms = READ_MS,
                               .tls = h ? h->tls : NULL};
    char err[128] = "out of memory";
    if (h == NULL ||
        (h->svc = sv_http_service_new(ai->ai_addr, &so, err, sizeof(err))) ==
            NULL) {
        fprintf(stderr, "sluice advisor: --listen '%s': %s\n", addr, err);
        if (h != NULL)
            sv_tls_free(h->tls);
        free(h);
        freeaddrinfo(ai);
        return NULL;
    }
    h->a = a;
    int v6 = ai->ai_family == AF_INET6;
    snprintf(shown, shown_len, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "",
             sv_http_service_port(h->svc));
    freeaddrinfo(ai);
    return h;
}


static void stop_cb(uv_timer_t *t)
{
    av_http *h = t->data;
    if (!atomic_load(h->stop))
        return;
    uv_close((uv_handle_t *)&h->stop_timer, NULL);
    sv_http_service_stop(h->svc);
}

void av_http_serve(av_http *h, atomic_int *stop)
{
    h->stop = stop;
    uv_timer_init(sv_http_service_loop(h->svc), &h->stop_timer);
    h->stop_timer.data = h;
    uv_timer_start(&h->stop_timer, stop_cb, STOP_POLL_MS, STOP_POLL_MS);
    sv_http_service_run(h->svc);
}

void av_http_free(av_http *h)
{
    if (h == NULL)
        return;
    sv_http_service_free(h->svc);
    sv_tls_free(h->tls);
    free(h);
}
