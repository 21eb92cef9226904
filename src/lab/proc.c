/*
 * proc.c - process and port helpers of `sluice lab run` (proc.h).
 */
#define _GNU_SOURCE
#include "lab/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/http_client.h"

int lb_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

pid_t lb_spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "sluice lab: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (null >= 0)
            dup2(null, 0);
        /* Its own process group: a ^C to the run reaches the run, which
         * stops each child itself. */
        setpgid(0, 0);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int lb_wait(pid_t pid, int timeout_ms, int *status)
{
    for (int waited = 0;; waited += 10) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        if (waited >= timeout_ms)
            return 0;
        usleep(10000);
    }
}

int lb_stop(pid_t pid, int grace_ms)
{
    if (pid <= 0)
        return -1;
    int status = -1;
    kill(pid, SIGCONT); /* a paused Redis must run to die of SIGTERM */
    kill(pid, SIGTERM);
    if (!lb_wait(pid, grace_ms, &status)) {
        kill(pid, SIGKILL);
        lb_wait(pid, 5000, &status);
    }
    return status;
}

unsigned long long lb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL +
           (unsigned long long)ts.tv_nsec;
}

void lb_sleep_until_ns(unsigned long long t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL),
                          .tv_nsec = (long)(t % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

int lb_wait_http(int port, const char *path, int timeout_ms)
{
    char target[32];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    ah_response r;
    ah_response_init(&r, NULL);
    unsigned long long end =
        lb_now_ns() + (unsigned long long)timeout_ms * 1000000ULL;
    int ok = 0;
    while (!ok && lb_now_ns() < end) {
        ok = ah_request(target, "GET", path, NULL, NULL, 0, 500, &r, NULL, 0) ==
                 0 &&
             r.status == 200;
        if (!ok)
            usleep(50000);
    }
    ah_response_release(&r);
    return ok;
}

int lb_wait_redis(int port, int timeout_ms)
{
    unsigned long long end =
        lb_now_ns() + (unsigned long long)timeout_ms * 1000000ULL;
    while (lb_now_ns() < end) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        char buf[16] = "";
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            write(fd, "PING\r\n", 6) == 6) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 200) == 1 && read(fd, buf, sizeof(buf) - 1) > 0 &&
                strncmp(buf, "+PONG", 5) == 0) {
                close(fd);
                return 1;
            }
        }
        if (fd >= 0)
            close(fd);
        usleep(50000);
    }
    return 0;
}
