/*
 * accept.c - a counted accept, for every listener of the process (serve's
 * HTTP and its doors, the proxy): --max-connections over all threads and
 * --max-connections-per-address (peers.c), with TCP_NODELAY on what is
 * kept.  Apart from server.c, which runs the threads, because every
 * front end's connection file calls it.
 */
#include "runtime/peers.h"
#include "runtime/worker.h"

int sv_accept(sv_server *s, uv_stream_t *listener, uv_tcp_t *tcp)
{
    int open =
        atomic_fetch_add_explicit(&s->open_conns, 1, memory_order_relaxed);
    if (uv_accept(listener, (uv_stream_t *)tcp) != 0)
        return -1;
    if (open >= s->cfg.max_connections) {
        atomic_fetch_add_explicit(&s->closed_over_max, 1, memory_order_relaxed);
        return -1;
    }
    if (s->peers != NULL && sv_peers_add(s->peers, tcp) != 0) {
        atomic_fetch_add_explicit(&s->closed_per_address, 1,
                                  memory_order_relaxed);
        return -1;
    }
    uv_tcp_nodelay(tcp, 1);
    return 0;
}

void sv_unaccept(sv_server *s, const uv_tcp_t *tcp)
{
    if (s->peers != NULL)
        sv_peers_remove(s->peers, tcp);
    atomic_fetch_sub_explicit(&s->open_conns, 1, memory_order_relaxed);
}
