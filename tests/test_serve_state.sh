#!/bin/bash
# test_serve_state.sh - `sluice serve --state-file` (docs/stores.md,
# "State file"; docs/server.md): counters survive a restart.  For every
# algorithm a key refused before SIGTERM is refused after the restart
# with the same retry_after less the time that passed, and a key partly
# used keeps its remaining count; after kill -9 the state is the last
# save's (SIGUSR1), not newer; periodic saves happen, and one that cannot
# be written is counted and retried while decisions go on; a corrupt file
# starts the daemon empty, loudly, or stops it with --state-required; and
# `sluice proxy` keeps its counters the same way.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import os, re, shutil, signal, stat, subprocess, sys, tempfile, time
import urllib.error, urllib.request

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check, wait_until

SLUICE = sys.argv[1]
tmp = tempfile.mkdtemp()
L = 5
rules = harness.rules_file(tmp, L)
state = os.path.join(tmp, "state")


def node(name, *flags):
    return harness.Node(SLUICE, tmp, name, rules, "--state-file", state, *flags)


def hit(n, alg, value):
    """One request of alg's rule for value: (code, remaining, retry_after_ms)."""
    status, body, _, _ = n.check(alg, value)
    d = body["descriptors"][0]
    return d["code"], d["remaining"], d["retry_after_ms"]


def saves(n):
    return n.metric('sluice_state_saves_total{result="ok"}') or 0


