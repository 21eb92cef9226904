/*
 * test_redis_proto.c - the Redis protocol core (src/redis/) without a
 * server: replies are made from RESP text by hiredis's own reader, as a
 * connection would hand them over, and stores are made with lazy_connect,
 * which parses options and never connects.
 *
 *   - what a reply is (NULL, NOSCRIPT, MOVED and ASK with and without a
 *     host, TRYAGAIN, CLUSTERDOWN, other errors, malformed redirections);
 *   - the handshake a connection sends for an endpoint (password, user,
 *     db, cluster probe) and the checks of its replies;
 *   - the RESP writer, byte for byte;
 *   - calls: their arguments, their parts on a cluster store, their
 *     replies read back; batches: their command and each call's reply;
 *   - key slots, redirections and slot maps against known values.
 */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include "internal.h"
#include "redis/redis_proto.h"
#include "store/redis_store.h"

#define SHA "0123456789abcdef0123456789abcdef01234567"
#define SHA_39 "0123456789abcdef0123456789abcdef0123456"

/* A reply parsed from RESP bytes, as hiredis would hand it over (a
 * command parses as an array of its arguments). */
static redisReply *resp_n(const char *bytes, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    redisReaderFeed(rd, bytes, len);
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    redisReaderFree(rd);
    assert_non_null(r);
    return r;
}

static redisReply *resp(const char *text)
{
    return resp_n(text, strlen(text));
}

/* A Redis store that only parses its options. */
static sl_store *lazy_store(sl_redis_options o)
{
    sl_store *st = NULL;
    char err[256] = "";
    o.size = sizeof(o); /* the callers' literals leave it to here */
    o.lazy_connect = 1;
    if (sl_redis_store_new(&o, &st, err, sizeof(err)) != 0)
        fail_msg("sl_redis_store_new: %s", err);
    return st;
}

/* The key space calls are built with, as a driver fetches it once. */
static sl__redis_keyspace keyspace_of(sl_store *st)
{
    sl__redis_keyspace ks;
    assert_int_equal(sl__redis_store_keyspace(st, &ks), 0);
    return ks;
}

/* ---- replies ---- */

static int kind_of(const char *text, sl__redis_redirect *rd)
{
    redisReply *r = resp(text);
    int kind = sl__redis_reply_kind(r, rd);
    freeReplyObject(r);
    return kind;
}

