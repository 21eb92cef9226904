#!/bin/bash
# Integration test of `sluice serve --store redis-sentinel://...`: a real
# master and replica (with a password) watched by three real
# redis-sentinels (with a password of their own) on free loopback ports,
# two daemons asking them (the first Sentinel in their list is dead);
# the master killed under load: Sentinel promotes the replica, the
# daemons follow it, no request waits past the bound and the counters
# go on exactly; then a manual failover back (SENTINEL FAILOVER), and
# the refusals (no master name, an unreadable password file, a wrong
# Sentinel password, a master the Sentinels do not know).  Everything
# started is killed in finally.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
for b in redis-server redis-sentinel redis-cli; do
  if ! command -v $b >/dev/null; then
    echo "FAIL $b is not installed (scripts/deps.sh --test installs it)"
    exit 1
  fi
done
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check, free_port

SLUICE = sys.argv[1]
QUICK = os.environ.get("SL_TEST_QUICK") == "1"
TIMEOUT_MS = 300 if QUICK else 100
tmp = tempfile.mkdtemp()
MPW, SPW = "master-secret", "sentinel-secret"
with open(os.path.join(tmp, "spw"), "w") as f:
    f.write(SPW + "\n")

def cli(port, *args, pw=MPW):
    return subprocess.run(["redis-cli", "-p", str(port), "-a", pw,
                           "--no-auth-warning"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=10).stdout.strip()

# Each in a directory of its own: a replica's full sync writes an RDB
# file there, which a restarted server would load.
AUTH = ["--requirepass", MPW, "--masterauth", MPW, "--repl-diskless-sync-delay", "0"]
master = harness.Redis(extra=AUTH + ["--dir", tempfile.mkdtemp(dir=tmp)])
master.start()
replica = harness.Redis(extra=AUTH + ["--dir", tempfile.mkdtemp(dir=tmp),
                                      "--replicaof", "127.0.0.1", str(master.port)])
replica.start()

sentinels = []
for i in range(3):
    port = free_port()
    conf = os.path.join(tmp, "sentinel%d.conf" % i)
    with open(conf, "w") as f:
        f.write("port %d\nbind 127.0.0.1\ndir %s\nrequirepass %s\n"
                "sentinel monitor mymaster 127.0.0.1 %d 2\n"
                "sentinel auth-pass mymaster %s\n"
                "sentinel down-after-milliseconds mymaster 1000\n"
                "sentinel failover-timeout mymaster 4000\n"
                % (port, tmp, SPW, master.port, MPW))
    harness.start(["redis-sentinel", conf], os.path.join(tmp, "sentinel%d.log" % i),
                  stdout=subprocess.DEVNULL)
    harness.wait_port(port)
    sentinels.append(port)

def master_port():
    out = cli(sentinels[1], "SENTINEL", "get-master-addr-by-name", "mymaster", pw=SPW)
    parts = out.split()
    return int(parts[1]) if len(parts) == 2 else None

def synced():
    """WAIT 1 on the master: "1" once the replica has all it wrote."""
    port = master_port()
    return cli(port, "WAIT", "1", "2000") if port else "no master"

check("the replica is in sync",
      harness.wait_until(lambda: "master_link_status:up" in
                         cli(replica.port, "INFO", "replication"), 15))
check("the Sentinels see the replica",
      harness.wait_until(lambda: "slaves\n1" in cli(sentinels[0], "SENTINEL", "master",
                                                    "mymaster", pw=SPW), 15))
dead = free_port()  # a Sentinel that is not there: asked first, skipped
STORE = "redis-sentinel://:%s@%s/mymaster" % (
    MPW, ",".join("127.0.0.1:%d" % p for p in [dead] + sentinels))
L = 20
rules = harness.rules_file(tmp, L)

def node(name, *flags):
    n = harness.Node(SLUICE, tmp, name, rules, "--threads", "2", "--store", STORE,
                     "--redis-sentinel-password-file", os.path.join(tmp, "spw"),
                     "--redis-timeout", "%dms" % TIMEOUT_MS, *flags)
    check("%s: up on the master the Sentinels name" % name, n.wait_status("up", 15),
          open(n.log).read()[-1000:])
    return n

def fallbacks(n):
    return sum(float(l.split()[-1]) for l in n.get("/metrics")[1].splitlines()
               if l.startswith("sluice_store_fallback_decisions_total{"))

def spread(nodes, alg, value, n):
    return [nodes[i % len(nodes)].check(alg, value)[0] for i in range(n)]

try:
    a, b = node("a"), node("b")
    first = master_port()
    check("the first master is the one started", first == master.port, first)
    codes = spread([a, b], "token_bucket", "k1", 8)
    check("before the failover: on Redis", codes == [200] * 8 and
          "k1" in cli(master.port, "--scan") and fallbacks(a) == 0, codes)
    out = synced()
    check("the replica has the counters", out == "1", out)

    # ---- the master killed under load ----
    def one(i):
        st, _, _, secs = [a, b][i % 2].check("fixed_window", "load-%d" % (i % 50))
        return ("fixed_window", st, secs)
    load = harness.Load(one, threads=6)
    time.sleep(0.3)
    master.kill()
    promoted = harness.wait_until(lambda: master_port() == replica.port, 30)
    check("Sentinel promotes the replica", promoted, master_port())
    check("both daemons follow it",
          harness.wait_until(lambda: a.store_status() == "up" and
                             b.store_status() == "up", 20),
          (a.store_status(), b.store_status()))
    time.sleep(0.3)
    load.check(TIMEOUT_MS / 1000.0 + 0.5, ())
    check("the failover window was decided by the failure policy",
          fallbacks(a) + fallbacks(b) > 0)
    codes = spread([a, b], "token_bucket", "k1", L)
    check("after the failover: exactly the rest of the limit (%d)" % (L - 8),
          codes.count(200) == L - 8 and codes.count(429) == 8, codes)
    check("the counters are on the new master", "k1" in cli(replica.port, "--scan"))

    # ---- the old master back as a replica, then a manual failover to it ----
    master.start()
    check("the old master comes back as a replica",
          harness.wait_until(lambda: "master_link_status:up" in
                             cli(master.port, "INFO", "replication"), 30))
    out = synced()
    check("it has the counters", out == "1", out)
    # Sentinel takes the old master for a good replica only once it has
    # watched it for a while: NOGOODSLAVE until then.
    said = []
    check("SENTINEL FAILOVER accepted",
          harness.wait_until(lambda: said.append(cli(
              sentinels[0], "SENTINEL", "FAILOVER", "mymaster", pw=SPW)) or
              said[-1] == "OK", 40), said[-1:])
    # A failover that does not finish within failover-timeout (4 s: a
    # busy machine) is given up by Sentinel, the master unchanged: asked
    # again every 10 s until the old master is the master.
    asked = [time.monotonic()]

    def failed_back():
        if master_port() == master.port and \
                "role:master" in cli(master.port, "INFO", "replication"):
            return True
        if time.monotonic() - asked[-1] > 10:
            said.append(cli(sentinels[0], "SENTINEL", "FAILOVER", "mymaster", pw=SPW))
            asked.append(time.monotonic())
        return False
    back = harness.wait_until(failed_back, 60)
    check("the old master is the master again (failovers asked: %d)" % len(asked),
          back, (master_port(), said[-3:]))
    probes = iter(range(1000000))
    def on_master(n):
        key = "probe-%d" % next(probes)
        return n.check("gcra", key)[0] == 200 and key in cli(master.port, "--scan")
    check("both daemons follow the manual failover",
          harness.wait_until(lambda: on_master(a) and on_master(b), 20))
    codes = spread([a, b], "sliding_window", "k3", L + 4)
    check("after the manual failover: exact on the master", codes.count(200) == L and
          "k3" in cli(master.port, "--scan"), codes)
    harness.check_exit([a, b])

    # ---- refusals and what is logged ----
    def refused(name, store, flags, want):
        p = subprocess.run([SLUICE, "serve", "--rules", rules, "--listen",
                            "127.0.0.1:0", "--store", store] + flags,
                           capture_output=True, text=True, timeout=20)
        check("refused at start: " + name, p.returncode == 1 and want in p.stderr,
              "status %d, stderr %r" % (p.returncode, p.stderr))
    refused("no master name", "redis-sentinel://127.0.0.1:%d" % sentinels[0], [],
            "names the master after the nodes")
    refused("an unreadable password file", STORE,
            ["--redis-sentinel-password-file", os.path.join(tmp, "missing")],
            "cannot read '%s'" % os.path.join(tmp, "missing"))
    refused("a password without Sentinels", "redis://127.0.0.1:%d" % master.port,
            ["--redis-sentinel-password-file", os.path.join(tmp, "spw")],
            "sentinel credentials without Sentinels")
    with open(os.path.join(tmp, "wrong"), "w") as f:
        f.write("wrong\n")
    c = harness.Node(SLUICE, tmp, "wrongpw", rules, "--store", STORE,
                     "--redis-sentinel-password-file", os.path.join(tmp, "wrong"))
    check("a wrong Sentinel password: said in the log, Redis down",
          harness.wait_until(lambda: "AUTH: WRONGPASS" in open(c.log).read(), 10) and
          c.store_status() == "down", open(c.log).read()[-600:])
    check("and decisions by the failure policy", c.check("token_bucket", "x")[0] == 200)
    d = harness.Node(SLUICE, tmp, "nomaster", rules, "--store",
                     STORE.replace("/mymaster", "/nosuchmaster"),
                     "--redis-sentinel-password-file", os.path.join(tmp, "spw"))
    check("a master the Sentinels do not know: said in the log",
          harness.wait_until(lambda: "does not know the master 'nosuchmaster'" in
                             open(d.log).read(), 10), open(d.log).read()[-600:])
    harness.check_exit([c, d])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
