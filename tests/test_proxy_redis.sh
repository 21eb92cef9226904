#!/bin/bash
# Integration test of `sluice proxy --store redis://...`: a real
# redis-server on a free loopback port, several proxies sharing it in
# front of a test upstream (tests/proxy/upstream.py: it logs every request
# it saw with its body's SHA-256), many concurrent clients, and Redis
# paused, killed and restarted under them.  Every wait is bounded, so a hang
# fails the test; everything started is killed in python's finally.
#
# SL_REDIS_TIMEOUT_MS (default 50) is the proxies' --redis-timeout; no
# request may wait longer than it plus SL_MARGIN_MS (default 300) when
# Redis is down.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import hashlib, http.client, json, os, re, shlex, signal, socket, struct
import subprocess, sys, tempfile, time

SLUICE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests/sh"))
import harness
from harness import check, free_port

TIMEOUT_MS = int(os.environ.get("SL_REDIS_TIMEOUT_MS", "50"))
MARGIN_MS = int(os.environ.get("SL_MARGIN_MS", "300"))
QUICK = os.environ.get("SL_TEST_QUICK") == "1"
CONFIG = os.path.join(SRC, "tests/proxy/redis.yaml")
RULES = os.path.join(SRC, "tests/proxy/redis_rules.yaml")
L = 20
tmp = tempfile.mkdtemp()

# The upstream (tests/proxy/upstream.py) logs every request it saw before
# it answers: (time, path, X-Api-Key, body SHA-256) from its log.
UP_PORT = free_port()
UP_LOG = os.path.join(tmp, "upstream.log")

def seen():
    out = []
    for line in open(UP_LOG):
        f = line.split()
        out.append((float(f[0]), f[2], f[3][len("key="):], f[-1][len("sha="):]))
    return out

def arrivals(prefix):
    return [s for s in seen() if s[1].startswith(prefix)]

redis = harness.Redis()
STORE = "redis://127.0.0.1:%d" % redis.port

class Proxy(harness.Daemon):
    """A proxy of tests/proxy/redis.yaml; argv replaces its arguments."""
    def __init__(self, name, *flags, config=CONFIG, threads=2, argv=None):
        if argv is None:
            argv = ["--config", config, "--rules", RULES,
                    "--upstream", "http://127.0.0.1:%d" % UP_PORT,
                    "--threads", str(threads),
                    "--redis-timeout", "%dms" % TIMEOUT_MS] + list(flags)
        # Its metrics on a listener of their own (docs/proxy.md, "Metrics").
        super().__init__(name, [SLUICE, "proxy"] + argv +
                         ["--metrics-listen", "127.0.0.1:0"], tmp)
        self.metrics_port = self.door_port("metrics")

    def req(self, path, headers=None, body=None, method=None, chunked=False, port=None):
        """(status, headers, body, seconds); status 0 when the connection broke."""
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=10)
        t0 = time.monotonic()
        try:
            c.request(method or ("POST" if body is not None else "GET"), path,
                      body=body, headers=headers or {}, encode_chunked=chunked)
            r = c.getresponse()
            data = r.read()
            return r.status, r.headers, data, time.monotonic() - t0
        except (OSError, http.client.HTTPException) as e:
            return 0, {}, str(e).encode(), time.monotonic() - t0
        finally:
            c.close()

    def metric(self, name):
        return harness.metric(self.req("/metrics", port=self.metrics_port)[2].decode(), name)

    def wait_up(self):
        return harness.wait_until(lambda: self.metric("sluice_store_up") == 1)

def storm(proxies, path, headers, n, workers=24):
    """n concurrent requests spread over proxies; the results in a list."""
    return harness.storm(lambda i: proxies[i % len(proxies)].req(path, headers), n, workers)

harness.procs.append(subprocess.Popen(
    [sys.executable, os.path.join(SRC, "tests/proxy/upstream.py"), str(UP_PORT), UP_LOG]))
harness.wait_port(UP_PORT)

