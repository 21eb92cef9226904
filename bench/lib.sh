# bench/lib.sh - what the bench scripts share; sourced, not run.

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
