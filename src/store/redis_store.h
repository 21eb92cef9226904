/*
 * redis_store.h - the Redis store's internal side, never installed: what
 * a user above the store takes of it (the daemon, tests), and what its
 * files share.  They call down this list, never up:
 *
 *   redis.c              the store: options in, checks out (sluice.h)
 *   redis_cluster_sync.c a redis-cluster:// store's routing by slot
 *   redis_sentinel.c     a redis-sentinel:// store's master, asked
 *   redis_conn.c         one blocking connection to one server
 *   redis_config.c       the store's options and URL, checked and copied
 *   tls_client.c          TLS: the store's client context, a session each
 *
 * and all of them call the protocol core (src/redis/redis_proto.h).
 */
#ifndef SL_REDIS_STORE_H
#define SL_REDIS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis/redis_proto.h"
#include "sluice.h"
#include "store/tls_client.h"

/* ---- for users above: what the protocol core takes of a store ---- */

/* 0, or SL_EINVAL when store is not a Redis store.  Strings are borrowed
 * from the store (valid until sl_store_free). */
int sl__redis_store_endpoint(sl_store *store, sl__redis_endpoint *out);
/* 0, or SL_EINVAL when store is not a Redis store.  Fetch it once: it
 * stays the same for the store's life, and the prefix is borrowed. */
int sl__redis_store_keyspace(sl_store *store, sl__redis_keyspace *out);

/* ---- the options (redis_config.c) ---- */

/* A Redis store's options, checked, with defaults filled in; every
 * string an owned copy (NULL when unset).  n_seeds is 0 but for a
 * redis-cluster:// URL, whose first seed is also host and port. */
typedef struct sl__redis_config {
    char *host, *unix_path, *user, *password, *prefix;
    int port, db, timeout_ms, use_server_time;
    char tag_delimiter; /* 0: the whole key is the hash tag */
    int64_t extra_ttl_ms;
    size_t max_key_len;
    char **seed_hosts;
    int *seed_ports;
    size_t n_seeds;
    sl__tls_client *tls; /* NULL: plain TCP */
    /* redis-sentinel://: where to ask for master_name's master. */
    char **sentinel_hosts;
    int *sentinel_ports;
    size_t n_sentinels;
    char *master_name, *sentinel_user, *sentinel_password;
} sl__redis_config;

/* Fills cfg (which must be zeroed) from o: 0, SL_EINVAL with a message in
 * err, or SL_ENOMEM.  On failure cfg still needs releasing. */
int sl__redis_config_init(sl__redis_config *cfg, const sl_redis_options *o,
                          char *err, size_t errlen);
void sl__redis_config_release(sl__redis_config *cfg);
/* cfg as the protocol core takes it, borrowing cfg's strings. */
void sl__redis_config_endpoint(const sl__redis_config *cfg,
                               sl__redis_endpoint *out);
void sl__redis_config_keyspace(const sl__redis_config *cfg,
                               sl__redis_keyspace *out);

/* ---- one blocking connection (redis_conn.c) ----
 *
 * To one server, made (with the core's handshake) when first needed and
 * dropped on any failure, so that the next command makes it again.  Not
 * thread-safe: the owning store's lock covers it. */

typedef struct sl__redis_conn sl__redis_conn;

/* No I/O: 0 or SL_ENOMEM.  *ep is copied, its strings are borrowed (valid
 * while the connection is); its seeds are not read.  with: handshake
 * commands beside SCRIPT LOAD and FUNCTION LOAD
 * (SL__REDIS_WITH_CLUSTER_CHECK for a plain store's server). */
int sl__redis_conn_new(const sl__redis_endpoint *ep, unsigned with,
                       sl__redis_conn **out);
void sl__redis_conn_free(sl__redis_conn *conn); /* NULL: no-op */
/* sl__redis_conn_new()'s `with` for a connection that never calls the
 * script (a Sentinel's): AUTH only. */
#define SL__REDIS_CONN_BARE 0x100u

/* Where the server is, asked before each connect (a Sentinel's master):
 * 0 with host and *port, or an SL_E* code with err set. */
