/*
 * redis_proto.h - the Redis store's protocol, written once and without
 * I/O: the script, what a call sends and what its reply means, batches,
 * how any reply is classified (NOSCRIPT, MOVED, ASK...), the handshake of
 * a new connection, RESP, and Redis Cluster's slots and slot map.  Part
 * of libsluice, never installed (sluice.h is the library's API).
 *
 * Two drivers do the I/O around it: the blocking one of the library's
 * store (src/store/: redis.c, redis_conn.c, redis_cluster_sync.c) and the
 * asynchronous one of the daemon (src/decision/redis_async*.c,
 * cluster_links.c).  Nothing here calls either: what the core needs of a
 * store it is given as data (an endpoint, a key space).  Replies are
 * hiredis's, borrowed: nothing here frees one.
 */
#ifndef SL_REDIS_PROTO_H
#define SL_REDIS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "sluice.h"

/* The script's text: the Lua files of src/redis/lua/ in one
 * NUL-terminated string (generated at build time by embed.cmake there),
 * what SCRIPT LOAD loads and EVAL sends. */
extern const char sl__redis_script[];
/* The same Lua as a Redis Functions library (FUNCTION LOAD's text), and
 * the name of the library and of its one function, which FCALL calls:
 * "sluice_" and 16 hex digits of the Lua's SHA1, so that each build of
 * the script is a library of its own. */
extern const char sl__redis_library[];
extern const char sl__redis_function[];

/* The script's SHA1 in hex, as EVALSHA names it. */
#define SL__REDIS_SHA_LEN 40

/* ---- naming the script (script.c) ----
 *
 * A command names the script on its server by a "ref": a string equal to
 * sl__redis_function (FCALL: the server took the library), a SHA1
 * (EVALSHA: a server that refused FUNCTION LOAD), or NULL (EVAL with the
 * text: the server has neither yet).  A driver keeps the SHA1 from SCRIPT
 * LOAD beside whether FUNCTION LOAD succeeded, so that a server that lost
 * the library and refuses it again is still called by EVALSHA. */

/* 1 if ref is one of the three, else 0. */
int sl__redis_script_ref_ok(const char *ref);
/* The command ("FCALL", "EVALSHA" or "EVAL") and its first argument
 * (*name, *len: the function's name, the SHA1 or the script's text) for
 * ref, which must be ok. */
const char *sl__redis_script_command(const char *ref, const char **name,
                                     size_t *len);
/* FUNCTION LOAD and the library, as argc (returned, 3) and argv[3],
 * lens[3]: what the handshake sends, and what a driver sends to a server
 * that answered an FCALL "Function not found" (a restart, FUNCTION
 * FLUSH), before the call again as EVAL.  Not REPLACE: a library of this
 * name is this library, so a server that has it (another daemon loaded
 * it, or several calls met the flush) answers a cheap error instead of
 * compiling it again and sending it to its replicas. */
int sl__redis_function_load_args(const char **argv, size_t *lens);
/* 1 if r, the reply to it, says the server has the library now (loaded,
 * or "already exists"), else 0. */
int sl__redis_function_loaded(const redisReply *r);

/* ---- what the core takes of a store (src/store/redis_store.h) ---- */

/* Where a Redis store connects, as parsed from its options.  Strings are
 * borrowed from whoever filled it (a store's: valid until sl_store_free);
 * NULL when unset. */
typedef struct sl__redis_endpoint {
    const char *host; /* NULL with unix_path */
    int port;
    const char *unix_path;
    int db;
    const char *user;
    const char *password;
    int timeout_ms;
    /* A redis-cluster:// store: its seed nodes (host and port are the
     * first); n_seeds is 0 for a plain store. */
    size_t n_seeds;
    const char *const *seed_hosts;
    const int *seed_ports;
    /* TLS to every server (store/tls_client.h); NULL: plain TCP.  Only
     * carried here: the core does no I/O. */
    const struct sl__tls_client *tls;
    /* A redis-sentinel:// store: the Sentinels to ask where master_name's
     * master is (host and port are then unset until one answers), and
     * their own credentials; n_sentinels is 0 otherwise. */
    size_t n_sentinels;
    const char *const *sentinel_hosts;
    const int *sentinel_ports;
    const char *master_name;
    const char *sentinel_user;
    const char *sentinel_password;
} sl__redis_endpoint;

/* What a call needs of its store: how keys are named, how long they may
 * be and how the script is told the time.  prefix is borrowed from the
 * store. */
