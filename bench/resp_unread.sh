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
  python3 - "$bin" "$W/rules.yaml" <<'PY'
import re, socket, subprocess, sys, time
bin, rules = sys.argv[1], sys.argv[2]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([bin, "serve", "--rules", rules, "--listen", "127.0.0.1:0",
                      "--resp-listen", "127.0.0.1:%d" % port, "--threads", "1"],
                     stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port), 0.1).close(); break
    except OSError:
        time.sleep(0.05)
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))
r0 = rss()
socks = []
for _ in range(50):
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.setblocking(False)
    socks.append(c)
for _ in range(3):
    for c in socks:
        try:
            c.send(b"COMMAND\r\n" * 30000)
        except BlockingIOError:
            pass
    time.sleep(0.5)
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
