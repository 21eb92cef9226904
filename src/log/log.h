/*
 * log.h - the daemons' log (sluice serve and sluice proxy): one line per
 * event on stderr, as text ("sluice: rules reloaded: version V", what a
 * terminal or journald wants) or as one JSON object
 * ({"time":"2026-11-26T06:01:52.123Z","level":"info","component":"serve",
 * "msg":"..."}, what a log shipper wants), with events below the chosen
 * level left out.  The library itself never logs: this is for the
 * programs built on it, set up once before their threads start.
 */
#ifndef SL_CORE_LOG_H
#define SL_CORE_LOG_H

typedef enum sl__log_level {
    SL__LOG_DEBUG,
    SL__LOG_INFO,
    SL__LOG_WARN,
    SL__LOG_ERROR
} sl__log_level;

/* --log-level's and --log-format's words, in enum order. */
extern const char *const sl__log_level_names[];
extern const char *const sl__log_format_names[];

/* json: 0 text, 1 JSON; events below min_level are dropped.  Not
 * thread-safe: call before any thread logs.  The default: text, info. */
void sl__log_setup(int json, int min_level);

/* One event.  who names the part it comes from in the text form ("proxy"
 * prints "sluice proxy: ..."; NULL "sluice: ...") and is its component in
 * JSON (NULL: "sluice").  A newline in the message becomes a space, so an
 * event is always one line; the line is written with one write(2). */
void sl__log(int level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
