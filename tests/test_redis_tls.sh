#!/bin/bash
# Integration test of `sluice serve --store rediss://...` and
# rediss-cluster://: a test CA made here with openssl, real redis-servers
# that speak only TLS and require client certificates (--port 0,
# --tls-auth-clients yes), two daemons sharing one of them (exact across
# both), every refusal at start (a wrong CA, a wrong name, no client
# certificate, unreadable files, TLS options without TLS), the insecure
# opt-out and its warning, the server restarted under the daemons, a
# Redis Sentinel over TLS (rediss-sentinel://) and a Redis Cluster over
# TLS.  Everything started is killed in finally.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
for b in redis-server redis-sentinel redis-cli openssl; do
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
tmp = tempfile.mkdtemp()

def run(*argv):
    subprocess.run(argv, check=True, capture_output=True, cwd=tmp)

def make_ca(name):
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key",
        "-out", name + ".crt", "-days", "2", "-subj", "/CN=" + name)

def make_cert(name, ca, san):
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
        "-subj", "/CN=" + name)
    with open(os.path.join(tmp, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % san if san else "basicConstraints=CA:FALSE\n")
    run("openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt",
        "-CAkey", ca + ".key", "-CAcreateserial", "-out", name + ".crt",
        "-days", "2", "-extfile", name + ".ext")

def f(name):
    return os.path.join(tmp, name)

make_ca("ca")
make_ca("otherca")
make_cert("server", "ca", "DNS:redis.test,IP:127.0.0.1")
make_cert("client", "ca", None)
CLIENT = ["--redis-tls-ca", f("ca.crt"), "--redis-tls-cert", f("client.crt"),
          "--redis-tls-key", f("client.key")]

def tls_redis(extra=()):
    """redis-server speaking only TLS on a free port: (proc, port)."""
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    argv = ["redis-server", "--port", "0", "--tls-port", str(port),
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", d, "--tls-cert-file", f("server.crt"),
            "--tls-key-file", f("server.key"), "--tls-ca-cert-file", f("ca.crt"),
            "--tls-auth-clients", "yes"] + list(extra)
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    harness.procs.append(p)
    harness.wait_port(port)
    return p, port, argv

def cli(port, *args):
    return subprocess.run(
        ["redis-cli", "--tls", "--cacert", f("ca.crt"), "--cert", f("client.crt"),
         "--key", f("client.key"), "-p", str(port)] + [str(a) for a in args],
        capture_output=True, text=True, timeout=10).stdout.strip()

L = 20
rules = harness.rules_file(tmp, L)

def fallbacks(n):
    """Decisions the failure policy made on node n, all policies."""
    return sum(float(l.split()[-1]) for l in n.get("/metrics")[1].splitlines()
               if l.startswith("sluice_store_fallback_decisions_total{"))

def node(name, store, *flags):
    """A daemon on store, once its threads have Redis (the failure policy
    would decide before)."""
    n = harness.Node(SLUICE, tmp, name, rules, "--threads", "2",
                     "--store", store, *flags)
    check("%s: Redis up over TLS" % name, n.wait_status("up", 15),
          open(n.log).read()[-1000:])
    return n

def refused(name, store, flags, want, status=1):
    """sluice serve exits at start (1; 2 for a usage error), its message
    naming the problem."""
    p = subprocess.run([SLUICE, "serve", "--rules", rules, "--listen",
                        "127.0.0.1:0", "--store", store] + flags,
                       capture_output=True, text=True, timeout=20)
    check("refused at start: " + name, p.returncode == status and want in p.stderr,
          "status %d, stderr %r (want %r)" % (p.returncode, p.stderr, want))

try:
    redis, port, argv = tls_redis()
    check("the server refuses plain text",
          subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                         text=True, timeout=10).stdout.strip() != "PONG")
    STORE = "rediss://127.0.0.1:%d" % port

    # ---- exact across two nodes, every algorithm ----
    a = node("a", STORE, *CLIENT)
    b = node("b", STORE, *CLIENT, "--redis-tls-server-name", "redis.test")
    for alg in harness.ALGS:
        codes = [(a if i % 2 else b).check(alg, "u1")[0] for i in range(L + 10)]
        check("%s: exactly %d allowed across two nodes over TLS" % (alg, L),
              codes.count(200) == L and codes.count(429) == 10,
              "codes %s" % codes)
    keys = cli(port, "--scan")
    check("the counters are in the TLS-only Redis", "u1" in keys, keys[:200])
    check("both nodes decided on Redis (no failure policy)",
          fallbacks(a) == 0 and fallbacks(b) == 0, (fallbacks(a), fallbacks(b)))

    # ---- the server restarted under them ----
    redis.kill(); redis.wait()
    codes = [a.check("token_bucket", "during-%d" % i)[0] for i in range(5)]
    check("Redis down: answered by the failure policy",
          all(c == 200 for c in codes) and fallbacks(a) >= 5, (codes, fallbacks(a)))
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    harness.procs.append(p)
    harness.wait_port(port)
    check("TLS reconnects after the restart",
          harness.wait_until(lambda: a.store_status() == "up" and
                             b.store_status() == "up", 15),
          "a %s, b %s" % (a.store_status(), b.store_status()))
    codes = [(a if i % 2 else b).check("gcra", "after")[0] for i in range(L + 5)]
    check("exact again after the restart", codes.count(200) == L, codes)
    check("the counter is in Redis again", "after" in cli(port, "--scan"))
    harness.check_exit([a, b])

    # ---- refusals at start ----
    refused("another CA", STORE, ["--redis-tls-ca", f("otherca.crt"),
            "--redis-tls-cert", f("client.crt"), "--redis-tls-key", f("client.key")],
            "certificate refused")
    refused("the system's trust store", STORE, ["--redis-tls-cert", f("client.crt"),
            "--redis-tls-key", f("client.key")], "certificate refused")
    refused("a name the certificate does not have", STORE,
            CLIENT + ["--redis-tls-server-name", "other.test"], "hostname mismatch")
    refused("no client certificate", STORE, ["--redis-tls-ca", f("ca.crt")],
            "the server asks for a client certificate and none is set")
    refused("a CA file that is not there", STORE,
            ["--redis-tls-ca", f("missing.crt")],
            "cannot load the CA file '%s': No such file or directory" % f("missing.crt"))
    refused("a CA file that is not PEM", STORE, ["--redis-tls-ca", rules],
            "cannot load the CA file '%s'" % rules)
    refused("a certificate without its key", STORE,
            ["--redis-tls-ca", f("ca.crt"), "--redis-tls-cert", f("client.crt")],
            "needs both the certificate and its key")
    refused("a key that is not the certificate's", STORE,
            ["--redis-tls-ca", f("ca.crt"), "--redis-tls-cert", f("client.crt"),
             "--redis-tls-key", f("server.key")],
            "cannot load the key '%s': key values mismatch" % f("server.key"))
    refused("TLS options without rediss://", "redis://127.0.0.1:%d" % port,
            ["--redis-tls-ca", f("ca.crt")], "without TLS")
    refused("a bad server name", STORE, CLIENT + ["--redis-tls-server-name", "a b"],
            "--redis-tls-server-name: expected a host name or an address: 'a b'", 2)

    # ---- the insecure opt-out: works against any CA, and says so ----
    c = node("insecure", STORE, "--redis-tls-ca", f("otherca.crt"),
             "--redis-tls-cert", f("client.crt"), "--redis-tls-key", f("client.key"),
             "--redis-tls-insecure", "true")
    codes = [c.check("fixed_window", "ins")[0] for i in range(L + 2)]
    check("--redis-tls-insecure: decided on Redis", codes.count(200) == L and
          "ins" in cli(port, "--scan"), codes)
    check("--redis-tls-insecure is logged loudly",
          "NOT verified" in open(c.log).read())
    harness.check_exit([c])

    # ---- Redis Sentinel over TLS: the Sentinel and the master both ----
    sm, smport, _ = tls_redis(["--tls-replication", "yes"])
    sport = free_port()
    sconf = os.path.join(tmp, "sentinel.conf")
    with open(sconf, "w") as fh:
        fh.write("port 0\ntls-port %d\nbind 127.0.0.1\ndir %s\n"
                 "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                 "tls-auth-clients yes\ntls-replication yes\n"
                 "sentinel monitor mymaster 127.0.0.1 %d 1\n"
                 % (sport, tmp, f("server.crt"), f("server.key"), f("ca.crt"), smport))
    harness.start(["redis-sentinel", sconf], os.path.join(tmp, "sentinel.log"),
                  stdout=subprocess.DEVNULL)
    harness.wait_port(sport)
    check("the TLS Sentinel names the master",
          harness.wait_until(lambda: str(smport) in cli(
              sport, "SENTINEL", "get-master-addr-by-name", "mymaster"), 10))
    s = node("sentinel", "rediss-sentinel://127.0.0.1:%d/mymaster" % sport, *CLIENT)
    codes = [s.check("leaky_bucket", "via-sentinel")[0] for i in range(L + 2)]
    check("rediss-sentinel://: exact on the master the Sentinel names",
          codes.count(200) == L and "via-sentinel" in cli(smport, "--scan"), codes)
    refused("rediss-sentinel:// behind another CA",
            "rediss-sentinel://127.0.0.1:%d/mymaster" % sport,
            ["--redis-tls-ca", f("otherca.crt"), "--redis-tls-cert", f("client.crt"),
             "--redis-tls-key", f("client.key")], "certificate refused")
    harness.check_exit([s])

    # ---- a Redis Cluster over TLS ----
    nodes = [tls_redis(["--cluster-enabled", "yes", "--cluster-config-file",
                        "nodes.conf", "--cluster-node-timeout", "1000",
                        "--cluster-port", str(free_port()), "--tls-cluster", "yes"])
             for _ in range(3)]
    create = subprocess.run(
        ["redis-cli", "--tls", "--cacert", f("ca.crt"), "--cert", f("client.crt"),
         "--key", f("client.key"), "--cluster", "create"] +
        ["127.0.0.1:%d" % n[1] for n in nodes] + ["--cluster-yes"],
        capture_output=True, text=True, timeout=60)
    check("the TLS cluster is created", create.returncode == 0, create.stdout[-500:])
    check("the TLS cluster is ok",
          harness.wait_until(lambda: all("cluster_state:ok" in cli(n[1], "cluster", "info")
                                         for n in nodes), 20))
    CSTORE = "rediss-cluster://127.0.0.1:%d" % nodes[0][1]
    refused("a cluster behind another CA", CSTORE,
            ["--redis-tls-ca", f("otherca.crt"), "--redis-tls-cert", f("client.crt"),
             "--redis-tls-key", f("client.key")], "certificate refused")
    refused("a cluster without our client certificate", CSTORE,
            ["--redis-tls-ca", f("ca.crt")], "asks for a client certificate")
    d = node("cluster", CSTORE, *CLIENT)
    e = node("cluster2", CSTORE, *CLIENT)
    users = ["user-%d" % i for i in range(12)]
    for u in users:
        codes = [(d if i % 2 else e).check("sliding_window", u)[0] for i in range(L + 3)]
        if codes.count(200) != L:
            break
    check("cluster over TLS: exact on keys of every master",
          codes.count(200) == L, "%s: %s" % (u, codes))
    owners = sum(1 for n in nodes if any(u in k for k in cli(n[1], "--scan").split()
                                         for u in users))
    check("the keys are spread over the three masters", owners == 3, owners)
    check("no failure policy on the cluster", fallbacks(d) == 0 and fallbacks(e) == 0)
    harness.check_exit([d, e])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
