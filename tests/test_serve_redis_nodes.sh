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
if ! command -v redis-server >/dev/null; then
  echo "FAIL redis-server is not installed (scripts/deps.sh installs it)"
  exit 1
fi
exec python3 - "$SLUICE" <<'PY'
import json, os, re, signal, socket, subprocess, sys, tempfile, time
import urllib.request, urllib.error

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
procs = []
failed = 0

def check(name, cond, why=""):
    global failed
    if cond:
        print("PASS", name, flush=True)
    else:
        failed = 1
        print("FAIL", name + ":", why, flush=True)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

L = 30  # divisible by 3: the local limit is exactly 10
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: test\ndescriptors:\n  - key: k\n    rate_limit: "
            "{algorithm: fixed_window, unit: hour, requests_per_unit: %d}\n" % L)

class Node:
    def __init__(self, name, *flags):
        self.name = name
        self.log = os.path.join(tmp, name + ".log")
        self.p = subprocess.Popen(
            [SLUICE, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
             "--threads", "2", "--redis-timeout", "100ms",
             "--redis-failure", "local"] + list(flags),
            stderr=open(self.log, "w"))
        procs.append(self.p)
        self.port = None
        for _ in range(200):
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(self.log).read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.025)
        if self.port is None:
            raise SystemExit("node %s did not start" % name)

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                        timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def check(self, value):
        body = {"domain": "test", "descriptors": [{"entries": [{"key": "k", "value": value}]}]}
        req = urllib.request.Request("http://127.0.0.1:%d/v1/check" % self.port,
                                     json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.headers.get("X-RateLimit-Limit")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("X-RateLimit-Limit")

    def live(self):
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith("sluice_nodes_live "):
                return int(line.split()[1])
        return None

    def readyz(self):
        return json.loads(self.get("/readyz")[1])

def wait_for(cond, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()

try:
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(redis)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.025)
    store = "redis://127.0.0.1:%d" % port
    nodes = [Node("n%d" % i, "--store", store, "--nodes", "auto") for i in range(4)]
    static = Node("static", "--store", store, "--nodes", "2")

    # Pipelined: five requests, one waiting on Redis at a time, the rest
    # read ahead; five answers, in order, each consumed.  Redis is paused
    # (well within this node's timeout) while they are sent one write at
    # a time, so four arrive while the first waits.
    pipe = Node("pipe", "--store", store, "--redis-timeout", "5s")
    check("pipe node connects", wait_for(lambda: pipe.readyz().get("store_status") == "up", 10))
    req = lambda v: ('POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s'
                     % (len(v), v))
    body = lambda v: json.dumps({"domain": "test", "descriptors":
                                 [{"entries": [{"key": "k", "value": v}]}]})
    s = socket.create_connection(("127.0.0.1", pipe.port), 5)
    redis.send_signal(signal.SIGSTOP)
    for _ in range(5):
        s.sendall(req(body("pipe")).encode())
        time.sleep(0.02)
    redis.send_signal(signal.SIGCONT)
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
          wait_for(lambda: all(n.live() == 4 for n in nodes), 10),
          [n.live() for n in nodes])
    r = nodes[0].readyz()
    check("/readyz shows nodes_live", r.get("nodes_live") == 4, r)
    check("a static --nodes 2 is not counted and shows 2", static.live() == 2,
          static.live())

    # A stopped node is no longer stamped: gone from the count after its
    # TTL (3 s), not at once.
    nodes[3].p.send_signal(signal.SIGTERM)
    check("stopped node exits 0", nodes[3].p.wait(10) == 0)
    left = nodes[:3]
    check("still counted just after it stopped", left[0].live() == 4, left[0].live())
    check("the stopped node leaves the count after its TTL",
          wait_for(lambda: all(n.live() == 3 for n in left), 8),
          [n.live() for n in left])

    # Redis gone: each node decides alone with the limit divided by the
    # last count, 30 / 3 = 10, exactly.
    redis.kill()
    redis.wait()
    for n in left:
        res = [n.check("outage") for _ in range(15)]
        allowed = sum(1 for s, _ in res if s == 200)
        check("%s: local fallback allows exactly %d of 15 (limit %d / 3 live)"
              % (n.name, L // 3, L),
              allowed == L // 3 and all(s in (200, 429) for s, _ in res) and
              set(h for _, h in res) == {str(L // 3)}, res)
        check("%s: the last count stands while Redis is down" % n.name,
              n.live() == 3 and n.readyz().get("nodes_live") == 3, n.live())
    for n in left + [static, pipe]:
        n.p.send_signal(signal.SIGTERM)
        check("%s exits 0 on SIGTERM" % n.name, n.p.wait(10) == 0,
              open(n.log).read()[-2000:])
finally:
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
sys.exit(failed)
PY
