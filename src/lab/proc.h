/*
 * proc.h - the processes `sluice lab run` starts and stops by pid, and
 * the free loopback ports it gives them.
 */
#ifndef SL_LAB_PROC_H
#define SL_LAB_PROC_H

#include <sys/types.h>

/* A free TCP port on 127.0.0.1 (bound, read, closed), or -1. */
int lb_free_port(void);

/* Starts argv (argv[0] a path or a name on PATH) with stdout and stderr
 * appended to log: its pid, or -1 with a message on stderr. */
pid_t lb_spawn(char *const argv[], const char *log);

/* SIGTERM, then SIGKILL after grace_ms; reaps it.  The exit status as
 * waitpid() gave it, or -1.  pid <= 0 does nothing. */
int lb_stop(pid_t pid, int grace_ms);

/* Waits for pid to exit for at most timeout_ms: 1 with *status set, 0
 * when it still runs. */
int lb_wait(pid_t pid, int timeout_ms, int *status);

/* 1 once an HTTP GET of path on 127.0.0.1:port answers 200 within
 * timeout_ms (retried every 50 ms), else 0. */
int lb_wait_http(int port, const char *path, int timeout_ms);

/* 1 once Redis on 127.0.0.1:port answers PING within timeout_ms. */
int lb_wait_redis(int port, int timeout_ms);

/* CLOCK_MONOTONIC in ns (libuv's uv_hrtime() clock). */
unsigned long long lb_now_ns(void);
void lb_sleep_until_ns(unsigned long long t);

#endif
