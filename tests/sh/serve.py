"""tests/sh/serve.py - what the Python-driven tests of `sluice serve` on
Redis share (test_serve_redis.sh, test_serve_redis_cluster.sh): PASS and
FAIL lines, free loopback ports, a daemon started on a port it picks, its
HTTP calls, and the killing of everything a test started.  (It lives in
tests/sh/ so that CTest does not take it for a test.)"""
import json, re, signal, socket, subprocess, time, urllib.error, urllib.request

failed = 0
procs = []  # every process a test started, killed by cleanup()


def check(name, cond, why=""):
    global failed
    if cond:
        print("PASS", name, flush=True)
    else:
        failed = 1
        print("FAIL", name + ":", why, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


ALGS = ["token_bucket", "gcra", "leaky_bucket", "fixed_window",
        "sliding_log", "sliding_window", "stepped_window"]


def rules_file(tmp, limit, extra=""):
    """TMP/rules.yaml, domain "test": per algorithm a rule of `limit`
    requests per hour keyed by the algorithm's name, then extra rules."""
    path = tmp + "/rules.yaml"
    with open(path, "w") as f:
        f.write("domain: test\ndescriptors:\n")
        for a in ALGS:
            f.write("  - key: %s\n    rate_limit: {algorithm: %s, unit: hour, "
                    "requests_per_unit: %d}\n" % (a, a, limit))
        f.write(extra)
    return path


def start(argv, log, **kw):
    """Popen(argv) with stderr to log, killed by cleanup()."""
    p = subprocess.Popen(argv, stderr=open(log, "w"), **kw)
    procs.append(p)
    return p


def listening_port(log, what):
    """The port a daemon printed on stderr (waits up to 5 s)."""
    for _ in range(200):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(log).read())
        if m:
            return int(m.group(1))
        time.sleep(0.025)
    raise SystemExit("%s did not start: %s" % (what, open(log).read()))


class Node:
    """`sluice serve --rules RULES --listen 127.0.0.1:0 FLAGS...`, logging
    to TMP/NAME.log; requests are on domain "test"."""

    def __init__(self, sluice, tmp, name, rules, *flags):
        self.name = name
        self.log = "%s/%s.log" % (tmp, name)
        self.p = start([sluice, "serve", "--rules", rules, "--listen",
                        "127.0.0.1:0"] + list(flags), self.log)
        self.port = listening_port(self.log, "node " + name)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def post(self, descriptors, hits=None):
        """POST /v1/check: (status, body dict, headers, seconds)."""
        body = {"domain": "test", "descriptors": descriptors}
        if hits is not None:
            body["hits"] = hits
        req = urllib.request.Request(self.url("/v1/check"), json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, data, hdrs = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, data, hdrs = e.code, e.read(), e.headers
        return status, json.loads(data or b"{}"), hdrs, time.monotonic() - t0

    def check(self, key, value, hits=None):
        return self.post([{"entries": [{"key": key, "value": value}]}], hits)

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url(path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name):
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def store_status(self):
        return json.loads(self.get("/readyz")[1]).get("store_status")

    def wait_status(self, want, secs=8):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if self.store_status() == want:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(15)
        except subprocess.TimeoutExpired:
            return None


def cleanup():
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
    for p in procs:
        try:
            p.wait(5)
        except Exception:
            pass
