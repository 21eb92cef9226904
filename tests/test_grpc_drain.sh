#!/bin/bash
# The gRPC door's drain always ends (docs/server.md, "gRPC"): `sluice
# serve --store redis:// --grpc-listen --threads 1` with a call waiting
# on a paused redis-server, then SIGTERM, then a Health/Check opened on a
# new stream of the same connection between the GOAWAY notice and the
# last GOAWAY, then Redis resumed: both calls are answered, the
# connection closes, and the process exits 0 at once (within 3 s); the same after a
# Redis restart; and with Redis never resumed, the process exits 0 once
# --read-timeout has passed.  The raw HTTP/2 client (tests/grpc/h2raw.py)
# times each frame; grpc-js would open a new connection instead.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec /usr/bin/python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, re, signal, subprocess, sys, tempfile, time

SLUICE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "sh"))
sys.path.insert(0, os.path.join(SRC, "tests", "grpc"))
import harness
from harness import check
from grpcnode import GNode
import h2raw
from h2raw import RLS, HEALTH, rls_request, health_request
from hyperframe.frame import PingFrame

tmp = tempfile.mkdtemp()
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: test\ndescriptors:\n"
            "  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n")


def scenario(label, restart_before, resume):
    redis = harness.Redis()
    redis.start()
    node = GNode(SLUICE, tmp, label, rules, "--store",
                 "redis://127.0.0.1:%d" % redis.port, "--redis-timeout", "10s",
                 "--read-timeout", "2s", threads=1)
    gport = node.gport
    c = h2raw.Conn(gport, auto_ping=False)
    st = c.result(c.call(RLS, rls_request("test", [[("k", "a")]])), 5)
    check("%s: a call before" % label, st is not None and st.grpc_status() == 0,
          st and vars(st))
    if restart_before:
        redis.kill()
        redis.start()
        ok = harness.wait_until(lambda: node.store_status() == "up", 8)
        st = c.result(c.call(RLS, rls_request("test", [[("k", "b")]])), 5)
        check("%s: Redis restarted, a call answered" % label,
              ok and st is not None and st.grpc_status() == 0, st and vars(st))
    redis.proc.send_signal(signal.SIGSTOP)
    waiting = c.call(RLS, rls_request("test", [[("k", "c")]]))
    c.pump(0.3)
    node.p.send_signal(signal.SIGTERM)
    c.wait(lambda: c.goaways and c.pings, 3)
    notice = c.goaways[:1] == [(2**31 - 1, 0)]
    health = c.call(HEALTH, health_request(""))  # after the notice
    c.send(PingFrame(0, c.pings[-1], flags=["ACK"]).serialize())
    c.wait(lambda: len(c.goaways) >= 2, 3)
    check("%s: the GOAWAY notice, then the last GOAWAY naming the Health/Check"
          % label, notice and c.goaways[-1] == (health, 0), c.goaways)
    time.sleep(0.3)
    if resume:
        redis.proc.send_signal(signal.SIGCONT)
    st = c.result(waiting, 5)
    hs = c.result(health, 5)
    if resume:
        check("%s: the waiting call is answered" % label,
              st is not None and st.grpc_status() == 0, st and vars(st))
    else:
        check("%s: the waiting call ends at the drain's deadline" % label,
              st is not None or c.closed, st and vars(st))
    check("%s: the Health/Check is answered SERVING" % label,
          hs is not None and hs.grpc_status() == 0, hs and vars(hs))
    c.wait(lambda: c.closed, 5)
    closed_at = time.monotonic()
    check("%s: the connection closes" % label, c.closed)
    try:
        rc = node.p.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
    late = time.monotonic() - closed_at
    # The bound leaves room for a sanitizer build's exit; a drain that
    # does not end is seconds late, or never ends.
    check("%s: exit 0 within 3 s of the close (%.2f s)" % (label, late),
          rc == 0 and late < 3.0, "status %s; %s" % (rc, open(node.log).read()[-1500:]))
    if not resume:
        redis.proc.send_signal(signal.SIGCONT)
    redis.kill()


try:
    scenario("paused", restart_before=False, resume=True)
    scenario("restarted", restart_before=True, resume=True)
    scenario("never resumed", restart_before=False, resume=False)
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
