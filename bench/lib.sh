# bench/lib.sh - what the bench scripts share; sourced, not run.

# build_bench_decide SRC BUILD LOG: bench_decide of the tree SRC in BUILD,
# RelWithDebInfo as bench/run.sh builds it, its output appended to LOG
# (whose tail is shown if it fails).
build_bench_decide() {
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo >>"$3" 2>&1 &&
    cmake --build "$2" --target bench_decide -j2 >>"$3" 2>&1 ||
    { tail -20 "$3"; return 1; }
}

# nginx_head [MAIN_LINE...]: the top of an nginx config, up to inside
# `http {`, for a prefix directory (nginx -p DIR/) that holds tmp/: one
# worker (plus the main-level lines given), no access log, keep-alive
# connections that last the run.
nginx_head() {
  printf '%s\n' "worker_processes 1;" "$@"
  cat <<'Y'
daemon off;
pid nginx.pid;
error_log error.log error;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 65s;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
Y
}

# nginx_dir DIR: DIR and DIR/tmp made usable by nginx workers, which run
# as nobody when the bench runs as root (DIR's parents must be 755 too).
nginx_dir() {
  mkdir -p "$1/tmp"
  chmod 755 "$1"
  chmod 1777 "$1/tmp"
}

# upstream_conf DIR PORT [MAIN_LINE...]: DIR/nginx.conf of the benches'
# upstream, `return 200 "ok"` on 127.0.0.1:PORT; run it with
# nginx -p DIR/ -c DIR/nginx.conf.
upstream_conf() {
  local dir=$1 port=$2
  shift 2
  nginx_dir "$dir"
  {
    nginx_head "$@"
    echo "    server { listen 127.0.0.1:$port; location / { return 200 \"ok\"; } }"
    echo "}"
  } >"$dir/nginx.conf"
}

# ports_free FROM TO: exits unless no loopback port in [FROM, TO] is taken.
ports_free() {
  local p
  for p in $(seq "$1" "$2"); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "port $p is already in use; set PORT=" >&2
      exit 1
    fi
  done
}

# proxy_yaml FILE PORT UP: `sluice proxy`'s config in the proxy benches:
# one thread listening on 127.0.0.1:PORT in front of 127.0.0.1:UP, the
# rules of bench/proxy_rules/, a route per case (/all, /limited, /keys).
proxy_yaml() {
  cat >"$1" <<Y
rules: $(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/proxy_rules
listen: 127.0.0.1:$2
threads: 1
upstream: http://127.0.0.1:$3
upstream_pool: 64
routes:
  - {prefix: /all, domain: all, descriptors: [[{remote_address: {}}]]}
  - {prefix: /limited, domain: limited, descriptors: [[{remote_address: {}}]]}
  - {prefix: /keys, domain: keys, descriptors: [[{request_header: {name: X-Api-Key, key: api_key}}]]}
Y
}

# limit_req_http UP: the http-level lines of the nginx the proxy benches
# compare with: limit_req zones with bench/proxy_rules/'s limits (ip_hi
# for /all, ip_lo for /limited, key_hi for /keys) and a keep-alive
# upstream `backend` at 127.0.0.1:UP.  The caller adds its servers.
limit_req_http() {
  cat <<Y
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    limit_req_status 429;
    limit_req_log_level info;
    limit_req_zone \$binary_remote_addr zone=ip_hi:1m rate=1000000r/s;
    limit_req_zone \$binary_remote_addr zone=ip_lo:1m rate=10r/s;
    limit_req_zone \$http_x_api_key zone=key_hi:64m rate=1000r/s;
    upstream backend { server 127.0.0.1:$1; keepalive 64; keepalive_requests 100000000; }
Y
}

# wait_up PORT [TRIES]: returns once something listens on 127.0.0.1:PORT,
# trying every 0.1 s (100 times by default); exits if nothing does.
wait_up() {
  local i
  for i in $(seq "${2:-100}"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2
  exit 1
}

# throwaway_redis [CPU]: a redis-server without persistence on a free
# loopback port (pinned to CPU if given), in a temporary directory that
# goes with it on exit; sets REDIS_PORT and returns once it answers.
throwaway_redis() {
  REDIS_DIR=$(mktemp -d)
  REDIS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  ${1:+taskset -c "$1"} redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
    --save '' --appendonly no --dir "$REDIS_DIR" --daemonize no \
    >"$REDIS_DIR/redis.log" 2>&1 &
  REDIS_PID=$!
  trap 'kill $REDIS_PID 2>/dev/null; wait $REDIS_PID 2>/dev/null; rm -rf "$REDIS_DIR"' EXIT
  for _ in $(seq 100); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis-server did not start (see $REDIS_DIR/redis.log)" >&2
  exit 1
}

# ns the given processes' threads have waited on a run queue so far
runq_wait_ns() {
  local t=0 p f a b c
  for p in "$@"; do
    for f in /proc/"$p"/task/*/schedstat; do
      read -r a b c 2>/dev/null <"$f" && t=$((t + b))
    done
  done
  echo "$t"
}

# rt_policy on|off PIDS: SCHED_FIFO 1 for every thread of PIDS, or back
rt_policy() {
  local p
  for p in $2; do
    if [ "$1" = on ]; then chrt -f -a -p 1 "$p"; else chrt -o -a -p 0 "$p"; fi
  done
}

# grpc_bench_files DIR: the gRPC benches' rules (DIR/rules.yaml: domain
# bench, descriptor api_key with a limit no run reaches) and request
# (DIR/req.bin: RateLimitRequest{domain "bench", one descriptor
# api_key=k000001} with gRPC's 5-byte prefix, for h2load -d and
# bench/grpc_load).
# grpc_bench_serve: `sluice serve --threads 1` on CPU $SRV_CPU with
# $OUT/rules.yaml (grpc_bench_files), HTTP on $PORT and gRPC on $GPORT;
# its PID in SPID (the caller's trap stops it).  decisions: how many
# requests it has decided, from its /metrics.
grpc_bench_serve() {
  taskset -c "$SRV_CPU" "$SLUICE" serve --rules "$OUT/rules.yaml" --threads 1 --public-metrics true \
    --listen "127.0.0.1:$PORT" --grpc-listen "127.0.0.1:$GPORT" 2>"$OUT/sluice.log" &
  SPID=$!
  wait_port "$PORT" && wait_port "$GPORT" ||
    { echo "sluice did not start (see $OUT/sluice.log)" >&2; exit 1; }
}
decisions() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '/^sluice_checks_total\{/ {n += $2} END {printf "%d\n", n}'
}

grpc_bench_files() {
  printf 'domain: bench\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n' >"$1/rules.yaml"
  python3 - "$1/req.bin" <<'P'
import sys
def ld(num, payload):
    return bytes([num << 3 | 2, len(payload)]) + payload
entry = ld(1, b"api_key") + ld(2, b"k000001")
msg = ld(1, b"bench") + ld(2, ld(1, entry))
open(sys.argv[1], "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
P
}