typedef struct sl__redis_keyspace {
    const char *prefix;  /* "sl:" by default; no '{' or '}' */
    char tag_delimiter;  /* 0: the whole key is the hash tag */
    int use_server_time; /* the script reads Redis's TIME, not `now` */
    int64_t extra_ttl_ms;
    int cluster;        /* one part per slot (a redis-cluster:// store) */
    size_t max_key_len; /* a longer key is SL_EKEYLEN */
} sl__redis_keyspace;

/* ---- replies (reply.c) ---- */

/* Redirections (MOVED, ASK) and TRYAGAINs one command follows before
 * giving up: a slot moves at most a few times during one reshard, and a
 * client that keeps being redirected has a cluster it cannot follow. */
#define SL__REDIS_MAX_HOPS 5

/* A "MOVED slot host:port" or "ASK slot host:port" error reply.  host is
 * "" when the node does not know its address (use the one that answered). */
typedef struct sl__redis_redirect {
    int ask; /* 1: ASK (this command only), 0: MOVED (the slot has moved) */
    int slot;
    char host[256];
    int port;
} sl__redis_redirect;

/* What a reply is, for a driver deciding what to do next. */
enum {
    SL__REDIS_REPLY_OK,          /* not an error: the command's answer */
    SL__REDIS_REPLY_NONE,        /* NULL: no reply (the connection failed) */
    SL__REDIS_REPLY_NOSCRIPT,    /* the server lacks the script (NOSCRIPT)
                                  * or the library ("Function not found"):
                                  * EVAL it */
    SL__REDIS_REPLY_MOVED,       /* go to rd's node, read the map again */
    SL__REDIS_REPLY_ASK,         /* go to rd's node once, ASKING first */
    SL__REDIS_REPLY_TRYAGAIN,    /* a migration splits the keys: wait */
    SL__REDIS_REPLY_CLUSTERDOWN, /* the cluster cannot serve: re-read map */
    SL__REDIS_REPLY_READONLY,    /* a replica now: ask the Sentinels again */
    SL__REDIS_REPLY_ERROR,       /* any other error, a malformed redirect too */
};

/* The kind of r; for MOVED and ASK, *rd is filled (rd may be NULL). */
int sl__redis_reply_kind(const redisReply *r, sl__redis_redirect *rd);

/* 0 and *out filled, or -1 when (err, len) is not a redirection. */
int sl__redis_redirect_parse(const char *err, size_t len,
                             sl__redis_redirect *out);

/* ---- the handshake of a new connection (handshake.c) ---- */

/* The commands a handshake may hold, so that each reply can be checked. */
enum {
    SL__REDIS_CMD_AUTH,          /* AUTH [user] password, if a password */
    SL__REDIS_CMD_SELECT,        /* SELECT db, if db is not 0 */
    SL__REDIS_CMD_SCRIPT_LOAD,   /* its reply is the script's SHA1 */
    SL__REDIS_CMD_CLUSTER_SLOTS, /* its reply is the slot map */
    SL__REDIS_CMD_INFO_CLUSTER,  /* cluster_enabled:1 refuses the store */
    SL__REDIS_CMD_FUNCTION_LOAD, /* an error: the server is called EVALSHA */
    SL__REDIS_CMD_ROLE,          /* a Sentinel's master must say "master" */
};

/* sl__redis_handshake_init() flags: the optional commands.  INFO cluster
 * comes right after AUTH (before SELECT, which a Cluster node refuses),
 * the others in this order after SELECT.  A plain redis:// store sends
 * INFO cluster: a Cluster node behind it would answer every call MOVED. */
#define SL__REDIS_WITH_SCRIPT_LOAD 0x1u
#define SL__REDIS_WITH_CLUSTER_SLOTS 0x2u
#define SL__REDIS_WITH_CLUSTER_CHECK 0x4u
/* FUNCTION LOAD of the library, right after SCRIPT LOAD: a refusal of it
 * is not the handshake's failure (check: 1). */
#define SL__REDIS_WITH_FUNCTION_LOAD 0x8u
/* ROLE, last: the server a Sentinel named is still the master (a
 * Sentinel's answer can be old while a failover goes on). */
#define SL__REDIS_WITH_ROLE_CHECK 0x10u

/* Commands as argc, argv and lens (for redisCommandArgv and its async
 * twin), pointing into the struct itself and the endpoint's strings:
 * valid while both are, and not to be copied. */
