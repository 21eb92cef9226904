/*
 * test_settings.c - the settings table (src/settings/): its validators
 * with bad input (signs, units, bounds, host:port), the flags and config
 * files of `sluice serve` and `sluice proxy` read through it with the
 * messages users see, the defaults, and the table's own consistency.
 */
#include <arpa/inet.h>
#include <unistd.h>

#include "testutil.h"
#include "settings/settings.h"
#include "core/value.h"

/* One command's settings, read from args (NULL-terminated, after the
 * command's name); err holds the message. */
typedef struct reading {
    sv_config srv;
    px_config *px;
    st_settings s;
    char err[700];
    int rc;
} reading;

static reading *read_args(unsigned command, const char *const *args)
{
    reading *r = calloc(1, sizeof(*r));
    char *argv[32] = {(char *)"cmd"};
    int argc = 1;
    assert_non_null(r);
    while (args[argc - 1] != NULL && argc < 31) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    if (command == ST_SET_PROXY)
        assert_non_null(r->px = px_config_new());
    r->rc = st_settings_init(&r->s, command, &r->srv, r->px, r->err,
                             sizeof(r->err));
    assert_int_equal(r->rc, 0);
    r->rc = st_settings_args(&r->s, argc, argv, r->err, sizeof(r->err));
    return r;
}

static void reading_free(reading *r)
{
    st_settings_release(&r->s);
    px_config_free(r->px);
    free(r);
}

/* A config file holding text, at a path of the temporary directory. */
static char *config_file(const char *text)
{
    char *path = strdup("/tmp/sl_settings_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void uint_refuses_signs_spaces_units_and_overflow(void **state)
{
    static const char *const bad[] = {"",
                                      "-1",
                                      "+5",
                                      " 5",
                                      "5 ",
                                      "5x",
                                      "0x10",
                                      "1e3",
                                      "1099511627777",
                                      "99999999999999999999"};
    uint64_t v = 7;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sl__value_uint(bad[i], strlen(bad[i]), 0, SL_MAX_COUNT, &v) !=
            SL_EINVAL)
            fail_msg("'%s' was read as a whole number", bad[i]);
    expect_eq(sl__value_uint("5\0", 2, 0, 10, &v), SL_EINVAL);
    expect_eq(sl__value_uint("1099511627776", 13, 0, SL_MAX_COUNT, &v), 0);
    expect_eq(v, SL_MAX_COUNT);
    expect_eq(sl__value_uint("1025", 4, 0, 1024, &v), SL_ERANGE);
    expect_eq(v, 1025);
    expect_eq(sl__value_uint("0", 1, 1, 1024, &v), SL_ERANGE);
    expect_eq(sl__value_uint("007", 3, 1, 1024, &v), 0);
    expect_eq(v, 7);
}

static void duration_refuses_bad_units_and_bounds(void **state)
{
    static const char *const bad[] = {"",    "soon", "5x",   "1.5s",
                                      "5MS", "ms",   "-5ms", "5 ms"};
    sl_nanos ns;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sl__value_duration(bad[i], strlen(bad[i]), 1, &ns) != SL_EINVAL)
            fail_msg("'%s' was read as a duration", bad[i]);
    expect_eq(sl__value_duration("999us", 5, MS, &ns), SL_ERANGE);
    expect_eq(sl__value_duration("9223372036854775807ms", 21, MS, &ns),
              SL_ERANGE);
    expect_eq(sl__value_duration("5ms", 3, MS, &ns), 0);
    expect_eq(ns, 5 * MS);
    expect_eq(sl__value_duration("1m", 2, MS, &ns), 0);
    expect_eq(ns, MINUTE);
}

