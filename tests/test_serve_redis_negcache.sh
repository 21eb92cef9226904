#!/bin/bash
# Integration test of the negative cache (docs/stores.md, "The negative
# cache"): two `sluice serve` nodes on one real redis-server.  A key
# refused by Redis is answered by each node without a script call (Redis's
# INFO commandstats) for every algorithm, and the first request allowed
# again comes no earlier than the bucket's own arithmetic allows, nor is
# any refused past it; a refused cost does not refuse a smaller one; an
# override and a rules reload are honoured at once; --negative-cache-bytes
# 0 sends every request; `sluice proxy` answers the same way; bad values
# of the flag are refused.  Times are bounds from observed times, never
# sleeps.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, socket, subprocess, sys, tempfile, time
import urllib.error, urllib.parse, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests/sh"))
import harness
from harness import check, wait_until

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
TOKEN = "negcache-admin-token-0123456789abcdef"
token_file = os.path.join(tmp, "token")
open(token_file, "w").write(TOKEN + "\n")
os.chmod(token_file, 0o600)

T = 5.0  # the hot rule's emission interval: 12 a minute
rules = harness.rules_file(tmp, 3,
    "  - key: hot\n    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 12}\n"
    "  - key: cost\n    rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 10}\n"
    "  - key: ov\n    rate_limit: {algorithm: fixed_window, unit: hour, requests_per_unit: 2}\n"
    "  - key: rl\n    rate_limit: {algorithm: gcra, unit: hour, requests_per_unit: 2}\n")


