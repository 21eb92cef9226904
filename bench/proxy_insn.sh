#!/bin/bash
# bench/proxy_insn.sh - user-space instructions per proxied request of
# `sluice proxy` and of nginx (proxy_pass + limit_req), counted by
# callgrind (repeatable to a few parts per thousand on this VM, which has
# no hardware counters).  Wall-clock rates on this shared machine swing by
# a quarter; this figure does not.
#
#   bench/proxy_insn.sh                 # cases allowed limited keys
#   CASES="allowed adaptive" bench/proxy_insn.sh
#   KEEP=DIR bench/proxy_insn.sh        # keeps the callgrind files in DIR
#
# Case adaptive is case allowed (same route, domain and limit) with
# `adaptive: {controller: gradient}` on the limit
# (bench/proxy_rules_adaptive/): what measuring each forwarded request
# for the controller costs (sluice only; nginx has no such thing).
#
# The upstream is its own nginx process (`return 200 "ok"`), outside
# callgrind, the same for both proxies.  Each proxy runs alone under
# callgrind on CPU 0 (nginx with master_process off: one process that is
# its worker), one event-loop thread, keep-alive upstream connections; wrk
# (-t1 -c20, CPU 1) runs 3 s and then, in a second run, 8 s; the figure is
# (I(8 s) - I(3 s)) / (N(8 s) - N(3 s)), so start-up and shutdown cancel.
# The cases and limits are those of bench/proxy_vs_nginx.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
SLUICE="${SLUICE:-$ROOT/build-bench/sluice}"
CASES="${CASES:-allowed limited keys}"
PORT="${PORT:-18640}" # proxy; upstream PORT+1
UP=$((PORT + 1))
KEYS_LUA="$PEERS_DIR/wrk/keys.lua"
export PATH="$PATH:/usr/sbin"
source "$HERE/lib.sh"
W="$(mktemp -d)"
chmod 755 "$W"
UPID=""; VPID=""
cleanup() {
  [ -n "$VPID" ] && kill -TERM "$VPID" 2>/dev/null
  [ -n "$UPID" ] && kill -QUIT "$UPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

upstream_conf "$W/up" "$UP"
nginx_dir "$W/px"
{
  nginx_head "master_process off;"
  limit_req_http "$UP"
  cat <<Y
    server { listen 127.0.0.1:$PORT;
      location /all { limit_req zone=ip_hi burst=1000000 nodelay; proxy_pass http://backend; }
      location /limited { limit_req zone=ip_lo; proxy_pass http://backend; }
      location /keys { limit_req zone=key_hi burst=1000 nodelay; proxy_pass http://backend; } } }
Y
} >"$W/px/nginx.conf"
proxy_yaml "$W/proxy.yaml" "$PORT" "$UP"
sed "s|^rules: .*|rules: $HERE/proxy_rules_adaptive|" "$W/proxy.yaml" >"$W/adaptive.yaml"

taskset -c 1 nginx -p "$W/up/" -c "$W/up/nginx.conf" -e "$W/up/error.log" &
UPID=$!

run() { # WHO SECONDS URL [wrk args] -> "requests instructions"
  local who=$1 secs=$2 url=$3 out n config=$W/proxy.yaml
  shift 3
  out="$W/callgrind.out"
  [ "$who" = sluice-adaptive ] && config=$W/adaptive.yaml
  if [ "$who" != nginx ]; then
    taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$SLUICE" proxy --config "$config" 2>"$W/sluice.log" &
  else
    taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" \
      nginx -p "$W/px/" -c "$W/px/nginx.conf" -e "$W/px/error.log" 2>"$W/nginx.log" &
  fi
  VPID=$!
  wait_up "$PORT" 200
  sleep 0.5
  n=$(taskset -c 1 wrk -t1 -c20 -d"$secs"s "$@" "$url" |
    sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  kill -TERM "$VPID"
  wait "$VPID" 2>/dev/null || true
  VPID=""
  echo "$n $(grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}')"
  if [ -n "${KEEP:-}" ]; then cp "$out" "$KEEP/callgrind.$who.${url##*/}.$secs"; fi
  rm -f "$out"
}

wait_up "$UP"
echo "# sluice $(git -C "$ROOT" rev-parse --short HEAD), $SLUICE; $(nginx -v 2>&1 | sed 's/.*: //')"
for c in $CASES; do
  case $c in
    allowed) path=/all; extra=() ;;
    limited) path=/limited; extra=() ;;
    keys) path=/keys; extra=(-s "$KEYS_LUA") ;;
    adaptive) path=/all; extra=() ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  whos="sluice nginx"
  [ "$c" = adaptive ] && whos=sluice-adaptive
  for who in $whos; do
    read -r n3 i3 < <(run "$who" 3 "http://127.0.0.1:$PORT$path" "${extra[@]}")
    read -r n8 i8 < <(run "$who" 8 "http://127.0.0.1:$PORT$path" "${extra[@]}")
    echo "$c $who: $(((i8 - i3) / (n8 - n3))) user-space instructions per request ($n3 and $n8 requests)"
  done
done
