/*
 * test_grpc_mem.c - the gRPC sessions' allocator (src/grpc/mem.c): a
 * freed block is the next one of its size class, blocks are aligned as
 * malloc's, the free lists keep no more than asked, nghttp2's realloc
 * keeps the contents when a block moves, and blocks past the largest
 * class (and a NULL allocator's) are malloc's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "grpc/mem.h"

static void reuse_within_class(void **state)
{
    (void)state;
    gr_mem *m = gr_mem_new(GR_MEM_KEEP);
    assert_non_null(m);
    void *a = gr_mem_alloc(m, 100);
    uintptr_t was = (uintptr_t)a;
    memset(a, 0x5a, 100);
    gr_mem_release(m, a);
    /* 90 and 100 bytes are of one class: the same block again. */
    void *b = gr_mem_alloc(m, 90);
    assert_int_equal((uintptr_t)b, was);
    /* Another class: another block. */
    void *c = gr_mem_alloc(m, 300);
    assert_int_not_equal((uintptr_t)c, was);
    gr_mem_release(m, b);
    gr_mem_release(m, c);
    gr_mem_free(m);
}

static void aligned_and_zeroed(void **state)
{
    (void)state;
    gr_mem *m = gr_mem_new(GR_MEM_KEEP);
    size_t sizes[] = {0,   1,   15,   16,   47,   48,   49,   111,
                      112, 113, 1000, 4079, 4080, 4081, 20000};
    void *p[sizeof(sizes) / sizeof(sizes[0])];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        p[i] = gr_mem_alloc(m, sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], 0xff, sizes[i]);
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        gr_mem_release(m, p[i]);
    /* A reused block is zeroed by calloc, whatever it held. */
    unsigned char *z = gr_mem_calloc(m, 1000);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(z[i], 0);
    gr_mem_release(m, z);
    gr_mem_free(m);
}

static void keeps_at_most_keep(void **state)
{
    (void)state;
    /* Room for two blocks of 128 bytes (100 asked + the header). */
    gr_mem *m = gr_mem_new(256);
    void *p[4];
    uintptr_t was[4];
    for (int i = 0; i < 4; i++) {
        p[i] = gr_mem_alloc(m, 100);
        was[i] = (uintptr_t)p[i];
    }
    for (int i = 0; i < 4; i++)
        gr_mem_release(m, p[i]);
    /* The first two went on the list (taken back last in, first out);
     * the other two went back to malloc. */
    void *a = gr_mem_alloc(m, 100), *b = gr_mem_alloc(m, 100);
    assert_int_equal((uintptr_t)a, was[1]);
    assert_int_equal((uintptr_t)b, was[0]);
    gr_mem_release(m, a);
    gr_mem_release(m, b);
    gr_mem_free(m);
}

static void realloc_keeps_contents(void **state)
{
    (void)state;
    gr_mem *m = gr_mem_new(GR_MEM_KEEP);
    nghttp2_mem *ng = gr_mem_nghttp2(m);
    unsigned char *p = ng->malloc(10, ng->mem_user_data);
    for (int i = 0; i < 10; i++)
        p[i] = (unsigned char)i;
    /* Within its class it stays; past it, it moves with its bytes; and
     * on into malloc's own blocks and back down. */
    size_t sizes[] = {40, 200, 3000, 9000, 50000, 100};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        p = ng->realloc(p, sizes[k], ng->mem_user_data);
        assert_non_null(p);
        for (int i = 0; i < 10; i++)
            assert_int_equal(p[i], i);
        memset(p + 10, 0xee, sizes[k] - 10);
    }
    ng->free(p, ng->mem_user_data);
    ng->free(NULL, ng->mem_user_data);
    unsigned char *q = ng->calloc(3, 7, ng->mem_user_data);
    for (int i = 0; i < 21; i++)
        assert_int_equal(q[i], 0);
    ng->free(q, ng->mem_user_data);
    assert_null(ng->calloc(SIZE_MAX / 2, 4, ng->mem_user_data));
    gr_mem_free(m);
}

static void null_allocator_is_malloc(void **state)
{
    (void)state;
    void *p = gr_mem_alloc(NULL, 64);
    assert_non_null(p);
    memset(p, 1, 64);
    gr_mem_release(NULL, p);
    gr_mem_release(NULL, NULL);
    gr_mem_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reuse_within_class),
        cmocka_unit_test(aligned_and_zeroed),
        cmocka_unit_test(keeps_at_most_keep),
        cmocka_unit_test(realloc_keeps_contents),
        cmocka_unit_test(null_allocator_is_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
