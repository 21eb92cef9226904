/*
 * peers.h - open connections per client address, for
 * --max-connections-per-address.
 */
#ifndef SV_PEERS_H
#define SV_PEERS_H

#include <stddef.h>
#include <uv.h>

typedef struct sv_peers sv_peers;

/* A table allowing max connections per address (max >= 1); NULL when
 * out of memory.  Thread-safe: every thread accepts into it. */
sv_peers *sv_peers_new(size_t max);
void sv_peers_free(sv_peers *p);
/* Counts the accepted tcp against its peer's address: 0, or -1 when the
 * address has max open already (or its address or memory is lacking),
 * and then tcp is not counted. */
int sv_peers_add(sv_peers *p, const uv_tcp_t *tcp);
/* Uncounts tcp if sv_peers_add counted it; tcp's socket may be closed. */
void sv_peers_remove(sv_peers *p, const uv_tcp_t *tcp);

#endif
