/*
 * relay.h - the lab's TCP delay relay: listens on a loopback port and
 * forwards each connection to one upstream (Redis), holding every chunk
 * for a delay that can be changed while it runs, so that "Redis slowed
 * by 2 ms" is tried without `tc netem` (which needs root and slows all
 * of loopback).  It runs on a thread of its own with its own libuv loop;
 * the delay is an atomic the caller sets.
 *
 * Order is kept per direction: a chunk is never sent before one read
 * before it, even when the delay drops.
 */
#ifndef SL_LAB_RELAY_H
#define SL_LAB_RELAY_H

#include <stdint.h>

typedef struct lb_relay lb_relay;

/* Starts relaying 127.0.0.1:*port (0: a free one, set on return) to
 * 127.0.0.1:upstream_port.  NULL on failure, with a message on stderr. */
lb_relay *lb_relay_start(int *port, int upstream_port);
/* The delay added to each chunk from now on, both ways. */
void lb_relay_set_delay_ms(lb_relay *r, unsigned ms);
/* Closes every connection, stops the thread and frees the relay. */
void lb_relay_stop(lb_relay *r);

#endif
