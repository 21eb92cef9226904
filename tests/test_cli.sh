#!/bin/bash
# test_cli.sh - what an operator meets first: `sluice --version` (the
# project's version), `sluice COMMAND --help` for every command (exit 0,
# on stdout, the same as `sluice help COMMAND`), the man pages the build
# made (one per command, equal to `sluice help --man`, every --help line
# in them, and groff renders them without a warning), and the daemon's
# log: --log-format json writes one valid JSON object per event, with a
# message that holds quotes, backslashes and a newline escaped, text
# keeps that event on one line, and --log-level drops what is below it.
#
# Needs SLUICE (the built binary; the man pages are in its directory's
# man/) and SOURCE_DIR.
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"
: "${SOURCE_DIR:?the source tree}"
. "$SOURCE_DIR/tests/sh/common.sh"

scratch_with_daemons

# ---- --version ----
# The version is written in sluice.h, where CMakeLists.txt reads it.
want=$(sed -n 's/^#define SL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  "$SOURCE_DIR/include/sluice.h" | paste -sd.)
[ "$("$SLUICE" --version)" = "sluice $want" ] && [ "$("$SLUICE" version)" = "sluice $want" ] &&
  pass "--version: sluice $want" || bad "--version" "$("$SLUICE" --version)"
out=$("$SLUICE" version --help) || out="exit $?"
[[ "$out" == "usage: sluice version"* ]] && pass "sluice version --help: its usage" ||
  bad "version --help" "$out"
rc=0
"$SLUICE" version extra >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] && pass "sluice version with an argument: exit 2" || bad "version extra" "exit $rc"
"$SLUICE" --help | grep -q "^  demo .*Databox" && ! "$SLUICE" demo --help | grep -qi seed &&
  pass "sluice --help names the demo's sources" || bad "demo sources" "$("$SLUICE" --help | grep demo)"

# ---- --help and the man pages, every command ----
python3 - "$SLUICE" "$(dirname "$SLUICE")/man" <<'PY' || fail=1
import os, re, shutil, subprocess, sys
sluice, mandir = sys.argv[1], sys.argv[2]
bad = 0
def check(what, ok, detail=""):
    global bad
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else ": " + detail))
    bad |= not ok

def run(*args):
    return subprocess.run([sluice, *args], capture_output=True, text=True)

top = run("--help")
cmds = re.findall(r"^  (\w+) ", top.stdout.split("commands:")[1], re.M)
cmds = [c for c in cmds if c not in ("help", "version")]
check("sluice --help lists the commands", top.returncode == 0 and len(cmds) >= 8,
      repr(cmds))

def deroff(page):
    text = []
    for line in page.splitlines():
        if line.startswith(".") and not line.startswith("\\&"):
            continue
        line = line.replace("\\&", "").replace("\\-", "-").replace("\\e", "\\")
        line = re.sub(r"\\f[BRI]", "", line)
        text.append(line)
    return "\n".join(text)

pages = {"sluice": top.stdout}
for c in cmds:
    h = run(c, "--help")
    check(f"sluice {c} --help: exit 0, on stdout only",
          h.returncode == 0 and h.stdout.startswith("usage: sluice " + c) and h.stderr == "",
          f"rc {h.returncode}, stderr {h.stderr!r}")
    check(f"sluice help {c} is sluice {c} --help", run("help", c).stdout == h.stdout)
    pages["sluice-" + c] = h.stdout

on_disk = sorted(f[:-2] for f in os.listdir(mandir) if f.endswith(".1"))
check("a man page per command, and no other", on_disk == sorted(pages),
      f"{on_disk} vs {sorted(pages)}")
groff = shutil.which("groff")
for name, helptext in pages.items():
    path = os.path.join(mandir, name + ".1")
    page = open(path).read() if os.path.exists(path) else ""
    args = ["help", "--man"] + ([name[len("sluice-"):]] if name != "sluice" else [])
    check(f"{name}.1 is `sluice {' '.join(args)}`", run(*args).stdout == page)
    body = deroff(page)
    missing = [l for l in helptext.splitlines()
               if l.strip() and l.strip().removeprefix("usage: ") not in body]
    check(f"{name}.1 has every line of its --help", not missing, repr(missing[:3]))
    check(f"{name}.1 names itself", page.startswith(f'.TH "{name.upper()}" 1'))
    if groff:
        r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path],
                           capture_output=True, text=True)
        check(f"{name}.1: groff renders it without a warning",
              r.returncode == 0 and r.stderr == "", r.stderr[:300])
