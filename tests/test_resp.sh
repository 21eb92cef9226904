#!/bin/bash
# Integration test of `sluice serve --resp-listen` (docs/resp.md) with real
# Redis clients: redis-cli (the redis-cell and Redis GCRA examples, the
# connect handshake, errors), raw sockets (inline commands, pipelining,
# split and malformed requests), redis-benchmark, ioredis (pinned in
# tests/resp/package-lock.json; scripts/deps.sh --test installs it), SLUICE.CHECK
# sharing counters with HTTP callers, and two daemons sharing one real
# redis-server through --store redis:// deciding one key exactly.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
exec python3 - "$SLUICE" "$SOURCE_DIR" <<'PY'
import json, os, re, socket, subprocess, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(sys.argv[2], "tests", "sh"))
import harness
from harness import check

SLUICE, SRC = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()

rules = os.path.join(tmp, "rules.yaml")
with open(rules, "w") as f:
    f.write("domain: api\ndescriptors:\n"
            "  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
            "  - key: path\n    value: /v1/*/download\n"
            "    rate_limit: {unit: hour, requests_per_unit: 2}\n")


class Node(harness.Node):
    """sluice serve with --resp-listen on a free port, read from its log."""

    def __init__(self, name, *flags, rules_path=rules):
        super().__init__(SLUICE, tmp, name, rules_path, "--threads", "2",
                         "--resp-listen", "127.0.0.1:0", *flags)
        m = None
        for _ in range(200):
            m = re.search(r"resp listening on 127\.0\.0\.1:(\d+)", open(self.log).read())
            if m:
                break
            time.sleep(0.025)
        if m is None:
            raise SystemExit("no resp listener: " + open(self.log).read())
        self.resp = int(m.group(1))

    def cli(self, *args, stdin=None):
        """redis-cli -p PORT ARGS: its stdout (raw, one reply element a line)."""
        p = subprocess.run(["redis-cli", "-p", str(self.resp)] + list(args),
                           input=stdin, capture_output=True, text=True, timeout=20)
        return p.stdout.strip()

    def raw(self, data, timeout=5):
        """data written on a new connection, our side shut for writing:
        every byte until sluice closes."""
        s = socket.create_connection(("127.0.0.1", self.resp), 5)
        s.settimeout(timeout)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b


def ints(text):
    return " ".join(text.split())


