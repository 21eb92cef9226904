#!/bin/bash
# Integration test of `sluice serve --store redis-cluster://...`: a real
# Redis Cluster of three masters and three replicas started here (free
# loopback ports, small cluster-node-timeout), three daemons on it, many
# concurrent clients on keys spread over every master; then a slot
# migrated under load (ASK, then MOVED) and a master killed (failover).
# Every wait is bounded; everything started is killed in finally.
#
# SL_TEST_QUICK=1 (sanitizer builds) makes the loads smaller.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
for b in redis-server redis-cli; do
  if ! command -v $b >/dev/null; then
    echo "FAIL $b is not installed (scripts/deps.sh --test installs it)"
    exit 1
  fi
done
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, re, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check, free_port

SLUICE = sys.argv[1]
QUICK = os.environ.get("SL_TEST_QUICK") == "1"
TIMEOUT_MS = 300 if QUICK else 150
tmp = tempfile.mkdtemp()

def cli(port, *args):
    r = subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=10)
    return r.stdout.strip()

# ---- the cluster ----
ports = []
redis = {}  # port -> harness.Redis
def start_node(name, into=ports, extra=()):
    d = os.path.join(tmp, "r%s" % name)
    os.makedirs(d, exist_ok=True)
    r = harness.Redis(extra=[
        "--dir", d,
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", "1000", "--cluster-port", str(free_port()),
        "--repl-diskless-sync-delay", "0",
        "--cluster-replica-validity-factor", "0", *extra])
    into.append(r.port)
    redis[r.port] = r
    r.start()

