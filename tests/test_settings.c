/*
 * test_settings.c - the settings table (src/settings/): its validators
 * with bad input (signs, units, bounds, host:port), the flags and config
 * files of `sluice serve` and `sluice proxy` read through it with the
 * messages users see, the defaults, and the table's own consistency.
 */
#include <unistd.h>

#include "testutil.h"
#include "settings/settings.h"
#include "settings/value.h"

/* One command's settings, read from args (NULL-terminated, after the
 * command's name); err holds the message. */
typedef struct reading {
    sl_srv_config srv;
    sl_px_config *px;
    sl_settings s;
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
    if (command == SL_SET_PROXY)
        assert_non_null(r->px = sl_px_config_new());
    r->rc = sl_settings_init(&r->s, command, &r->srv, r->px, r->err,
                             sizeof(r->err));
    assert_int_equal(r->rc, 0);
    r->rc = sl_settings_args(&r->s, argc, argv, r->err, sizeof(r->err));
    return r;
}

static void reading_free(reading *r)
{
    sl_settings_release(&r->s);
    sl_px_config_free(r->px);
    free(r);
}

/* args must be refused with rc and exactly the message want. */
static void expect_refused(unsigned command, const char *const *args, int rc,
                           const char *want)
{
    reading *r = read_args(command, args);
    expect_eq(r->rc, rc);
    assert_string_equal(r->err, want);
    reading_free(r);
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

/* text as a config file of command must be refused with the message
 * "FILE:" followed by want. */
static void expect_file_refused(unsigned command, const char *text,
                                const char *want)
{
    char *path = config_file(text), full[512];
    const char *args[] = {"--config", path, NULL};
    snprintf(full, sizeof(full), "%s:%s", path, want);
    expect_refused(command, args, SL_SET_EFILE, full);
    unlink(path);
    free(path);
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

static void flags_out_of_bounds(void **state)
{
    (void)state;
    expect_refused(SL_SET_SERVE, (const char *[]){"--threads", "2000", NULL},
                   SL_SET_EUSAGE, "--threads: at most 1024: '2000'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--threads=-1", NULL},
                   SL_SET_EUSAGE, "--threads: bad value: '-1'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--nodes", "0", NULL},
                   SL_SET_EUSAGE, "--nodes: bad value: '0'");
    expect_refused(SL_SET_PROXY,
                   (const char *[]){"--max-header-bytes", "63", NULL},
                   SL_SET_EUSAGE, "--max-header-bytes: bad value: '63'");
    expect_refused(SL_SET_SERVE,
                   (const char *[]){"--max-descriptors", "65", NULL},
                   SL_SET_EUSAGE, "--max-descriptors: at most 64: '65'");
    expect_refused(SL_SET_SERVE,
                   (const char *[]){"--store-bytes", "1099511627777", NULL},
                   SL_SET_EUSAGE, "--store-bytes: bad value: '1099511627777'");
}

static void flags_bad_values(void **state)
{
    (void)state;
    expect_refused(SL_SET_SERVE, (const char *[]){"--idle-timeout", "5x", NULL},
                   SL_SET_EUSAGE, "--idle-timeout: bad duration: '5x'");
    expect_refused(SL_SET_SERVE,
                   (const char *[]){"--read-timeout", "999us", NULL},
                   SL_SET_EUSAGE, "--read-timeout: bad duration: '999us'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--listen", "nowhere", NULL},
                   SL_SET_EUSAGE, "--listen: expected HOST:PORT: 'nowhere'");
    expect_refused(
        SL_SET_PROXY, (const char *[]){"--listen", "127.0.0.1:65536", NULL},
        SL_SET_EUSAGE, "--listen: expected HOST:PORT: '127.0.0.1:65536'");
    expect_refused(SL_SET_PROXY,
                   (const char *[]){"--redis-failure", "sometimes", NULL},
                   SL_SET_EUSAGE,
                   "--redis-failure: expected local, fail_open or "
                   "fail_closed: 'sometimes'");
    expect_refused(
        SL_SET_SERVE, (const char *[]){"--redis-hash-tag", "slot", NULL},
        SL_SET_EUSAGE, "--redis-hash-tag: expected key or domain: 'slot'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--store", "redis", NULL},
                   SL_SET_EUSAGE,
                   "--store: unknown store: 'redis' (memory, redis://..., "
                   "unix:... or redis-cluster://...)");
    expect_refused(
        SL_SET_PROXY, (const char *[]){"--upstream", "ftp://h", NULL},
        SL_SET_EUSAGE, "--upstream: expected http://HOST:PORT: 'ftp://h'");
}

