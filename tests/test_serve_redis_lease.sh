#!/bin/bash
# Integration test of leases (docs/stores.md, "Leases"): `sluice serve`
# nodes on one real redis-server.  Two nodes hammer one `sync: {mode:
# lease}` fixed_window key of 1 s windows: the 200s of every window (by
# the shared clock of the machine) are at most the limit, and the script
# calls per decision are far below one.  A return into a window that is
# no longer the key's is ignored by the script the nodes loaded.  A node
# killed with -9 while it holds a lease leaves the window's total at most
# the limit.  A rules reload gives the leases back and the new limit holds
# (a new counter) at once.  Two nodes hammer a `sync: {mode: lease}`
# token_bucket key: the 200s of every stretch of time are at most what
# the bucket allows (B plus the rate times its length), with few script
# calls per decision; a node killed with -9 while it holds a bucket's
# lease leaves the bucket within its bound.  Three nodes at once on a
# fixed_window key and a gcra key: within the limit, the bucket.  Redis
# stopped: a lease's units are allowed, other checks get the failure
# policy's 503; a grant whose reply came after its call timed out, or
# after its client left, is given back (the window allows 99 of its 100);
# one whose connection the breaker dropped is lost, at most a lease's
# worth.  --lease-bytes 0 takes no
# lease; the memory store accepts the setting and decides exactly; `sluice
# serve` refuses what `sluice validate` refuses, with the same message.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import http.client, json, os, socket, subprocess, sys, tempfile, threading, time
from collections import Counter

sys.path.insert(0, os.path.join(sys.argv[2], "tests/sh"))
import harness
from harness import check, wait_until

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
HOT_L, KILL_L = 300, 200
TB_RATE, TB_B = 200, 100          # tb: 200/s, a burst of 100
TBK_RATE, TBK_B = 10, 200         # tbkill: 10/s, a burst of 200


def write_rules(rl_limit):
    path = tmp + "/rules.yaml"
    with open(path, "w") as f:
        f.write("domain: test\ndescriptors:\n"
                "  - key: hot\n    rate_limit: {algorithm: fixed_window, unit: second, "
                "requests_per_unit: %d, sync: {mode: lease, lease_share: 0.1}}\n"
                "  - key: kill\n    rate_limit: {algorithm: fixed_window, unit: hour, "
                "requests_per_unit: %d, sync: {mode: lease, lease_share: 0.2}}\n"
                "  - key: rl\n    rate_limit: {algorithm: fixed_window, unit: hour, "
                "requests_per_unit: %d, sync: {mode: lease, lease_share: 0.5}}\n"
                "  - key: tb\n    rate_limit: {algorithm: token_bucket, unit: second, "
                "requests_per_unit: %d, burst: %d, sync: {mode: lease, lease_share: 0.1}}\n"
                "  - key: tbkill\n    rate_limit: {algorithm: gcra, unit: second, "
                "requests_per_unit: %d, burst: %d, sync: {mode: lease, lease_share: 0.2}}\n"
                "  - key: g3\n    rate_limit: {algorithm: gcra, unit: second, "
                "requests_per_unit: %d, burst: %d, sync: {mode: lease, lease_share: 0.1}}\n"
                "  - key: down\n    rate_limit: {algorithm: fixed_window, unit: hour, "
                "requests_per_unit: 100, sync: {mode: lease, lease_share: 0.5}}\n"
                % (HOT_L, KILL_L, rl_limit, TB_RATE, TB_B, TBK_RATE, TBK_B, TB_RATE, TB_B))
    return path


