/*
 * reply.c - what a reply is, decided in one place: an answer, no reply at
 * all, or one of the error replies a driver acts on (NOSCRIPT or
 * "Function not found": send the script's text; MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN: Redis Cluster's routing).  Both drivers and the call reader
 * switch on it, so a new error that needs handling is taught here once.
 */
#include <string.h>

#include "redis/redis_proto.h"

/* Does the error reply r start with the word w (and a space or its end)? */
static int error_is(const redisReply *r, const char *w)
{
    size_t n = strlen(w);
    return r->len >= n && memcmp(r->str, w, n) == 0 &&
           (r->len == n || r->str[n] == ' ');
}

int sl__redis_reply_kind(const redisReply *r, sl__redis_redirect *rd)
{
    sl__redis_redirect own;

    if (r == NULL)
        return SL__REDIS_REPLY_NONE;
    if (r->type != REDIS_REPLY_ERROR)
        return SL__REDIS_REPLY_OK;
    /* FCALL of a function the server does not have: Redis 7's words. */
    if (error_is(r, "NOSCRIPT") ||
        (r->len >= 22 && memcmp(r->str, "ERR Function not found", 22) == 0))
        return SL__REDIS_REPLY_NOSCRIPT;
    if (error_is(r, "TRYAGAIN"))
        return SL__REDIS_REPLY_TRYAGAIN;
    if (error_is(r, "CLUSTERDOWN"))
        return SL__REDIS_REPLY_CLUSTERDOWN;
    if (rd == NULL)
        rd = &own;
    if (sl__redis_redirect_parse(r->str, r->len, rd) == 0)
        return rd->ask ? SL__REDIS_REPLY_ASK : SL__REDIS_REPLY_MOVED;
    return SL__REDIS_REPLY_ERROR;
}
