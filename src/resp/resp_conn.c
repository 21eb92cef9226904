/*
 * conn.c - one Redis protocol connection: reads, commands parsed and run
 * in order, replies written, timeouts (resp.h).
 *
 * Reads land in the thread's read buffer and commands are parsed from it
 * where they lie; only a command cut by the end of a read (and what
 * follows a command that waits) is copied into the connection's `in`,
 * where parsing goes on when more comes (parse.c keeps its place).  A
 * read's replies go out in one write.
 *
 * Commands run one at a time: one that waits on the store (--store
 * redis://) holds the ones pipelined after it, which are read ahead into
 * `in` up to IN_AHEAD_MAX bytes, so replies stay in order and a
 * connection's memory stays bounded (its one command, its read-ahead,
 * and SV_MAX_PENDING_OUTPUT of replies the client has not read, beyond
 * which reading stops).  Clients that want decisions in parallel open
 * connections, as with Redis.
 *
 * Timeouts: a command must arrive whole within --read-timeout of its
 * first byte; an idle connection closes after --idle-timeout.
 *
 * A protocol error is answered, then the connection closes as nginx's
 * lingering close does: what the client still sends is read and dropped
 * until it stops (or LINGER_MS pass), because closing with unread bytes
 * makes the kernel send a reset, which can destroy the error reply
 * before the client reads it.
 */
#include <stdlib.h>
#include <string.h>

#include "resp/command.h"
#include "resp/parse.h"
#include "resp/resp_reply.h"
#include "resp/resp.h"
#include "runtime/deadline.h"
#include "runtime/send.h"

/* Bytes read ahead of a waiting command before reading stops. */
#define IN_AHEAD_MAX (64 * 1024)
/* The longest a connection lingers after a protocol error. */
#define LINGER_MS 2000

typedef struct rp_conn rp_conn;
struct rp_conn {
    uv_tcp_t tcp; /* first: a handle pointer is a conn pointer */
    sv_deadline timer;
    sv_listener *l;
    sv_worker *w;
    sv_reader reader;
    sv_outbox ob;
    rp_parser parser;
    sv_buf in;   /* a command cut by a read; what follows a wait */
    int partial; /* `in` starts with a command not yet whole */
    rp_session s;
    int closing; /* no more commands; close after the writes */
    int paused;  /* reading stopped until the client reads */
    int ended;   /* the client's end came while a command waited */
    int linger;  /* closing after a protocol error: reads dropped */
    int handles_open;
    rp_conn *prev, *next;
};

static void conn_free_cb(uv_handle_t *h)
{
    rp_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    sv_listener *l = c->l;
    sv_worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sv_buf_release(&c->ob.out);
    sv_buf_release(&c->in);
    rp_parser_release(&c->parser);
    sv_unaccept(w->server, &c->tcp);
    free(c);
    if (w->stopping && sv_worker_quiet(w))
        sv_readers_close(&w->readers);
}

static void conn_close(rp_conn *c)
{
    if (c->handles_open != 2 || uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    rp_session_release(&c->s); /* a waiting command is given up now */
    uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
    uv_close((uv_handle_t *)&c->timer.timer, conn_free_cb);
}

static void set_reading(rp_conn *c, int on)
{
    if (sv_reader_set(&c->reader, on) != 0)
        conn_close(c);
}

static int finished(rp_conn *c)
{
    return c->closing || (c->w->stopping && !c->s.waiting && !c->partial);
}

/* Everything is written and the connection is finished: it closes, at
 * once or once the client stops sending (linger). */
static void written_all(rp_conn *c)
{
    if (c->linger)
        sv_deadline_set(&c->timer, LINGER_MS);
    else
        conn_close(c);
}

static void write_cb(uv_write_t *req, int status)
{
    rp_conn *c = ((sv_send_req *)req)->owner;
    sv_outbox_written(&c->ob, req);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->ob.writes == 0 && finished(c)) {
        written_all(c);
        return;
    }
    if (c->paused && !c->s.waiting &&
        c->ob.pending < SV_MAX_PENDING_OUTPUT / 2) {
        c->paused = 0;
        set_reading(c, 1);
    }
}

static void flush(rp_conn *c)
{
    if (c->ob.out.failed) {
        /* A reply could not be built whole: the client cannot tell where
         * it ends, so nothing more goes out. */
        c->ob.out.len = 0;
        c->ob.out.failed = 0;
        c->closing = 1;
    }
    if (c->ob.out.len > 0 && sv_outbox_flush(&c->ob, (uv_stream_t *)&c->tcp, c,
                                             write_cb, 64 * 1024) != 0) {
        conn_close(c);
        return;
    }
    if (c->ob.writes == 0) {
        if (finished(c))
            written_all(c);
        return;
    }
    if (!c->closing && !c->paused && c->ob.pending > SV_MAX_PENDING_OUTPUT) {
        c->paused = 1;
        set_reading(c, 0);
    }
}

static void timer_cb(uv_timer_t *t)
{
    conn_close(t->data);
}

/*
 * Runs the commands in buf[0..len) (c->in's bytes, or the thread's read
 * buffer), until one waits, the connection is to close, or the bytes end
 * inside a command.  Returns how many bytes were used.
 */