static void hostport_refuses_what_is_no_address(void **state)
{
    static const char *const bad[] = {
        "",     "nowhere", ":80",  "h:",    "h:99999", "h:-1",
        "h: 5", "h:+5",    "[]:1", "[::1]", "h:80x"};
    char host[16];
    int port;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sl__value_hostport(bad[i], strlen(bad[i]), -1, host, sizeof(host),
                               &port) != SL_EINVAL)
            fail_msg("'%s' was read as HOST:PORT", bad[i]);
    expect_eq(sl__value_hostport("a-host-too-long-for-16:1", 24, -1, host,
                                 sizeof(host), &port),
              SL_EINVAL);
    expect_eq(sl__value_hostport("[::1]:80", 8, -1, host, sizeof(host), &port),
              0);
    assert_string_equal(host, "::1");
    expect_eq(port, 80);
    /* The last ':' ends the host, as --listen always read it. */
    expect_eq(sl__value_hostport("::1:0", 5, -1, host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    expect_eq(port, 0);
    /* Without a port, the default (an upstream's 80). */
    expect_eq(sl__value_hostport("[::1]", 5, 80, host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    expect_eq(port, 80);
    expect_eq(sl__value_hostport("h", 1, 80, host, sizeof(host), &port), 0);
    assert_string_equal(host, "h");
}

static void enum_and_bool(void **state)
{
    static const char *const words[] = {"second", "minute", NULL};
    char list[64];
    int b = 7;
    (void)state;
    expect_eq(sl__value_enum("minute", 6, words, 0), 1);
    expect_eq(sl__value_enum("Minute", 6, words, 0), -1);
    expect_eq(sl__value_enum("MINUTE", 6, words, 1), 1);
    expect_eq(sl__value_enum("minutes", 7, words, 1), -1);
    expect_eq(sl__value_enum("min", 3, words, 1), -1);
    sl__value_enum_list(sl__failure_names, list, sizeof(list));
    assert_string_equal(list, "local, fail_open or fail_closed");
    sl__value_enum_list(words, list, sizeof(list));
    assert_string_equal(list, "second or minute");
    expect_eq(sl__value_bool("yes", 3, 1, &b), 0);
    expect_eq(b, 1);
    expect_eq(sl__value_bool("false", 5, 1, &b), 0);
    expect_eq(b, 0);
    expect_eq(sl__value_bool("true", 4, 0, &b), SL_EINVAL); /* quoted */
    expect_eq(sl__value_bool("maybe", 5, 1, &b), SL_EINVAL);
}

/* Flags refused, and what is said: the messages users have seen. */
/* clang-format off */
static const struct {
    unsigned command;
    const char *args[4];
    int rc;
    const char *err;
} bad_flags[] = {
    /* Out of bounds. */
    {ST_SET_SERVE, {"--threads", "2000"}, ST_SET_EUSAGE,
     "--threads: at most 1024: '2000'"},
    {ST_SET_SERVE, {"--threads=-1"}, ST_SET_EUSAGE,
     "--threads: bad value: '-1'"},
    {ST_SET_SERVE, {"--nodes", "0"}, ST_SET_EUSAGE, "--nodes: bad value: '0'"},
    {ST_SET_PROXY, {"--max-header-bytes", "63"}, ST_SET_EUSAGE,
     "--max-header-bytes: bad value: '63'"},
    {ST_SET_SERVE, {"--max-descriptors", "65"}, ST_SET_EUSAGE,
     "--max-descriptors: at most 64: '65'"},
    {ST_SET_SERVE, {"--store-bytes", "1099511627777"}, ST_SET_EUSAGE,
     "--store-bytes: bad value: '1099511627777'"},
    /* Bad units, addresses and words. */
    {ST_SET_SERVE, {"--idle-timeout", "5x"}, ST_SET_EUSAGE,
     "--idle-timeout: bad duration: '5x'"},
    {ST_SET_SERVE, {"--read-timeout", "999us"}, ST_SET_EUSAGE,
     "--read-timeout: bad duration: '999us'"},
    {ST_SET_SERVE, {"--listen", "nowhere"}, ST_SET_EUSAGE,
     "--listen: expected HOST:PORT: 'nowhere'"},
    {ST_SET_PROXY, {"--listen", "127.0.0.1:65536"}, ST_SET_EUSAGE,
     "--listen: expected HOST:PORT: '127.0.0.1:65536'"},
    {ST_SET_PROXY, {"--redis-failure", "sometimes"}, ST_SET_EUSAGE,
     "--redis-failure: expected local, fail_open or fail_closed: "
     "'sometimes'"},
    {ST_SET_SERVE, {"--redis-hash-tag", "slot"}, ST_SET_EUSAGE,
     "--redis-hash-tag: expected key or domain: 'slot'"},
    {ST_SET_SERVE, {"--store", "redis"}, ST_SET_EUSAGE,
     "--store: unknown store: 'redis' (memory, redis[s]://..., unix:..., "
     "redis[s]-cluster://... or redis[s]-sentinel://...)"},
    {ST_SET_SERVE, {"--redis-tls-server-name", "a/b"}, ST_SET_EUSAGE,
     "--redis-tls-server-name: expected a host name or an address: 'a/b'"},
    {ST_SET_PROXY, {"--upstream", "ftp://h"}, ST_SET_EUSAGE,
     "--upstream: expected http://HOST:PORT or https://HOST:PORT: 'ftp://h'"},
    {ST_SET_PROXY, {"--upstream-server-name", "api example"}, ST_SET_EUSAGE,
     "--upstream-server-name: expected a host name or an address: "
     "'api example'"},
    {ST_SET_PROXY, {"--upstream-insecure", "yes please"}, ST_SET_EUSAGE,
     "--upstream-insecure: expected true or false: 'yes please'"},
    /* Unknown flags (--upstream is the proxy's alone), a missing value, an
     * argument left over; and --help, which is no error. */
    {ST_SET_SERVE, {"--colour", "red"}, ST_SET_EUSAGE,
     "unknown flag: '--colour'"},
    {ST_SET_PROXY, {"--colour=red"}, ST_SET_EUSAGE,
     "unknown flag: '--colour'"},
    {ST_SET_SERVE, {"-x"}, ST_SET_EUSAGE, "unknown flag: '-x'"},
    {ST_SET_SERVE, {"--upstream", "http://h:1"}, ST_SET_EUSAGE,
     "unknown flag: '--upstream'"},
    {ST_SET_SERVE, {"--threads"}, ST_SET_EUSAGE, "missing value: '--threads'"},
    {ST_SET_SERVE, {"--help=yes"}, ST_SET_EUSAGE, "--help: takes no value"},
    {ST_SET_SERVE, {"--rules", "r.yaml", "stray"}, ST_SET_EUSAGE, ""},
    {ST_SET_PROXY, {"--help"}, ST_SET_HELP_ASKED, ""},
    /* Half a certificate pair, shared or a listener's own. */
    {ST_SET_SERVE, {"--tls-key", "k.pem"}, ST_SET_EFILE,
     "--tls-key needs --tls-cert"},
    {ST_SET_SERVE, {"--grpc-tls-cert", "c.pem"}, ST_SET_EFILE,
     "--grpc-tls-cert needs --grpc-tls-key"},
    {ST_SET_PROXY, {"--admin-tls-client-ca", "ca.pem"}, ST_SET_EFILE,
     "--admin-tls-client-ca needs --admin-tls-cert"},
};
/* clang-format on */

static void flags_refused_with_their_message(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
        reading *r = read_args(bad_flags[i].command, bad_flags[i].args);
        if (r->rc != bad_flags[i].rc || strcmp(r->err, bad_flags[i].err) != 0)
            fail_msg("%s: expected %d '%s', got %d '%s'", bad_flags[i].args[0],
                     bad_flags[i].rc, bad_flags[i].err, r->rc, r->err);
        reading_free(r);
    }
}

static void flags_set_their_fields(void **state)
{
    (void)state;
    reading *r = read_args(
        ST_SET_SERVE,
        (const char *[]){"--listen", "[::1]:0", "--nodes", "auto", "--thr", "3",
                         "--redis-failure", "fail_closed", "--store",
                         "redis://h:1/2", "--state-file", "/var/s",
                         "--state-save-interval", "5m", "--state-required",
                         "true", NULL});
    expect_eq(r->rc, 0);
    assert_string_equal(r->srv.listen.host, "::1");
    expect_eq(r->srv.listen.port, 0);
    expect_eq(r->srv.nodes, SD_NODES_AUTO);
    expect_eq(r->srv.threads, 3); /* getopt_long: a unique prefix */
    expect_eq(r->srv.redis_failure, SD_FAIL_CLOSED);
    assert_string_equal(r->srv.redis_url, "redis://h:1/2");
    assert_string_equal(r->srv.state_file, "/var/s");
    expect_eq(r->srv.state_save_interval_ms, 300000);
    expect_eq(r->srv.state_required, 1);
    reading_free(r);
}

static void defaults(void **state)
{
    (void)state;
    reading *r = read_args(ST_SET_PROXY, (const char *[]){NULL});
    expect_eq(r->rc, 0);
    assert_null(r->srv.rules_path);
    assert_string_equal(r->srv.listen.host, "127.0.0.1");
    expect_eq(r->srv.listen.port, 8080);
    expect_eq(r->srv.threads, 0);
    assert_null(r->srv.redis_url);
    expect_eq(r->srv.max_body_bytes, 65536);
    expect_eq(r->srv.max_header_bytes, 8192);
    expect_eq(r->srv.max_descriptors, SL_MAX_ITEMS);
    expect_eq(r->srv.max_entries, 16);
    expect_eq(r->srv.idle_timeout_ms, 60000);
    expect_eq(r->srv.read_timeout_ms, 10000);
    expect_eq(r->srv.max_connections, 10000);
    expect_eq(r->srv.max_adhoc_limits, 10000);
    expect_eq(r->srv.redis_timeout_ms, 0); /* auto */
    expect_eq(r->srv.redis_failure, SD_FAIL_LOCAL);
    expect_eq(r->srv.redis_breaker, 3);
    expect_eq(r->srv.redis_tag_domain, 0);
    expect_eq(r->srv.nodes, SD_NODES_AUTO);
    assert_null(r->srv.state_file);
    expect_eq(r->srv.state_save_interval_ms, 30000);
    expect_eq(r->srv.state_required, 0);
    assert_null(r->px->upstream);
    expect_eq(r->px->connect_timeout_ms, 1000);
    expect_eq(r->px->response_timeout_ms, 30000);
    expect_eq(r->px->queue_max, 1000);
    expect_eq(r->px->queue_max_wait_ms, 5000);
    expect_eq(r->px->pool_max, 64);
    expect_eq(r->px->rate_limit_headers, 1);
    /* Metrics are off the proxy's own listener unless asked for. */
    assert_null(r->px->metrics_path);
    assert_null(r->srv.metrics_listen.host);
    reading_free(r);
}

/* Config files refused, and what is said after "FILE:". */
static const struct {
    unsigned command;
    const char *text;
    const char *err;
} bad_files[] = {
    /* Unknown keys: a flag's spelling, the proxy's keys in serve's file,
     * the table's dotted names, keys of a nested mapping. */
    {ST_SET_SERVE, "threads: 1\ncolour: red\n", "2:1: unknown key: 'colour'"},
    {ST_SET_SERVE, "max-body-bytes: 10\n",
     "1:1: unknown key: 'max-body-bytes'"},
    {ST_SET_SERVE, "upstream_pool: 3\n", "1:1: unknown key: 'upstream_pool'"},
    {ST_SET_SERVE, "config: other.yaml\n", "1:1: unknown key: 'config'"},
    {ST_SET_PROXY, "timeouts.connect: 1s\n",
     "1:1: unknown key: 'timeouts.connect'"},
    {ST_SET_PROXY, "timeouts: {colour: 1s}\n",
     "1:12: timeouts: unknown key: 'colour'"},
    {ST_SET_PROXY, "queue: {connect: 1s}\n",
     "1:9: queue: unknown key: 'connect'"},
    /* Bad values, in serve's wording for its settings... */
    {ST_SET_SERVE, "threads: many\n", "1:10: threads: bad value: 'many'"},
    {ST_SET_PROXY, "idle_timeout: soon\n",
     "1:15: idle_timeout: bad duration: 'soon'"},
    {ST_SET_SERVE, "listen: nowhere\n",
     "1:9: listen: expected HOST:PORT: 'nowhere'"},
    {ST_SET_SERVE, "threads: [1, 2]\n",
     "1:10: threads: expected a single value"},
    /* ... and in the proxy file's for the proxy's own. */
    {ST_SET_PROXY, "queue: {max_requests: 1000001}\n",
     "1:23: max_requests: expected an integer in 0..1000000: '1000001'"},
    {ST_SET_PROXY, "timeouts: {connect: 999us}\n",
     "1:21: connect: bad duration (at least 1ms): '999us'"},
    {ST_SET_PROXY, "timeouts: 1s\n", "1:11: timeouts: expected a mapping"},
    {ST_SET_PROXY, "upstream_pool: [1]\n",
     "1:16: upstream_pool: expected a scalar"},
    {ST_SET_PROXY, "rate_limit_headers: \"true\"\n",
     "1:21: rate_limit_headers: expected true or false: 'true'"},
    {ST_SET_PROXY, "metrics_path: metrics\n",
     "1:15: metrics_path: must start with '/' (or be empty): 'metrics'"},
    {ST_SET_PROXY, "upstream: http://h/p\n",
     "1:11: upstream: a path is not supported, only http://HOST:PORT: "
     "'http://h/p'"},
    {ST_SET_PROXY, "upstream: https://h/p\n",
     "1:11: upstream: a path is not supported, only https://HOST:PORT: "
     "'https://h/p'"},
    {ST_SET_SERVE, "upstream_ca: ca.pem\n", "1:1: unknown key: 'upstream_ca'"},
    {ST_SET_SERVE, "- rules\n", "1:1: expected a mapping of settings"},
    {ST_SET_PROXY, "routes:\n  - {prefix: /a/, domain: d, match: exact}\n",
     "2:37: match: expected normalized, case_sensitive or rfc3986: 'exact'"},
    {ST_SET_PROXY, "routes:\n  - {prefix: /a;b/, domain: d}\n",
     "2:5: prefix: ';', '\\' or '%' never match a normalized path (match: "
     "rfc3986 compares them): '/a;b/'"},
    {ST_SET_PROXY, "metrics_listen: nowhere\n",
     "1:17: metrics_listen: expected HOST:PORT: 'nowhere'"},
};

static void files_refused_with_their_message(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++) {
        char *path = config_file(bad_files[i].text), want[512];
        const char *args[] = {"--config", path, NULL};
        reading *r = read_args(bad_files[i].command, args);
        snprintf(want, sizeof(want), "%s:%s", path, bad_files[i].err);
        if (r->rc != ST_SET_EFILE || strcmp(r->err, want) != 0)
            fail_msg("expected '%s', got %d '%s'", want, r->rc, r->err);
        reading_free(r);
        unlink(path);
        free(path);
    }
}

static void file_then_flags(void **state)
{
    (void)state;
    char *path = config_file("rules: limits.yaml\nthreads: 2\nlisten: "
                             "127.0.0.1:9\nqueue: {max_wait: 2s}\n"
                             "rate_limit_headers: off\n");
    reading *r =
        read_args(ST_SET_PROXY,
                  (const char *[]){"--threads", "3", "--config", path, NULL});
    expect_eq(r->rc, 0);
    assert_string_equal(r->s.config, path);
    expect_eq(r->srv.threads, 3); /* the flag, wherever it stands */
    expect_eq(r->srv.listen.port, 9);
    expect_eq(r->px->queue_max_wait_ms, 2000);
    expect_eq(r->px->rate_limit_headers, 0);
    /* A relative rules path is the file's directory's. */
    assert_string_equal(r->srv.rules_path, "/tmp/limits.yaml");
    reading_free(r);
    unlink(path);
    free(path);
}

/* grpc_rate_limit_headers grew from a boolean into false, true and
 * ratelimit: a file's yes and on still mean true; a flag's words are
 * the enum's. */
static void enum_from_boolean(void **state)
{
    (void)state;
    const char *words[][2] = {{"yes", "1"}, {"on", "1"}, {"off", "0"},
                              {"true", "1"}, {"ratelimit", "2"}};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        char text[96];
        snprintf(text, sizeof(text), "grpc_rate_limit_headers: %s\n",
                 words[i][0]);
        char *path = config_file(text);
        reading *r = read_args(ST_SET_SERVE,
                               (const char *[]){"--config", path, NULL});
        expect_eq(r->rc, 0);
        expect_eq(r->srv.grpc_rate_limit_headers, atoi(words[i][1]));
        reading_free(r);
        unlink(path);
        free(path);
    }
    char *path = config_file("grpc_rate_limit_headers: maybe\n");
    reading *r =
        read_args(ST_SET_SERVE, (const char *[]){"--config", path, NULL});
    assert_true(r->rc != 0);
    reading_free(r);
    unlink(path);
    free(path);
}