sys.exit(bad)
PY

# ---- the log ----
# A rules directory whose name holds a quote, a backslash and a newline:
# the reload failure's message names it.
dir="$tmp/we\"ird\\
dir"
mkdir -p "$dir"
cp "$SOURCE_DIR/examples/rules/"*.yaml "$dir/"
first=$(ls "$dir" | head -1)
start() { # NAME ARGS...: serve on a free port, logging to $tmp/NAME.log
  local name=$1 port
  shift
  port=$(free_port)
  "$SLUICE" serve --rules "$dir" --listen 127.0.0.1:"$port" "$@" 2>"$tmp/$name.log" &
  pids+=($!)
  wait_port "$port"
}
# cycle NAME: break the rules, SIGHUP, wait for the failure's line
# (its counter on /metrics), mend them; then SIGTERM and wait for the exit.
cycle() {
  local pid=${pids[-1]}
  cp "$dir/$first" "$tmp/keep"
  printf 'domain: [\n' >"$dir/$first"
  kill -HUP "$pid"
  for _ in $(seq 100); do grep -q 'reload failed' "$tmp/$1.log" && break; sleep 0.05; done
  cp "$tmp/keep" "$dir/$first"
  kill -HUP "$pid"
  # (--log-level error leaves the success out: nothing to wait for.)
  [ "$1" = level ] || for _ in $(seq 100); do grep -q 'reloaded: version' "$tmp/$1.log" && break; sleep 0.05; done
  kill -TERM "$pid"
  wait "$pid" || true
}

start json --log-format json
cycle json
python3 - "$tmp/json.log" "$dir" <<'PY' && pass "--log-format json: a JSON object per line, the path's quote, backslash and newline escaped" || bad "json log" "see above"
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
for o in objs:
    assert set(o) == {"time", "level", "component", "msg"}, o
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["time"]), o
msgs = [(o["level"], o["msg"]) for o in objs]
assert any(l == "info" and m.startswith("listening on 127.0.0.1:") for l, m in msgs), msgs
fails = [m for l, m in msgs if "reload failed" in m]
assert len(fails) == 1 and sys.argv[2] in fails[0], fails
assert [l for l, m in msgs if "reload failed" in m] == ["error"]
assert any(l == "info" and m.startswith("rules reloaded: version") for l, m in msgs), msgs
assert any(m == "SIGTERM: draining and exiting" for l, m in msgs), msgs
PY

start text
cycle text
n=$(grep -c 'rules reload failed' "$tmp/text.log" || true)
grep -q '^sluice: listening on 127.0.0.1:' "$tmp/text.log" && [ "$n" = 1 ] &&
  [ "$(grep 'rules reload failed' "$tmp/text.log" | grep -c 'ird\\ dir/')" = 1 ] &&
  pass "text log: 'sluice: ...' lines, the newline in a message made a space" ||
  { bad "text log" "see below"; cat "$tmp/text.log"; }

start level --log-level error
cycle level
[ "$(grep -c . "$tmp/level.log")" = 1 ] && grep -q 'rules reload failed' "$tmp/level.log" &&
  pass "--log-level error: only the error is logged" ||
  { bad "--log-level" "see below"; cat "$tmp/level.log"; }

# A supervisor's SIGHUP (systemctl reload) as soon as the port answers:
# the daemon reloads, it is not killed by the signal's default action
# (the handlers came after the listeners; 6 of 20 such starts died).
died=0
for _ in $(seq 20); do
  port=$(free_port)
  "$SLUICE" serve --rules "$dir" --listen 127.0.0.1:"$port" 2>/dev/null &
  pid=$!
  wait_port "$port"
  kill -HUP "$pid"
  sleep 0.2
  kill -0 "$pid" 2>/dev/null || died=$((died + 1))
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
done
[ "$died" = 0 ] && pass "SIGHUP as soon as the port answers: 20 of 20 daemons live on" ||
  bad "early SIGHUP" "$died of 20 daemons died of it"

out=$("$SLUICE" serve --rules "$dir" --log-level loud 2>&1 || true)
grep -qF -- "--log-level: expected debug, info, warn or error: 'loud'" <<<"$out" &&
  pass "--log-level loud refused, naming the words" || bad "--log-level loud" "$out"

exit $fail