static size_t run_commands(rp_conn *c, char *buf, size_t len)
{
    rp_str argv[RP_MAX_ARGS];
    size_t off = 0;
    while (off < len && !c->closing && !c->s.waiting) {
        char *cmd = buf + off;
        int rc = rp_parse(&c->parser, cmd, len - off);
        if (rc == RP_MORE)
            break;
        if (rc == RP_ERROR) {
            /* As Redis: the error, then the connection closes. */
            rp_add_error(&c->ob.out, c->parser.err);
            rp_count(&c->s, 1);
            c->closing = c->linger = 1;
            break;
        }
        size_t argc = c->parser.n_args;
        for (size_t i = 0; i < argc; i++)
            argv[i] =
                (rp_str){cmd + c->parser.args[i].off, c->parser.args[i].len};
        off += c->parser.pos;
        rp_parser_next(&c->parser);
        if (argc == 0)
            continue; /* an empty line or *0: nothing to run */
        rc = rp_run(&c->s, argv, argc, &c->ob.out);
        if (rc == RP_CLOSE)
            c->closing = 1;
    }
    return off;
}

/* What is left of buf after run_commands() used `used` bytes, kept in
 * c->in for later (buf may be c->in itself). */
static void keep_rest(rp_conn *c, const char *buf, size_t len, size_t used)
{
    size_t rest = len - used;
    if (buf == c->in.data) {
        if (used > 0 && rest > 0)
            memmove(c->in.data, c->in.data + used, rest);
        c->in.len = rest;
    } else if (rest > 0) {
        sv_buf_add(&c->in, buf + used, rest);
    }
    if (c->in.failed) {
        c->in.failed = 0;
        c->closing = 1;
    }
    /* A command begun starts the read timeout once; only its end clears
     * it, so trickling bytes does not keep it alive. */
    int partial = c->in.len > 0 && !c->s.waiting;
    if (partial && !c->partial)
        sv_deadline_set(&c->timer, c->w->server->cfg.read_timeout_ms);
    else if (!partial && !c->s.waiting)
        sv_deadline_set(&c->timer, c->w->server->cfg.idle_timeout_ms);
    c->partial = partial;
}

/* Parses and runs what c->in holds. */
static void run_in(rp_conn *c)
{
    size_t used = run_commands(c, c->in.data, c->in.len);
    keep_rest(c, c->in.data, c->in.len, used);
}

static void read_cb(sv_reader *r, ssize_t nread, const char *data)
{
    rp_conn *c = (rp_conn *)((char *)r - offsetof(rp_conn, reader));
    if (c->closing) {
        if (c->linger && nread < 0)
            conn_close(c); /* the client stopped: the error was read */
        return;
    }
    if (nread < 0) {
        if (c->s.waiting) {
            c->ended = 1; /* the waiting command is answered first */
            set_reading(c, 0);
            return;
        }
        c->closing = 1;
        flush(c);
        return;
    }
    if (c->s.waiting || c->in.len > 0) {
        sv_buf_add(&c->in, data, (size_t)nread);
        if (!c->s.waiting)
            run_in(c);
        else if (c->in.len > IN_AHEAD_MAX)
            set_reading(c, 0);
        if (c->in.failed)
            c->closing = 1;
    } else {
        /* The thread's buffer is this thread's alone until the callback
         * returns: an inline command is unquoted in place there. */
        char *buf = (char *)data;
        size_t used = run_commands(c, buf, (size_t)nread);
        keep_rest(c, buf, (size_t)nread, used);
    }
    if (c->closing && !c->linger)
        set_reading(c, 0);
    flush(c);
    sd_flush(c->w->dec);
}

/* The waiting command's decision came: its reply, then what was read
 * meanwhile. */
static void resume_cb(void *owner)
{
    rp_conn *c = owner;
    rp_finish(&c->s, &c->ob.out);
    if (!c->closing) {
        run_in(c);
        if (!c->s.waiting && !c->closing && c->ended)
            c->closing = 1; /* the client is done: so is the connection */
        else if (!c->s.waiting && !c->closing && !c->paused)
            set_reading(c, 1);
    }
    flush(c);
}

void rp_accept(sv_listener *l)
{
    sv_worker *w = l->w;
    sv_server *srv = w->server;
    rp_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->l = l;
    c->w = w;
    uv_tcp_init(&w->loop, &c->tcp);
    sv_deadline_init(&w->loop, &c->timer, timer_cb);
    c->tcp.data = c->timer.timer.data = c;
    c->handles_open = 2;
    rp_parser_init(&c->parser);
    rp_session_init(&c->s, w, (int)(l - w->doors), resume_cb, c);
    c->next = l->conns;
    if (c->next)
        c->next->prev = c;
    l->conns = c;
    if (sv_accept(srv, (uv_stream_t *)&l->tcp, &c->tcp) != 0) {
        conn_close(c);
        return;
    }
    sv_deadline_set(&c->timer, srv->cfg.idle_timeout_ms);
    if (sv_reader_start(&w->readers, &c->reader, &c->tcp, read_cb) != 0)
        conn_close(c);
}

/* On stop: idle connections close now; one with a command waiting or
 * replies being written finishes, then closes. */
void rp_close_idle(sv_listener *l)
{
    for (rp_conn *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (!c->s.waiting && !c->partial && c->ob.writes == 0)
            conn_close(c);
    }
    if (sv_worker_quiet(l->w))
        sv_readers_close(&l->w->readers);
}
