#!/bin/bash
# Integration test of `sluice serve --grpc-listen`: the real daemon on
# loopback ports it picks, called by grpc's own Node client
# (tests/grpc/client.js, @grpc/grpc-js as pinned in tests/grpc/package.json)
# and, for the framing cases no gRPC library produces, by a raw HTTP/2
# client (tests/grpc/h2raw.py); a real redis-server, paused and killed,
# for the waits.  Every wait is bounded; everything started is killed in
# python's finally.
#
# Debian's python3 runs it: python3-h2 (which brings hyperframe and
# hpack) is installed for it by scripts/deps.sh --test, as is tests/grpc's
# node_modules (npm ci).
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec /usr/bin/python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, signal, subprocess, sys, tempfile, time
import urllib.error, urllib.request

SLUICE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "sh"))
sys.path.insert(0, os.path.join(SRC, "tests", "grpc"))
import harness
from harness import check
import h2raw
from h2raw import RLS, HEALTH, field, rls_request, health_request, decode

import grpcnode
GRPC_DIR = grpcnode.GRPC_DIR
grpcnode.need_node_modules()

# gRPC status codes.
OK, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = 0, 2, 3, 4, 5
RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE = 8, 12, 13, 14

tmp = tempfile.mkdtemp()
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("""domain: test
descriptors:
  - key: tb
    rate_limit: {name: tb, algorithm: token_bucket, unit: hour, requests_per_unit: 10}
  - key: sl
    rate_limit: {name: sl, algorithm: sliding_log, unit: minute, requests_per_unit: 3}
  - key: gc
    rate_limit: {name: gc, algorithm: gcra, unit: second, requests_per_unit: 4}
  - key: weekly
    rate_limit: {name: weekly, unit: week, requests_per_unit: 7}
  - key: many
    rate_limit: {name: many, algorithm: sliding_log, unit: hour, requests_per_unit: 300}
  - key: shared
    rate_limit: {name: shared, algorithm: sliding_log, unit: hour, requests_per_unit: 5}
  - key: hits
    rate_limit: {name: hits, algorithm: sliding_log, unit: hour, requests_per_unit: 100}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: slow
    rate_limit: {name: slow, algorithm: sliding_log, unit: hour, requests_per_unit: 1000}
""")


class GNode(grpcnode.GNode):
    def __init__(self, name, *flags, rules_path=rules):
        super().__init__(SLUICE, tmp, name, rules_path, *flags)


d = grpcnode.d


def statuses(r):
    return r.get("response", {}).get("statuses", [])


def status_of(r):
    return [(s["code"], s["limit_remaining"],
             s["current_limit"]["name"] if s["current_limit"] else None)
            for s in statuses(r)]


