/*
 * reply.c - what a reply is, decided in one place: an answer, no reply at
 * all, or one of the error replies a driver acts on (NOSCRIPT,
 * "Function not found" or FCALL unknown: send the script's text; MOVED, ASK,
 * TRYAGAIN, CLUSTERDOWN: Redis Cluster's routing; READONLY: a master that
 * a failover made a replica).  Both drivers and the call
 * reader switch on it, so a new error that needs handling is taught here once.
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

/* Is r a server's refusal of FCALL as a command it does not know?  Redis
 * 6 says "ERR unknown command `FCALL`, ...", Redis 7 (FCALL renamed away)
 * "ERR unknown command 'FCALL', ...". */
static int fcall_unknown(const redisReply *r)
{
    static const char head[] = "ERR unknown command ";
    size_t n = sizeof(head) - 1;
    return r->len >= n + 7 && memcmp(r->str, head, n) == 0 &&
           memcmp(r->str + n + 1, "FCALL", 5) == 0 &&
           r->str[n] == r->str[n + 6];
}

int sl__redis_reply_kind(const redisReply *r, sl__redis_redirect *rd)
{
    sl__redis_redirect own;

    if (r == NULL)
        return SL__REDIS_REPLY_NONE;
    if (r->type != REDIS_REPLY_ERROR)
        return SL__REDIS_REPLY_OK;
    /* FCALL of a function the server does not have (Redis 7's words), or
     * by a server without FCALL (a Redis 6 master in a cluster whose seed
     * took the library, mid-upgrade): either way the call goes again as
     * EVAL, and a server that then refuses FUNCTION LOAD is called by
     * EVALSHA from then on. */
    if (error_is(r, "NOSCRIPT") ||
        (r->len >= 22 && memcmp(r->str, "ERR Function not found", 22) == 0) ||
        fcall_unknown(r))
        return SL__REDIS_REPLY_NOSCRIPT;
    if (error_is(r, "TRYAGAIN"))
        return SL__REDIS_REPLY_TRYAGAIN;
    if (error_is(r, "CLUSTERDOWN"))
        return SL__REDIS_REPLY_CLUSTERDOWN;
    if (error_is(r, "READONLY"))
        return SL__REDIS_REPLY_READONLY;
    if (rd == NULL)
        rd = &own;
    if (sl__redis_redirect_parse(r->str, r->len, rd) == 0)
        return rd->ask ? SL__REDIS_REPLY_ASK : SL__REDIS_REPLY_MOVED;
    return SL__REDIS_REPLY_ERROR;
}
