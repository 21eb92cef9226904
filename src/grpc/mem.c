/*
 * mem.c - one HTTP/2 session's allocator (mem.h).  A call costs nghttp2
 * about ten allocations (its stream, the HEADERS, DATA and trailers it
 * sends and their header lists) and the call a few of its own; through
 * glibc's malloc and free they were about a sixth of a call's
 * instructions (docs/benchmarks.md).  Here a block is taken from and
 * given back to a free list of its size class, a few instructions each.
 *
 * Every block has a 16-byte header before it holding its class, since
 * nghttp2's free() is not told the size.  Classes are powers of two from
 * 64 to 4096 bytes with the header; larger blocks (nghttp2's frame
 * buffers and header tables, made once per session) go to malloc and
 * back to free.  The lists keep at most `keep` bytes: a session that had
 * a burst of calls holds no more than that afterwards, and everything
 * goes back to malloc with the session.  One session is one thread's, so
 * there is no locking.
 *
 * Under AddressSanitizer a block on a list, and the part of a block past
 * the bytes asked for, are poisoned, so that ASan still sees a read past
 * a request's end or a use after free as it would with malloc's blocks
 * (the free list's links are in the headers, never in a free block).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/mem.h"

#if defined(__SANITIZE_ADDRESS__)
#define GR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GR_ASAN 1
#endif
#endif
#ifdef GR_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CLASSES 7
#define MIN_SHIFT 6 /* the smallest class: 64 bytes with the header */
#define BIG 0xff    /* a block of malloc's own, not of a class */

/* Before every block; 16 bytes, so that the block is aligned as malloc's
 * are. */
typedef struct header {
    _Alignas(16) struct header *next; /* on a free list */
    uint32_t cls;
    uint32_t len; /* asked for, for a block of a class */
} header;

struct gr_mem {
    header *lists[CLASSES];
    size_t kept; /* bytes on the lists */
    size_t keep; /* at most */
    nghttp2_mem ng;
};

static size_t class_bytes(unsigned cls)
{
    return (size_t)1 << (cls + MIN_SHIFT);
}

/* The class of a block of len bytes, or BIG. */
static unsigned class_of(size_t len)
{
    size_t total = len + sizeof(header);
    if (total > class_bytes(CLASSES - 1))
        return BIG;
    if (total <= class_bytes(0))
        return 0;
    /* ceil(log2(total)) - MIN_SHIFT */
    return (unsigned)(64 - __builtin_clzll((unsigned long long)total - 1)) -
           MIN_SHIFT;
}

/* A block of a class now taken, or one made: its length noted, and its
 * bytes past len poisoned. */
static inline void *block_of(header *h, unsigned cls, size_t len)
{
    h->len = (uint32_t)len;
    POISON(h + 1, class_bytes(cls) - sizeof(header));
    UNPOISON(h + 1, len);
    return h + 1;
}

/* A block from malloc, when the class's list is empty or the block BIG.
 * Not inlined: mem_alloc()'s usual way, a list's first block, then
 * makes no call and saves no registers. */
__attribute__((noinline)) static void *alloc_new(size_t len, unsigned cls)
{
    header *h = malloc(cls == BIG ? sizeof(header) + len : class_bytes(cls));
    if (h == NULL)
        return NULL;
    h->cls = cls;
    return cls == BIG ? h + 1 : block_of(h, cls, len);
}

/* Inline in nghttp2's entry points too, which call them a dozen times a
 * call. */
static inline void *mem_alloc(gr_mem *m, size_t len)
{
    if (len > SIZE_MAX - sizeof(header))
        return NULL;
    unsigned cls = m == NULL ? BIG : class_of(len);
    if (cls == BIG || m->lists[cls] == NULL)
        return alloc_new(len, cls);
    header *h = m->lists[cls];
    m->lists[cls] = h->next;
    m->kept -= class_bytes(cls);
    return block_of(h, cls, len);
}

static inline void mem_release(gr_mem *m, void *p)
{
    if (p == NULL)
        return;
    header *h = (header *)p - 1;
    if (h->cls == BIG || m == NULL || m->kept + class_bytes(h->cls) > m->keep) {
        if (h->cls != BIG)
            UNPOISON(p, class_bytes(h->cls) - sizeof(header));
        free(h);
        return;
    }
    POISON(p, class_bytes(h->cls) - sizeof(header));
    h->next = m->lists[h->cls];
    m->lists[h->cls] = h;
    m->kept += class_bytes(h->cls);
}

static void *ng_malloc(size_t size, void *m)
{
    return mem_alloc(m, size);
}

static void ng_free(void *p, void *m)
{
    mem_release(m, p);
}

static void *ng_calloc(size_t n, size_t size, void *m)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    return gr_mem_calloc(m, n * size);
}

/* A block of malloc's own stays one (realloc); a block of a class keeps
 * its place while the new size fits and moves to a larger class when not. */
static void *ng_realloc(void *p, size_t size, void *m)
{
    if (p == NULL)
        return gr_mem_alloc(m, size);
    header *h = (header *)p - 1;
    if (h->cls == BIG) {
        if (size > SIZE_MAX - sizeof(header))
            return NULL;
        h = realloc(h, sizeof(header) + size);
        return h == NULL ? NULL : h + 1;
    }
    if (size <= class_bytes(h->cls) - sizeof(header)) {
        h->len = (uint32_t)size;
        POISON(p, class_bytes(h->cls) - sizeof(header));
        UNPOISON(p, size);
        return p;
    }
    void *q = gr_mem_alloc(m, size);
    if (q == NULL)
        return NULL;
    memcpy(q, p, h->len);
    gr_mem_release(m, p);
    return q;
}

gr_mem *gr_mem_new(size_t keep)
{
    gr_mem *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->keep = keep;
    m->ng = (nghttp2_mem){m, ng_malloc, ng_free, ng_calloc, ng_realloc};
    return m;
}

void gr_mem_free(gr_mem *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < CLASSES; i++)
        while (m->lists[i] != NULL) {
            header *h = m->lists[i];
            m->lists[i] = h->next;
            UNPOISON(h + 1, class_bytes(i) - sizeof(header));
            free(h);
        }
    free(m);
}

nghttp2_mem *gr_mem_nghttp2(gr_mem *m)
{
    return &m->ng;
}

void *gr_mem_calloc(gr_mem *m, size_t len)
{
    void *p = gr_mem_alloc(m, len);
    if (p != NULL)
        memset(p, 0, len);
    return p;
}

void *gr_mem_alloc(gr_mem *m, size_t len)
{
    return mem_alloc(m, len);
}

void *gr_mem_realloc(gr_mem *m, void *p, size_t len)
{
    return ng_realloc(p, len, m);
}

void gr_mem_release(gr_mem *m, void *p)
{
    mem_release(m, p);
}