try:
    node = Node("a")

    # ---- the examples of redis-cell's README and Redis's GCRA ----
    check("CL.THROTTLE user123 15 30 60 on a fresh key: 0 16 15 -1 2",
          ints(node.cli("CL.THROTTLE", "user123", "15", "30", "60")) == "0 16 15 -1 2",
          node.cli("CL.THROTTLE", "user123", "15", "30", "60"))
    out = ints(node.cli("CL.THROTTLE", "user123", "15", "30", "60", "0"))
    check("quantity 0 peeks: the second call's state, unchanged", out == "0 16 14 -1 4", out)
    out = ints(node.cli("CL.THROTTLE", "user123", "15", "30", "60", "17"))
    check("a quantity over the capacity: limited, retry_after -1", out == "1 16 14 -1 4", out)
    outs = [ints(node.cli("GCRA", "g1", "1", "10", "10")) for _ in range(3)]
    check("GCRA max_burst 1, 10 per 10 s: two allowed, the third limited",
          outs == ["0 2 1 -1 1", "0 2 0 -1 2", "1 2 0 1 2"], outs)
    out = ints(node.cli("GCRA", "g2", "0", "2", "0.5", "TOKENS", "1"))
    check("GCRA with a fractional period", out == "0 1 0 -1 1", out)
    out = ints(node.cli("gcra", "g3", "4", "1", "60", "tokens", "5"))
    check("GCRA's names are case-insensitive, TOKENS takes the cost",
          out == "0 5 0 -1 300", out)

    # ---- errors: a reply naming the problem, the connection stays ----
    for args, want in [
        (["CL.THROTTLE", "k"], "Usage: cl.throttle"),
        (["CL.THROTTLE", "k", "x", "1", "1"], "Couldn't parse as integer: x"),
        (["CL.THROTTLE", "k", "-1", "1", "1"], "max_burst must not be negative: -1"),
        (["CL.THROTTLE", "k", "1", "-5", "1"], "must not be negative"),
        (["CL.THROTTLE", "k", "1", "0", "1"], "Zero rates are not supported"),
        (["CL.THROTTLE", "k", "1", "1", "0"], "Zero rates are not supported"),
        (["CL.THROTTLE", "k", "1", "1", "99999999999999999999"], "Couldn't parse"),
        (["GCRA", "k", "1", "1"], "wrong number of arguments for 'gcra'"),
        (["GCRA", "k", "-1", "1", "1"], "must be positive"),
        (["GCRA", "k", "1", "0", "1"], "value must between 1 and"),
        (["GCRA", "k", "1", "1", "0"], "period must be > 0"),
        (["GCRA", "k", "1", "1", "x"], "not a valid float"),
        (["GCRA", "k", "1", "1", "1", "COST", "2"], "syntax error"),
        (["GCRA", "k", "1", "1", "1", "TOKENS"], "Missing TOKENS value"),
        (["NOSUCH", "a", "b"], "unknown command 'NOSUCH', with args beginning with: 'a' 'b'"),
        (["ECHO"], "wrong number of arguments for 'echo'"),
        (["SELECT", "1"], "DB index is out of range"),
        (["HELLO", "3"], "NOPROTO"),
        (["CLIENT", "KILL"], "unknown subcommand 'KILL'"),
        (["SLUICE.CHECK", "api", "x", "1", "user", "u"], "hits: expected an integer"),
        (["SLUICE.CHECK", "api", "1", "2", "user", "u"], "fewer key value pairs"),
    ]:
        out = node.cli(*args)
        check("error: %s -> %s" % (" ".join(args), want), want in out, out)
    out = node.raw(b"NOSUCH\r\nPING\r\n")
    check("an unknown command leaves the connection open",
          out.endswith(b"+PONG\r\n") and out.startswith(b"-ERR unknown command"), out)

    # ---- what clients send on connect ----
    for args, want in [
        (["PING"], "PONG"), (["PING", "hi"], "hi"), (["ECHO", "x y"], "x y"),
        (["CLIENT", "SETNAME", "app"], "OK"),
        (["CLIENT", "SETINFO", "lib-name", "ioredis"], "OK"),
        (["SELECT", "0"], "OK"),
        (["CONFIG", "GET", "save"], "save"),
        (["COMMAND", "COUNT"], "12"),
        (["HELLO", "2"], "sluice"),
    ]:
        out = node.cli(*args)
        check("%s -> %s" % (" ".join(args), want), want in out, out)
    # Client ids are 1, 2, 3...: nothing of a session's address.
    ids = [int(node.cli("CLIENT", "ID")) for _ in range(3)]
    check("CLIENT ID: sequential, small numbers", ids[1] == ids[0] + 1 and
          ids[2] == ids[1] + 1 and ids[2] < 1000000, ids)
    out = node.raw(b"HELLO 2\r\nCLIENT ID\r\n").decode()
    hello_id = int(out.split("$2\r\nid\r\n:")[1].split("\r\n")[0])
    check("HELLO's id is the connection's CLIENT ID",
          out.rstrip().endswith(":%d" % hello_id) and hello_id > ids[2], out[-80:])
    out = node.cli("INFO")
    check("INFO says loading:0 and a redis_version", "loading:0" in out and "redis_version:" in out, out)
    out = node.cli("COMMAND", "INFO", "cl.throttle", "nosuch")
    check("COMMAND INFO: the known command, nil for the unknown", "cl.throttle" in out, out)
    check("COMMAND DOCS is an empty answer", node.cli("COMMAND", "DOCS") == "", node.cli("COMMAND", "DOCS"))
    out = node.raw(b"QUIT\r\nPING\r\n")
    check("QUIT: +OK, then the connection closes", out == b"+OK\r\n", out)

    # ---- the protocol: inline, multibulk, pipelining, split commands ----
    out = node.raw(b'PING\r\necho "a\\tb c"\r\nECHO \'it\\\'s\'\r\n\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n')
    check("inline commands with quotes, an empty line, multibulk",
          out == b"+PONG\r\n$5\r\na\tb c\r\n$4\r\nit's\r\n$0\r\n\r\n", out)
    n = 2000
    cmds = b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(str(i)), str(i).encode())
                    for i in range(n))
    out = node.raw(cmds, timeout=20)
    want = b"".join(b"$%d\r\n%s\r\n" % (len(str(i)), str(i).encode()) for i in range(n))
    check("%d pipelined commands: replies in order" % n, out == want, len(out))
    s = socket.create_connection(("127.0.0.1", node.resp), 5)
    s.settimeout(5)
    msg = b"*5\r\n$11\r\nCL.THROTTLE\r\n$5\r\nsplit\r\n$1\r\n3\r\n$1\r\n1\r\n$2\r\n60\r\n"
    for i in range(len(msg)):
        s.sendall(msg[i:i + 1])
        time.sleep(0.001)
    got = b""
    while got.count(b"\r\n") < 6:
        got += s.recv(1024)
    s.close()
    check("a command sent one byte at a time", got == b"*5\r\n:0\r\n:4\r\n:3\r\n:-1\r\n:60\r\n", got)

    # ---- bad input: an error reply, the connection closed, nothing else lost ----
    for data, want in [
        (b"*1\r\n$99999999\r\n", b"invalid bulk length"),
        (b"*99999\r\n", b"invalid multibulk length"),
        (b"*x\r\n", b"invalid multibulk length"),
        (b"*1\r\n$-5\r\n", b"invalid bulk length"),
        (b"*1\r\n+PING\r\n", b"expected '$'"),
        (b"*1\r\n$4\r\nPINGxx", b"expected CRLF"),
        (b'ECHO "unbalanced\r\n', b"unbalanced quotes"),
        (b"A" * (70 * 1024), b"too big inline request"),
        (b"*300\r\n" + b"$1000\r\n" + b"x" * 1000 + b"\r\n" * 1 + b"$1000\r\n" * 0 +
         b"".join(b"$1000\r\n" + b"y" * 1000 + b"\r\n" for _ in range(299)), b"command too long"),
    ]:
        out = node.raw(b"PING\r\n" + data, timeout=10)
        check("bad input %r... -> error and close" % data[:16],
              out.startswith(b"+PONG\r\n-ERR Protocol error") and want in out, out[:120])
    check("the daemon still answers after bad input", node.cli("PING") == "PONG")
    # A client that never reads: its replies are capped, not its memory.
    s = socket.create_connection(("127.0.0.1", node.resp), 5)
    blob = b"*2\r\n$4\r\nECHO\r\n$60000\r\n" + b"z" * 60000 + b"\r\n"
    s.setblocking(False)
    sent, pending = 0, b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pending = pending or blob
        try:
            n = s.send(pending)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        sent += n
        pending = pending[n:]
    rss = int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%d/status" % node.p.pid).read()).group(1))
    check("a client that never reads holds a bounded amount (%d MB sent, sluice at %d MB)"
          % (sent >> 20, rss >> 10), rss < 200 * 1024, rss)
    s.close()

    # ---- SLUICE.CHECK: the rules, shared with HTTP callers ----
    out = node.cli("SLUICE.CHECK", "api", "1", "1", "user", "alice").split("\n")
    check("SLUICE.CHECK: allowed, limit 5, remaining 4", out[:3] == ["0", "5", "4"], out)
    import urllib.request
    r = urllib.request.Request(node.url("/v1/check"), json.dumps(
        {"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}).encode())
    with urllib.request.urlopen(r, timeout=10) as resp:
        body = json.loads(resp.read())
    check("HTTP sees the count RESP made (remaining 3)",
          body["descriptors"][0]["remaining"] == 3, body)
    out = node.cli("SLUICE.CHECK", "api", "4", "1", "user", "alice").split("\n")
    check("SLUICE.CHECK hits 4 is over the 3 left: limited, retry_after > 0",
          out[:3] == ["1", "5", "3"] and int(out[3]) > 0 and out[5] == "OVER_LIMIT", out)
    out = node.cli("SLUICE.CHECK", "api", "0", "1", "user", "alice").split("\n")
    check("SLUICE.CHECK hits 0 only looks: remaining 3", out[:3] == ["0", "5", "3"], out)
    out = node.cli("SLUICE.CHECK", "nosuch", "1", "1", "user", "alice").split("\n")
    check("an unknown domain is allowed, no limit", out[:3] == ["0", "-1", "-1"], out)
    out = node.cli("SLUICE.CHECK", "api", "1", "1", "user", "bob", "1", "path", "/v1/x/download")
    check("two descriptors: a status each, in order",
          out.count("OK") == 2, out)
    m = node.get("/metrics")[1]
    check("/metrics counts the protocol's commands",
          re.search(r'sluice_protocol_requests_total\{protocol="resp",result="ok"\} [1-9]', m)
          and re.search(r'sluice_protocol_requests_total\{protocol="resp",result="error"\} [1-9]', m), m[-600:])

    # ---- exactness: many concurrent clients, one key ----
    def burst(i):
        s = socket.create_connection(("127.0.0.1", node.resp), 10)
        s.sendall(b"CL.THROTTLE storm 49 1 3600\r\n" * 5)
        got = b""
        while got.count(b"*5\r\n") < 5 or not got.endswith(b"\r\n") or got.count(b"\r\n") < 30:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        return got.count(b"*5\r\n:0\r\n")
    allowed = sum(harness.storm(burst, 200, workers=50))
    check("200 clients x 5 pipelined calls on one key: exactly 50 allowed", allowed == 50, allowed)

    # ---- real clients ----
    bench = subprocess.run(["redis-benchmark", "-p", str(node.resp), "-P", "16", "-c", "20",
                            "-n", "20000", "-r", "1000", "-q", "CL.THROTTLE", "u:__rand_int__",
                            "15", "30", "60", "1"], capture_output=True, text=True, timeout=120)
    check("redis-benchmark drives CL.THROTTLE (-P 16)",
          bench.returncode == 0 and "requests per second" in bench.stdout,
          bench.stdout[-300:] + bench.stderr[-300:])
    nm = os.path.join(SRC, "tests", "resp", "node_modules")
    if not os.path.isdir(nm):
        harness.bad("ioredis", "tests/resp/node_modules is missing: run scripts/deps.sh --test")
    else:
        p = subprocess.run(["node", os.path.join(SRC, "tests", "resp", "ioredis.js"),
                            str(node.resp)], capture_output=True, text=True, timeout=120)
        print(p.stdout, end="")
        check("ioredis: every case passed", p.returncode == 0, p.stderr[-1000:])

    # ---- two daemons sharing a real Redis: one key decided exactly ----
    redis = harness.Redis()
    redis.start()
    store = "redis://127.0.0.1:%d" % redis.port
    n1 = Node("r1", "--store", store, "--redis-timeout", "200ms")
    n2 = Node("r2", "--store", store, "--redis-timeout", "200ms")
    out = ints(n1.cli("CL.THROTTLE", "shared", "15", "30", "60"))
    check("--store redis: the README example", out == "0 16 15 -1 2", out)
    out = ints(n2.cli("CL.THROTTLE", "shared", "15", "30", "60"))
    check("the other node sees the first one's call", out == "0 16 14 -1 4", out)

    def pair(i):
        node_ = n1 if i % 2 else n2
        s = socket.create_connection(("127.0.0.1", node_.resp), 10)
        s.sendall(b"CL.THROTTLE shared2 99 1 3600\r\n" * 4)
        got = b""
        while got.count(b"\r\n") < 24:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        return got.count(b"*5\r\n:0\r\n")
    allowed = sum(harness.storm(pair, 100, workers=40))
    check("2 nodes x 100 clients x 4 calls on one key: exactly 100 allowed", allowed == 100, allowed)
    out = n1.cli("SLUICE.CHECK", "api", "1", "1", "user", "carol").split("\n")
    out2 = n2.cli("SLUICE.CHECK", "api", "1", "1", "user", "carol").split("\n")
    check("SLUICE.CHECK shares the rule's counter across nodes",
          out[2] == "4" and out2[2] == "3", (out, out2))
    # A connection closed while its command waits on a paused Redis.
    os.kill(redis.proc.pid, 19)  # SIGSTOP
    s = socket.create_connection(("127.0.0.1", n1.resp), 5)
    s.sendall(b"CL.THROTTLE gone 1 1 1\r\n")
    s.close()
    s = socket.create_connection(("127.0.0.1", n1.resp), 5)
    s.settimeout(5)
    s.sendall(b"CL.THROTTLE paused 1 1 1\r\n")
    got = s.recv(1024)
    s.close()
    os.kill(redis.proc.pid, 18)  # SIGCONT
    check("Redis paused: the failure policy answers within the timeout",
          got.startswith(b"*5\r\n:0\r\n"), got)
    check("the node still answers after a client left mid-wait", n1.cli("PING") == "PONG")
    # ---- the read timeout: a stalled command is cut, steady pipelining is not ----
    rt = Node("rt", "--read-timeout", "1s")
    s = socket.create_connection(("127.0.0.1", rt.resp), 5)
    s.settimeout(5)
    got = b""
    end = time.monotonic() + 3.0
    sent = 0
    while time.monotonic() < end:  # 3 s of commands, each write ending inside the next
        s.sendall(b"NG\r\nPI" if sent else b"PI")
        sent += 1
        time.sleep(0.1)
        s.setblocking(False)
        try:
            got += s.recv(65536)
        except BlockingIOError:
            pass
        s.setblocking(True)
    s.sendall(b"NG\r\n")
    s.settimeout(5)
    while got.count(b"+PONG") < sent:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    check("pipelining past --read-timeout, each read ending mid-command: served",
          got.count(b"+PONG") == sent, (sent, got.count(b"+PONG")))
    s = socket.create_connection(("127.0.0.1", rt.resp), 5)
    s.settimeout(5)
    t0 = time.monotonic()
    for b in b"PIN":  # one command trickled a byte at a time, never ended
        s.sendall(bytes([b]))
        time.sleep(0.6)
    try:
        closed = s.recv(16) == b""
    except OSError:
        closed = True
    check("a command trickled byte by byte is cut at --read-timeout",
          closed and time.monotonic() - t0 < 4, time.monotonic() - t0)
    s.close()

    # ---- replies a client does not read: at most SV_MAX_PENDING_OUTPUT a
    # connection; the commands after them wait, and all are answered ----
    big = Node("big")
    s = socket.create_connection(("127.0.0.1", big.resp), 5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    n_info = 40000
    s.sendall(b"INFO\r\n" * n_info)  # ~10 MB of replies for 240 KB
    time.sleep(1.0)
    s.settimeout(10)
    tail, seen = b"", 0
    while seen < n_info:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        both = tail + chunk  # a marker cut between two reads is counted once
        seen += both.count(b"loading:0") - tail.count(b"loading:0")
        tail = both[-8:]
    s.close()
    check("40000 INFOs unread, then read: every reply comes", seen == n_info, seen)
    if os.environ.get("SL_TEST_QUICK") != "1":  # a sanitizer's allocator keeps what is freed
        r0 = harness.rss_kb(big.p.pid)
        socks = harness.unread_resp_clients(big.resp)
        time.sleep(0.5)
        grown = (harness.rss_kb(big.p.pid) - r0) / 1024.0
        for c in socks:
            c.close()
        check("50 clients pipelining COMMAND without reading: at most ~1.5 MB each "
              "(grew %.0f MB)" % grown, grown < 50 * 1.5, grown)
        # Their buffers go back once they close: 60 MB stayed when a
        # connection's replies grew past the cap.  Up to ~35 MB may stay in
        # glibc's arenas, for the next clients: a second wave of the same
        # clients reuses it, so what stays after it is no more than after
        # the first (a leak would add a wave's worth).
        def settled():
            left = []
            harness.wait_until(
                lambda: left.append((harness.rss_kb(big.p.pid) - r0) / 1024.0) or left[-1] < 16, 5)
            return left[-1]
        first = settled()
        check("and once they closed, resident memory is within 48 MB of before "
              "(+%.1f MB)" % first, first < 48, first)
        for c in harness.unread_resp_clients(big.resp):
            c.close()
        second = settled()
        check("a second wave of them leaves no more behind (+%.1f MB, then +%.1f MB)"
              % (first, second), second < first + 8, (first, second))

    # ---- CL.THROTTLE's keys live under --resp-store-bytes: a flood of
    # them evicts each other, never a rule's counter ----
    st = Node("state", "--store-bytes", "4194304", "--resp-store-bytes", "1048576")
    for i in range(5):
        st.cli("SLUICE.CHECK", "api", "1", "1", "user", "victim")
    out = ints(st.cli("SLUICE.CHECK", "api", "1", "1", "user", "victim"))
    check("a rule's client is held at its limit", out.startswith("1 5 0"), out)
    flood = socket.create_connection(("127.0.0.1", st.resp), 5)
    flood.settimeout(60)
    n_keys, got = 200000, 0
    batch = 10000
    for b in range(0, n_keys, batch):
        flood.sendall(b"".join(b"CL.THROTTLE k%d 10 10 3600\r\n" % i
                               for i in range(b, b + batch)))
        want = (b + batch) * 5  # five integers a reply
        while got < want:
            chunk = flood.recv(1 << 20)
            if not chunk:
                break
            got += chunk.count(b":")
    flood.close()
    check("200,000 CL.THROTTLE keys answered", got >= n_keys * 5, got)
    out = ints(st.cli("SLUICE.CHECK", "api", "1", "1", "user", "victim"))
    check("after 200,000 CL.THROTTLE keys the rule's client is still held",
          out.startswith("1 5 0"), out)
    m = st.get("/metrics")[1]
    ev = harness.metric(m, "sluice_resp_store_evicted_total")
    keys = harness.metric(m, "sluice_resp_store_keys")
    check("the commands' store evicted at its cap (%s evicted, %s keys)" % (ev, keys),
          ev and ev > 0 and keys and keys < n_keys, m[-1500:])
    check("the rules' store evicted nothing",
          harness.metric(m, "sluice_store_evicted_total") == 0, m[-1500:])

    # ---- every redis-cli example of docs/resp.md and README.md ----
    docs = Node("docs", rules_path=os.path.join(SRC, "examples", "rules"))
    for doc in ("docs/resp.md", "README.md"):
        text = open(os.path.join(SRC, doc)).read()
        blocks = re.findall(r'<!-- resp-test: expect (.*?) -->\s*```sh\n(.*?)```', text, re.S)
        marked = sum(b.count("redis-cli -p") for _, b in blocks)
        check("%s: every redis-cli example is tested" % doc,
              marked == text.count("redis-cli -p") and (blocks or doc == "README.md"),
              "%d of %d" % (marked, text.count("redis-cli -p")))
        for want, cmd in blocks:
            cmd = cmd.replace("-p 6380", "-p %d" % docs.resp)
            p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=20)
            out = " ".join(p.stdout.split())
            check("%s example: %s" % (doc, cmd.strip()), want in out, out)

    harness.check_exit([node, n1, n2, docs, rt, big, st])
finally:
    harness.kill_all()
sys.exit(harness.failed)
PY