typedef struct sl__redis_handshake {
    size_t n;
    struct {
        int kind; /* SL__REDIS_CMD_* */
        int argc;
        const char *argv[3];
        size_t lens[3];
    } cmd[7];
    char db[24]; /* SELECT's argument */
} sl__redis_handshake;

/* Lists in hs what a new connection to ep sends before anything else, to
 * be pipelined in order: AUTH, SELECT, then what `with` adds. */
void sl__redis_handshake_init(sl__redis_handshake *hs,
                              const sl__redis_endpoint *ep, unsigned with);

/* Checks the reply to a handshake command of that kind: 0, or SL_ESTORE
 * with a message in err ("redis AUTH: WRONGPASS ...") for no reply, an
 * error reply or, for SCRIPT LOAD, one that is not a SHA1; SL_EINVAL for
 * INFO cluster from a Cluster node (the URL should be redis-cluster://).  For
 * SCRIPT LOAD the SHA1 is copied to sha (41 bytes, NUL-terminated) on success
 * only; sha may be NULL for the other kinds.  FUNCTION LOAD is 0 when the
 * server took the library (calls FCALL it), 1 for any other reply, with
 * the reason in err (calls EVALSHA: not an error). */
int sl__redis_handshake_check(int kind, const redisReply *r, char *sha,
                              char *err, size_t errlen);

/* ---- Redis Sentinel (sentinel.c) ---- */

/* The question a Sentinel is asked, SENTINEL get-master-addr-by-name,
 * as argv and lens (3 each, pointing into ep): its argc. */
int sl__redis_sentinel_args(const sl__redis_endpoint *ep, const char **argv,
                            size_t *lens);
/* Its reply r: 0 with the master's address in host (hostlen bytes) and
 * *port, or SL_ESTORE with err saying why ("no reply", the Sentinel's
 * error, "does not know the master ..."). */
int sl__redis_sentinel_master(const sl__redis_endpoint *ep, const redisReply *r,
                              char *host, size_t hostlen, int *port, char *err,
                              size_t errlen);

/* ---- RESP (resp.c) ---- */

/* The length in RESP of a command of argc arguments of lens[i] bytes, so
 * that a caller can size a buffer it reuses: "*argc\r\n", then
 * "$len\r\n" and the bytes and "\r\n" per argument. */
size_t sl__redis_resp_len(int argc, const size_t *lens);
/* Writes it at out, which has room for sl__redis_resp_len() bytes (no
 * NUL is added); returns the bytes written. */
size_t sl__redis_resp_write(char *out, int argc, const char *const *argv,
                            const size_t *lens);

/* ---- calls (call.c) ----
 *
 * A call built by sl__redis_call_new() decides exactly as
 * sl_check_costs() on the same store would (same keys, same script, same
 * all-or-nothing).  On a plain store it is one script call; on a cluster
 * store, one part per slot of its keys, in ascending slot order, each
 * atomic on its own: the request is allowed only if every part allows,
 * and a part that allowed keeps what it consumed even when another part
 * refused (docs/stores.md, "Redis Cluster"). */

typedef struct sl__redis_call sl__redis_call;

/* Whether the script can decide lim exactly: 0, or SL_ERANGE with why in
 * errbuf.  A limit's times are sent in the least tick of 10^k ns, k <= 9,
 * that keeps them below 2^52 (call.c), so any period of whole seconds
 * fits; a server checks its rules with this when they load. */
int sl__redis_limit_fits(const sl_limit *lim, char *errbuf, size_t errlen);
/* Whether the script's refusal of lim with retry_after r, at the server's
 * time T, refuses every later call of lim and key of at least the same
 * cost before T + r, whatever other clients send meanwhile, and writes
 * nothing a later call could see: so that a caller may answer those calls
 * itself (the daemon's negative cache, docs/stores.md).  1 or 0. */
int sl__redis_refusal_lasts(const sl_limit *lim);

/*
 * Builds the call that decides (items, costs, n, now, flags) as
 * sl_check_costs() would on the Redis store whose key space is ks (from
 * sl__redis_store_keyspace(); only read, and not kept).  sha: the
 * script's SHA1 (40 hex digits, from SCRIPT LOAD; borrowed until the call
 * is freed) for EVALSHA, or NULL for EVAL with the script's text.
 * Returns 0 and *out (the caller frees it with sl__redis_call_free()), or
 * the errors of sl_check_costs(), SL_EINVAL (ks NULL, a bad flag or sha,
 * the same limit and key twice), SL_ERANGE for a limit the script cannot
 * decide exactly, with a message in errbuf when not NULL.  The items'
 * keys are copied; the call keeps no pointer into them.
 */
