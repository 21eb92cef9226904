#!/bin/bash
# Integration test of envoyproxy/ratelimit's configuration keys and answers
# as `sluice serve` gives them, on POST /json and over gRPC (grpc's own
# Node client, tests/grpc/client.js), with the memory store and with a
# real redis-server on a free port: share_threshold across values,
# quota_mode's overall code (and --quota-mode), metadata in the answer
# (--response-dynamic-metadata), value_to_metric and share_threshold
# metric labels, a unit: year limit decided exactly on Redis, 0 remaining
# for an over-limit descriptor, an override counted on the descriptor's
# counter, --shadow-mode and --grpc-rate-limit-headers ratelimit; and a
# set with a limit the Redis store cannot take refused as it loads.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec /usr/bin/python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, subprocess, sys, tempfile, time
import urllib.error, urllib.request

SLUICE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "sh"))
import harness
from harness import check

sys.path.insert(0, os.path.join(SRC, "tests", "grpc"))
import grpcnode
from grpcnode import d
grpcnode.need_node_modules()

tmp = tempfile.mkdtemp(prefix="sluice-rl-")
rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("""domain: rl
descriptors:
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: route
    value: /v1/*/download
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: user
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: enforced
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: client
    value: gold
    metadata: {tier: gold, weight: 2.5, owner: {team: pay}}
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: client
    value: silver
    metadata: {tier: silver, owner: {pager: night}}
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 5}
  - key: two
    rate_limit: {unit: hour, requests_per_unit: 3}
""")


class GNode(grpcnode.GNode):
    """A node on the rules above, its answers on domain "rl"."""

    def __init__(self, name, *flags):
        super().__init__(SLUICE, tmp, name, rules, *flags)

    def json(self, descriptors, hits=None):
        """POST /json: (status, body dict)."""
        body = {"domain": "rl", "descriptors": descriptors}
        if hits is not None:
            body["hitsAddend"] = hits
        return super().json(body)

    def rls(self, descriptors, hits=0):
        return super().rls(descriptors, hits, domain="rl")


def dj(key, value, limit=None):
    out = {"entries": [{"key": key, "value": value}]}
    if limit is not None:
        out["limit"] = limit
    return out


def remaining_j(body):
    return [s.get("limitRemaining", 0) for s in body.get("statuses", [])]


def grpc_codes(r):
    resp = r.get("response", {})
    return resp.get("overall_code"), [s["code"] for s in resp.get("statuses", [])]


def struct_value(v):
    """A google.protobuf.Value as grpc-js decodes it (its one field set,
    by its JSON name), as plain Python."""
    (kind, x), = v.items()
    if kind == "structValue":
        return {k: struct_value(y) for k, y in x.get("fields", {}).items()}
    if kind == "listValue":
        return [struct_value(y) for y in x.get("values", [])]
    if kind == "nullValue":
        return None
    return x