static void flags_unknown_missing_and_left_over(void **state)
{
    (void)state;
    expect_refused(SL_SET_SERVE, (const char *[]){"--colour", "red", NULL},
                   SL_SET_EUSAGE, "unknown flag: '--colour'");
    expect_refused(SL_SET_PROXY, (const char *[]){"--colour=red", NULL},
                   SL_SET_EUSAGE, "unknown flag: '--colour'");
    expect_refused(SL_SET_SERVE, (const char *[]){"-x", NULL}, SL_SET_EUSAGE,
                   "unknown flag: '-x'");
    /* --upstream is the proxy's alone. */
    expect_refused(SL_SET_SERVE,
                   (const char *[]){"--upstream", "http://h:1", NULL},
                   SL_SET_EUSAGE, "unknown flag: '--upstream'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--threads", NULL},
                   SL_SET_EUSAGE, "missing value: '--threads'");
    expect_refused(SL_SET_SERVE, (const char *[]){"--help=yes", NULL},
                   SL_SET_EUSAGE, "--help: takes no value");
    expect_refused(SL_SET_SERVE,
                   (const char *[]){"--rules", "r.yaml", "stray", NULL},
                   SL_SET_EUSAGE, "");
    expect_refused(SL_SET_PROXY, (const char *[]){"--help", NULL},
                   SL_SET_HELP_ASKED, "");
}

static void flags_set_their_fields(void **state)
{
    (void)state;
    reading *r = read_args(SL_SET_SERVE,
                           (const char *[]){"--listen", "[::1]:0", "--nodes",
                                            "auto", "--thr", "3",
                                            "--redis-failure", "fail_closed",
                                            "--store", "redis://h:1/2", NULL});
    expect_eq(r->rc, 0);
    assert_string_equal(r->srv.listen_host, "::1");
    expect_eq(r->srv.listen_port, 0);
    expect_eq(r->srv.nodes, SL_SRV_NODES_AUTO);
    expect_eq(r->srv.threads, 3); /* getopt_long: a unique prefix */
    expect_eq(r->srv.redis_failure, SL_SRV_FAIL_CLOSED);
    assert_string_equal(r->srv.redis_url, "redis://h:1/2");
    reading_free(r);
}

static void defaults(void **state)
{
    (void)state;
    reading *r = read_args(SL_SET_PROXY, (const char *[]){NULL});
    expect_eq(r->rc, 0);
    assert_null(r->srv.rules_path);
    assert_string_equal(r->srv.listen_host, "127.0.0.1");
    expect_eq(r->srv.listen_port, 8080);
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
    expect_eq(r->srv.redis_timeout_ms, 5);
    expect_eq(r->srv.redis_failure, SL_SRV_FAIL_LOCAL);
    expect_eq(r->srv.redis_breaker, 3);
    expect_eq(r->srv.redis_tag_domain, 0);
    expect_eq(r->srv.nodes, 1);
    assert_null(r->px->upstream);
    expect_eq(r->px->connect_timeout_ms, 1000);
    expect_eq(r->px->response_timeout_ms, 30000);
    expect_eq(r->px->queue_max, 1000);
    expect_eq(r->px->queue_max_wait_ms, 5000);
    expect_eq(r->px->pool_max, 64);
    expect_eq(r->px->rate_limit_headers, 1);
    assert_string_equal(r->px->metrics_path, "/sluice/metrics");
    reading_free(r);
}

static void file_unknown_keys(void **state)
{
    (void)state;
    expect_file_refused(SL_SET_SERVE, "threads: 1\ncolour: red\n",
                        "2:1: unknown key: 'colour'");
    expect_file_refused(SL_SET_SERVE, "max-body-bytes: 10\n",
                        "1:1: unknown key: 'max-body-bytes'");
    /* The proxy file's own keys are not serve's. */
    expect_file_refused(SL_SET_SERVE, "upstream_pool: 3\n",
                        "1:1: unknown key: 'upstream_pool'");
    expect_file_refused(SL_SET_SERVE, "config: other.yaml\n",
                        "1:1: unknown key: 'config'");
    expect_file_refused(SL_SET_PROXY, "timeouts: {colour: 1s}\n",
                        "1:12: timeouts: unknown key: 'colour'");
    expect_file_refused(SL_SET_PROXY, "queue: {connect: 1s}\n",
                        "1:9: queue: unknown key: 'connect'");
    expect_file_refused(SL_SET_PROXY, "timeouts.connect: 1s\n",
                        "1:1: unknown key: 'timeouts.connect'");
}

