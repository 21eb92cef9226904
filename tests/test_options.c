/*
 * test_options.c - the options structs' size rule (sluice.h, "Options
 * structs"): a caller's struct of an older, smaller layout is read up to
 * its size with defaults after; a newer, larger one is accepted when the
 * fields this library does not know are zero; a size below the first
 * layout (0: never initialised) or a larger one asking for an unknown
 * field is refused; NULL still means the defaults.
 */
#include <stddef.h>

#include <unistd.h>

#include "testutil.h"
#include "internal.h"
#include "sluice_rules.h"

/* Two layouts of one options struct: v2 appends `later`. */
typedef struct v1 {
    size_t size;
    int64_t first;
} v1;
typedef struct v2 {
    size_t size;
    int64_t first;
    int64_t later;
} v2;

static void test_older_struct_gets_defaults_after_its_size(void **state)
{
    v1 old = {.size = sizeof(v1), .first = 7};
    v2 got = {.later = 99};
    (void)state;
    assert_int_equal(
        sl__options_copy(&got, sizeof(got), sizeof(v1), &old, "v", NULL, 0), 0);
    expect_eq(got.first, 7);
    expect_eq(got.later, 0); /* the default */
}

static void test_newer_struct_is_read_when_unknown_fields_are_zero(void **state)
{
    v2 newer = {.size = sizeof(v2), .first = 7};
    v1 got;
    (void)state;
    assert_int_equal(
        sl__options_copy(&got, sizeof(got), sizeof(v1), &newer, "v", NULL, 0),
        0);
    expect_eq(got.first, 7);
    newer.later = 1;
    got.first = 0;
    expect_eq(
        sl__options_copy(&got, sizeof(got), sizeof(v1), &newer, "v", NULL, 0),
        SL_EINVAL);
    expect_eq(got.first, 0); /* untouched */
}

static void test_size_below_first_layout_is_refused(void **state)
{
    v2 zero = {0}, half = {.size = sizeof(size_t), .first = 7};
    v2 got;
    (void)state;
    expect_eq(
        sl__options_copy(&got, sizeof(got), sizeof(v1), &zero, "v", NULL, 0),
        SL_EINVAL);
    expect_eq(
        sl__options_copy(&got, sizeof(got), sizeof(v1), &half, "v", NULL, 0),
        SL_EINVAL);
}

/* A caller's struct larger than this library's: the public one and
 * bytes after it. */
typedef struct memory_larger {
    sl_memory_options o;
    uint64_t unknown;
} memory_larger;

static void test_memory_store_checks_size(void **state)
{
    sl_memory_options o = SL_MEMORY_OPTIONS_INIT, bad = {.max_key_len = 4};
    memory_larger big = {.o = {.size = sizeof(memory_larger)}};
    sl_store *st;
    (void)state;
    o.max_key_len = 4;
    st = sl_memory_store_new(&o);
    assert_non_null(st);
    expect_eq(sl_memory_store_new(&bad) == NULL, 1);
    sl_limit *lim = tu_limit(SL_FIXED_WINDOW, 5, SEC, 0);
    sl_decision d;
    expect_eq(sl_check(st, lim, "12345", 5, 1, SEC, &d), SL_EKEYLEN);
    sl_store_free(st);
    st = sl_memory_store_new(&big.o);
    assert_non_null(st);
    sl_store_free(st);
    big.unknown = 1;
    expect_eq(sl_memory_store_new(&big.o) == NULL, 1);
    st = sl_memory_store_new(NULL);
    assert_non_null(st);
    sl_store_free(st);
    sl_limit_free(lim);
}

static void test_rules_load_checks_size(void **state)
{
    static const char text[] = "domain: d\n"
                               "descriptors:\n"
                               "  - key: k\n"
                               "    rate_limit: {unit: second, "
                               "requests_per_unit: 1}\n";
    sl_rules_options o = SL_RULES_OPTIONS_INIT, bad = {.max_depth = 1};
    sl_rules *r = NULL;
    char err[256] = "";
    (void)state;
    expect_eq(sl_rules_load_buffer("t.yaml", text, strlen(text), &bad, &r, err,
                                   sizeof(err)),
              SL_EINVAL);
    assert_null(r);
    if (strstr(err, "invalid options size: '0'") == NULL)
        fail_msg("message: '%s'", err);
    expect_eq(
        sl_rules_load("/nonexistent-dir-of-rules", &bad, &r, err, sizeof(err)),
        SL_EINVAL);
    o.max_depth = 1;
    assert_int_equal(sl_rules_load_buffer("t.yaml", text, strlen(text), &o, &r,
                                          err, sizeof(err)),
                     0);
    sl_rules_free(r);
    assert_int_equal(sl_rules_load_buffer("t.yaml", text, strlen(text), NULL,
                                          &r, err, sizeof(err)),
                     0);
    sl_rules_free(r);
}

static void test_redis_store_checks_size(void **state)
{
    sl_redis_options o = SL_REDIS_OPTIONS_INIT;
    sl_redis_options bad = {.url = "redis://h:1", .lazy_connect = 1};
    sl_store *st = NULL;
    char err[256] = "";
    (void)state;
    expect_eq(sl_redis_store_new(&bad, &st, err, sizeof(err)), SL_EINVAL);
    assert_null(st);
    if (strstr(err, "invalid options size: '0'") == NULL)
        fail_msg("message: '%s'", err);
    o.url = "redis://h:1";
    o.lazy_connect = 1;
    assert_int_equal(sl_redis_store_new(&o, &st, err, sizeof(err)), 0);
    sl_store_free(st);
}

/* The state file's options: an unset size, and unknown fields that are
 * not zero, are refused with the struct named; NULL is the defaults. */
static void test_state_file_checks_size(void **state)
{
    (void)state;
    sl_store *st = sl_memory_store_new(NULL);
    char path[] = "/tmp/sl-options-XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    sl_memory_save_options bad = {.wall = 1};
    expect_eq(sl_memory_store_save(st, path, 0, &bad, NULL, err, sizeof(err)),
              SL_EINVAL);
    assert_non_null(strstr(err, "sl_memory_save_options"));
    struct {
        sl_memory_load_options o;
        uint64_t unknown;
    } big = {.o = {.size = sizeof(big)}, .unknown = 1};
    expect_eq(sl_memory_store_load(st, path, &big.o, NULL, err, sizeof(err)),
              SL_EINVAL);
    assert_non_null(strstr(err, "sl_memory_load_options"));
    sl_memory_save_options o = SL_MEMORY_SAVE_OPTIONS_INIT;
    expect_eq(sl_memory_store_save(st, path, 0, &o, NULL, err, sizeof(err)), 0);
    expect_eq(sl_memory_store_load(st, path, NULL, NULL, err, sizeof(err)), 0);
    unlink(path);
    sl_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_older_struct_gets_defaults_after_its_size),
        cmocka_unit_test(
            test_newer_struct_is_read_when_unknown_fields_are_zero),
        cmocka_unit_test(test_size_below_first_layout_is_refused),
        cmocka_unit_test(test_memory_store_checks_size),
        cmocka_unit_test(test_rules_load_checks_size),
        cmocka_unit_test(test_redis_store_checks_size),
        cmocka_unit_test(test_state_file_checks_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