def scenario(store, node, gnode_flags_note):
    """The checks on node, a daemon with --response-dynamic-metadata."""
    tag = "[%s] " % store
    # ---- share_threshold: one counter for every value of the wildcard ----
    r = [node.json([dj("path", "/files/%s" % f)])[1] for f in ("a.pdf", "b.csv", "c.txt")]
    check(tag + "share_threshold: three values count on one counter (/json)",
          [remaining_j(x) for x in r] == [[2], [1], [0]], r)
    st, body = node.json([dj("path", "/files/d.doc")])
    check(tag + "share_threshold: a fourth value is over, 0 left (/json)",
          st == 429 and body["statuses"][0]["code"] == "OVER_LIMIT" and
          "limitRemaining" not in body["statuses"][0], body)
    g = node.rls([d("path", "/files/e.png")])
    check(tag + "share_threshold: over on gRPC too, limit_remaining 0",
          grpc_codes(g) == ("OVER_LIMIT", ["OVER_LIMIT"]) and
          g["response"]["statuses"][0]["limit_remaining"] == 0, g)

    # ---- over-limit remaining 0: a request of 2 on 1 left ----
    node.json([dj("two", "x")], hits=2)
    st, body = node.json([dj("two", "x")], hits=2)
    check(tag + "over the limit: limitRemaining 0 though 1 is left (/json)",
          st == 429 and "limitRemaining" not in body["statuses"][0], body)
    g = node.rls([d("two", "x", hits=2)])
    check(tag + "over the limit: limit_remaining 0 (gRPC)",
          g["response"]["statuses"][0]["limit_remaining"] == 0 and
          g["response"]["statuses"][0]["code"] == "OVER_LIMIT", g)
    st, body = node.json([dj("two", "x")])
    check(tag + "... and the unit left is still there", remaining_j(body) == [0] and st == 200, body)

    # ---- quota mode ----
    # ratelimit: OVER_LIMIT when a non-quota descriptor is, or when every
    # quota descriptor is.
    node.json([dj("quota", "q1")])
    st, body = node.json([dj("quota", "q1"), dj("quota", "q2"), dj("user", "u1")])
    check(tag + "quota_mode: one quota descriptor over of two is OK overall",
          st == 200 and body["overallCode"] == "OK" and
          [s["code"] for s in body["statuses"]] == ["OVER_LIMIT", "OK", "OK"], body)
    st, body = node.json([dj("quota", "q1"), dj("user", "u1")])
    check(tag + "quota_mode: every quota descriptor over is OVER_LIMIT",
          st == 429 and body["overallCode"] == "OVER_LIMIT" and
          [s["code"] for s in body["statuses"]] == ["OVER_LIMIT", "OK"], body)
    node.json([dj("enforced", "e1")])
    g = node.rls([d("quota", "q3"), d("enforced", "e1")])
    check(tag + "quota_mode: a non-quota descriptor over is OVER_LIMIT (gRPC)",
          grpc_codes(g) == ("OVER_LIMIT", ["OK", "OVER_LIMIT"]), g)
    g = node.rls([d("quota", "q1"), d("quota", "q4"), d("user", "u2")])
    check(tag + "quota_mode: overall OK on gRPC with one quota of two over",
          grpc_codes(g) == ("OK", ["OVER_LIMIT", "OK", "OK"]), g)

    # ---- metadata in the answer ----
    st, body = node.json([dj("client", "gold"), dj("client", "silver")], hits=2)
    meta = body.get("dynamicMetadata", {})
    check(tag + "metadata: /json's dynamicMetadata merges the passed rules'",
          meta.get("metadata") == {"tier": "gold", "weight": 2.5,
                                   "owner": {"team": "pay", "pager": "night"}} and
          meta.get("domain") == "rl" and meta.get("hitsAddend") == 2 and
          meta.get("descriptors") == [{"entries": ["client=gold"]},
                                      {"entries": ["client=silver"]}], body)
    g = node.rls([d("client", "silver", limit={"requests_per_unit": 50, "unit": 3}),
                  d("client", "gold")])
    dm = g["response"].get("dynamic_metadata")
    got = {k: struct_value(v) for k, v in dm["fields"].items()} if dm else None
    check(tag + "metadata: gRPC dynamic_metadata, an override's limit named",
          got is not None and got["metadata"] == {"tier": "gold", "weight": 2.5,
                                                  "owner": {"team": "pay"}} and
          got["descriptors"][0]["limit"] == "requests_per_unit:50 unit:HOUR", got)

    # ---- unit year, and an override on its counter ----
    r = [node.json([dj("yearly", "y")])[1] for _ in range(3)]
    check(tag + "unit year: counted exactly", [remaining_j(x) for x in r] == [[4], [3], [2]], r)
    reset = r[-1]["statuses"][0].get("durationUntilReset", "0s")
    check(tag + "unit year: the window ends within a year",
          0 < float(reset.rstrip("s")) <= 365 * 86400, reset)
    st, body = node.json([dj("yearly", "y", limit={"requests_per_unit": 100, "unit": "YEAR"})])
    check(tag + "override 100/year after 3 calls on a 5/year rule: 96 left after its own",
          remaining_j(body) == [96], body)
    g = node.rls([d("yearly", "y", limit={"requests_per_unit": 100, "unit": 6})])
    check(tag + "override on gRPC: the same counter",
          g["response"]["statuses"][0]["limit_remaining"] == 95, g)
    r = node.json([dj("yearly", "y")])[1]
    check(tag + "the rule's own limit sees the override's hits (5 - 6: over)",
          r["statuses"][0]["code"] == "OVER_LIMIT", r)
    st, body = node.json([dj("other", "z", limit={"requests_per_unit": 10, "unit": "DAY"})])
    st, body2 = node.json([dj("other", "z", limit={"requests_per_unit": 20, "unit": "DAY"})])
    check(tag + "overrides of one unit share a counter whatever their limit",
          remaining_j(body) == [9] and remaining_j(body2) == [18], (body, body2))

    # ---- metrics labels ----
    node.json([dj("route", "/v1/42/download")])
    node.json([dj("route", "/v1/7/download")])
    node.json([dj("user", "alice")])
    m = node.get("/metrics")[1]
    check(tag + "share_threshold + value_to_metric: the pattern in the label",
          re.search(r'descriptor="route_/v1/\*/download"[^\n]*\} 2', m) is not None,
          [l for l in m.splitlines() if "route_" in l])
    check(tag + "value_to_metric: the request's value in the label",
          'descriptor="user_alice"' in m, [l for l in m.splitlines() if "user" in l][:4])


