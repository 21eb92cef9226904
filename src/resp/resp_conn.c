/*
 * resp_conn.c - one Redis protocol connection: reads, commands parsed and run
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
 * and SV_MAX_PENDING_OUTPUT of replies the client has not read: past it
 * no further command runs, and reading stops, until half is written).  Clients that want decisions in parallel open
 * connections, as with Redis.
 *
 * Timeouts: a command must arrive whole within --read-timeout of its
 * first byte; an idle connection closes after --idle-timeout.
 *
 * A protocol error is answered, then the connection closes lingering
 * (conn.h): what the client still sends is read and dropped until it
 * stops, because closing with unread bytes makes the kernel send a
 * reset, which can destroy the error reply before the client reads it.
 *
 * The connection's life (accept, caps, reading, output and its
 * backpressure, close) is the connection machine's (runtime/conn.c).
 */
#include <string.h>

#include "resp/command.h"
#include "resp/parse.h"
#include "resp/resp_reply.h"
#include "resp/resp.h"
#include "runtime/conn.h"

/* Bytes read ahead of a waiting command before reading stops. */
#define IN_AHEAD_MAX (64 * 1024)

typedef struct rp_conn {
    sv_conn c; /* first: the machine's connection is ours */
    rp_parser parser;
    sv_buf in;   /* a command cut by a read; what follows a wait */
    int partial; /* `in` starts with a command not yet whole */
    int linger;  /* closing after a protocol error */
    int ended;   /* the client's end came while a command waited */
    rp_session s;
} rp_conn;

/* After the commands of a read: closes when they said so, sends their
 * replies. */
static void flush(rp_conn *c)
{
    if (c->c.ob.out.failed) {
        /* A reply could not be built whole: the client cannot tell where
         * it ends, so nothing more goes out. */
        c->c.ob.out.len = 0;
        c->c.ob.out.failed = 0;
        c->c.closing = 1;
    }
    if (c->c.closing)
        sv_conn_finish(&c->c, c->linger);
    sv_conn_flush(&c->c);
}

static void timeout(sv_conn *conn)
{
    sv_conn_close(conn);
}

/* Replies the client has not read fill SV_MAX_PENDING_OUTPUT: the
 * commands after wait in `in` (and reading stops, the machine's
 * backpressure) until half of it is written, so that a client that
 * pipelines without reading costs at most that, whatever one read holds
 * (a 9-byte COMMAND has an 842-byte reply). */
