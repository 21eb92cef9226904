/*
 * mem.h - the allocator of one HTTP/2 session (mem.c): free lists by
 * size class for nghttp2's allocations (it allocates and frees a stream,
 * its outbound frames and their header lists for every call) and the
 * calls' own (the call, its request and answer, the method's state).
 * A call's blocks come back to the lists when it ends, and the next call
 * of the connection takes them again instead of going to malloc.
 */
#ifndef GR_MEM_H
#define GR_MEM_H

#include <stddef.h>

#include <nghttp2/nghttp2.h>

typedef struct gr_mem gr_mem;

/* Free blocks kept by a session at most, in bytes: a burst's worth of
 * calls; beyond it blocks go back to malloc.  (The connection keeps an
 * output buffer of this order between rounds too, grpc_conn.c.) */
#define GR_MEM_KEEP (128 * 1024)

/* A session's allocator, keeping up to keep bytes of free blocks; NULL
 * when out of memory. */
gr_mem *gr_mem_new(size_t keep);
/* Frees the kept blocks and m (NULL: no-op).  Every block must have been
 * freed before. */
void gr_mem_free(gr_mem *m);

/* len bytes, aligned for any type; NULL when out of memory.  A NULL m
 * means malloc and free, for callers without a session (a fuzz target of
 * the codec alone). */
void *gr_mem_alloc(gr_mem *m, size_t len);
void *gr_mem_calloc(gr_mem *m, size_t len);
/* A block of gr_mem_alloc(m, ...) (or NULL) made len bytes long, its
 * bytes kept up to the shorter length; NULL when out of memory (p is
 * then still valid). */
void *gr_mem_realloc(gr_mem *m, void *p, size_t len);
/* A block of gr_mem_alloc(m, ...) back (NULL: no-op). */
void gr_mem_release(gr_mem *m, void *p);

/* The same allocator as nghttp2 calls it (nghttp2_session_server_new3),
 * valid while m is. */
nghttp2_mem *gr_mem_nghttp2(gr_mem *m);

#endif