def script_calls(port):
    """Redis's count of decision script calls (FCALL, or EVALSHA)."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(b"INFO commandstats\r\n")
    data = b""
    while b"\r\n" not in data or len(data) < data.index(b"\r\n") + 2 + int(data[1:data.index(b"\r\n")]):
        data += s.recv(65536)
    s.close()
    return sum(int(m) for m in re.findall(rb"cmdstat_(?:fcall|evalsha):calls=(\d+)", data))


def hits(node):
    return node.metric("sluice_negative_cache_hits_total") or 0


try:
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    a = harness.Node(SLUICE, tmp, "a", rules, "--threads", "1", "--store", store,
                     "--admin-listen", "127.0.0.1:0", "--admin-token-file", token_file)
    admin = a.door_port("admin")
    b = harness.Node(SLUICE, tmp, "b", rules, "--threads", "1", "--store", store)
    off = harness.Node(SLUICE, tmp, "off", rules, "--threads", "1", "--store", store,
                       "--negative-cache-bytes", "0")
    for n in (a, b, off):
        check("%s connects to Redis" % n.name, n.wait_status("up", 10))
        # Its first read of the overrides adopts a rules set, which drops
        # the cache: after it, only a change does.
        age = lambda: n.metric("sluice_overrides_sync_age_seconds")
        check("%s read the overrides" % n.name,
              wait_until(lambda: age() is not None and age() >= 0, 10))

    # ---- every algorithm: refused once, then answered without Redis ----
    entries = []
    for alg in harness.ALGS:
        v = "abuser-" + alg
        codes = [a.check(alg, v)[0] for _ in range(4)]
        check("%s: 3 allowed, then refused by Redis" % alg, codes == [200] * 3 + [429], codes)
        h0, c0 = hits(a), script_calls(redis.port)
        codes = [a.check(alg, v)[0] for _ in range(10)]
        c1 = script_calls(redis.port)
        check("%s: 10 more on the node that saw the refusal: refused, no script call" % alg,
              codes == [429] * 10 and c1 == c0 and hits(a) - h0 == 10,
              (codes, c1 - c0, hits(a) - h0))
        first = b.check(alg, v)
        rest = [b.check(alg, v) for _ in range(10)]
        c2 = script_calls(redis.port)
        check("%s: the other node asks Redis once, then answers itself" % alg,
              first[0] == 429 and all(r[0] == 429 for r in rest) and c2 - c1 == 1,
              (first[0], [r[0] for r in rest], c2 - c1))
        ra = lambda r: int(r[2].get("Retry-After", "-1"))
        check("%s: the node's answers carry remaining 0 and a Retry-After no later than Redis's"
              % alg, all(r[2].get("X-RateLimit-Remaining") == "0" and 0 <= ra(r) <= ra(first)
                         for r in rest), (ra(first), [dict(r[2]) for r in rest[:1]]))
        entries.append(a.metric("sluice_negative_cache_entries"))

    check("entries are counted, one more per algorithm", entries == list(range(1, 8)), entries)

    # ---- with the flag 0, every request is a script call ----
    codes = [off.check("fixed_window", "off")[0] for _ in range(4)]
    c0 = script_calls(redis.port)
    codes += [off.check("fixed_window", "off")[0] for _ in range(10)]
    c1 = script_calls(redis.port)
    check("--negative-cache-bytes 0: each refused request asks Redis",
          codes == [200] * 3 + [429] * 11 and c1 - c0 == 10 and hits(off) == 0,
          (codes, c1 - c0, hits(off)))

    # ---- one key driven over its limit by two nodes, hammered until it passes ----
    t0 = time.monotonic()
    first_reply = None
    codes = []
    for i in range(12):
        codes.append((a if i % 2 else b).check("hot", "h")[0])
        if first_reply is None:
            first_reply = time.monotonic()
    drained = time.monotonic()
    check("hot: 12 allowed by the two nodes, well within T", codes == [200] * 12 and
          drained - t0 < T / 2, (codes, drained - t0))
    learn = [a.check("hot", "h")[0], b.check("hot", "h")[0]]
    c0 = script_calls(redis.port)
    hammered = []
    while time.monotonic() < t0 + T / 2:
        hammered.append((a if len(hammered) % 2 else b).check("hot", "h")[0])
    c1 = script_calls(redis.port)
    check("hot: hammered on both nodes until T/2: all refused, no script call (%d requests)"
          % len(hammered), learn == [429, 429] and set(hammered) == {429} and c1 == c0,
          (learn, set(hammered), c1 - c0))
    allowed_at = None
    last_refused_sent = None
    while time.monotonic() < t0 + 6 * T:
        sent = time.monotonic()
        st = (a if len(hammered) % 2 else b).check("hot", "h")[0]
        hammered.append(st)
        if st == 200:
            allowed_at = time.monotonic()
            break
        last_refused_sent = sent
    check("hot: the first allowed answer comes no earlier than the first drain + T",
          allowed_at is not None and allowed_at >= t0 + T,
          (allowed_at and allowed_at - t0, T))
    check("hot: no request sent after the first drain's answer + T was refused",
          last_refused_sent is not None and last_refused_sent < first_reply + T,
          (last_refused_sent and last_refused_sent - first_reply, T))

    # ---- cost: a refused 5 does not refuse a 1 ----
    r = [a.check("cost", "c", 8)[0], a.check("cost", "c", 5)[0]]
    h0, c0 = hits(a), script_calls(redis.port)
    r += [a.check("cost", "c", 5)[0], a.check("cost", "c", 6)[0]]
    c1 = script_calls(redis.port)
    r.append(a.check("cost", "c", 1)[0])
    c2 = script_calls(redis.port)
    check("cost: 8 allowed, 5 refused; 5 and 6 answered by the node; 1 asks Redis and passes",
          r == [200, 429, 429, 429, 200] and c1 == c0 and hits(a) - h0 == 2 and c2 - c1 == 1,
          (r, c1 - c0, hits(a) - h0, c2 - c1))

    # ---- an override raising the limit is honoured at once ----
    r = [a.check("ov", "o")[0] for _ in range(4)]
    check("ov: 2 allowed, then refused (the second from the cache)", r == [200, 200, 429, 429], r)
    st, body = None, None
    lim = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/admin/v1/limits" % admin,
                                            timeout=10).read())
    rid = next(x["id"] for x in lim["limits"] if x["id"].endswith(".ov"))
    req = urllib.request.Request(
        "http://127.0.0.1:%d/admin/v1/overrides/%s" % (admin, urllib.parse.quote(rid, safe="")),
        json.dumps({"requests_per_unit": 10}).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN}, method="PUT")
    st = urllib.request.urlopen(req, timeout=10).status
    r = a.check("ov", "o")[0]
    check("ov: after PUT override to 10, the next request passes", st == 201 and r == 200, (st, r))

    # ---- a rules reload raising the limit is honoured at once ----
    r = [a.check("rl", "r")[0] for _ in range(4)]
    check("rl: 2 allowed, then refused", r == [200, 200, 429, 429], r)
    text = open(rules).read().replace("gcra, unit: hour, requests_per_unit: 2",
                                      "gcra, unit: hour, requests_per_unit: 10")
    open(rules, "w").write(text)
    reloads = a.metric('sluice_rules_reloads_total{result="ok"}') or 0
    os.kill(a.p.pid, 1)  # SIGHUP
    check("rl: reloaded", wait_until(lambda: (a.metric('sluice_rules_reloads_total{result="ok"}') or 0) > reloads, 10))
    r = a.check("rl", "r")[0]
    check("rl: after the reload to 10, the next request passes", r == 200, r)

    # ---- sluice proxy decides through the same layer ----
    up_port = harness.free_port()
    harness.procs.append(subprocess.Popen(
        [sys.executable, os.path.join(sys.argv[2], "tests/proxy/upstream.py"), str(up_port),
         os.path.join(tmp, "upstream.log")]))
    harness.wait_port(up_port)
    px = harness.Daemon("proxy", [SLUICE, "proxy", "--config",
                                  os.path.join(sys.argv[2], "tests/proxy/redis.yaml"),
                                  "--rules", os.path.join(sys.argv[2], "tests/proxy/redis_rules.yaml"),
                                  "--upstream", "http://127.0.0.1:%d" % up_port,
                                  "--threads", "1", "--store", store], tmp)

    def via_proxy(key="abuser"):
        r = urllib.request.Request("http://127.0.0.1:%d/api/x" % px.port,
                                   headers={"X-Api-Key": key})
        try:
            return urllib.request.urlopen(r, timeout=10).status
        except urllib.error.HTTPError as e:
            return e.code
    # Connected means deciding on Redis: until the proxy's connection is
    # up its failure policy answers, and a request it allowed would not
    # count in Redis.
    def on_redis():
        before = script_calls(redis.port)
        return via_proxy("probe") == 200 and script_calls(redis.port) > before
    check("proxy connects", wait_until(on_redis, 10))
    via_proxy()  # the abuser's first
    codes = [via_proxy() for _ in range(20)]
    c0 = script_calls(redis.port)
    codes += [via_proxy() for _ in range(10)]
    c1 = script_calls(redis.port)
    check("proxy: 20 pass, then 429s answered without a script call",
          codes == [200] * 19 + [429] * 11 and c1 == c0, (codes, c1 - c0))

    # ---- bad values of the flag ----
    for bad, want in (("-1", "negative-cache-bytes"), ("lots", "negative-cache-bytes"),
                      ("100", "is less than 1024 bytes for each of the")):
        p = subprocess.run([SLUICE, "serve", "--rules", rules, "--threads", "1", "--store", store,
                            "--listen", "127.0.0.1:0", "--negative-cache-bytes", bad],
                           capture_output=True, text=True, timeout=20)
        check("--negative-cache-bytes %s is refused: %s" % (bad, want),
              p.returncode != 0 and want in p.stderr, (p.returncode, p.stderr[-300:]))

    harness.check_exit([a, b, off, px])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
