/*
 * test_store_tls.c - the library's Redis store over TLS (rediss:// and
 * rediss-cluster://, sl_redis_options' tls fields) against real
 * redis-servers with a TLS port that require client certificates, and a
 * test CA made here with openssl: checks exact over TLS, the server
 * restarted under a store, a one-node Cluster reached by the TLS port its
 * CLUSTER SLOTS gives, and every refusal (another CA, another name, no
 * client certificate, files missing or mismatched, TLS options without
 * TLS, TLS over a unix socket) with its message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include "redisutil.h"

static char dir[64];
static char tls_port[16], cluster_tls_port[16];
static char url[128], cluster_url[128];
static char ca[128], other_ca[128], cert[128], key[128], srv_cert[128],
    srv_key[128];
static tu_redis server, node;
static const char *server_args[16], *node_args[20];

/* err names the problem: it holds want. */
#define expect_str_contains(err, want)                                        \
    do {                                                                       \
        if (strstr((err), (want)) == NULL)                                     \
            fail_msg("'%s' does not say '%s'", (err), (want));                \
    } while (0)

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* A CA, another CA, the server's certificate (for 127.0.0.1 and
 * redis.test) and a client certificate, in dir. */
static int make_certs(void)
{
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    return sh("(cd %s && "
              "openssl req -x509 %s -keyout ca.key -out ca.crt -days 2 "
              "-subj /CN=ca && "
              "openssl req -x509 %s -keyout other.key -out other.crt -days 2 "
              "-subj /CN=other && "
              "openssl req %s -keyout srv.key -out srv.csr -subj /CN=srv && "
              "echo subjectAltName=DNS:redis.test,IP:127.0.0.1 > srv.ext && "
              "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key "
              "-CAcreateserial -out srv.crt -days 2 -extfile srv.ext && "
              "openssl req %s -keyout cli.key -out cli.csr -subj /CN=cli && "
              "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key "
              "-CAcreateserial -out cli.crt -days 2) >/dev/null 2>&1",
              dir, ec, ec, ec, ec);
}

static void tls_args(const char **a, const char *port)
{
    const char *args[] = {"--tls-port",         port,
                          "--tls-cert-file",    srv_cert,
                          "--tls-key-file",     srv_key,
                          "--tls-ca-cert-file", ca,
                          "--tls-auth-clients", "yes",
                          NULL};
    memcpy(a, args, sizeof(args));
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sl_tls_XXXXXX");
    if (mkdtemp(dir) == NULL || make_certs() != 0) {
        fprintf(stderr, "cannot make the test CA with openssl\n");
        return -1;
    }
    path(ca, sizeof(ca), "ca.crt");
    path(other_ca, sizeof(other_ca), "other.crt");
    path(cert, sizeof(cert), "cli.crt");
    path(key, sizeof(key), "cli.key");
    path(srv_cert, sizeof(srv_cert), "srv.crt");
    path(srv_key, sizeof(srv_key), "srv.key");
    snprintf(tls_port, sizeof(tls_port), "%d", tu_free_port());
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%s", tls_port);
    tls_args(server_args, tls_port);
    server.extra = server_args;

    /* A Cluster of one node that owns every slot; its bus and its
     * CLUSTER SLOTS speak TLS (tls-cluster). */
    snprintf(cluster_tls_port, sizeof(cluster_tls_port), "%d",
             tu_free_port());
    snprintf(cluster_url, sizeof(cluster_url), "rediss-cluster://127.0.0.1:%s",
             cluster_tls_port);
    tls_args(node_args, cluster_tls_port);
    node_args[10] = "--tls-cluster";
    node_args[11] = "yes";
    node_args[12] = NULL;
    node.extra = node_args;
    node.cluster_node_timeout_ms = 1000;
    if (tu_redis_start(&server) != 0 || tu_redis_start(&node) != 0) {
        fprintf(stderr, "cannot start redis-server with TLS (scripts/deps.sh "
                        "installs it)\n");
        return -1;
    }
    redisContext *c = tu_redis_admin(&node);
    int ok = c != NULL && tu_redis_do(c, "CLUSTER ADDSLOTSRANGE 0 16383") == 0;
    for (int i = 0; ok && i < 100; i++) { /* until it serves: 10 s */
        redisReply *r = redisCommand(c, "CLUSTER INFO");
        if (r != NULL && r->str != NULL &&
            strstr(r->str, "cluster_state:ok") != NULL) {
            freeReplyObject(r);
            break;
        }
        if (r != NULL)
            freeReplyObject(r);
        tu_sleep_ms(100);
    }
    if (c != NULL)
        redisFree(c);
    return ok ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_redis_cleanup(&server);
    tu_redis_cleanup(&node);
    sh("rm -rf %s", dir);
    return 0;
}

