#!/bin/bash
# Integration test of `sluice serve --nodes auto`: four daemons share a
# real redis-server and count each other through it (sluice_nodes_live,
# /readyz); one stops and leaves the count after its TTL; then Redis is
# killed and each of the three left decides on its embedded store with
# the limit divided by 3, checked exactly.  Every wait is bounded.
# Before that, while Redis is up: pipelined requests that wait on Redis
# (the connection reads on while one waits) are answered in order, and a
# client that half-closes after its request still gets the answer.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, signal, socket, sys, tempfile, time

sys.path.insert(0, os.path.join(sys.argv[2], "tests/sh"))
import harness
from harness import check, wait_until

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()

L = 30  # divisible by 3: the local limit is exactly 10
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: test\ndescriptors:\n  - key: k\n    rate_limit: "
            "{algorithm: fixed_window, unit: hour, requests_per_unit: %d}\n" % L)

class Node(harness.Node):
    def __init__(self, name, *flags):
        super().__init__(SLUICE, tmp, name, rules, "--threads", "2",
                         "--redis-timeout", "100ms", "--redis-failure", "local",
                         *flags)

    def one(self, value):
        """POST /v1/check of k=value: (status, X-RateLimit-Limit)."""
        status, _, hdrs, _ = self.check("k", value)
        return status, hdrs.get("X-RateLimit-Limit")

    def live(self):
        v = self.metric("sluice_nodes_live")
        return None if v is None else int(v)

    def readyz(self):
        return json.loads(self.get("/readyz")[1])

try:
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    nodes = [Node("n%d" % i, "--store", store, "--nodes", "auto") for i in range(4)]
    static = Node("static", "--store", store, "--nodes", "2")

    # Pipelined: five requests, one waiting on Redis at a time, the rest
    # read ahead; five answers, in order, each consumed.  Redis is paused
    # (well within this node's timeout) while they are sent one write at
    # a time, so four arrive while the first waits.
    pipe = Node("pipe", "--store", store, "--redis-timeout", "5s", "--nodes", "1")
    check("pipe node connects", wait_until(lambda: pipe.readyz().get("store_status") == "up", 10))
    req = lambda v: ('POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s'
                     % (len(v), v))
    body = lambda v: json.dumps({"domain": "test", "descriptors":
                                 [{"entries": [{"key": "k", "value": v}]}]})
    s = socket.create_connection(("127.0.0.1", pipe.port), 5)
    redis.proc.send_signal(signal.SIGSTOP)
    for _ in range(5):
        s.sendall(req(body("pipe")).encode())
        time.sleep(0.02)
    redis.proc.send_signal(signal.SIGCONT)
    data = b""
    while data.count(b"HTTP/1.1 ") < 5 or not data.endswith(b"}\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    rem = [int(m) for m in re.findall(rb'"remaining":(\d+)', data)]
    check("pipelined requests waiting on Redis answered in order",
          rem == [L - 1, L - 2, L - 3, L - 4, L - 5], data[-400:])
    # Half-closed after the request: the answer still comes.
    s = socket.create_connection(("127.0.0.1", nodes[1].port), 5)
    s.sendall(req(body("half")).encode())
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    check("a half-closed client gets its answer", b'"overall":"OK"' in data, data[-300:])

    check("4 nodes with --nodes auto count each other",
          wait_until(lambda: all(n.live() == 4 for n in nodes), 10),
          [n.live() for n in nodes])
    r = nodes[0].readyz()
    check("/readyz shows nodes_live", r.get("nodes_live") == 4, r)
    check("a static --nodes 2 is not counted and shows 2", static.live() == 2,
          static.live())

    # A stopped node is no longer stamped: gone from the count after its
    # TTL (3 s), not at once.
    check("stopped node exits 0", nodes[3].stop() == 0)
    left = nodes[:3]
    check("still counted just after it stopped", left[0].live() == 4, left[0].live())
    check("the stopped node leaves the count after its TTL",
          wait_until(lambda: all(n.live() == 3 for n in left), 12),
          [n.live() for n in left])

    # Redis gone: each node decides alone with the limit divided by the
    # last count, 30 / 3 = 10, exactly.
    redis.kill()
    for n in left:
        res = [n.one("outage") for _ in range(15)]
        allowed = sum(1 for s, _ in res if s == 200)
        check("%s: local fallback allows exactly %d of 15 (limit %d / 3 live)"
              % (n.name, L // 3, L),
              allowed == L // 3 and all(s in (200, 429) for s, _ in res) and
              set(h for _, h in res) == {str(L // 3)}, res)
        check("%s: the last count stands while Redis is down" % n.name,
              n.live() == 3 and n.readyz().get("nodes_live") == 3, n.live())
    harness.check_exit(left + [static, pipe])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
