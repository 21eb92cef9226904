/*
 * sentinel.c - what a Redis Sentinel is asked, and what its answer must
 * be: SENTINEL get-master-addr-by-name NAME, answered by the master's
 * address as two strings, or nil when the Sentinel watches no master of
 * that name.  The blocking store (src/store/redis_sentinel.c) and the
 * daemon (src/decision/sentinel.c) both ask it before each connection to
 * the master, so that a failover is followed by connecting again.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "redis/redis_proto.h"

int sl__redis_sentinel_args(const sl__redis_endpoint *ep, const char **argv,
                            size_t *lens)
{
    argv[0] = "SENTINEL";
    argv[1] = "get-master-addr-by-name";
    argv[2] = ep->master_name;
    for (int i = 0; i < 3; i++)
        lens[i] = strlen(argv[i]);
    return 3;
}

int sl__redis_sentinel_master(const sl__redis_endpoint *ep, const redisReply *r,
                              char *host, size_t hostlen, int *port, char *err,
                              size_t errlen)
{
    if (r == NULL) {
        sl__set_err(err, errlen, "redis sentinel: no reply");
        return SL_ESTORE;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        sl__set_err(err, errlen, "redis sentinel: %s", r->str);
        return SL_ESTORE;
    }
    if (r->type == REDIS_REPLY_NIL) {
        sl__set_err(err, errlen,
                    "redis sentinel: does not know the master '%s'",
                    ep->master_name);
        return SL_ESTORE;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= hostlen ||
        sl__parse_int(r->element[1]->str, r->element[1]->len, 1, 65535,
                      port) != 0) {
        sl__set_err(err, errlen, "redis sentinel: unexpected reply");
        return SL_ESTORE;
    }
    memcpy(host, r->element[0]->str, r->element[0]->len);
    host[r->element[0]->len] = '\0';
    return 0;
}
