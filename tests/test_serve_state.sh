#!/bin/bash
# test_serve_state.sh - `sluice serve --state-file` (docs/stores.md,
# "State file"; docs/server.md): counters survive a restart.  For every
# algorithm a key refused before SIGTERM is refused after the restart
# with the same retry_after less the time that passed, and a key partly
# used keeps its remaining count; after kill -9 the state is the last
# save's (SIGUSR1), not newer; periodic saves happen, and one that cannot
# be written is counted and retried while decisions go on; a corrupt file
# starts the daemon empty, loudly, or stops it with --state-required; after
# a restart with one of two rules changed the other's counters (counted
# under an override) are kept and the changed one's start fresh, and with
# both changed the file is refused, kept aside, and the node starts empty;
# and `sluice proxy` keeps its counters the same way.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, shutil, signal, stat, subprocess, sys, tempfile, time
import urllib.error, urllib.parse, urllib.request

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
          "it is kept as %s.bad\n" % state in log, log)
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

    # ---- rules changed while down: kept where unchanged, fresh where not ----
    # Two fixed windows (a count of what was used): "kept" keeps its
    # numbers across the restart, "moved" goes from 5 to 7 an hour.  An
    # override on "kept" before the restart does not change its identity
    # (docs/stores.md, "State file"): what was counted under it is kept.
    two = os.path.join(tmp, "two.yaml")
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("t0ken-for-the-admin-api-0123456789\n")
    os.chmod(token, 0o600)

    def two_rules(kept, moved):
        with open(two, "w") as f:
            f.write("domain: test\ndescriptors:\n")
            for key, n in (("kept", kept), ("moved", moved)):
                f.write("  - key: %s\n    rate_limit: {algorithm: fixed_window, "
                        "unit: hour, requests_per_unit: %d}\n" % (key, n))

    def two_node(name):
        return harness.Node(SLUICE, tmp, name, two, "--state-file", state2,
                            "--state-save-interval", "1h", "--admin-listen",
                            "127.0.0.1:0", "--admin-token-file", token)

    def remaining(n, key, value):
        code, rem, _ = hit(n, key, value)
        return code, rem

    state2 = os.path.join(tmp, "state2")
    two_rules(L, L)
    h = two_node("two1")
    admin = None
    for _ in range(200):
        m = re.search(r"admin listening on 127\.0\.0\.1:(\d+)", open(h.log).read())
        if m:
            admin = int(m.group(1))
            break
        time.sleep(0.025)
    lim = json.loads(urllib.request.urlopen(
        "http://127.0.0.1:%d/admin/v1/limits" % admin, timeout=10).read())
    kept_id = next(r["id"] for r in lim["limits"] if r["id"].endswith(".kept"))
    req = urllib.request.Request(
        "http://127.0.0.1:%d/admin/v1/overrides/%s" % (admin, urllib.parse.quote(kept_id, safe="")),
        json.dumps({"requests_per_unit": 2 * L}).encode(), method="PUT",
        headers={"Authorization": "Bearer t0ken-for-the-admin-api-0123456789"})
    check("an override on the rule that stays",
          urllib.request.urlopen(req, timeout=10).status in (200, 201))
    used = [remaining(h, "kept", "v") for _ in range(2)]
    check("the override is in force: 2 of %d used" % (2 * L),
          used[-1] == ("OK", 2 * L - 2), used)
    used = [remaining(h, "moved", "v") for _ in range(2)]
    check("2 of %d used of the rule that changes" % L, used[-1] == ("OK", L - 2), used)
    check("two rules: SIGTERM exits 0", h.stop() == 0)

    two_rules(L, L + 2)
    i = two_node("two2")
    log = open(i.log).read()
    check("one rule of two changed: the other's counters load",
          "(1 of its 2 limits in force)" in log, log[-800:])
    check("the unchanged rule keeps what was counted under its override",
          remaining(i, "kept", "v") == ("OK", L - 3), remaining(i, "kept", "w"))
    check("the changed rule's counter starts fresh at its new numbers",
          remaining(i, "moved", "v") == ("OK", L + 1))
    check("two rules, one changed: SIGTERM exits 0", i.stop() == 0)

    two_rules(L + 1, L + 3)
    j = two_node("two3")
    log = open(j.log).read()
    check("both rules changed: the file is refused as other limits",
          "(other_limits): STARTING EMPTY, every counter reset; it is kept as "
          "%s.bad\n" % state2 in log, log[-800:])
    check("and counted",
          j.metric('sluice_state_load{result="other_limits"}') == 1)
    check("and kept aside as PATH.bad",
          os.path.exists(state2 + ".bad") and not os.path.exists(state2))
    check("and the node starts empty",
          remaining(j, "kept", "v") == ("OK", L) and
          remaining(j, "moved", "v") == ("OK", L + 2))
    j.stop()

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