int sl__redis_call_new(const sl__redis_keyspace *ks, const sl_check_item *items,
                       const int64_t *costs, size_t n, sl_nanos now,
                       unsigned flags, const char *sha, sl__redis_call **out,
                       char *errbuf, size_t errlen);
void sl__redis_call_free(sl__redis_call *call); /* NULL: no-op */

/* A lease (lease.lua; the daemon's leases, docs/stores.md "Leases"): the
 * units Redis counted beyond the call's cost, for a fixed_window in the
 * window that starts at (window_s, window_ns) on its clock (0 0 for a
 * bucket's). */
typedef struct sl__redis_grant {
    int64_t units, window_s, window_ns;
} sl__redis_grant;

/* A lease an item asks beyond its cost: units (0: none) and, of a leased
 * bucket (lease_bucket.lua), how long it lives on Redis's clock and the
 * asking thread's holder id. */
typedef struct sl__redis_ask {
    int64_t units;
    int64_t life_ms;
    uint64_t holder;
} sl__redis_ask;

/* As sl__redis_call_new(), with asks[i] (asks NULL: none) the lease item
 * i asks: units 0 for none; more only of a limit that may lease
 * (sl__redis_may_lease), committed (no SL_RECORD), and of a leased bucket
 * only with life_ms from 1 to 2^40, else SL_EINVAL.  What Redis granted
 * is taken with sl__redis_call_take_grants(). */
int sl__redis_call_new_asking(const sl__redis_keyspace *ks,
                              const sl_check_item *items, const int64_t *costs,
                              const sl__redis_ask *asks, size_t n, sl_nanos now,
                              unsigned flags, const char *sha,
                              sl__redis_call **out, char *errbuf,
                              size_t errlen);
/* Whether lim's items may ask a lease: a fixed_window whose times the
 * script keeps in ns (lease.lua reads and writes its state so), or a
 * leased bucket of its own numbers (not an override). */
int sl__redis_may_lease(const sl_limit *lim);
/* Whether lim is a token_bucket or gcra in ns that its rule leases
 * (sl_limit's leased, and its overrides'): every call of it carries the
 * mark that has the script apply its leases' floor. */
int sl__redis_leased_bucket(const sl_limit *lim);
/* Per item what the parts read with 0 so far were granted (units 0: none
 * asked, the call refused, or its part not read), into out[0 .. n); the
 * call then holds none, so that each grant is taken once. */
void sl__redis_call_take_grants(sl__redis_call *call, sl__redis_grant *out);

/* The Redis key of (limit ident, key) in ks, at out, which has room for
 * sl__redis_key_name_max(ks, key_len) bytes: its length. */
size_t sl__redis_key_name(const sl__redis_keyspace *ks, uint64_t ident,
                          const void *key, size_t key_len, char *out);
size_t sl__redis_key_name_max(const sl__redis_keyspace *ks, size_t key_len);
/* The index, from 1, of the ':' after the identity in ks's key names
 * (lease_bucket.lua names a key's lease hash by it). */
size_t sl__redis_key_ident_at(const sl__redis_keyspace *ks);

/* Part 0's command as argc (returned), argv and lens.  Borrowed: valid
 * until the call is freed or its script is named again (use_eval). */
int sl__redis_call_argv(const sl__redis_call *call, const char *const **argv,
                        const size_t **lens);
/* Part 0 as EVAL with the script's text: after a NOSCRIPT. */
void sl__redis_call_use_eval(sl__redis_call *call);

/*
 * Decodes the reply to a one-part call: 0 with each[] (may be NULL) and
 * *overall (may be NULL) filled as sl_check_costs() fills them; 1 when
 * the server does not have the script (NOSCRIPT: send the call again
 * after sl__redis_call_use_eval()); or SL_ERANGE, SL_EINVAL (the script
 * refused the input) or SL_ESTORE (no reply, any other error reply or an
 * unexpected shape), with a message in errbuf when not NULL.  A call of
 * several parts is SL_EINVAL: read each with sl__redis_call_read_part().
 */
int sl__redis_call_read(const sl__redis_call *call, const redisReply *reply,
                        sl_decision *each, sl_decision *overall, char *errbuf,
                        size_t errlen);