static void test_reply_kinds(void **state)
{
    sl__redis_redirect rd;
    (void)state;
    expect_eq(sl__redis_reply_kind(NULL, &rd), SL__REDIS_REPLY_NONE);
    expect_eq(kind_of("+OK\r\n", NULL), SL__REDIS_REPLY_OK);
    expect_eq(kind_of(":3\r\n", NULL), SL__REDIS_REPLY_OK);
    expect_eq(kind_of("*1\r\n-ERR inside\r\n", NULL), SL__REDIS_REPLY_OK);
    expect_eq(kind_of("-NOSCRIPT No matching script.\r\n", NULL),
              SL__REDIS_REPLY_NOSCRIPT);
    expect_eq(kind_of("-TRYAGAIN Multiple keys request\r\n", NULL),
              SL__REDIS_REPLY_TRYAGAIN);
    expect_eq(kind_of("-CLUSTERDOWN The cluster is down\r\n", NULL),
              SL__REDIS_REPLY_CLUSTERDOWN);
    expect_eq(kind_of("-ERR unknown command\r\n", NULL), SL__REDIS_REPLY_ERROR);
    /* FCALL unknown (Redis 6, or renamed away): as a lost library. */
    expect_eq(kind_of("-ERR unknown command `FCALL`, with args beginning "
                      "with: `sluice_1`, \r\n",
                      NULL),
              SL__REDIS_REPLY_NOSCRIPT);
    expect_eq(kind_of("-ERR unknown command 'FCALL', with args beginning "
                      "with: 'sluice_1' \r\n",
                      NULL),
              SL__REDIS_REPLY_NOSCRIPT);
    expect_eq(kind_of("-ERR Function not found\r\n", NULL),
              SL__REDIS_REPLY_NOSCRIPT);
    /* Another command unknown, or quotes that do not pair: an error. */
    expect_eq(kind_of("-ERR unknown command 'EVAL', with args\r\n", NULL),
              SL__REDIS_REPLY_ERROR);
    expect_eq(kind_of("-ERR unknown command 'FCALLX', with args\r\n", NULL),
              SL__REDIS_REPLY_ERROR);
    expect_eq(kind_of("-ERR unknown command 'FCALL\r\n", NULL),
              SL__REDIS_REPLY_ERROR);
    expect_eq(kind_of("-ERR unknown command 'FCAL\r\n", NULL),
              SL__REDIS_REPLY_ERROR);
    /* A word is the whole first word, not a prefix of it. */
    expect_eq(kind_of("-NOSCRIPTS x\r\n", NULL), SL__REDIS_REPLY_ERROR);
    expect_eq(kind_of("-NOSCRIPT\r\n", NULL), SL__REDIS_REPLY_NOSCRIPT);

    memset(&rd, 0x5a, sizeof(rd));
    expect_eq(kind_of("-MOVED 3999 127.0.0.1:6381\r\n", &rd),
              SL__REDIS_REPLY_MOVED);
    expect_eq(rd.ask, 0);
    expect_eq(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    expect_eq(rd.port, 6381);
    expect_eq(kind_of("-ASK 12 :7002\r\n", &rd), SL__REDIS_REPLY_ASK);
    expect_eq(rd.ask, 1);
    expect_eq(rd.slot, 12);
    assert_string_equal(rd.host, ""); /* the node that answered */
    expect_eq(rd.port, 7002);
    /* rd may be NULL: the kind alone. */
    expect_eq(kind_of("-ASK 12 h:1\r\n", NULL), SL__REDIS_REPLY_ASK);

    /* Malformed redirections are plain errors, never a hop. */
    const char *bad[] = {"-MOVED\r\n",       "-MOVED 16384 h:1\r\n",
                         "-MOVED x h:1\r\n", "-ASK 1 h:0\r\n",
                         "-ASK 1 h\r\n",     "-MOVEDX 1 h:1\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_eq_at(kind_of(bad[i], &rd), SL__REDIS_REPLY_ERROR, "%s", bad[i]);
}

/* ---- the handshake ---- */

static void expect_cmd(const sl__redis_handshake *hs, size_t i, int kind,
                       const char *a0, const char *a1, const char *a2)
{
    const char *want[3] = {a0, a1, a2};
    int argc = a2 ? 3 : a1 ? 2 : 1;
    expect_eq(hs->cmd[i].kind, kind);
    expect_eq(hs->cmd[i].argc, argc);
    for (int j = 0; j < argc; j++) {
        expect_eq(hs->cmd[i].lens[j], strlen(want[j]));
        assert_memory_equal(hs->cmd[i].argv[j], want[j], strlen(want[j]));
    }
}

static void test_handshake_commands(void **state)
{
    sl__redis_endpoint ep = {.host = "h", .port = 1};
    sl__redis_handshake hs;
    (void)state;

    sl__redis_handshake_init(&hs, &ep, 0);
    expect_eq(hs.n, 0);
    sl__redis_handshake_init(&hs, &ep, SL__REDIS_WITH_SCRIPT_LOAD);
    expect_eq(hs.n, 1);
    expect_cmd(&hs, 0, SL__REDIS_CMD_SCRIPT_LOAD, "SCRIPT", "LOAD",
               sl__redis_script);

    ep.password = "pw";
    sl__redis_handshake_init(&hs, &ep, 0);
    expect_eq(hs.n, 1);
    expect_cmd(&hs, 0, SL__REDIS_CMD_AUTH, "AUTH", "pw", NULL);

    /* Everything, in order: AUTH user password, SELECT, LOAD, SLOTS. */
    ep.user = "me";
    ep.db = 15;
    sl__redis_handshake_init(
        &hs, &ep, SL__REDIS_WITH_SCRIPT_LOAD | SL__REDIS_WITH_CLUSTER_SLOTS);
    expect_eq(hs.n, 4);
    expect_cmd(&hs, 0, SL__REDIS_CMD_AUTH, "AUTH", "me", "pw");
    expect_cmd(&hs, 1, SL__REDIS_CMD_SELECT, "SELECT", "15", NULL);
    expect_cmd(&hs, 2, SL__REDIS_CMD_SCRIPT_LOAD, "SCRIPT", "LOAD",
               sl__redis_script);
    expect_cmd(&hs, 3, SL__REDIS_CMD_CLUSTER_SLOTS, "CLUSTER", "SLOTS", NULL);

    /* A plain store's INFO cluster: right after AUTH, before SELECT (which
     * a Cluster node refuses). */
    sl__redis_handshake_init(
        &hs, &ep, SL__REDIS_WITH_SCRIPT_LOAD | SL__REDIS_WITH_CLUSTER_CHECK);
    expect_eq(hs.n, 4);
    expect_cmd(&hs, 1, SL__REDIS_CMD_INFO_CLUSTER, "INFO", "cluster", NULL);
    expect_cmd(&hs, 2, SL__REDIS_CMD_SELECT, "SELECT", "15", NULL);

    /* A user without a password sends nothing: AUTH needs a password. */
    ep = (sl__redis_endpoint){.host = "h", .port = 1, .user = "me"};
    sl__redis_handshake_init(&hs, &ep, SL__REDIS_WITH_CLUSTER_SLOTS);
    expect_eq(hs.n, 1);
    expect_cmd(&hs, 0, SL__REDIS_CMD_CLUSTER_SLOTS, "CLUSTER", "SLOTS", NULL);
}

/* The check of one reply: its code, and the message (or sha) it left. */
static int check_reply(int kind, const char *text, char *sha, char *err)
{
    redisReply *r = text ? resp(text) : NULL;
    int rc = sl__redis_handshake_check(kind, r, sha, err, 256);
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

static void test_handshake_checks(void **state)
{
    char sha[41] = "untouched", err[256];
    (void)state;

    expect_eq(check_reply(SL__REDIS_CMD_AUTH, "+OK\r\n", NULL, err), 0);
    expect_eq(check_reply(SL__REDIS_CMD_SELECT, "+OK\r\n", NULL, err), 0);
    expect_eq(check_reply(SL__REDIS_CMD_CLUSTER_SLOTS, "*0\r\n", NULL, err), 0);
    expect_eq(check_reply(SL__REDIS_CMD_AUTH, NULL, NULL, err), SL_ESTORE);
    assert_string_equal(err, "redis AUTH: no reply");
    expect_eq(
        check_reply(SL__REDIS_CMD_AUTH, "-WRONGPASS invalid\r\n", NULL, err),
        SL_ESTORE);
    assert_string_equal(err, "redis AUTH: WRONGPASS invalid");
    expect_eq(check_reply(SL__REDIS_CMD_SELECT, "-ERR DB index\r\n", NULL, err),
              SL_ESTORE);
    assert_string_equal(err, "redis SELECT: ERR DB index");

    /* SCRIPT LOAD: a SHA1 of 40 characters, else the sha is kept. */
    expect_eq(check_reply(SL__REDIS_CMD_SCRIPT_LOAD, "$39\r\n" SHA_39 "\r\n",
                          sha, err),
              SL_ESTORE);
    assert_string_equal(err, "redis SCRIPT LOAD: unexpected reply");
    assert_string_equal(sha, "untouched");
    expect_eq(check_reply(SL__REDIS_CMD_SCRIPT_LOAD, ":40\r\n", sha, err),
              SL_ESTORE);
    expect_eq(check_reply(SL__REDIS_CMD_SCRIPT_LOAD,
                          "-NOAUTH Authentication required.\r\n", sha, err),
              SL_ESTORE);
    assert_string_equal(err, "redis SCRIPT LOAD: NOAUTH Authentication "
                             "required.");
    assert_string_equal(sha, "untouched");
    expect_eq(
        check_reply(SL__REDIS_CMD_SCRIPT_LOAD, "$40\r\n" SHA "\r\n", sha, err),
        0);
    assert_string_equal(sha, SHA);

    /* INFO cluster: a Cluster node is refused (SL_EINVAL, the URL is
     * wrong); an error reply (an ACL without INFO) cannot tell: 0. */
    expect_eq(check_reply(SL__REDIS_CMD_INFO_CLUSTER,
                          "$19\r\ncluster_enabled:0\r\n\r\n", NULL, err),
              0);
    expect_eq(check_reply(SL__REDIS_CMD_INFO_CLUSTER,
                          "$19\r\ncluster_enabled:1\r\n\r\n", NULL, err),
              SL_EINVAL);
    assert_non_null(strstr(err, "use redis-cluster://"));
    expect_eq(check_reply(SL__REDIS_CMD_INFO_CLUSTER,
                          "-NOPERM this user has no permissions\r\n", NULL,
                          err),
              0);
}

/* ---- RESP ---- */

static void expect_resp(int argc, const char *const *argv, const size_t *lens,
                        const char *want, size_t want_len)
{
    char out[512];
    size_t len = sl__redis_resp_len(argc, lens);
    expect_eq(len, want_len);
    assert_true(len <= sizeof(out));
    memset(out, '#', sizeof(out));
    expect_eq(sl__redis_resp_write(out, argc, argv, lens), want_len);
    assert_memory_equal(out, want, want_len);
    expect_eq(out[want_len], '#'); /* nothing past the end, no NUL */
}

static void test_resp_writer(void **state)
{
    (void)state;
    {
        const char *argv[3] = {"SET", "k", "v"};
        const size_t lens[3] = {3, 1, 1};
        static const char want[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n"
                                   "$1\r\nv\r\n";
        expect_resp(3, argv, lens, want, sizeof(want) - 1);
    }
    {
        /* Binary-safe: NUL, CR and LF inside; an empty argument. */
        const char *argv[2] = {"a\0b\r\nc", ""};
        const size_t lens[2] = {6, 0};
        static const char want[] = "*2\r\n$6\r\na\0b\r\nc\r\n$0\r\n\r\n";
        expect_resp(2, argv, lens, want, sizeof(want) - 1);
    }
    {
        /* Lengths across a digit: 9, 10, 100; a count of 12. */
        static const char x[101] =
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxx";
        const char *argv[12];
        size_t lens[12];
        char want[512], *w = want;
        for (int i = 0; i < 12; i++) {
            argv[i] = x;
            lens[i] = i == 0 ? 9 : i == 1 ? 10 : i == 2 ? 100 : 1;
        }
        w += sprintf(w, "*12\r\n");
        for (int i = 0; i < 12; i++) {
            w += sprintf(w, "$%zu\r\n", lens[i]);
            memcpy(w, x, lens[i]);
            w += lens[i];
            w += sprintf(w, "\r\n");
        }
        expect_resp(12, argv, lens, want, (size_t)(w - want));
    }
    expect_resp(0, NULL, NULL, "*0\r\n", 4);
}

/* ---- calls and batches ---- */

/* A call's argument j as a string, for comparing. */
static int arg_is(const sl__redis_call *c, size_t part, int j, const char *s)
{
    const char *const *argv;
    const size_t *lens;
    int argc = sl__redis_call_part_argv(c, part, &argv, &lens);
    return j < argc && lens[j] == strlen(s) && memcmp(argv[j], s, lens[j]) == 0;
}

static void test_call_arguments(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){.url = "redis://127.0.0.1:1",
                                                 .key_prefix = "t:",
                                                 .tag_delimiter = '/',
                                                 .extra_ttl_ms = 7,
                                                 .max_key_len = 11});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 0);
    sl_check_item it = {lim, "tenant/user", 11};
    int64_t cost = 3;
    const char *const *argv;
    const size_t *lens;
    sl__redis_call *c;
    char err[256];
    (void)state;

    expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 5 * SEC + 6, SL_RECORD,
                                 SHA, &c, err, sizeof(err)),
              0);
    expect_eq(sl__redis_call_parts(c), 1);
    expect_eq(sl__redis_call_part_slot(c, 0), -1);
    /* EVALSHA sha 1 key now_s now_ns "ttl,record,spec,cost" */
    expect_eq(sl__redis_call_argv(c, &argv, &lens), 7);
    assert_true(arg_is(c, 0, 0, "EVALSHA") && arg_is(c, 0, 1, SHA));
    assert_true(arg_is(c, 0, 2, "1"));
    /* The key: prefix, the limit's identity, the tag in braces. */
    expect_eq(lens[3], 2 + 16 + 1 + 13);
    assert_memory_equal(argv[3], "t:", 2);
    assert_memory_equal(argv[3] + 18, ":{tenant}/user", 14);
    assert_true(arg_is(c, 0, 4, "5") && arg_is(c, 0, 5, "6"));
    /* token_bucket 10/s: L 10, P 1 s, B 10, T = 1e8 / 1. */
    assert_true(arg_is(c, 0, 6, "7,1,0 10 1000000000 10 0 0 100000000 1,3"));
    sl__redis_call_use_eval(c);
    assert_true(arg_is(c, 0, 0, "EVAL") && arg_is(c, 0, 1, sl__redis_script));
    sl__redis_call_part_use_sha(c, 0, SHA);
    assert_true(arg_is(c, 0, 0, "EVALSHA") && arg_is(c, 0, 1, SHA));
    sl__redis_call_free(c);

    /* Refused before anything is built. */
    expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 0, 0, "short", &c, err,
                                 sizeof(err)),
              SL_EINVAL);
    expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 0, 0x8, NULL, &c, err,
                                 sizeof(err)),
              SL_EINVAL);
    expect_eq(sl__redis_call_new(NULL, &it, &cost, 1, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              SL_EINVAL);
    sl_check_item longer = {lim, "tenant/users", 12};
    expect_eq(sl__redis_call_new(&ks, &longer, &cost, 1, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              SL_EKEYLEN);
    sl_check_item twice[2] = {it, it};
    int64_t costs[2] = {1, 1};
    expect_eq(sl__redis_call_new(&ks, twice, costs, 2, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              SL_EINVAL);
    assert_string_equal(err, "the same limit and key twice in one call");
    sl_limit_free(lim);
    sl_store_free(st);
}

/* Reads one reply to a one-part call of limit L = 10. */
static int read_reply(sl__redis_call *c, const char *text, sl_decision *d,
                      char *err)
{
    redisReply *r = text ? resp(text) : NULL;
    int rc = sl__redis_call_read(c, r, d, NULL, err, 256);
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

static void test_call_replies(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){.url = "redis://h:1"});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    sl_check_item it = {lim, "k", 1};
    int64_t cost = 1;
    sl__redis_call *c;
    sl_decision d;
    char err[256];
    (void)state;

    expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              0);
    expect_eq(read_reply(c, "*5\r\n:1\r\n:9\r\n:100\r\n:0\r\n:4\r\n", &d, err),
              0);
    expect_eq(d.allowed, 1);
    expect_eq(d.limit, 10);
    expect_eq(d.remaining, 9);
    expect_eq(d.reset_after, 100);
    expect_eq(d.retry_after, 0);
    expect_eq(d.delay, 4);
    expect_eq(read_reply(c, "-NOSCRIPT No matching script\r\n", &d, err), 1);
    expect_eq(read_reply(c, NULL, &d, err), SL_ESTORE);
    assert_string_equal(err, "redis: no reply");
    expect_eq(read_reply(c, "-ERANGE now too far back\r\n", &d, err),
              SL_ERANGE);
    assert_string_equal(err, "redis: ERANGE now too far back");
    expect_eq(read_reply(c, "-EINVAL bad\r\n", &d, err), SL_EINVAL);
    expect_eq(read_reply(c, "-WRONGTYPE Operation\r\n", &d, err), SL_ESTORE);
    /* A redirection is an error here: the driver classifies it first. */
    expect_eq(read_reply(c, "-MOVED 1 h:1\r\n", &d, err), SL_ESTORE);
    expect_eq(read_reply(c, "*4\r\n:1\r\n:9\r\n:100\r\n:0\r\n", &d, err),
              SL_ESTORE);
    assert_string_equal(err, "redis: unexpected reply");
    expect_eq(
        read_reply(c, "*5\r\n:1\r\n$1\r\n9\r\n:1\r\n:0\r\n:0\r\n", &d, err),
        SL_ESTORE);
    /* Integers no decision reports: allowed not 0 or 1, a count below 0
     * or past 2^40, a time below 0 (a retry below -1). */
    static const char *const out_of_range[] = {
        "*5\r\n:2\r\n:9\r\n:100\r\n:0\r\n:0\r\n",
        "*5\r\n:-1\r\n:9\r\n:100\r\n:0\r\n:0\r\n",
        "*5\r\n:1\r\n:-1\r\n:100\r\n:0\r\n:0\r\n",
        "*5\r\n:1\r\n:1099511627777\r\n:100\r\n:0\r\n:0\r\n",
        "*5\r\n:1\r\n:9\r\n:-1\r\n:0\r\n:0\r\n",
        "*5\r\n:0\r\n:0\r\n:100\r\n:-2\r\n:0\r\n",
        "*5\r\n:1\r\n:9\r\n:100\r\n:0\r\n:-9223372036854775808\r\n",
    };
    for (size_t i = 0; i < sizeof(out_of_range) / sizeof(out_of_range[0]);
         i++) {
        expect_eq_at(read_reply(c, out_of_range[i], &d, err), SL_ESTORE,
                     "reply %zu", i);
        assert_string_equal(err, "redis: unexpected reply");
    }
    /* The edges are decisions: never (-1), a count of 2^40, a time as
     * far as int64 goes. */
    expect_eq(read_reply(c,
                         "*5\r\n:0\r\n:1099511627776\r\n:"
                         "9223372036854775807\r\n:-1\r\n:0\r\n",
                         &d, err),
              0);
    expect_eq(d.remaining, SL_MAX_COUNT);
    expect_eq(d.reset_after, INT64_MAX);
    expect_eq(d.retry_after, -1);
    sl__redis_call_free(c);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* One call of one item of lim at cost, read from a reply's text. */
static int read_one(sl_limit *lim, int64_t cost, const char *text,
                    sl_decision *d)
{
    sl_store *st = lazy_store((sl_redis_options){.url = "redis://h:1"});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_check_item it = {lim, "k", 1};
    sl__redis_call *c;
    char err[256];
    expect_eq(sl__redis_call_new(&ks, &it, &cost, 1, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              0);
    int rc = read_reply(c, text, d, err);
    sl__redis_call_free(c);
    sl_store_free(st);
    return rc;
}

/* A token_bucket or gcra item's reply may be fast.lua's one integer, its
 * lead in ticks (x admitted, -x - 1 refused): the fields are computed
 * from it as schedule.h reports them.  Any other call's integer reply, or
 * a lead no decision leaves, is an unexpected reply. */
static void test_bucket_integer_replies(void **state)
{
    /* T = 1e8 / 1: a unit is 1e8 ticks, B * T = 1e9. */
    sl_limit *tb = tu_limit(SL_TOKEN_BUCKET, 10, SEC, 0);
    /* gcra 3/s burst 3: T = 1e9 / 3, B * T = 3e9 ticks of 1/3 ns. */
    sl_limit *gc = tu_limit(SL_GCRA, 3, SEC, 0);
    sl_limit *fw = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    sl_decision d;
    (void)state;

    expect_eq(read_one(tb, 1, ":0\r\n", &d), 0);
    expect_eq(d.allowed && d.limit == 10 && d.remaining == 10, 1);
    expect_eq(d.reset_after == 0 && d.retry_after == 0 && d.delay == 0, 1);
    expect_eq(read_one(tb, 1, ":250000000\r\n", &d), 0);
    expect_eq(d.allowed && d.remaining == 7 && d.reset_after == 250000000, 1);
    /* Full, cost 3: the wait until 3 units fit, 3e8 ns. */
    expect_eq(read_one(tb, 3, ":-1000000001\r\n", &d), 0);
    expect_eq(!d.allowed && d.remaining == 0 && d.reset_after == SEC, 1);
    expect_eq(d.retry_after, 300000000);
    expect_eq(read_one(tb, 11, ":-1\r\n", &d), 0);
    expect_eq(!d.allowed && d.remaining == 10 && d.retry_after == -1, 1);
    expect_eq(read_one(gc, 1, ":1000000001\r\n", &d), 0);
    expect_eq(d.allowed && d.remaining == 1, 1);
    expect_eq(d.reset_after, 333333334);
    /* Refused at a lead of 2.5e9 + 1 ticks, cost 1: (0.5e9 + 1) / 3. */
    expect_eq(read_one(gc, 1, ":-2500000002\r\n", &d), 0);
    expect_eq(!d.allowed && d.remaining == 0, 1);
    expect_eq(d.retry_after, 166666667);
    expect_eq(read_one(tb, 1, ":1000000001\r\n", &d), SL_ESTORE);
    expect_eq(read_one(tb, 1, ":-1000000002\r\n", &d), SL_ESTORE);
    expect_eq(read_one(fw, 1, ":0\r\n", &d), SL_ESTORE);
    /* Refused at a lead where the request fits: no decision (found by
     * fuzz_cluster: its wait came out negative). */
    expect_eq(read_one(tb, 1, ":-1\r\n", &d), SL_ESTORE);
    expect_eq(read_one(tb, 1, ":-900000001\r\n", &d), SL_ESTORE);
    expect_eq(read_one(tb, 1, ":-900000002\r\n", &d), 0);
    expect_eq(!d.allowed && d.retry_after == 1, 1);
    sl_limit_free(tb);
    sl_limit_free(gc);
    sl_limit_free(fw);
}

/* On a cluster store a call has one part per slot, in ascending slot
 * order, and each part's reply lands on its own items. */
static void test_call_parts_on_a_cluster(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){
        .url = "redis-cluster://127.0.0.1:7000", .tag_delimiter = '/'});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    /* Slots 15495, 3300, 7365; "a/x" is tagged "a": a's slot. */
    sl_check_item items[4] = {
        {lim, "a", 1}, {lim, "b", 1}, {lim, "c", 1}, {lim, "a/x", 3}};
    int64_t costs[4] = {1, 1, 1, 1};
    int want_slot[3] = {sl__redis_key_slot("b", 1), sl__redis_key_slot("c", 1),
                        sl__redis_key_slot("a", 1)};
    sl_decision each[4], overall;
    sl__redis_call *c;
    char err[256], text[128];
    (void)state;

    expect_eq(sl__redis_call_new(&ks, items, costs, 4, 0, 0, NULL, &c, err,
                                 sizeof(err)),
              0);
    expect_eq(sl__redis_call_parts(c), 3);
    expect_eq(sl__redis_call_read(c, NULL, each, NULL, err, sizeof(err)),
              SL_EINVAL);
    for (size_t p = 0; p < 3; p++) {
        size_t n = p == 2 ? 2 : 1; /* a and a/x */
        char *t = text;
        expect_eq_at(sl__redis_call_part_slot(c, p), want_slot[p], "part %zu",
                     p);
        /* remaining: the part's index, so each item tells its part. */
        t += sprintf(t, "*%zu\r\n", 5 * n);
        for (size_t i = 0; i < n; i++)
            t += sprintf(t, ":1\r\n:%zu\r\n:0\r\n:0\r\n:0\r\n", p);
        redisReply *r = resp(text);
        expect_eq(sl__redis_call_read_part(c, p, r, err, sizeof(err)), 0);
        freeReplyObject(r);
    }
    sl__redis_call_result(c, each, &overall);
    expect_eq(each[0].remaining, 2);
    expect_eq(each[1].remaining, 0);
    expect_eq(each[2].remaining, 1);
    expect_eq(each[3].remaining, 2);
    expect_eq(overall.allowed, 1);
    expect_eq(overall.remaining, 0);
    sl__redis_call_free(c);
    sl_limit_free(lim);
    sl_store_free(st);
}

