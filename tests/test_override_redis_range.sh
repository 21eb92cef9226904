#!/bin/bash
# On `--store redis://` a limit is decided in the tick of its rule's own
# numbers (docs/stores.md, "Exactness"), so what an override or an
# adaptive bound sets must fit that tick: an admin override that does not
# is refused at PUT with a 400 naming the rule, the rule's own limit stays
# live and decides; a rules file whose adaptive.max does not fit is
# refused as it loads, naming the rule.  Against a real redis-server.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, subprocess, sys, tempfile, urllib.error, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
# 1000003 is prime: over a day, its T = P / L needs B * P ns of range,
# past 2^52, in the 1 ns tick that 10/day takes.
RULE = ("domain: test\ndescriptors:\n  - key: k\n    rate_limit: "
        "{algorithm: token_bucket, unit: day, requests_per_unit: 10%s}\n")
rules = os.path.join(tmp, "rules.yaml")
open(rules, "w").write(RULE % "")
TOKEN = "t0ken-for-the-admin-api-0123456789"
open(os.path.join(tmp, "token"), "w").write(TOKEN + "\n")
try:
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    node = harness.Node(SLUICE, tmp, "n", rules, "--store", store,
                        "--admin-listen", "127.0.0.1:0",
                        "--admin-token-file", os.path.join(tmp, "token"))
    port = int(harness.re.search(r"admin listening on 127\.0\.0\.1:(\d+)",
                                 open(node.log).read()).group(1))

    def put(body):
        req = urllib.request.Request("http://127.0.0.1:%d/admin/v1/overrides/test.k" % port,
                                     json.dumps(body).encode(), method="PUT",
                                     headers={"Authorization": "Bearer " + TOKEN})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    st, body = put({"requests_per_unit": 1000003, "burst": 1000003})
    msg = body.get("error", {}).get("message", "")
    check("an override no tick of the base carries: 400 at PUT", st == 400, (st, body))
    check("its message names the rule and the redis store's range",
          "test.k" in msg and "redis store" in msg, msg)
    st, body, _, _ = node.check("k", "v")
    check("and the rule's own limit stays live: 200, limit 10",
          st == 200 and body["descriptors"][0]["limit"]["requests"] == 10, (st, body))
    st, body = put({"requests_per_unit": 1000000, "burst": 1000000})
    check("an override that fits: 201", st == 201, (st, body))
    st, body, _, _ = node.check("k", "v")
    check("and it decides", st == 200, (st, body))
    harness.check_exit([node])

    # adaptive.max 1000003 (its burst scaled alike) fits no tick of 10/day
    bad = os.path.join(tmp, "bad.yaml")
    open(bad, "w").write(RULE % ", burst: 10, adaptive: {min: 5, max: 1000003}")
    p = subprocess.run([SLUICE, "serve", "--rules", bad, "--store", store,
                        "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=20)
    check("an adaptive max no tick fits: serve refuses the rules",
          p.returncode != 0 and "test.k" in p.stderr and "adaptive max 1000003" in p.stderr,
          (p.returncode, p.stderr[-600:]))
    p = subprocess.run([SLUICE, "validate", bad], capture_output=True, text=True)
    check("and validate warns of it", p.returncode == 0 and
          "adaptive max 1000003" in p.stderr, (p.returncode, p.stderr))
    good = os.path.join(tmp, "good.yaml")
    open(good, "w").write(RULE % ", burst: 10, adaptive: {min: 5, max: 1000000}")
    n2 = harness.Node(SLUICE, tmp, "n2", good, "--store", store)
    check("an adaptive max that fits loads", n2.port is not None)
    harness.check_exit([n2])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