# docs/proxy.md's examples ("Redis store"), their ports substituted.
DOC = open(os.path.join(SRC, "docs/proxy.md")).read()
def doc_block(mark, lang):
    m = re.search(r"<!-- %s:[^>]*-->\s*```%s\n(.*?)```" % (mark, lang), DOC, re.S)
    if m is None:
        raise SystemExit("docs/proxy.md: no %s block" % mark)
    return m.group(1).replace("6379", str(redis.port)).replace("9000", str(UP_PORT))

try:
    redis.start()
    # p0 reads the store settings from its config file (docs/proxy.md's
    # example; --redis-timeout given as a flag overrides it), the others
    # from the flags.
    cfg0 = os.path.join(tmp, "p0.yaml")
    with open(cfg0, "w") as f:
        f.write(open(CONFIG).read() + doc_block("proxy-redis-config", "yaml"))
    # Their decisions are counted: a generous timeout, and fail_closed,
    # so that a call a loaded machine lets time out shows as a 503
    # rather than passing as a decision of the fallback.
    counted = ("--redis-timeout", "2s", "--redis-failure", "fail_closed")
    proxies = [Proxy("p0", *counted, config=cfg0)] + [
        Proxy("p%d" % i, "--store", STORE, *counted) for i in (1, 2)]
    for p in proxies:
        check("%s connects (sluice_store_up 1)" % p.name, p.wait_up())

    # Exactly L forwarded over three proxies and six threads, per
    # algorithm; the others get 429 with the headers and never reach
    # the upstream.
    N = 3 * L if QUICK else 6 * L
    for a in ["token_bucket", "gcra", "fixed_window", "sliding_log",
              "sliding_window", "stepped_window"]:
        res = storm(proxies, "/alg/" + a, {"X-Alg": a}, N)
        ok200 = [r for r in res if r[0] == 200]
        lim = [r for r in res if r[0] == 429]
        reached = len(arrivals("/alg/" + a))
        check("%s: exactly %d of %d forwarded over 3 proxies" % (a, L, N),
              len(ok200) == L and len(lim) == N - L and reached == L,
              "200: %d, 429: %d, upstream saw %d, others %s" % (
                  len(ok200), len(lim), reached,
                  sorted(set(r[0] for r in res) - {200, 429})))
        good = all(r[1].get("X-RateLimit-Limit") == str(L) and r[1].get("Retry-After")
                   and r[1].get("RateLimit-Policy")
                   and json.loads(r[2])["error"]["code"] == "rate_limited"
                   for r in lim)
        good = good and all(r[1].get("X-RateLimit-Limit") == str(L) for r in ok200)
        check("%s: 429s carry the rate-limit headers and body" % a, good,
              lim[0][1] if lim else "")

    # A request body waits with its request and is forwarded intact:
    # 1 MiB (more than the proxy reads ahead while the decision waits)
    # with Content-Length, and 300 KiB chunked.
    big = os.urandom(1 << 20)
    s, _, _, _ = proxies[1].req("/api/body", {"X-Api-Key": "body-cl"}, big)
    got = [x for x in arrivals("/api/body") if x[2] == "body-cl"]
    check("a 1 MiB body is forwarded intact after the wait on Redis",
          s == 200 and len(got) == 1 and got[0][3] == hashlib.sha256(big).hexdigest(),
          (s, got))
    chunks = [os.urandom(100 * 1024) for _ in range(3)]
    s, _, _, _ = proxies[2].req("/api/body", {"X-Api-Key": "body-chunked"},
                                iter(chunks), chunked=True)
    got = [x for x in arrivals("/api/body") if x[2] == "body-chunked"]
    check("a chunked body is forwarded intact after the wait on Redis",
          s == 200 and len(got) == 1 and
          got[0][3] == hashlib.sha256(b"".join(chunks)).hexdigest(), (s, got))

    # Pipelined requests on one connection: each waits on Redis in turn
    # and the responses come back in order.
    sk = socket.create_connection(("127.0.0.1", proxies[0].port), 10)
    sk.sendall(b"".join(b"GET /api/pipe%d HTTP/1.1\r\nHost: x\r\nX-Api-Key: pipe\r\n\r\n" % i
                        for i in range(3)))
    sk.settimeout(10)
    data = b""
    while data.count(b"upstream /api/pipe") < 3:
        piece = sk.recv(65536)
        if not piece:
            break
        data += piece
    sk.close()
    order = re.findall(rb"upstream /api/pipe(\d)", data)
    check("pipelined requests are answered in order", order == [b"0", b"1", b"2"], data[:300])

    # Queueing: 10 at once over the three proxies against one leaky
    # bucket of 10 a second decided on Redis: all forwarded, and the
    # upstream sees them at the shared rate whichever proxy held them:
    # the i-th never ahead of 100 ms * i after the first (a loaded or
    # sanitized proxy may be late, never early; 80 ms of slack for the
    # first one's own lateness).
    res = storm(proxies, "/queue/q", {}, 10, workers=10)
    times = sorted(x[0] for x in arrivals("/queue/q"))
    ahead = [i for i, t in enumerate(times) if t - times[0] < 0.1 * i - 0.08]
    check("queueing: a burst of 10 over 3 proxies reaches the upstream at the shared rate",
          all(r[0] == 200 for r in res) and len(times) == 10 and not ahead
          and 0.8 <= times[-1] - times[0] <= 1.6,
          "statuses %s, after the first (ms) %s" % (
              [r[0] for r in res], [round((t - times[0]) * 1000) for t in times]))

    # The failure policies, one proxy each; `slow` waits 2 s on Redis.
    local = Proxy("local", "--store", STORE, "--redis-failure", "local", "--nodes", "3")
    fopen = Proxy("open", "--store", STORE, "--redis-failure", "fail_open")
    fclosed = Proxy("closed", "--store", STORE, "--redis-failure", "fail_closed")
    slow = Proxy("slow", "--store", STORE, "--redis-timeout", "2s", threads=1)
    pol = [local, fopen, fclosed]
    for p in pol + [slow]:
        p.wait_up()
    bound = (TIMEOUT_MS + MARGIN_MS) / 1000.0

    def under_outage(label):
        before = len(seen())
        def one(i):
            p = pol[i % 3]
            return p, p.req("/api/x", {"X-Api-Key": "out-%s-%d" % (label, i % 5)})
        res = harness.storm(one, 60 if QUICK else 150)
        harness.check_bound(label, [r[1][3] for r in res], bound)
        by = {p.name: [r[1] for r in res if r[0] is p] for p in pol}
        closed_ok = all(s == 503 and json.loads(b)["error"]["code"] == "ESTORE"
                        for s, _, b, _ in by["closed"])
        leaked = [x for x in seen()[before:] if x[1] == "/api/x"]
        check("%s: fail_closed answers 503 ESTORE, not 429" % label, closed_ok,
              sorted(set(s for s, _, _, _ in by["closed"])))
        check("%s: fail_open forwards" % label,
              all(s == 200 for s, _, _, _ in by["open"]),
              sorted(set(s for s, _, _, _ in by["open"])))
        lim = set(h.get("X-RateLimit-Limit") for _, h, _, _ in by["local"])
        allowed = sum(1 for s, _, _, _ in by["local"] if s == 200)
        check("%s: local decides on the embedded store, limit %d / 3 proxies" % (label, L),
              lim == {str(L // 3)} and all(s in (200, 429) for s, _, _, _ in by["local"])
              and allowed == min(len(by["local"]), 5 * (L // 3)),
              (lim, allowed, sorted(set(s for s, _, _, _ in by["local"]))))
        check("%s: the upstream saw exactly the allowed requests" % label,
              len(leaked) == len(by["open"]) + allowed, (len(leaked), len(by["open"]), allowed))
        s1 = fopen.req("/strict/x")[0]
        s2 = fclosed.req("/lenient/x")[0]
        check("%s: a rule's store_failure overrides --redis-failure" % label,
              s1 == 503 and s2 == 200,
              "strict on fail_open: %d, lenient on fail_closed: %d" % (s1, s2))

    # SIGSTOP: Redis accepts nothing; timeouts, then the breaker.
    redis.proc.send_signal(signal.SIGSTOP)
    under_outage("paused")
    # The storm may be over before a thread has seen --redis-breaker whole
    # timeouts of silence; one request at a time to each proxy keeps the
    # silence going until every proxy answers from an open breaker.
    def opened(p):
        return (p.metric('sluice_store_failures_total{reason="breaker_open"}') or 0) > 0
    harness.wait_until(lambda: [p.req("/api/x", {"X-Api-Key": "silence"}) for p in pol]
                       and all(opened(p) for p in pol), 10)
    t = [p.metric('sluice_store_failures_total{reason="timeout"}') or 0 for p in pol]
    o = [p.metric('sluice_store_failures_total{reason="breaker_open"}') or 0 for p in pol]
    check("paused: on every proxy timeouts counted %s, then the breaker opened %s" % (t, o),
          all(t) and all(o))

    # Clients that go away while their decision waits (slow: 2 s): reset
    # or closed, their op is cancelled and nothing reaches the upstream.
    socks = []
    for i in range(6):
        sk = socket.create_connection(("127.0.0.1", slow.port), 5)
        if i % 2 == 0:  # close() sends a reset
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sk.sendall(b"POST /api/gone HTTP/1.1\r\nHost: x\r\nX-Api-Key: gone\r\n"
                   b"Content-Length: 5\r\n\r\nhello")
        socks.append(sk)
    time.sleep(0.3)
    for sk in socks:
        sk.close()
    redis.proc.send_signal(signal.SIGCONT)
    check("SIGCONT: every proxy recovers by itself",
          all(p.wait_up() for p in pol + proxies + [slow]),
          [p.metric("sluice_store_up") for p in pol + proxies + [slow]])
    time.sleep(2.5)  # past the slow proxy's timeout
    check("clients gone while waiting: nothing forwarded", not arrivals("/api/gone"),
          arrivals("/api/gone"))
    s = slow.req("/api/after", {"X-Api-Key": "after"})[0]
    check("clients gone while waiting: the proxy goes on",
          s == 200 and slow.p.poll() is None, (s, open(slow.log).read()[-1500:]))

    # Kill Redis under load: connection lost, then the breaker.
    def one(i):
        p = pol[i % 3]
        s, _, _, dt = p.req("/api/load", {"X-Api-Key": "load-%d" % (i % 7)})
        return p.name, s, dt
    load = harness.Load(one)
    time.sleep(0.3)
    redis.kill()
    time.sleep(0.5)
    under_outage("killed")
    redis.start()
    check("restarted: every proxy recovers by itself",
          all(p.wait_up() for p in pol + proxies + [slow]),
          [p.metric("sluice_store_up") for p in pol + proxies + [slow]])
    time.sleep(0.2)
    load.check(bound + 0.5, ["closed"])
    # Decisions are shared again: exactly L over the proxies with a
    # generous timeout; then the key they used up is refused by each
    # policy's proxy too, which only Redis can tell them.
    res = storm(proxies + [slow], "/api/shared",
                {"X-Api-Key": "after-restart"}, 4 * L)
    allowed = sum(1 for r in res if r[0] == 200)
    others = sorted(set(r[0] for r in res) - {200, 429})
    check("restarted: decisions shared again (exactly %d of %d over 4 proxies)" % (L, 4 * L),
          allowed == L and len(arrivals("/api/shared")) == L and not others,
          "allowed %d, other statuses %s" % (allowed, others))
    late = [p.req("/api/shared", {"X-Api-Key": "after-restart"})[0] for p in pol]
    check("restarted: the local, fail_open and fail_closed proxies decide on Redis again",
          late == [429, 429, 429], late)

    # docs/proxy.md's command line, run from the repository root.
    cmd = shlex.split(doc_block("proxy-redis-test", "sh").replace("\\\n", " "))
    os.chdir(SRC)
    doc = Proxy("doc", argv=cmd[2:])
    up = doc.wait_up()
    s, h, _, _ = doc.req("/api/doc", {"X-Api-Key": "doc"})
    check("docs/proxy.md's command: connects and decides",
          up and s == 200 and h.get("X-RateLimit-Limit") is not None,
          (up, s, open(doc.log).read()[-1000:]))
    # SIGTERM drains and exits 0 (sanitizer builds: no leak reports).
    harness.check_exit(proxies + pol + [slow, doc])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