/* The key name of a one-item call on a cluster store, into name. */
static void key_name_of(const sl__redis_keyspace *ks, const sl_limit *lim,
                        const char *key, char *name, size_t cap)
{
    sl_check_item it = {lim, key, strlen(key)};
    int64_t cost = 1;
    const char *const *argv;
    const size_t *lens;
    sl__redis_call *c;
    expect_eq(sl__redis_call_new(ks, &it, &cost, 1, 0, 0, NULL, &c, NULL, 0),
              0);
    sl__redis_call_part_argv(c, 0, &argv, &lens);
    expect_eq(lens[3] < cap, 1);
    memcpy(name, argv[3], lens[3]);
    name[lens[3]] = 0;
    sl__redis_call_free(c);
}

/* A '}' in a client's key cannot end the hash tag early: "}AAAA" and
 * "}BBBB" once shared the slot of the empty tag's key; inside the braces
 * '}' and '\\' are escaped as '\\' and two hex digits, one to one. */
static void test_key_tag_escaped(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){
        .url = "redis-cluster://127.0.0.1:7000", .tag_delimiter = '/'});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 10, SEC, 0);
    char a[256], b[256], c[256];
    (void)state;

    key_name_of(&ks, lim, "}AAAA", a, sizeof(a));
    key_name_of(&ks, lim, "}BBBB", b, sizeof(b));
    expect_eq(sl__redis_key_slot(a, strlen(a)) ==
                  sl__redis_key_slot(b, strlen(b)),
              0);
    assert_non_null(strstr(a, ":{\\7dAAAA}"));
    /* The whole escaped key is the tag: its slot is the key's own. */
    expect_eq(sl__redis_key_slot(a, strlen(a)),
              sl__redis_key_slot("\\7dAAAA", 7));
    /* One to one: the escape itself is escaped. */
    key_name_of(&ks, lim, "\\7dAAAA", c, sizeof(c));
    expect_eq(strcmp(a, c) != 0, 1);
    assert_non_null(strstr(c, ":{\\5c7dAAAA}"));
    /* Plain keys keep their names; the rest after the delimiter is not in
     * the tag and is left as it is. */
    key_name_of(&ks, lim, "acme/}x", c, sizeof(c));
    assert_non_null(strstr(c, ":{acme}/}x"));
    key_name_of(&ks, lim, "a{b", c, sizeof(c));
    assert_non_null(strstr(c, ":{a{b}"));
    sl_limit_free(lim);
    sl_store_free(st);
}

