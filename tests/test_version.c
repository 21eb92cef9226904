/*
 * test_version.c - the version: sl_version() and sl_version_number() of
 * the library agree with the header's macros, SL_VERSION_NUMBER is
 * major * 10000 + minor * 100 + patch, and CMake's project version (read
 * from sluice.h) is the header's.
 */
#include "testutil.h"

static void test_library_version_is_the_headers(void **state)
{
    (void)state;
    assert_string_equal(sl_version(), SL_VERSION);
    expect_eq(sl_version_number(), SL_VERSION_NUMBER);
}

static void test_version_number_orders_the_parts(void **state)
{
    char text[32];
    (void)state;
    expect_eq(SL_VERSION_NUMBER, SL_VERSION_MAJOR * 10000 +
                                     SL_VERSION_MINOR * 100 +
                                     SL_VERSION_PATCH);
    expect_le(SL_VERSION_MINOR, 99);
    expect_le(SL_VERSION_PATCH, 99);
    snprintf(text, sizeof(text), "%d.%d.%d", SL_VERSION_MAJOR,
             SL_VERSION_MINOR, SL_VERSION_PATCH);
    assert_string_equal(SL_VERSION, text);
}

/* tests/CMakeLists.txt passes ${PROJECT_VERSION}. */
static void test_cmake_project_version_is_the_headers(void **state)
{
    (void)state;
    assert_string_equal(SL_TEST_PROJECT_VERSION, SL_VERSION);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_version_is_the_headers),
        cmocka_unit_test(test_version_number_orders_the_parts),
        cmocka_unit_test(test_cmake_project_version_is_the_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