try:
    # ---- SIGTERM and restart: every algorithm ----
    a = node("first", "--state-save-interval", "1h")
    before = {}
    for alg in harness.ALGS:
        for i in range(L + 1):
            sent = time.monotonic()  # the server decides after this
            r = hit(a, alg, "abuser")
            time.sleep(0.002)  # events at several times: the logs on the heap
        before[alg] = (r, sent)
        hit(a, alg, "half")
        hit(a, alg, "half")
    check("every algorithm refuses the abuser before the restart",
          all(before[alg][0][0] == "OVER_LIMIT" for alg in harness.ALGS), before)
    rc = a.stop()
    check("SIGTERM: exits 0 after saving", rc == 0 and os.path.exists(state),
          "status %s; %s" % (rc, open(a.log).read()[-1500:]))
    mode = stat.S_IMODE(os.stat(state).st_mode)
    check("the state file is 0600", mode == 0o600, oct(mode))

    b = node("second", "--state-save-interval", "1h")
    log = open(b.log).read()
    check("the restart says what it loaded",
          re.search(r"state: loaded \d+ keys from .*state", log) is not None, log)
    for alg in harness.ALGS:
        (code0, rem0, retry0), t0 = before[alg]
        code, rem, retry = hit(b, alg, "abuser")
        # At most this long passed between the two decisions: from before
        # the first was asked to after the second was answered, however
        # slowly a busy machine answered either.
        gone_ms = (time.monotonic() - t0) * 1000
        check("%s: refused after the restart" % alg, code == "OVER_LIMIT",
              (code, rem, retry))
        # The same wait, less the time since it was said (ms rounding).
        check("%s: retry_after %d ms, %d before and at most %.0f ms since" %
              (alg, retry, retry0, gone_ms),
              retry0 - gone_ms - 2 <= retry <= retry0 + 1,
              (retry0, retry, gone_ms))
        code, rem, _ = hit(b, alg, "half")
        check("%s: a key that used 2 of %d has %d left after the restart" %
              (alg, L, L - 3), code == "OK" and rem == L - 3, (code, rem))
    check("status.json reports the load",
          '"load":"loaded"' in b.get("/status.json")[1].replace(" ", ""),
          b.get("/status.json")[1][:300])
    check("/metrics: the load's result",
          b.metric('sluice_state_load{result="loaded"}') == 1)

    # ---- kill -9 after a SIGUSR1 save: that save's state, not newer ----
    n0 = saves(b)
    for alg in harness.ALGS:
        hit(b, alg, "saved")
    b.p.send_signal(signal.SIGUSR1)
    check("SIGUSR1 saves", wait_until(lambda: saves(b) > n0), saves(b))
    for alg in harness.ALGS:
        hit(b, alg, "unsaved")
    b.p.kill()
    b.p.wait()
    c = node("third", "--state-save-interval", "1h")
    ok_saved = all(hit(c, alg, "saved")[1] == L - 2 for alg in harness.ALGS)
    ok_unsaved = all(hit(c, alg, "unsaved")[1] == L - 1 for alg in harness.ALGS)
    check("kill -9: what the last save held is kept", ok_saved)
    check("kill -9: what came after the last save is not", ok_unsaved)
    c.stop()

    # ---- periodic saves; a file that cannot be written ----
    shutil.rmtree(tmp + "/sub", ignore_errors=True)
    sub_state = tmp + "/sub/state"
    d = harness.Node(SLUICE, tmp, "unwritable", rules, "--state-file",
                     sub_state, "--state-save-interval", "100ms")
    failed = lambda: d.metric('sluice_state_saves_total{result="failed"}') or 0
    check("a save that cannot be written is counted",
          wait_until(lambda: failed() >= 2), failed())
    check("decisions go on meanwhile", hit(d, "gcra", "x")[0] == "OK")
    check("and logged", "cannot create: No such file" in open(d.log).read())
    os.mkdir(tmp + "/sub")
    check("the next interval's save succeeds",
          wait_until(lambda: saves(d) >= 1 and os.path.exists(sub_state)))
    check("unwritable: exits 0", d.stop() == 0)

    # ---- a corrupt file: started empty, loudly; or not started ----
    with open(state, "r+b") as f:
        f.seek(os.path.getsize(state) // 2)
        f.write(b"\xff\xfe\xfd")
    e = node("corrupt", "--state-save-interval", "1h")
    log = open(e.log).read()
    check("a corrupt file is said loudly",
          "(corrupt): STARTING EMPTY, every counter reset" in log, log)
    check("and counted", e.metric('sluice_state_load{result="corrupt"}') == 1)
    check("and kept aside as PATH.bad",
          os.path.exists(state + ".bad") and not os.path.exists(state) and
          "it is kept as PATH.bad" in log)
    shutil.copy(state + ".bad", state)
    check("and the daemon starts empty", hit(e, "gcra", "abuser")[0] == "OK")
    e.p.kill()
    e.p.wait()
    p = subprocess.run([SLUICE, "serve", "--rules", rules, "--listen",
                        "127.0.0.1:0", "--state-file", state,
                        "--state-required", "true"],
                       stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check("--state-required: a corrupt file stops the start (exit 1)",
          p.returncode == 1 and "not starting (--state-required)" in err,
          (p.returncode, err))

    # ---- sluice proxy: the same flags, its limits kept across SIGTERM ----
    src = sys.argv[2]
    pstate = os.path.join(tmp, "proxy.state")

    def proxy(name):
        return harness.Daemon(name, [SLUICE, "proxy", "--config",
                                     src + "/examples/proxy/proxy.yaml",
                                     "--upstream", "http://127.0.0.1:%d" % harness.free_port(),
                                     "--metrics-listen", "127.0.0.1:0",
                                     "--state-file", pstate], tmp)

    def api(p):
        # per_api_key: gcra, 5 a minute (examples/proxy/rules.yaml).
        req = urllib.request.Request("http://127.0.0.1:%d/api/x" % p.port,
                                     headers={"X-Api-Key": "abuser"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    f = proxy("proxy1")
    codes = [api(f) for _ in range(7)]
    check("proxy: the sixth request of a key is refused", codes[5:] == [429, 429], codes)
    check("proxy: SIGTERM exits 0 and saves", f.stop() == 0 and os.path.exists(pstate))
    g = proxy("proxy2")
    check("proxy: refused after the restart", api(g) == 429)
    check("proxy: says what it loaded", "state: loaded" in open(g.log).read())
    g.stop()
finally:
    harness.kill_all()
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(harness.failed)
PY