/* A batch's command is its calls' commands rearranged: every key first,
 * then 'B', the count, the calls' distinct (now_s, now_n, head) triples
 * once each, and which triple each call has (one byte per call, or ""
 * when all have one). */
static void test_batch_format(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){.url = "redis://h:1"});
    sl__redis_keyspace ks = keyspace_of(st);
    sl_limit *lim = tu_limit(SL_GCRA, 10, SEC, 0);
    sl_check_item two[2] = {{lim, "x", 1}, {lim, "y", 1}}, one = {lim, "z", 1};
    sl_check_item again[2] = {{lim, "v", 1}, {lim, "w", 1}};
    int64_t costs[2] = {1, 2};
    sl__redis_call *calls[3], *many[SL__REDIS_MAX_BATCH + 1];
    const char *const *argv[3];
    const size_t *lens[3];
    int argc[3];
    char *cmd;
    size_t len;
    (void)state;

    expect_eq(
        sl__redis_call_new(&ks, two, costs, 2, SEC, 0, SHA, &calls[0], NULL, 0),
        0);
    expect_eq(sl__redis_call_new(&ks, &one, costs, 1, SEC, SL_RECORD, SHA,
                                 &calls[1], NULL, 0),
              0);
    /* Other keys, the same now and head as calls[0]. */
    expect_eq(sl__redis_call_new(&ks, again, costs, 2, SEC, 0, SHA, &calls[2],
                                 NULL, 0),
              0);
    for (int i = 0; i < 3; i++)
        argc[i] = sl__redis_call_argv(calls[i], &argv[i], &lens[i]);
    expect_eq(sl__redis_batch_format(calls, 3, SHA, &cmd, &len), 0);
    redisReply *b = resp_n(cmd, len);
    free(cmd);
    expect_eq(b->type, REDIS_REPLY_ARRAY);
    /* The head, 5 keys, B, 3, 2 (triples), two triples, the map. */
    expect_eq(b->elements, 3 + 5 + 3 + 2 * 3 + 1);
    const char *head[] = {"EVALSHA", SHA, "5"};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(b->element[i]->str, head[i]);
    /* The keys: x, y, z, then v, w. */
    size_t at = 3;
    for (int c = 0; c < 3; c++)
        for (int k = 3; k < 3 + (c == 1 ? 1 : 2); k++, at++)
            assert_memory_equal(b->element[at]->str, argv[c][k], lens[c][k]);
    assert_string_equal(b->element[at++]->str, "B");
    assert_string_equal(b->element[at++]->str, "3");
    assert_string_equal(b->element[at++]->str, "2");
    /* calls[0]'s triple, then calls[1]'s: each the call's last three. */
    for (int c = 0; c < 2; c++)
        for (int j = argc[c] - 3; j < argc[c]; j++, at++) {
            expect_eq(b->element[at]->len, lens[c][j]);
            assert_memory_equal(b->element[at]->str, argv[c][j], lens[c][j]);
        }
    expect_eq(b->element[at]->len, 3);
    assert_memory_equal(b->element[at]->str, "\0\1\0", 3);
    expect_eq(at + 1, b->elements);
    freeReplyObject(b);

    /* One triple: no map.  sha NULL: EVAL with the script's text. */
    expect_eq(sl__redis_batch_format(calls, 1, NULL, &cmd, &len), 0);
    b = resp_n(cmd, len);
    free(cmd);
    assert_string_equal(b->element[0]->str, "EVAL");
    assert_string_equal(b->element[1]->str, sl__redis_script);
    expect_eq(b->elements, 3 + 2 + 3 + 3 + 1);
    assert_string_equal(b->element[7]->str, "1");
    expect_eq(b->element[b->elements - 1]->len, 0);
    freeReplyObject(b);
    expect_eq(sl__redis_batch_format(calls, 0, SHA, &cmd, &len), SL_EINVAL);
    expect_eq(sl__redis_batch_format(calls, 2, "short", &cmd, &len), SL_EINVAL);
    /* At most SL__REDIS_MAX_BATCH calls: a map byte names each's triple. */
    for (size_t i = 0; i <= SL__REDIS_MAX_BATCH; i++)
        many[i] = calls[i % 3];
    expect_eq(
        sl__redis_batch_format(many, SL__REDIS_MAX_BATCH, SHA, &cmd, &len), 0);
    free(cmd);
    expect_eq(
        sl__redis_batch_format(many, SL__REDIS_MAX_BATCH + 1, SHA, &cmd, &len),
        SL_EINVAL);
    for (int i = 0; i < 3; i++)
        sl__redis_call_free(calls[i]);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_batch_reply_picking(void **state)
{
    redisReply *arr = resp("*2\r\n*5\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n"
                           "-ERANGE one call\r\n");
    redisReply *err = resp("-NOSCRIPT No matching script\r\n");
    (void)state;
    assert_ptr_equal(sl__redis_batch_reply(arr, 2, 0), arr->element[0]);
    assert_ptr_equal(sl__redis_batch_reply(arr, 2, 1), arr->element[1]);
    /* Not an array of n: the whole reply, for every call. */
    assert_ptr_equal(sl__redis_batch_reply(arr, 3, 0), arr);
    assert_ptr_equal(sl__redis_batch_reply(arr, 2, 2), arr);
    assert_ptr_equal(sl__redis_batch_reply(err, 2, 1), err);
    assert_null(sl__redis_batch_reply(NULL, 2, 0));
    freeReplyObject(arr);
    freeReplyObject(err);
}