static void file_bad_values(void **state)
{
    (void)state;
    expect_file_refused(SL_SET_SERVE, "threads: many\n",
                        "1:10: threads: bad value: 'many'");
    expect_file_refused(SL_SET_PROXY, "idle_timeout: soon\n",
                        "1:15: idle_timeout: bad duration: 'soon'");
    expect_file_refused(SL_SET_SERVE, "listen: nowhere\n",
                        "1:9: listen: expected HOST:PORT: 'nowhere'");
    expect_file_refused(SL_SET_SERVE, "threads: [1, 2]\n",
                        "1:10: threads: expected a single value");
    expect_file_refused(SL_SET_PROXY, "queue: {max_requests: 1000001}\n",
                        "1:23: max_requests: expected an integer in "
                        "0..1000000: '1000001'");
    expect_file_refused(SL_SET_PROXY, "timeouts: {connect: 999us}\n",
                        "1:21: connect: bad duration (at least 1ms): "
                        "'999us'");
    expect_file_refused(SL_SET_PROXY, "timeouts: 1s\n",
                        "1:11: timeouts: expected a mapping");
    expect_file_refused(SL_SET_PROXY, "upstream_pool: [1]\n",
                        "1:16: upstream_pool: expected a scalar");
    expect_file_refused(SL_SET_PROXY, "rate_limit_headers: \"true\"\n",
                        "1:21: rate_limit_headers: expected true or false: "
                        "'true'");
    expect_file_refused(SL_SET_PROXY, "metrics_path: metrics\n",
                        "1:15: metrics_path: must start with '/' (or be "
                        "empty): 'metrics'");
    expect_file_refused(SL_SET_PROXY, "upstream: http://h/p\n",
                        "1:11: upstream: a path is not supported, only "
                        "http://HOST:PORT: 'http://h/p'");
    expect_file_refused(SL_SET_SERVE, "- rules\n",
                        "1:1: expected a mapping of settings");
}

static void file_then_flags(void **state)
{
    (void)state;
    char *path = config_file("rules: limits.yaml\nthreads: 2\nlisten: "
                             "127.0.0.1:9\nqueue: {max_wait: 2s}\n"
                             "rate_limit_headers: off\n");
    reading *r =
        read_args(SL_SET_PROXY,
                  (const char *[]){"--threads", "3", "--config", path, NULL});
    expect_eq(r->rc, 0);
    assert_string_equal(r->s.config, path);
    expect_eq(r->srv.threads, 3); /* the flag, wherever it stands */
    expect_eq(r->srv.listen_port, 9);
    expect_eq(r->px->queue_max_wait_ms, 2000);
    expect_eq(r->px->rate_limit_headers, 0);
    /* A relative rules path is the file's directory's. */
    assert_string_equal(r->srv.rules_path, "/tmp/limits.yaml");
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
    for (size_t i = 0; i < sl_settings_count; i++) {
        const sl_setting *a = &sl_settings_table[i];
        for (size_t j = i + 1; j < sl_settings_count; j++) {
            const sl_setting *b = &sl_settings_table[j];
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
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uint_refuses_signs_spaces_units_and_overflow),
        cmocka_unit_test(duration_refuses_bad_units_and_bounds),
        cmocka_unit_test(hostport_refuses_what_is_no_address),
        cmocka_unit_test(enum_and_bool),
        cmocka_unit_test(flags_out_of_bounds),
        cmocka_unit_test(flags_bad_values),
        cmocka_unit_test(flags_unknown_missing_and_left_over),
        cmocka_unit_test(flags_set_their_fields),
        cmocka_unit_test(defaults),
        cmocka_unit_test(file_unknown_keys),
        cmocka_unit_test(file_bad_values),
        cmocka_unit_test(file_then_flags),
        cmocka_unit_test(table_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
