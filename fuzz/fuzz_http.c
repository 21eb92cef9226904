/*
 * fuzz_http.c - libFuzzer target for the request path of `sluice serve`
 * after HTTP framing: arbitrary bytes as the body of POST /v1/check or
 * POST /json (with lyft's hits_addend and limit overrides), or as the
 * query and Sluice-* headers of GET /v1/auth (a
 * first line, then "name: value" lines; the first byte picks the route),
 * through JSON and header parsing,
 * validation, rule matching, the decision and response formatting, with
 * GET /metrics and /v1/rules in between so the per-rule series are
 * rendered too.  Whatever the input, the answer must be one well-formed
 * HTTP response whose Content-Length is its body's length; no crash,
 * leak or out-of-bounds access, and never a 5xx.  (http-parser itself is fuzzed
 * upstream.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_fixture.h"
#include "api/api.h"
#include "api/routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* GET /v1/auth: the first line is the query, each further line a
 * header "name: value" (as conn.c keeps them: names starting "Sluice-"
 * and others alike, so the handler sees unknown ones too). */
enum { MAX_FUZZ_HEADERS = 200 };
static sv_http_header headers[MAX_FUZZ_HEADERS];

static void split_auth(sv_http_request *req)
{
    const char *p = req->body, *end = req->body + req->body_len;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    req->query = p;
    req->query_len = (size_t)((nl ? nl : end) - p);
    req->n_headers = 0;
    for (p = nl ? nl + 1 : end; p < end && req->n_headers < MAX_FUZZ_HEADERS;) {
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon != NULL)
            headers[req->n_headers++] =
                (sv_http_header){p, (size_t)(colon - p), colon + 1,
                                 (size_t)(line_end - colon - 1)};
        p = line_end + 1;
    }
    req->headers = headers;
    req->body = "";
    req->body_len = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const paths[] = {"/v1/check", "/json", "/metrics",
                                        "/v1/rules", "/v1/auth"};
    if (srv.store == NULL)
        setup();
    if (size == 0)
        return 0;
    const char *path = paths[data[0] % 5];
    sv_http_request req = {
        .method = data[0] % 5 < 2 ? 3 /* HTTP_POST */ : 1 /* HTTP_GET */,
        .path = path,
        .path_len = strlen(path),
        .query = "",
        .body = (const char *)data + 1,
        .body_len = size - 1,
    };
    if (data[0] % 5 == 4)
        split_auth(&req);
    sv_buf out = {0};
    int keep_alive = 1;
    worker.now_stale = 1;
    static sv_req rq;
    /* The memory store answers at once: never "again". */
    if (sv_route(&sv_public_routes, &worker, &req, &rq, &out, &keep_alive) != 0)
        __builtin_trap();
    sv_req_reset(&rq);
    if (out.data == NULL || strncmp(out.data, "HTTP/1.1 ", 9) != 0 ||
        out.data[9] == '5') /* no input may make a 5xx: the store is big */
        __builtin_trap();
    const char *cl = strstr(out.data, "Content-Length: ");
    const char *end = strstr(out.data, "\r\n\r\n");
    if (end == NULL)
        __builtin_trap();
    size_t body_len = out.len - (size_t)(end + 4 - out.data);
    if (strncmp(out.data + 9, "204", 3) == 0) { /* no length, no body */
        if ((cl != NULL && cl < end) || body_len != 0)
            __builtin_trap();
    } else if (cl == NULL || strtoull(cl + 16, NULL, 10) != body_len) {
        __builtin_trap();
    }
    sv_buf_release(&out);
    return 0;
}
