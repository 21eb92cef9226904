#!/bin/bash
# The gRPC door against peers that hold its resources (docs/server.md,
# "gRPC", and docs/operations.md, "Limits"): the real daemon on loopback
# ports it picks, driven by the raw HTTP/2 client (tests/grpc/h2raw.py).
#   - A peer that keeps its flow-control window shut never takes its
#     answers: each such stream is reset (CANCEL) after --write-timeout,
#     the connection closes after --idle-timeout, and the slots of
#     --max-connections come back.
#   - Message prefixes that announce the largest message cost what was
#     sent, not what was announced: the daemon's resident memory after
#     thousands of such streams stays within a bound, and falls back once
#     they close.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec /usr/bin/python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, re, socket, sys, tempfile, time

SLUICE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "sh"))
sys.path.insert(0, os.path.join(SRC, "tests", "grpc"))
import harness
from harness import check
from grpcnode import GNode as Node
import h2raw
from h2raw import RLS, rls_request
from hyperframe.frame import SettingsFrame

tmp = tempfile.mkdtemp()
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: test\ndescriptors:\n"
            "  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n")


def GNode(name, *flags):
    return Node(SLUICE, tmp, name, rules, *flags, threads=1)


def shut_window_conn(port):
    """A connection whose peer announces a stream window of 0: the server
    may send HEADERS but no DATA until a WINDOW_UPDATE that never comes."""
    c = h2raw.Conn(port, preface=False)
    c.send(h2raw.PREFACE + SettingsFrame(0, settings={
        SettingsFrame.INITIAL_WINDOW_SIZE: 0}).serialize())
    return c


def refused(port):
    """A new connection is closed at once (over --max-connections)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(h2raw.PREFACE + SettingsFrame(0).serialize())
        s.settimeout(2)
        return s.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        s.close()


def http_status(port):
    """GET /healthz on the HTTP door: its status line's code, or None when
    the connection is closed unanswered (over --max-connections)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(3)
        head = s.recv(100)
        return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else None
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return None
    finally:
        s.close()


try:
    # ---- answers never taken ----
    n = GNode("stall", "--write-timeout", "1s", "--idle-timeout", "2s",
              "--max-connections", "3")
    conns = [shut_window_conn(n.gport) for _ in range(3)]
    sids = [c.call(RLS, rls_request("test", [[("k", "v%d" % i)]]))
            for i, c in enumerate(conns)]
    c0, s0 = conns[0], sids[0]
    c0.wait(lambda: c0.streams[s0].headers is not None, 3)
    check("a shut window: the answer's HEADERS go, not its DATA",
          c0.streams[s0].headers is not None and c0.streams[s0].data == b"",
          vars(c0.streams[s0]))
    check("the connections hold --max-connections: a fourth is refused",
          refused(n.gport))
    check("and the HTTP door, which shares the cap, is refused too",
          http_status(n.port) is None)
    t0 = time.monotonic()
    st = c0.result(s0, 5)
    waited = time.monotonic() - t0
    check("the stream is reset with CANCEL after --write-timeout (%.1f s)" % waited,
          st is not None and st.reset == 8 and not st.ended, st and vars(st))
    for c in conns[1:]:
        c.wait(lambda: False, 0.1)
    ok_closed = [c.wait(lambda: c.closed, 5) for c in conns]
    check("each connection closes after --idle-timeout once its answers "
          "are given up", all(ok_closed), ok_closed)
    check("a GOAWAY precedes the close", all(c.goaways for c in conns),
          [c.goaways for c in conns])
    fresh = h2raw.Conn(n.gport)
    sid = fresh.call(RLS, rls_request("test", [[("k", "after")]]))
    st = fresh.result(sid, 5)
    check("the slots are free again: a new call is answered",
          st is not None and st.grpc_status() == 0, st and vars(st))
    check("and the HTTP door answers again", http_status(n.port) == 200)

    # A peer that opens its window late still gets its answer whole.
    late = shut_window_conn(n.gport)
    sid = late.call(RLS, rls_request("test", [[("k", "late")]]))
    late.wait(lambda: late.streams[sid].headers is not None, 3)
    time.sleep(0.3)
    late.send(h2raw.WindowUpdateFrame(sid, window_increment=65535).serialize())
    st = late.result(sid, 3)
    check("a window opened within --write-timeout: the answer arrives",
          st is not None and st.ended and st.grpc_status() == 0 and
          st.message() is not None, st and vars(st))
    late.sock.close()
    fresh.sock.close()
    check("exits 0 on SIGTERM", n.stop() == 0, open(n.log).read()[-2000:])

    # ---- announced sizes cost nothing ----
    m = GNode("prefix", "--max-connections", "1000")
    # Warm: one call, so that the loop's buffers are made.
    w = h2raw.Conn(m.gport)
    st = w.result(w.call(RLS, rls_request("test", [[("k", "warm")]])), 5)
    check("warm call answered", st is not None and st.grpc_status() == 0)
    base = harness.rss_kb(m.p.pid)
    base_data = harness.rss_kb(m.p.pid, "VmData")
    CONNS, STREAMS, WAVES = 40, 100, 3
    # (A sanitizer's allocator keeps what is freed: its runs skip the
    # bounds, SL_TEST_QUICK.)
    quick = os.environ.get("SL_TEST_QUICK") == "1"
    for wave in range(WAVES):
        # Each prefix announces 65536 bytes (the cap); one comes.
        peers = h2raw.announcing_conns(m.gport, CONNS, STREAMS)
        time.sleep(0.5)
        held = harness.rss_kb(m.p.pid)
        data = (harness.rss_kb(m.p.pid, "VmData") - base_data) / 1024
        grown = (held - base) / 1024
        print("wave %d: resident %d kB before, %d kB with %d streams holding "
              "a prefix (+%.1f MB), allocated +%.1f MB"
              % (wave, base, held, CONNS * STREAMS, grown, data), flush=True)
        # Announced, those streams would take 40 * 100 * 64 KiB = 256 MiB
        # of allocations (VmData +254 MB when they were allocated as
        # announced, whatever of it was touched).
        if not quick:
            check("wave %d: %d streams each announcing 64 KiB allocate under "
                  "32 MB (+%.1f MB) and add under 24 MB resident (+%.1f MB)"
                  % (wave, CONNS * STREAMS, data, grown),
                  data < 32 and grown < 24, (data, grown))
        for c in peers:
            c.sock.close()
        time.sleep(1.0)
    after = harness.rss_kb(m.p.pid)
    print("resident after %d waves closed: %d kB (+%.1f MB over the start)"
          % (WAVES, after, (after - base) / 1024), flush=True)
    # Allocated as announced, each wave left ~13 MB resident (38 MB
    # after three).
    if not quick:
        check("after %d waves, resident memory is within 12 MB of the start"
              % WAVES, (after - base) / 1024 < 12, (after - base) / 1024)
    # The door still answers a message that does arrive whole, split.
    st = w.result(w.call(RLS, rls_request("test", [[("k", "split" * 500)]]), split=7), 5)
    check("a message in 7-byte DATA frames is still answered",
          st is not None and st.grpc_status() == 0, st and vars(st))
    w.sock.close()
    check("exits 0 on SIGTERM", m.stop() == 0, open(m.log).read()[-2000:])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
