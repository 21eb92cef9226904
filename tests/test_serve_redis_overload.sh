#!/bin/bash
# Integration test of `sluice serve --store redis://` when Redis is slow,
# paused or misnamed, with the default settings (issue 17):
#   - a redis:// URL naming a Redis Cluster node is refused at start with
#     "use redis-cluster://";
#   - two nodes on one Redis use up a limit L through Redis; then Redis is
#     made slow (DEBUG SLEEP in a loop) and then paused (SIGSTOP): the
#     requests that fall back to the local policy may allow no more than
#     the documented bound (docs/server.md, "Overshoot"):
#       allowed <= L + sum over nodes of max(0, s - u_i), s = max(1, L / N)
#     where u_i is what Redis allowed through node i; here u_i = s, so
#     nothing more passes (today's main, with --nodes 1 and fresh local
#     counters, let each node allow L again);
#   - 30 concurrent requests of 64 descriptors each, in rounds, never open
#     the circuit breaker.
# Every wait is bounded; everything started is killed in finally.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check, wait_until

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()

L, N = 14, 2
S = max(1, L // N)
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: test\ndescriptors:\n"
            "  - key: k\n    rate_limit: {algorithm: fixed_window, unit: hour, "
            "requests_per_unit: %d}\n"
            "  - key: d\n    rate_limit: {algorithm: token_bucket, unit: hour, "
            "requests_per_unit: 1000000}\n" % L)

def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10).stdout.strip()

try:
    # ---- redis:// at a Cluster node: refused at start ----
    # Its bus on a port of its own: port + 10000, the default, is past
    # 65535 for a free port above 55535, and the node does not start.
    cnode = harness.Redis(extra=["--cluster-enabled", "yes", "--cluster-config-file",
                                 os.path.join(tmp, "nodes.conf"),
                                 "--cluster-port", str(harness.free_port())])
    cnode.start()
    log = os.path.join(tmp, "refused.log")
    p = harness.start([SLUICE, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
                       "--store", "redis://127.0.0.1:%d" % cnode.port], log)
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    text = open(log).read()
    check("redis:// at a Cluster node: refused at start (exit 1)", rc == 1,
          "status %s: %s" % (rc, text[-500:]))
    check("redis:// at a Cluster node: says use redis-cluster://",
          "use redis-cluster://" in text, text[-500:])
    cnode.kill()

    # ---- slow, then paused Redis: overshoot within the bound ----
    redis = harness.Redis(extra=["--enable-debug-command", "yes"])
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    # Default settings: no --nodes, no --redis-timeout, no --redis-breaker;
    # but no negative cache, which would answer the key Redis refused in
    # phase B itself, slow Redis or not, and so keep the failure policy
    # this measures from deciding it.
    nodes = [harness.Node(SLUICE, tmp, "n%d" % i, rules, "--threads", "2",
                          "--store", store, "--negative-cache-bytes", "0")
             for i in range(N)]
    check("both nodes connect",
          all(n.wait_status("up", 10) for n in nodes))
    check("--nodes auto by default: each counts %d" % N,
          all(wait_until(lambda n=n: n.metric("sluice_nodes_live") == N, 10)
              for n in nodes))

    # The count falls only when a lower one has held for the TTL: a Redis
    # that lost the set (restarted without it) first answers 1, and a node
    # that believed itself alone would give its fallback the whole limit.
    cli(redis.port, "DEL", "sl:nodes")
    seen_counts = set()
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        seen_counts |= {n.metric("sluice_nodes_live") for n in nodes}
        time.sleep(0.03)
    check("the set lost: the count stays %d (seen %s)" % (N, sorted(seen_counts)),
          seen_counts == {N})

    # Phases A and B count on one hour's fixed window: not across its edge.
    left = 3600 - time.time() % 3600
    if left < 30:
        time.sleep(left + 1)

    # Phase A: Redis decides; each node lets through its share S.
    # u_i counts what Redis allowed (X-RateLimit-Limit is L; a local
    # decision, had a loaded machine let a call time out, shows S).
    allowed, u = [0] * N, [0] * N
    for i in range(L):
        st, _, hdrs, _ = nodes[i % N].check("k", "v")
        allowed[i % N] += st == 200
        u[i % N] += st == 200 and hdrs.get("X-RateLimit-Limit") == str(L)
    check("Redis decides: the limit passes (%s, through Redis %s)" % (allowed, u),
          sum(allowed) == L)
    bound = L + sum(max(0, S - ui) for ui in u)

    # Phase B: Redis slow (DEBUG SLEEP 0.4 s in a loop), then paused.
    stop = threading.Event()
    def sleeper():
        while not stop.is_set():
            cli(redis.port, "DEBUG", "SLEEP", "0.4")
            time.sleep(0.05)
    th = threading.Thread(target=sleeper)
    th.start()
    later = [0] * N
    def burst(rounds):
        for _ in range(rounds):
            res = harness.storm(lambda j: nodes[j % N].check("k", "v"), 20, 20)
            for j, r in enumerate(res):
                later[j % N] += r[0] == 200
    try:
        burst(4)
    finally:
        stop.set()
        th.join(15)
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        burst(3)
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    fell_back = sum(n.metric('sluice_store_fallback_decisions_total{policy="local"}') or 0
                    for n in nodes)
    check("slow and paused Redis: requests fell back to the local policy "
          "(%d)" % fell_back, fell_back > 0)
    total = sum(allowed) + sum(later)
    check("overshoot within the bound: allowed %d <= L + sum max(0, s - u_i) = %d"
          % (total, bound), total <= bound, "per node after: %s" % later)

    # ---- large requests never open the breaker ----
    for n in nodes:
        n.wait_status("up", 10)
    opened0 = sum(n.metric('sluice_store_breaker_transitions_total{to="open"}') or 0
                  for n in nodes)
    big = lambda j: nodes[j % N].post(
        [{"entries": [{"key": "d", "value": "%d-%d" % (j, i)}]} for i in range(64)])
    statuses = set()
    for r in range(5):
        statuses |= {x[0] for x in harness.storm(big, 30, 30)}
    opened = sum(n.metric('sluice_store_breaker_transitions_total{to="open"}') or 0
                 for n in nodes) - opened0
    check("30 concurrent requests of 64 descriptors: answered 200 (%s)" % statuses,
          statuses == {200})
    check("30 concurrent requests of 64 descriptors: the breaker stays closed "
          "(opened %d times)" % opened, opened == 0)

    harness.check_exit(nodes)
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