try:
    main = GNode("main", "--read-timeout", "1s", "--idle-timeout", "2s")

    # ---- health ----
    check("health: '' is SERVING", main.health("") == {"code": 0, "status": "SERVING"},
          main.health(""))
    check("health: 'ratelimit' is SERVING",
          main.health("ratelimit") == {"code": 0, "status": "SERVING"})
    r = main.health("nope")
    check("health: an unknown service is NOT_FOUND", r["code"] == NOT_FOUND, r)

    # ---- decisions, exact ----
    r = main.rls([d("tb", "a"), d("sl", "a"), d("gc", "a"), d("weekly", "a"),
                  d("unknown_key", "a")], hits=3)
    st = statuses(r)
    check("rls: overall OK", r["code"] == 0 and r["response"]["overall_code"] == "OK", r)
    check("rls: one status per descriptor, in order",
          [s["current_limit"] and s["current_limit"]["name"] for s in st] ==
          ["tb", "sl", "gc", "weekly", None], st)
    check("rls: token bucket remaining and reset exact",
          st[0]["limit_remaining"] == 7 and
          st[0]["duration_until_reset"] == {"seconds": 1080, "nanos": 0} and
          st[0]["current_limit"] == {"name": "tb", "requests_per_unit": 10, "unit": "HOUR"}, st[0])
    check("rls: sliding log remaining and reset exact",
          st[1]["limit_remaining"] == 0 and
          st[1]["duration_until_reset"] == {"seconds": 60, "nanos": 0} and
          st[1]["current_limit"]["unit"] == "MINUTE", st[1])
    check("rls: gcra reset in nanos exact",
          st[2]["limit_remaining"] == 1 and
          st[2]["duration_until_reset"] == {"seconds": 0, "nanos": 750000000} and
          st[2]["current_limit"]["unit"] == "SECOND", st[2])
    check("rls: a week is unit WEEK (7)", st[3]["current_limit"]["unit"] == "WEEK", st[3])
    check("rls: an unmatched descriptor is OK without a limit",
          st[4] == {"code": "OK", "current_limit": None, "limit_remaining": 0,
                    "duration_until_reset": None}, st[4])
    r = main.rls([d("sl", "a")])
    check("rls: over the limit is OVER_LIMIT",
          r["response"]["overall_code"] == "OVER_LIMIT" and
          status_of(r) == [("OVER_LIMIT", 0, "sl")], r)
    r = main.rls([d("tb", "b"), d("blocked", "x")])
    check("rls: a deny rule is OVER_LIMIT with a limit of 0 and consumes nothing",
          r["response"]["overall_code"] == "OVER_LIMIT" and
          status_of(r) == [("OK", 10, "tb"), ("OVER_LIMIT", 0, "")] and
          statuses(r)[1]["current_limit"]["requests_per_unit"] == 0, r)
    r = main.rls([d("free", "x")])
    check("rls: an unlimited rule is OK with 2^32-1 remaining, no limit (as lyft)",
          status_of(r) == [("OK", 2**32 - 1, None)], r)
    r = main.rls([d("tb", "c")], domain="nosuchdomain")
    check("rls: an unknown domain is OK", r["code"] == 0 and
          r["response"]["overall_code"] == "OK" and status_of(r) == [("OK", 0, None)], r)
    check("rls: no response headers by default",
          r["response"]["response_headers_to_add"] == [], r)

    # ---- errors ----
    r = main.rls([d("tb", "a")], domain="")
    check("rls: an empty domain is UNKNOWN (as lyft)", r["code"] == UNKNOWN and
          "domain" in r["details"], r)
    r = main.rls([])
    check("rls: no descriptors is UNKNOWN (as lyft)", r["code"] == UNKNOWN and
          "descriptors" in r["details"], r)
    r = main.rls([{"entries": []}])
    check("rls: a descriptor without entries is INVALID_ARGUMENT",
          r["code"] == INVALID_ARGUMENT, r)
    r = main.rls([d("tb", str(i)) for i in range(65)])
    check("rls: more than --max-descriptors is INVALID_ARGUMENT",
          r["code"] == INVALID_ARGUMENT and "max-descriptors" in r["details"], r)
    r = main.rls([d("tb", "x" * 70000)])
    check("rls: a message over --max-body-bytes is RESOURCE_EXHAUSTED",
          r["code"] == RESOURCE_EXHAUSTED, r)
    r = main.grpc({"op": "raw", "path": "/envoy.service.ratelimit.v3.RateLimitService/Nope",
                   "hex": ""})[0]
    check("unknown method: UNIMPLEMENTED", r["code"] == UNIMPLEMENTED and
          "Nope" in r["details"], r)
    r = main.grpc({"op": "raw", "path": "/grpc.health.v1.Health/Watch", "hex": ""})[0]
    check("health Watch: UNIMPLEMENTED", r["code"] == UNIMPLEMENTED, r)
    r = main.grpc({"op": "raw", "path": RLS, "hex": "0a05746573"})[0]
    check("a truncated message: INTERNAL", r["code"] == INTERNAL, r)

    # ---- unknown fields, by wire type, at every level ----
    entry = (field(1, 2, b"hits") + field(7, 0, 300) + field(2, 2, b"uf") +
             field(8, 5, b"\1\2\3\4"))
    desc = field(1, 2, entry) + field(9, 1, b"\0" * 8) + field(10, 2, b"junk")
    msg = (field(15, 0, 1 << 40) + field(1, 2, b"test") + field(2, 2, desc) +
           field(4, 2, b"\x08\x01") + field(3, 0, 2) + field(200, 5, b"abcd") +
           field(1, 0, 5))  # a known number with another wire type: skipped
    r = main.grpc({"op": "raw", "path": RLS, "hex": msg.hex()})[0]
    resp = decode(bytes.fromhex(r.get("hex", "")))
    dst = decode(resp[2][0]) if 2 in resp else {}
    check("unknown fields are skipped by wire type",
          r["code"] == 0 and resp.get(1) == [1] and dst.get(3) == [98], (r, resp, dst))

    # ---- hits_addend ----
    r = main.rls([d("hits", "h1")], hits=0)
    check("hits: a request's 0 counts 1", status_of(r) == [("OK", 99, "hits")], r)
    r = main.rls([d("hits", "h1")], hits=5)
    check("hits: the request's hits_addend", status_of(r) == [("OK", 94, "hits")], r)
    r = main.rls([d("hits", "h1", hits=0)], hits=5)
    check("hits: a descriptor's 0 checks without counting",
          status_of(r) == [("OK", 94, "hits")], r)
    r = main.rls([d("hits", "h1", hits=2), d("hits", "h2")], hits=7)
    check("hits: a descriptor's own wins, the others take the request's",
          status_of(r) == [("OK", 92, "hits"), ("OK", 93, "hits")], r)
    r = main.rls([d("hits", "h1", hits=93)])
    check("hits: more than remaining is OVER_LIMIT, 0 remaining as in ratelimit",
          status_of(r) == [("OVER_LIMIT", 0, "hits")], r)
    r = main.rls([d("hits", "h1", hits=0)])
    check("hits: ... and nothing consumed", status_of(r) == [("OK", 92, "hits")], r)
    r = main.rls([d("hits", "h1", hits=1 << 41)])
    check("hits: over 2^40 is INVALID_ARGUMENT", r["code"] == INVALID_ARGUMENT, r)

    # ---- limit overrides (lyft's: decide.c, "Overrides") ----
    HOUR, WEEK = 3, 7
    rs = main.grpc(*[{"op": "rls", "req": {"domain": "test", "descriptors": [
        d("hits", "o1", limit={"requests_per_unit": 2, "unit": HOUR})]}}
        for _ in range(3)])
    check("override: replaces the rule's limit (2 an hour: OK, OK, OVER_LIMIT)",
          [status_of(x) for x in rs] == [[("OK", 1, "")], [("OK", 0, "")],
                                         [("OVER_LIMIT", 0, "")]] and
          statuses(rs[0])[0]["current_limit"]["requests_per_unit"] == 2 and
          statuses(rs[0])[0]["current_limit"]["unit"] == "HOUR", rs)
    rs = main.grpc({"op": "rls", "req": {"domain": "test", "descriptors": [d("hits", "o2")]}},
                   {"op": "rls", "req": {"domain": "test", "descriptors": [
                       d("hits", "o2", limit={"requests_per_unit": 100, "unit": HOUR})]}})
    check("override: the rule's own limit shares the rule's counter",
          status_of(rs[0]) == [("OK", 99, "hits")] and status_of(rs[1])[0][1] == 98, rs)
    r = main.rls([d("nomatch", "o3", limit={"requests_per_unit": 5, "unit": WEEK})])
    check("override: limits a descriptor no rule matches, in a known domain",
          status_of(r) == [("OK", 4, "")] and
          statuses(r)[0]["current_limit"]["unit"] == "WEEK", r)
    r = main.rls([d("nomatch", "o3", limit={"requests_per_unit": 5, "unit": WEEK})],
                 domain="nosuchdomain")
    check("override: nothing in an unknown domain", status_of(r) == [("OK", 0, None)], r)
    r = main.rls([d("hits", "o4", limit={"requests_per_unit": 5, "unit": 0})])
    check("override: an UNKNOWN unit is INVALID_ARGUMENT",
          r["code"] == INVALID_ARGUMENT and "unit" in r["details"], r)

    # ---- 1000 concurrent calls on one channel ----
    r = main.grpc({"op": "many", "n": 1000, "req": {
        "domain": "test", "descriptors": [d("many", "m")]}})[0]
    check("1000 concurrent calls on one channel: exactly the limit (300) pass",
          r == {"OK": 300, "OVER_LIMIT": 700, "errors": {}}, r)

    # ---- one counter for gRPC and HTTP ----
    body = {"domain": "test", "descriptors": [{"entries": [{"key": "shared", "value": "s"}]}]}
    codes = [main.json(body)[0] for _ in range(2)]
    rs = main.grpc(*[{"op": "rls", "req": {"domain": "test", "descriptors": [d("shared", "s")]}}
                     for _ in range(4)])
    check("shared: /json then gRPC count on one counter",
          codes == [200, 200] and
          [x["response"]["overall_code"] for x in rs] == ["OK"] * 3 + ["OVER_LIMIT"] and
          status_of(rs[2]) == [("OK", 0, "shared")], (codes, rs))
    check("shared: /json sees gRPC's counts", main.json(body)[0] == 429)

    # ---- metrics ----
    check("metrics: gRPC decisions count in sluice_rule_hits_total",
          main.metric('sluice_rule_hits_total{domain="test",rule="many"}') == 1000,
          main.metric('sluice_rule_hits_total{domain="test",rule="many"}'))
    check("metrics: refused requests count as bad requests",
          (main.metric("sluice_bad_requests_total") or 0) >= 5)

    # ---- raw HTTP/2 ----
    c = h2raw.Conn(main.gport)
    sid = c.call(RLS, rls_request("test", [[("tb", "split")]]), split=1)
    st = c.result(sid)
    check("raw: SETTINGS say 100 concurrent streams",
          c.settings.get(3) == 100, c.settings)
    check("raw: a message in 1-byte DATA frames is decided",
          st is not None and st.grpc_status() == 0 and
          decode(st.message()).get(1) == [1], st and vars(st))
    sid = c.call(RLS, rls_request("test", [[("tb", "z")]]), flag=1)
    st = c.result(sid)
    check("raw: the compressed flag is UNIMPLEMENTED",
          st is not None and st.grpc_status() == UNIMPLEMENTED, st and vars(st))
    sid = c.headers(RLS, ctype="application/json")
    c.data(sid, b"{}", end=True)
    st = c.result(sid)
    check("raw: another content-type is HTTP 415",
          st is not None and st.headers.get(":status") == "415", st and vars(st))
    # An answer sent before the client ended its side is followed by
    # RST_STREAM(NO_ERROR) (RFC 9113, 8.1), so that the client stops
    # sending; an answer to a whole request is not (h2.c, on_frame_send).
    sid = c.headers(RLS, ctype="application/json")
    c.wait(lambda: c.streams[sid].reset is not None, 5)
    st = c.streams[sid]
    check("raw: an answer before the request's end is followed by RST_STREAM(NO_ERROR)",
          st.reset == 0 and st.ended and st.headers and
          st.headers.get(":status") == "415", vars(st))
    sid = c.call(RLS, rls_request("test", [[("tb", "z")]]))
    st = c.result(sid)
    c.pump(0.3)
    check("raw: an answer to a whole request ends its stream with no RST_STREAM",
          st is not None and st.grpc_status() == 0 and st.reset is None,
          st and vars(st))
    sid = c.headers(RLS, method="GET", end=True)
    st = c.result(sid)
    check("raw: another method is HTTP 405",
          st is not None and st.headers.get(":status") == "405", st and vars(st))
    sid = c.headers(RLS, extra=[("x-big", "a" * 9000)], end=True)
    st = c.result(sid)
    check("raw: headers over --max-header-bytes are RESOURCE_EXHAUSTED",
          st is not None and st.grpc_status() == RESOURCE_EXHAUSTED, st and vars(st))
    sid = c.headers(RLS, end=True)
    st = c.result(sid)
    check("raw: no message is INTERNAL", st is not None and st.grpc_status() == INTERNAL,
          st and vars(st))
    sid = c.headers(HEALTH, extra=[("grpc-timeout", "soon")], end=True)
    st = c.result(sid)
    check("raw: a malformed grpc-timeout is INTERNAL",
          st is not None and st.grpc_status() == INTERNAL, st and vars(st))
    t0 = time.monotonic()
    sid = c.headers(RLS)
    c.data(sid, h2raw.grpc_frame(b"")[:3])
    st = c.result(sid, 5)
    check("raw: a request not whole within --read-timeout is DEADLINE_EXCEEDED",
          st is not None and st.grpc_status() == DEADLINE_EXCEEDED and
          "read timeout" in st.headers.get("grpc-message", "") and
          0.8 < time.monotonic() - t0 < 3, st and (vars(st), time.monotonic() - t0))
    sid = c.call(HEALTH, health_request("ratelimit"))
    st = c.result(sid)
    check("raw: the connection goes on after errors",
          st is not None and st.grpc_status() == 0 and decode(st.message()) == {1: [1]},
          st and vars(st))
    c.close()

    # Streams beyond the limit are refused, before SETTINGS are acked too.
    c = h2raw.Conn(main.gport)
    sids = [c.headers(HEALTH) for _ in range(101)]
    c.wait(lambda: c.streams[sids[-1]].reset is not None, 3)
    check("raw: the 101st concurrent stream is REFUSED_STREAM",
          c.streams[sids[-1]].reset == 7 and
          all(c.streams[s].reset is None for s in sids[:100]),
          [c.streams[s].reset for s in sids[-3:]])
    c.close()

    # An idle connection is closed with a GOAWAY after --idle-timeout.
    c = h2raw.Conn(main.gport)
    t0 = time.monotonic()
    c.wait(lambda: c.closed, 6)
    check("raw: an idle connection gets GOAWAY(NO_ERROR) and is closed",
          c.closed and c.goaways and c.goaways[-1][1] == 0 and
          1.5 < time.monotonic() - t0 < 5, (c.closed, c.goaways, time.monotonic() - t0))
    c.close()

    # Garbage: not HTTP/2, and a bad frame after the preface.
    c = h2raw.Conn(main.gport, preface=False)
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.wait(lambda: c.closed, 5)
    check("raw: HTTP/1.1 on the gRPC port is closed", c.closed)
    c.close()
    c = h2raw.Conn(main.gport)
    c.send(b"\x00\x00\x05\x09\x00\x00\x00\x00\x07garbage")  # a CONTINUATION alone
    c.wait(lambda: c.closed, 5)
    check("raw: a protocol error gets GOAWAY and a close",
          c.closed and c.goaways and c.goaways[-1][1] != 0, c.goaways)
    c.close()
    check("the server still answers", main.health() == {"code": 0, "status": "SERVING"})

    # ---- --grpc-rate-limit-headers, from a config file ----
    cfg = os.path.join(tmp, "serve.yaml")
    with open(cfg, "w") as f:
        f.write("grpc_rate_limit_headers: true\nthreads: 1\n")
    hdr = GNode("headers", "--config", cfg)
    r = hdr.rls([d("tb", "h")])
    got = {h["key"]: h["value"] for h in r["response"]["response_headers_to_add"]}
    check("rate-limit headers: the HTTP answers' fields",
          got.get("X-RateLimit-Limit") == "10" and got.get("X-RateLimit-Remaining") == "9"
          and got.get("RateLimit-Policy") == '"tb";q=10;w=3600'
          and got.get("RateLimit") == '"tb";r=9;t=360', got)

    # ---- Redis: waits, deadlines, cancels, health ----
    redis = harness.Redis()
    redis.start()
    rn = GNode("redis", "--store", "redis://127.0.0.1:%d" % redis.port,
               "--redis-timeout", "2s", "--redis-failure", "fail_closed")
    r = rn.rls([d("slow", "r")])
    check("redis: decided on Redis", status_of(r) == [("OK", 999, "slow")], r)
    os.kill(redis.proc.pid, signal.SIGSTOP)
    r = rn.rls([d("slow", "r")], deadline_ms=300)
    check("redis paused: a call past its deadline is DEADLINE_EXCEEDED",
          r["code"] == DEADLINE_EXCEEDED and r["ms"] < 1500, r)
    # The server's own deadline, seen without a client-side timer.
    c = h2raw.Conn(rn.gport)
    t0 = time.monotonic()
    sid = c.call(RLS, rls_request("test", [[("slow", "r")]]),
                 extra=[("grpc-timeout", "300m")])
    st = c.result(sid, 3)
    check("redis paused: grpc-timeout ends the wait with DEADLINE_EXCEEDED",
          st is not None and st.grpc_status() == DEADLINE_EXCEEDED and
          0.25 < time.monotonic() - t0 < 1.5, st and (vars(st), time.monotonic() - t0))
    sid = c.call(RLS, rls_request("test", [[("slow", "r")]]))
    c.pump(0.2)
    c.rst(sid)
    sid2 = c.call(RLS, rls_request("test", [[("slow", "r")]]))
    c.pump(0.2)
    c.close()  # one stream reset, one on a closed connection, both waiting
    os.kill(redis.proc.pid, signal.SIGCONT)
    check("redis resumed: SERVING", harness.wait_until(
        lambda: rn.health() == {"code": 0, "status": "SERVING"}, 10))
    r = rn.rls([d("slow", "r2")])
    check("redis resumed: calls are decided again after the cancels",
          status_of(r) == [("OK", 999, "slow")], r)

    redis.kill()
    check("fail_closed with Redis down: NOT_SERVING", harness.wait_until(
        lambda: rn.health() == {"code": 0, "status": "NOT_SERVING"}, 10))
    r = rn.rls([d("slow", "r")])
    check("fail_closed with Redis down: UNAVAILABLE", r["code"] == UNAVAILABLE, r)
    redis.start()
    check("Redis back: SERVING", harness.wait_until(
        lambda: rn.health() == {"code": 0, "status": "SERVING"}, 10))

    # Draining: a call waits on a paused Redis while SIGTERM comes; the
    # connection gets the GOAWAY notice, and a health check on a new
    # stream of it (before it answered the drain's PING) is NOT_SERVING.
    c = h2raw.Conn(rn.gport, auto_ping=False)
    c.call(HEALTH, health_request())
    c.wait(lambda: c.streams[1].done())
    os.kill(redis.proc.pid, signal.SIGSTOP)
    waiting = c.call(RLS, rls_request("test", [[("slow", "d")]]))
    c.pump(0.2)
    rn.p.send_signal(signal.SIGTERM)
    c.wait(lambda: c.goaways, 3)
    sid = c.call(HEALTH, health_request())
    st = c.result(sid, 3)
    check("draining: GOAWAY notice (last stream 2^31-1)",
          c.goaways and c.goaways[0] == (2**31 - 1, 0), c.goaways)
    check("draining: health is NOT_SERVING",
          st is not None and st.grpc_status() == 0 and decode(st.message()) == {1: [2]},
          st and vars(st))
    os.kill(redis.proc.pid, signal.SIGCONT)
    st = c.result(waiting, 5)
    check("draining: the waiting call is answered", st is not None and
          st.grpc_status() == 0, st and vars(st))
    c.send(h2raw.PingFrame(0, c.pings[0], flags=["ACK"]).serialize())
    c.wait(lambda: c.closed, 5)
    check("draining: the last GOAWAY names the last stream, then the close",
          c.closed and c.goaways[-1] == (sid, 0), c.goaways)
    try:
        rc = rn.p.wait(15)
    except subprocess.TimeoutExpired:
        rc = None
    check("redis node exits 0 after draining", rc == 0,
          "status %s; log: %s" % (rc, open(rn.log).read()[-2000:]))

    # ---- docs/server.md's gRPC examples, against examples/rules ----
    docs = GNode("docs", rules_path=os.path.join(SRC, "examples", "rules"))
    text = open(os.path.join(SRC, "docs", "server.md")).read()
    blocks = re.findall(r"<!-- grpc-test: expect (.*?) -->\s*```sh\n(.*?)```", text, re.S)
    check("docs: every nghttp example is a grpc-test block",
          blocks and sum(b.count("nghttp ") for _, b in blocks) == text.count("nghttp "),
          len(blocks))
    for i, (want, cmd) in enumerate(blocks):
        cmd = cmd.replace("127.0.0.1:8081", "127.0.0.1:%d" % docs.gport)
        cmd = cmd.replace("127.0.0.1:8080", "127.0.0.1:%d" % docs.port)
        p = subprocess.run(["bash", "-c", cmd], cwd=tmp, capture_output=True,
                           text=True, timeout=20)
        check("docs: gRPC example %d" % (i + 1), want in p.stdout + p.stderr,
              "expected '%s' in: %s" % (want, p.stdout + p.stderr))

    harness.check_exit([main, hdr, docs])
finally:
    harness.kill_all()

print("%d failed" % harness.failed if harness.failed else "all passed")
sys.exit(harness.failed)
PY
