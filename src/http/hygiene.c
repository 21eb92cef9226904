/*
 * hygiene.c - RFC 9112's rules for a request that the system's
 * http-parser 2.9 lets through (Debian builds it without
 * HTTP_PARSER_STRICT): each is a place where two parsers may read one
 * request differently, which a front end or an upstream behind the proxy
 * must not be left to guess at.  Each answer is the message of the 400.
 */
#include "http/hygiene.h"

/* RFC 9110 5.6.2's tchar, bit by bit for the 128 ASCII bytes. */
static int tchar(unsigned char c)
{
    static const unsigned char map[16] = {
        0x00, 0x00, 0x00, 0x00, /* controls */
        0xfa, 0x6c, 0xff, 0x03, /* !#$%&'*+-. digits */
        0xfe, 0xff, 0xff, 0xc7, /* A-Z ^ _ */
        0xff, 0xff, 0xff, 0x57, /* ` a-z | ~ */
    };
    return c < 128 && (map[c >> 3] >> (c & 7)) & 1;
}

const char *sv_hygiene_target(const char *at, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)at[i];
        if (c <= ' ' || c == 0x7f)
            return "a control character or whitespace in the request target";
    }
    return NULL;
}

const char *sv_hygiene_field_name(const char *at, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!tchar((unsigned char)at[i]))
            return at[i] == ' ' || at[i] == '\t'
                       ? "whitespace before a header field's colon"
                       : "a header field name with a byte not allowed in it";
    return NULL;
}

const char *sv_hygiene_framing(const http_parser *p)
{
    if (p->uses_transfer_encoding && !(p->flags & F_CHUNKED))
        return "Transfer-Encoding without chunked as its last coding";
    return NULL;
}