/* An https:// upstream's settings: its port 443 by default, the paths
 * from the file taken from its directory, and kept by the config, which
 * outlives the settings (a reload's does). */
static void upstream_tls_settings(void **state)
{
    (void)state;
    char *path = config_file("upstream: https://127.0.0.1\n"
                             "upstream_ca: ca.pem\n"
                             "upstream_cert: /etc/sluice/client.pem\n");
    reading *r = read_args(
        ST_SET_PROXY,
        (const char *[]){"--config", path, "--upstream-key", "client.key",
                         "--upstream-server-name", "api.example", NULL});
    expect_eq(r->rc, 0);
    st_settings_release(&r->s); /* what the config keeps is its own */
    expect_eq(r->px->upstream_https, 1);
    assert_string_equal(r->px->upstream_name, "127.0.0.1");
    expect_eq(ntohs(((struct sockaddr_in *)&r->px->upstream_addr)->sin_port),
              443);
    assert_string_equal(r->px->upstream_ca, "/tmp/ca.pem");
    assert_string_equal(r->px->upstream_cert, "/etc/sluice/client.pem");
    assert_string_equal(r->px->upstream_key, "client.key");
    assert_string_equal(r->px->upstream_server_name, "api.example");
    expect_eq(r->px->upstream_insecure, 0);
    reading_free(r);
    unlink(path);
    free(path);
}

