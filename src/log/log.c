/*
 * log.c - the daemons' log lines (log.h).  Each line is formatted into a
 * buffer and written with one write(2), so lines from several threads
 * never interleave (a pipe or journald gets whole lines up to PIPE_BUF;
 * longer messages are cut to fit).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

/* At most PIPE_BUF (4096 on Linux): one atomic write to a pipe. */
#define LINE_MAX_BYTES 4096

const char *const sl__log_level_names[] = {"debug", "info", "warn", "error",
                                           NULL};
const char *const sl__log_format_names[] = {"text", "json", NULL};

static int log_json;
static int log_min = SL__LOG_INFO;

void sl__log_setup(int json, int min_level)
{
    log_json = json;
    log_min = min_level;
}

/* Appends s to line (used of room), JSON-escaped if json, newlines made
 * spaces otherwise; stops short of the room left for the line's end. */
static size_t put(char *line, size_t used, size_t room, const char *s, int json)
{
    for (; *s != '\0' && used + 8 < room; s++) {
        unsigned char c = (unsigned char)*s;
        if (!json) {
            line[used++] = c == '\n' || c == '\r' ? ' ' : (char)c;
        } else if (c == '"' || c == '\\') {
            line[used++] = '\\';
            line[used++] = (char)c;
        } else if (c == '\n') {
            used += (size_t)snprintf(line + used, room - used, "\\n");
        } else if (c < 0x20 || c == 0x7f) {
            used += (size_t)snprintf(line + used, room - used, "\\u%04x", c);
        } else {
            line[used++] = (char)c;
        }
    }
    return used;
}

void sl__log(int level, const char *who, const char *fmt, ...)
{
    if (level < log_min)
        return;
    char msg[LINE_MAX_BYTES], line[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t room = sizeof(line) - 3, n;
    if (!log_json) {
        n = (size_t)snprintf(line, room, "sluice%s%s: ", who ? " " : "",
                             who ? who : "");
        n = put(line, n, room, msg, 0);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(line, room, "{\"time\":\"%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, room - n,
                              ".%03ldZ\",\"level\":\"%s\",\"component\":\"%s\","
                              "\"msg\":\"",
                              ts.tv_nsec / 1000000, sl__log_level_names[level],
                              who ? who : "sluice");
        n = put(line, n, room, msg, 1);
        line[n++] = '"';
        line[n++] = '}';
    }
    line[n++] = '\n';
    /* A short write to stderr has nowhere to be reported. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
