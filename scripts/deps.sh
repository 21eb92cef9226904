#!/bin/bash
# Installs the Debian 12 packages sluice needs, if any is missing: to build
# and run it (scripts/deps.sh, as scripts/run.sh does), and to test it
# (--test), with the fuzz targets' compiler too (--fuzz, as
# scripts/test.sh does).  Run as root (or with sudo available).
# Idempotent and quiet when everything is there.
set -euo pipefail
# libuv1-dev, libhttp-parser-dev, libjansson-dev: `sluice serve`;
# libhiredis-dev: the Redis store; redis-server, redis-tools: its tests
# and bench/redis_bytes_per_key.sh; redis-sentinel: the tests of
# redis-sentinel:// (tests/test_redis_sentinel.sh);
# curl, python3: the shell tests (tests/*.sh); nginx: tests/test_nginx.sh
# runs examples/nginx/ in front of a test upstream; nodejs, npm: the tests
# that drive sluice with real Node clients (tests/*/package.json).
# libssl-dev: TLS on the listeners; openssl: tests/test_tls.sh makes its
# CA and certificates, and talks to the listeners (s_client).
# libnghttp2-dev: serve's gRPC door; python3-h2 (hyperframe, hpack):
# tests/test_serve_grpc.sh's raw HTTP/2 client; nghttp2-client (nghttp,
# h2load), wrk: its docs examples and bench/grpc_vs_json.sh.
# dpkg-dev (dpkg-shlibdeps, with binutils' objdump): scripts/package.sh,
# tests/test_package.sh; lintian: the test checks the package with it.
# chromium: tests/test_status.sh drives the status page in it, headless
# (puppeteer-core, tests/status/package-lock.json); groff-base:
# tests/test_cli.sh renders the man pages.  lua5.1: the Redis store's
# Lua run alone (bench/redis_lua_insn.sh, bench/redis_lua.lua's diff of
# two versions).  The first line is what
# building and running sluice takes (libcmocka-dev too: CMake's
# configure finds the unit tests' framework); the rest, --test.
PKGS=(build-essential cmake pkg-config libyaml-dev libhiredis-dev
      libuv1-dev libhttp-parser-dev libjansson-dev libnghttp2-dev curl
      libcmocka-dev libssl-dev)
test=0
case "${1:-}" in
  --test) test=1 ;;
  --fuzz) test=1 ;;
  "") ;;
  *) echo "usage: scripts/deps.sh [--test | --fuzz]" >&2; exit 2 ;;
esac
[ "$test" = 1 ] && PKGS+=(redis-server redis-tools redis-sentinel python3 nginx nodejs npm
  nghttp2-client wrk python3-h2 dpkg-dev lintian chromium groff-base lua5.1 openssl)
# --fuzz (scripts/test.sh): clang and its libFuzzer runtime, for the fuzz
# targets' smoke run; not needed to build or run sluice.
[ "${1:-}" = --fuzz ] && PKGS+=(clang libclang-rt-dev)
# The Node clients the tests use, at the versions their package-lock.json
# pins, into tests/DIR/node_modules (once).
node_clients() {
  [ "$test" = 1 ] || return 0
  local root lock
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for lock in "$root"/tests/*/package-lock.json; do
    [ -e "$lock" ] || continue
    [ -d "$(dirname "$lock")/node_modules" ] && continue
    npm ci --prefix "$(dirname "$lock")" --no-audit --no-fund --loglevel=error >&2
  done
}
missing=()
for p in "${PKGS[@]}"; do
  # A node from elsewhere (nodesource) serves as well as Debian's.
  case "$p" in nodejs|npm) command -v "${p/nodejs/node}" >/dev/null && continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  node_clients
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
[ "$status" = 0 ] && node_clients
exit "$status"
