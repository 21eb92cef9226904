# tests/sh/common.sh - sourced by the shell tests (tests/*.sh): PASS and
# FAIL lines, free loopback ports, waiting for a server's port, and (for
# the tests whose cleanup is only that) a temporary directory with the
# daemons started in it.  (It lives
# in a folder of its own because CTest runs every tests/*.sh as a test.)

fail=0
pass() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; fail=1; }

# A loopback port nothing listens on now, for servers that cannot pick
# their own (nginx, redis-server).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to 5 s for a server on a loopback port; exits the test if none.
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "FAIL nothing listens on port $1"
  exit 1
}

# scratch_with_daemons: sets tmp (a new temporary directory) and pids (the
# daemons the test appends), and at exit kills those daemons and removes
# tmp.
scratch_with_daemons() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
}
