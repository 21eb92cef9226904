/*
 * hygiene.h - the request rules of RFC 9112 that the system's http-parser
 * (built lenient) lets through, checked by serve's connections and the
 * proxy's alike from their parser callbacks.
 */
#ifndef SV_HYGIENE_H
#define SV_HYGIENE_H

#include <stddef.h>

#include <http_parser.h>

/* A piece of the request target: NULL, or what is wrong with it (a tab
 * or another control byte: RFC 9112 3.2 allows none). */
const char *sv_hygiene_target(const char *at, size_t len);
/* A piece of a header field's name: NULL, or what is wrong with it
 * (whitespace before the colon, RFC 9112 5.1, or another byte that is
 * not a token's). */
const char *sv_hygiene_field_name(const char *at, size_t len);
/* At the end of the head: NULL, or what is wrong with its framing (a
 * Transfer-Encoding whose last coding is not chunked, RFC 9112 6.3; the
 * parser finds it too, but only after its headers-complete callback,
 * which the proxy acts on). */
const char *sv_hygiene_framing(const http_parser *p);

#endif
