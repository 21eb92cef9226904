#!/bin/bash
# bench/resp_unread.sh [BINARY...] - what clients that pipeline without
# reading their replies cost `sluice serve --resp-listen` (issue 34):
# 50 connections (receive buffers of 4 KiB) each send 3 x 30,000
# `COMMAND`s (9 bytes in, 842 out) over 1.5 s and read nothing; the
# daemon's resident memory (VmRSS) grown then, and what stays after they
# close.  One line per binary, e.g. a build before and after a change.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -gt 0 ] || set -- "$ROOT/build-bench/sluice"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10}\n' >"$W/rules.yaml"
for bin in "$@"; do
  python3 - "$bin" "$W/rules.yaml" "$ROOT" <<'PY'
import os, socket, subprocess, sys, time
bin, rules = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(sys.argv[3], "tests", "sh"))
from harness import rss_kb, unread_resp_clients
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([bin, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
                      "--resp-listen", "127.0.0.1:%d" % port, "--threads", "1"],
                     stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port), 0.1).close(); break
    except OSError:
        time.sleep(0.05)
rss = lambda: rss_kb(p.pid)
r0 = rss()
socks = unread_resp_clients(port)
time.sleep(1)
grown = (rss() - r0) / 1024
for c in socks:
    c.close()
time.sleep(1)
print("%s: grew %.1f MB with 50 unread clients (%.2f MB each), %.1f MB left after they closed"
      % (bin, grown, grown / 50, (rss() - r0) / 1024))
p.kill()
PY
done
