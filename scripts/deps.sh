#!/bin/bash
# Installs the Debian 12 packages sluice needs to build and test, if any is
# missing (scripts/deps.sh [--fuzz]).  Run as root (or with sudo available).  Idempotent and quiet when
# everything is there.
set -euo pipefail
# libuv1-dev, libhttp-parser-dev, libjansson-dev: `sluice serve`;
# libhiredis-dev: the Redis store; redis-server, redis-tools: its tests
# and bench/redis_bytes_per_key.sh;
# curl, python3: the shell tests (tests/*.sh); nginx: tests/test_nginx.sh
# runs examples/nginx/ in front of a test upstream.  libnghttp2-dev:
# serve's gRPC door; nghttp2-client (h2load), wrk: the benchmarks;
# python3-h2 (hyperframe, hpack) and nodejs, npm (grpc's Node client,
# installed below into tests/grpc): tests/test_serve_grpc.sh.
PKGS=(build-essential cmake pkg-config libcmocka-dev libyaml-dev
      libhiredis-dev redis-server redis-tools
      libuv1-dev libhttp-parser-dev libjansson-dev curl python3 nginx
      libnghttp2-dev nghttp2-client wrk python3-h2)
# Node may come from elsewhere than Debian: only its absence adds it.
command -v node >/dev/null && command -v npm >/dev/null || PKGS+=(nodejs npm)
# --fuzz (scripts/test.sh): clang and its libFuzzer runtime, for the fuzz
# targets' smoke run; not needed to build or run sluice.
[ "${1:-}" = --fuzz ] && PKGS+=(clang libclang-rt-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# tests/grpc's Node packages, as package-lock.json pins them, when they
# are missing or older than the lock.
npm_ci() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/grpc"
  if [ ! -d "$dir/node_modules" ] ||
     [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}
if [ ${#missing[@]} -eq 0 ]; then
  npm_ci
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Servers are installed for the tests, which start their own on free
# ports: keep the packages from starting a system-wide one (and from
# failing where no init system runs).
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  added_policy=1
fi
$SUDO apt-get update -qq
status=0
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
[ "$added_policy" = 1 ] && $SUDO rm -f "$policy"
[ "$status" = 0 ] && npm_ci
exit "$status"