try:
    redis = harness.Redis()
    redis.start()
    mem = GNode("mem", "--response-dynamic-metadata", "true")
    red = GNode("red", "--response-dynamic-metadata", "true", "--store",
                "redis://127.0.0.1:%d" % redis.port)
    scenario("memory", mem, "")
    scenario("redis", red, "")

    # ---- --shadow-mode, --quota-mode, ratelimit's headers ----
    sh = GNode("shadow", "--shadow-mode", "true", "--quota-mode", "true",
               "--grpc-rate-limit-headers", "ratelimit")
    sh.json([dj("enforced", "s1")])
    st, body = sh.json([dj("enforced", "s1"), dj("user", "s1")])
    check("--quota-mode: one descriptor over of two is OK overall",
          st == 200 and body["overallCode"] == "OK", body)
    st, body = sh.json([dj("enforced", "s1")])
    check("--shadow-mode: every descriptor over is still OK overall, its code kept",
          st == 200 and body["overallCode"] == "OK" and
          body["statuses"][0]["code"] == "OVER_LIMIT", body)
    check("--shadow-mode: counted", (sh.metric("sluice_global_shadow_total") or 0) >= 1,
          sh.metric("sluice_global_shadow_total"))
    g = sh.rls([d("user", "h1", hits=5), d("two", "h1")])
    hdrs = {h["key"]: h["value"] for h in g["response"]["response_headers_to_add"]}
    check("--grpc-rate-limit-headers ratelimit: the closest descriptor's three",
          set(hdrs) == {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} and
          hdrs["RateLimit-Limit"] == "3" and hdrs["RateLimit-Remaining"] == "2" and
          0 < int(hdrs["RateLimit-Reset"]) <= 3600, hdrs)

    # ---- a limit the Redis store cannot take: refused as the rules load ----
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("domain: b\ndescriptors:\n  - key: k\n    rate_limit: "
                "{period: 4503599627370497ns, requests_per_unit: 3}\n")
    p = subprocess.run([SLUICE, "serve", "--rules", bad, "--listen", "127.0.0.1:0",
                        "--store", "redis://127.0.0.1:%d" % redis.port],
                       capture_output=True, text=True, timeout=30)
    check("redis: a limit no tick fits is refused at load, naming the rule",
          p.returncode != 0 and "rule 'b.k'" in p.stderr and
          "out of range for the redis store" in p.stderr, p.stderr[-500:])
    p = subprocess.run([SLUICE, "validate", bad], capture_output=True, text=True)
    check("validate: loads it, warning of --store redis://",
          p.returncode == 0 and "warning: rule 'b.k': refused with --store redis://"
          in p.stderr, p.stderr)

    harness.check_exit([mem, red, sh])
finally:
    harness.kill_all()

print("%d failed" % harness.failed if harness.failed else "all passed")
sys.exit(harness.failed)
PY
