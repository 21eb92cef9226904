#!/bin/bash
# test_grafana.sh - contrib/grafana/sluice.json is a dashboard Grafana
# imports as it is (an exported dashboard: its Prometheus data source an
# input, panels with unique ids on a 24-column grid without overlaps),
# and every metric it queries exists in a live /metrics: sluice serve on
# a real redis-server (so the store, breaker and fallback series are
# there) after some traffic.  Every label a query selects on or sums by
# is a label of that metric's series (`instance` aside: Prometheus adds
# it), and the panels cover what docs/operations.md says they do.
#
# Needs SLUICE (the built binary) and SOURCE_DIR.
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"
: "${SOURCE_DIR:?the source tree}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, sys, tempfile, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check

SLUICE, SRC = sys.argv[1], sys.argv[2]
dash = json.load(open(os.path.join(SRC, "contrib", "grafana", "sluice.json")))

# ---- importable as is ----
inputs = [i["name"] for i in dash.get("__inputs", []) if i.get("pluginId") == "prometheus"]
check("an exported dashboard: its Prometheus data source is an input",
      inputs == ["DS_PROMETHEUS"] and dash.get("uid") and dash.get("title") and
      isinstance(dash.get("schemaVersion"), int), inputs)
panels = dash["panels"]
ids = [p["id"] for p in panels]
check("panel ids unique", len(ids) == len(set(ids)), ids)
cells = set()
overlap = []
for p in panels:
    g = p["gridPos"]
    if g["x"] + g["w"] > 24:
        overlap.append(p["title"] + " past column 24")
    for x in range(g["x"], g["x"] + g["w"]):
        for y in range(g["y"], g["y"] + g["h"]):
            if (x, y) in cells:
                overlap.append(p["title"])
            cells.add((x, y))
check("panels on the 24-column grid, none overlapping", not overlap, sorted(set(overlap)))
queries = []  # (where, expr)
for p in panels:
    if p["type"] == "row":
        continue
    ds = [p.get("datasource")] + [t.get("datasource") for t in p["targets"]]
    check("panel '%s': the input data source, and a query" % p["title"],
          all(d == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"} for d in ds)
          and p["targets"] and all(t.get("expr") for t in p["targets"]), ds)
    queries += [(p["title"], t["expr"]) for t in p["targets"]]
for v in dash["templating"]["list"]:
    queries.append(("variable " + v["name"], v["definition"]))

# ---- a live /metrics: serve on Redis, some traffic ----
tmp = tempfile.mkdtemp()
try:
    redis = harness.Redis()
    redis.start()
    rules = harness.rules_file(tmp, 3, "  - key: shadow\n    shadow_mode: true\n"
                               "    rate_limit: {unit: hour, requests_per_unit: 1}\n")
    node = harness.Node(SLUICE, tmp, "node", rules,
                        "--store", "redis://127.0.0.1:%d" % redis.port)
    for i in range(5):
        node.check("token_bucket", "k")
        node.check("shadow", "k")
    os.kill(node.p.pid, 1)  # SIGHUP: a reload
    harness.wait_until(lambda: node.metric('sluice_rules_reloads_total{result="ok"}') == 1)
    text = urllib.request.urlopen(node.url("/metrics")).read().decode()
    series = {}  # name -> set of label names seen
    for line in text.splitlines():
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? ', line)
        if m and not line.startswith("#"):
            labels = set(re.findall(r'([a-zA-Z_]\w*)="', m.group(3) or ""))
            series.setdefault(m.group(1), set()).update(labels)

    used = set()
    for where, expr in queries:
        for name in sorted(set(re.findall(r"\bsluice_[a-z0-9_]+", expr))):
            used.add(name)
            check("%s: %s is in /metrics" % (where, name), name in series,
                  "absent from a live /metrics")
            if name not in series:
                continue
            sel = re.findall(name + r"\{([^}]*)\}", expr)
            names = set(re.findall(r'([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)', " ".join(sel)))
            missing = names - series[name] - {"instance"}
            check("%s: %s's selected labels exist" % (where, name), not missing, missing)
        for by in re.findall(r"by \(([^)]*)\)", expr):
            labels = {l.strip() for l in by.split(",")} - {"instance"}
            metrics = set(re.findall(r"\bsluice_[a-z0-9_]+", expr)) & set(series)
            missing = {l for l in labels if not any(l in series[m] for m in metrics)}
            check("%s: by (%s) are labels of its metrics" % (where, by), not missing, missing)
    want = {"sluice_rule_within_limit_total", "sluice_rule_over_limit_total",
            "sluice_rule_near_limit_total", "sluice_rule_shadow_mode_total",
            "sluice_decision_duration_seconds_bucket", "sluice_store_up",
            "sluice_store_breaker_transitions_total",
            "sluice_store_fallback_decisions_total", "sluice_rules_reloads_total",
            "sluice_checks_total", "sluice_limit_requests_per_unit"}
    check("the dashboard covers decisions and rejections per rule, near-limit, shadow, "
          "latency, store state, breaker, fallbacks, reloads", want <= used, want - used)
    harness.check_exit([node])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
