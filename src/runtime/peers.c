/*
 * peers.c - open connections per client address.  One client that opens
 * connections until --max-connections is reached shuts everyone else out;
 * --max-connections-per-address bounds what one address may hold.
 *
 * Two chained hash tables behind one mutex: addresses with their counts,
 * and the counted connections by handle, because a connection is
 * uncounted after its socket is closed, when its peer can no longer be
 * asked.  The mutex is taken once per accept and once per close, never
 * per request, and all threads accept into it: a client's connections
 * land on any thread (SO_REUSEPORT).  Invariant: an address's count is
 * the number of handles that point to it, and an address with none is
 * freed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/peers.h"

#define BUCKETS 4096

typedef struct peer_addr {
    struct peer_addr *next;
    size_t count;
    unsigned char key[17]; /* family, then the address's 4 or 16 bytes */
} peer_addr;

typedef struct peer_conn {
    struct peer_conn *next;
    const uv_tcp_t *tcp;
    peer_addr *addr;
} peer_conn;

struct sv_peers {
    pthread_mutex_t lock;
    size_t max;
    peer_addr *addrs[BUCKETS];
    peer_conn *conns[BUCKETS];
};

sv_peers *sv_peers_new(size_t max)
{
    sv_peers *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    p->max = max;
    return p;
}

void sv_peers_free(sv_peers *p)
{
    if (p == NULL)
        return;
    for (size_t b = 0; b < BUCKETS; b++) {
        for (peer_conn *c = p->conns[b], *n; c != NULL; c = n) {
            n = c->next;
            free(c);
        }
        for (peer_addr *a = p->addrs[b], *n; a != NULL; a = n) {
            n = a->next;
            free(a);
        }
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static size_t hash_bytes(const unsigned char *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 0x100000001b3ULL;
    return (size_t)(h % BUCKETS);
}

static size_t hash_ptr(const void *ptr)
{
    uintptr_t u = (uintptr_t)ptr;
    return hash_bytes((const unsigned char *)&u, sizeof(u));
}

int sv_peers_add(sv_peers *p, const uv_tcp_t *tcp)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    unsigned char key[17] = {0};
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) != 0)
        return -1; /* the peer has gone already */
    key[0] = (unsigned char)ss.ss_family;
    if (ss.ss_family == AF_INET)
        memcpy(key + 1, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    else if (ss.ss_family == AF_INET6)
        memcpy(key + 1, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    peer_conn *c = malloc(sizeof(*c));
    if (c == NULL)
        return -1;
    pthread_mutex_lock(&p->lock);
    peer_addr **b = &p->addrs[hash_bytes(key, sizeof(key))], *a;
    for (a = *b; a != NULL; a = a->next)
        if (memcmp(a->key, key, sizeof(key)) == 0)
            break;
    if (a == NULL && (a = calloc(1, sizeof(*a))) != NULL) {
        memcpy(a->key, key, sizeof(key));
        a->next = *b;
        *b = a;
    }
    if (a == NULL || a->count >= p->max) {
        pthread_mutex_unlock(&p->lock);
        free(c);
        return -1;
    }
    a->count++;
    c->tcp = tcp;
    c->addr = a;
    peer_conn **cb = &p->conns[hash_ptr(tcp)];
    c->next = *cb;
    *cb = c;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void sv_peers_remove(sv_peers *p, const uv_tcp_t *tcp)
{
    pthread_mutex_lock(&p->lock);
    peer_conn **cp = &p->conns[hash_ptr(tcp)], *c;
    while ((c = *cp) != NULL && c->tcp != tcp)
        cp = &c->next;
    if (c != NULL) {
        *cp = c->next;
        peer_addr *a = c->addr;
        if (--a->count == 0) {
            peer_addr **ap = &p->addrs[hash_bytes(a->key, sizeof(a->key))];
            while (*ap != a)
                ap = &(*ap)->next;
            *ap = a->next;
            free(a);
        }
        free(c);
    }
    pthread_mutex_unlock(&p->lock);
}