/* ---- the store's side ---- */

static void test_endpoint_and_keyspace(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){
        .url = "redis://u:pw@example.org:7000/3", .timeout_ms = 250});
    sl_store *cl = lazy_store((sl_redis_options){
        .url = "redis-cluster://a:7000,b:7001", .key_prefix = "p:"});
    sl_store *mem = tu_store();
    sl__redis_endpoint ep;
    sl__redis_keyspace ks;
    (void)state;

    expect_eq(sl__redis_store_endpoint(st, &ep), 0);
    assert_string_equal(ep.host, "example.org");
    expect_eq(ep.port, 7000);
    expect_eq(ep.db, 3);
    assert_string_equal(ep.user, "u");
    assert_string_equal(ep.password, "pw");
    expect_eq(ep.timeout_ms, 250);
    expect_eq(ep.n_seeds, 0);
    expect_eq(sl__redis_store_keyspace(st, &ks), 0);
    assert_string_equal(ks.prefix, "sl:");
    expect_eq(ks.cluster, 0);
    expect_eq(ks.max_key_len, 4096);

    expect_eq(sl__redis_store_endpoint(cl, &ep), 0);
    expect_eq(ep.n_seeds, 2);
    assert_string_equal(ep.seed_hosts[1], "b");
    expect_eq(ep.seed_ports[1], 7001);
    assert_null(ep.password);
    expect_eq(sl__redis_store_keyspace(cl, &ks), 0);
    assert_string_equal(ks.prefix, "p:");
    expect_eq(ks.cluster, 1);

    expect_eq(sl__redis_store_endpoint(mem, &ep), SL_EINVAL);
    expect_eq(sl__redis_store_keyspace(mem, &ks), SL_EINVAL);
    sl_store_free(mem);
    sl_store_free(cl);
    sl_store_free(st);
}

