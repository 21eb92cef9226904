#!/bin/bash
# Resident memory of `sluice serve --grpc-listen` under streams whose
# message prefix announces the largest message (--max-body-bytes, 64 KiB)
# and then sends one byte: WAVES waves of CONNS connections of 100 such
# streams each (the most a connection may open), all closed between
# waves.  Prints VmRSS and VmSize (from /proc) after each wave is open
# and after it closed, for each sluice binary named (default: this
# tree's build), so that two builds are measured side by side in one run.
#
#   bench/grpc_prefix.sh [SLUICE...]      e.g. /tmp/before/sluice build/sluice
#   WAVES=8 CONNS=100 bench/grpc_prefix.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$here/build/sluice"
WAVES=${WAVES:-8} CONNS=${CONNS:-100} exec /usr/bin/python3 - "$here" "$@" <<'PY'
import os, re, signal, subprocess, sys, tempfile, time
here, binaries = sys.argv[1], sys.argv[2:]
sys.path.insert(0, os.path.join(here, "tests", "grpc"))
import h2raw

WAVES, CONNS = int(os.environ["WAVES"]), int(os.environ["CONNS"])
tmp = tempfile.mkdtemp()
rules = os.path.join(tmp, "rules.yaml")
open(rules, "w").write("domain: test\ndescriptors:\n  - key: k\n"
                       "    rate_limit: {unit: hour, requests_per_unit: 10}\n")


def mem(pid):
    out = {}
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmSize"):
            out[k] = int(v.split()[0]) / 1024
    return out


for binary in binaries:
    log = os.path.join(tmp, "serve.log")
    p = subprocess.Popen([binary, "serve", "--rules", rules, "--threads", "1",
                          "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
                          "--max-connections", str(CONNS + 10)],
                         stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    port = None
    for _ in range(200):
        m = re.search(r"grpc listening on 127\.0\.0\.1:(\d+)", open(log).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.025)
    start = mem(p.pid)
    print("%s: start RSS %.1f MB, VSZ %.1f MB" % (binary, start["VmRSS"], start["VmSize"]))
    for wave in range(1, WAVES + 1):
        conns = h2raw.announcing_conns(port, CONNS)
        time.sleep(0.3)
        held = mem(p.pid)
        for c in conns:
            c.sock.close()
        time.sleep(1.0)
        after = mem(p.pid)
        print("wave %d: %d streams open: RSS %.1f MB; closed: RSS %.1f MB, VSZ %.1f MB"
              % (wave, CONNS * 100, held["VmRSS"], after["VmRSS"], after["VmSize"]),
              flush=True)
    p.send_signal(signal.SIGTERM)
    p.wait(15)
PY
