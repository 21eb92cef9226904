#!/bin/bash
# Integration test of `sluice serve --store redis://...`: a real
# redis-server on a free loopback port (and a unix socket), several
# daemons sharing it, many concurrent clients, and Redis killed, paused
# and restarted under them.  Every wait is bounded, so a hang fails the
# test; everything started is killed in python's finally.
#
# SL_REDIS_TIMEOUT_MS (default 50, raised under sanitizers by the caller
# if needed) is the daemons' --redis-timeout; no request may wait longer
# than it plus SL_MARGIN_MS (default 300).
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, signal, socket, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
import urllib.error, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check

SLUICE = sys.argv[1]
TIMEOUT_MS = int(os.environ.get("SL_REDIS_TIMEOUT_MS", "50"))
MARGIN_MS = int(os.environ.get("SL_MARGIN_MS", "300"))
QUICK = os.environ.get("SL_TEST_QUICK") == "1"
tmp = tempfile.mkdtemp()
REDIS_SOCK = os.path.join(tmp, "redis.sock")
redis = harness.Redis(unix_socket=REDIS_SOCK)
STORE = "redis://127.0.0.1:%d" % redis.port

ALGS = harness.ALGS
L = 20
rules = harness.rules_file(
    tmp, L,
    # Per-rule failure policies, overriding --redis-failure.
    "  - key: strict\n    rate_limit: {unit: hour, requests_per_unit: 100, "
    "store_failure: fail_closed}\n"
    "  - key: lenient\n    rate_limit: {unit: hour, requests_per_unit: 100, "
    "store_failure: fail_open}\n"
    # A shadow-mode rule: decided on Redis too, never vetoes.
    "  - key: shadow\n    shadow_mode: true\n    rate_limit: "
    "{unit: hour, requests_per_unit: 1}\n")

class Node(harness.Node):
    def __init__(self, name, *flags):
        super().__init__(SLUICE, tmp, name, rules, "--threads", "2",
                         "--redis-timeout", "%dms" % TIMEOUT_MS, *flags)

    def auth(self, key, value):
        """GET /v1/auth (nginx's auth_request): the status."""
        req = urllib.request.Request(self.url("/v1/auth?domain=test"),
                                     headers={"Sluice-Descriptor": "%s=%s" % (key, value)})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

def storm(nodes, key, value, n, workers=24):
    """n concurrent checks spread over nodes; the results in a list."""
    return harness.storm(lambda i: nodes[i % len(nodes)].check(key, value), n, workers)

def redis_cli(server, *args):
    """A command on server by redis-cli: its output."""
    return subprocess.run(["redis-cli", "-p", str(server.port)] + list(args),
                          capture_output=True, text=True, timeout=10).stdout

def burst(port, key, value, n):
    """n requests for key=value written at once on n connections before
    any is read: the statuses."""
    body = json.dumps({"domain": "test", "descriptors": [
        {"entries": [{"key": key, "value": value}]}]}).encode()
    req = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
           % len(body)) + body
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10)
             for _ in range(n)]
    for so in socks:
        so.sendall(req)
    codes = []
    for so in socks:
        data = b""
        while True:
            chunk = so.recv(65536)
            if not chunk:
                break
            data += chunk
        so.close()
        codes.append(int(data.split(b" ", 2)[1]) if data else 0)
    return codes

