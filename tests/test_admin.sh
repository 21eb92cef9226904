#!/bin/bash
# Integration test of the admin API and the runtime limits (docs/admin.md):
# overrides set through `sluice serve --admin-listen` change a rule's limit
# without resetting its counters (every algorithm: 80 used of 100 leaves
# 70 of 150), with a bearer token, If-Match, expiry, a reload that makes
# an override stale, the change log and /metrics; then two daemons sharing
# one real redis-server apply an override set on one of them within 2 s
# and count it exactly across both, and keep their last table while Redis
# is down.  `sluice limits` drives the same API.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, subprocess, sys, tempfile, time
import urllib.error, urllib.parse, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
TOKEN = "t0ken-for-the-admin-api-0123456789"
token_file = os.path.join(tmp, "token")
open(token_file, "w").write(TOKEN + "\n")
# domain "test": a rule per algorithm, and one the advisor may move
rules = harness.rules_file(
    tmp, 100, "  - key: adaptive\n    rate_limit: {unit: hour, requests_per_unit: 100, "
              "adaptive: {min: 50, max: 300}}\n"
              "  - key: adaptive_tb\n    rate_limit: {algorithm: token_bucket, unit: hour, "
              "requests_per_unit: 100, burst: 20, adaptive: {min: 50, max: 300}}\n")


class Node(harness.Node):
    def __init__(self, name, *flags):
        super().__init__(SLUICE, tmp, name, rules, "--threads", "2",
                         "--admin-listen", "127.0.0.1:0",
                         "--admin-token-file", token_file, *flags)
        m = None
        for _ in range(200):
            m = re.search(r"admin listening on 127\.0\.0\.1:(\d+)", open(self.log).read())
            if m:
                break
            time.sleep(0.025)
        self.admin = int(m.group(1))

    def api(self, method, path, body=None, token=TOKEN, headers=None):
        """(status, JSON body or None, headers) of an admin API call."""
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.admin, path),
                                     data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw, st, hd = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            raw, st, hd = e.read(), e.code, e.headers
        return st, (json.loads(raw) if raw else None), hd

    def put(self, rule, body, **kw):
        return self.api("PUT", "/admin/v1/overrides/" + urllib.parse.quote(rule, safe=""),
                        body, **kw)

    def delete(self, rule, **kw):
        return self.api("DELETE", "/admin/v1/overrides/" + urllib.parse.quote(rule, safe=""),
                        **kw)

    def remaining(self, alg, hits=0):
        st, body, hdrs, _ = self.check(alg, "client-1", hits)
        return st, body["descriptors"][0].get("remaining"), hdrs

    def in_force(self, rule_id):
        st, rules_body = self.get("/v1/rules")
        for r in json.loads(rules_body)["rules"]:
            if r["id"] == rule_id:
                return r
        return None