/* sl_redis_store_new with the TLS files given: its status, the store in
 * *out (NULL: freed), the message in err. */
static int store_new(const char *u, const char *cafile, const char *c,
                     const char *k, const char *name, sl_store **out,
                     char *err, size_t errlen)
{
    sl_redis_options o = {.size = sizeof(o),
                          .url = u,
                          .timeout_ms = 1000,
                          .extra_ttl_ms = 600000,
                          .tls_ca_file = cafile,
                          .tls_cert_file = c,
                          .tls_key_file = k,
                          .tls_server_name = name};
    sl_store *st = NULL;
    int rc;
    err[0] = '\0';
    rc = sl_redis_store_new(&o, &st, err, errlen);
    if (out != NULL)
        *out = st;
    else
        sl_store_free(st);
    return rc;
}

static sl_store *tls_store(const char *u)
{
    char err[256];
    sl_store *st = NULL;
    int rc = store_new(u, ca, cert, key, NULL, &st, err, sizeof(err));
    if (rc != 0)
        fail_msg("sl_redis_store_new(%s): %s (%s)", u, sl_err_name(rc), err);
    return st;
}

/* limit checks of one key allowed, the next refused. */
static void expect_exact(sl_store *st, const char *k, int64_t limit)
{
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, limit, MINUTE, limit);
    sl_nanos t = INT64_C(1700000000) * SEC;
    sl_decision d;
    char err[256];
    for (int64_t i = 0; i < limit; i++) {
        int rc = sl_check(st, lim, k, strlen(k), 1, t, &d);
        if (rc != 0) {
            sl_store_last_error(st, err, sizeof(err));
            fail_msg("sl_check(%s): %s (%s)", k, sl_err_name(rc), err);
        }
        expect_eq(d.allowed, 1);
    }
    expect_eq(sl_check(st, lim, k, strlen(k), 1, t, &d), 0);
    expect_eq(d.allowed, 0);
    sl_limit_free(lim);
}

static void test_checks_over_tls_are_exact(void **state)
{
    (void)state;
    sl_store *st = tls_store(url);
    expect_exact(st, "tls-a", 7);
    /* The same counter from another store (another connection). */
    sl_store *st2 = tls_store(url);
    sl_limit *lim = tu_limit(SL_TOKEN_BUCKET, 7, MINUTE, 7);
    sl_decision d;
    expect_eq(sl_check(st2, lim, "tls-a", 5, 1, INT64_C(1700000000) * SEC, &d),
              0);
    expect_eq(d.allowed, 0);
    /* It lives in the server: seen on its plain port. */
    redisContext *c = tu_redis_admin(&server);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "KEYS *tls-a*");
    assert_non_null(r);
    expect_eq(r->type, REDIS_REPLY_ARRAY);
    expect_eq(r->elements, 1);
    freeReplyObject(r);
    redisFree(c);
    sl_limit_free(lim);
    sl_store_free(st2);
    sl_store_free(st);
}

