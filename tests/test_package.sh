#!/bin/bash
# test_package.sh - the Debian package (scripts/package.sh), installed on
# this machine: its files are where Debian puts them, its Depends are the
# libraries the binary loads, the unit passes `systemd-analyze verify`
# and scores as hardened offline, a program compiled with
# `pkg-config --cflags --libs sluice` runs on the installed libsluice, the
# unit's ExecStart runs as an unprivileged user with the unit's
# LimitNOFILE and answers, its ExecReload reloads the rules, SIGTERM ends
# it with 0, and `apt-get purge` leaves none of the package's files.
#
# It installs into the machine, so it runs only as root (CI runs it as
# root on a fresh Debian 12) and skips, saying why, when sluice is
# already installed (not ours to replace), when the binary is a sanitizer
# build, or without dpkg/apt.  A lock keeps two runs from overlapping, and
# apt waits for the dpkg lock rather than failing.  systemd need not run:
# the unit's command line is run by hand as the unit would run it.
#
# Needs SLUICE (the built binary; its build directory is packaged) and
# SOURCE_DIR.
set -eu # not pipefail: its checks end pipes in grep -q
: "${SLUICE:?path of the built sluice binary}"
: "${SOURCE_DIR:?the source tree}"
. "$SOURCE_DIR/tests/sh/common.sh"

skip() { echo "SKIP test_package: $1"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root (it installs a package)"
command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null || skip "no dpkg-deb/apt-get"
command -v dpkg-shlibdeps >/dev/null || skip "no dpkg-shlibdeps (dpkg-dev)"
! ldd "$SLUICE" | grep -q 'libasan\|libtsan' || skip "a sanitizer build is not packaged"

exec 9>/run/lock/sluice-test-package.lock
flock -w 600 9 || skip "another test_package holds the lock"
if dpkg-query -W -f='${Status}' sluice 2>/dev/null | grep -q "ok installed"; then
  skip "a sluice package is installed already"
fi

tmp=$(mktemp -d)
pid=""
installed=0
apt_opts=(-y -qq -o DPkg::Lock::Timeout=300)
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ "$installed" = 1 ] && DEBIAN_FRONTEND=noninteractive apt-get purge "${apt_opts[@]}" sluice >/dev/null 2>&1
  rm -rf "$tmp" ${cred:+"$cred"}
}
trap cleanup EXIT

# ---- build ----
deb=$("$SOURCE_DIR/scripts/package.sh" --build-dir "$(dirname "$SLUICE")" --out "$tmp")
[ -f "$deb" ] && pass "scripts/package.sh built $(basename "$deb")" || { bad package "no .deb"; exit 1; }
if command -v lintian >/dev/null; then
  rc=0
  out=$(lintian --fail-on error,warning "$deb" 2>&1) || rc=$?
  [ "$rc" = 0 ] && ! grep -q '^[EW]: ' <<<"$out" &&
    pass "lintian: no error, no warning" || bad "lintian" "$out"
else
  bad "lintian" "not installed (scripts/deps.sh --test installs it)"
fi
dpkg-deb -I "$deb" shlibs | grep -qx "libsluice 0 sluice (>= $(dpkg-deb -f "$deb" Version))" &&
  dpkg-deb -I "$deb" triggers | grep -qx 'activate-noawait ldconfig' &&
  pass "libsluice: shlibs and the ldconfig trigger" || bad "shlibs" "$(dpkg-deb -I "$deb" shlibs 2>&1)"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/contents"
want=(/usr/bin/sluice /usr/include/sluice.h /usr/include/sluice_rules.h
      /usr/share/man/man1/sluice.1.gz /usr/share/man/man1/sluice-serve.1.gz
      /usr/share/man/man1/sluice-wait.1.gz /etc/sluice/sluice.yaml
      /etc/sluice/rules/api.yaml /lib/systemd/system/sluice.service
      /usr/share/doc/sluice/copyright)