try:
    os.chmod(token_file, 0o644)
    node = Node("a")
    check("a token file others can read is said in the log",
          "--admin-token-file %s: mode 644 lets other users read it" % token_file
          in open(node.log).read(), open(node.log).read()[-400:])
    os.chmod(token_file, 0o600)
    quiet = Node("quiet")
    check("a 0600 token file is not", "lets other users read" not in open(quiet.log).read(),
          open(quiet.log).read()[-400:])
    harness.check_exit([quiet])
    st, body, _ = node.api("GET", "/admin/v1/limits", token=None)
    ids = [r["id"] for r in body["limits"]] if st == 200 else []
    check("loopback reads need no token; every rule has an id",
          st == 200 and set(harness.ALGS) <= {i.split(".")[-1] for i in ids}, (st, body))
    rid = {a: next(i for i in ids if i.endswith("." + a)) for a in harness.ALGS}

    # ---- authentication ----
    st, body, hd = node.put(rid["gcra"], {"requests_per_unit": 150}, token=None)
    check("a write without a token: 401 EAUTH", st == 401 and body["error"]["code"] == "EAUTH"
          and "Bearer" in hd.get("WWW-Authenticate", ""), (st, body))
    st, body, _ = node.put(rid["gcra"], {"requests_per_unit": 150}, token="wrong" * 8)
    check("a wrong token: 401, nothing changed",
          st == 401 and node.in_force(rid["gcra"])["requests_per_unit"] == 100, (st, body))
    check("the public listener has no admin API", node.get("/admin/v1/limits")[0] == 404)

    # ---- 80 of 100 used: 70 left under 150, none under 60, 20 back at 100 ----
    for alg in harness.ALGS:
        node.check(alg, "client-1", 80)
        st, left, _ = node.remaining(alg)
        check("%s: 80 of 100 used: 20 left" % alg, left == 20, (st, left))
        st, body, hd = node.put(rid[alg], {"requests_per_unit": 150, "reason": "sale"})
        check("%s: override to 150: 201 with an ETag" % alg,
              st == 201 and re.match(r'^"\d+"$', hd.get("ETag", "")), (st, body))
        st, left, hdrs = node.remaining(alg)
        check("%s: 70 of 150 left, no credit minted or lost" % alg, left == 70, (st, left))
        check("%s: X-RateLimit-Limit shows the effective 150" % alg,
              hdrs.get("X-RateLimit-Limit") == "150", dict(hdrs))
        etag = hd["ETag"]
        st, body, _ = node.put(rid[alg], {"requests_per_unit": 60})
        check("%s: a write without If-Match over an override: 428" % alg, st == 428, (st, body))
        st, body, _ = node.put(rid[alg], {"requests_per_unit": 60}, headers={"If-Match": '"999999"'})
        check("%s: a stale If-Match: 412, nothing changed" % alg,
              st == 412 and node.remaining(alg)[1] == 70, (st, body))
        st, body, hd = node.put(rid[alg], {"requests_per_unit": 60}, headers={"If-Match": etag})
        st2, left, _ = node.remaining(alg)
        check("%s: down to 60: 0 left, not negative" % alg, st == 200 and left == 0, (st, left))
        st = node.check(alg, "client-1", 1)[0]
        check("%s: and the next request is limited" % alg, st == 429, st)
        st, body, _ = node.delete(rid[alg], headers={"If-Match": hd["ETag"]})
        # A bucket read under the lower burst forgave the 20 units over it
        # (docs/algorithms.md, "What a decrease forgives"); the windows
        # keep their count.
        back = 40 if alg in ("token_bucket", "gcra", "leaky_bucket") else 20
        check("%s: delete with If-Match: 204; %d of 100 left again" % (alg, back),
              st == 204 and node.remaining(alg)[1] == back, (st, node.remaining(alg)))

    # ---- bad input ----
    for body_, want in [({"requests_per_unit": -1}, "requests_per_unit"),
                        ({"requests_per_unit": "x"}, "requests_per_unit"),
                        ({}, "requests_per_unit: missing"),
                        ({"requests_per_unit": 5, "ttl": "forever"}, "ttl"),
                        ({"requests_per_unit": 5, "ttl": "31d"}, "ttl"),
                        ({"requests_per_unit": 5, "colour": "red"}, "colour")]:
        st, body, _ = node.put(rid["gcra"], body_)
        check("bad body %s: 400 naming it" % json.dumps(body_),
              st == 400 and want in body["error"]["message"], (st, body))
    st, body, _ = node.put("no.such.rule", {"requests_per_unit": 5})
    check("an unknown rule: 404", st == 404 and body["error"]["code"] == "ENOTFOUND", (st, body))

    # ---- If-Match as RFC 9110 reads it: *, lists, weak tags (never a
    # strong match), tags that are no version: a failed precondition ----
    gid = rid["gcra"]
    st, body, _ = node.put(gid, {"requests_per_unit": 5}, headers={"If-Match": "*"})
    check("If-Match: * on no override: 412", st == 412 and
          body["error"]["code"] == "EPRECONDITION", (st, body))
    st, body, hd = node.put(gid, {"requests_per_unit": 90})
    etag = hd.get("ETag", "")
    for value, want in [('"some-other-tag"', 412), ("W/" + etag, 412),
                        ('"1", W/"2", "x"', 412), ('"unterminated', 400),
                        ("not-a-tag", 400), ('W/12', 400), ('"a" "b"', 400),
                        (",".join(['"1"'] * 9), 400)]:
        st, body, _ = node.put(gid, {"requests_per_unit": 91}, headers={"If-Match": value})
        check("If-Match: %s: %d" % (value, want), st == want and
              node.in_force(gid)["requests_per_unit"] == 90, (st, body))
    st, body, hd = node.put(gid, {"requests_per_unit": 92},
                            headers={"If-Match": '"999999", %s' % etag})
    check("If-Match: a list naming the version: 200", st == 200 and
          node.in_force(gid)["requests_per_unit"] == 92, (st, body))
    st, body, hd = node.put(gid, {"requests_per_unit": 93}, headers={"If-Match": "*"})
    check("If-Match: * on an override: 200", st == 200 and
          node.in_force(gid)["requests_per_unit"] == 93, (st, body))
    st, body, _ = node.delete(gid, headers={"If-Match": '"other"'})
    check("DELETE with a tag that is no version: 412", st == 412, (st, body))
    st, body, _ = node.delete(gid, headers={"If-Match": "*"})
    check("DELETE with If-Match: *: 204", st == 204, (st, body))
    st, body, _ = node.api("PUT", "/admin/v1/overrides/", {"requests_per_unit": 5})
    check("no rule id: 400", st == 400, (st, body))

    # ---- expiry, the log, /metrics ----
    st, body, hd = node.put(rid["token_bucket"], {"requests_per_unit": 300, "ttl": "2s"})
    m = node.get("/metrics")[1]
    check("/metrics: the effective limit and its source",
          re.search(r'sluice_limit_requests_per_unit\{domain="test",rule="[^"]*token_bucket",'
                    r'limit="effective",source="manual"\} 300', m), m[-800:])
    check("an override with a ttl applies", node.in_force(rid["token_bucket"])["requests_per_unit"] == 300)
    ok = harness.wait_until(lambda: node.in_force(rid["token_bucket"])["source"] == "rules", 5)
    check("it expires on its own: the rule is back", ok, node.in_force(rid["token_bucket"]))
    st, body, _ = node.api("GET", "/admin/v1/events?after=0")
    actions = [e["action"] for e in body["events"]]
    check("the change log has every change in order, with its reason",
          actions.count("set") >= 2 * len(harness.ALGS) and "delete" in actions
          and any(e.get("reason") == "sale" for e in body["events"]), actions)

    # ---- a reload that changes a rule's numbers makes its override stale ----
    st, body, _ = node.put(rid["fixed_window"], {"requests_per_unit": 500})
    text = open(rules).read().replace("fixed_window, unit: hour, requests_per_unit: 100",
                                      "fixed_window, unit: hour, requests_per_unit: 110")
    open(rules, "w").write(text)
    os.kill(node.p.pid, 1)  # SIGHUP
    ok = harness.wait_until(lambda: node.in_force(rid["fixed_window"])["requests_per_unit"] == 110, 5)
    st, body, _ = node.api("GET", "/admin/v1/overrides")
    states = {o["rule"]: o["state"] for o in body["overrides"]}
    check("after the rule's numbers changed, its override is stale and the new base stands",
          ok and states.get(rid["fixed_window"]) == "stale", (states, node.in_force(rid["fixed_window"])))

    # ---- sluice limits ----
    def cli(*args, env_token=None):
        env = dict(os.environ)
        env.pop("SLUICE_ADMIN_TOKEN", None)
        if env_token:
            env["SLUICE_ADMIN_TOKEN"] = env_token
        p = subprocess.run([SLUICE, "limits", "--admin", "http://127.0.0.1:%d" % node.admin]
                           + list(args), capture_output=True, text=True, timeout=20, env=env)
        return p.returncode, p.stdout, p.stderr
    rc, out, err = cli("set", rid["gcra"], "250", "--ttl", "10m", "--reason", "launch",
                       "--token-file", token_file)
    check("sluice limits set (token from a file)", rc == 0 and "250" in out, (rc, out, err))
    rc, out, err = cli("set", rid["gcra"], "260", env_token=TOKEN)
    check("sluice limits set again (token from the environment) sends If-Match",
          rc == 0 and node.in_force(rid["gcra"])["requests_per_unit"] == 260, (rc, out, err))
    rc, out, err = cli("list")
    check("sluice limits list shows the limit in force and its base",
          rc == 0 and re.search(re.escape(rid["gcra"]) + r"\s+manual\s+260\s+100", out), out)
    rc, out, err = cli("overrides", "--json")
    check("sluice limits overrides --json", rc == 0 and json.loads(out)["overrides"], out)
    rc, out, err = cli("set", rid["gcra"], "270")
    check("sluice limits without a token: exit 1, the API's 401 said",
          rc == 1 and "401" in err and "EAUTH" in err, (rc, err))
    rc, out, err = cli("delete", rid["gcra"], env_token=TOKEN)
    check("sluice limits delete", rc == 0 and node.in_force(rid["gcra"])["source"] == "rules",
          (rc, out, err))
    rc, out, err = cli("events", "--after", "0")
    check("sluice limits events", rc == 0 and '"launch"' in out, out[-300:])
    rc, out, err = cli("bogus")
    check("sluice limits with a bad command: usage, exit 2", rc == 2 and "usage" in err, rc)

    # ---- brute force is limited ----
    codes = [node.api("GET", "/admin/v1/overrides", token="bad-%d" % i)[0] for i in range(15)]
    check("failed tokens are limited: 401s, then 429", codes[0] == 401 and codes[-1] == 429, codes)
    # From many addresses (loopback is a /8): each under its own limit,
    # all together under the global one (a burst of 40, 20 a second).
    import http.client
    time.sleep(2.5)
    def from_addr(i):
        c = http.client.HTTPConnection("127.0.0.1", node.admin, timeout=10,
                                       source_address=("127.0.%d.%d" % (i // 250, i % 250 + 2), 0))
        c.request("GET", "/admin/v1/overrides", headers={"Authorization": "Bearer bad-%d" % i})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    many = [from_addr(i) for i in range(300)]
    n401 = sum(1 for st, _ in many if st == 401)
    n429 = [b for st, b in many if st == 429]
    check("failed tokens from 300 addresses: at most the global budget gets a 401",
          40 <= n401 <= 100 and len(n429) == 300 - n401 and
          b"from all addresses" in n429[-1], (n401, n429[-1:] if n429 else None))
    time.sleep(2.5)
    check("and once it refills, the right token goes through",
          node.api("GET", "/admin/v1/overrides")[0] == 200)

    # ---- a listener off loopback needs a token ----
    p = subprocess.run([SLUICE, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
                        "--admin-listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=10)
    check("--admin-listen off loopback without a token is refused",
          p.returncode == 2 and "--admin-token-file" in p.stderr, (p.returncode, p.stderr))

    # ---- the advisor: a fake one, polled every 200 ms ----
    import http.server, socketserver, threading
    advice = {"body": None, "status": 200}

    class Advisor(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if advice["status"] != 200:
                self.send_response(advice["status"]); self.end_headers(); return
            body = advice["body"]() if callable(advice["body"]) else advice["body"]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Advisor)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def recommend(rpu, rule="test.adaptive", valid=2000):
        return json.dumps({"protocol": "sluice-advisor/1",
                           "computed_at_ms": int(time.time() * 1000),
                           "valid_for_ms": valid,
                           "recommendations": [
                               {"limit": rule, "requests_per_unit": rpu, "reason": "forecast"},
                               {"limit": rid["gcra"], "requests_per_unit": 999}]}).encode()

    advice["body"] = lambda: recommend(1000)
    adv = Node("adv", "--advisor", "http://127.0.0.1:%d" % srv.server_address[1],
               "--advisor-interval", "200ms")
    ok = harness.wait_until(lambda: adv.in_force("test.adaptive")["source"] == "advisor", 5)
    got = adv.in_force("test.adaptive")
    check("the advisor's recommendation of 1000 is applied, clamped to x2 then to max 300",
          ok and got["requests_per_unit"] in (200, 300), got)
    check("a rule without adaptive bounds is left alone",
          adv.in_force(rid["gcra"])["source"] == "rules", adv.in_force(rid["gcra"]))
    ok = harness.wait_until(lambda: adv.in_force("test.adaptive")["requests_per_unit"] == 300, 5)
    check("poll by poll it climbs to the rule's max, 300", ok, adv.in_force("test.adaptive"))
    st, body, _ = adv.put("test.adaptive", {"requests_per_unit": 120})
    check("a manual override wins over the advisor's",
          st == 201 and adv.in_force("test.adaptive")["requests_per_unit"] == 120
          and adv.in_force("test.adaptive")["source"] == "manual", adv.in_force("test.adaptive"))
    adv.delete("test.adaptive", headers={"If-Match": body and '"%d"' % body["version"]})
    # Answers whose time is wrong are refused: already expired (a day's
    # validity computed in 1970), or computed ahead of this clock.
    for name, at in [("expired", 0), ("from the future", int(time.time() * 1000) + 3600000)]:
        before = adv.metric('sluice_advisor_polls_total{result="invalid"}') or 0
        advice["body"] = json.dumps({"protocol": "sluice-advisor/1", "computed_at_ms": at,
                                     "valid_for_ms": 86400000, "recommendations": [
                                         {"limit": "test.adaptive", "requests_per_unit": 50}]}).encode()
        ok = harness.wait_until(
            lambda: (adv.metric('sluice_advisor_polls_total{result="invalid"}') or 0) >= before + 2, 5)
        check("an answer %s is refused and counted" % name,
              ok and adv.in_force("test.adaptive")["requests_per_unit"] != 50,
              adv.in_force("test.adaptive"))
    check("and the refusal says why", "ms in the past" in open(adv.log).read() or
          "ahead of this node's clock" in open(adv.log).read(), open(adv.log).read()[-500:])
    advice["body"] = b"{not json"
    time.sleep(1.0)
    m = adv.get("/metrics")[1]
    check("a garbage answer is refused and counted",
          re.search(r'sluice_advisor_polls_total\{result="invalid"\} [1-9]', m), m[-900:])
    advice["status"] = 500
    ok = harness.wait_until(lambda: adv.in_force("test.adaptive")["source"] == "rules", 8)
    check("the advisor failing: its override expires, the rule is back to 100",
          ok and adv.in_force("test.adaptive")["requests_per_unit"] == 100,
          adv.in_force("test.adaptive"))
    check("and the node lives on", adv.get("/healthz")[0] == 200)

    # ---- an advisor's burst is bounded as its requests_per_unit: x2 / /2
    # a poll, within the bursts adaptive.min and .max scale the rule's to
    # (20 at 100: 10 at 50, 60 at 300) ----
    def burst_advice(b):
        return json.dumps({"protocol": "sluice-advisor/1",
                           "computed_at_ms": int(time.time() * 1000), "valid_for_ms": 5000,
                           "recommendations": [{"limit": "test.adaptive_tb",
                                                "requests_per_unit": 300,
                                                "burst": b}]}).encode()
    advice["status"] = 200
    advice["body"] = lambda: burst_advice(10000000000)
    seen = []
    def burst_at(want):
        r = adv.in_force("test.adaptive_tb")
        seen.append(r["burst"])
        return r["source"] == "advisor" and r["burst"] == want
    ok = harness.wait_until(lambda: burst_at(60), 8)
    check("an advisor's huge burst climbs x2 a poll and stops at the max's scale (60)",
          ok and max(seen) == 60 and 40 in seen, seen)
    codes = [adv.check("adaptive_tb", "b1")[0] for _ in range(80)]
    check("and the bucket holds 60, not 10^10", codes.count(200) == 60, codes.count(200))
    seen.clear()
    advice["body"] = lambda: burst_advice(1)
    ok = harness.wait_until(lambda: burst_at(10), 8)
    check("a burst of 1 falls /2 a poll and stops at the min's scale (10)",
          ok and min(seen) == 10, seen)
    # An answer that no longer names the rule (empty, or of other rules
    # only) withdraws nothing at once: the override lapses at its expiry
    # (at most 10 intervals, 2 s here), and the rule is back to its own.
    def other_advice(recs):
        return json.dumps({"protocol": "sluice-advisor/1",
                           "computed_at_ms": int(time.time() * 1000), "valid_for_ms": 5000,
                           "recommendations": recs}).encode()
    for name, recs in [("an empty answer", []),
                       ("an answer of other rules only",
                        [{"limit": "test.adaptive", "requests_per_unit": 150}])]:
        advice["body"] = lambda: burst_advice(40)
        ok = harness.wait_until(lambda: adv.in_force("test.adaptive_tb")["source"] == "advisor", 8)
        advice["body"] = lambda recs=recs: other_advice(recs)
        t0 = time.monotonic()
        gone = harness.wait_until(
            lambda: adv.in_force("test.adaptive_tb")["source"] == "rules", 8)
        took = time.monotonic() - t0
        check("%s: the advisor's override lapses at its expiry, the rule back to its own" % name,
              ok and gone and adv.in_force("test.adaptive_tb")["requests_per_unit"] == 100,
              (adv.in_force("test.adaptive_tb"), round(took, 2)))
    advice["status"] = 500
    shadow = Node("shadow", "--advisor", "http://127.0.0.1:%d" % srv.server_address[1],
                  "--advisor-interval", "200ms", "--advisor-mode", "shadow")
    advice["status"], advice["body"] = 200, (lambda: recommend(150))
    time.sleep(1.0)
    m = shadow.get("/metrics")[1]
    check("shadow mode records and does not apply",
          shadow.in_force("test.adaptive")["source"] == "rules"
          and re.search(r'sluice_advisor_polls_total\{result="ok"\} [1-9]', m), m[-900:])
    check("shadow mode: each rule's recommendation, bounded, in a gauge",
          'sluice_advisor_shadow_requests_per_unit{rule="test.adaptive"} 150' in m, m[-900:])
    st, body, _ = shadow.api("GET", "/admin/v1/overrides")
    sh = {e["rule"]: e for e in (body or {}).get("shadowed", [])}
    check("shadow mode: GET /admin/v1/overrides lists what would be set",
          st == 200 and sh.get("test.adaptive", {}).get("requests_per_unit") == 150
          and sh["test.adaptive"]["reason"] == "forecast"
          and sh["test.adaptive"]["expires_ms"] > sh["test.adaptive"]["at_ms"]
          and rid["gcra"] not in sh and body["overrides"] == [], body)
    check("shadow mode: the log says what would change",
          "advisor (shadow): test.adaptive would be 150" in open(shadow.log).read(),
          open(shadow.log).read()[-600:])

    # ---- a slow advisor: the poll times out, the node lives on ----
    slow_release = threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            slow_release.wait(5)
            self.send_response(200); self.end_headers()

        def log_message(self, *a):
            pass

    slow_srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=slow_srv.serve_forever, daemon=True).start()
    slow = Node("slow", "--advisor", "http://127.0.0.1:%d" % slow_srv.server_address[1],
                "--advisor-interval", "200ms", "--advisor-timeout", "300ms")
    time.sleep(1.2)
    t0 = time.monotonic()
    st = slow.api("GET", "/admin/v1/overrides")[0]
    m = slow.get("/metrics")[1]
    check("a slow advisor: polls fail on their timeout, the admin API answers at once",
          st == 200 and time.monotonic() - t0 < 0.5
          and re.search(r'sluice_advisor_polls_total\{result="failed"\} [1-9]', m), m[-700:])
    slow_release.set()

    # ---- the reference advisor driving a limit up and back down ----
    aport = harness.free_port()
    loop = Node("loop", "--advisor", "http://127.0.0.1:%d" % aport,
                "--advisor-interval", "200ms")
    ref = harness.start([SLUICE, "advisor", "--scrape", "http://127.0.0.1:%d" % loop.metrics_port,
                         "--listen", "127.0.0.1:%d" % aport, "--step", "200ms",
                         "--season", "1s", "--horizon", "400ms"],
                        os.path.join(tmp, "ref-advisor.log"))
    stop_load = threading.Event()

    def load():
        while not stop_load.is_set():
            loop.check("adaptive", "c", 1)
            time.sleep(1 / 40)
    th = threading.Thread(target=load)
    th.start()
    up = harness.wait_until(lambda: loop.in_force("test.adaptive")["requests_per_unit"] > 100, 15)
    got = loop.in_force("test.adaptive")
    stop_load.set()
    th.join()
    check("sluice advisor's forecast drives the rule's limit up (source advisor, within max 300)",
          up and got["source"] == "advisor" and 100 < got["requests_per_unit"] <= 300,
          (got, open(os.path.join(tmp, "ref-advisor.log")).read()[-500:]))
    # Back down takes about 30 s (the model's error, sigma, fading:
    # docs/advisor.md): the sanitizer runs (SL_TEST_QUICK) leave it out.
    if os.environ.get("SL_TEST_QUICK"):
        print("SKIP back down to the rule's 100 (SL_TEST_QUICK)")
    else:
        t_gone = time.monotonic()
        down = harness.wait_until(
            lambda: loop.in_force("test.adaptive")["source"] == "rules", 90)
        check("and with the demand gone, back down to the rule's 100 (after %.1f s)"
              % (time.monotonic() - t_gone),
              down and loop.in_force("test.adaptive")["requests_per_unit"] == 100,
              loop.in_force("test.adaptive"))
    ref.kill()

    # ---- two nodes sharing a real Redis ----
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    n1 = Node("r1", "--store", store, "--redis-timeout", "200ms")
    n2 = Node("r2", "--store", store, "--redis-timeout", "200ms")
    alg = "sliding_window"
    st, body, hd = n1.put(rid[alg], {"requests_per_unit": 40, "reason": "incident"})
    check("--store redis: an override set on one node: 201", st == 201, (st, body))
    t0 = time.monotonic()
    ok = harness.wait_until(lambda: n2.in_force(rid[alg])["requests_per_unit"] == 40, 3)
    check("the other node applies it within 2 s (%.2f s)" % (time.monotonic() - t0),
          ok and time.monotonic() - t0 <= 2.0)
    allowed = 0
    for i in range(60):
        st = (n1 if i % 2 else n2).check(alg, "shared", 1)[0]
        allowed += st == 200
    check("counted exactly across both nodes: 40 of 60 allowed", allowed == 40, allowed)
    st, body, _ = n2.put(rid[alg], {"requests_per_unit": 50}, headers={"If-Match": '"1"'})
    check("If-Match is checked against the shared table", st in (200, 412), (st, body))
    st, body, _ = n1.put(rid["fixed_window"], {"requests_per_unit": 900, "ttl": "3s"})
    harness.wait_until(lambda: n2.in_force(rid["fixed_window"])["requests_per_unit"] == 900, 3)
    os.kill(redis.proc.pid, 19)  # SIGSTOP
    ok = all(harness.wait_until(lambda: n.in_force(rid["fixed_window"])["source"] == "rules", 6)
             for n in (n1, n2))
    check("Redis paused: each node expires an override on its own clock", ok,
          (n1.in_force(rid["fixed_window"]), n2.in_force(rid["fixed_window"])))
    st, body, _ = n1.put(rid["gcra"], {"requests_per_unit": 7})
    check("Redis paused: a write answers 503 ESTORE", st == 503 and body["error"]["code"] == "ESTORE",
          (st, body))
    check("and the nodes keep their last table",
          n1.in_force(rid[alg])["requests_per_unit"] in (40, 50)
          and n2.in_force(rid[alg])["requests_per_unit"] in (40, 50))
    os.kill(redis.proc.pid, 18)  # SIGCONT
    harness.check_exit([node, n1, n2, adv, shadow, slow, loop])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
