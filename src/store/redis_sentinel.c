/*
 * redis_sentinel.c - where a redis-sentinel:// store's master is, asked
 * of its Sentinels in turn over a short blocking connection each (with
 * their own credentials, and TLS when the store has it), before every
 * connection to the master: a failover is followed by connecting again,
 * which the store does after any failure and after a READONLY reply.
 */
#include <stdio.h>

#include "internal.h"
#include "store/redis_store.h"

int sl__redis_sentinel_resolve(const sl__redis_endpoint *ep, char *host,
                               size_t hostlen, int *port, char *err,
                               size_t errlen)
{
    const char *argv[3];
    size_t lens[3];
    int argc = sl__redis_sentinel_args(ep, argv, lens), rc = SL_ESTORE;
    char why[256] = "";

    for (size_t i = 0; i < ep->n_sentinels; i++) {
        sl__redis_endpoint sep = {.host = ep->sentinel_hosts[i],
                                  .port = ep->sentinel_ports[i],
                                  .user = ep->sentinel_user,
                                  .password = ep->sentinel_password,
                                  .timeout_ms = ep->timeout_ms,
                                  .tls = ep->tls};
        sl__redis_conn *conn;
        redisReply *r;
        if (sl__redis_conn_new(&sep, SL__REDIS_CONN_BARE, &conn) != 0) {
            sl__set_err(err, errlen, "out of memory");
            return SL_ENOMEM;
        }
        r = sl__redis_conn_command(conn, 0, argc, argv, lens, why,
                                   sizeof(why));
        rc = r != NULL ? sl__redis_sentinel_master(ep, r, host, hostlen, port,
                                                   why, sizeof(why))
                       : sl__redis_conn_failure(conn);
        if (r != NULL)
            freeReplyObject(r);
        sl__redis_conn_free(conn);
        if (rc == 0)
            return 0;
        if (rc == SL_EINVAL) /* a certificate refused: no other will do */
            break;
    }
    sl__set_err(err, errlen, "redis: no Sentinel named the master '%s' (%s)",
                ep->master_name, why);
    return rc == SL_EINVAL ? SL_EINVAL : SL_ESTORE;
}