typedef int (*sl__redis_locate_fn)(const sl__redis_endpoint *ep, char *host,
                                   size_t hostlen, int *port, char *err,
                                   size_t errlen);
/* The connection asks locate where to connect, and its server must then
 * answer ROLE as a master. */
void sl__redis_conn_locate_with(sl__redis_conn *conn, sl__redis_locate_fn fn);

/* Connects and says the handshake, unless connected: 0, or SL_ESTORE
 * with a message in err (SL_EINVAL: a Cluster node behind redis://, a
 * TLS certificate refused). */
int sl__redis_conn_connect(sl__redis_conn *conn, char *err, size_t errlen);
/* Drops the connection: the next command connects again (and asks the
 * Sentinels again). */
void sl__redis_conn_drop(sl__redis_conn *conn);
/* Connects if need be and runs one command; with asking, ASKING goes
 * first on the connection.  The reply (the caller frees it; an error
 * reply is a reply), or NULL with a message in err when the exchange
 * failed (the connection is then dropped). */
redisReply *sl__redis_conn_command(sl__redis_conn *conn, int asking, int argc,
                                   const char *const *argv, const size_t *lens,
                                   char *err, size_t errlen);
/* Why the last command gave NULL: SL_ESTORE, or SL_EINVAL when the
 * server's TLS certificate was refused, or it refused ours. */
int sl__redis_conn_failure(const sl__redis_conn *conn);
/* How calls name the script on this server (a ref, redis_proto.h): the
 * library's function once FUNCTION LOAD took it, else the script's SHA1
 * once SCRIPT LOAD did, else "" (no ref: EVAL). */
const char *sl__redis_conn_script_ref(const sl__redis_conn *conn);
/* The server refused the library when it was loaded again: its calls
 * are EVALSHA from now on. */
void sl__redis_conn_no_functions(sl__redis_conn *conn);

/* ---- Redis Sentinel, blocking (redis_sentinel.c) ---- */

/* Asks ep's Sentinels in turn where its master is: 0 with host (hostlen
 * bytes) and *port, or SL_ESTORE (SL_EINVAL: a TLS certificate refused)
 * with err naming the master and the last Sentinel's failure. */
int sl__redis_sentinel_resolve(const sl__redis_endpoint *ep, char *host,
                               size_t hostlen, int *port, char *err,
                               size_t errlen);

/* ---- Redis Cluster, blocking (redis_cluster_sync.c) ----
 *
 * The routing of a redis-cluster:// store's script calls to the master
 * of their slot, over one connection per node, each with the store's
 * credentials and timeout.  Not thread-safe: the owning store's lock
 * covers it. */

typedef struct sl__redis_cluster sl__redis_cluster;

/* No I/O: 0 or SL_ENOMEM.  *ep (its seeds, credentials, timeout) is
 * copied, its strings and arrays borrowed from the owning store, which
 * outlives the cluster. */
int sl__redis_cluster_new(const sl__redis_endpoint *ep,
                          sl__redis_cluster **out);
void sl__redis_cluster_free(sl__redis_cluster *c); /* NULL: no-op */
/* Reads the slot map from the first node that answers: 0, SL_ESTORE,
 * SL_EINVAL (a TLS certificate refused) or SL_ENOMEM, with a message in
 * err. */
int sl__redis_cluster_refresh(sl__redis_cluster *c, char *err, size_t errlen);
/* Runs a command whose keys all hash to slot on the slot's master,
 * following MOVED and ASK: the reply (the caller frees it; an error reply
 * is a reply), or NULL with err set when no node answered. */
redisReply *sl__redis_cluster_command(sl__redis_cluster *c, int slot, int argc,
                                      const char *const *argv,
                                      const size_t *lens, char *err,
                                      size_t errlen);
/* The first node's ref with one (sl__redis_conn_script_ref), else "":
 * every node is sent the same library and script. */
const char *sl__redis_cluster_script_ref(const sl__redis_cluster *c);
/* sl__redis_conn_no_functions() on every node's connection. */
void sl__redis_cluster_no_functions(sl__redis_cluster *c);

#endif /* SL_REDIS_STORE_H */