static int out_full(const rp_conn *c)
{
    return c->c.ob.out.len + c->c.ob.pending >= SV_MAX_PENDING_OUTPUT;
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
    while (off < len && !c->c.closing && !c->s.waiting && !out_full(c)) {
        char *cmd = buf + off;
        int rc = rp_parse(&c->parser, cmd, len - off);
        if (rc == RP_MORE)
            break;
        if (rc == RP_ERROR) {
            /* As Redis: the error, then the connection closes. */
            rp_add_error(&c->c.ob.out, c->parser.err);
            rp_count(&c->s, 1);
            c->c.closing = c->linger = 1;
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
        rc = rp_run(&c->s, argv, argc, &c->c.ob.out);
        if (rc == RP_CLOSE)
            c->c.closing = 1;
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
        c->c.closing = 1;
    }
    /* A command begun starts the read timeout; only a command's end
     * starts it again, so trickling a command's bytes does not keep a
     * connection alive, while one that keeps completing commands
     * (pipelining, each read ending inside the next) is never cut. */
    const sv_config *cfg = &c->c.w->server->cfg;
    int partial = c->in.len > 0 && !c->s.waiting && !out_full(c);
    if (partial && (!c->partial || used > 0))
        sv_deadline_set(&c->c.timer, cfg->read_timeout_ms);
    else if (!partial && !c->s.waiting)
        sv_deadline_set(&c->c.timer, cfg->idle_timeout_ms);
    c->partial = partial;
}

/* Parses and runs what c->in holds. */
static void run_in(rp_conn *c)
{
    size_t used = run_commands(c, c->in.data, c->in.len);
    keep_rest(c, c->in.data, c->in.len, used);
}

/* Sends the replies, and while that leaves the output under half full
 * and commands held back by it remain in `in`, runs them and sends
 * theirs: a write the kernel takes at once has no completion to wait
 * for (on_written). */
static void flush_more(rp_conn *c)
{
    flush(c);
    while (!sv_conn_gone(&c->c) && c->in.len > 0 && !c->s.waiting &&
           !c->c.closing &&
           c->c.ob.out.len + c->c.ob.pending < SV_MAX_PENDING_OUTPUT / 2) {
        size_t before = c->in.len;
        run_in(c);
        flush(c);
        if (c->in.len == before)
            break; /* a command not yet whole: more must come */
    }
}

static void on_read(sv_conn *conn, ssize_t nread, const char *data)
{
    rp_conn *c = (rp_conn *)conn;
    if (c->c.closing)
        return; /* the replies go out, then the close */
    if (nread < 0) {
        if (c->s.waiting) {
            c->ended = 1; /* the waiting command is answered first */
            sv_conn_set_reading(&c->c, 0);
            return;
        }
        c->c.closing = 1;
        flush(c);
        return;
    }
    if (c->s.waiting || c->in.len > 0) {
        sv_buf_add(&c->in, data, (size_t)nread);
        if (!c->s.waiting)
            run_in(c);
        else if (c->in.len > IN_AHEAD_MAX)
            sv_conn_set_reading(&c->c, 0);
        if (c->in.failed)
            c->c.closing = 1;
    } else {
        /* The thread's buffer is this thread's alone until the callback
         * returns: an inline command is unquoted in place there. */
        char *buf = (char *)data;
        size_t used = run_commands(c, buf, (size_t)nread);
        keep_rest(c, buf, (size_t)nread, used);
    }
    sd_thread *dec = c->c.w->dec;
    flush_more(c);
    sd_flush(dec);
}

/* The waiting command's decision came: its reply, then what was read
 * meanwhile. */
static void resume_cb(void *owner)
{
    rp_conn *c = owner;
    rp_finish(&c->s, &c->c.ob.out);
    if (!c->c.closing) {
        run_in(c);
        if (!c->s.waiting && !c->c.closing && c->ended && !out_full(c))
            c->c.closing = 1; /* the client is done: so is the connection */
        else if (!c->s.waiting && !c->c.closing)
            sv_conn_set_reading(&c->c, 1);
    }
    flush_more(c);
}

static int on_open(sv_conn *conn, void *arg)
{
    rp_conn *c = (rp_conn *)conn;
    sv_listener *l = arg;
    rp_parser_init(&c->parser);
    rp_session_init(&c->s, l->w, (int)(l - l->w->doors), resume_cb, c);
    return 0;
}

static void on_closing(sv_conn *conn)
{
    rp_session_release(&((rp_conn *)conn)->s); /* a waiting command is given up */
}

static void on_release(sv_conn *conn)
{
    rp_conn *c = (rp_conn *)conn;
    sv_buf_release(&c->in);
    rp_parser_release(&c->parser);
}

/* Replies went out: the commands held back by a full output run now. */
static void on_written(sv_conn *conn)
{
    rp_conn *c = (rp_conn *)conn;
    sd_thread *dec = c->c.w->dec;
    if (c->in.len == 0 || c->s.waiting || c->c.closing)
        return;
    flush_more(c);
    sd_flush(dec);
}

/* On stop: one with a command waiting or begun finishes, then closes. */
static int is_idle(sv_conn *conn)
{
    rp_conn *c = (rp_conn *)conn;
    return !c->s.waiting && !c->partial && c->c.ob.writes == 0;
}

static const sv_conn_type rp_conn_type = {
    .size = sizeof(rp_conn),
    .max_pending = SV_MAX_PENDING_OUTPUT,
    .keep_out = 64 * 1024,
    .open = on_open,
    .read = on_read,
    .timeout = timeout,
    .written = on_written,
    .closing = on_closing,
    .release = on_release,
    .idle = is_idle,
    .plaintext_answer = "-ERR this port speaks TLS\r\n",
};

void rp_accept(sv_listener *l)
{
    sv_conn_accept(l->w, (uv_stream_t *)&l->tcp, &l->conns, &rp_conn_type, l);
}

void rp_close_idle(sv_listener *l)
{
    sv_conn_close_idle(l->w, &l->conns);
}
