/*
 * handshake.c - what a new connection says before its first call, and
 * what the answers must be: AUTH (Redis 6 ACLs: with the user when there
 * is one), SELECT, SCRIPT LOAD for the SHA1 that EVALSHA names, FUNCTION
 * LOAD of the library that FCALL calls (a server may refuse it), and
 * CLUSTER SLOTS when the connection is a cluster's probe; INFO cluster
 * on a plain store's, which refuses a Cluster node ("use
 * redis-cluster://"); ROLE on a Sentinel's master, which must still be
 * one.  The blocking
 * store sends the list one command at a time, the daemon pipelines it
 * behind its connect; both check each reply here.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "redis/redis_proto.h"

static const char *const cmd_names[] = {
    "AUTH",         "SELECT",        "SCRIPT LOAD", "CLUSTER SLOTS",
    "INFO cluster", "FUNCTION LOAD", "ROLE"};

static void add(sl__redis_handshake *hs, int kind, int argc, const char *a0,
                const char *a1, const char *a2)
{
    const char *args[3] = {a0, a1, a2};
    size_t i = hs->n++;
    hs->cmd[i].kind = kind;
    hs->cmd[i].argc = argc;
    for (int j = 0; j < 3; j++) {
        hs->cmd[i].argv[j] = j < argc ? args[j] : NULL;
        hs->cmd[i].lens[j] = j < argc ? strlen(args[j]) : 0;
    }
}

void sl__redis_handshake_init(sl__redis_handshake *out,
                              const sl__redis_endpoint *ep, unsigned with)
{
    out->n = 0;
    if (ep->password != NULL && ep->user != NULL)
        add(out, SL__REDIS_CMD_AUTH, 3, "AUTH", ep->user, ep->password);
    else if (ep->password != NULL)
        add(out, SL__REDIS_CMD_AUTH, 2, "AUTH", ep->password, NULL);
    if (with & SL__REDIS_WITH_CLUSTER_CHECK)
        add(out, SL__REDIS_CMD_INFO_CLUSTER, 2, "INFO", "cluster", NULL);
    if (ep->db != 0) {
        snprintf(out->db, sizeof(out->db), "%d", ep->db);
        add(out, SL__REDIS_CMD_SELECT, 2, "SELECT", out->db, NULL);
    }
    if (with & SL__REDIS_WITH_SCRIPT_LOAD)
        add(out, SL__REDIS_CMD_SCRIPT_LOAD, 3, "SCRIPT", "LOAD",
            sl__redis_script);
    if (with & SL__REDIS_WITH_FUNCTION_LOAD) {
        size_t i = out->n++;
        out->cmd[i].kind = SL__REDIS_CMD_FUNCTION_LOAD;
        out->cmd[i].argc =
            sl__redis_function_load_args(out->cmd[i].argv, out->cmd[i].lens);
    }
    if (with & SL__REDIS_WITH_CLUSTER_SLOTS)
        add(out, SL__REDIS_CMD_CLUSTER_SLOTS, 2, "CLUSTER", "SLOTS", NULL);
    if (with & SL__REDIS_WITH_ROLE_CHECK)
        add(out, SL__REDIS_CMD_ROLE, 1, "ROLE", NULL, NULL);
}

int sl__redis_handshake_check(int kind, const redisReply *r, char *sha,
                              char *err, size_t errlen)
{
    const char *name = cmd_names[kind];

    if (r == NULL) {
        sl__set_err(err, errlen, "redis %s: no reply", name);
        return SL_ESTORE;
    }
    if (kind == SL__REDIS_CMD_INFO_CLUSTER) {
        /* An error (an ACL without INFO, a renamed command) cannot tell:
         * the store goes on, and a MOVED later is logged. */
        if (r->type == REDIS_REPLY_STRING &&
            strstr(r->str, "cluster_enabled:1") != NULL) {
            /* A configuration error, not an outage: SL_EINVAL. */
            sl__set_err(err, errlen,
                        "redis: the server is a Redis Cluster node "
                        "(cluster_enabled:1): use redis-cluster://");
            return SL_EINVAL;
        }
        return 0;
    }
    if (kind == SL__REDIS_CMD_FUNCTION_LOAD) {
        if (sl__redis_function_loaded(r))
            return 0;
        sl__set_err(err, errlen, "redis %s: %s", name,
                    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        return 1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        sl__set_err(err, errlen, "redis %s: %s", name, r->str);
        return SL_ESTORE;
    }
    if (kind == SL__REDIS_CMD_ROLE) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "master") == 0)
            return 0;
        sl__set_err(err, errlen,
                    "redis ROLE: the server the Sentinel named is not the "
                    "master (%s): a failover is going on",
                    r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                            r->element[0]->type == REDIS_REPLY_STRING
                        ? r->element[0]->str
                        : "unexpected reply");
        return SL_ESTORE;
    }
    if (kind != SL__REDIS_CMD_SCRIPT_LOAD)
        return 0;
    if (r->type != REDIS_REPLY_STRING || r->len != SL__REDIS_SHA_LEN) {
        sl__set_err(err, errlen, "redis %s: unexpected reply", name);
        return SL_ESTORE;
    }
    memcpy(sha, r->str, SL__REDIS_SHA_LEN);
    sha[SL__REDIS_SHA_LEN] = '\0';
    return 0;
}