static void test_sentinel_endpoint(void **state)
{
    sl_store *st = lazy_store((sl_redis_options){
        .url = "redis-sentinel://u:pw@s1,[::1]:26380,s3:7/mymaster/2",
        .sentinel_password = "spw"});
    sl__redis_endpoint ep;
    (void)state;
    expect_eq(sl__redis_store_endpoint(st, &ep), 0);
    expect_eq(ep.n_sentinels, 3);
    assert_string_equal(ep.sentinel_hosts[0], "s1");
    expect_eq(ep.sentinel_ports[0], 26379); /* Sentinel's own default */
    assert_string_equal(ep.sentinel_hosts[1], "::1");
    expect_eq(ep.sentinel_ports[1], 26380);
    expect_eq(ep.sentinel_ports[2], 7);
    assert_string_equal(ep.master_name, "mymaster");
    expect_eq(ep.db, 2);
    assert_string_equal(ep.user, "u"); /* the master's */
    assert_string_equal(ep.password, "pw");
    assert_null(ep.sentinel_user);
    assert_string_equal(ep.sentinel_password, "spw");
    assert_null(ep.host); /* until a Sentinel names the master */
    expect_eq(ep.n_seeds, 0);
    sl_store_free(st);

    const char *bad[] = {"redis-sentinel://s1",  "redis-sentinel://s1/",
                         "redis-sentinel:///m",  "redis-sentinel://s1,/m",
                         "redis-sentinel://s1:x/m", "redis-sentinel://s1/m/x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sl_redis_options o = {
            .size = sizeof(o), .url = bad[i], .lazy_connect = 1};
        sl_store *s = NULL;
        char err[256] = "";
        expect_eq(sl_redis_store_new(&o, &s, err, sizeof(err)), SL_EINVAL);
        if (strstr(err, "invalid redis url") == NULL)
            fail_msg("'%s': '%s'", bad[i], err);
        assert_null(s);
    }
    sl_redis_options o = {.size = sizeof(o),
                          .url = "redis://h:1",
                          .lazy_connect = 1,
                          .sentinel_password = "x"};
    sl_store *s = NULL;
    char err[256];
    expect_eq(sl_redis_store_new(&o, &s, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "sentinel credentials without Sentinels"));
}

