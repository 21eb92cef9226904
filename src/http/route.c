/*
 * route.c - (method, path) to a handler, for every HTTP listener of the
 * daemon: a path, or a prefix ending in '/'; a known path with another
 * method is 405 with Allow, an unknown one 404, both with the JSON error
 * body {"error": {"code", "message"}} of docs/server.md.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "http/respond.h"
#include "http/route.h"

const sv_http_header *sv_http_header_find(const sv_http_request *req,
                                          const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < req->n_headers; i++)
        if (req->headers[i].name_len == len &&
            strncasecmp(req->headers[i].name, name, len) == 0)
            return &req->headers[i];
    return NULL;
}

static int path_matches(const char *path, const sv_http_request *req)
{
    size_t len = strlen(path);
    if (len > 0 && path[len - 1] == '/') /* a prefix */
        return req->path_len >= len && memcmp(path, req->path, len) == 0;
    return len == req->path_len && memcmp(path, req->path, len) == 0;
}

int sv_route(const sv_routes *routes, sv_worker *w, const sv_http_request *req,
             struct sv_req *rq, sv_buf *out, int *keep_alive)
{
    for (size_t i = 0; i < routes->n; i++) {
        const sv_route_entry *r = &routes->entries[i];
        if (!path_matches(r->path, req))
            continue;
        if (r->method != SV_ANY_METHOD && req->method != r->method) {
            char headers[64], msg[96];
            snprintf(headers, sizeof(headers), "Allow: %s\r\n",
                     http_method_str(r->method));
            snprintf(msg, sizeof(msg), "method not allowed: use %s",
                     http_method_str(r->method));
            json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code",
                                     "EMETHOD", "message", msg);
            sv_respond_json(out, 405, headers, body, *keep_alive);
            json_decref(body);
            return 0;
        }
        if (r->post)
            return r->post(w, req, rq, out, *keep_alive);
        r->get(w, out, *keep_alive);
        return 0;
    }
    sv_respond_error(out, 404, "ENOTFOUND", "no such route", *keep_alive);
    return 0;
}