def wait_ok(alive, secs=20):
    """Every live node: cluster_state:ok, replicas in sync, and all agree
    on who serves each slot."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            ok = all("cluster_state:ok" in cli(p, "cluster", "info") and
                     ("role:master" in cli(p, "info", "replication") or
                      "master_link_status:up" in cli(p, "info", "replication"))
                     for p in alive)
            if ok and len(set(slot_owner_table(p) for p in alive)) == 1:
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False

def slots(port):
    """[(first, last, master port)] of the masters port sees as healthy,
    from CLUSTER NODES."""
    res = []
    for line in cli(port, "cluster", "nodes").splitlines():
        f = line.split()
        if len(f) < 8 or "master" not in f[2] or "fail" in f[2]:
            continue
        mport = int(f[1].split("@")[0].rsplit(":", 1)[1])
        for r in f[8:]:
            if not r.startswith("["):  # [slot->-id]: a migration in progress
                a, _, b = r.partition("-")
                res.append((int(a), int(b or a), mport))
    return res

def slot_owner_table(port):
    return tuple(sorted(slots(port)))

def master_of_slot(port, slot):
    for a, b, m in slots(port):
        if a <= slot <= b:
            return m
    return None

def masters(port):
    return sorted(set(m for _, _, m in slots(port)))

# ---- sluice ----
ALGS = harness.ALGS
L = 5
rules = harness.rules_file(
    tmp, L, "  - key: one\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
    "  - key: five\n    rate_limit: {unit: hour, requests_per_unit: 5}\n")

class Node(harness.Node):
    def __init__(self, name, url, *flags):
        super().__init__(SLUICE, tmp, name, rules, "--threads", "2", "--store",
                         url, "--redis-timeout", "%dms" % TIMEOUT_MS, *flags)

def storm(nodes, pairs, per_pair, workers=24):
    """per_pair concurrent checks of each (key, value) over the nodes:
    {(key, value): [status, ...]}."""
    jobs = [(k, v) for k, v in pairs for _ in range(per_pair)]
    def one(i):
        k, v = jobs[i]
        return (k, v), nodes[i % len(nodes)].check(k, v)[0]
    out = {}
    for kv, s in harness.storm(one, len(jobs), workers):
        out.setdefault(kv, []).append(s)
    return out

def key_slot(name):
    return int(cli(ports[0], "cluster", "keyslot", name))

def find_key(port_list, pattern):
    """The Redis key name sluice wrote matching pattern, on any master."""
    for p in port_list:
        for k in cli(p, "--scan", "--pattern", pattern).splitlines():
            if k:
                return k
    return None

try:
    for i in range(6):
        start_node(i)
    out = subprocess.run(["redis-cli", "--cluster", "create"] +
                         ["127.0.0.1:%d" % p for p in ports] +
                         ["--cluster-replicas", "1", "--cluster-yes"],
                         capture_output=True, text=True, timeout=60)
    check("redis-cli --cluster create", out.returncode == 0, out.stdout[-500:])
    check("cluster ok, replicas in sync", wait_ok(ports), cli(ports[0], "cluster", "info"))
    ms = masters(ports[0])
    check("three masters", len(ms) == 3, ms)

    # A bad seed list is refused at start, with a clear message.
    bad = subprocess.run([SLUICE, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
                          "--store", "redis-cluster://127.0.0.1"],
                         capture_output=True, text=True, timeout=10)
    check("bad cluster url: refused at start with a message",
          bad.returncode != 0 and "invalid redis url" in bad.stderr,
          (bad.returncode, bad.stderr))

    # Seeds: one master and one replica (any node describes the cluster).
    url = "redis-cluster://127.0.0.1:%d,127.0.0.1:%d" % (ports[0], ports[4])
    # n2's breaker never opens: after a failover it must find the new
    # master by itself, not by the breaker's reconnection.  No negative
    # cache: the migration and failover checks below count on the load's
    # refused requests reaching the masters (to meet ASK, to find the new
    # master), which a node would otherwise answer itself.
    nodes = [Node("n%d" % i, url, "--redis-failure", "fail_closed",
                  "--redis-breaker", "10000" if i == 2 else "3",
                  "--negative-cache-bytes", "0") for i in range(3)]
    for n in nodes:
        check("%s: readyz up" % n.name, n.wait_status("up"), n.get("/readyz"))

    # The example of docs/server.md ("Redis Cluster"), on this cluster.
    doc = open(os.path.join(os.environ["SOURCE_DIR"], "docs/server.md")).read()
    m = re.search(r"<!-- cluster-test:.*?-->\s*```sh\n(.*?)```", doc, re.S)
    argv = m.group(1).replace("\\\n", " ").split() if m else []
    argv = [url if a.startswith("redis-cluster://") else a for a in argv]
    check("docs/server.md has the cluster example",
          argv[:3] == ["sluice", "serve", "--rules"], argv)
    doc_node = harness.Node(SLUICE, tmp, "doc",
                          os.path.join(sys.argv[2], argv[3]), *argv[4:])
    check("the documented command serves from the cluster",
          doc_node.wait_status("up"), open(doc_node.log).read()[-500:])
    check("the documented command exits 0", doc_node.stop() == 0)

    # Exactly L per key per window, keys over every master, every algorithm.
    values = ["u%d" % i for i in range(6 if QUICK else 12)]
    algs = ALGS[::2] if QUICK else ALGS
    res = storm(nodes, [(a, v) for a in algs for v in values], 3 * L)
    wrong = {kv: (st.count(200), sorted(set(st))) for kv, st in res.items()
             if st.count(200) != L or set(st) - {200, 429}}
    check("exactly %d allowed of %d per key (%d keys, %d algorithms, 3 nodes)"
          % (L, 3 * L, len(values) * len(algs), len(algs)), not wrong, wrong)
    spread = [len(cli(m, "--scan", "--pattern", "sl:*").split()) for m in ms]
    check("the keys are spread over all three masters", all(c > 0 for c in spread), spread)
    fcalls = [("sluice_" in cli(m, "function", "list"),
               "cmdstat_fcall:" in cli(m, "info", "commandstats"),
               "cmdstat_evalsha:" in cli(m, "info", "commandstats")) for m in ms]
    check("every master has the library and is called by FCALL",
          fcalls == [(True, True, False)] * 3, fcalls)

    # A request with descriptors in two slots: decided per slot (stores.md).
    n0 = nodes[0]
    two = [{"entries": [{"key": "one", "value": "x1"}]},
           {"entries": [{"key": "five", "value": "x2"}]}]
    s1, b1, _, _ = n0.post(two)
    ka, kb = find_key(ms, "sl:*{*one*x1*}"), find_key(ms, "sl:*{*five*x2*}")
    check("cross-slot: the two keys are in two slots",
          ka and kb and key_slot(ka) != key_slot(kb), (ka, kb))
    s2, b2, _, _ = n0.post(two)
    st = [d["code"] for d in b2.get("descriptors", [])]
    check("cross-slot: first allowed, second refused by 'one' only",
          s1 == 200 and s2 == 429 and st == ["OVER_LIMIT", "OK"], (s1, s2, b2))
    s3, b3, _, _ = n0.post(two[1:], hits=0)
    check("cross-slot: the slot that allowed kept its count (5 - 2 = 3 left)",
          s3 == 200 and b3["descriptors"][0]["remaining"] == 3, b3)

    # --redis-hash-tag domain: every key of a domain in one slot, so the
    # same request is all or nothing again.
    dom = Node("dom", url, "--redis-failure", "fail_closed", "--redis-hash-tag", "domain")
    dom.wait_status("up")
    two = [{"entries": [{"key": "one", "value": "x3"}]},
           {"entries": [{"key": "five", "value": "x4"}]}]
    s1, _, _, _ = dom.post(two)
    s2, b2, _, _ = dom.post(two)
    s3, b3, _, _ = dom.post(two[1:], hits=0)
    ka, kb = find_key(ms, "sl:*one*x3*"), find_key(ms, "sl:*five*x4*")
    check("hash tag domain: both keys in the domain's slot",
          ka and kb and key_slot(ka) == key_slot(kb) and "{4:test}" in ka, (ka, kb))
    check("hash tag domain: the refused request consumed nothing (5 - 1 = 4 left)",
          (s1, s2, s3) == (200, 429, 200) and b3["descriptors"][0]["remaining"] == 4,
          (s1, s2, s3, b3))
    harness.check_exit([dom])

    # TRYAGAIN: a resharding has moved one of a call's two keys (one slot:
    # --redis-hash-tag domain).  The source answers TRYAGAIN until the
    # rest moves; sluice backs off and sends again within the request's
    # timeout, so the request is decided by Redis once the slot has moved
    # (sent again at once, the part spent its 5 hops in a millisecond and
    # failed: 503 under fail_closed).
    ta = Node("ta", url, "--redis-failure", "fail_closed", "--redis-hash-tag",
              "domain", "--redis-timeout", "5s")
    ta.wait_status("up")
    pair = [{"entries": [{"key": "one", "value": "t1"}]},
            {"entries": [{"key": "five", "value": "t2"}]}]
    s0, _, _, _ = ta.post(pair[1:])  # only t2's key exists
    k2 = find_key(ms, "sl:*five*t2*")
    tslot = key_slot(k2)
    tsrc = master_of_slot(ports[0], tslot)
    tdst = [m for m in ms if m != tsrc][0]
    tsrc_id, tdst_id = cli(tsrc, "cluster", "myid"), cli(tdst, "cluster", "myid")
    cli(tdst, "cluster", "setslot", tslot, "importing", tsrc_id)
    cli(tsrc, "cluster", "setslot", tslot, "migrating", tdst_id)
    # Every key of the slot but t2's moves: t1's is new, so the source has
    # t2's and not t1's: TRYAGAIN.
    for k in cli(tsrc, "cluster", "getkeysinslot", tslot, 1000).split():
        if k != k2:
            cli(tsrc, "migrate", "127.0.0.1", tdst, k, 0, 5000)
    def tryagains():
        m = re.search(r"errorstat_TRYAGAIN:count=(\d+)", cli(tsrc, "info", "errorstats"))
        return int(m.group(1)) if m else 0
    before = tryagains()
    got = []
    th = threading.Thread(target=lambda: got.append(ta.post(pair)))
    th.start()
    seen = harness.wait_until(lambda: tryagains() > before or got, 10)
    cli(tsrc, "migrate", "127.0.0.1", tdst, k2, 0, 5000)
    for p in [tdst, tsrc] + [m for m in ms if m not in (tdst, tsrc)]:
        cli(p, "cluster", "setslot", tslot, "node", tdst_id)
    th.join(15)
    check("TRYAGAIN: the source answered TRYAGAIN", seen and tryagains() > before,
          (before, tryagains()))
    check("TRYAGAIN: backed off and decided by Redis once the slot moved (200)",
          s0 == 200 and got and got[0][0] == 200, (s0, got[:1]))
    harness.check_exit([ta])

    # A slot migrated under load: ASK while its keys move, MOVED after.
    for n in nodes:
        n.check("fixed_window", "mig")
    kname = find_key(ms, "sl:*{*fixed_window*mig*}")
    slot = key_slot(kname)
    src = master_of_slot(ports[0], slot)
    dst = [m for m in ms if m != src][0]
    src_id, dst_id = cli(src, "cluster", "myid"), cli(dst, "cluster", "myid")
    stop = threading.Event()
    mig = []
    def load():
        i = 0
        while not stop.is_set():
            mig.append(nodes[i % 3].check("fixed_window", "mig")[0])
            nodes[i % 3].check("gcra", "mig-%d" % (i % 5))
            i += 1
    ths = [threading.Thread(target=load) for _ in range(4)]
    for th in ths:
        th.start()
    cli(dst, "cluster", "setslot", slot, "importing", src_id)
    cli(src, "cluster", "setslot", slot, "migrating", dst_id)
    time.sleep(0.2)
    for k in cli(src, "cluster", "getkeysinslot", slot, 100).split():
        cli(src, "migrate", "127.0.0.1", dst, k, 0, 5000)
    time.sleep(0.3)
    # As redis-cli --cluster reshard does: the target first, so that the
    # source's MOVED never points at a node that does not own the slot yet.
    for p in [dst, src] + [m for m in ms if m not in (dst, src)]:
        cli(p, "cluster", "setslot", slot, "node", dst_id)
    time.sleep(0.5)
    stop.set()
    for th in ths:
        th.join(15)
    check("migration: the slot moved", master_of_slot(ports[0], slot) == dst,
          master_of_slot(ports[0], slot))
    check("migration: requests were sent with ASKING to the target",
          "cmdstat_asking:calls=" in cli(dst, "info", "commandstats"))
    allowed = mig.count(200)
    check("migration: exactly %d allowed in all (%d requests), no failures"
          % (L - 3, len(mig)),
          allowed == L - 3 and set(mig) <= {200, 429},
          (allowed, {s: mig.count(s) for s in set(mig)}))

    # Failover: kill the master of a key under load; requests stay
    # bounded, nothing crashes, and decisions come back from the replica.
    nodes[0].check("sliding_window", "fo")
    fkey = find_key(ms, "sl:*{*sliding_window*fo*}")
    fslot = key_slot(fkey)
    victim = master_of_slot(ports[0], fslot)
    alive = [p for p in ports if p != victim]
    def fo_one(i):
        n = nodes[i % 3]
        s, _, _, dt = n.check("gcra", "fo-%d" % (i % 9))
        return n.name, s, dt
    fo_load = harness.Load(fo_one, threads=6)
    time.sleep(0.3)
    redis[victim].kill()
    promoted = False
    end = time.monotonic() + 20
    while time.monotonic() < end and not promoted:
        try:
            promoted = master_of_slot(alive[0], fslot) not in (None, victim)
        except Exception:
            pass
        time.sleep(0.1)
    check("failover: the replica took over", promoted)
    check("failover: cluster ok again", wait_ok(alive))
    time.sleep(1.0)
    fo_load.stop()
    check("failover: every node still running",
          all(n.p.poll() is None for n in nodes), [n.p.poll() for n in nodes])
    bound = TIMEOUT_MS / 1000.0 + 0.5
    check("failover: no request waited past timeout + margin (worst %.0f ms)"
          % (fo_load.worst * 1000), fo_load.worst <= bound, fo_load.worst)
    statuses = set(s for _, s in fo_load.statuses)
    check("failover: only policy answers (200, 429, 503)",
          statuses <= {200, 429, 503}, statuses)
    for n in nodes:
        n.wait_status("up")
    res = storm(nodes, [("sliding_window", "fo2"), ("token_bucket", "fo2")], 3 * L)
    wrong = {kv: sorted(st) for kv, st in res.items()
             if st.count(200) != L or set(st) - {200, 429}}
    check("failover: decisions from Redis again, exactly %d allowed" % L,
          not wrong, wrong)
    s, b, _, _ = nodes[1].check("sliding_window", "fo")
    check("failover: the dead master's key is decided by Redis again (n1)",
          s == 200, (s, b))

    # A rolling upgrade: a cluster whose masters are not all Redis 7. The
    # second master knows neither FUNCTION nor FCALL, as Redis 6: the seed
    # took the library, so calls for it go as FCALL, meet "unknown
    # command", and go once more as EVAL; the node's threads call by
    # EVALSHA from then on, and no call fails (docs/stores.md).
    mixed = []
    for i in range(3):
        start_node("m%d" % i, mixed, ["--rename-command", "FUNCTION", "",
                                      "--rename-command", "FCALL", ""] if i == 1 else [])
    out = subprocess.run(["redis-cli", "--cluster", "create"] +
                         ["127.0.0.1:%d" % p for p in mixed] +
                         ["--cluster-replicas", "0", "--cluster-yes"],
                         capture_output=True, text=True, timeout=60)
    check("mixed cluster: created, ok", out.returncode == 0 and wait_ok(mixed),
          out.stdout[-500:])
    old_master = mixed[1]
    mx = Node("mx", "redis-cluster://127.0.0.1:%d" % mixed[0], "--redis-failure", "fail_closed")
    check("mixed cluster: readyz up", mx.wait_status("up"), mx.get("/readyz"))
    values = ["m%d" % i for i in range(9)]
    res = storm([mx], [("gcra", v) for v in values], 2 * L)
    wrong = {kv: sorted(st) for kv, st in res.items()
             if st.count(200) != L or set(st) - {200, 429}}
    spread = [len(cli(m, "--scan", "--pattern", "sl:*").split()) for m in mixed]
    check("mixed cluster: exactly %d allowed per key, no failures, keys on every master %s"
          % (L, spread), not wrong and all(spread), wrong)
    stats = cli(old_master, "info", "commandstats")
    check("mixed cluster: the Redis-6-like master is called by EVAL and EVALSHA",
          "cmdstat_evalsha:" in stats and "cmdstat_fcall" not in stats, stats)
    check("mixed cluster: the others have the library",
          all("sluice_" in cli(m, "function", "list") for m in mixed if m != old_master))
    check("mixed cluster: the node says so in its log",
          "calls are EVALSHA" in open(mx.log).read(), open(mx.log).read()[-500:])
    nodes.append(mx)

    harness.check_exit(nodes)
finally:
    harness.kill_all()
    subprocess.run(["rm", "-rf", tmp])
sys.exit(harness.failed)
PY