try:
    redis.start()
    # The nodes whose decisions are counted: a generous timeout, and
    # fail_closed, so that a call a loaded machine lets time out shows
    # as a 503 rather than passing as a decision of the fallback.
    nodes = [Node("n%d" % i, "--store", STORE, "--redis-timeout", "2s",
                  "--redis-failure", "fail_closed") for i in range(3)]
    for n in nodes:
        check("%s connects (readyz up)" % n.name, n.wait_status("up"),
              n.get("/readyz")[1])
    st, body = nodes[0].get("/readyz")
    check("readyz names the store", st == 200 and '"store": "redis"' in
          body.replace('":"', '": "'), body)

    # Exactly L allowed over three nodes and six threads, per algorithm.
    N = 3 * L if QUICK else 10 * L
    for a in ALGS:
        res = storm(nodes, a, "shared", N)
        allowed = sum(1 for s, _, _, _ in res if s == 200)
        others = sorted(set(s for s, _, _, _ in res) - {200, 429})
        check("%s: exactly %d of %d allowed over 3 nodes" % (a, L, N),
              allowed == L and not others,
              "allowed %d, other statuses %s" % (allowed, others))

    # Batches: requests that arrive together on one thread go to Redis as
    # few script calls (two at a time, the rest waiting to go together),
    # each call decided as if alone: still exactly L allowed.  (Without
    # the negative cache, which would answer the burst's later refusals
    # itself: tests/test_serve_redis_negcache.sh.)
    bn = harness.Node(SLUICE, tmp, "batch", rules, "--threads", "1",
                      "--store", STORE, "--redis-timeout", "2s",
                      "--redis-failure", "fail_closed",
                      "--negative-cache-bytes", "0")
    check("batch node connects", bn.wait_status("up"), bn.get("/readyz")[1])
    for a in ALGS:
        c0 = bn.metric("sluice_store_commands_total")
        k0 = bn.metric("sluice_store_calls_total")
        codes = burst(bn.port, a, "burst", 3 * L)
        cmds = bn.metric("sluice_store_commands_total") - c0
        calls = bn.metric("sluice_store_calls_total") - k0
        check("%s: a burst of %d at once: exactly %d allowed, in %d calls "
              "sent as %d script calls" % (a, 3 * L, L, calls, cmds),
              codes.count(200) == L and codes.count(429) == 2 * L and
              calls == 3 * L and cmds < calls,
              "statuses %s, calls %s, script calls %s" % (
                  sorted(codes), calls, cmds))

    # Calls that meet a flushed library ("Function not found") go again as
    # EVAL, after the library is loaded again.  Redis is stopped while the
    # burst's first call is written to it and a FUNCTION FLUSH after it;
    # on SIGCONT Redis mostly runs that call first and the flush next, and
    # the calls held meanwhile meet the flushed library as a batch (119
    # calls sent for 60: the batch of 59 twice); sometimes the flush comes
    # first and the lone call meets it (61).  Either way: exact, no 503,
    # something was sent again, and the library is back.
    k0 = bn.metric("sluice_store_calls_total")
    # Connected (accepted by Redis) before the stop.
    admin = socket.create_connection(("127.0.0.1", redis.port), timeout=10)
    admin.sendall(b"*1\r\n$4\r\nPING\r\n")
    admin.recv(64)
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(burst, bn.port, ALGS[0], "flushed", 3 * L)
            time.sleep(0.3)
            admin.sendall(b"*2\r\n$8\r\nFUNCTION\r\n$5\r\nFLUSH\r\n")
            time.sleep(0.2)
            redis.proc.send_signal(signal.SIGCONT)
            codes = fut.result(timeout=30)
            admin.recv(64)
            admin.close()
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    calls = bn.metric("sluice_store_calls_total") - k0
    check("calls after FUNCTION FLUSH are sent again as EVAL: exactly %d "
          "of %d allowed (%d calls sent for %d decisions)" % (L, 3 * L, calls, 3 * L),
          codes.count(200) == L and codes.count(429) == 2 * L and
          calls > 3 * L,
          "statuses %s, calls %s" % (sorted(codes), calls))
    check("the library is loaded again after FUNCTION FLUSH",
          "sluice_" in redis_cli(redis, "FUNCTION", "LIST"),
          redis_cli(redis, "FUNCTION", "LIST"))

    # A Redis without Functions (Redis 6; here FUNCTION renamed away):
    # the node calls EVALSHA, decides exactly, and after a SCRIPT FLUSH
    # sends the script again as EVAL.
    old = harness.Redis(extra=["--rename-command", "FUNCTION", ""])
    old.start()
    on = harness.Node(SLUICE, tmp, "old", rules, "--threads", "1",
                      "--store", "redis://127.0.0.1:%d" % old.port,
                      "--redis-timeout", "2s", "--redis-failure", "fail_closed")
    check("a node on a Redis without FUNCTION connects", on.wait_status("up"),
          on.get("/readyz")[1])
    for key in ("before", "after"):
        if key == "after":
            redis_cli(old, "SCRIPT", "FLUSH")
        codes = burst(on.port, ALGS[0], key, 3 * L)
        # NOSCRIPT errors, not EVALs, tell the call sent again: --nodes
        # auto's heartbeat is an EVAL of its own.
        stats = redis_cli(old, "INFO", "commandstats") + \
            redis_cli(old, "INFO", "errorstats")
        check("without FUNCTION, %s SCRIPT FLUSH: exactly %d of %d allowed, "
              "by EVALSHA" % (key, L, 3 * L),
              codes.count(200) == L and codes.count(429) == 2 * L and
              "cmdstat_evalsha:" in stats and "cmdstat_fcall:" not in stats and
              ("errorstat_NOSCRIPT:" in stats) == (key == "after"),
              "statuses %s, %s" % (sorted(codes), stats))
    on.stop()
    old.kill()

    # GET /v1/auth waits on Redis as the JSON APIs do (its descriptors
    # come from headers kept across the wait).
    codes = harness.storm(lambda i: nodes[i % 3].auth(ALGS[0], "auth"), 2 * L, 12)
    check("/v1/auth: exactly %d of %d get 204 over 3 nodes" % (L, 2 * L),
          codes.count(204) == L and codes.count(429) == L, sorted(set(codes)))

    # Shadow mode goes through Redis and never vetoes.
    res = [nodes[i % 3].check("shadow", "s") for i in range(3)]
    check("shadow rule never rejects", all(r[0] == 200 for r in res),
          [r[0] for r in res])

    # Unix socket, db 0: the same state as over TCP.
    ux = Node("ux", "--store", "unix:%s" % REDIS_SOCK)
    check("unix socket node connects", ux.wait_status("up"), ux.get("/readyz")[1])
    s, b, _, _ = ux.check("fixed_window", "shared")
    check("unix socket node sees the shared state", s == 429, (s, b))
    ux.stop()

    # A cost-0 query consumes nothing.
    nodes[0].check("fixed_window", "q", hits=0)
    s, b, h, _ = nodes[1].check("fixed_window", "q")
    check("hits 0 is a pure query", s == 200 and b["descriptors"][0]["remaining"] == L - 1, b)

    # Increments on Redis (issue 17): hits above the capacity refused
    # before the store, the capacity recorded, one more past the limit
    # recorded too (over_limit), and the counter shared by the nodes.
    def increment(node, body):
        req = urllib.request.Request(node.url("/v1/increment"), json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
    inc = {"domain": "test", "entries": [{"key": "sliding_window", "value": "inc"}]}
    s, b = increment(nodes[0], dict(inc, hits=2 ** 40))
    check("increment: 2^40 hits refused (400 ERANGE)", s == 400 and b["error"]["code"] == "ERANGE", (s, b))
    s, b = increment(nodes[1], dict(inc, hits=L))
    check("increment: the capacity recorded on Redis", s == 200 and not b["over_limit"] and b["remaining"] == 0, (s, b))
    s, b = increment(nodes[2], dict(inc, hits=1))
    check("increment: past the limit counted, over_limit", s == 200 and b["counted"] and b["over_limit"], (s, b))

    # The failure policies, each on its own node.
    local = Node("local", "--store", STORE, "--redis-failure", "local", "--nodes", "3")
    fopen = Node("open", "--store", STORE, "--redis-failure", "fail_open")
    fclosed = Node("closed", "--store", STORE, "--redis-failure", "fail_closed")
    pol = [local, fopen, fclosed]
    for n in pol:
        n.wait_status("up")
    bound = (TIMEOUT_MS + MARGIN_MS) / 1000.0

    def under_outage(label):
        # Concurrent load on all policy nodes: no request waits past the bound.
        def one(i):
            return pol[i % 3], pol[i % 3].check("fixed_window", "out-%s-%d" % (label, i % 5))
        res = harness.storm(one, 60 if QUICK else 150)
        harness.check_bound(label, [r[1][3] for r in res], bound)
        by = {n.name: [r[1] for r in res if r[0] is n] for n in pol}
        check("%s: fail_closed answers 503 ESTORE, not 429" % label,
              all(s == 503 and b.get("error", {}).get("code") == "ESTORE" for s, b, _, _ in by["closed"]),
              sorted(set(s for s, _, _, _ in by["closed"])))
        check("%s: fail_open allows" % label,
              all(s == 200 for s, _, _, _ in by["open"]),
              sorted(set(s for s, _, _, _ in by["open"])))
        lim = set(h.get("X-RateLimit-Limit") for _, _, h, _ in by["local"])
        check("%s: local decides on the embedded store, limit %d / 3 nodes" % (label, L),
              lim == {str(L // 3)} and all(s in (200, 429) for s, _, _, _ in by["local"]),
              (lim, sorted(set(s for s, _, _, _ in by["local"]))))
        s1 = fopen.check("strict", "x")[0]
        s2 = fclosed.check("lenient", "x")[0]
        check("%s: a rule's store_failure overrides --redis-failure" % label,
              s1 == 503 and s2 == 200, "strict on fail_open: %d, lenient on fail_closed: %d" % (s1, s2))
        # Exactly L/3 allowed per key on the local node (5 keys).
        allowed = sum(1 for s, _, _, _ in by["local"] if s == 200)
        n_local = len(by["local"])
        check("%s: local enforces the divided limit" % label,
              allowed == min(n_local, 5 * (L // 3)) or n_local < 5 * (L // 3),
              "allowed %d of %d" % (allowed, n_local))

    # SIGSTOP: Redis accepts nothing; timeouts, then the breaker.
    redis.proc.send_signal(signal.SIGSTOP)
    under_outage("paused")
    # The storm may be over before a thread has seen --redis-breaker whole
    # timeouts of silence; one request at a time to each node keeps the
    # silence going until every node answers from an open breaker.
    def opened(n):
        return (n.metric('sluice_store_failures_total{reason="breaker_open"}') or 0) > 0
    harness.wait_until(lambda: [n.check("fixed_window", "silence") for n in pol]
                       and all(opened(n) for n in pol), 10)
    for n in pol:
        check("paused: %s still ready, store down or degraded" % n.name,
              n.get("/readyz")[0] == 200 and n.store_status() in ("down", "degraded"),
              n.get("/readyz"))
    t = [n.metric('sluice_store_failures_total{reason="timeout"}') or 0 for n in pol]
    o = [n.metric('sluice_store_failures_total{reason="breaker_open"}') or 0 for n in pol]
    check("paused: on every node timeouts counted %s, then the breaker opened %s" % (t, o),
          all(t) and all(o))
    check("paused: fallbacks counted per policy",
          (local.metric('sluice_store_fallback_decisions_total{policy="local"}') or 0) > 0 and
          (fopen.metric('sluice_store_fallback_decisions_total{policy="fail_open"}') or 0) > 0 and
          (fclosed.metric('sluice_store_fallback_decisions_total{policy="fail_closed"}') or 0) > 0)
    redis.proc.send_signal(signal.SIGCONT)
    check("SIGCONT: every node recovers by itself",
          all(n.wait_status("up") for n in pol + nodes),
          [n.store_status() for n in pol + nodes])
    check("SIGCONT: sluice_store_up is 1", all(n.metric("sluice_store_up") == 1 for n in pol))

    # Kill Redis under load: connection lost, then the breaker.
    def one(i):
        n = pol[i % 3]
        s, _, _, dt = n.check("fixed_window", "load-%d" % (i % 7))
        return n.name, s, dt
    load = harness.Load(one)
    time.sleep(0.3)
    redis.kill()
    time.sleep(0.5)
    under_outage("killed")
    st_local = local.store_status()
    check("killed: store_status down", st_local == "down", st_local)
    check("killed: breaker transitions counted",
          (local.metric('sluice_store_breaker_transitions_total{to="open"}') or 0) >= 2)
    # Restart on the same port: recovery without a restart of the nodes.
    redis.start()
    check("restarted: every node recovers by itself",
          all(n.wait_status("up") for n in pol + nodes),
          [n.store_status() for n in pol + nodes])
    time.sleep(0.2)
    load.check(bound + 0.5, ["closed"])
    # Decisions are shared again: exactly L over the counted nodes; then
    # the key they used up is refused by each policy's node too, which
    # only Redis can tell them.
    res = storm(nodes, "sliding_window", "after-restart", 4 * L)
    allowed = sum(1 for s, _, _, _ in res if s == 200)
    others = sorted(set(s for s, _, _, _ in res) - {200, 429})
    check("restarted: decisions shared again (exactly %d allowed)" % L,
          allowed == L and not others,
          "allowed %d, other statuses %s: %s; the nodes' logs: %s" % (
              allowed, others,
              [(s, b, round(dt, 3)) for s, b, _, dt in res if s not in (200, 429)],
              {n.name: open(n.log).read()[-600:] for n in nodes}))
    late = [n.check("sliding_window", "after-restart")[0] for n in pol]
    check("restarted: the local, fail_open and fail_closed nodes decide on Redis again",
          late == [429, 429, 429], late)
    stats = redis_cli(redis, "INFO", "commandstats")
    check("restarted: the library is loaded again and calls are FCALLs",
          "sluice_" in redis_cli(redis, "FUNCTION", "LIST") and
          "cmdstat_fcall:" in stats and "cmdstat_evalsha:" not in stats, stats)

    # SIGTERM drains and exits 0 (sanitizer builds: no leak reports).
    harness.check_exit(nodes + pol)
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