def resp(port, *args):
    """One Redis command over a raw socket: its reply, parsed."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(("*%d\r\n" % len(args) + "".join(
        "$%d\r\n%s\r\n" % (len(str(a)), a) for a in args)).encode())
    f = s.makefile("rb")

    def read():
        line = f.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else f.read(n + 2)[:-2].decode()
        if kind == b"*":
            return [read() for _ in range(int(rest))]
        if kind == b":":
            return int(rest)
        return rest.decode()
    r = read()
    s.close()
    return r


def hammer(nodes, key, value, secs, per_node=3):
    """Requests from per_node keep-alive clients per node for secs: a list
    of (sent, answered, status)."""
    out, lock = [], threading.Lock()
    body = json.dumps({"domain": "test", "descriptors": [
        {"entries": [{"key": key, "value": value}]}]})

    def run(node):
        c = http.client.HTTPConnection("127.0.0.1", node.port, timeout=10)
        mine, end = [], time.time() + secs
        while time.time() < end:
            t0 = time.time()
            c.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            mine.append((t0, time.time(), r.status))
        with lock:
            out.extend(mine)
    ts = [threading.Thread(target=run, args=(n,)) for n in nodes for _ in range(per_node)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out


def m(node, name):
    return node.metric(name) or 0


def no_fallback(nodes, label):
    """Checks that the failure policy decided nothing on nodes."""
    got = {n.name: m(n, 'sluice_store_fallback_decisions_total{policy="local"}')
           for n in nodes}
    check("%s: every decision was Redis's or a lease's" % label,
          not any(got.values()), got)


def off_the_hour():
    """The kill rule's window is the hour (windows aligned to time 0):
    a section that counts one window's 200s starts at least 15 s before
    its end, or just after it."""
    left = 3600 - time.time() % 3600
    if left < 15:
        time.sleep(left + 1)


def over_bucket(res, rate, burst):
    """The stretches [s, e] of the run whose 200s (sent at or after s,
    answered by e) are more than burst + rate * (e - s): a list."""
    ok = sorted((t0, t1) for t0, t1, s in res if s == 200)
    bad = []
    for i, (s, _) in enumerate(ok):
        # The n answered first of those sent from s on: n in [s, their last].
        for n, e in enumerate(sorted(t1 for _, t1 in ok[i:]), 1):
            if n > burst + rate * (e - s) + 1:
                bad.append((s, e, n))
                break
    return bad


try:
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    # A sanitizer build on a busy machine can be slow to answer: a timeout
    # of 2 s keeps the failure policy (which may admit past the limit,
    # docs/server.md) out of the sections that count; no_fallback() checks.
    SLOW_OK = ("--threads", "1", "--store", store, "--redis-timeout", "2s")
    rules = write_rules(50)
    a = harness.Node(SLUICE, tmp, "a", rules, *SLOW_OK)
    b = harness.Node(SLUICE, tmp, "b", rules, *SLOW_OK)
    for n in (a, b):
        check("%s connects to Redis" % n.name, n.wait_status("up", 10))

    # ---- one hot key, two nodes: never past the limit in a window ----
    calls0 = m(a, "sluice_store_calls_total") + m(b, "sluice_store_calls_total")
    res = hammer((a, b), "hot", "k", 4.0)
    calls = m(a, "sluice_store_calls_total") + m(b, "sluice_store_calls_total") - calls0
    per_window = Counter(int(t0) for t0, t1, s in res if s == 200 and int(t0) == int(t1))
    refused = Counter(int(t0) for t0, t1, s in res if s == 429)
    check("hot: every window's 200s at most %d" % HOT_L,
          max(per_window.values()) <= HOT_L, sorted(per_window.items()))
    full = [w for w in per_window if refused[w] > 0]
    check("hot: windows were asked for more than the limit", len(full) >= 2,
          (sorted(per_window.items()), sorted(refused.items())))
    local = m(a, "sluice_lease_local_total") + m(b, "sluice_lease_local_total")
    allowed = sum(1 for r in res if r[2] == 200)
    check("hot: both nodes allowed from leases",
          m(a, "sluice_lease_local_total") > 0 and m(b, "sluice_lease_local_total") > 0,
          local)
    check("hot: script calls per decision far below 1 (%d calls, %d decisions)"
          % (calls, len(res)), calls / len(res) < 0.05, (calls, len(res), allowed, local))

    # ---- a token_bucket key, two nodes: never past the bucket ----
    calls0 = m(a, "sluice_store_calls_total") + m(b, "sluice_store_calls_total")
    local0 = m(a, "sluice_lease_local_total") + m(b, "sluice_lease_local_total")
    res = hammer((a, b), "tb", "k", 3.0)
    calls = m(a, "sluice_store_calls_total") + m(b, "sluice_store_calls_total") - calls0
    local = m(a, "sluice_lease_local_total") + m(b, "sluice_lease_local_total") - local0
    ok = sum(1 for r in res if r[2] == 200)
    span = max(r[1] for r in res) - min(r[0] for r in res)
    check("tb: no stretch of time past B + rate * its length",
          not over_bucket(res, TB_RATE, TB_B), over_bucket(res, TB_RATE, TB_B)[:3])
    check("tb: refused past the rate", ok < len(res), (ok, len(res)))
    check("tb: allowed close to B + rate * %.1f s (%d of %d)"
          % (span, ok, TB_B + TB_RATE * span), ok >= 0.8 * (TB_B + TB_RATE * span),
          (ok, len(res)))
    no_fallback((a, b), "hot and tb")
    check("tb: decided from leases, %d script calls for %d decisions"
          % (calls, len(res)), local > 0 and calls / len(res) < 0.5,
          (calls, len(res), local))

    # ---- three nodes at once: a window's key, a bucket's (gcra) ----
    e = harness.Node(SLUICE, tmp, "e", rules, *SLOW_OK)
    check("e connects to Redis", e.wait_status("up", 10))
    nodes3 = (a, b, e)

    def calls3():
        return sum(m(n, "sluice_store_calls_total") for n in nodes3)
    c0 = calls3()
    res = hammer(nodes3, "hot", "three", 3.0, per_node=2)
    calls = calls3() - c0
    per_window = Counter(int(t0) for t0, t1, s in res if s == 200 and int(t0) == int(t1))
    refused = Counter(int(t0) for t0, t1, s in res if s == 429)
    check("three nodes, hot: every window's 200s at most %d" % HOT_L,
          max(per_window.values()) <= HOT_L, sorted(per_window.items()))
    check("three nodes, hot: windows were asked for more than the limit",
          sum(1 for w in per_window if refused[w] > 0) >= 2,
          (sorted(per_window.items()), sorted(refused.items())))
    check("three nodes, hot: script calls per decision at most 0.05 (%d calls, %d decisions)"
          % (calls, len(res)), calls / len(res) <= 0.05, (calls, len(res)))
    local0 = [m(n, "sluice_lease_local_total") for n in nodes3]
    res = hammer(nodes3, "g3", "three", 3.0, per_node=2)
    ok = sum(1 for r in res if r[2] == 200)
    span = max(r[1] for r in res) - min(r[0] for r in res)
    check("three nodes, gcra: no stretch of time past B + rate * its length",
          not over_bucket(res, TB_RATE, TB_B), over_bucket(res, TB_RATE, TB_B)[:3])
    check("three nodes, gcra: refused past the rate", ok < len(res), (ok, len(res)))
    no_fallback(nodes3, "three nodes")
    check("three nodes, gcra: each node allowed from leases",
          all(m(n, "sluice_lease_local_total") > l0 for n, l0 in zip(nodes3, local0)),
          local0)

    # ---- a return into a newer window is ignored by the script ----
    fn = resp(redis.port, "FUNCTION", "LIST")[0][1]  # the nodes' library
    key = "lease-test:{late}"
    resp(redis.port, "SET", key, "1795937800 0 7")
    late = resp(redis.port, "FCALL", fn, 1, key, "R", 5, 1795937799, 0)
    check("a late return takes nothing back", late == [0] and
          resp(redis.port, "GET", key) == "1795937800 0 7", (late, resp(redis.port, "GET", key)))
    back = resp(redis.port, "FCALL", fn, 1, key, "R", 5, 1795937800, 0)
    check("a return into its own window does", back == [5] and
          resp(redis.port, "GET", key) == "1795937800 0 2", (back, resp(redis.port, "GET", key)))

    # ---- kill -9 of a node holding a lease: the window stays within ----
    off_the_hour()
    c = harness.Node(SLUICE, tmp, "c", rules, *SLOW_OK)
    check("c connects to Redis", c.wait_status("up", 10))
    res_c = hammer((c,), "kill", "k", 0.3, per_node=2)
    held = m(c, "sluice_lease_units_granted_total") - m(c, "sluice_lease_local_total") \
        - m(c, "sluice_lease_units_returned_total") - m(c, "sluice_lease_units_lost_total")
    c.p.kill()
    c.p.wait()
    res_ab = hammer((a, b), "kill", "k", 1.0)
    total = sum(1 for r in res_c + res_ab if r[2] == 200)
    check("kill -9: the window's total at most %d" % KILL_L, total <= KILL_L,
          (total, held))
    check("kill -9: short of it by at most the killed node's lease (%d)" % (KILL_L // 5),
          total >= KILL_L - KILL_L // 5, (total, held))

    # ---- kill -9 of a node holding a bucket's lease ----
    d = harness.Node(SLUICE, tmp, "d", rules, *SLOW_OK)
    check("d connects to Redis", d.wait_status("up", 10))
    t_start = time.time()
    res_d = hammer((d,), "tbkill", "k", 0.3, per_node=2)
    held = m(d, "sluice_lease_units_granted_total") - m(d, "sluice_lease_local_total") \
        - m(d, "sluice_lease_units_returned_total") - m(d, "sluice_lease_units_lost_total")
    d.p.kill()
    d.p.wait()
    res_ab = hammer((a, b), "tbkill", "k", 1.5)
    both = res_d + res_ab
    total = sum(1 for r in both if r[2] == 200)
    most = TBK_B + TBK_RATE * (max(r[1] for r in both) - t_start)
    check("kill -9 (gcra): within the bucket (%d of at most %.0f)" % (total, most),
          not over_bucket(both, TBK_RATE, TBK_B), (total, held))
    check("kill -9 (gcra): short of it by at most the killed node's lease",
          total >= TBK_B - TBK_B // 5 - 2, (total, held, most))

    # ---- a reload gives leases back; the new numbers hold at once ----
    # Five requests: the fourth takes a lease (four units seen a moment
    # apart: the key's rate is high), the fifth uses it; the rest is held.
    before = sum(1 for _ in range(5) if a.check("rl", "r")[0] == 200)
    check("rl: a lease held", m(a, "sluice_lease_units_granted_total") -
          m(a, "sluice_lease_local_total") > 0)
    returned = m(a, "sluice_lease_units_returned_total")
    reloads = m(a, 'sluice_rules_reloads_total{result="ok"}')
    write_rules(10)
    os.kill(a.p.pid, 1)  # SIGHUP
    check("rl: reloaded", wait_until(
        lambda: m(a, 'sluice_rules_reloads_total{result="ok"}') > reloads, 10))
    # (The reload is counted on the main thread; the loop thread adopts
    # the new rules, and gives its leases back, on its next turn.)
    check("rl: the leases went back", wait_until(
        lambda: m(a, "sluice_lease_units_returned_total") > returned, 5),
          (returned, m(a, "sluice_lease_units_returned_total")))
    after = sum(1 for r in hammer((a,), "rl", "r", 0.3, per_node=1) if r[2] == 200)
    # New numbers are a new limit (its own counter, stores.md): exactly
    # its 10, none of them from the old lease.
    check("rl: after the reload, exactly the new limit's 10",
          before == 5 and after == 10, (before, after))

    # ---- Redis slow or down.  A lease is Redis's grant, used while it
    # is silent; a grant whose reply comes after its call timed out, or
    # after its client left, is given back; one whose connection was
    # dropped (the breaker opened) is lost: at most one lease a key ----
    dn = harness.Node(SLUICE, tmp, "dn", rules, "--threads", "1", "--store", store,
                      "--redis-failure", "fail_closed", "--redis-timeout", "100ms")
    check("dn connects to Redis", dn.wait_status("up", 10))
    off_the_hour()

    def lease_then_stop(value):
        """Five checks (the fourth takes a lease), then Redis stopped:
        the units held."""
        g0, l0 = (m(dn, "sluice_lease_units_granted_total"),
                  m(dn, "sluice_lease_local_total"))
        first = [dn.check("down", value)[0] for _ in range(5)]
        held = int(m(dn, "sluice_lease_units_granted_total") - g0 -
                   (m(dn, "sluice_lease_local_total") - l0))
        check("down %s: a lease held before Redis stops" % value,
              first == [200] * 5 and held > 0, (first, held))
        os.kill(redis.proc.pid, 19)  # SIGSTOP
        return held

    def window_total(value, before):
        """What the key's window allows after: its total with before."""
        return before + sum(1 for _ in range(120) if dn.check("down", value)[0] == 200)

    def given_back(value, what, returns, held):
        """what is given back once Redis resumes; the key's window then
        allows the rest of its 100 but the unit of the call not learnt
        (counted by Redis): 99."""
        check("down %s: %s is given back" % (value, what), wait_until(
            lambda: m(dn, "sluice_lease_units_returned_total") > returns, 5))
        total = window_total(value, 5 + held)
        check("down %s: the window allows the rest of its 100 (%d)" % (value, total),
              95 <= total <= 99, total)

    # One call times out (the breaker stays closed, the connection with
    # it); its reply, with the lease it asked, comes once Redis resumes.
    try:
        held = lease_then_stop("slow")
        used = [dn.check("down", "slow")[0] for _ in range(held)]
        returns = m(dn, "sluice_lease_units_returned_total")
        late = dn.check("down", "slow")[0]
    finally:
        os.kill(redis.proc.pid, 18)  # SIGCONT
    check("down slow: the lease's %d units allowed, then the policy's 503" % held,
          used == [200] * held and late == 503, (Counter(used), late))
    given_back("slow", "the late reply's grant", returns, held)

    # A client gone while its call waits: its grant is given back too.
    try:
        held = lease_then_stop("gone")
        used = [dn.check("down", "gone")[0] for _ in range(held)]
        returns = m(dn, "sluice_lease_units_returned_total")
        body = json.dumps({"domain": "test", "descriptors": [{"entries": [
            {"key": "down", "value": "gone"}]}]}).encode()
        s = socket.create_connection(("127.0.0.1", dn.port), 5)
        s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.05)
        s.close()
        time.sleep(0.05)
    finally:
        os.kill(redis.proc.pid, 18)
    given_back("gone", "the cancelled call's grant", returns, held)

    # Redis stopped long enough to open the breaker: the lease's units
    # are allowed, everything else is the failure policy's.
    try:
        held = lease_then_stop("k")
        t0 = time.time()
        during = [dn.check("down", "k")[0] for _ in range(held + 5)]
        other = [dn.check("down", "other")[0] for _ in range(3)]
        took = time.time() - t0
    finally:
        os.kill(redis.proc.pid, 18)
    check("down: the lease's %d units allowed, then the policy's 503s" % held,
          during == [200] * held + [503] * 5, Counter(during))
    check("down: a key with no lease gets the policy's 503", other == [503] * 3, other)
    check("down: all answered within the timeouts (%.1f s)" % took, took < 5, took)
    check("down: Redis back, a key is decided by it again", wait_until(
        lambda: dn.check("down", "again")[0] == 200, 10))
    # The breaker dropped the connection, and the replies on it: what the
    # timed-out calls were granted is lost, at most one lease (50).
    total = window_total("k", 5 + held)
    check("down: the window's total within its 100, short by at most a lease "
          "and the timed-out calls (%d)" % total, 100 - 50 - 5 <= total <= 100, total)

    # ---- --lease-bytes 0; the memory store ----
    off = harness.Node(SLUICE, tmp, "off", rules, "--threads", "1", "--store", store,
                       "--lease-bytes", "0")
    check("off connects to Redis", off.wait_status("up", 10))
    hammer((off,), "hot", "off", 0.3, per_node=2)
    check("--lease-bytes 0: no lease, no local decision",
          m(off, "sluice_lease_grants_total") == 0 and m(off, "sluice_lease_local_total") == 0)
    mem = harness.Node(SLUICE, tmp, "mem", rules, "--threads", "1")
    off_the_hour()
    codes = [mem.check("kill", "mem")[0] for _ in range(KILL_L + 1)]
    check("the memory store: the setting accepted, decisions exact",
          codes == [200] * KILL_L + [429], Counter(codes))

    # ---- serve refuses what validate refuses, alike ----
    bad = tmp + "/bad.yaml"
    with open(bad, "w") as f:
        f.write("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n"
                "      unit: second\n      algorithm: leaky_bucket\n"
                "      sync: {mode: lease}\n      requests_per_unit: 5\n")
    v = subprocess.run([SLUICE, "validate", bad], capture_output=True, text=True)
    s = subprocess.run([SLUICE, "serve", "--rules", bad, "--store", store, "--listen",
                        "127.0.0.1:0"], capture_output=True, text=True, timeout=20)
    want = bad + (":7:20: sync: mode lease needs algorithm fixed_window, token_bucket "
                  "or gcra, not leaky_bucket")
    check("validate refuses sync on leaky_bucket at 7:20",
          v.returncode == 2 and want in v.stderr, v.stderr)
    check("serve refuses it with the same message", s.returncode != 0 and want in s.stderr,
          s.stderr)
    harness.check_exit([a, b, e, dn, off, mem])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