missing=()
for f in "${want[@]}"; do grep -qx "$f" "$tmp/contents" || missing+=("$f"); done
grep -q '^/usr/lib/[^/]*/libsluice.so.0.[0-9.]*$' "$tmp/contents" || missing+=(libsluice.so.0.x)
grep -q '^/usr/lib/[^/]*/pkgconfig/sluice.pc$' "$tmp/contents" || missing+=(sluice.pc)
[ ${#missing[@]} = 0 ] && pass "the package holds the binary, libsluice, headers, sluice.pc, man pages, /etc/sluice, the unit" ||
  bad "contents" "missing ${missing[*]}"
depends=$(dpkg-deb -f "$deb" Depends)
dpkg-deb -I "$deb" conffiles | grep -qx /etc/sluice/sluice.yaml &&
  grep -q libuv1 <<<"$depends" && grep -q libhiredis <<<"$depends" && grep -q libyaml <<<"$depends" &&
  pass "Depends: $depends; /etc/sluice is conffiles" || bad "control" "$depends"

# ---- install ----
DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "$deb" >"$tmp/apt.log" 2>&1 &&
  installed=1 || { bad "apt-get install" "$(cat "$tmp/apt.log")"; exit 1; }
# Its files and links (not the directories, which other packages share).
dpkg-deb -c "$deb" | awk '$1 ~ /^[-l]/ {print $6}' | sed 's|^\./|/|' >"$tmp/files"
[ "$(/usr/bin/sluice --version)" = "$("$SLUICE" --version)" ] &&
  pass "installed: /usr/bin/sluice --version" || bad "installed binary" "$(/usr/bin/sluice --version)"
if command -v man >/dev/null; then
  man -P cat sluice-wait 2>/dev/null | grep -q 'max-wait' &&
    pass "man sluice-wait" || bad "man" "man sluice-wait shows no --max-wait"
fi

unit=/lib/systemd/system/sluice.service
if command -v systemd-analyze >/dev/null; then
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) && pass "systemd-analyze verify: clean" ||
    bad "systemd-analyze verify" "$out"
  score=$(systemd-analyze security --offline=yes "$unit" 2>&1 |
    sed -n 's/.*Overall exposure level for sluice.service: \([0-9.]*\).*/\1/p')
  python3 -c "import sys; sys.exit(not (0 <= float('$score') <= 2.0))" 2>/dev/null &&
    pass "systemd-analyze security: exposure $score (at most 2.0)" || bad "exposure" "'$score'"
else
  echo "SKIP systemd-analyze verify and security: no systemd-analyze (package systemd)"
fi
for d in 'DynamicUser=yes' 'ProtectSystem=strict' 'NoNewPrivileges=yes' 'Restart=on-failure' \
         'ExecReload=/bin/kill -HUP $MAINPID' 'LimitNOFILE='; do
  grep -q "^$d" "$unit" || bad "unit" "no $d"
done

# A program embedding libsluice, built with pkg-config against the
# installed header and library (the README's quickstart).
if cc "$SOURCE_DIR/examples/quickstart.c" -o "$tmp/quickstart" $(pkg-config --cflags --libs sluice) 2>"$tmp/cc.log" &&
   ldd "$tmp/quickstart" | grep -Eq "libsluice.so.0 => /(usr/)?lib/[^/]*/libsluice.so.0" &&
   "$tmp/quickstart" | grep -q '^allowed 100 of 150'; then
  pass "pkg-config --cflags --libs sluice: quickstart.c builds and runs on the installed libsluice"
else
  bad "pkg-config" "$(cat "$tmp/cc.log")"
fi

# ---- run as the unit would ----
# ExecStart's command line, LimitNOFILE's limit, and a user of
# DynamicUser's range (61184-65519) with no groups, capabilities or way to
# gain privileges; the listener moved to a free port (as a drop-in would).
token=/etc/sluice/admin.token
[ "$(stat -c '%a %U' "$token" 2>/dev/null)" = "600 root" ] && grep -Eqx '[0-9a-f]{64}' "$token" &&
  grep -qx "LoadCredential=admin-token:$token" "$unit" &&
  pass "install made $token (root, 0600, 32 random bytes) and the unit loads it as a credential" ||
  bad "admin token" "$(ls -l "$token" 2>&1) $(grep LoadCredential "$unit")"
# systemd's %d: the credentials directory, a copy only the service reads
# (outside $tmp, which the service's user may not enter).
cred=$(mktemp -d)
chown 61999:61999 "$cred"
install -m 0400 -o 61999 -g 61999 "$token" "$cred/admin-token"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_start=${exec_start//%d/$cred}
nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
# A container may cap the hard limit below it (raising it needs
# CAP_SYS_RESOURCE): then the cap is what systemd could give too.
hard=$(ulimit -Hn)
[ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ] && nofile=$hard
port=$(free_port)
mport=$(free_port)
aport=$(free_port)
uid=61999
# The unit's StateDirectory=, as systemd would make it for the user.
state_dir=/var/lib/sluice
grep -qx 'StateDirectory=sluice' "$unit" || bad "unit" "no StateDirectory=sluice"
install -d -m 0700 -o $uid -g $uid "$state_dir"
(cd / && ulimit -n "$nofile" &&
  exec setpriv --reuid=$uid --regid=$uid --clear-groups --no-new-privs --inh-caps=-all \
    $exec_start --listen 127.0.0.1:"$port" --metrics-listen 127.0.0.1:"$mport" \
      --admin-listen 127.0.0.1:"$aport") 2>"$tmp/serve.log" &
pid=$!
wait_port "$port"
base="http://127.0.0.1:$port"
ready=$(curl -s "$base/readyz")
st=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/check" \
  -d '{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}')
running_uid=$(ps -o uid= -p "$pid" | tr -d ' ')
limit=$(sed -n 's/^Max open files *\([0-9]*\).*/\1/p' "/proc/$pid/limits")
grep -q '"status":"ready"' <<<"$ready" && [ "$st" = 200 ] && [ "$running_uid" = $uid ] && [ "$limit" = "$nofile" ] &&
  pass "ExecStart as uid $uid with LimitNOFILE $nofile: ready, decides" ||
  bad "run" "ready '$ready', check $st, uid $running_uid, nofile $limit: $(cat "$tmp/serve.log")"

put() { # TOKEN: the status of a PUT of an override with that token
  curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $1" \
    -d '{"requests_per_unit":5,"ttl":"1m"}' "http://127.0.0.1:$aport/admin/v1/overrides/api.remote_address"
}
wrong=$(put not-the-token-0123456789)
right=$(put "$(cat "$token")")
[ "$wrong" = 401 ] && { [ "$right" = 201 ] || [ "$right" = 200 ]; } &&
  pass "the admin API takes the installed token through the credential, and no other" ||
  bad "admin token at run" "wrong $wrong, right $right: $(cat "$tmp/serve.log")"
! grep -q "lets other users read" "$tmp/serve.log" &&
  pass "the credential is not readable by others (no warning)" || bad "credential mode" "$(cat "$tmp/serve.log")"

reload=$(sed -n 's/^ExecReload=//p' "$unit")
${reload//\$MAINPID/$pid}
for _ in $(seq 100); do grep -q 'rules reloaded' "$tmp/serve.log" && break; sleep 0.05; done
curl -s "http://127.0.0.1:$mport/metrics" | grep -q '^sluice_rules_reloads_total{result="ok"} 1$' &&
  pass "ExecReload ($reload): the rules reloaded" || bad "reload" "$(cat "$tmp/serve.log")"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] && pass "SIGTERM (the unit's KillSignal): exit 0" || bad "stop" "exit $rc"
[ "$(stat -c '%a %u' "$state_dir/state" 2>/dev/null)" = "600 $uid" ] &&
  pass "state_file: saved at stop in $state_dir, mode 0600" ||
  bad "state file" "$(ls -la "$state_dir"; cat "$tmp/serve.log")"

# ---- remove ----
DEBIAN_FRONTEND=noninteractive apt-get purge "${apt_opts[@]}" sluice >"$tmp/apt.log" 2>&1 &&
  installed=0 || bad "apt-get purge" "$(cat "$tmp/apt.log")"
left=$(while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done <"$tmp/files")
[ -z "$left" ] && [ ! -e /etc/sluice ] && [ ! -e "$state_dir" ] && ! dpkg-query -W sluice >/dev/null 2>&1 &&
  pass "apt-get purge: every file gone, /etc/sluice too ($(wc -l <"$tmp/files") files)" ||
  bad "purge" "left: $left $(ls -d /etc/sluice 2>/dev/null)"

exit $fail