/* A call's parts: 1 on a plain store, one per slot on a cluster store. */
size_t sl__redis_call_parts(const sl__redis_call *call);
/* Part p's slot (-1 on a plain store) and command, as sl__redis_call_argv(). */
int sl__redis_call_part_slot(const sl__redis_call *call, size_t part);
int sl__redis_call_part_argv(const sl__redis_call *call, size_t part,
                             const char *const **argv, const size_t **lens);
/* Names the script in part p: EVALSHA sha (borrowed as in
 * sl__redis_call_new), or EVAL with its text when sha is NULL. */
void sl__redis_call_part_use_sha(sl__redis_call *call, size_t part,
                                 const char *sha);
void sl__redis_call_part_use_eval(sl__redis_call *call, size_t part);
/* Decodes part p's reply and keeps its items' decisions in the call:
 * returns as sl__redis_call_read().  A MOVED or ASK error reply is
 * SL_ESTORE here: the caller classifies it first (sl__redis_reply_kind). */
int sl__redis_call_read_part(sl__redis_call *call, size_t part,
                             const redisReply *reply, char *errbuf,
                             size_t errlen);
/* Once every part has been read with 0: each[] and *overall (either may
 * be NULL) as sl_check_costs() fills them. */
void sl__redis_call_result(const sl__redis_call *call, sl_decision *each,
                           sl_decision *overall);

/* ---- batches (redis_batch.c) ----
 *
 * Several calls as ONE script call, for a caller with many calls waiting
 * at once (sluice serve under load).  Redis runs the script once and,
 * inside it, decides the calls one after the other in the order given,
 * each exactly as if it had been sent alone: its own items all or
 * nothing, and an error (SL_ERANGE, a key of another type...) ends only
 * that call.  Calls must be of one part each and share a server (a plain
 * store; on a cluster, one slot).  At most SL__REDIS_MAX_BATCH calls: a
 * batch names each call's (now, head) by one byte. */
#define SL__REDIS_MAX_BATCH 256

/* Writes the batch's command in RESP (for redisAsyncFormattedCommand())
 * to *out, which the caller frees with free(); sha NULL: EVAL with the
 * script's text (after a NOSCRIPT).  Returns 0, SL_EINVAL (no calls or
 * more than SL__REDIS_MAX_BATCH, a call of several parts, a bad sha) or
 * SL_ENOMEM.  The calls are only read. */
int sl__redis_batch_format(sl__redis_call *const *calls, size_t n,
                           const char *sha, char **out, size_t *len);
/* Call i's reply within the batch's reply, for sl__redis_call_read() or
 * sl__redis_call_read_part(): its element, or the whole reply when that
 * is not an array of n (an error reply, NOSCRIPT included, or NULL). */
const redisReply *sl__redis_batch_reply(const redisReply *reply, size_t n,
                                        size_t i);

/* ---- Redis Cluster (slots.c) ---- */

#define SL__REDIS_SLOTS 16384
#define SL__REDIS_MAX_NODES 1024 /* masters in one slot map, seeds in a URL */

/* The Cluster slot of a key name: CRC16 (XMODEM) mod 16384 of its hash
 * tag (the bytes between the first '{' and the next '}', if not empty),
 * else of the whole name. */
int sl__redis_key_slot(const void *key, size_t len);

/* Which master serves each slot, from a CLUSTER SLOTS reply. */
typedef struct sl__redis_slot_map sl__redis_slot_map;

/* reply: the reply to CLUSTER SLOTS; default_host stands for a node that
 * reports its host as "" or "?" (the host the reply came from).  0 and
 * *out (the caller frees it with sl__redis_slot_map_free()), or SL_EINVAL
 * for a malformed reply, one with no slot, or more than
 * SL__REDIS_MAX_NODES masters. */
int sl__redis_slot_map_new(const redisReply *reply, const char *default_host,
                           sl__redis_slot_map **out);
/* The index of the master of slot, or -1 if no node serves it. */
int sl__redis_slot_map_node(const sl__redis_slot_map *map, int slot);
size_t sl__redis_slot_map_nodes(const sl__redis_slot_map *map);
/* Node i's host (borrowed from the map) and *port. */
const char *sl__redis_slot_map_host(const sl__redis_slot_map *map, size_t node,
                                    int *port);
void sl__redis_slot_map_free(sl__redis_slot_map *map); /* NULL: no-op */

#endif /* SL_REDIS_PROTO_H */