/* The table's promises: one row per flag and per key in a command, a
 * flag's key its name with '_' for '-', and a help that names the
 * default. */
static void table_is_consistent(void **state)
{
    (void)state;
    for (size_t i = 0; i < st_settings_count; i++) {
        const st_setting *a = &st_settings_table[i];
        for (size_t j = i + 1; j < st_settings_count; j++) {
            const st_setting *b = &st_settings_table[j];
            if (!(a->commands & b->commands))
                continue;
            if (a->flag && b->flag && strcmp(a->flag, b->flag) == 0)
                fail_msg("two rows of --%s", a->flag);
            if (a->key && b->key && strcmp(a->key, b->key) == 0)
                fail_msg("two rows of key %s", a->key);
        }
        if (a->flag && a->key) {
            char key[64];
            size_t k = 0;
            for (; a->flag[k] && k + 1 < sizeof(key); k++)
                key[k] = a->flag[k] == '-' ? '_' : a->flag[k];
            key[k] = '\0';
            if (strcmp(key, a->key) != 0)
                fail_msg("--%s has the key %s", a->flag, a->key);
        }
        if (a->flag && a->def && a->help && strstr(a->help, a->def) == NULL)
            fail_msg("--%s: the help does not name the default %s", a->flag,
                     a->def);
        /* What a path needs is a path of every command that reads it. */
        unsigned needed = 0;
        for (size_t j = 0; a->needs != NULL && j < st_settings_count; j++) {
            const st_setting *b = &st_settings_table[j];
            if (b->flag && strcmp(b->flag, a->needs) == 0 &&
                b->kind == ST_SET_PATH)
                needed |= b->commands;
        }
        if (a->needs != NULL &&
            (a->kind != ST_SET_PATH || (a->commands & ~needed) != 0))
            fail_msg("--%s needs --%s, not a path of its commands", a->flag,
                     a->needs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uint_refuses_signs_spaces_units_and_overflow),
        cmocka_unit_test(duration_refuses_bad_units_and_bounds),
        cmocka_unit_test(hostport_refuses_what_is_no_address),
        cmocka_unit_test(enum_and_bool),
        cmocka_unit_test(flags_refused_with_their_message),
        cmocka_unit_test(flags_set_their_fields),
        cmocka_unit_test(defaults),
        cmocka_unit_test(files_refused_with_their_message),
        cmocka_unit_test(file_then_flags),
        cmocka_unit_test(upstream_tls_settings),
        cmocka_unit_test(enum_from_boolean),
        cmocka_unit_test(table_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