/* The Sentinel's answer, as the core reads it. */
static void test_sentinel_answer(void **state)
{
    sl__redis_endpoint ep = {.master_name = "m"};
    redisReply host = {.type = REDIS_REPLY_STRING, .str = "10.0.0.7", .len = 8};
    redisReply port = {.type = REDIS_REPLY_STRING, .str = "6380", .len = 4};
    redisReply bad_port = {.type = REDIS_REPLY_STRING, .str = "0", .len = 1};
    redisReply *two[] = {&host, &port}, *bad[] = {&host, &bad_port};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = two};
    redisReply arr_bad = {.type = REDIS_REPLY_ARRAY, .elements = 2,
                          .element = bad};
    redisReply nil = {.type = REDIS_REPLY_NIL};
    redisReply e = {.type = REDIS_REPLY_ERROR, .str = "NOAUTH x", .len = 8};
    const char *argv[3];
    size_t lens[3];
    char h[64], err[128];
    int p = 0;
    (void)state;
    expect_eq(sl__redis_sentinel_args(&ep, argv, lens), 3);
    assert_string_equal(argv[1], "get-master-addr-by-name");
    assert_string_equal(argv[2], "m");
    expect_eq(sl__redis_sentinel_master(&ep, &arr, h, sizeof(h), &p, err,
                                        sizeof(err)),
              0);
    assert_string_equal(h, "10.0.0.7");
    expect_eq(p, 6380);
    expect_eq(sl__redis_sentinel_master(&ep, &nil, h, sizeof(h), &p, err,
                                        sizeof(err)),
              SL_ESTORE);
    assert_non_null(strstr(err, "does not know the master 'm'"));
    expect_eq(sl__redis_sentinel_master(&ep, &e, h, sizeof(h), &p, err,
                                        sizeof(err)),
              SL_ESTORE);
    assert_non_null(strstr(err, "NOAUTH"));
    expect_eq(sl__redis_sentinel_master(&ep, &arr_bad, h, sizeof(h), &p, err,
                                        sizeof(err)),
              SL_ESTORE);
    expect_eq(sl__redis_sentinel_master(&ep, NULL, h, sizeof(h), &p, err,
                                        sizeof(err)),
              SL_ESTORE);
    /* A host longer than the caller's buffer is refused, not cut. */
    expect_eq(sl__redis_sentinel_master(&ep, &arr, h, 8, &p, err, sizeof(err)),
              SL_ESTORE);

    /* ROLE: only "master" passes. */
    redisReply master = {.type = REDIS_REPLY_STRING, .str = "master", .len = 6};
    redisReply slave = {.type = REDIS_REPLY_STRING, .str = "slave", .len = 5};
    redisReply *rm[] = {&master}, *rs[] = {&slave};
    redisReply role_m = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = rm};
    redisReply role_s = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = rs};
    expect_eq(sl__redis_handshake_check(SL__REDIS_CMD_ROLE, &role_m, NULL, err,
                                        sizeof(err)),
              0);
    expect_eq(sl__redis_handshake_check(SL__REDIS_CMD_ROLE, &role_s, NULL, err,
                                        sizeof(err)),
              SL_ESTORE);
    assert_non_null(strstr(err, "not the master (slave)"));
    redisReply ro = {.type = REDIS_REPLY_ERROR,
                     .str = "READONLY You can't write against a read only "
                            "replica.",
                     .len = 52};
    expect_eq(sl__redis_reply_kind(&ro, NULL), SL__REDIS_REPLY_READONLY);
}