static void test_server_name_is_checked(void **state)
{
    char err[256];
    (void)state;
    expect_eq(store_new(url, ca, cert, key, "redis.test", NULL, err,
                        sizeof(err)),
              0);
    expect_eq(store_new(url, ca, cert, key, "other.test", NULL, err,
                        sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "certificate refused: hostname mismatch");
}

static void test_refusals_name_the_problem(void **state)
{
    char err[256], missing[160];
    (void)state;
    expect_eq(store_new(url, other_ca, cert, key, NULL, NULL, err, sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "certificate refused");
    expect_eq(store_new(url, ca, NULL, NULL, NULL, NULL, err, sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "asks for a client certificate and none is set");
    path(missing, sizeof(missing), "missing.crt");
    expect_eq(store_new(url, missing, NULL, NULL, NULL, NULL, err, sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "cannot load the CA file");
    expect_str_contains(err, "No such file or directory");
    expect_eq(store_new(url, ca, cert, NULL, NULL, NULL, err, sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "needs both the certificate and its key");
    expect_eq(store_new(url, ca, cert, srv_key, NULL, NULL, err, sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "cannot load the key");
    expect_eq(store_new(server.url, ca, NULL, NULL, NULL, NULL, err,
                        sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "without TLS");

    sl_redis_options o = {.size = sizeof(o),
                          .unix_path = server.sock,
                          .tls = 1,
                          .tls_ca_file = ca};
    sl_store *st = NULL;
    expect_eq(sl_redis_store_new(&o, &st, err, sizeof(err)), SL_EINVAL);
    expect_str_contains(err, "not over a unix socket");
    assert_null(st);
}

/* A lazy store whose server's certificate is refused: each check says
 * so, and nothing is decided. */
static void test_lazy_store_refused_at_check(void **state)
{
    sl_redis_options o = {.size = sizeof(o),
                          .url = url,
                          .lazy_connect = 1,
                          .tls_ca_file = other_ca,
                          .tls_cert_file = cert,
                          .tls_key_file = key};
    sl_store *st = NULL;
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, MINUTE, 0);
    sl_decision d;
    char err[256];
    (void)state;
    expect_eq(sl_redis_store_new(&o, &st, err, sizeof(err)), 0);
    expect_eq(sl_check(st, lim, "lazy", 1, 1, INT64_C(1700000000) * SEC, &d),
              SL_EINVAL);
    sl_store_last_error(st, err, sizeof(err));
    expect_str_contains(err, "certificate refused");
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_restarted_server_is_reconnected(void **state)
{
    sl_store *st = tls_store(url);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 100, MINUTE, 0);
    sl_nanos t = INT64_C(1700000000) * SEC;
    sl_decision d;
    int rc = -1;
    (void)state;
    expect_eq(sl_check(st, lim, "restart", 1, 1, t, &d), 0);
    tu_redis_stop(&server, SIGKILL);
    expect_eq(sl_check(st, lim, "restart", 1, 1, t, &d), SL_ESTORE);
    assert_int_equal(tu_redis_start(&server), 0);
    for (int i = 0; i < 3 && (rc = sl_check(st, lim, "restart", 1, 1, t,
                                            &d)) != 0;
         i++)
        ;
    expect_eq(rc, 0);
    expect_eq(d.allowed, 1);
    sl_limit_free(lim);
    sl_store_free(st);
}

static void test_cluster_over_tls(void **state)
{
    char err[256];
    (void)state;
    sl_store *st = tls_store(cluster_url);
    for (int i = 0; i < 8; i++) {
        char k[32];
        snprintf(k, sizeof(k), "cl-%d", i);
        expect_exact(st, k, 3);
    }
    redisContext *c = tu_redis_admin(&node);
    assert_non_null(c);
    expect_eq(tu_redis_int(c, "DBSIZE"), 8);
    redisFree(c);
    sl_store_free(st);
    expect_eq(store_new(cluster_url, other_ca, cert, key, NULL, NULL, err,
                        sizeof(err)),
              SL_EINVAL);
    expect_str_contains(err, "certificate refused");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks_over_tls_are_exact),
        cmocka_unit_test(test_server_name_is_checked),
        cmocka_unit_test(test_refusals_name_the_problem),
        cmocka_unit_test(test_lazy_store_refused_at_check),
        cmocka_unit_test(test_restarted_server_is_reconnected),
        cmocka_unit_test(test_cluster_over_tls),
    };
    signal(SIGPIPE, SIG_DFL); /* the store must survive it on its own */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