/* ---- Redis Cluster ---- */

static void test_key_slot(void **state)
{
    (void)state;
    /* CRC16/XMODEM("123456789") is 0x31C3; Redis's documented examples. */
    assert_int_equal(sl__redis_key_slot("123456789", 9), 0x31C3);
    assert_int_equal(sl__redis_key_slot("foo", 3), 12182);
    assert_int_equal(sl__redis_key_slot("{foo}bar", 8), 12182);
    assert_int_equal(sl__redis_key_slot("{user1000}.following", 20),
                     sl__redis_key_slot("{user1000}.followers", 20));
    /* An empty tag hashes the whole key; only the first '{' opens one. */
    assert_int_not_equal(sl__redis_key_slot("foo{}{bar}", 10),
                         sl__redis_key_slot("bar", 3));
    assert_int_equal(sl__redis_key_slot("foo{{bar}}zap", 13),
                     sl__redis_key_slot("{bar", 4));
    assert_int_equal(sl__redis_key_slot("foo{bar}{zap}", 13),
                     sl__redis_key_slot("bar", 3));
    assert_int_equal(sl__redis_key_slot("", 0), 0);
}

static void test_redirect_parse(void **state)
{
    sl__redis_redirect rd;
    (void)state;
    const char *moved = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(sl__redis_redirect_parse(moved, strlen(moved), &rd), 0);
    assert_int_equal(rd.ask, 0);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, 6381);
    const char *ask = "ASK 16383 ::1:7000";
    assert_int_equal(sl__redis_redirect_parse(ask, strlen(ask), &rd), 0);
    assert_int_equal(rd.ask, 1);
    assert_int_equal(rd.slot, 16383);
    assert_string_equal(rd.host, "::1");
    const char *nohost = "MOVED 1 :7001";
    assert_int_equal(sl__redis_redirect_parse(nohost, strlen(nohost), &rd), 0);
    assert_string_equal(rd.host, "");
    const char *bad[] = {"MOVED",          "MOVED 16384 h:1", "MOVED 1 h:0",
                         "MOVED 1 h",      "MOVED x h:1",     "ASK 1 h:70000",
                         "NOSCRIPT x",     "MOVED  1 h:1",    "MOVED 1 h:1x",
                         "ERR MOVED 1 h:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sl__redis_redirect_parse(bad[i], strlen(bad[i]), &rd),
                         -1);
}

static void test_slot_map(void **state)
{
    sl__redis_slot_map *m;
    int port;
    (void)state;
    redisReply *r =
        resp("*2\r\n"
             "*4\r\n:0\r\n:99\r\n*3\r\n$1\r\na\r\n:1\r\n$2\r\nid\r\n"
             "*2\r\n$1\r\nr\r\n:9\r\n"
             "*3\r\n:100\r\n:16383\r\n*2\r\n$0\r\n\r\n:2\r\n");
    assert_int_equal(sl__redis_slot_map_new(r, "seed", &m), 0);
    freeReplyObject(r);
    assert_int_equal(sl__redis_slot_map_nodes(m), 2);
    assert_string_equal(sl__redis_slot_map_host(m, 0, &port), "a");
    assert_int_equal(port, 1);
    assert_int_equal(sl__redis_slot_map_node(m, 99), 0);
    assert_int_equal(sl__redis_slot_map_node(m, 100), 1);
    assert_string_equal(sl__redis_slot_map_host(m, 1, &port), "seed");
    assert_int_equal(sl__redis_slot_map_node(m, 16384), -1);
    sl__redis_slot_map_free(m);

    const char *bad[] = {
        ":1\r\n",                                          /* not an array */
        "*0\r\n",                                          /* no slot at all */
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n", /* end < start */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:0\r\n", /* port 0 */
        "*1\r\n*2\r\n:0\r\n:1\r\n",                        /* no master */
        "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\na\r\n",       /* no port */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = resp(bad[i]);
        assert_int_equal(sl__redis_slot_map_new(r, NULL, &m), SL_EINVAL);
        freeReplyObject(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_kinds),
        cmocka_unit_test(test_handshake_commands),
        cmocka_unit_test(test_handshake_checks),
        cmocka_unit_test(test_resp_writer),
        cmocka_unit_test(test_call_arguments),
        cmocka_unit_test(test_call_replies),
        cmocka_unit_test(test_call_parts_on_a_cluster),
        cmocka_unit_test(test_bucket_integer_replies),
        cmocka_unit_test(test_batch_format),
        cmocka_unit_test(test_batch_reply_picking),
        cmocka_unit_test(test_endpoint_and_keyspace),
        cmocka_unit_test(test_sentinel_endpoint),
        cmocka_unit_test(test_sentinel_answer),
        cmocka_unit_test(test_key_slot),
        cmocka_unit_test(test_key_tag_escaped),
        cmocka_unit_test(test_redirect_parse),
        cmocka_unit_test(test_slot_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
